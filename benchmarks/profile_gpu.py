"""``tritonkit profile`` on the GPU: measured ceilings, a side-by-side comparison, the profiler's
overhead and its accuracy.

Parts (``--parts``, default all):

* ``calibrate``: this device's measured ceilings (``tritonkit calibrate``), next to the datasheet.
* ``compare``: cuBLAS (``torch.matmul``) vs a Triton matmul at 8192^3 in bf16 (the seed's example;
  the Triton kernel is ``benchmarks/tune_kernels.py``'s with its tuned config), side by side.
* ``overhead``: host us per launch of a tiny kernel (best of 5 x 2000 launches after 200) with no
  profiler, under Proton's Triton hook, and inside ``tritonkit profile``'s own child process (Proton
  plus its host timer, which samples the first launches and then takes itself out); each mode a
  fresh process, six rounds interleaved in rotated order (best and median round reported).
* ``accuracy``: Proton's mean kernel times against Nsight Compute's ``gpu__time_duration.sum`` (clocks
  unlocked, caches not flushed) for the workload's kernels of 50 us or more.

Usage::

    python benchmarks/profile_gpu.py --out DIR [--parts calibrate,compare,overhead,accuracy]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from typing import Dict

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def part_calibrate(log) -> Dict:
    import torch
    from rich.console import Console

    from tritonkit.profile._calibrate import measure, save
    from tritonkit.profile._devices import current_peaks
    from tritonkit.report.profile import ceiling_table
    ceiling = measure()
    save(torch.cuda.get_device_name(), ceiling)
    Console(width=160).print(ceiling_table(ceiling, current_peaks()))
    return ceiling.to_dict()


def part_compare(log) -> Dict:
    import torch
    import triton
    from rich.console import Console

    import tune_kernels as tk
    from tritonkit.profile import compare
    from tritonkit.report.profile import comparison_table
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    grid = (triton.cdiv(n, 128) * triton.cdiv(n, 256),)

    def tri():
        tk.matmul_kernel[grid](a, b, c, n, n, n, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                               c.stride(1), BM=128, BN=256, BK=64, GM=8, num_warps=8, num_stages=3)
    tri()
    torch.testing.assert_close(c.float(), (a.float() @ b.float()), atol=2.0, rtol=0.05)
    cmp = compare({"cuBLAS (torch.matmul)": lambda: torch.matmul(a, b), "Triton matmul": tri},
                  flops=2.0 * n ** 3, bytes=3 * 2.0 * n * n, dtype="bf16")
    Console(width=160).print(comparison_table(cmp))
    return cmp.to_dict()


OVERHEAD_CHILD = r'''
import sys, time, json, statistics
import torch, triton, triton.language as tl
mode = sys.argv[1]

@triton.jit
def add(x_ptr, y_ptr, o_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(o_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)

x, y, o = (torch.randn(1024, device="cuda") for _ in range(3))
if mode == "proton":
    import triton.profiler as proton
    proton.start(sys.argv[2], hook="triton")
for _ in range(200):
    add[(1,)](x, y, o, 1024, BLOCK=1024)
torch.cuda.synchronize()
best = 1e9
for _ in range(5):
    t0 = time.perf_counter()
    for _ in range(2000):
        add[(1,)](x, y, o, 1024, BLOCK=1024)
    torch.cuda.synchronize()
    best = min(best, (time.perf_counter() - t0) / 2000 * 1e6)
if mode == "proton":
    proton.finalize()
print(json.dumps({"us_per_launch": best}))
'''


def part_overhead(log, rounds: int = 6) -> Dict:
    """Host us per launch in the three modes, interleaved ``rounds`` times, the order rotated every
    round (none, proton, tritonkit; proton, tritonkit, none; ...) so that drift of the machine hits
    every mode alike; the figures per mode are its best and its median round."""
    runs: Dict[str, list] = {"none": [], "proton": [], "tritonkit": []}
    tmp = tempfile.mkdtemp()
    script = os.path.join(tmp, "overhead.py")
    with open(script, "w") as fh:
        fh.write(OVERHEAD_CHILD)
    modes = list(runs)
    for r in range(rounds):
        for mode in modes[r % 3:] + modes[:r % 3]:
            # "tritonkit": the script runs inside tritonkit profile's own child process (Proton + host timer)
            cmd = [sys.executable, "-m", "tritonkit.cli._child", "profile", tmp, "script", script, "inside"] \
                if mode == "tritonkit" else [sys.executable, script, mode, os.path.join(tmp, mode)]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode:
                raise RuntimeError(proc.stderr[-2000:])
            runs[mode].append(json.loads(proc.stdout.strip().splitlines()[-1])["us_per_launch"])
    import statistics
    out: Dict[str, object] = {mode: min(v) for mode, v in runs.items()}
    for mode, v in runs.items():
        log(f"overhead {mode}: best {min(v):.1f}, median {statistics.median(v):.1f} us per launch "
            f"(rounds: {', '.join(f'{x:.1f}' for x in v)})")
    out["median"] = {mode: statistics.median(v) for mode, v in runs.items()}
    out["rounds"] = runs
    return out


def part_accuracy(log) -> Dict:
    """Proton vs ncu kernel times for the workload (clocks unlocked)."""
    from tritonkit.profile import read_proton
    tmp = tempfile.mkdtemp()
    wl = os.path.join(HERE, "profile_workload.py")
    subprocess.run([sys.executable, "-m", "triton.profiler.proton", "-k", "triton", "-n", os.path.join(tmp, "p"), wl,
                    "--repeat", "5"], check=True, capture_output=True)
    prof = read_proton(os.path.join(tmp, "p.hatchet"))
    # clocks unlocked and caches not flushed between kernels: the conditions Proton measures under
    proc = subprocess.run(["ncu", "--clock-control", "none", "--cache-control", "none", "--csv", "--metrics",
                           "gpu__time_duration.sum", sys.executable, wl, "--repeat", "5"], capture_output=True, text=True)
    rows: Dict[str, list] = {}
    import csv
    import io
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith('"')]
    for row in csv.DictReader(io.StringIO("\n".join(lines))):
        if row.get("Metric Name") == "gpu__time_duration.sum":
            unit = row["Metric Unit"]
            v = float(row["Metric Value"].replace(",", "")) * {"ns": 1e-3, "usecond": 1.0, "us": 1.0,
                                                                "msecond": 1e3, "ms": 1e3}.get(unit, 1e-3)
            rows.setdefault(row["Kernel Name"], []).append(v)
    out = []
    for k in prof.kernels:
        base = k.name.split(" ")[0]
        match = rows.get(base) or next((v for n, v in rows.items() if n.startswith(base[:60])), None)
        if not match or k.mean_us < 50:
            continue
        ncu_us = sum(match) / len(match)
        out.append({"kernel": k.name[:60], "proton_us": k.mean_us, "ncu_us": ncu_us,
                    "rel_diff": k.mean_us / ncu_us - 1})
        log(f"accuracy {k.name[:50]}: proton {k.mean_us:.1f} us, ncu {ncu_us:.1f} us, "
            f"{(k.mean_us / ncu_us - 1) * 100:+.2f}%")
    return {"kernels": out}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=".")
    p.add_argument("--parts", default="calibrate,compare,overhead,accuracy")
    args = p.parse_args(argv)
    from _machine import run_parts
    os.makedirs(args.out, exist_ok=True)
    run_parts(args.parts, {"calibrate": part_calibrate, "compare": part_compare, "overhead": part_overhead,
                           "accuracy": part_accuracy}, os.path.join(args.out, "profile_gpu.json"),
              lambda m: print(m, flush=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
