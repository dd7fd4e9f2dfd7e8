"""Small kernels the engine tests launch (each with a marker comment on the line a test expects)."""
import inspect
import re

import triton
import triton.language as tl


@triton.jit
def copy_rows(x_ptr, out_ptr, stride_x, ncols, NCOL: tl.constexpr):
    r = tl.program_id(0)
    c = tl.arange(0, NCOL)
    v = tl.load(x_ptr + r * stride_x + c, mask=c < ncols, other=0.0)  # LINE: copy_rows.load
    tl.store(out_ptr + r * NCOL + c, v)


@triton.jit
def shifted_copy(x_ptr, out_ptr, n, SHIFT: tl.constexpr, B: tl.constexpr):
    offs = tl.program_id(0) * B + tl.arange(0, B)
    v = tl.load(x_ptr + offs - SHIFT, mask=offs < n)  # LINE: shifted_copy.load
    tl.store(out_ptr + offs, v, mask=offs < n)


@triton.jit
def _load_block(p, offs):
    return tl.load(p + offs)  # LINE: _load_block.load


@triton.jit
def calls_helper(x_ptr, out_ptr, B: tl.constexpr):
    offs = tl.program_id(0) * B + tl.arange(0, B)
    tl.store(out_ptr + offs, _load_block(x_ptr, offs))  # LINE: calls_helper.call


@triton.jit
def histogram(idx_ptr, cnt_ptr, n, B: tl.constexpr):
    offs = tl.program_id(0) * B + tl.arange(0, B)
    i = tl.load(idx_ptr + offs, mask=offs < n)
    tl.atomic_add(cnt_ptr + i, 1, mask=offs < n)  # LINE: histogram.atomic


@triton.jit
def unmasked_store(out_ptr, value, B: tl.constexpr):
    offs = tl.program_id(0) * B + tl.arange(0, B)
    tl.store(out_ptr + offs, value)  # LINE: unmasked_store.store


@triton.jit
def spin_on_flag(flag_ptr):
    while tl.load(flag_ptr) == 0:  # LINE: spin_on_flag.loop
        pass


@triton.jit
def uses_inline_asm(x_ptr, B: tl.constexpr):
    offs = tl.arange(0, B)
    x = tl.load(x_ptr + offs)
    y = tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], dtype=tl.int32, is_pure=True,  # LINE: asm
                                  pack=1)
    tl.store(x_ptr + offs, y)


@triton.jit
def grid2d_copy(x_ptr, out_ptr, M, N, stride_m, BM: tl.constexpr, BN: tl.constexpr):
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    mask = (rm[:, None] < M) & (rn[None, :] <= N)  # off by one in N
    v = tl.load(x_ptr + rm[:, None] * stride_m + rn[None, :], mask=mask)  # LINE: grid2d_copy.load
    tl.store(out_ptr + rm[:, None] * N + rn[None, :], v, mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def gather_pointer_table(table_ptr, out_ptr, B: tl.constexpr):
    # a pointer loaded as an integer and used: points into no argument
    addr = tl.load(table_ptr)
    p = addr.to(tl.pointer_type(tl.float32))
    v = tl.load(p + tl.arange(0, B))  # LINE: gather_pointer_table.load
    tl.store(out_ptr + tl.arange(0, B), v)


@triton.autotune(configs=[triton.Config({"B": 16}), triton.Config({"B": 32}), triton.Config({"B": 64})],
                 key=["n"])
@triton.jit
def tuned_scale(x_ptr, out_ptr, n, B: tl.constexpr):
    offs = tl.program_id(0) * B + tl.arange(0, B)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(out_ptr + offs, x * 2, mask=offs < n + (B - 16))  # LINE: tuned_scale.store


@triton.heuristics(values={"B": lambda args: 64 if args["n"] > 100 else 16})
@triton.jit
def heuristic_scale(x_ptr, out_ptr, n, B: tl.constexpr):
    offs = tl.program_id(0) * B + tl.arange(0, B)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(out_ptr + offs, x * 3, mask=offs < n)


def kernel_line(kernel, marker: str) -> int:
    """The 1-based file line of ``kernel``'s (a ``@triton.jit`` function's) source line that carries
    ``# LINE: marker``.

    Raises:
        StopIteration: no line of the kernel carries the marker.
    """
    src, start = inspect.getsourcelines(kernel.fn)
    return start + next(i for i, text in enumerate(src) if f"# LINE: {marker}" in text)


def line_of(marker: str) -> int:
    """The 1-based line in this file carrying ``# LINE: marker``."""
    with open(__file__) as fh:
        for i, text in enumerate(fh, 1):
            m = re.search(r"# LINE: (\S+)", text)
            if m and m.group(1) == marker:
                return i
    raise KeyError(marker)


@triton.jit
def desc_copy(in_desc, out_desc, BM: tl.constexpr, BN: tl.constexpr):
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    tile = in_desc.load([pm * BM, pn * BN])  # LINE: desc_copy.load
    out_desc.store([pm * BM, pn * BN], tile)


if hasattr(tl, "make_block_ptr") and "removed" not in (tl.make_block_ptr.__doc__ or ""):
    @triton.jit
    def block_ptr_copy(x_ptr, out_ptr, M, N, stride_m, M_DECLARED, BM: tl.constexpr, BN: tl.constexpr):
        pm = tl.program_id(0)
        src = tl.make_block_ptr(x_ptr, shape=(M_DECLARED, N), strides=(stride_m, 1), offsets=(pm * BM, 0),
                                block_shape=(BM, BN), order=(1, 0))
        dst = tl.make_block_ptr(out_ptr, shape=(M, N), strides=(N, 1), offsets=(pm * BM, 0),
                                block_shape=(BM, BN), order=(1, 0))
        tile = tl.load(src, boundary_check=(0, 1))  # LINE: block_ptr_copy.load
        tl.store(dst, tile, boundary_check=(0, 1))
else:
    block_ptr_copy = None
