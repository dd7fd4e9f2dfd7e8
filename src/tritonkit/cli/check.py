"""``tritonkit check [options] -- python SCRIPT.py ARGS``: run the script with every Triton launch
checked on the CPU, then print the findings (and write them as JSON).

The script runs in a child process (``python -m tritonkit.cli._child check``) in a process group of
its own (:mod:`._supervise`: signals that ask tritonkit to stop are passed on to it, the terminal
is lent to it), and so does each Python process it starts; every one writes what it finds to its
journal as it finds it (:mod:`tritonkit.check.journal`). This process builds the report from the
journals after the script ends, however it ends (normally, ``os._exit``, a signal, a crash, a usage
error, tritonkit's own SIGTERM), once the checked processes it left running ended or
:data:`CHILD_WAIT_S` passed, and prints it to the terminal it was started from, whatever the script
did with its own ``sys.stdout``.

Exit status, the first that applies: 128 + the signal (143, 129) when SIGTERM or SIGHUP reached
tritonkit (passed on to the script; the report has what was checked until then and says so); 130
interrupted (Ctrl-C, or SIGINT sent to tritonkit); 2 a launch could not be checked as given (a usage
error) or tritonkit failed, the findings made before still reported; 2 the ``--json`` FILE could not
be written and there are no findings; 1 findings (a kernel that could not run, or timed out, is a
finding; with ``--baseline FILE`` only findings not in it, with ``--update-baseline`` none); 3 the script raised, exited with another status or was killed (said on stderr); 0. A
``--json`` FILE that cannot be written is refused before the script runs (status 2); one whose write
fails after the run (a full disk) is said on stderr. The JSON is written before the report is
printed.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
from typing import List, Optional

from . import _status
from ._console import add_width_option, make_console
from ._status import BadUsage
from ._target import Target, writable_path

NAME = "check"
ORDER = 10


def add_parser(sub) -> argparse.ArgumentParser:
    """Add ``check`` to the ``tritonkit`` subparsers."""
    c = sub.add_parser("check", help="run a script with every Triton launch checked on the CPU",
                       usage="tritonkit check [--json FILE] [--nan] [--checks KINDS] [--stop-on-first] [--timeout S] "
                             "[--pdb] [--width N] -- python SCRIPT.py [ARGS...]",
                       description="Run SCRIPT (in a child process) with every @triton.jit launch in it and in the "
                                   "Python processes it starts run in tritonkit's checked CPU interpreter, which reports out-of-bounds accesses, undefined values, "
                                   "data races between programs, reads of uninitialized memory, integer overflow in "
                                   "addresses, failed asserts and (with --nan) where NaN/Inf values are made.")
    c.add_argument("--json", metavar="FILE", help="also write the findings as JSON to FILE")
    c.add_argument("--sarif", metavar="FILE",
                   help="also write the findings as SARIF 2.1.0 to FILE (GitHub code scanning, other CI viewers)")
    c.add_argument("--baseline", metavar="FILE",
                   help="findings that match one in FILE (a file of --update-baseline or --json: same kind, kernel, "
                        "file, line and argument) are reported as known and do not change the exit status; "
                        "new ones do")
    c.add_argument("--update-baseline", metavar="FILE",
                   help="write this run's findings to FILE as the baseline to accept (they then do not change "
                        "this run's exit status)")
    c.add_argument("--repro", metavar="DIR",
                   help="for every launch with a finding, write a folder in DIR with repro.py, the launch's exact "
                        "arguments (launch.pt) and a README: python repro.py launches it again; tritonkit check -- "
                        "python repro.py shows the same findings")
    c.add_argument("--repro-self-contained", action="store_true",
                   help="with --repro: copy the kernel's file (its imports and definitions) into each folder, to "
                        "attach to an issue elsewhere")
    c.add_argument("--repro-max-bytes", metavar="SIZE",
                   help="with --repro: a tensor whose storage is larger (bytes, or with K/M/G: 64M) is saved in part: "
                        "the elements its view spans, the rest filled with 0 (default 256M)")
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
                   help="stop a program that makes the same atomic or volatile load at the same addresses N times "
                        "in a row while nothing writes to memory and no other program can run (a program that waits "
                        "for another gives way to it first), with a timeout finding; default 10000, 0 never")
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
    add_width_option(c)
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
    repro = None
    if args.repro:
        from ..check.repro import directory_for
        try:
            repro = directory_for(args.repro)
        except ValueError as e:
            raise BadUsage(f"--repro {e}") from None
    elif args.repro_self_contained or args.repro_max_bytes:
        raise BadUsage("--repro-self-contained and --repro-max-bytes go with --repro DIR: add it")
    max_bytes = _size(args.repro_max_bytes, "--repro-max-bytes") if args.repro_max_bytes else None
    return CheckOptions(checks=kinds, nan=args.nan, stop_on_first=args.stop_on_first, timeout=timeout,
                        pdb=args.pdb, engine=args.engine,
                        batch_memory=args.batch_memory << 20 if args.batch_memory else None,
                        access_maps=args.access_maps, children=not args.no_children, outputs=args.outputs,
                        stall_polls=args.stall_polls, workers=args.workers, gpu_above=gpu_above,
                        repro=repro, repro_self_contained=args.repro_self_contained, repro_max_bytes=max_bytes)


def _size(text: str, option: str) -> int:
    """A size in bytes from ``1000``, ``64K``, ``64M``, ``2G`` (powers of 1024).

    Raises:
        BadUsage: not a size, or not positive.
    """
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    unit = t[-1:] if t[-1:] in units and t[-1:] else ""
    try:
        value = float(t[:-1] if unit else t) * units[unit]
    except ValueError:
        raise BadUsage(f"{option} {text}: not a size; give bytes, or a number with K, M or G (64M)") from None
    if value <= 0:
        raise BadUsage(f"{option} {text}: give a positive size")
    return int(value)


def _list_checks() -> int:
    from ..check.checks import CHECKS, CHECK_KINDS
    for kind in CHECK_KINDS:
        cls = CHECKS[kind]
        print(f"{kind:20} {cls.title}{'' if cls.default else ' (off by default)'}")
    return _status.OK


#: seconds the report waits for checked processes the script left running (``TRITONKIT_CHILD_WAIT``)
CHILD_WAIT_S = 10.0


def run(args) -> int:
    """Run ``tritonkit check``; returns the exit status (see the module)."""
    if args.list_checks:
        return _list_checks()
    target = Target.parse(args.target)
    json_path = os.path.abspath(args.json) if args.json else None  # before the script can chdir
    if json_path:
        writable_path(json_path, "--json", target)
    outputs = _Outputs.from_args(args, target)
    if args.gpu is not None:
        return _run_gpu(args, target, json_path, outputs)
    options = _options(args)

    from ..check.journal import RUN_DIR_ENV, read_run
    from ._supervise import Supervisor

    run_dir = tempfile.mkdtemp(prefix="tritonkit-check-")
    try:
        with Supervisor() as sup:
            cmd = [sys.executable, "-m", "tritonkit.cli._child", "check", json.dumps(options.to_dict()), *target.words()]
            sup.start(cmd, dict(os.environ, **{RUN_DIR_ENV: run_dir}))
            code = sup.wait()
            left = _wait_for_children(sup, run_dir)
            if sup.terminated:
                sup.kill_group()
            runs = read_run(run_dir)
            return _report(sup, code, runs, left, run_dir, target, json_path, outputs, getattr(args, "width", None))
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


def _wait_for_children(sup, run_dir: str) -> list:
    """Wait (a bounded time: :data:`CHILD_WAIT_S`, after SIGTERM what is left of the grace) for the
    checked processes the script left running (their journals have no exit line yet); those still
    running then (:class:`~tritonkit.check.journal.ProcessRun`)."""
    from ..check.journal import RunWatcher
    from ..check.process import still_running
    from ._supervise import seconds_from_env

    watcher = RunWatcher(run_dir)

    def running() -> list:
        watcher.poll()
        return still_running([t.run for t in watcher.tails.values()])

    wait = seconds_from_env("TRITONKIT_CHILD_WAIT", CHILD_WAIT_S)
    if sup.wait_while(running, min(1.0, wait)):
        return []
    if wait > 1.0:
        left = running()
        print(f"tritonkit check: the script ended; waiting up to {wait:g} s for the {len(left)} checked process"
              f"{'es' if len(left) != 1 else ''} it left running (pid {', '.join(str(r.pid) for r in left)})",
              file=sys.stderr)
        sup.wait_while(running, wait - 1.0)
    return running()


class _Outputs:
    """What ``--sarif``, ``--baseline`` and ``--update-baseline`` ask of the report (paths absolute,
    taken before the script can ``chdir``; sources relative to the directory tritonkit runs in)."""

    def __init__(self, sarif: Optional[str] = None, baseline=None, update: Optional[str] = None,
                 command: Optional[List[str]] = None):
        self.sarif, self.baseline, self.update, self.command = sarif, baseline, update, command
        self.root = os.getcwd()

    @classmethod
    def from_args(cls, args, target) -> "_Outputs":
        """Raises:
            BadUsage: a baseline that cannot be read, an output that cannot be written, the same
                file for two outputs.
        """
        from ..check.baseline import Baseline, BaselineError
        sarif = os.path.abspath(args.sarif) if args.sarif else None
        update = os.path.abspath(args.update_baseline) if args.update_baseline else None
        json_path = os.path.abspath(args.json) if args.json else None
        given = [p for p in (json_path, sarif, update) if p]
        if len(set(given)) != len(given):
            raise BadUsage("--json, --sarif and --update-baseline name the same file: give each its own")
        baseline = None
        if args.baseline:
            try:
                baseline = Baseline.load(args.baseline)
            except BaselineError as e:
                raise BadUsage(f"--baseline {e}") from None
        for path, option in ((sarif, "--sarif"), (update, "--update-baseline")):
            if path:
                writable_path(path, option, target, inputs=[os.path.abspath(args.baseline)] if args.baseline
                              and os.path.abspath(args.baseline) != update else ())
        return cls(sarif, baseline, update, list(target.argv))

    def annotate(self, data: dict) -> dict:
        """The report's JSON with each finding's ``baseline`` (``"new"``/``"known"``) and the
        summary's ``baseline`` counts, when a baseline was given."""
        if self.baseline is None:
            return data
        known = 0
        for f in data.get("findings", []):
            f["baseline"] = "known" if self.baseline.known(f) else "new"
            known += f["baseline"] == "known"
        data.setdefault("summary", {})["baseline"] = {"file": self.baseline.path, "known": known,
                                                      "new": len(data.get("findings", [])) - known}
        return data

    def new_findings(self, findings: list) -> list:
        """The findings that change the exit status: those not in the baseline (none with
        ``--update-baseline``, which accepts them all)."""
        if self.update:
            return []
        return self.baseline.split(findings)[0] if self.baseline is not None else list(findings)

    def write(self, findings: list) -> bool:
        """Write the SARIF file and the new baseline; False (said on stderr) where one could not be."""
        from ..check.baseline import write_baseline
        from ..report.sarif import write_sarif
        from ..report.terminal import safe
        ok = True
        for path, write in ((self.sarif, lambda p: write_sarif(p, findings, self.root, self.baseline, self.command)),
                            (self.update, lambda p: write_baseline(p, findings, self.root))):
            if not path:
                continue
            try:
                n = write(path)
            except OSError as e:
                print(f"tritonkit check: error: cannot write {safe(path)}: {safe(e)}", file=sys.stderr)
                ok = False
            else:
                if path == self.update:
                    print(f"tritonkit check: wrote a baseline of {n} finding{'s' if n != 1 else ''} to {safe(path)}",
                          file=sys.stderr)
        return ok


