"""``tritonkit tune -- python SCRIPT.py``: run an unchanged script with every ``@triton.autotune``
kernel tuned by tritonkit, in a child process that is restarted when a config crashes it."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from typing import Callable, Dict, List, Optional, Tuple

from .._io import atomic_write_text
from ._result import TuneResult

EXIT_OK, EXIT_USAGE, EXIT_SCRIPT_FAILED = 0, 2, 3


def add_tune_parser(sub) -> None:
    """Add the ``tune`` subcommand to an argparse subparsers object."""
    t = sub.add_parser("tune", help="run a script with its @triton.autotune kernels tuned by tritonkit",
                       usage="tritonkit tune [--strategy S] [--budget N|SECONDS] [--no-cache] [--json FILE] "
                             "[--restarts N] [--verbose] -- python SCRIPT.py [ARGS...]",
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
    t.add_argument("target", nargs="*", help="python SCRIPT.py ARGS... | python -m MODULE ARGS...")


def run_tune_command(ns, resolve_target: Callable, console=None) -> int:
    """Run ``tritonkit tune`` (the supervisor); returns the exit status.

    Args:
        ns: the parsed arguments.
        resolve_target: ``cli._resolve_target`` (validates the script; raises its usage error).
        console: a rich Console (tests pass a recording one).
    """
    from rich.console import Console

    from ._evaluator import Budget
    from .strategies import DEFAULT_STRATEGY, STRATEGIES
    console = console or Console()
    if ns.list_strategies:
        for name, cls in STRATEGIES.items():
            doc = (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else ""
            console.print(f"{name}{' (default)' if name == DEFAULT_STRATEGY else ''}: {doc}")
        return EXIT_OK
    if ns.strategy and ns.strategy not in STRATEGIES:
        print(f"tritonkit tune: error: unknown strategy {ns.strategy!r}; choose from {', '.join(STRATEGIES)}",
              file=sys.stderr)
        return EXIT_USAGE
    try:
        Budget.parse(ns.budget, space_size=100)
    except ValueError as e:
        print(f"tritonkit tune: error: --budget: {e}", file=sys.stderr)
        return EXIT_USAGE
    if ns.restarts < 0:
        print("tritonkit tune: error: --restarts must be 0 or more", file=sys.stderr)
        return EXIT_USAGE
    kind, what, argv = resolve_target(ns.target)
    if ns.json:
        d = os.path.dirname(os.path.abspath(ns.json))
        if not os.path.isdir(d):
            print(f"tritonkit tune: error: cannot write --json {ns.json}: no directory {d}", file=sys.stderr)
            return EXIT_USAGE
    work = tempfile.mkdtemp(prefix="tritonkit-tune-")
    report = os.path.join(work, "results.jsonl")
    env = dict(os.environ, TRITONKIT_TUNE_SUPERVISED="1", TRITONKIT_TUNE_REPORT=report)
    for name, value in (("STRATEGY", ns.strategy), ("BUDGET", ns.budget)):
        if value:
            env[f"TRITONKIT_TUNE_{name}"] = value
    if ns.verbose:
        env["TRITONKIT_TUNE_VERBOSE"] = "1"
    if ns.no_cache:
        env["TRITONKIT_CACHE_DIR"] = os.path.join(work, "cache")
    elif ns.cache_dir:
        env["TRITONKIT_CACHE_DIR"] = os.path.abspath(ns.cache_dir)
    cmd = [sys.executable, "-m", "tritonkit.tune._child", kind, what, *argv[1:]]
    restarts, status = 0, EXIT_OK
    try:
        while True:
            proc = subprocess.run(cmd, env=env)
            crashed = proc.returncode < 0 or proc.returncode == _exit_poisoned()
            if crashed and restarts < ns.restarts:
                restarts += 1
                why = f"signal {-proc.returncode}" if proc.returncode < 0 else "a config broke the CUDA context"
                console.print(f"[yellow]tritonkit tune: the script stopped ({why}); the config is recorded as "
                              f"crashed; running it again ({restarts}/{ns.restarts})[/yellow]")
                continue
            if crashed:
                console.print(f"[red]tritonkit tune: the script crashed again after {restarts} restarts; giving up"
                              f"[/red]")
                status = EXIT_SCRIPT_FAILED
            elif proc.returncode != 0:
                status = EXIT_SCRIPT_FAILED
            break
        results = merge_reports(report)
        render_results(results, console, restarts)
        if ns.json:
            atomic_write_text(ns.json, json.dumps({"results": [r.to_dict() for r in results], "restarts": restarts},
                                                  indent=1) + "\n")
    except KeyboardInterrupt:
        return 130
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return status


def _exit_poisoned() -> int:
    from ._autotuner import EXIT_CONTEXT_POISONED
    return EXIT_CONTEXT_POISONED


def merge_reports(path: str) -> List[TuneResult]:
    """The TuneResults a (possibly restarted) script reported, one per kernel and key: trials of
    every run merged (a measurement beats a cache answer for the same config), tuning seconds summed."""
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


def render_results(results: List[TuneResult], console, restarts: int = 0) -> None:
    """Print one row per kernel and key: winner, its time and throughput, runner-up, counts, time."""
    from rich.table import Table
    if not results:
        console.print("tritonkit tune: no @triton.autotune kernel was tuned (none launched with more than one "
                      "config, or none found)")
        return
    table = Table(title="tritonkit tune: winners per kernel and key (times in ms)")
    for col in ("kernel", "key", "winner", "ms", "speed", "runner-up", "configs", "tuning s"):
        table.add_column(col, justify="right" if col in ("ms", "speed", "tuning s") else "left",
                         overflow="fold")
    for r in results:
        w, u = r.winner, r.runner_up
        tput = ""
        if r.tflops() is not None:
            tput = f"{r.tflops():.1f} TFLOP/s"
        elif r.gbps() is not None:
            tput = f"{r.gbps():.0f} GB/s"
        counts = {"run": sum(1 for t in r.trials if t.source != "cache" and t.status != "pruned"),
                  "cached": sum(1 for t in r.trials if t.source == "cache")}
        counts.update({s: r.count(s) for s in ("failed", "wrong", "crashed", "pruned")})
        table.add_row(r.kernel, ", ".join(r.key), w.key if w else "-", f"{w.ms:.4f}" if w else "-", tput,
                      f"{u.key} (+{(u.ms / w.ms - 1) * 100:.1f}%)" if (u and w) else "-",
                      ", ".join(f"{n} {k}" for k, n in counts.items() if n), f"{r.tuning_s:.2f}")
    console.print(table)
    bad = [t for r in results for t in r.trials if t.status in ("wrong", "crashed")]
    for t in bad[:10]:
        console.print(f"  {t.status}: {t.key}: {t.error}")
    clocks = [t.sm_clock_mhz for r in results for t in r.trials if t.sm_clock_mhz]
    if clocks:
        console.print(f"SM clock during timing: {min(clocks):.0f}-{max(clocks):.0f} MHz (NVML)")
    if restarts:
        console.print(f"the script was restarted {restarts} time(s) after crashes")


def child_main(argv: Optional[List[str]] = None) -> int:
    """The process ``tritonkit tune`` runs: patch ``triton.autotune``, run the script, report."""
    from .._target import run_target
    argv = list(sys.argv[1:] if argv is None else argv)
    install_patch()
    return run_target(argv[0], argv[1], argv[2:])


def install_patch() -> None:
    """Make ``triton.autotune`` build tritonkit's autotuner, with the defaults the supervisor passed
    in the environment, and report every TuneResult to ``$TRITONKIT_TUNE_REPORT`` as it is made."""
    import triton
    import triton.runtime as rt
    import triton.runtime.autotuner as at

    from . import _autotuner
    from ._autotuner import autotune
    if os.environ.get("TRITONKIT_TUNE_STRATEGY"):
        _autotuner.DEFAULTS["strategy"] = os.environ["TRITONKIT_TUNE_STRATEGY"]
    if os.environ.get("TRITONKIT_TUNE_BUDGET"):
        _autotuner.DEFAULTS["budget"] = os.environ["TRITONKIT_TUNE_BUDGET"]
    if os.environ.get("TRITONKIT_TUNE_VERBOSE"):
        _autotuner.DEFAULTS["verbose"] = True
    report = os.environ.get("TRITONKIT_TUNE_REPORT")
    if report:
        def write(result: TuneResult) -> None:
            with open(report, "a") as fh:
                fh.write(json.dumps(result.to_dict()) + "\n")
                fh.flush()
                os.fsync(fh.fileno())
        _autotuner.ON_RESULT.append(write)
    triton.autotune = autotune
    rt.autotune = autotune
    at.autotune = autotune
