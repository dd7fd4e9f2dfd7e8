"""``tritonkit profile -- python SCRIPT.py`` (and ``--from FILE.hatchet``): every GPU kernel's time,
throughput, % of peak and bound, from Proton, with a scope tree."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from typing import Callable, Dict, List, Optional

EXIT_OK, EXIT_USAGE, EXIT_SCRIPT_FAILED = 0, 2, 3


def add_profile_parser(sub) -> None:
    """Add the ``profile`` subcommand to an argparse subparsers object."""
    p = sub.add_parser("profile", help="profile every GPU kernel of a script with Proton: time, GB/s, TFLOP/s, "
                                       "% of peak, bound",
                       usage="tritonkit profile [--json FILE] [--from FILE.hatchet] [--min-share F] -- "
                             "python SCRIPT.py [ARGS...]",
                       description="Run SCRIPT (unchanged) under Proton with Triton's launch hook and print a table "
                                   "per kernel (launches, GPU time, host time per launch, GB/s, TFLOP/s, % of the "
                                   "device's peak, bound) and the time tree by scope. Bytes and FLOPs come from "
                                   "each kernel's launch_metadata, or from a proton.scope's metrics. --from reads "
                                   "a Proton tree file instead (works without a GPU).")
    p.add_argument("--json", metavar="FILE", help="also write the kernels, the tree and the peaks as JSON")
    p.add_argument("--from", dest="from_file", metavar="FILE.hatchet", help="analyze this Proton tree file")
    p.add_argument("--device", metavar="NAME", help="the device's name for its peaks (default: the current "
                                                    "device, or what the profile's attributes identify)")
    p.add_argument("--min-share", type=float, default=0.001, metavar="F",
                   help="leave out tree nodes under this share of the total GPU time (default 0.001)")
    p.add_argument("target", nargs="*", help="python SCRIPT.py ARGS... | python -m MODULE ARGS...")


def run_profile_command(ns, resolve_target: Callable, console=None) -> int:
    """Run ``tritonkit profile``; returns the exit status (0, 2 usage or no GPU, 3 the script failed)."""
    from rich.console import Console

    from ._devices import identify
    from ._proton import read_proton
    from ._roofline import analyze
    from ..report.profile import kernel_table, scope_tree
    console = console or Console()

    def error(msg: str) -> int:
        print(f"tritonkit profile: error: {msg}", file=sys.stderr)
        return EXIT_USAGE

    if ns.json and not os.path.isdir(os.path.dirname(os.path.abspath(ns.json))):
        return error(f"cannot write --json {ns.json}: no directory {os.path.dirname(os.path.abspath(ns.json))}")
    host: Dict[str, float] = {}
    device_name = ns.device
    status = EXIT_OK
    work = None
    if ns.from_file:
        if ns.target:
            return error("give either --from FILE or a script, not both")
        path = ns.from_file
    else:
        if not ns.target:
            return error("nothing to profile: give a script (`tritonkit profile -- python my_script.py`) or "
                         "--from FILE.hatchet")
        kind, what, argv = resolve_target(ns.target)
        try:
            import torch
            gpu = torch.cuda.is_available()
        except ImportError:  # pragma: no cover
            gpu = False
        if not gpu:
            return error("no CUDA GPU here (torch.cuda.is_available() is False): profiling needs one. Without a "
                         "GPU, `tritonkit check` runs kernels on the CPU, and `tritonkit profile --from FILE.hatchet` "
                         "analyzes a profile recorded elsewhere. (--counters through Nsight Compute needs a GPU too.)")
        work = tempfile.mkdtemp(prefix="tritonkit-profile-")
        path = os.path.join(work, "profile.hatchet")
        proc = subprocess.run([sys.executable, "-m", "tritonkit.profile._child", work, kind, what, *argv[1:]])
        if proc.returncode != 0:
            status = EXIT_SCRIPT_FAILED
            console.print(f"[red]tritonkit profile: the script exited with status {proc.returncode}[/red]")
        meta_path = os.path.join(work, "meta.json")
        if os.path.exists(meta_path):
            with open(meta_path) as fh:
                meta = json.load(fh)
            host = meta.get("host_us", {})
            device_name = device_name or meta.get("device")
        if not os.path.exists(path):
            shutil.rmtree(work, ignore_errors=True)
            return error("Proton wrote no profile (did the script launch anything on the GPU?)") if status == 0 \
                else status
    try:
        try:
            prof = read_proton(path)
        except (OSError, ValueError) as e:
            return error(str(e))
        if not prof.kernels:
            console.print("tritonkit profile: no GPU kernel ran (the profile has no kernel launches)")
            return status or EXIT_OK
        peaks = identify(prof.device_info(prof.kernels[0].device), device_name)
        reports = analyze(prof.kernels, peaks, host_us=_host_by_report(prof.kernels, host))
        console.print(kernel_table(reports, peaks))
        console.print(scope_tree(prof.tree, ns.min_share))
        if ns.json:
            from .._io import atomic_write_text
            atomic_write_text(ns.json, json.dumps({"peaks": peaks.to_dict(), "kernels": [r.to_dict() for r in reports],
                                                   "tree": prof.tree.to_dict(), "source": path}, indent=1) + "\n")
        return status
    finally:
        if work:
            shutil.rmtree(work, ignore_errors=True)


def _host_by_report(kernels, host: Dict[str, float]) -> Dict[str, float]:
    """Host us per launch by the profile's kernel names: a kernel named by its ``launch_metadata``
    (``"add_kernel n=4096"``) takes its function's figure (``add_kernel``)."""
    out = {}
    for k in kernels:
        if k.name in host:
            out[k.name] = host[k.name]
            continue
        for fn, us in host.items():
            if k.name.startswith(fn + " ") or k.name.startswith(fn + "("):
                out[k.name] = us
                break
    return out


def child_main(argv: Optional[List[str]] = None) -> int:
    """The profiled process: Proton around the script, host time of every Triton launch."""
    import statistics
    import time

    import triton.profiler as proton
    from triton.runtime.jit import JITFunction

    from .._target import run_target

    argv = list(sys.argv[1:] if argv is None else argv)
    work, kind, what, rest = argv[0], argv[1], argv[2], argv[3:]
    samples: Dict[str, List[float]] = {}
    original = JITFunction.run

    def timed_run(self, *args, **kwargs):
        if kwargs.get("warmup"):
            return original(self, *args, **kwargs)
        t0 = time.perf_counter()
        try:
            return original(self, *args, **kwargs)
        finally:
            samples.setdefault(self.fn.__name__, []).append((time.perf_counter() - t0) * 1e6)

    JITFunction.run = timed_run
    proton.start(os.path.join(work, "profile"), hook="triton")
    try:
        status = run_target(kind, what, rest)
    finally:
        proton.finalize()
        JITFunction.run = original
        import torch
        # the first launch of a kernel compiles it: the median of the rest is its launch cost
        host = {name: statistics.median(v[1:] if len(v) > 1 else v) for name, v in samples.items()}
        with open(os.path.join(work, "meta.json"), "w") as fh:
            json.dump({"host_us": host, "device": torch.cuda.get_device_name() if torch.cuda.is_available() else None},
                      fh)
    return status
