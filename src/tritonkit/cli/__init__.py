"""The ``tritonkit`` command line.

One module per subcommand in this package (``check.py``, ``tune.py``, ``profile.py``, ...). Each
defines ``NAME``, ``ORDER`` (its place in ``tritonkit --help``), ``add_parser(subparsers)`` and
``run(args) -> int`` (an exit status from :mod:`._status`), and imports what it needs only inside
``run``, so that ``tritonkit check`` loads neither the tuner nor the report's libraries. A module
added here is a new subcommand: :func:`main` finds it.

What every command shares: the user's program after ``--`` (:class:`._target.Target`), the exit
statuses (:mod:`._status`), and errors: a :class:`._status.BadUsage` or a missing optional library
is a message and status 2; a closed stdout (``| head``) ends the printing quietly (status 141 where
a plain print met it, the command's own status where its console did); any other exception is a
failure of tritonkit itself (its traceback and status 2).
"""
from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
import traceback
from types import ModuleType
from typing import Dict, List, Optional, Sequence, Tuple

from .. import _imports
from . import _status
from ._status import BadUsage

__all__ = ["main", "build_parser", "BadUsage"]


def _commands() -> List[ModuleType]:
    """The subcommand modules of this package, in ``ORDER``."""
    mods = [importlib.import_module(f"{__name__}.{m.name}") for m in pkgutil.iter_modules(__path__)
            if not m.name.startswith("_")]
    return sorted(mods, key=lambda m: (getattr(m, "ORDER", 100), m.NAME))


def build_parser() -> Tuple[argparse.ArgumentParser, Dict[str, ModuleType]]:
    """The ``tritonkit`` parser with every subcommand, and the subcommand modules by name."""
    from .._version import __version__
    p = argparse.ArgumentParser(prog="tritonkit", description="Check, tune and profile Triton kernels.")
    p.add_argument("--version", action="version", version=f"tritonkit {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    commands = {}
    for mod in _commands():
        mod.add_parser(sub)
        commands[mod.NAME] = mod
    return p, commands


def internal_error() -> int:
    """Report a failure of tritonkit itself (the exception being handled); returns the exit status."""
    traceback.print_exc()
    print("tritonkit: internal error (the traceback above); please report it", file=sys.stderr)
    return _status.USAGE


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of the ``tritonkit`` console script; returns the exit status (see :mod:`._status`)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser, commands = build_parser()
    # argparse treats a leading "--" of a remainder inconsistently: split it off here
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
        return _status.USAGE
    try:
        return commands[args.command].run(args)
    except (BadUsage, _imports.MissingDependency) as e:
        from ..report.terminal import safe  # a path in the message may hold ESC or a lone surrogate
        print(f"tritonkit {args.command}: error: {safe(e)}", file=sys.stderr)
        return _status.USAGE
    except KeyboardInterrupt:
        print(f"tritonkit {args.command}: interrupted", file=sys.stderr)
        return _status.INTERRUPTED
    except BrokenPipeError:  # stdout's reader went away (`| head`) during a plain print: no traceback
        from ._console import stdout_to_devnull
        stdout_to_devnull()
        return _status.BROKEN_PIPE
    except Exception:  # a failure of tritonkit itself
        return internal_error()
