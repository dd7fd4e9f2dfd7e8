"""``tritonkit profile`` on the examples, on a GPU: what it reports of each, and where its figures
come from.

Runs the installed ``tritonkit`` CLI on ``examples/`` and collects what its ``--json`` says of each
example's kernel: time, GB/s or TFLOP/s, % of the datasheet peak and of the measured ceiling, the
bound and where the bytes and FLOPs came from.

* ``calibrate`` first (the measured ceilings);
* real sizes: the softmax (32768 x 4096 fp32) and the vector add (2^28 fp32) with ``--counters``
  (their bytes from Nsight Compute: the examples declare no ``launch_metadata``), the matmul (bf16
  8192^3) tuned by ``tritonkit tune`` and profiled with ``--tuned --counters``, next to
  ``torch.matmul``;
* small sizes, where the bytes and FLOPs come from replaying the launches in tritonkit's checked
  interpreter (no ``--counters``): the vector add (2^20), the softmax (4096 x 1024) and the
  matmul (bf16 512^3).

Usage::

    python benchmarks/profile_examples.py --out DIR [--parts calibrate,real,small]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Dict, List

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
EX = os.path.join(ROOT, "examples")


def _tk(args: List[str], log, timeout: float = 400) -> int:
    cmd = [sys.executable, "-m", "tritonkit", *args]
    log("$ tritonkit " + " ".join(args))
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    log(proc.stdout[-6000:] + proc.stderr[-3000:])
    log(f"[exit {proc.returncode}, {time.perf_counter() - t0:.1f} s]")
    return proc.returncode


def _kernels(path: str, contains: str) -> List[Dict]:
    with open(path) as fh:
        data = json.load(fh)
    keep = ("name", "launches", "mean_us", "total_ms", "gbps", "tflops", "pct_peak_bw", "pct_peak_flops",
            "pct_ceiling_bw", "pct_ceiling_flops", "bound", "bound_reason", "work_source", "bytes", "flops")
    return [{k: r.get(k) for k in keep} for r in data["kernels"] if contains in r["name"]]


def part_calibrate(out: str, log) -> Dict:
    path = os.path.join(out, "calibrate.json")
    _tk(["calibrate", "--json", path], log)
    with open(path) as fh:
        return json.load(fh)


def part_real(out: str, log) -> Dict:
    res: Dict[str, object] = {}
    sm = os.path.join(out, "softmax.json")
    _tk(["profile", "--counters", "--json", sm, "--", "python", os.path.join(EX, "softmax.py"), "--rows", "32768",
         "--cols", "4096"], log)
    res["softmax 32768x4096 fp32"] = _kernels(sm, "softmax")
    va = os.path.join(out, "vector_add.json")
    _tk(["profile", "--counters", "--json", va, "--", "python", os.path.join(EX, "vector_add.py"), "--n",
         str(1 << 28)], log)
    res["vector_add 2^28 fp32"] = _kernels(va, "add")
    mm_args = ["python", os.path.join(EX, "matmul.py"), "--m", "8192", "--n", "8192", "--k", "8192", "--dtype",
               "bfloat16"]
    _tk(["tune", "--json", os.path.join(out, "matmul_tune.json"), "--", *mm_args], log)
    mm = os.path.join(out, "matmul.json")
    _tk(["profile", "--tuned", "--counters", "--json", mm, "--", *mm_args], log)
    res["matmul bf16 8192^3 (tuned)"] = _kernels(mm, "matmul")
    res["torch.matmul bf16 8192^3"] = _torch_matmul_tflops()
    return res


def _torch_matmul_tflops(n: int = 8192) -> Dict:
    import torch
    import triton
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    ms = triton.testing.do_bench(lambda: torch.matmul(a, b), warmup=100, rep=500)
    return {"ms": ms, "tflops": 2.0 * n ** 3 / ms / 1e9}


def part_small(out: str, log) -> Dict:
    res: Dict[str, object] = {}
    for name, script, args, contains in (
            ("vector_add 2^20 fp32", "vector_add.py", ["--n", str(1 << 20)], "add"),
            ("softmax 4096x1024 fp32", "softmax.py", ["--rows", "4096", "--cols", "1024"], "softmax"),
            ("matmul bf16 512^3", "matmul.py", ["--m", "512", "--n", "512", "--k", "512", "--dtype", "bfloat16"],
             "matmul")):
        path = os.path.join(out, f"small_{script.replace('.py', '')}.json")
        _tk(["profile", "--json", path, "--", "python", os.path.join(EX, script), *args], log)
        res[name] = _kernels(path, contains) if os.path.exists(path) else "no JSON written"
    return res


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=".")
    p.add_argument("--parts", default="calibrate,real,small")
    args = p.parse_args(argv)
    from _machine import run_parts
    os.makedirs(args.out, exist_ok=True)
    from functools import partial
    with open(os.path.join(args.out, "profile_examples.log"), "w") as logf:
        def log(m: str) -> None:
            print(m, flush=True)
            logf.write(m + "\n")
            logf.flush()
        parts = {"calibrate": partial(part_calibrate, args.out), "real": partial(part_real, args.out),
                 "small": partial(part_small, args.out)}
        run_parts(args.parts, parts, os.path.join(args.out, "profile_examples.json"), log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