def _report(sup, code: int, runs, left, run_dir: str, target, json_path: Optional[str],
            outputs: Optional[_Outputs] = None, width: Optional[int] = None) -> int:
    """Build the report from the journals ``runs``, write its JSON and print it; the exit status
    (the precedence is the module's)."""
    from ..check.journal import merge
    from ..check.process import unchecked_children
    from ..report.terminal import safe

    root = next((r for r in runs if r.role == "root"), None)
    ended = root.exit if root is not None else None
    interrupted = sup.interrupted or code == _status.INTERRUPTED or bool(ended and ended.get("interrupted"))
    error = None
    if ended and ended.get("internal"):
        internal = str(ended["internal"])
        if internal.startswith("usage: "):
            error = internal[len("usage: "):]
        else:
            print("tritonkit: internal error (the traceback above); please report it", file=sys.stderr)
            error = f"tritonkit failed: {internal}"
    terminated = sup.terminated
    failed = code != 0 and not interrupted and not terminated and error is None
    if terminated:
        end = (f"; its process group did not end within {sup.grace_s:g} s and was killed (SIGKILL)" if sup.killed
               else "")
        print(f"tritonkit check: {_signal_name(terminated)} received: passed on to the script{end}", file=sys.stderr)
    elif code < 0:
        print(f"tritonkit check: the script was killed by signal {-code} ({_signal_name(-code)})", file=sys.stderr)
    elif failed and ended is None:
        print(f"tritonkit check: the script ended with status {code} before tritonkit could see how (os._exit?)",
              file=sys.stderr)
    report = merge(runs, interrupted=interrupted, script={"target": target.argv, "failed": failed})
    notes = report.summary["incomplete"]
    for r in left:
        notes.append(safe(f"pid {r.pid} ({' '.join(r.argv)}) was still running when the report was made: what it "
                          "finds from then on is not in it"))
    for c in unchecked_children(run_dir, runs):
        notes.append(safe(f"pid {c['pid']} ({' '.join(c['argv'])}) is a Python process the script started that "
                          "tritonkit's start-up hook never reached (python -I/-E/-S, another interpreter"
                          f"{', still running' if c['running'] else ''}): its launches, if any, were not checked"))
    if _disk_full(run_dir):
        notes.append("the file system of the run's temporary directory is full: journals may have lost findings")
    report.summary["terminated"] = _signal_name(terminated) if terminated else None
    report.summary["error"] = error
    outputs = outputs or _Outputs()
    written = _show(report, json_path, outputs, width)
    sup.settle()  # signals that came while the report was made
    if sup.terminated:
        print(f"tritonkit check: terminated ({_signal_name(sup.terminated)})", file=sys.stderr)
        return 128 + int(sup.terminated)
    if interrupted or sup.interrupted:
        print("tritonkit check: interrupted", file=sys.stderr)
        return _status.INTERRUPTED
    if error is not None:
        return _status.USAGE
    new = outputs.new_findings(report.findings)
    if not written and not new:
        return _status.USAGE  # with findings, their status: the error above says the file is missing
    if new:
        return _status.FINDINGS
    return _status.SCRIPT_FAILED if failed else _status.OK


