"""``tritonkit distill KERNEL [--key-names M,N,K] [--out FILE.py] [--json FILE]``: distil a kernel's
tuned winners across keys into ``@triton.heuristics`` (see :mod:`tritonkit.tune._distill`).

Exit status: 0 the heuristics were written; 2 bad usage, too few tuned keys, no results for the
kernel, scikit-learn missing, or a file that cannot be written.
"""
from __future__ import annotations

import json
import os
import re
import sys
from typing import Callable, List, Optional

from .._io import atomic_write_text
from ._distill import MIN_KEYS, Distilled, distill
from ._result import TuneResult
from ._space import point_key

EXIT_OK, EXIT_USAGE = 0, 2


def add_distill_parser(subparsers):
    """Add the ``distill`` command to an ``argparse`` sub-parser collection.

    Args:
        subparsers: what ``ArgumentParser.add_subparsers()`` returned.

    Returns:
        The ``distill`` sub-parser (its namespace has ``kernel``, ``key_names``, ``out``, ``json``,
        ``tolerance``, ``max_depth``, ``folds``).
    """
    p = subparsers.add_parser(
        "distill", help="turn a kernel's tuned configs across shapes into @triton.heuristics",
        description="Fit a small decision tree to the configs tuned for KERNEL at many keys (shapes) and write it "
                    "as a Python module: choose_config(args) -> dict and HEURISTICS for @triton.heuristics. "
                    "Prints the depth, the configs and the speed reached on held-out keys (cross-validated) "
                    f"relative to tuning every key. Needs at least {MIN_KEYS} tuned keys and scikit-learn "
                    "(pip install 'tritonkit[distill]').")
    p.add_argument("kernel", help="the kernel's name, as the tuner stored its results")
    p.add_argument("--key-names", metavar="NAMES",
                   help="comma-separated names of the tuning key's arguments in key order, e.g. M,N,K (the "
                        "generated function reads args[NAME]; default key0,key1,...)")
    p.add_argument("--out", metavar="FILE.py",
                   help="where to write the generated module (default: ./<kernel>_heuristics.py)")
    p.add_argument("--json", metavar="FILE", help="also write the whole result (regret per key, tree) as JSON")
    p.add_argument("--tolerance", type=float, default=0.03, metavar="FRACTION",
                   help="a config within this fraction of a key's best counts as good there (default 0.03)")
    p.add_argument("--max-depth", type=int, default=4, metavar="D",
                   help="choose the tree depth among 1..D by cross-validation (default 4)")
    p.add_argument("--folds", type=int, default=5, metavar="K",
                   help="cross-validation folds; 0 for leave-one-out (default 5)")
    return p


def _pct(v: Optional[float]) -> str:
    return "n/a" if v is None else f"{100 * v:.1f}%"


def print_distilled(d: Distilled, console, out: Optional[str] = None) -> None:
    """Print a :class:`Distilled` result with rich: depth, configs, held-out regret, notes.

    Args:
        d: the result.
        console: a ``rich.console.Console``.
        out: the path the module was written to, to say so.
    """
    from rich.table import Table

    ho, base = d.held_out, d.baseline
    console.print(f"[bold]{d.kernel}[/]: {d.n_keys} tuned keys -> decision tree of depth {d.depth} "
                  f"({d.leaves} case(s)) splitting on {', '.join(d.splits_on()) or 'nothing: one config for all keys'}")
    if d.cv_speed:
        console.print("  cross-validated speed by depth (+ratios: may split on ratios of key arguments): "
                      + ", ".join(f"{k}: {_pct(v)}" for k, v in sorted(d.cv_speed.items())))
    t = Table(title="configs used", title_justify="left")
    t.add_column("config")
    t.add_column("training keys", justify="right")
    t.add_column(f"within {100 * d.tolerance:g}%", justify="right")
    counts = {}
    for leaf in d._model.root.leaves():
        n, w = counts.get(leaf.config, (0, 0))
        counts[leaf.config] = (n + leaf.n_train, w + leaf.n_within)
    for c in d.configs:
        n, w = counts.get(point_key(c), (0, 0))
        t.add_row(point_key(c), str(n), str(w))
    console.print(t)
    style = "green" if d.meets_goal else "yellow"
    console.print(f"held out ({ho.method}): [{style}]{_pct(ho.speed_geomean)}[/] of per-key tuned speed "
                  f"(geomean; goal {_pct(d.goal)}), worst key {_pct(ho.speed_worst)}; slowdown mean "
                  f"{_pct(ho.slowdown_mean)}, worst {_pct(ho.slowdown_worst)}; "
                  f"one config for all keys: {_pct(base.speed_geomean)}")
    if ho.unknown or ho.failed:
        console.print(f"[yellow]held out: picked config not measured at {len(ho.unknown)} key(s), failed at "
                      f"{len(ho.failed)}; left out of the statistics[/]")
    if not d.meets_goal:
        console.print(f"[yellow]below the goal of {_pct(d.goal)}: tune more shapes near the worst keys, or "
                      "raise --max-depth[/]")
    for n in d.notes:
        console.print(f"[dim]note: {n}[/]", highlight=False)
    if out:
        console.print(f"wrote {out}")


def run_distill_command(ns, load_results: Callable[[str], List[TuneResult]], console=None) -> int:
    """Run ``tritonkit distill`` for a parsed namespace (see :func:`add_distill_parser`).

    Args:
        ns: the parsed arguments.
        load_results: ``load_results(kernel_name) -> List[TuneResult]``, e.g. the tuning cache's loader.
        console: a ``rich.console.Console`` to print to (default: a new one on stdout).

    Returns:
        The exit status: 0 written, 2 an error (printed to stderr).
    """
    if console is None:
        from rich.console import Console
        console = Console()

    def error(msg: str) -> int:
        print(f"tritonkit distill: error: {msg}", file=sys.stderr)
        return EXIT_USAGE

    key_names = None
    if getattr(ns, "key_names", None):
        key_names = [n.strip() for n in ns.key_names.split(",") if n.strip()]
        if not key_names:
            return error(f"--key-names {ns.key_names!r} names nothing; e.g. --key-names M,N,K")
    if getattr(ns, "max_depth", 4) < 1:
        return error("--max-depth must be at least 1")
    folds = getattr(ns, "folds", 5)
    if folds is not None and folds != 0 and folds < 2:
        return error("--folds must be at least 2, or 0 for leave-one-out")
    out = ns.out or re.sub(r"[^\w\-]", "_", ns.kernel) + "_heuristics.py"
    for path, flag in ((out, "--out"), (getattr(ns, "json", None), "--json")):
        if path and not os.path.isdir(os.path.dirname(os.path.abspath(path))):
            return error(f"cannot write {flag} {path}: no directory {os.path.dirname(os.path.abspath(path))}")
    try:
        results = list(load_results(ns.kernel) or [])
    except (KeyError, FileNotFoundError) as e:
        return error(f"no tuning results for kernel {ns.kernel!r} ({e}); tune it at several shapes first")
    if not results:
        return error(f"no tuning results for kernel {ns.kernel!r}; tune it at several shapes first")
    try:
        d = distill(results, key_names, tolerance=ns.tolerance, depths=range(1, ns.max_depth + 1),
                    folds=folds or None)
    except (ValueError, ImportError) as e:
        return error(str(e))
    try:
        atomic_write_text(out, d.source)
        if getattr(ns, "json", None):
            atomic_write_text(ns.json, json.dumps(d.to_dict(), indent=1, default=str) + "\n")
    except OSError as e:
        return error(f"cannot write: {e}")
    print_distilled(d, console, out)
    return EXIT_OK
