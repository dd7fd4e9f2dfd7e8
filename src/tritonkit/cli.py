"""The ``tritonkit`` command line.

``tritonkit tune [--strategy S] [--budget B] -- python SCRIPT.py ARGS...`` runs the script with its
``@triton.autotune`` kernels tuned by tritonkit (see :mod:`tritonkit.tune._cli`).

``tritonkit check [--json FILE] [--stop-on-first] [--timeout S] [--pdb] -- python SCRIPT.py ARGS...``
runs the script in this process with every Triton launch checked on the CPU.

Exit status of ``check``: 0 no findings; 1 findings (also when a kernel could not run or timed
out: that is a finding); 2 bad usage or a failure of tritonkit itself; 3 the script raised (its
traceback is printed) and nothing was found; 130 interrupted.
"""
from __future__ import annotations

import argparse
import os
import re
import runpy
import sys
import traceback
from typing import List, Optional, Sequence

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_SCRIPT_FAILED, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")


class _Usage(Exception):
    pass


def _parser() -> argparse.ArgumentParser:
    from ._version import __version__
    p = argparse.ArgumentParser(prog="tritonkit", description="Check, tune and profile Triton kernels.")
    p.add_argument("--version", action="version", version=f"tritonkit {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    c = sub.add_parser("check", help="run a script with every Triton launch checked on the CPU",
                       usage="tritonkit check [--json FILE] [--nan] [--checks KINDS] [--stop-on-first] [--timeout S] "
                             "[--pdb] -- python SCRIPT.py [ARGS...]",
                       description="Run SCRIPT in this process; every @triton.jit launch in it runs in tritonkit's "
                                   "checked CPU interpreter, which reports out-of-bounds accesses, undefined values, "
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
                   help="run only these checks, comma-separated: out_of_bounds, undefined_value, data_race, "
                        "uninitialized_read, int_overflow, nan_inf (default: all but nan_inf)")
    c.add_argument("--no-checks", action="store_true",
                   help="run the interpreter without checks (accesses outside a tensor's storage are still "
                        "dropped, silently); for timing")
    c.add_argument("--engine", choices=("auto", "sequential"), default="auto",
                   help="auto (default): run many programs of a launch at once, falling back to one program at "
                        "a time per launch where it must (the summary says which and why); sequential: one "
                        "program at a time, like TRITON_INTERPRET=1")
    c.add_argument("--batch-memory", type=int, metavar="MB",
                   help="the most memory one value of a batch of programs may take, in MiB (default 256)")
    c.add_argument("--access-maps", type=int, metavar="N", default=0,
                   help="count the bytes every launch moves (all lanes and distinct elements) and FLOPs, and keep "
                        "a map of which elements each tensor argument had read and written, by which program, for "
                        "the first N launches of each kernel, in the --json output (tritonkit doctor draws them)")
    c.add_argument("target", nargs=argparse.REMAINDER, help="python SCRIPT.py ARGS... | python -m MODULE ARGS...")
    from .tune._cache_cli import add_cache_parser
    from .tune._cli import add_tune_parser
    from .tune._distill_cli import add_distill_parser
    from .profile._cli import add_calibrate_parser, add_profile_parser
    from .doctor import add_doctor_parser
    add_tune_parser(sub)
    add_profile_parser(sub)
    add_calibrate_parser(sub)
    add_doctor_parser(sub)
    add_cache_parser(sub)
    d = add_distill_parser(sub)
    d.add_argument("--from", dest="from_file", metavar="FILE.json",
                   help="read the results from a `tritonkit tune --json` file instead of the tuning cache")
    d.add_argument("--cache-dir", metavar="DIR", help="the tuning cache's directory (default $TRITONKIT_CACHE_DIR "
                                                       "or ~/.cache/tritonkit/tune)")
    return p