def _disk_full(path: str) -> bool:
    """Whether the file system of ``path`` has (almost) no room left for this user."""
    try:
        st = os.statvfs(path)
    except (OSError, AttributeError):
        return False
    free = st.f_bfree if os.geteuid() == 0 else st.f_bavail
    return free * st.f_frsize < 4096


_CPU_ONLY = ("--stop-on-first", "--pdb", "--timeout", "--nan", "--checks", "--no-checks", "--batch-memory", "--workers",
             "--stall-polls", "--access-maps", "--no-children", "--repro", "--repro-self-contained",
             "--repro-max-bytes")


def _run_gpu(args, target, json_path: Optional[str], outputs: Optional[_Outputs] = None) -> int:
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
    outputs = outputs or _Outputs()
    new = outputs.new_findings(report.findings)
    if not _show(report, json_path, outputs, getattr(args, "width", None)) and not new:
        return _status.USAGE
    if new:
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


def _show(report, json_path: Optional[str], outputs: Optional[_Outputs] = None, width: Optional[int] = None) -> bool:
    """Write the report's JSON to ``json_path`` (None: none), its SARIF and baseline (``outputs``),
    then print the report to the terminal (with a baseline, its new findings, and a line for the
    known ones): the files are written first, so a reader that closes stdout early (``| head -1``)
    loses nothing (a closed stdout ends the printing quietly:
    :func:`~tritonkit.cli._console.make_console`). False (said on stderr) when a file cannot be
    written; the report is printed all the same."""
    import dataclasses

    from ..check.findings import write_json
    from ..report import print_report
    from ..report.terminal import safe
    outputs = outputs or _Outputs()
    written = True
    if json_path:
        try:
            write_json(json_path, outputs.annotate(report.to_dict()))
        except OSError as e:
            print(f"tritonkit check: error: cannot write {safe(json_path)}: {safe(e)}", file=sys.stderr)
            written = False
    written = outputs.write(report.findings) and written
    console = make_console(width)
    if outputs.baseline is None:
        print_report(report, console)
        return written
    new, known = outputs.baseline.split(report.findings)
    print_report(dataclasses.replace(report, findings=new), console)
    if known:
        console.print(f"{len(known)} of the findings {'are' if len(known) != 1 else 'is'} known (in the baseline "
                      f"{safe(outputs.baseline.path)}): not shown, and {'they do' if len(known) != 1 else 'it does'} "
                      "not change the exit status", markup=False, highlight=False)
    return written


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return "unknown"
