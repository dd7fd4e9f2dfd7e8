"""``tritonkit tune [options] -- python SCRIPT.py ARGS``: run an unchanged script with every
``@triton.autotune`` kernel tuned by tritonkit, in a child process that is run again when a config
crashes it (a supervisor); then one row per kernel and key.

Exit status: 0 the script ran; 2 bad usage; 3 the script failed (or kept crashing); 130 interrupted.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from typing import Dict, List, Tuple

from . import _status
from ._console import add_width_option, make_console
from ._status import BadUsage
from ._target import Target, writable_path

NAME = "tune"
ORDER = 20


def add_parser(sub) -> argparse.ArgumentParser:
    """Add ``tune`` to the ``tritonkit`` subparsers."""
    t = sub.add_parser("tune", help="run a script with its @triton.autotune kernels tuned by tritonkit",
                       usage="tritonkit tune [--strategy S] [--budget N|SECONDS] [--no-cache] [--json FILE] "
                             "[--restarts N] [--verbose] [--width N] -- python SCRIPT.py [ARGS...]\n"
                             "       tritonkit tune sweep FILE.py "
                             "[--workers N] [--cluster ray] [--gpu-type T] [--out DIR] [--strategy S] [--budget B]\n"
                             "       [--cache-dir DIR]",
                       description="Run SCRIPT (unchanged) with every @triton.autotune kernel tuned by tritonkit: "
                                   "configs compiled in parallel, timed with L2 flushes and interleaved repeats, "
                                   "checked against a reference, and remembered per config in the cache. A config "
                                   "that crashes the process is recorded and the script is run again without it.")
    t.add_argument("--strategy", help="exhaustive, random, tpe, coordinate, or the default (see `tritonkit tune "
                                      "--list-strategies`); default: exhaustive for config lists, the default "
                                      "strategy with 20%% of the space for spaces and budgets")
    t.add_argument("--budget", help="configs per key (60), a share of the configs (20%%), seconds (30s), or both "
                                    "(60,30s)")
    t.add_argument("--no-cache", action="store_true", help="do not read or keep earlier measurements (a "
                                                           "temporary cache still carries crashes across restarts)")
    t.add_argument("--cache-dir", metavar="DIR", help="the tuning cache's directory (default "
                                                       "$TRITONKIT_CACHE_DIR or ~/.cache/tritonkit/tune)")
    t.add_argument("--json", metavar="FILE", help="write every kernel's and key's results as JSON")
    t.add_argument("--restarts", type=int, default=10, metavar="N",
                   help="how many times a crashed script is run again (default 10)")
    t.add_argument("--verbose", action="store_true", help="print every config's outcome as it is decided")
    t.add_argument("--list-strategies", action="store_true", help="list the search strategies and exit")
    t.add_argument("--workers", type=int, metavar="N", help="`tune sweep`: workers, one per GPU (default: every "
                                                             "visible GPU)")
    t.add_argument("--cluster", choices=("local", "ray"), help="`tune sweep`: local worker processes (default) or "
                                                               "a Ray cluster (RAY_ADDRESS, else a local Ray)")
    t.add_argument("--gpu-type", metavar="T", help="`tune sweep`: tune only on GPUs of this type (H100, A100, ...; "
                                                    "with --cluster ray, actors go only to nodes of that type); "
                                                    "default: every type, each tuned separately")
    t.add_argument("--out", metavar="DIR", help="`tune sweep`: where the tables, heuristics and results go "
                                                "(default .)")
    add_width_option(t)
    t.add_argument("target", nargs="*", help="python SCRIPT.py ARGS... | python -m MODULE ARGS...")
    return t


def run(args, console=None) -> int:
    """Run ``tritonkit tune`` (the supervisor); returns the exit status (see the module).

    Args:
        args: the parsed arguments.
        console: a rich Console (tests pass a recording one).
    """
    from .._io import atomic_write_text
    from ..report.tune import render_results
    from ..tune import EXIT_CONTEXT_POISONED, Budget, TuneReport
    from ..tune.strategies import DEFAULT_STRATEGY, STRATEGIES
    console = console or make_console(getattr(args, "width", None))
    if args.list_strategies:
        for name, cls in STRATEGIES.items():
            doc = (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else ""
            console.print(f"{name}{' (default)' if name == DEFAULT_STRATEGY else ''}: {doc}")
        return _status.OK
    if args.strategy and args.strategy not in STRATEGIES:
        raise BadUsage(f"unknown strategy {args.strategy!r}; choose from {', '.join(STRATEGIES)}")
    try:
        Budget.parse(args.budget, space_size=100)
    except ValueError as e:
        raise BadUsage(f"--budget: {e}") from None
    if args.restarts < 0:
        raise BadUsage("--restarts must be 0 or more")
    if args.target[:1] == ["sweep"]:
        return _sweep(args, console)
    if args.workers is not None or args.cluster or args.out or args.gpu_type:
        raise BadUsage("--workers, --cluster, --gpu-type and --out are for `tritonkit tune sweep FILE.py`; a script's "
                       "own launches are tuned in its process, on its GPU")
    if args.cache_dir is not None and not args.cache_dir.strip():
        raise BadUsage("--cache-dir is empty: give the cache directory, or leave --cache-dir out for the default one")
    if not args.no_cache:  # a folder that is not a cache: said now, not by the script's first tuned launch
        from ..tune import TuneCache
        from ..tune._cache import TuneCacheError
        try:
            TuneCache(args.cache_dir or None).check()
        except TuneCacheError as e:
            from ..report.terminal import safe
            raise BadUsage(safe(e)) from None
    target = Target.parse(args.target)
    if args.json:
        writable_path(args.json, "--json", target)
    from ..doctor import gpu_present
    if not os.environ.get("TRITONKIT_TUNE_ON_CPU") and not gpu_present():
        raise BadUsage("no CUDA GPU here (torch.cuda.is_available() is False): tuning times each config on a GPU. "
                       "Without one, the script's @triton.autotune kernels would only run their first config; "
                       "`tritonkit check` runs them on the CPU and checks every config, and `tritonkit distill "
                       "--from FILE.json` works on results tuned elsewhere")
    work = tempfile.mkdtemp(prefix="tritonkit-tune-")
    report = os.path.join(work, "results.jsonl")
    env = dict(os.environ, TRITONKIT_TUNE_SUPERVISED="1", TRITONKIT_TUNE_REPORT=report)
    for name, value in (("STRATEGY", args.strategy), ("BUDGET", args.budget)):
        if value:
            env[f"TRITONKIT_TUNE_{name}"] = value
    if args.verbose:
        env["TRITONKIT_TUNE_VERBOSE"] = "1"
    if args.no_cache:
        env["TRITONKIT_CACHE_DIR"] = os.path.join(work, "cache")
    elif args.cache_dir:
        env["TRITONKIT_CACHE_DIR"] = os.path.abspath(args.cache_dir)
    cmd = [sys.executable, "-m", "tritonkit.cli._child", "tune", *target.words()]
    restarts, status = 0, _status.OK
    try:
        while True:
            proc = subprocess.run(cmd, env=env)
            crashed = proc.returncode < 0 or proc.returncode == EXIT_CONTEXT_POISONED
            if crashed and restarts < args.restarts:
                restarts += 1
                why = f"signal {-proc.returncode}" if proc.returncode < 0 else "a config broke the CUDA context"
                console.print(f"[yellow]tritonkit tune: the script stopped ({why}); the config is recorded as "
                              f"crashed; running it again ({restarts}/{args.restarts})[/yellow]")
                continue
            if crashed:
                console.print(f"[red]tritonkit tune: the script crashed again after {restarts} restarts; giving up"
                              f"[/red]")
                status = _status.SCRIPT_FAILED
            elif proc.returncode != 0:
                status = _status.SCRIPT_FAILED
            break
        results = merge_reports(report)
        if args.json:  # before the report is printed: a reader that closes stdout early loses nothing
            try:
                atomic_write_text(args.json, json.dumps(TuneReport(results, restarts).to_dict(), indent=1) + "\n")
            except OSError as e:
                from ..report.terminal import safe
                print(f"tritonkit tune: error: cannot write {safe(args.json)}: {safe(e)}", file=sys.stderr)
                status = status if status != _status.OK else _status.USAGE
        render_results(results, console, restarts)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return status


def merge_reports(path: str) -> List:
    """The :class:`~tritonkit.tune.TuneResult` s a (possibly restarted) script reported, one per
    kernel and key: trials of every run merged (a measurement beats a cache answer for the same
    config), tuning seconds summed. Lines cut by a crash are skipped."""
    from ..tune import TuneResult
    merged: Dict[Tuple[str, Tuple[str, ...]], TuneResult] = {}
    if not os.path.exists(path):
        return []
    with open(path) as fh:
        for line in fh:
            line = line.strip()
            if not line:
                continue
            try:
                r = TuneResult.from_dict(json.loads(line))
            except (ValueError, KeyError, TypeError):
                continue  # a line cut by a crash
            k = (r.kernel, tuple(r.key))
            if k not in merged:
                merged[k] = r
                continue
            m = merged[k]
            by_key = {t.key: t for t in m.trials}
            for t in r.trials:
                old = by_key.get(t.key)
                if old is None or (old.source == "cache" and t.source != "cache"):
                    by_key[t.key] = t
            m.trials = list(by_key.values())
            m.tuning_s += r.tuning_s
            m.flops = m.flops or r.flops
            m.bytes = m.bytes or r.bytes
    return list(merged.values())


def _sweep(args, console) -> int:
    """``tritonkit tune sweep FILE.py``: a sweep on every GPU (see :mod:`tritonkit.tune._workers._sweep_file`).
    Its tables have one line per row at the console's width (:class:`~tritonkit.report.fit.FitTable`)."""
    from ..report.fit import Column, FitTable
    from ..report.terminal import safe
    from ..tune._workers import WorkerError
    from ..tune._workers._sweep_file import run_file
    if len(args.target) != 2:
        raise BadUsage("usage: tritonkit tune sweep FILE.py [--workers N] [--cluster ray] [--gpu-type T] [--out DIR] "
                       "[--strategy S] [--budget B]")
    if args.workers is not None and args.workers < 1:
        raise BadUsage("--workers must be at least 1")
    from .._imports import MissingDependency
    engine = args.cluster or "local"
    try:
        if os.environ.get("TRITONKIT_TUNE_ON_CPU"):  # workers run Triton's CPU interpreter
            from ..tune._workers._sweep import make_engine
            engine = make_engine(engine, args.workers, env={"TRITON_INTERPRET": "1"},
                                 **({"gpu_type": args.gpu_type} if engine == "ray" else {}))
    except (ValueError, MissingDependency) as e:
        raise BadUsage(str(e)) from None
    if engine == "local" or (engine == "ray" and not os.environ.get("RAY_ADDRESS")):
        from ..doctor import gpu_present
        if not gpu_present():
            raise BadUsage("no CUDA GPU here: a sweep times each config on the GPUs of this host (--cluster ray "
                           "with RAY_ADDRESS set for a Ray cluster's; TRITONKIT_TUNE_ON_CPU=1 runs the kernels in "
                           "Triton's CPU interpreter)")
    try:
        res = run_file(args.target[1], engine=engine, workers=args.workers, strategy=args.strategy,
                       budget=args.budget, cache=False if args.no_cache else (args.cache_dir or True),
                       out_dir=args.out or ".", gpu_type=args.gpu_type)
    except (FileNotFoundError, ValueError, MissingDependency) as e:
        raise BadUsage(str(e)) from None
    except WorkerError as e:
        console.print(f"[red]tritonkit tune sweep: {e}[/red]")
        return _status.SCRIPT_FAILED
    for device, results in res.results.items():
        t = FitTable(Column("key", shorten=True, key=True, min_width=16), Column("winner", shorten=True, min_width=16),
                     *(Column(c, justify="right") for c in ("ms", "measured", "cached", "not ok")),
                     title=f"{res.kernel} on {device}")
        for r in results:
            w = r.winner
            t.add_row(safe(", ".join(r.key)), safe(w.key) if w else "-", f"{w.ms:.4f}" if w else "-",
                      str(sum(x.source != "cache" for x in r.trials)), str(sum(x.source == "cache" for x in r.trials)),
                      str(sum(not x.ok for x in r.trials)))
        console.print(t)
    t = FitTable(Column("gpu", key=True), Column("device", shorten=True, min_width=12),
                 Column("host", shorten=True, min_width=12), Column("pids"),
                 *(Column(c, justify="right") for c in ("measured", "busy s", "deaths", "requeued", "crashed")),
                 title=f"workers ({res.seconds:.1f} s)")
    for w in res.workers:
        t.add_row(w.gpu, w.device, w.host, ",".join(map(str, w.pids)), str(w.measured), f"{w.busy_s:.1f}",
                  str(w.deaths), str(w.requeued), str(w.crashed))
    console.print(t)
    for f in res.files:
        console.print(f"wrote {f}")
    for n in res.notes:
        console.print(f"[yellow]{n}[/yellow]")
    return _status.OK
