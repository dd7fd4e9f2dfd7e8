"""``tritonkit cache``: list, show and clear the tuning cache.

``tritonkit cache list [--dir DIR]``, ``tritonkit cache show KERNEL [--dir DIR]``,
``tritonkit cache clear [KERNEL] [--failures] [--dir DIR]``. KERNEL is a kernel name, or a prefix of
names where no kernel has that exact name.

Exit status: 0 done; 1 ``show`` found no such kernel; 2 bad usage or a cache directory that cannot
be used.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import List, Optional, Sequence

EXIT_OK, EXIT_NOT_FOUND, EXIT_USAGE = 0, 1, 2


def add_cache_parser(subparsers) -> argparse.ArgumentParser:
    """Add the ``cache`` subcommand (with ``list``, ``show`` and ``clear``) to a parser.

    Args:
        subparsers: the object ``ArgumentParser.add_subparsers()`` returned.

    Returns:
        The ``cache`` parser. Parsed namespaces have ``command == "cache"`` (where the caller's
        subparsers use ``dest="command"``), ``cache_action`` (None, "list", "show" or "clear"),
        ``kernel``, ``failures`` and ``cache_dir``; hand them to :func:`run_cache_command`.
    """
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--dir", dest="cache_dir", metavar="DIR",
                        help="the cache directory (default: $TRITONKIT_CACHE_DIR, else ~/.cache/tritonkit/tune)")
    c = subparsers.add_parser("cache", help="list, show or clear the tuning cache",
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


def run_cache_command(ns: argparse.Namespace, console=None) -> int:
    """Run a parsed ``tritonkit cache`` command.

    Args:
        ns: the namespace from a parser built with :func:`add_cache_parser`.
        console: a ``rich.console.Console`` to print to (default: a new one on stdout).

    Returns:
        The exit status: 0 done, 1 ``show`` matched no kernel, 2 bad usage or an unusable cache
        directory (the message is on stderr).
    """
    from rich.console import Console

    from ._cache import TuneCache, TuneCacheError

    if console is None:
        console = Console()
        if not console.is_terminal and "COLUMNS" not in os.environ:
            console = Console(width=160)  # piped: do not fold the tables at 80 columns
    action = getattr(ns, "cache_action", None)
    if action not in ("list", "show", "clear"):
        parser = getattr(ns, "cache_parser", None)
        if parser is not None:
            parser.print_usage(sys.stderr)
        print("tritonkit cache: error: choose an action: list, show KERNEL or clear [KERNEL] [--failures]",
              file=sys.stderr)
        return EXIT_USAGE
    kernel = getattr(ns, "kernel", None)
    if action == "show" and not kernel:
        print("tritonkit cache show: error: give a kernel name", file=sys.stderr)
        return EXIT_USAGE
    cache = TuneCache(ns.cache_dir) if getattr(ns, "cache_dir", None) else TuneCache()
    try:
        if action == "list":
            return _list(cache, console)
        if action == "show":
            return _show(cache, kernel, console)
        return _clear(cache, kernel, bool(getattr(ns, "failures", False)), console)
    except TuneCacheError as e:
        print(f"tritonkit cache {action}: error: {e}", file=sys.stderr)
        return EXIT_USAGE


def cache_main(argv: Optional[Sequence[str]] = None) -> int:
    """``tritonkit cache ...`` on its own: parse ``argv`` (the words after ``cache``) and run it.

    Args:
        argv: e.g. ``["list", "--dir", "/tmp/c"]``; default ``sys.argv[1:]``.

    Returns:
        The exit status (see :func:`run_cache_command`); 2 where the arguments do not parse.
    """
    p = argparse.ArgumentParser(prog="tritonkit")
    sub = p.add_subparsers(dest="command")
    add_cache_parser(sub)
    try:
        ns = p.parse_args(["cache", *(sys.argv[1:] if argv is None else argv)])
    except SystemExit as e:
        return EXIT_OK if e.code in (0, None) else EXIT_USAGE
    return run_cache_command(ns)


def _key_text(key: Sequence[str]) -> str:
    return ", ".join(key) if key else "(none)"


def _ms(ms: Optional[float]) -> str:
    return "-" if ms is None else f"{ms:.4f}"


def _list(cache, console) -> int:
    from rich.table import Table
    from rich.text import Text

    entries = list(cache.entries())
    if not entries:
        console.print(f"the tuning cache in {cache.directory} is empty", markup=False, highlight=False)
        return EXIT_OK
    t = Table(title=Text(f"tuning cache: {cache.directory}"), title_justify="left")
    fold = {"overflow": "fold", "ratio": 1}
    for name, kw in (("kernel", fold), ("device", fold), ("triton", {}), ("key", fold),
                     ("configs", {"justify": "right"}), ("failed", {"justify": "right"}),
                     ("winner", {"overflow": "fold", "ratio": 2}),
                     ("ms", {"justify": "right"})):
        t.add_column(name, **kw)
    for e in entries:
        t.add_row(*map(Text, (e.kernel, e.device, e.triton, _key_text(e.key), str(e.configs), str(e.failures),
                              e.winner or "-", _ms(e.winner_ms))))
    console.print(t)
    files = len({e.path for e in entries})
    console.print(f"{len(entries)} key(s) in {files} file(s); times in ms", markup=False, highlight=False)
    return EXIT_OK


def _show(cache, kernel: str, console) -> int:
    from rich.table import Table
    from rich.text import Text

    entries: List = cache.show(kernel)
    if not entries:
        console.print(f"no cached kernel named {kernel!r} (or starting with it) in {cache.directory}",
                      markup=False, highlight=False)
        return EXIT_NOT_FOUND
    for e in entries:
        title = Text(f"{e.kernel}  key [{_key_text(e.key)}]  {e.device}  triton {e.triton}  source {e.source_hash}")
        t = Table(title=title, title_justify="left", caption=Text(e.path), caption_justify="left")
        for name, kw in (("#", {"justify": "right"}), ("config", {"overflow": "fold", "ratio": 2}), ("status", {}),
                         ("ms", {"justify": "right"}), ("95% CI ms", {"justify": "right"}),
                         ("samples", {"justify": "right"}), ("error", {"overflow": "fold", "ratio": 1})):
            t.add_column(name, **kw)
        for i, tr in enumerate(e.trials, 1):
            ci = f"{tr.ci_ms[0]:.4f}-{tr.ci_ms[1]:.4f}" if tr.ci_ms else "-"
            mark = " *" if tr.key == e.winner else ""
            error = tr.error if len(tr.error) <= 200 else tr.error[:197] + "..."
            t.add_row(*map(Text, (str(i), tr.key + mark, tr.status, _ms(tr.ms) if tr.ok else "-", ci,
                                  str(tr.samples) if tr.samples else "-", error)))
        console.print(t)
        extra = f"; {e.in_flight} config(s) in flight" if e.in_flight else ""
        console.print(f"{e.configs} config(s), {e.failures} not ok{extra}; * the winner"
                      + (f" ({_ms(e.winner_ms)} ms)" if e.winner else " (none ran correctly)"),
                      markup=False, highlight=False)
    return EXIT_OK


def _clear(cache, kernel: Optional[str], failures: bool, console) -> int:
    n = cache.clear(kernel, failures_only=failures)
    what = "failed config(s)" if failures else "config(s)"
    scope = f" of {kernel!r}" if kernel else ""
    console.print(f"removed {n} cached {what}{scope} from {cache.directory}", markup=False, highlight=False)
    return EXIT_OK
