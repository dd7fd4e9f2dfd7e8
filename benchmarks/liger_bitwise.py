"""Liger-Kernel's kernels on the GPU and in tritonkit's checked interpreter, bit for bit: the same
inputs (CUDA tensors), each op's forward and backward, every output compared element by element.

For each op and output it prints how many elements differ and by how many units in the last place
(ulp, in the output's own type) at most, in three modes: ``both`` (Triton's default
``enable_fp_fusion``: the compiler contracts a multiply and an add into one fma, and the interpreter
models it), ``neither`` (fusion off on both sides, ``TRITON_DEFAULT_FP_FUSION=0``), ``gpu_only``
(the GPU fuses, the interpreter does not: tritonkit before it modelled contraction). What differs
in ``neither`` is not contraction: libdevice's transcendental functions on the GPU are not correctly
rounded, and reductions add in another order. Needs a CUDA GPU and Liger-Kernel.

Usage::

    python benchmarks/liger_bitwise.py [--ops geglu,swiglu,rms_norm,layer_norm] [--modes both,neither,gpu_only]
        [--json FILE]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Callable, Dict, List, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _machine import gpu_machine  # noqa: E402


def _ops() -> Dict[str, Tuple[Callable, Callable]]:
    """name -> (make inputs on a device, run forward and backward: returns the outputs by name)."""
    import torch

    def geglu_inputs(dev):
        g = torch.Generator().manual_seed(0)
        return [torch.randn(4096, 4096, generator=g, dtype=torch.bfloat16).to(dev) for _ in range(3)]

    def geglu(a, b, dc):
        from liger_kernel.ops.geglu import LigerGELUMulFunction
        a, b = a.clone().requires_grad_(), b.clone().requires_grad_()
        c = LigerGELUMulFunction.apply(a, b)
        c.backward(dc)
        return {"c": c, "da": a.grad, "db": b.grad}

    def swiglu(a, b, dc):
        from liger_kernel.ops.swiglu import LigerSiLUMulFunction
        a, b = a.clone().requires_grad_(), b.clone().requires_grad_()
        c = LigerSiLUMulFunction.apply(a, b)
        c.backward(dc)
        return {"c": c, "da": a.grad, "db": b.grad}

    def norm_inputs(dev):
        g = torch.Generator().manual_seed(1)
        x = torch.randn(4096, 2048, generator=g, dtype=torch.bfloat16)
        w = torch.randn(2048, generator=g, dtype=torch.bfloat16)
        bias = torch.randn(2048, generator=g, dtype=torch.bfloat16)
        dy = torch.randn(4096, 2048, generator=g, dtype=torch.bfloat16)
        return [t.to(dev) for t in (x, w, bias, dy)]

    def rms_norm(x, w, bias, dy):
        from liger_kernel.ops.rms_norm import LigerRMSNormFunction
        x, w = x.clone().requires_grad_(), w.clone().requires_grad_()
        y = LigerRMSNormFunction.apply(x, w, 1e-6, 0.0, "llama", False)
        y.backward(dy)
        return {"y": y, "dx": x.grad, "dw": w.grad}

    def layer_norm(x, w, bias, dy):
        from liger_kernel.ops.layer_norm import LigerLayerNormFunction
        x, w, bias = x.clone().requires_grad_(), w.clone().requires_grad_(), bias.clone().requires_grad_()
        y = LigerLayerNormFunction.apply(x, w, bias, 1e-6)
        y.backward(dy)
        return {"y": y, "dx": x.grad, "dw": w.grad, "db": bias.grad}

    return {"geglu": (geglu_inputs, geglu), "swiglu": (geglu_inputs, swiglu),
            "rms_norm": (norm_inputs, rms_norm), "layer_norm": (norm_inputs, layer_norm)}


def ulp_diff(a, b) -> Tuple[int, int]:
    """(elements that differ, the most ulp between two of them) for two tensors of one float type."""
    import torch
    if a.dtype != b.dtype or a.shape != b.shape:
        raise ValueError(f"{a.dtype}{list(a.shape)} vs {b.dtype}{list(b.shape)}")
    int_ty = {2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
    ia, ib = a.contiguous().view(int_ty).long(), b.contiguous().view(int_ty).long()
    # order the bit patterns like the floats (sign-magnitude to two's complement)
    top = 1 << (8 * a.element_size() - 1)
    oa = torch.where(ia < 0, -(ia + top), ia)
    ob = torch.where(ib < 0, -(ib + top), ib)
    d = (oa - ob).abs()
    return int((d != 0).sum()), int(d.max()) if d.numel() else 0


#: (GPU compiles with fp fusion, the interpreter contracts): both as Triton's default; neither; the
#: GPU only, which is how tritonkit ran before it modelled contraction
MODES = {"both": (True, True), "neither": (False, False), "gpu_only": (True, False)}


def compare(name: str, mode: str) -> List[dict]:
    import torch

    import tritonkit
    gpu_fusion, interp_fusion = MODES[mode]
    make, run = _ops()[name]
    os.environ["TRITON_DEFAULT_FP_FUSION"] = "1" if gpu_fusion else "0"
    native = {k: v.detach().cpu() for k, v in run(*make("cuda")).items()}
    torch.cuda.synchronize()
    os.environ["TRITON_DEFAULT_FP_FUSION"] = "1" if interp_fusion else "0"
    with tritonkit.checking() as session:
        checked = {k: v.detach().cpu() for k, v in run(*make("cuda")).items()}
    rows = []
    for out, g in native.items():
        n, most = ulp_diff(g, checked[out])
        rows.append({"op": name, "output": out, "fp_fusion": mode, "dtype": str(g.dtype).replace("torch.", ""),
                     "elements": g.numel(), "differ": n, "max_ulp": most, "findings": len(session.findings)})
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ops", default="geglu,swiglu,rms_norm,layer_norm")
    p.add_argument("--modes", default=",".join(MODES), help="fp fusion on the GPU and in the interpreter: "
                   "both, neither, gpu_only (default: all three)")
    p.add_argument("--json")
    args = p.parse_args(argv)
    import torch
    if not torch.cuda.is_available():
        print("liger_bitwise: needs a CUDA GPU")
        return 2
    res = {"machine": gpu_machine(), "rows": []}
    print(f"# Liger-Kernel kernels, GPU vs tritonkit's interpreter on the same inputs; {res['machine']}")
    print(f"{'op':11} {'output':6} {'fusion':8} {'dtype':9} {'elements':>10} {'differ':>9} {'max ulp':>8}")
    for name in args.ops.split(","):
        for mode in args.modes.split(","):
            for r in compare(name, mode):
                res["rows"].append(r)
                print(f"{r['op']:11} {r['output']:6} {r['fp_fusion']:8} {r['dtype']:9} {r['elements']:>10} "
                      f"{r['differ']:>9} {r['max_ulp']:>8}", flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(res, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
