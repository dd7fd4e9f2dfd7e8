"""``tritonkit doctor [options] -- python SCRIPT.py ARGS``: check, then (on a GPU) tune and profile,
each as its own ``tritonkit`` command in a child process, then one self-contained HTML page.

Exit status: 0 no findings; 1 findings; 2 bad usage; 3 the script failed under check, or a step
gave no results.
"""
from __future__ import annotations

import argparse
import json
import os
from typing import List

from . import _status
from ._console import add_width_option, make_console
from ._status import BadUsage
from ._target import Target

NAME = "doctor"
ORDER = 50


def add_parser(sub) -> argparse.ArgumentParser:
    """Add ``doctor`` to the ``tritonkit`` subparsers."""
    p = sub.add_parser("doctor", help="check, then tune and profile (on a GPU), and write one HTML report",
                       usage="tritonkit doctor [--out DIR] [--skip STEPS] [--nan] [--access-maps N] "
                             "[--budget B] [--timeout S] [--width N] -- python SCRIPT.py [ARGS...]",
                       description="Run SCRIPT (unchanged) three times, the way the article's workflow goes: "
                                   "tritonkit check (every launch in the checked CPU interpreter: findings and "
                                   "memory-access maps), then where a CUDA GPU is present tritonkit tune (its "
                                   "@triton.autotune kernels) and tritonkit profile --tuned (the tuned kernels' "
                                   "time, bound and % of peak). Writes DIR/report.html (one self-contained page: "
                                   "no server, no network), DIR/doctor.json and each step's JSON. Exit status: 0 "
                                   "no findings, 1 findings, 2 usage, 3 the script failed or a step gave no "
                                   "results.")
    p.add_argument("--out", default="tritonkit-doctor", metavar="DIR",
                   help="the directory for report.html and the JSON files (default ./tritonkit-doctor; created)")
    p.add_argument("--skip", default="", metavar="STEPS", help="steps to leave out, comma-separated: check, tune, "
                                                               "profile")
    p.add_argument("--nan", action="store_true", help="check: also find where NaN/Inf values are made")
    p.add_argument("--no-children", action="store_true",
                   help="check: leave the Python processes the script starts unchecked (as tritonkit check)")
    p.add_argument("--access-maps", type=int, default=2, metavar="N",
                   help="check: keep memory-access maps of the first N launches of each kernel (default 2)")
    p.add_argument("--budget", help="tune: configs per key, a share (20%%) or seconds (30s), as tritonkit tune")
    p.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                   help="stop a step that runs longer than this (its results are then missing; default none)")
    add_width_option(p)
    p.add_argument("target", nargs="*", help="python SCRIPT.py ARGS... | python -m MODULE ARGS...")
    return p


def run(args, console=None) -> int:
    """Run ``tritonkit doctor``; returns the exit status (see the module).

    Raises:
        BadUsage: no script, a missing script, an unknown ``--skip`` step, a negative
            ``--access-maps``, a ``--timeout`` that is not positive, or an ``--out`` that cannot be made.
    """
    from .._io import atomic_write_text
    from ..doctor import STEPS, build_report, gpu_present, run_doctor
    from ..report.html import write_report
    console = console or make_console(getattr(args, "width", None))
    if not args.target:
        raise BadUsage("nothing to examine: give a script (`tritonkit doctor -- python my_script.py`)")
    Target.parse(args.target)  # a missing script is a usage error now, not three failed steps
    unknown = [s for s in args.skip.split(",") if s.strip() and s.strip() not in STEPS]
    if unknown:
        raise BadUsage(f"--skip: unknown step {', '.join(unknown)}; choose from {', '.join(STEPS)}")
    if args.access_maps < 0:
        raise BadUsage("--access-maps N: N is a number of launches per kernel, 0 or more")
    from ..check.errors import launch_timeout
    try:
        args.timeout = launch_timeout(args.timeout)
    except ValueError as e:
        raise BadUsage(f"--timeout {e}") from None
    try:
        os.makedirs(args.out, exist_ok=True)
    except OSError as e:
        raise BadUsage(f"cannot create --out {args.out}: {e}") from None
    gpu = gpu_present()
    steps = run_doctor(args, list(args.target), gpu=gpu, log=lambda m: console.print(f"[bold]{m}[/bold]"))
    device = None
    if gpu:
        import torch
        device = torch.cuda.get_device_name()
    report = build_report(steps, list(args.target), device)
    html = os.path.join(args.out, "report.html")
    atomic_write_text(os.path.join(args.out, "doctor.json"), json.dumps(report.to_dict(), indent=1, default=str) + "\n")
    write_report(report, html)
    console.print(summary(steps, report))
    from ..report.terminal import safe  # the --out path may hold ESC, a lone surrogate or [markup]
    console.print(f"report: {safe(html)}", markup=False, highlight=False)
    if any(s.why.startswith("interrupted") for s in steps):
        console.print("interrupted (Ctrl-C): the report has what ran until then")
        return _status.INTERRUPTED
    check = report.check
    if check and check.findings:
        return _status.FINDINGS
    if check and (check.script or {}).get("failed"):
        return _status.SCRIPT_FAILED
    if any(s.status == "failed" for s in steps):
        return _status.SCRIPT_FAILED
    return _status.OK


def summary(steps: List, report) -> str:
    """One line per step for the terminal (``steps``: :class:`~tritonkit.doctor.StepResult` s;
    ``report``: the :class:`~tritonkit.doctor.DoctorReport` with their results)."""
    lines = []
    for s in steps:
        what = f"{s.name}: {s.status}"
        if s.status == "ran":
            what += f" in {s.seconds:.1f} s"
            if s.name == "check":
                check = report.check
                what += f", {len(check.findings) if check else 0} finding(s), {check.launches if check else 0} launch(es)"
            elif s.name == "tune":
                what += f", {len(report.tune.results) if report.tune else 0} kernel/key pair(s) tuned"
            elif s.name == "profile":
                what += f", {len(report.profile.kernels) if report.profile else 0} kernel(s) profiled"
        else:
            what += f" ({s.why})"
        lines.append(what)
    return "\n".join(lines)
