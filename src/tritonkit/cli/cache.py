"""``tritonkit cache list|show KERNEL|clear [KERNEL] [--failures] [--dir DIR]``: the tuning cache.

KERNEL is a kernel name, or a prefix of names where no kernel has that exact name. Exit status:
0 done; 1 ``show`` found no such kernel; 2 bad usage, a cache directory that cannot be used, or
``clear`` could not clear some files (it says which, and clears the others). ``list`` and
``show`` change nothing on disk: a file they cannot use is named with why and skipped. ``clear``
moves a corrupt file aside (``<file>.corrupt-<timestamp>``) and names it; a ``*.json`` that is not
provably tritonkit's (not named as tritonkit names its files, no valid cache document) is left
alone, named. A directory that is not a tuning cache (files tritonkit did not write, no
``CACHEDIR.TAG`` of tritonkit's: a project folder, a mistyped ``--dir``) is refused, status 2,
with nothing in it read, moved or deleted; so is an empty or blank KERNEL (it would match every
kernel). Every name and string read from the cache is printed escaped
(:func:`tritonkit.report.terminal.safe`).
"""
from __future__ import annotations

import argparse
import os
import warnings

from . import _status
from ._console import make_console
from ._status import BadUsage

NAME = "cache"
ORDER = 60


def add_parser(sub) -> argparse.ArgumentParser:
    """Add ``cache`` (with ``list``, ``show`` and ``clear``) to the ``tritonkit`` subparsers.

    Parsed namespaces have ``cache_action`` (None, "list", "show" or "clear"), ``kernel``,
    ``failures`` and ``cache_dir``.
    """
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--dir", dest="cache_dir", metavar="DIR",
                        help="the cache directory (default: $TRITONKIT_CACHE_DIR, else ~/.cache/tritonkit/tune)")
    c = sub.add_parser("cache", help="list, show or clear the tuning cache",
                       description="List, show or clear the tuning cache of tritonkit.tune (one JSON file per "
                                   "kernel, Triton version and device; times in ms).")
    actions = c.add_subparsers(dest="cache_action", metavar="ACTION")
    actions.add_parser("list", parents=[common], help="one line per kernel and tuning key",
                       description="One line per kernel, device, Triton version and tuning key: the number of "
                                   "configs cached, how many failed, and the winner.")
    s = actions.add_parser("show", parents=[common], help="every cached config of a kernel",
                           description="Every cached config of KERNEL, fastest first, per device, Triton version "
                                       "and tuning key.")
    s.add_argument("kernel", metavar="KERNEL", help="a kernel name, or a prefix of names")
    cl = actions.add_parser("clear", parents=[common], help="forget cached configs",
                            description="Forget the cached configs of KERNEL (a name or a prefix of names), or of "
                                        "every kernel.")
    cl.add_argument("kernel", metavar="KERNEL", nargs="?", default=None,
                    help="a kernel name or a prefix of names (default: every kernel)")
    cl.add_argument("--failures", action="store_true",
                    help="forget only configs that failed, were wrong, crashed or were pruned (so they are tried "
                         "again); keep the measured ones")
    c.set_defaults(cache_parser=c)
    return c


def run(args, console=None) -> int:
    """Run a parsed ``tritonkit cache`` command; returns the exit status (see the module).

    Raises:
        BadUsage: no action, ``show`` without a kernel, an empty or blank kernel name, or a cache
            directory that cannot be used or is not a tuning cache.
    """
    from ..report.terminal import safe
    from ..report.tune import print_cache_entries, print_cache_list
    from ..tune import TuneCache
    from ..tune._cache import TuneCacheError, TuneCacheWarning

    if console is None:
        console = make_console()
    action = getattr(args, "cache_action", None)
    if action not in ("list", "show", "clear"):
        parser = getattr(args, "cache_parser", None)
        if parser is not None:
            import sys
            parser.print_usage(sys.stderr)
        raise BadUsage("choose an action: list, show KERNEL or clear [KERNEL] [--failures]")
    kernel = getattr(args, "kernel", None)
    if (action == "show" or kernel is not None) and not (kernel or "").strip():
        raise BadUsage(f"the kernel name {kernel!r} is empty: give a kernel name (an empty one would match every "
                       f"kernel)" + ("; `tritonkit cache clear` without one clears every kernel" if action == "clear"
                                     else ""))
    cache_dir = getattr(args, "cache_dir", None)
    if cache_dir is not None and not cache_dir.strip():
        raise BadUsage("--dir is empty: give the cache directory, or leave --dir out for the default one")
    cache = TuneCache(cache_dir) if cache_dir else TuneCache()
    try:
        if action == "list":
            print_cache_list(list(cache.entries()), cache.directory, console)
            _print_skipped(cache, console, "skipped")
            return _status.OK
        if action == "show":
            entries = cache.show(kernel)
            _print_skipped(cache, console, "skipped")
            if not entries:
                console.print(f"no cached kernel named {kernel!r} (or starting with it) in {safe(cache.directory)}",
                              markup=False, highlight=False)
                return _status.NOT_FOUND
            print_cache_entries(entries, console)
            return _status.OK
        # a corrupt file that clear moves aside is a TuneCacheWarning; caught here and printed as
        # a line of the report, escaped: shown by the warnings module, its path went to the
        # terminal raw (a file name can hold ESC sequences) under a "cache.py:90:" source line
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", TuneCacheWarning)
            n = cache.clear(kernel, failures_only=bool(getattr(args, "failures", False)))
    except (TuneCacheError, ValueError) as e:
        raise BadUsage(safe(e)) from None
    for w in caught:
        if issubclass(w.category, TuneCacheWarning):
            console.print(f"moved aside: {safe(w.message)}", markup=False, highlight=False)
        else:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    what = "failed config(s)" if args.failures else "config(s)"
    scope = f" of {kernel!r}" if kernel else ""
    console.print(f"removed {n} cached {what}{scope} from {safe(cache.directory)}", markup=False, highlight=False)
    for path, why in cache.left_alone:
        console.print(f"left alone: {safe(os.path.basename(path))}: {safe(why)}", markup=False, highlight=False)
    if cache.skipped:
        _print_skipped(cache, console, "not cleared")
        return _status.USAGE
    return _status.OK


def _print_skipped(cache, console, verb: str) -> None:
    """One line per cache file a command could not use, with why (nothing was changed in it)."""
    from ..report.terminal import safe
    for path, why in cache.skipped:
        console.print(f"{verb}: {safe(os.path.basename(path))}: {safe(why)}", markup=False, highlight=False)
