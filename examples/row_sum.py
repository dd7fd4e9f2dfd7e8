"""Row sums ``out[r] = sum(x[r, :])``: one program per row, looping over blocks of columns.

Each program accumulates its row ``BLOCK_SIZE`` columns at a time in float32 (``--dtype
bfloat16``/``float16`` inputs are upcast after the load; the tail of the last block is masked and
loaded as 0), then stores the one sum, rounded to the output's dtype. The input may be a strided
view: rows are addressed with its own row stride.

Buggy variant (``--bug``):

* ``grid_too_large``: the launcher's grid ``(rows, cdiv(cols, BLOCK_SIZE))`` was copied from an
  element-wise kernel, but every program still sums its whole row. Programs ``(r, 0)``,
  ``(r, 1)``, ... all compute and store ``out[r]``: a write-write race between programs of one
  launch. Here they all store the same value, so the result looks right; a kernel that changes
  later to make the programs split the row (each summing its own block) would silently lose all
  but one partial sum.

Run::

    python examples/row_sum.py --rows 37 --cols 300
    tritonkit check -- python examples/row_sum.py --dtype bfloat16
    tritonkit check -- python examples/row_sum.py --bug grid_too_large

(Without a GPU, run bfloat16 under ``tritonkit check``: Triton's own CPU interpreter does bfloat16
arithmetic on the raw bit patterns.)
"""
from __future__ import annotations

import argparse
import os

import torch

if __name__ == "__main__" and not torch.cuda.is_available():
    # No GPU: run in Triton's CPU interpreter (must be set before the kernels are decorated).
    os.environ.setdefault("TRITON_INTERPRET", "1")

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

BUGS = ("none", "grid_too_large")
DTYPES = ("float32", "bfloat16", "float16")


@triton.jit
def _row_sum_kernel(X_ptr, X_row_stride, Out_ptr, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    acc = tl.zeros((BLOCK_SIZE,), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        x = tl.load(X_ptr + row * X_row_stride + cols, mask=cols < n_cols, other=0.0)
        acc += x.to(tl.float32)
    total = tl.sum(acc, axis=0)
    tl.store(Out_ptr + row, total.to(Out_ptr.dtype.element_ty))  # REPORTED: grid_too_large


def row_sum(x: torch.Tensor, block_size: int = 128, bug: str = "none") -> torch.Tensor:
    """Sum each row of a 2-D tensor.

    Args:
        x: ``(n_rows, n_cols)`` float16/bfloat16/float32 tensor whose last dimension has stride 1
            (rows may be strided, e.g. ``wide[:, :n_cols]``).
        block_size: columns per loop step (a power of two).
        bug: ``"none"`` for the correct launch, or one of the buggy variants in :data:`BUGS`.

    Returns:
        a new ``(n_rows,)`` tensor of ``x``'s dtype (the sums are accumulated in float32).

    Raises:
        ValueError: if ``x`` is not 2-D, its last dimension is not contiguous, or ``bug`` is unknown.
    """
    if bug not in BUGS:
        raise ValueError(f"unknown bug {bug!r}; choose one of {BUGS}")
    if x.dim() != 2 or x.stride(1) != 1:
        raise ValueError(f"x must be 2-D with a contiguous last dimension, got shape {tuple(x.shape)} "
                         f"strides {x.stride()}")
    n_rows, n_cols = x.shape
    out = torch.empty(n_rows, dtype=x.dtype, device=x.device)
    grid = (n_rows,)
    if bug == "grid_too_large":
        grid = (n_rows, triton.cdiv(n_cols, block_size))  # BUG: grid_too_large
    _row_sum_kernel[grid](x, x.stride(0), out, n_cols, BLOCK_SIZE=block_size)
    return out


def main(argv=None) -> float:
    """Run :func:`row_sum` on random data, compare with ``x.float().sum(-1)`` and print the max error.

    The input is the first ``--cols`` columns of a ``(rows, cols + 5)`` tensor.

    Args:
        argv: command-line arguments (None: ``sys.argv[1:]``).

    Returns:
        the max absolute error against the float32 row sums rounded to the input's dtype.

    Raises:
        AssertionError: if the correct version (``--bug none``) misses the reference by more than
            the dtype's tolerance (the buggy variant only prints its error: finding it is
            tritonkit's job).
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bug", choices=BUGS, default="none")
    parser.add_argument("--dtype", choices=DTYPES, default="float32")
    parser.add_argument("--rows", type=int, default=37)
    parser.add_argument("--cols", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = getattr(torch, args.dtype)
    gen = torch.Generator().manual_seed(args.seed)
    wide = torch.randn(args.rows, args.cols + 5, generator=gen).to(device, dtype)
    x = wide[:, : args.cols]
    out = row_sum(x, bug=args.bug)
    ref = x.float().sum(dim=-1).to(dtype)
    err = (out.float() - ref.float()).abs().max().item()
    print(f"row_sum rows={args.rows} cols={args.cols} dtype={args.dtype} bug={args.bug}: max abs error {err:.3g}")
    if args.bug == "none":
        torch.testing.assert_close(out, ref)
    return err


if __name__ == "__main__":
    main()
