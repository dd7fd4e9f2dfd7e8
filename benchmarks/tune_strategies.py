"""How good are ``tritonkit.tune``'s search strategies? Replay recorded and synthetic timing
landscapes and measure how close each strategy gets to the optimum with a fixed share of the space.

Landscapes (all over the same 384-config BM/BN/BK/warps/stages matmul grid):

* ``real``: the shared recording of a bf16 4096^3 matmul on an H100 (``tests/data/
  matmul_bf16_4096_h100_landscape.json``; 330 configs ran, 54 out of resources; the best is a
  needle: only one config within 5% of it);
* ``real+noise``: the same with 1.5% multiplicative log-normal noise on every time (a fresh draw
  per seed; the strategy sees noisy times, the ratio below uses the true ones);
* ``real-permBM`` / ``real-permStages``: the recording with BLOCK_M's (num_stages') values permuted
  (a fresh permutation per seed), so the order of that parameter means nothing;
* ``bowl``, ``roofline``, ``multimodal``: synthetic landscapes of
  :func:`tritonkit.tune._replay.synthetic_landscape` (a fresh instance per seed): a smooth bowl, a
  roofline model with strong interactions, several wells with a narrow global one.

For each strategy, landscape and seed, the strategy gets a budget of ``--budget`` of the space (20%
= 76 evaluations; failed configs count) and we record the true time of the config it reports as
best over the true optimum. Reported per strategy and landscape: the hit rate (share of seeds
within 2% of the optimum), the median ratio, the mean number of evaluations and the mean wall
seconds of strategy overhead per run (replay itself costs microseconds).

Usage::

    python benchmarks/tune_strategies.py [--seeds 20] [--budget 20%] [--strategies hybrid,tpe]
                                         [--landscapes real,bowl] [--json FILE]
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import sys
import time
from typing import Callable, Dict, List

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "src"))

from tritonkit.tune._evaluator import Budget, Evaluator  # noqa: E402
from tritonkit.tune._replay import ReplayRunner, permute_param, synthetic_landscape  # noqa: E402
from tritonkit.tune.strategies import DEFAULT_STRATEGY, STRATEGIES, get_strategy  # noqa: E402

LANDSCAPE_FILE = os.path.join(os.path.dirname(HERE), "tests", "data", "matmul_bf16_4096_h100_landscape.json")
HIT = 1.02  # within 2% of the optimum


def landscapes(path: str) -> Dict[str, Callable[[int], ReplayRunner]]:
    """Landscape name -> ``make(seed)`` returning a fresh :class:`ReplayRunner`."""
    real = ReplayRunner.from_file(path, shape="4096").landscape()
    return {
        "real": lambda s: ReplayRunner(real),
        "real+noise": lambda s: ReplayRunner(real, noise=0.015, seed=s),
        "real-permBM": lambda s: ReplayRunner(permute_param(real, "BM", s)),
        "real-permStages": lambda s: ReplayRunner(permute_param(real, "num_stages", s)),
        "bowl": lambda s: ReplayRunner(synthetic_landscape("bowl", s)),
        "roofline": lambda s: ReplayRunner(synthetic_landscape("roofline", s)),
        "multimodal": lambda s: ReplayRunner(synthetic_landscape("multimodal", s)),
    }


def run_once(strategy: str, runner: ReplayRunner, budget: str, seed: int) -> Dict[str, float]:
    """One search; returns the true best/optimum ratio, evaluations and overhead seconds."""
    candidates = runner.points()
    ev = Evaluator(candidates, runner, Budget.parse(budget, len(candidates)))
    t0 = time.perf_counter()
    get_strategy(strategy, seed=seed).run(ev)
    wall = time.perf_counter() - t0
    if ev.budget.evaluations is not None and ev.evaluations > ev.budget.evaluations:
        raise AssertionError(f"{strategy} spent {ev.evaluations} evaluations of a budget of {ev.budget.evaluations}")
    best = ev.best
    ratio = runner.true_ms(best.point) / runner.best.ms if best is not None else math.inf
    return {"ratio": ratio, "evaluations": ev.evaluations, "overhead_s": wall}


def machine() -> str:
    from _machine import cpu_model
    cpu = cpu_model()
    try:
        import optuna
        optuna_v = optuna.__version__
    except ImportError:  # pragma: no cover
        optuna_v = "not installed"
    return (f"{cpu}, {os.cpu_count()} logical CPUs; Python {platform.python_version()}, numpy {np.__version__}, "
            f"optuna {optuna_v}; {datetime.datetime.now().isoformat(timespec='seconds')}")


def main(argv: List[str] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=20, help="seeds per strategy and landscape (default 20)")
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--budget", default="20%", help="budget per search (default 20%% of the space)")
    ap.add_argument("--strategies", default=",".join(STRATEGIES))
    ap.add_argument("--landscapes", default=None, help="comma-separated subset (default all)")
    ap.add_argument("--landscape-file", default=LANDSCAPE_FILE)
    ap.add_argument("--json", default=None, help="also write the raw results here")
    args = ap.parse_args(argv)

    from rich.console import Console
    from rich.table import Table

    console = Console(width=None if sys.stdout.isatty() else 170)
    all_l = landscapes(args.landscape_file)
    lnames = args.landscapes.split(",") if args.landscapes else list(all_l)
    snames = args.strategies.split(",")
    for n in lnames:
        if n not in all_l:
            ap.error(f"unknown landscape {n!r}; landscapes: {', '.join(all_l)}")
    for n in snames:
        if n not in STRATEGIES:
            ap.error(f"unknown strategy {n!r}; strategies: {', '.join(STRATEGIES)}")
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    console.print(f"[bold]tritonkit.tune strategies[/]: budget {args.budget} of the space, {len(seeds)} seeds "
                  f"({seeds[0]}..{seeds[-1]}), hit = within {100 * (HIT - 1):.0f}% of the optimum")
    console.print(f"machine: {machine()}")

    results: Dict[str, Dict[str, List[Dict[str, float]]]] = {s: {n: [] for n in lnames} for s in snames}
    t_all = time.perf_counter()
    with console.status("replaying...") as status:
        for s in snames:
            for n in lnames:
                status.update(f"{s} on {n}")
                for seed in seeds:
                    results[s][n].append(run_once(s, all_l[n](seed), args.budget, seed))

    def hit(rows):
        return float(np.mean([r["ratio"] <= HIT for r in rows]))

    t1 = Table(title=f"hit rate within 2% at {args.budget} budget (median best/optimum ratio)")
    t1.add_column("strategy")
    for n in lnames:
        t1.add_column(n, justify="right")
    t1.add_column("mean hit", justify="right")
    for s in snames:
        cells = [f"{100 * hit(results[s][n]):.0f}% ({np.median([r['ratio'] for r in results[s][n]]):.3f})"
                 for n in lnames]
        mean = np.mean([hit(results[s][n]) for n in lnames])
        name = f"{s} (default)" if s == DEFAULT_STRATEGY else s
        t1.add_row(name, *cells, f"{100 * mean:.0f}%")
    console.print(t1)

    t2 = Table(title="mean evaluations / mean strategy overhead per run (wall s)")
    t2.add_column("strategy")
    for n in lnames:
        t2.add_column(n, justify="right")
    for s in snames:
        t2.add_row(s, *[f"{np.mean([r['evaluations'] for r in results[s][n]]):.1f} / "
                        f"{np.mean([r['overhead_s'] for r in results[s][n]]):.3f}" for n in lnames])
    console.print(t2)
    console.print(f"total {time.perf_counter() - t_all:.1f} s")

    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": machine(), "budget": args.budget, "seeds": seeds, "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
