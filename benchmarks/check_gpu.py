"""How much slower is a kernel instrumented by ``tritonkit check --gpu``? Kernel time, native against
instrumented, on the GPU.

Kernels (``--only`` names in brackets):

* [add] vector add of 2**28 fp32 (BLOCK 1024);
* [softmax] a row softmax of 32768x4096 fp32 (one row per program);
* [matmul] the bf16 matmul of ``examples/matmul.py`` at 8192^3 with its first autotune config (the
  kernel as written, no autotuning);
* [attention] a causal attention forward (:func:`attention_fwd_kernel`, this file): q, k, v, o of
  shape (batch 4, heads 32, seq 4096, head dim 128) bf16, fp32 accumulation, online softmax,
  BLOCK_M=128, BLOCK_N=64, one program per (query block, batch*head); the key loop runs only up to
  the diagonal, masked on the diagonal blocks. Its output must also be within bf16 tolerance
  (``|o - ref| <= 2e-2 + 2e-2 |ref|``) of ``torch.nn.functional.scaled_dot_product_attention(...,
  is_causal=True)``, natively and instrumented.

Each is timed with ``triton.testing.do_bench`` (median ms) as written and as rewritten by
:func:`tritonkit.check.gpu.instrument.instrumented` (every load and store guarded against its
argument's storage; the record buffer allocated once), on the same inputs; the outputs are compared
(they must be equal: the guard masks no in-bounds lane). The geometric mean of the ratios is over
the kernels run. The instrumented mode's per-launch synchronization (reading the record counter) is
not in these figures: it is a host cost per launch, reported apart.

``--quick`` runs small sizes (a smoke test: 2**20 add, 1024x4096 softmax, 1024^3 matmul, attention
1x8x1024x128). Without CUDA the script says so and exits with status 2.

Usage::

    python benchmarks/check_gpu.py [--quick] [--only NAME[,NAME...]] [--json FILE]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from typing import Callable, Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples"))

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


@triton.jit
def softmax_kernel(out_ptr, in_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * stride + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    tl.store(out_ptr + row * stride + cols, e / tl.sum(e, axis=0), mask=mask)


@triton.jit
def attention_fwd_kernel(q_ptr, k_ptr, v_ptr, o_ptr, sm_scale,
                         stride_qz, stride_qh, stride_qm, stride_qd,
                         stride_kz, stride_kh, stride_kn, stride_kd,
                         stride_vz, stride_vh, stride_vn, stride_vd,
                         stride_oz, stride_oh, stride_om, stride_od,
                         H, N_CTX,
                         HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Causal attention forward ``o = softmax(q k^T * sm_scale + causal mask) v`` for one block of
    ``BLOCK_M`` queries of one (batch, head): program ``(query block, batch * H + head)``.

    q, k, v, o: (batch, H, N_CTX, HEAD_DIM), any strides (in elements), one dtype (bf16 on the
    GPU); scores and the running softmax in fp32 (exp2, with ``sm_scale * log2(e)``), ``p`` rounded
    to v's dtype for the second dot, o stored in o's dtype. Keys before the query block
    (``[0, start_m * BLOCK_M)``) need no mask; those of the diagonal block are masked to
    ``key <= query`` and ``key < N_CTX``. Requires ``BLOCK_M % BLOCK_N == 0``.
    """
    start_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    off_z = (off_hz // H).to(tl.int64)
    off_h = (off_hz % H).to(tl.int64)
    q_base = q_ptr + off_z * stride_qz + off_h * stride_qh
    k_base = k_ptr + off_z * stride_kz + off_h * stride_kh
    v_base = v_ptr + off_z * stride_vz + off_h * stride_vh
    o_base = o_ptr + off_z * stride_oz + off_h * stride_oh
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = offs_m < N_CTX
    q = tl.load(q_base + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qd, mask=row_ok[:, None], other=0.0)
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.4426950408889634  # log2(e): exp(x) = exp2(x * log2(e))
    diag = start_m * BLOCK_M
    # key blocks strictly before the diagonal: every key is visible to every query of the block
    for start_n in range(0, diag, BLOCK_N):
        cols = start_n + offs_n
        k = tl.load(k_base + cols[:, None] * stride_kn + offs_d[None, :] * stride_kd)
        qk = tl.dot(q, tl.trans(k)) * qk_scale
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_base + cols[:, None] * stride_vn + offs_d[None, :] * stride_vd)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_new
    # the diagonal: key blocks of the query block's own positions, masked (causal and the sequence's end)
    end = tl.minimum(diag + BLOCK_M, N_CTX)
    for start_n in range(diag, end, BLOCK_N):
        cols = start_n + offs_n
        col_ok = cols < N_CTX
        k = tl.load(k_base + cols[:, None] * stride_kn + offs_d[None, :] * stride_kd, mask=col_ok[:, None],
                    other=0.0)
        qk = tl.dot(q, tl.trans(k)) * qk_scale
        qk = tl.where((offs_m[:, None] >= cols[None, :]) & col_ok[None, :], qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))  # finite: key diag <= every query of the block
        p = tl.math.exp2(qk - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_base + cols[:, None] * stride_vn + offs_d[None, :] * stride_vd, mask=col_ok[:, None],
                    other=0.0)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_new
    acc = acc / l_i[:, None]
    tl.store(o_base + offs_m[:, None] * stride_om + offs_d[None, :] * stride_od, acc.to(o_ptr.dtype.element_ty),
             mask=row_ok[:, None])