def _resolve_target(target: List[str]):
    """Split ``python SCRIPT ARGS`` / ``python -m MOD ARGS`` / ``SCRIPT ARGS`` into (kind, what, argv)."""
    if target and target[0] == "--":
        target = target[1:]
    if target and _PYTHON.match(os.path.basename(target[0])) or (target and target[0] == sys.executable):
        target = target[1:]
    if not target:
        raise _Usage("nothing to run: give a script, e.g. `tritonkit check -- python my_kernel.py`")
    if target[0] == "-m":
        if len(target) < 2:
            raise _Usage("`-m` needs a module name")
        return "module", target[1], [target[1], *target[2:]]
    if target[0].startswith("-"):
        raise _Usage(f"unsupported python option {target[0]!r}: give a script path or -m MODULE")
    script = target[0]
    if not os.path.exists(script):
        raise _Usage(f"no such script: {script}")
    if os.path.isdir(script):
        raise _Usage(f"{script} is a directory: give a Python script (or -m MODULE)")
    with open(script, "rb") as fh:
        raw = fh.read()
    if b"\x00" in raw:
        raise _Usage(f"{script} is not a Python script (it is a binary file)")
    try:
        compile(raw, script, "exec")
    except SyntaxError as e:
        raise _Usage(f"{script} is not a Python script: SyntaxError at line {e.lineno}: {e.msg}") from None
    except ValueError as e:
        raise _Usage(f"{script} is not a Python script: {e}") from None
    return "script", script, [script, *target[1:]]


def _checks_option(args) -> Optional[List[str]]:
    """The checks asked for by --checks/--nan/--no-checks (None: the defaults)."""
    from .check import CHECK_KINDS

    if args.no_checks:
        if args.checks or args.nan:
            raise _Usage("--no-checks runs no check: drop --checks/--nan, or --no-checks")
        return []
    if not args.checks:
        return None
    kinds = [k.strip() for k in args.checks.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in CHECK_KINDS]
    if unknown or not kinds:
        raise _Usage(f"--checks: unknown check {', '.join(unknown) or '(none given)'}; choose from "
                     f"{', '.join(CHECK_KINDS)}")
    if args.nan and "nan_inf" not in kinds:
        kinds.append("nan_inf")
    return kinds


def _print_script_traceback(exc: BaseException) -> None:
    """Print the script's traceback without runpy's and tritonkit's own frames."""
    te = traceback.TracebackException.from_exception(exc)
    here = os.path.dirname(os.path.abspath(__file__))
    runpy_file = os.path.abspath(runpy.__file__)
    te.stack = traceback.StackSummary.from_list(
        [fs for fs in te.stack if not os.path.abspath(fs.filename).startswith(here) and
         os.path.abspath(fs.filename) != runpy_file])
    sys.stderr.write("".join(te.format()))


def _internal_error() -> int:
    """Report a failure of tritonkit itself (the exception being handled); returns the exit status."""
    traceback.print_exc()
    print("tritonkit: internal error (the traceback above); please report it", file=sys.stderr)
    return EXIT_USAGE


