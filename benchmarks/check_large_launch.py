"""One very large launch checked: Liger-Kernel's blocked RMS norm forward over 2^31 + 4096 bf16
elements, the launch of ``test_block_rms_norm_large_row_offset`` in Liger's ``test_rms_norm.py``.

The workload is that test's: ``x`` zeros of shape (``--rows``, 256) bf16 (default 2^23 + 16 rows,
so that a row lies past the int32 range), its last row ones, ``w`` ones (256,) bf16, and
``LigerRMSNormFunction.apply(x, w, 1e-6, 0.0, "llama", True, False)``: one launch of
``_block_rms_norm_forward_kernel`` over ``rows / 16`` programs of 16 x 256 elements each, which
reads ``x`` (4.3 GB at the default size), writes ``y`` (4.3 GB, a ``torch.empty`` output) and one
float32 ``rstd`` per row. Each run is a fresh process (``--runs`` of them, alternating when
``--plain`` is given too):

* checked: the launch under ``tritonkit.checking()`` (every default check; the disk cache as it
  is: a second run knows the kernel's cost and shares the launch out from its first batch); with
  ``--gpu-above ELEMENTS``, ``checking(gpu_above=...)``: at 2^30 (``pytest --tritonkit``'s default)
  the launch is checked on the GPU by its instrumented version (out-of-bounds and int32 overflow);
* plain (``--plain``, GPU only): natively. (Triton's own interpreter cannot run this kernel:
  ``eps.to(tl.float32)`` on the Python float it passes raises ``AttributeError``; tritonkit types
  scalar arguments as a GPU launch does.)

It prints, per run, the process's wall seconds, the launch's seconds (between the call and its
return, ``torch.cuda.synchronize()`` included), the processes that ran it and its batches (from the
launch record), whether ``y``'s last row is ones (the test's assertion) and the process's peak RSS
(GiB, ``ru_maxrss``); then the machine (CPU model and cores; GPU, torch, triton, Liger versions;
date). ``--json FILE`` writes all of it.

Needs Liger-Kernel (``pip install liger-kernel==0.8.5``). Memory: at the default size, 8.6 GB on
the GPU, and on the host about 11 GB checked (host copies of ``x`` and ``y`` and a byte per element
of ``y`` for the uninitialized-read check): run it on the GPU machine, not on the 24 GB CPU
machine at that size.

Usage::

    python benchmarks/check_large_launch.py [--rows N] [--device cuda|cpu] [--runs 2] [--plain]
        [--gpu-above ELEMENTS] [--json results.json]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from typing import List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _machine import cpu_model  # noqa: E402

COLS = 256


def workload(rows: int, device: str, checked: bool, gpu_above: Optional[int] = None) -> dict:
    """Run the launch once in this process; its figures (see the module)."""
    import torch
    from liger_kernel.ops.rms_norm import LigerRMSNormFunction
    x = torch.zeros(rows, COLS, dtype=torch.bfloat16, device=device)
    x[-1].fill_(1)
    w = torch.ones(COLS, dtype=torch.bfloat16, device=device)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    sync()
    out: dict = {}
    start = time.perf_counter()
    if checked:
        from tritonkit.check import checking
        with checking(gpu_above=gpu_above) as session:
            y = LigerRMSNormFunction.apply(x, w, 1e-6, 0.0, "llama", True, False)
            sync()
        (record,) = [r for r in session.launches if r.kernel == "_block_rms_norm_forward_kernel"]
        out.update(processes=record.processes, batches=record.batches, engine=record.engine,
                   fallback=record.fallback, findings=len(session.findings))
    else:
        y = LigerRMSNormFunction.apply(x, w, 1e-6, 0.0, "llama", True, False)
        sync()
    out["launch_s"] = round(time.perf_counter() - start, 2)
    out["last_row_ones"] = bool(torch.allclose(y[-1].float().cpu(), torch.ones(COLS), atol=1e-2, rtol=1e-2))
    out["peak_rss_gib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20, 2)
    return out


def run_one(rows: int, device: str, checked: bool, gpu_above: Optional[str] = None) -> dict:
    """One fresh process running :func:`workload`; its figures and its wall seconds."""
    env = dict(os.environ)
    src = os.path.join(os.path.dirname(HERE), "src")
    env["PYTHONPATH"] = os.pathsep.join([src] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env.pop("TRITON_INTERPRET", None)
    cmd = [sys.executable, os.path.abspath(__file__), "--workload", "--rows", str(rows), "--device", device]
    if checked:
        cmd.append("--checked")
        if gpu_above is not None:
            cmd += ["--gpu-above", gpu_above]
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = round(time.perf_counter() - start, 1)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("CHECK_LARGE_LAUNCH ")]
    if proc.returncode or not lines:
        return {"wall_s": wall, "error": (proc.stderr or proc.stdout)[-2000:]}
    return dict(json.loads(lines[-1].split(" ", 1)[1]), wall_s=wall)


def machine(device: str) -> dict:
    import torch
    import triton
    try:
        from importlib.metadata import version
        liger = version("liger-kernel")
    except Exception:
        liger = "?"
    out = {"cpu": cpu_model(), "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else
           os.cpu_count(), "python": sys.version.split()[0], "torch": torch.__version__, "triton": triton.__version__,
           "liger_kernel": liger, "date": time.strftime("%Y-%m-%d")}
    if device == "cuda":
        out["gpu"] = torch.cuda.get_device_name()
    return out


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=2 ** 23 + 16, help="rows of 256 bf16 (default 2^23 + 16)")
    p.add_argument("--device", default=None, help="cuda (default where there is one) or cpu")
    p.add_argument("--runs", type=int, default=2, help="checked runs (and plain ones with --plain)")
    p.add_argument("--plain", action="store_true", help="also run it natively (GPU only)")
    p.add_argument("--gpu-above", metavar="ELEMENTS", default=None,
                   help="checked runs check launches over this many elements on the GPU (e.g. 2^30; default: none)")
    p.add_argument("--json", help="write the results here")
    p.add_argument("--workload", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--checked", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    try:
        import liger_kernel  # noqa: F401
    except ImportError:
        print("check_large_launch: needs Liger-Kernel (pip install liger-kernel==0.8.5)", file=sys.stderr)
        return 2
    import torch
    device = a.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if a.workload:
        from tritonkit.check.launch.on_gpu import parse_gpu_above
        limit = parse_gpu_above(a.gpu_above)
        print("CHECK_LARGE_LAUNCH " + json.dumps(workload(a.rows, device, a.checked, limit)), flush=True)
        return 0
    if a.rows % 16:
        p.error("--rows must be a multiple of 16 (the kernel's BLOCK_ROW)")
    if a.plain and device != "cuda":
        p.error("--plain runs the launch natively: it needs a CUDA GPU (Triton's interpreter cannot run this kernel)")
    print(f"# {a.rows} x {COLS} bf16 ({a.rows * COLS / 1e9:.2f} billion elements) on {device}", flush=True)
    runs = []
    for i in range(a.runs):
        for checked in ([True, False] if a.plain else [True]):
            r = dict(run_one(a.rows, device, checked, a.gpu_above), run=i + 1,
                     way="checked" if checked else "plain")
            runs.append(r)
            if "error" in r:
                print(f"  run {i + 1} {r['way']}: failed after {r['wall_s']} s:\n{r['error']}", flush=True)
                continue
            extra = (f", engine {r['engine']}, {r['processes']} processes, {r['batches']} batches, "
                     f"{r['findings']} findings" if checked else "")
            print(f"  run {i + 1} {r['way']}: process {r['wall_s']} s, launch {r['launch_s']} s{extra}, "
                  f"last row ones {r['last_row_ones']}, peak RSS {r['peak_rss_gib']} GiB", flush=True)
    info = machine(device)
    print("# " + ", ".join(f"{k} {v}" for k, v in info.items()))
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"machine": info, "rows": a.rows, "cols": COLS, "device": device, "gpu_above": a.gpu_above,
                       "runs": runs}, fh, indent=1)
    bad = any("error" in r or not r.get("last_row_ones") or r.get("findings") for r in runs)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