ATTN_BLOCK_M, ATTN_BLOCK_N = 128, 64


def attention_args(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor,
                   block_m: int = ATTN_BLOCK_M, block_n: int = ATTN_BLOCK_N) -> tuple:
    """``(grid, positional arguments, parameter names, meta)`` of :func:`attention_fwd_kernel` for
    q, k, v, o of shape (batch, heads, seq, head dim) (one dtype, same shape), scale 1/sqrt(head dim)."""
    z, h, n, d = q.shape
    assert k.shape == v.shape == o.shape == q.shape and block_m % block_n == 0
    args = [q, k, v, o, 1.0 / math.sqrt(d), *q.stride(), *k.stride(), *v.stride(), *o.stride(), h, n]
    names = list(attention_fwd_kernel.arg_names[:len(args)])
    meta = {"HEAD_DIM": d, "BLOCK_M": block_m, "BLOCK_N": block_n}
    if q.is_cuda:
        meta.update(num_warps=8, num_stages=3)
    return (triton.cdiv(n, block_m), z * h), args, names, meta


def case(name: str, fn, grid, args: list, names: List[str], meta: dict, outputs: List[int],
         check: Optional[Callable[[List[torch.Tensor]], dict]] = None) -> dict:
    """Time ``fn`` native and instrumented on ``args`` (``names``: the kernel's parameter names of the
    positional arguments); ``outputs``: indices of the arguments written. ``check``, where given, is
    called on the native outputs and on the instrumented ones (the written arguments, in ``outputs``
    order) and returns a dict with an ``"ok"`` entry (the outputs are right against a reference) and
    any other figures; the row gets them as ``reference_native`` and ``reference_instrumented``."""
    from tritonkit.check.gpu import device
    from tritonkit.check.gpu import instrument
    from tritonkit.check.gpu.instrument import instrumented
    named = {n: a for n, a in zip(names, args) if isinstance(a, torch.Tensor)}
    inst = instrumented(fn, frozenset(named))
    rec = torch.zeros(device.HEADER + 4096 * device.RECORD, dtype=torch.int64, device="cuda")
    extra = instrument.extra_arguments(inst, named, rec, 4096)

    def native():
        fn[grid](*args, **meta)

    def checked():
        inst.jit[grid](*args, **meta, **extra)
    native()
    want = [args[i].clone() for i in outputs]
    checked()
    torch.cuda.synchronize()
    same = all(torch.equal(args[i], w) for i, w in zip(outputs, want))
    reference = {}
    if check is not None:
        reference = {"reference_native": check(want), "reference_instrumented": check([args[i] for i in outputs])}
    t_native = triton.testing.do_bench(native)
    t_checked = triton.testing.do_bench(checked)
    n = 200
    torch.cuda.synchronize()
    start = time.perf_counter()
    header = device.HEADER
    for _ in range(n):  # what the runtime reads after each launch: the header (slots taken, counted lanes)
        rec[:header].tolist()
    sync_ms = (time.perf_counter() - start) / n * 1e3
    return {"kernel": name, "native_ms": t_native, "instrumented_ms": t_checked, "ratio": t_checked / t_native,
            "outputs_equal": same, "records": int(rec[0].item()), "counted_lanes": int(rec[1:header].sum().item()),
            "read_counter_ms": sync_ms,
            "sites": len(inst.sites), "unchecked_lines": inst.skipped, **reference}


def _add(quick: bool) -> dict:
    n = 1 << (20 if quick else 28)
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out = torch.empty_like(x)
    return case(f"vector add 2^{int(math.log2(n))} fp32", add_kernel, (triton.cdiv(n, 1024),), [x, y, out, n],
                ["x_ptr", "y_ptr", "out_ptr", "n"], {"BLOCK": 1024}, [2])


def _softmax(quick: bool) -> dict:
    r, c = (1024, 4096) if quick else (32768, 4096)
    inp = torch.randn(r, c, device="cuda")
    res = torch.empty_like(inp)
    return case(f"softmax {r}x{c} fp32", softmax_kernel, (r,), [res, inp, c, c],
                ["out_ptr", "in_ptr", "n_cols", "stride"], {"BLOCK": c}, [0])