def _cmd_check(args) -> int:
    from rich.console import Console

    console = Console()
    try:
        kind, what, argv = _resolve_target(args.target)
        if args.json:
            directory = os.path.dirname(os.path.abspath(args.json))
            if not os.path.isdir(directory):
                raise _Usage(f"cannot write --json {args.json}: no directory {directory}")
        if args.timeout is not None and args.timeout <= 0:
            raise _Usage("--timeout must be a positive number of seconds")
        checks = _checks_option(args)
        if args.access_maps < 0:
            raise _Usage("--access-maps N: N is a number of launches per kernel, 0 or more")
        if args.access_maps:
            from .check import CHECK_KINDS
            from .check.checks import AccessMap
            kinds = checks if checks is not None else [k for k in CHECK_KINDS if k != "nan_inf" or args.nan]
            checks = [*kinds, AccessMap(maps_per_kernel=args.access_maps)]
    except _Usage as e:
        print(f"tritonkit check: error: {e}", file=sys.stderr)
        return EXIT_USAGE

    # Kernels defined from now on are Triton's interpreted functions; launches of both kinds
    # (and kernels defined before) are checked through the patched run paths.
    os.environ["TRITON_INTERPRET"] = "1"
    from .check import CheckAborted, UsageError, checking
    from .check._launch import InternalError
    from .check.findings import write_json
    from .report import print_report

    script_failed = False
    interrupted = False
    old_argv, old_path0 = sys.argv, list(sys.path)
    sys.argv = argv
    if kind == "script":
        sys.path.insert(0, os.path.dirname(os.path.abspath(what)))
    else:
        sys.path.insert(0, os.getcwd())
    session = None
    try:
        with checking(checks=checks, stop_on_first=args.stop_on_first, timeout=args.timeout, pdb=args.pdb,
                      nan=args.nan, engine=args.engine,
                      batch_memory=args.batch_memory << 20 if args.batch_memory else None) as session:
            if kind == "script":
                runpy.run_path(what, run_name="__main__")
            else:
                runpy.run_module(what, run_name="__main__", alter_sys=True)
    except InternalError:
        return _internal_error()
    except CheckAborted:
        pass
    except SystemExit as e:
        if e.code not in (None, 0):
            script_failed = True
            print(f"tritonkit check: the script exited with status {e.code}", file=sys.stderr)
    except KeyboardInterrupt:
        interrupted = True
        print("tritonkit check: interrupted", file=sys.stderr)
    except UsageError as e:
        print(f"tritonkit check: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as e:  # the script itself raised
        script_failed = True
        _print_script_traceback(e)
    finally:
        sys.argv = old_argv
        sys.path[:] = old_path0
    if session is None:  # pragma: no cover - checking() failed to start
        return EXIT_USAGE
    print_report(session, console)
    if args.json:
        data = session.to_dict()
        data["script"] = {"target": argv, "failed": script_failed}
        try:
            write_json(args.json, data)
        except OSError as e:
            print(f"tritonkit check: error: cannot write {args.json}: {e}", file=sys.stderr)
            return EXIT_USAGE
    if interrupted:
        return EXIT_INTERRUPTED
    if session.findings:
        return EXIT_FINDINGS
    return EXIT_SCRIPT_FAILED if script_failed else EXIT_OK


def _load_tune_results(kernel: str, args):
    """A kernel's TuneResults for ``distill``: from ``--from FILE`` (``tritonkit tune --json``), or
    from the tuning cache, taking the (device, Triton version, source) with the most keys.

    Raises:
        FileNotFoundError: ``--from`` names no file.
        KeyError: the file or cache has no results for ``kernel``.
    """
    from .tune import TuneResult
    if args.from_file:
        import json
        with open(args.from_file) as fh:
            data = json.load(fh)
        rows = data.get("results", data) if isinstance(data, dict) else data
        out = [TuneResult.from_dict(r) for r in rows if r.get("kernel") == kernel]
        if not out:
            raise KeyError(f"{args.from_file} has no results for {kernel}")
        return out
    from .tune._cache import TuneCache
    groups: dict = {}
    for e in TuneCache(args.cache_dir).show(kernel):
        groups.setdefault((e.device, e.triton, e.source_hash), []).append(
            TuneResult(e.kernel, list(e.key), trials=list(e.trials)))
    if not groups:
        raise KeyError(f"the tuning cache has nothing for {kernel}")
    return max(groups.values(), key=len)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of the ``tritonkit`` console script; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = _parser()
    # argparse treats a leading "--" of REMAINDER inconsistently: split it off ourselves
    if "--" in argv:
        i = argv.index("--")
        head, tail = argv[:i], argv[i + 1:]
    else:
        head, tail = argv, None
    args = parser.parse_args(head)
    if tail is not None:
        args.target = list(getattr(args, "target", None) or []) + tail
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    try:
        if args.command == "check":
            return _cmd_check(args)
        if args.command in ("tune", "profile", "doctor"):
            if args.command == "tune":
                from .tune._cli import run_tune_command as run
            elif args.command == "doctor":
                from .doctor import run_doctor_command as run
            else:
                from .profile._cli import run_profile_command as run
            try:
                return run(args, _resolve_target)
            except _Usage as e:
                print(f"tritonkit {args.command}: error: {e}", file=sys.stderr)
                return EXIT_USAGE
        if args.command == "calibrate":
            from .profile._cli import run_calibrate_command
            return run_calibrate_command(args)
        if args.command == "distill":
            from .tune._distill_cli import run_distill_command
            return run_distill_command(args, lambda name: _load_tune_results(name, args))
        if args.command == "cache":
            from .tune._cache_cli import run_cache_command
            return run_cache_command(args)
    except Exception:  # a failure of tritonkit itself
        return _internal_error()
    return EXIT_USAGE
