"""``tritonkit check [options] -- python SCRIPT.py ARGS``: run the script with every Triton launch
checked on the CPU, then print the findings (and write them as JSON).

The script runs in a child process (``python -m tritonkit.cli._child check``), and so does each
Python process it starts; every one writes what it finds to its journal as it finds it
(:mod:`tritonkit.check.journal`). This process builds the report from the journals after the
script ends, however it ends (normally, ``os._exit``, a signal, a crash), and prints it to the
terminal it was started from, whatever the script did with its own ``sys.stdout``.

Exit status: 0 no findings; 1 findings (a kernel that could not run, or timed out, is a finding);
2 bad usage or a failure of tritonkit itself; 3 the script raised, exited with another status or
was killed (said on stderr) and nothing was found; 130 interrupted. A ``--json`` FILE that cannot
be written is refused before the script runs (status 2); one whose write fails after the run (a full
disk) is said on stderr, and the status is then 1 where there are findings, else 2. The JSON is
written before the report is printed.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from typing import List, Optional

from . import _status
from ._console import make_console
from ._status import BadUsage
from ._target import Target, writable_path

NAME = "check"
ORDER = 10


def add_parser(sub) -> argparse.ArgumentParser:
    """Add ``check`` to the ``tritonkit`` subparsers."""
    c = sub.add_parser("check", help="run a script with every Triton launch checked on the CPU",
                       usage="tritonkit check [--json FILE] [--nan] [--checks KINDS] [--stop-on-first] [--timeout S] "
                             "[--pdb] -- python SCRIPT.py [ARGS...]",
                       description="Run SCRIPT (in a child process) with every @triton.jit launch in it and in the "
                                   "Python processes it starts run in tritonkit's checked CPU interpreter, which reports out-of-bounds accesses, undefined values, "
                                   "data races between programs, reads of uninitialized memory, integer overflow in "
                                   "addresses, failed asserts and (with --nan) where NaN/Inf values are made.")
    c.add_argument("--json", metavar="FILE", help="also write the findings as JSON to FILE")
    c.add_argument("--stop-on-first", action="store_true", help="stop the script at the first finding")
    c.add_argument("--pdb", action="store_true",
                   help="open pdb at the first finding, in the kernel at the offending line, in the offending "
                        "program (its tensors print as numpy arrays); 'c' goes on checking")
    c.add_argument("--timeout", type=float, metavar="SECONDS",
                   help="stop a launch that runs longer than this and report where it was")
    c.add_argument("--nan", action="store_true",
                   help="also report where NaN/Inf values that reach memory were made (the nan_inf check; off by "
                        "default: some kernels use Inf on purpose, and it costs time)")
    c.add_argument("--checks", metavar="KINDS",
                   help="run only these checks, comma-separated (default: every check on by default; "
                        "--list-checks lists them)")
    c.add_argument("--list-checks", action="store_true", help="list the checks (finding kinds) and exit")
    c.add_argument("--no-checks", action="store_true",
                   help="run the interpreter without checks (accesses outside a tensor's storage are still "
                        "dropped, silently); for timing")
    c.add_argument("--engine", choices=("auto", "sequential"), default="auto",
                   help="auto (default): run many programs of a launch at once, falling back to one program at "
                        "a time per launch where it must (the summary says which and why); sequential: one "
                        "program at a time, like TRITON_INTERPRET=1")
    c.add_argument("--batch-memory", type=int, metavar="MB",
                   help="the most memory one value of a batch of programs may take, in MiB (default 4)")
    c.add_argument("--workers", type=int, metavar="N", default=None,
                   help="processes that check an autotuned kernel's configs at once, and that a long launch's "
                        "programs are shared out between (default: the cores this process may use, or "
                        "$TRITONKIT_WORKERS; 1: everything in this process)")
    c.add_argument("--outputs", choices=("checked", "gpu"), default="checked",
                   help="where a launch on CUDA tensors gets its results: checked (default: the interpreter's) or "
                        "gpu (checked, then run natively when it had no finding: the program sees the GPU's results)")
    c.add_argument("--gpu-above", metavar="ELEMENTS", default="off",
                   help="a launch whose tensor arguments are all on a CUDA device and view more than this many "
                        "elements in all (whole storages) is checked on the GPU instead, at native speed, by its "
                        "instrumented version (as --gpu): out-of-bounds accesses and int32 overflow only (e.g. 2^30; "
                        "default off: every launch in the interpreter)")
    c.add_argument("--stall-polls", type=int, metavar="N", default=None,
                   help="stop a program that makes the same load or atomic at the same addresses N times in a row "
                        "while nothing writes to memory (it waits for another program: a spin on a flag), with a "
                        "timeout finding; default 100000, 0 never")
    c.add_argument("--no-children", action="store_true",
                   help="do not check the Python processes the script starts (subprocess, multiprocessing); by "
                        "default each is checked and its findings are reported with its pid and command line")
    c.add_argument("--access-maps", type=int, metavar="N", default=0,
                   help="count the bytes every launch moves (all lanes and distinct elements) and FLOPs, and keep "
                        "a map of which elements each tensor argument had read and written, by which program, for "
                        "the first N launches of each kernel, in the --json output (tritonkit doctor draws them)")
    c.add_argument("--gpu", nargs="?", const="instrumented", choices=("instrumented", "sanitizer"), metavar="MODE",
                   help="check on the GPU at native speed instead of the CPU: --gpu runs every kernel rewritten so "
                        "that each load, store and atomic checks its addresses against the tensor argument it "
                        "derives from (out-of-bounds lanes are not performed, and reported); --gpu=sanitizer runs "
                        "the script under compute-sanitizer's memcheck (PyTorch's caching allocator off). Both "
                        "report out-of-bounds accesses with the tensor argument, elements and program ids")
    c.add_argument("target", nargs=argparse.REMAINDER, help="python SCRIPT.py ARGS... | python -m MODULE ARGS...")
    return c


def _options(args):
    """The run's :class:`~tritonkit.check.process.CheckOptions` from the command line.

    Raises:
        BadUsage: ``--no-checks`` with ``--checks``/``--nan``, an unknown kind, a negative number.
    """
    from ..check.errors import launch_timeout
    from ..check.process import CheckOptions

    if args.no_checks:
        if args.checks or args.nan:
            raise BadUsage("--no-checks runs no check: drop --checks/--nan, or --no-checks")
        kinds: Optional[List[str]] = []
    elif not args.checks:
        kinds = None
    else:
        from ..check.checks import CHECK_KINDS
        from ..check.checks.nan_inf import NanInfCheck
        kinds = [k.strip() for k in args.checks.split(",") if k.strip()]
        unknown = [k for k in kinds if k not in CHECK_KINDS]
        if unknown or not kinds:
            raise BadUsage(f"--checks: unknown check {', '.join(unknown) or '(none given)'}; choose from "
                           f"{', '.join(CHECK_KINDS)}")
        if args.nan and NanInfCheck.kind not in kinds:
            kinds.append(NanInfCheck.kind)
    if args.access_maps < 0:
        raise BadUsage("--access-maps N: N is a number of launches per kernel, 0 or more")
    try:
        timeout = launch_timeout(args.timeout)
    except ValueError as e:
        raise BadUsage(f"--timeout {e}") from None
    if args.batch_memory is not None and args.batch_memory <= 0:
        raise BadUsage("--batch-memory MB: a positive number of MiB")
    if args.stall_polls is not None and args.stall_polls < 0:
        raise BadUsage("--stall-polls N: a number of polls, 0 (never stop) or more")
    if args.workers is not None and args.workers < 1:
        raise BadUsage("--workers N: a number of processes, 1 or more")
    from ..check.launch.on_gpu import parse_gpu_above
    try:
        gpu_above = parse_gpu_above(args.gpu_above)
    except ValueError as e:
        raise BadUsage(f"--gpu-above: {e}") from None
    return CheckOptions(checks=kinds, nan=args.nan, stop_on_first=args.stop_on_first, timeout=timeout,
                        pdb=args.pdb, engine=args.engine,
                        batch_memory=args.batch_memory << 20 if args.batch_memory else None,
                        access_maps=args.access_maps, children=not args.no_children, outputs=args.outputs,
                        stall_polls=args.stall_polls, workers=args.workers, gpu_above=gpu_above)


def _list_checks() -> int:
    from ..check.checks import CHECKS, CHECK_KINDS
    for kind in CHECK_KINDS:
        cls = CHECKS[kind]
        print(f"{kind:20} {cls.title}{'' if cls.default else ' (off by default)'}")
    return _status.OK


def run(args) -> int:
    """Run ``tritonkit check``; returns the exit status (see the module)."""
    if args.list_checks:
        return _list_checks()
    target = Target.parse(args.target)
    json_path = os.path.abspath(args.json) if args.json else None  # before the script can chdir
    if json_path:
        writable_path(json_path, "--json", target)
    if args.gpu is not None:
        return _run_gpu(args, target, json_path)
    options = _options(args)

    from ..check.journal import RUN_DIR_ENV, merge, read_run

    run_dir = tempfile.mkdtemp(prefix="tritonkit-check-")
    try:
        cmd = [sys.executable, "-m", "tritonkit.cli._child", "check", json.dumps(options.to_dict()), *target.words()]
        proc = subprocess.Popen(cmd, env=dict(os.environ, **{RUN_DIR_ENV: run_dir}))
        code, interrupted = _wait(proc)
        runs = read_run(run_dir)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    root = next((r for r in runs if r.role == "root"), None)
    ended = root.exit if root is not None else None
    interrupted = interrupted or code == _status.INTERRUPTED or bool(ended and ended.get("interrupted"))
    if ended and ended.get("internal"):
        if not str(ended["internal"]).startswith("usage:"):
            print("tritonkit: internal error (the traceback above); please report it", file=sys.stderr)
        return _status.USAGE
    failed = code != 0 and not interrupted
    if code < 0:
        print(f"tritonkit check: the script was killed by signal {-code} ({_signal_name(-code)})", file=sys.stderr)
    elif failed and ended is None:
        print(f"tritonkit check: the script ended with status {code} before tritonkit could see how (os._exit?)",
              file=sys.stderr)
    report = merge(runs, interrupted=interrupted, script={"target": target.argv, "failed": failed})
    if not _show(report, json_path) and not report.findings:
        return _status.USAGE  # with findings, their status: the error above says the file is missing
    if interrupted:
        print("tritonkit check: interrupted", file=sys.stderr)
        return _status.INTERRUPTED
    if report.findings:
        return _status.FINDINGS
    return _status.SCRIPT_FAILED if failed else _status.OK


_CPU_ONLY = ("--stop-on-first", "--pdb", "--timeout", "--nan", "--checks", "--no-checks", "--batch-memory", "--workers",
             "--stall-polls", "--access-maps", "--no-children")


def _run_gpu(args, target, json_path: Optional[str]) -> int:
    """``tritonkit check --gpu[=MODE]``: the script on the GPU (see :mod:`tritonkit.check.gpu`):
    instrumented kernels (``--gpu``), or under compute-sanitizer (``--gpu=sanitizer``).

    Raises:
        BadUsage: options of the CPU check, no GPU, no ``compute-sanitizer`` (``sanitizer``).
    """
    given = [o for o in _CPU_ONLY if getattr(args, o[2:].replace("-", "_"), None) not in (None, False, 0)]
    given += [o for o, default in (("--engine", "auto"), ("--outputs", "checked"), ("--gpu-above", "off"))
              if getattr(args, o[2:].replace("-", "_")) != default]
    if given:
        raise BadUsage(f"--gpu runs no interpreter: drop {', '.join(given)}")
    from ..check.gpu import runtime, sanitizer
    if args.gpu == "instrumented":
        if not _gpu_here(sanitizer):
            raise BadUsage("no GPU is visible here (nvidia-smi -L lists none, or is not permitted): --gpu needs a "
                           "CUDA GPU. Check on the CPU instead: tritonkit check -- python SCRIPT.py")
        report, code = runtime.report(target)
    else:
        try:
            tool = sanitizer.preflight()
        except sanitizer.SanitizerUnavailable as e:
            raise BadUsage(str(e)) from None
        report, code, _ = sanitizer.report(target, tool)
    if not _show(report, json_path) and not report.findings:
        return _status.USAGE
    if report.findings:
        return _status.FINDINGS
    if code != 0:
        print(f"tritonkit check: the script ended with status {code}", file=sys.stderr)
        return _status.SCRIPT_FAILED
    return _status.OK


def _gpu_here(sanitizer) -> bool:
    """Whether a CUDA GPU is visible: ``nvidia-smi -L`` lists one, or, with no ``nvidia-smi`` to ask,
    torch sees one (a container without the tool)."""
    visible = sanitizer.gpu_visible()
    if visible is None:
        import torch
        visible = torch.cuda.is_available()
    return bool(visible)


def _show(report, json_path: Optional[str]) -> bool:
    """Write the report's JSON to ``json_path`` (None: none), then print the report to the terminal:
    the file is written first, so a reader that closes stdout early (``| head -1``) loses nothing
    (a closed stdout ends the printing quietly: :func:`~tritonkit.cli._console.make_console`).
    False (said on stderr) when the JSON cannot be written; the report is printed all the same."""
    from ..check.findings import write_json
    from ..report import print_report
    from ..report.terminal import safe
    written = True
    if json_path:
        try:
            write_json(json_path, report.to_dict())
        except OSError as e:
            print(f"tritonkit check: error: cannot write {safe(json_path)}: {safe(e)}", file=sys.stderr)
            written = False
    print_report(report, make_console())
    return written


def _wait(proc) -> tuple:
    """Wait for the script's process: ``(its return code, whether Ctrl-C was pressed meanwhile)``.
    Ctrl-C reaches the script too (one process group): wait for it to write how it ended."""
    interrupted = False
    while True:
        try:
            return proc.wait(), interrupted
        except KeyboardInterrupt:
            interrupted = True


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return "unknown"
