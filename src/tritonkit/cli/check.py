"""``tritonkit check [options] -- python SCRIPT.py ARGS``: run the script in this process with every
Triton launch checked on the CPU, then print the findings (and write them as JSON).

Exit status: 0 no findings; 1 findings (a kernel that could not run, or timed out, is a finding);
2 bad usage or a failure of tritonkit itself; 3 the script raised (its traceback is printed) and
nothing was found; 130 interrupted.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import List, Optional

from . import _status
from ._status import BadUsage
from ._target import Target, writable_path

NAME = "check"
ORDER = 10


def add_parser(sub) -> argparse.ArgumentParser:
    """Add ``check`` to the ``tritonkit`` subparsers."""
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
                   help="the most memory one value of a batch of programs may take, in MiB (default 256)")
    c.add_argument("--access-maps", type=int, metavar="N", default=0,
                   help="count the bytes every launch moves (all lanes and distinct elements) and FLOPs, and keep "
                        "a map of which elements each tensor argument had read and written, by which program, for "
                        "the first N launches of each kernel, in the --json output (tritonkit doctor draws them)")
    c.add_argument("target", nargs=argparse.REMAINDER, help="python SCRIPT.py ARGS... | python -m MODULE ARGS...")
    return c


def _checks(args) -> Optional[list]:
    """The checks asked for by --checks/--nan/--no-checks/--access-maps (None: the defaults)."""
    from ..check import CHECK_KINDS
    from ..check.checks import default_checks
    from ..check.checks.nan_inf import NanInfCheck

    if args.no_checks:
        if args.checks or args.nan:
            raise BadUsage("--no-checks runs no check: drop --checks/--nan, or --no-checks")
        kinds: Optional[List] = []
    elif not args.checks:
        kinds = None
    else:
        kinds = [k.strip() for k in args.checks.split(",") if k.strip()]
        unknown = [k for k in kinds if k not in CHECK_KINDS]
        if unknown or not kinds:
            raise BadUsage(f"--checks: unknown check {', '.join(unknown) or '(none given)'}; choose from "
                           f"{', '.join(CHECK_KINDS)}")
        if args.nan and NanInfCheck.kind not in kinds:
            kinds.append(NanInfCheck.kind)
    if args.access_maps < 0:
        raise BadUsage("--access-maps N: N is a number of launches per kernel, 0 or more")
    if args.access_maps:
        from ..check.checks import AccessMap
        if kinds is None:
            kinds = [c.kind for c in default_checks(nan=args.nan)]
        kinds = [*kinds, AccessMap(maps_per_kernel=args.access_maps)]
    return kinds


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
    if args.json:
        writable_path(args.json, "--json")
    if args.timeout is not None and args.timeout <= 0:
        raise BadUsage("--timeout must be a positive number of seconds")
    checks = _checks(args)

    from rich.console import Console

    from ..check import CheckAborted, InternalError, UsageError, checking, write_json
    from ..report import print_report
    from . import internal_error

    status = _status.OK
    interrupted = False
    session = None
    # Kernels the script defines are Triton's interpreted functions; launches of both kinds (and
    # kernels defined before) are checked through the patched run paths. The variable is put back
    # after the script: a caller of main() in this process (a test) keeps its environment.
    interpret = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1"
    try:
        with checking(checks=checks, stop_on_first=args.stop_on_first, timeout=args.timeout, pdb=args.pdb,
                      nan=args.nan, engine=args.engine,
                      batch_memory=args.batch_memory << 20 if args.batch_memory else None) as session:
            status = target.run("tritonkit check", passthrough=(UsageError,))
    except InternalError:
        return internal_error()
    except CheckAborted:
        pass
    except KeyboardInterrupt:
        interrupted = True
        print("tritonkit check: interrupted", file=sys.stderr)
    except UsageError as e:
        print(f"tritonkit check: error: {e}", file=sys.stderr)
        return _status.USAGE
    finally:
        if interpret is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = interpret
    if session is None:  # pragma: no cover - checking() failed to start
        return _status.USAGE
    print_report(session, Console())
    if args.json:
        report = session.report(script={"target": target.argv, "failed": status == _status.SCRIPT_FAILED})
        try:
            write_json(args.json, report.to_dict())
        except OSError as e:
            print(f"tritonkit check: error: cannot write {args.json}: {e}", file=sys.stderr)
            return _status.USAGE
    if interrupted:
        return _status.INTERRUPTED
    if session.findings:
        return _status.FINDINGS
    return status