def _matmul(quick: bool) -> dict:
    import matmul as mm
    size = 1024 if quick else 8192
    a = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    c_ = torch.empty(size, size, device="cuda", dtype=torch.bfloat16)
    kernel = mm._matmul_kernel.fn if hasattr(mm._matmul_kernel, "configs") else mm._matmul_kernel
    while not hasattr(kernel, "arg_names"):  # heuristics/autotune wrappers: the JITFunction under them
        kernel = kernel.fn
    cfg = mm._matmul_kernel.configs[0] if hasattr(mm._matmul_kernel, "configs") else None
    meta = dict(cfg.kwargs) if cfg else {}
    if cfg is not None:
        meta.update(num_warps=cfg.num_warps, num_stages=cfg.num_stages)
    grid = (triton.cdiv(size, meta["BLOCK_M"]) * triton.cdiv(size, meta["BLOCK_N"]),)
    names = list(kernel.arg_names)
    values = {"a_ptr": a, "b_ptr": b, "c_ptr": c_, "M": size, "N": size, "K": size, "stride_am": a.stride(0),
              "stride_ak": a.stride(1), "stride_bk": b.stride(0), "stride_bn": b.stride(1),
              "stride_cm": c_.stride(0), "stride_cn": c_.stride(1)}
    positional = [values[n] for n in names if n in values]
    return case(f"matmul {size}^3 bf16 (examples/matmul.py, first config)", kernel, grid, positional,
                [n for n in names if n in values], meta, [names.index("c_ptr")])


#: the attention output's tolerance against SDPA (bf16: 8 significant bits; both accumulate in fp32)
ATTN_ATOL, ATTN_RTOL = 2e-2, 2e-2


def _attention(quick: bool) -> dict:
    z, h, n, d = (1, 8, 1024, 128) if quick else (4, 32, 4096, 128)
    gen = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(z, h, n, d, device="cuda", dtype=torch.bfloat16, generator=gen) for _ in range(3))
    o = torch.empty_like(q)
    grid, args, names, meta = attention_args(q, k, v, o)
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True).float()

    def check(outs: List[torch.Tensor]) -> dict:
        err = (outs[0].float() - ref).abs()
        excess = (err - (ATTN_ATOL + ATTN_RTOL * ref.abs())).max().item()
        return {"ok": bool(excess <= 0 and torch.isfinite(outs[0]).all().item()), "max_abs_err": err.max().item(),
                "atol": ATTN_ATOL, "rtol": ATTN_RTOL, "against": "torch SDPA is_causal=True, bf16"}
    return case(f"causal attention fwd {z}x{h}x{n}x{d} bf16", attention_fwd_kernel, grid, args, names, meta,
                [names.index("o_ptr")], check)


#: ``--only`` names -> the case (a function of ``--quick`` returning the row), in the order they run
CASES: Dict[str, Callable[[bool], dict]] = {"add": _add, "softmax": _softmax, "matmul": _matmul,
                                            "attention": _attention}


def _only(text: Optional[str]) -> List[str]:
    """The case names of ``--only`` (comma-separated; None: all), in :data:`CASES` order.

    Raises:
        ValueError: an unknown or no name.
    """
    if text is None:
        return list(CASES)
    names = [t.strip() for t in text.split(",") if t.strip()]
    unknown = [t for t in names if t not in CASES]
    if unknown or not names:
        raise ValueError(f"unknown case {', '.join(unknown) or '(none given)'}; choose from {', '.join(CASES)}")
    return [c for c in CASES if c in names]


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (a smoke test)")
    ap.add_argument("--only", metavar="NAME[,NAME]",
                    help=f"run only these cases, comma-separated, of: {', '.join(CASES)} (default: all)")
    ap.add_argument("--json", help="write the results as JSON")
    args = ap.parse_args(argv)
    try:
        selected = _only(args.only)
    except ValueError as e:
        ap.error(f"--only: {e}")
    if not torch.cuda.is_available():
        print("check_gpu.py needs a CUDA GPU (torch.cuda.is_available() is False): run it on a GPU machine",
              file=sys.stderr)
        return 2
    rows = []
    for name in selected:
        rows.append(dict(CASES[name](args.quick), case=name))
        torch.cuda.empty_cache()
    info = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
            "date": time.strftime("%Y-%m-%d")}
    print(f"# tritonkit check --gpu: kernel time native against instrumented; {info}")
    print(f"{'kernel':56} {'native ms':>10} {'instrumented ms':>16} {'ratio':>7} {'equal':>6} {'reference':>10}")
    for row in rows:
        ref = "-"
        if "reference_native" in row:
            both = (row["reference_native"], row["reference_instrumented"])
            ref = f"{'ok' if all(r['ok'] for r in both) else 'WRONG'} {max(r['max_abs_err'] for r in both):.0e}"
        print(f"{row['kernel']:56} {row['native_ms']:10.3f} {row['instrumented_ms']:16.3f} {row['ratio']:7.2f}x "
              f"{str(row['outputs_equal']):>6} {ref:>10}")
    gm = math.exp(sum(math.log(r["ratio"]) for r in rows) / len(rows))
    print(f"geometric mean instrumented/native over {len(rows)} kernel(s): {gm:.2f}x (goal <= 1.5x); reading the "
          f"record counter after a launch: {rows[0]['read_counter_ms']:.3f} ms")
    if any("reference_native" in r for r in rows):
        print(f"reference: max abs error against SDPA, ok where |o - ref| <= {ATTN_ATOL} + {ATTN_RTOL} |ref| "
              "natively and instrumented")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"machine": info, "cases": selected, "quick": args.quick, "results": rows,
                       "geomean_ratio": gm}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
