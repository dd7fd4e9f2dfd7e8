"""``tritonkit distill KERNEL [--key-names M,N,K] [--out FILE.py] [--json FILE] [--from FILE.json]``:
distil a kernel's tuned winners across keys into ``@triton.heuristics`` (see
:func:`tritonkit.tune.distill`).

Exit status: 0 the heuristics were written; 2 bad usage, too few tuned keys, no results for the
kernel, scikit-learn missing, or a file that cannot be written.
"""
from __future__ import annotations

import argparse
import json
import re
from typing import List, Optional

from . import _status
from ._console import make_console
from ._status import BadUsage
from ._target import writable_path

NAME = "distill"
ORDER = 70


def add_parser(sub) -> argparse.ArgumentParser:
    """Add ``distill`` to the ``tritonkit`` subparsers (its namespace has ``kernel``, ``key_names``,
    ``out``, ``json``, ``tolerance``, ``max_depth``, ``folds``, ``from_file``, ``cache_dir``)."""
    from ..tune._distill import MIN_KEYS
    p = sub.add_parser(
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
    p.add_argument("--from", dest="from_file", metavar="FILE.json",
                   help="read the results from a `tritonkit tune --json` file instead of the tuning cache")
    p.add_argument("--cache-dir", metavar="DIR", help="the tuning cache's directory (default $TRITONKIT_CACHE_DIR "
                                                       "or ~/.cache/tritonkit/tune)")
    return p


def load_results(kernel: str, from_file: Optional[str] = None, cache_dir: Optional[str] = None) -> List:
    """A kernel's :class:`~tritonkit.tune.TuneResult` s: from ``from_file`` (``tritonkit tune --json``),
    or from the tuning cache, taking the (device, Triton version, source) with the most keys.

    Raises:
        FileNotFoundError: ``from_file`` names no file.
        KeyError: the file or cache has no results for ``kernel``.
        ValueError: ``from_file`` is not JSON, or not what ``tritonkit tune --json`` writes.
        TuneCacheError: the cache directory cannot be read, or is not a tuning cache.
        ValueError: ``kernel`` is an empty or blank name.
    """
    from ..tune import TuneCache, TuneResult
    if from_file:
        with open(from_file) as fh:
            try:
                data = json.load(fh)
            except (ValueError, UnicodeDecodeError) as e:
                raise ValueError(f"{from_file} is not JSON ({e}): give the file `tritonkit tune --json` wrote") \
                    from None
        rows = data.get("results") if isinstance(data, dict) else data
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise ValueError(f"{from_file} is not a `tritonkit tune --json` file (no list of results in it)")
        try:
            out = [TuneResult.from_dict(r) for r in rows if r.get("kernel") == kernel]
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"{from_file} has a result that is not a tuning result ({e!r}): give the file "
                             "`tritonkit tune --json` wrote") from None
        if not out:
            raise KeyError(f"{from_file} has no results for {kernel}")
        return out
    groups: dict = {}
    for e in TuneCache(cache_dir).show(kernel):
        groups.setdefault((e.device, e.triton, e.source_hash), []).append(
            TuneResult(e.kernel, list(e.key), trials=list(e.trials)))
    if not groups:
        raise KeyError(f"the tuning cache has nothing for {kernel}")
    return max(groups.values(), key=len)


def run(args, console=None, load=None) -> int:
    """Run ``tritonkit distill``; returns the exit status (see the module).

    Args:
        args: the parsed arguments.
        console: a ``rich.console.Console`` to print to (default: a new one on stdout).
        load: ``load(kernel_name) -> List[TuneResult]`` (default: :func:`load_results` with the
            ``--from`` and ``--cache-dir`` options).

    Raises:
        BadUsage: bad options, an empty or blank kernel name, no results for the kernel, too few
            keys, scikit-learn missing, a cache directory that cannot be read (or is not a tuning
            cache), a file that cannot be written.
    """
    from .._io import atomic_write_text
    from ..report.tune import print_distilled
    from ..tune import distill
    if console is None:
        console = make_console()
    load = load or (lambda name: load_results(name, getattr(args, "from_file", None),
                                              getattr(args, "cache_dir", None)))
    key_names = None
    if getattr(args, "key_names", None):
        key_names = [n.strip() for n in args.key_names.split(",") if n.strip()]
        if not key_names:
            raise BadUsage(f"--key-names {args.key_names!r} names nothing; e.g. --key-names M,N,K")
    if getattr(args, "cache_dir", None) is not None and not args.cache_dir.strip():
        raise BadUsage("--cache-dir is empty: give the cache directory, or leave --cache-dir out for the default one")
    if not (args.kernel or "").strip():
        raise BadUsage(f"the kernel name {args.kernel!r} is empty: give the kernel's name, as the tuner stored its "
                       f"results (`tritonkit cache list` lists them)")
    if getattr(args, "max_depth", 4) < 1:
        raise BadUsage("--max-depth must be at least 1")
    folds = getattr(args, "folds", 5)
    if folds is not None and folds != 0 and folds < 2:
        raise BadUsage("--folds must be at least 2, or 0 for leave-one-out")
    out = args.out or re.sub(r"[^\w\-]", "_", args.kernel) + "_heuristics.py"
    sources = [args.from_file] if getattr(args, "from_file", None) else []
    writable_path(out, "--out", inputs=sources, source_ok=True)  # the generated module: Python source
    if getattr(args, "json", None):
        writable_path(args.json, "--json", inputs=sources + [out])
    try:
        results = list(load(args.kernel) or [])
    except (KeyError, FileNotFoundError) as e:
        raise BadUsage(f"no tuning results for kernel {args.kernel!r} ({e}); tune it at several shapes first") from None
    except ValueError as e:  # a --from file that is not tritonkit tune's JSON
        from ..report.terminal import safe
        raise BadUsage(safe(e)) from None
    except OSError as e:  # a cache directory that cannot be read or is not a tuning cache, an unreadable --from
        from ..report.terminal import safe
        raise BadUsage(safe(e)) from None
    if not results:
        raise BadUsage(f"no tuning results for kernel {args.kernel!r}; tune it at several shapes first")
    try:
        d = distill(results, key_names, tolerance=args.tolerance, depths=range(1, args.max_depth + 1),
                    folds=folds or None)
    except (ValueError, ImportError) as e:
        raise BadUsage(str(e)) from None
    try:
        atomic_write_text(out, d.source)
        if getattr(args, "json", None):
            atomic_write_text(args.json, json.dumps(d.to_dict(), indent=1, default=str) + "\n")
    except OSError as e:
        raise BadUsage(f"cannot write: {e}") from None
    print_distilled(d, console, out)
    return _status.OK
