"""How much slower is a kernel instrumented by ``tritonkit check --gpu``? Kernel time, native against
instrumented, on the GPU.

Kernels: vector add of 2**28 fp32 (BLOCK 1024), a row softmax of 32768x4096 fp32 (one row per
program), the bf16 matmul of ``examples/matmul.py`` at 8192^3 with its first autotune config (the
kernel as written, no autotuning). Each is timed with ``triton.testing.do_bench`` (median ms) as
written and as rewritten by :func:`tritonkit.check.gpu.instrument.instrumented` (every load and
store guarded against its argument's storage; the record buffer allocated once), on the same
inputs; the outputs are compared (they must be equal: the guard masks no in-bounds lane). The
instrumented mode's per-launch synchronization (reading the record counter) is not in these
figures: it is a host cost per launch, reported apart.

Usage::

    python benchmarks/check_gpu.py [--quick] [--json FILE]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from typing import Dict, List, Optional

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


def _extra(inst, named: Dict[str, torch.Tensor], rec: torch.Tensor) -> dict:
    out = {"_tk_rec": rec, "_tk_cap": 4096}
    for root in inst.roots:
        st = named[root].untyped_storage()
        out[f"_tk_lo_{root}"] = st.data_ptr()
        out[f"_tk_hi_{root}"] = st.data_ptr() + st.nbytes()
    return out


def case(name: str, fn, grid, args: list, names: List[str], meta: dict, outputs: List[int]) -> dict:
    """Time ``fn`` native and instrumented on ``args`` (``names``: the kernel's parameter names of the
    positional arguments); ``outputs``: indices of the arguments written."""
    from tritonkit.check.gpu import device
    from tritonkit.check.gpu.instrument import instrumented
    named = {n: a for n, a in zip(names, args) if isinstance(a, torch.Tensor)}
    inst = instrumented(fn, frozenset(named))
    rec = torch.zeros(1 + 4096 * device.RECORD, dtype=torch.int64, device="cuda")
    extra = _extra(inst, named, rec)

    def native():
        fn[grid](*args, **meta)

    def checked():
        inst.jit[grid](*args, **meta, **extra)
    native()
    want = [args[i].clone() for i in outputs]
    checked()
    torch.cuda.synchronize()
    same = all(torch.equal(args[i], w) for i, w in zip(outputs, want))
    t_native = triton.testing.do_bench(native)
    t_checked = triton.testing.do_bench(checked)
    n = 200
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(n):
        rec[0].item()
    sync_ms = (time.perf_counter() - start) / n * 1e3
    return {"kernel": name, "native_ms": t_native, "instrumented_ms": t_checked, "ratio": t_checked / t_native,
            "outputs_equal": same, "records": int(rec[0].item()), "read_counter_ms": sync_ms,
            "sites": len(inst.sites), "unchecked_lines": inst.skipped}


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (a smoke test)")
    ap.add_argument("--json", help="write the results as JSON")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("check_gpu.py needs a CUDA GPU", file=sys.stderr)
        return 2
    import matmul as mm
    rows = []
    n = 1 << (20 if args.quick else 28)
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out = torch.empty_like(x)
    rows.append(case(f"vector add 2^{int(math.log2(n))} fp32", add_kernel, (triton.cdiv(n, 1024),), [x, y, out, n],
                     ["x_ptr", "y_ptr", "out_ptr", "n"], {"BLOCK": 1024}, [2]))
    del x, y, out
    r, c = (1024, 4096) if args.quick else (32768, 4096)
    inp = torch.randn(r, c, device="cuda")
    res = torch.empty_like(inp)
    rows.append(case(f"softmax {r}x{c} fp32", softmax_kernel, (r,), [res, inp, c, c],
                     ["out_ptr", "in_ptr", "n_cols", "stride"], {"BLOCK": c}, [0]))
    del inp, res
    size = 1024 if args.quick else 8192
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
    rows.append(case(f"matmul {size}^3 bf16 (examples/matmul.py, first config)", kernel, grid, positional,
                     [n for n in names if n in values], meta, [names.index("c_ptr")]))
    info = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
            "date": time.strftime("%Y-%m-%d")}
    print(f"# tritonkit check --gpu: kernel time native against instrumented; {info}")
    print(f"{'kernel':56} {'native ms':>10} {'instrumented ms':>16} {'ratio':>7} {'equal':>6}")
    for row in rows:
        print(f"{row['kernel']:56} {row['native_ms']:10.3f} {row['instrumented_ms']:16.3f} {row['ratio']:7.2f}x "
              f"{str(row['outputs_equal']):>6}")
    gm = math.exp(sum(math.log(r["ratio"]) for r in rows) / len(rows))
    print(f"geometric mean instrumented/native: {gm:.2f}x (goal <= 1.5x); reading the record counter after a launch: "
          f"{rows[0]['read_counter_ms']:.3f} ms")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"machine": info, "results": rows, "geomean_ratio": gm}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
