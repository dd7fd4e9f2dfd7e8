"""``tritonkit profile [options] -- python SCRIPT.py ARGS`` (or ``--from FILE.hatchet``): every GPU
kernel's time, throughput, % of peak and bound, from Proton, with a scope tree.

Exit status: 0 profiled; 2 bad usage, no GPU, or no profile written; 3 the script failed.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from typing import Dict

from . import _status
from ._console import add_width_option, make_console
from ._status import BadUsage
from ._target import Target, writable_path

NAME = "profile"
ORDER = 30


def add_parser(sub) -> argparse.ArgumentParser:
    """Add ``profile`` to the ``tritonkit`` subparsers."""
    p = sub.add_parser("profile", help="profile every GPU kernel of a script with Proton: time, GB/s, TFLOP/s, "
                                       "%% of peak, bound",
                       usage="tritonkit profile [--json FILE] [--from FILE.hatchet] [--counters] [--tuned] "
                             "[--interpret-limit MB] [--min-share F] [--width N] -- python SCRIPT.py [ARGS...]",
                       description="Run SCRIPT (unchanged) under Proton with Triton's launch hook and print a table "
                                   "per kernel (launches, GPU time, host time per launch, GB/s, TFLOP/s, % of the "
                                   "device's peak, bound) and the time tree by scope. Bytes and FLOPs come from "
                                   "each kernel's launch_metadata, or from a proton.scope's metrics, or with "
                                   "--counters from Nsight Compute, or else from replaying its first launches in "
                                   "tritonkit's checked interpreter (small launches, see --interpret-limit). "
                                   "--from reads a Proton tree file instead (works without a GPU).")
    p.add_argument("--json", metavar="FILE", help="also write the kernels, the tree and the peaks as JSON, and next "
                                                  "to it the roofline and time-breakdown charts (PNG and SVG) and "
                                                  "Proton's own file (FILE's stem + .hatchet)")
    p.add_argument("--from", dest="from_file", metavar="FILE.hatchet", help="analyze this Proton tree file")
    p.add_argument("--counters", action="store_true",
                   help="also run the script under Nsight Compute (ncu, clocks unlocked) for the kernels without "
                        "launch_metadata, and take their bytes and FLOPs from its hardware counters; also prints "
                        "Proton's kernel times against ncu's")
    p.add_argument("--tuned", action="store_true",
                   help="let tritonkit's autotuner stand in for @triton.autotune in the script (as `tritonkit tune` "
                        "does): keys tuned before come from the tuning cache with no trial, so the profile shows "
                        "the tuned kernels, not the tuning")
    p.add_argument("--interpret-limit", type=float, default=64, metavar="MB",
                   help="for kernels with neither launch_metadata nor counters, count bytes and FLOPs by replaying "
                        "their first launches on the CPU in tritonkit's checked interpreter, when their tensor "
                        "arguments take at most this many MiB (default 64; 0: never)")
    p.add_argument("--device", metavar="NAME", help="the device's name for its peaks (default: the current "
                                                    "device, or what the profile's attributes identify)")
    p.add_argument("--min-share", type=float, default=0.001, metavar="F",
                   help="leave out tree nodes under this share of the total GPU time (default 0.001)")
    add_width_option(p)
    p.add_argument("target", nargs="*", help="python SCRIPT.py ARGS... | python -m MODULE ARGS...")
    return p


def run(args, console=None) -> int:
    """Run ``tritonkit profile``; returns the exit status (see the module).

    Raises:
        BadUsage: no script and no ``--from``, both, no GPU for a script, a negative
            ``--interpret-limit``, a ``--json`` path whose directory does not exist, or a profile
            that cannot be read.
    """
    from ..doctor import gpu_present
    from ..profile import ChildMeta, ProfileReport, analyze, identify, read_proton
    from ..profile._calibrate import load
    from ..report.profile import kernel_table, scope_tree
    console = console or make_console(getattr(args, "width", None))
    meta = ChildMeta(device=args.device)
    status = _status.OK
    work = None
    target = None
    if args.from_file:
        if args.target:
            raise BadUsage("give either --from FILE or a script, not both")
        path = args.from_file
        if args.json:
            writable_path(args.json, "--json", inputs=[path])
    else:
        if not args.target:
            raise BadUsage("nothing to profile: give a script (`tritonkit profile -- python my_script.py`) or "
                           "--from FILE.hatchet")
        target = Target.parse(args.target)
        if args.json:
            writable_path(args.json, "--json", target)
        if not gpu_present():
            raise BadUsage("no CUDA GPU here (torch.cuda.is_available() is False): profiling needs one. Without a "
                           "GPU, `tritonkit check` runs kernels on the CPU, and `tritonkit profile --from "
                           "FILE.hatchet` analyzes a profile recorded elsewhere. (--counters through Nsight Compute "
                           "needs a GPU too.)")
        if args.interpret_limit < 0:
            raise BadUsage("--interpret-limit is a size in MiB, 0 or more")
        work = tempfile.mkdtemp(prefix="tritonkit-profile-")
        path = os.path.join(work, "profile.hatchet")
        env = dict(os.environ, TRITONKIT_PROFILE_INTERPRET_MB=str(args.interpret_limit))
        if getattr(args, "tuned", False):
            env["TRITONKIT_PROFILE_TUNED"] = "1"
        proc = subprocess.run([sys.executable, "-m", "tritonkit.cli._child", "profile", work, *target.words()],
                              env=env)
        if proc.returncode != 0:
            status = _status.SCRIPT_FAILED
            console.print(f"[red]tritonkit profile: the script exited with status {proc.returncode}[/red]")
        got = ChildMeta.read(os.path.join(work, "meta.json"))
        if got is not None:
            got.device = args.device or got.device
            meta = got
        if not os.path.exists(path):
            shutil.rmtree(work, ignore_errors=True)
            if status == _status.OK:
                raise BadUsage("Proton wrote no profile (did the script launch anything on the GPU?)")
            return status
    try:
        try:
            prof = read_proton(path)
        except (OSError, ValueError) as e:
            raise BadUsage(str(e)) from None
        if not prof.kernels:
            console.print("tritonkit profile: no GPU kernel ran (the profile has no kernel launches)")
            return status
        if getattr(args, "counters", False):
            prof.kernels = with_counters(prof.kernels, target, console)
        if meta.interpreted:
            from ..profile._interpret import apply_interpreted
            counted = by_report(prof.kernels, meta.interpreted)
            prof.kernels = apply_interpreted(prof.kernels, counted)
            for k in prof.kernels:
                why = counted[k.name].why_not if k.work_source is None and k.name in counted else None
                if why:
                    console.print(f"[dim]{k.name}: no bytes or FLOPs (no launch_metadata; interpreter: {why})[/dim]")
        peaks = identify(prof.device_info(prof.kernels[0].device), meta.device)
        ceiling = load(meta.device) if meta.device else None
        reports = analyze(prof.kernels, peaks, ceiling, host_us=by_report(prof.kernels, meta.host_us),
                          resources=by_report(prof.kernels, meta.resources))
        charts = None
        if args.json:  # written before the tables are printed: a reader that closes stdout early loses nothing
            from .._io import atomic_write_text, output_target
            from ..report.charts import roofline_chart, save_figure, time_breakdown_chart
            stem = os.path.splitext(args.json)[0]
            charts = []
            if output_target(args.json)[1]:  # a device or a FIFO (/dev/stdout): no files beside it
                console.print("[dim]--json is not a regular file: no charts or Proton file written beside it[/dim]")
            else:
                if work:  # keep Proton's own file next to the JSON: `tritonkit profile --from` reads it again
                    kept = stem + ".hatchet"
                    shutil.copyfile(path, kept)
                    path = kept
                charts = save_figure(roofline_chart(reports, peaks, ceiling), stem + "_roofline") + \
                    save_figure(time_breakdown_chart(reports), stem + "_time")
            report = ProfileReport(peaks, ceiling, reports, prof.tree, path, charts)
            atomic_write_text(args.json, json.dumps(report.to_dict(), indent=1) + "\n")
        console.print(kernel_table(reports, peaks))
        console.print(scope_tree(prof.tree, args.min_share))
        if charts is not None:
            console.print("charts: " + ", ".join(charts))
        return status
    finally:
        if work:
            shutil.rmtree(work, ignore_errors=True)


def with_counters(kernels, target, console):
    """Fill bytes and FLOPs of kernels without ``launch_metadata`` from an ncu run of the same
    script (``target``: a :class:`~tritonkit.cli._target.Target`, None with ``--from``); on any
    reason ncu cannot (not installed, no permission, no GPU) say so and go on."""
    from ..profile._counters import (CountersUnavailable, aggregate, apply_counters, kernels_needing_counters, run_ncu,
                                     time_accuracy)
    if target is None:
        console.print("[yellow]--counters needs the script to run again under ncu; with --from there is none: "
                      "skipped[/yellow]")
        return kernels
    need = kernels_needing_counters(kernels)
    if not need:
        return kernels
    try:
        records = run_ncu(target.program(), need)
    except CountersUnavailable as e:
        console.print(f"[yellow]--counters: {e}[/yellow]")
        return kernels
    for name, proton_us, ncu_us, rel in time_accuracy(kernels, records):
        console.print(f"kernel time {name[:60]}: Proton {proton_us:.1f} us, ncu {ncu_us:.1f} us ({rel * 100:+.1f}%)")
    return apply_counters(kernels, aggregate(records))


def by_report(kernels, by_function: Dict[str, object]) -> Dict[str, object]:
    """Figures by Triton function name (host us, resources, counts) re-keyed by the profile's kernel
    names (:func:`~tritonkit.profile._proton.match_name`: ``"add_kernel n=4096"`` takes ``add_kernel``'s)."""
    from ..profile._proton import match_name
    out = {}
    for k in kernels:
        key = match_name(k.name, by_function)
        if key is not None:
            out[k.name] = by_function[key]
    return out
