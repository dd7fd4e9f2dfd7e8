"""tritonkit.tune's search strategies, the Evaluator and Budget they go through, and the replay runner.

No GPU: measurements come from synthetic cost functions or from replaying the recorded H100 matmul
landscape in ``tests/data`` (a copy of the shared measurement, so a clean clone can run this).
"""
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

from tritonkit.tune._evaluator import Budget, BudgetExhausted, Evaluator
from tritonkit.tune._replay import (NOT_RECORDED, OUT_OF_RESOURCES, ReplayRunner, matmul_grid, permute_param,
                                    synthetic_landscape)
from tritonkit.tune._result import Trial
from tritonkit.tune._space import Space, point_key
from tritonkit.tune.strategies import DEFAULT_STRATEGY, STRATEGIES, Strategy, get_strategy

LANDSCAPE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "matmul_bf16_4096_h100_landscape.json")
ALL = sorted(STRATEGIES)
SEEDED = [s for s in ALL if s != "exhaustive"]


# ---------------------------------------------------------------------- helpers
def bowl(point):
    """A cost function with a unique minimum (1.0 ms) at BM=64, BN=128, BK=32, num_warps=4."""
    return 1.0 + (math.log2(point["BM"]) - 6) ** 2 + 0.5 * (math.log2(point["BN"]) - 7) ** 2 \
        + 0.25 * (math.log2(point["BK"]) - 5) ** 2 + 0.1 * (point["num_warps"] != 4)


SMALL = Space({"BM": [32, 64, 128], "BN": [64, 128, 256], "BK": [32, 64], "num_warps": [4, 8]})


class Recorder:
    """A runner from a cost function (ms) that records every point it is asked to measure."""

    def __init__(self, cost, fail=lambda p: False):
        self.cost, self.fail, self.seen, self.calls = cost, fail, [], 0

    def __call__(self, points):
        self.calls += 1
        self.seen += [point_key(p) for p in points]
        return [Trial(dict(p), status="failed", error="boom", source="fake") if self.fail(p)
                else Trial(dict(p), ms=self.cost(p), source="fake") for p in points]


def run(name, candidates, runner, budget, seed=0, **options):
    ev = Evaluator(candidates, runner, budget)
    get_strategy(name, seed=seed, **options).run(ev)
    return ev


@pytest.fixture(scope="module")
def real():
    return ReplayRunner.from_file(LANDSCAPE, shape="4096")


# ---------------------------------------------------------------------- Budget
@pytest.mark.parametrize("text,size,evals,secs", [
    ("60", None, 60, None), ("25%", 384, 96, None), ("20%", 384, 76, None), ("0.1%", 384, 1, None),
    ("30s", None, None, 30.0), ("2m", None, None, 120.0), ("1.5 min", None, None, 90.0), ("45 sec", None, None, 45.0),
    ("60, 30s", None, 60, 30.0), (" 10% ,2m", 50, 5, 120.0), (None, None, None, None), ("", None, None, None),
    ("  ", None, None, None),
])
def test_budget_parse(text, size, evals, secs):
    b = Budget.parse(text, space_size=size)
    assert (b.evaluations, b.seconds) == (evals, secs)


@pytest.mark.parametrize("text,size", [("abc", None), ("0", None), ("-5", None), ("1.5", None), ("20%", None),
                                       ("0%", 100), ("10x", None), ("30s,", None)])
def test_budget_parse_errors(text, size):
    with pytest.raises(ValueError):
        Budget.parse(text, space_size=size)


def test_budget_str():
    assert str(Budget()) == "unlimited"
    assert str(Budget(60, 30)) == "60 evaluations or 30 s"


# ---------------------------------------------------------------------- Evaluator
def test_evaluator_dedups_and_skips_non_candidates():
    cands = SMALL.points()
    rec = Recorder(bowl)
    ev = Evaluator(cands, rec, Budget(10))
    a, b = cands[0], cands[1]
    alien = {**a, "BM": 16}
    ms = ev.evaluate([a, a, b, alien, dict(a)])
    assert rec.seen == [point_key(a), point_key(b)]          # one measurement per new candidate
    assert ms[0] == ms[1] == ms[4] == bowl(a) and ms[2] == bowl(b) and ms[3] == math.inf
    assert ev.evaluations == 2 and ev.remaining() == 8
    assert ev.evaluate([b, a]) == [bowl(b), bowl(a)]        # seen before: free
    assert rec.calls == 1 and ev.evaluations == 2
    assert ev.evaluate([alien]) == [math.inf] and rec.calls == 1
    assert not ev.is_candidate(alien) and ev.is_candidate(a)
    assert len(ev.unevaluated()) == len(cands) - 2
    assert ev.best.point == min((a, b), key=bowl)


def test_evaluator_cache_hits_spend_budget_but_no_measurement():
    cands = SMALL.points()
    cached = {point_key(cands[0]): Trial(dict(cands[0]), ms=0.5, source="cache")}
    rec, decided = Recorder(bowl), []
    ev = Evaluator(cands, rec, Budget(2), lookup=lambda p: cached.get(point_key(p)), on_trial=decided.append)
    assert ev.evaluate([cands[0], cands[1]]) == [0.5, bowl(cands[1])]
    assert rec.seen == [point_key(cands[1])]
    assert ev.evaluations == 2 and ev.exhausted
    assert [t.source for t in decided] == ["cache", "fake"]
    assert ev.best.ms == 0.5


def test_evaluator_budget_cuts_a_batch_and_raises():
    cands = SMALL.points()
    rec = Recorder(bowl)
    ev = Evaluator(cands, rec, Budget(5))
    ev.evaluate(cands[:3])
    with pytest.raises(BudgetExhausted):
        ev.evaluate(cands[:8])                               # 3 seen, 2 fit, 3 cut
    assert ev.evaluations == 5 and len(rec.seen) == 5 and rec.seen == [point_key(p) for p in cands[:5]]
    assert ev.evaluate(cands[:5]) == [bowl(p) for p in cands[:5]]   # only seen points: no raise
    with pytest.raises(BudgetExhausted):
        ev.evaluate([cands[6]])
    assert ev.evaluations == 5


def test_evaluator_time_budget_with_a_simulated_clock():
    rr = ReplayRunner({point_key(p): bowl(p) for p in SMALL.points()}, seconds_per_eval=1.0)
    ev = Evaluator(rr.points(), rr, Budget(seconds=3.0), clock=rr.clock)
    ev.evaluate(rr.points()[:2])
    assert ev.remaining() > 0 and rr.clock() == 2.0
    # 1 s left at 1 s per evaluation: of a batch of 2, one runs, then the budget is spent
    with pytest.raises(BudgetExhausted):
        ev.evaluate(rr.points()[2:4])
    assert ev.evaluations == 3 and rr.clock() == 3.0
    assert ev.remaining() == 0
    with pytest.raises(BudgetExhausted):
        ev.evaluate(rr.points()[4:5])
    assert ev.evaluations == 3


def test_evaluator_errors():
    with pytest.raises(ValueError, match="nothing to tune"):
        Evaluator([], Recorder(bowl))
    ev = Evaluator(SMALL.points(), lambda pts: [])
    with pytest.raises(RuntimeError, match="returned 0 trials"):
        ev.evaluate(SMALL.points()[:2])


# ---------------------------------------------------------------------- ReplayRunner
def test_replay_from_the_shared_file(real):
    assert len(real) == 384 and len(real.points()) == 384
    best = real.best
    assert best.source == "replay" and best.ok
    assert best.point["BM"] == 128 and best.point["BN"] == 256 and best.point["BK"] == 64
    assert best.point["num_warps"] == 8 and best.point["num_stages"] == 3
    assert best.ms == pytest.approx(0.190208, rel=1e-5)
    with open(LANDSCAPE) as f:
        raw = json.load(f)["4096"]["timings_ms"]
    assert sum(math.isfinite(v) for v in raw.values()) == 330
    trials = real(real.points())
    assert [t.status for t in trials].count("failed") == 54
    failed = next(t for t in trials if not t.ok)
    assert failed.error == OUT_OF_RESOURCES and failed.ms == math.inf and failed.source == "replay"
    ghost = real([{**best.point, "BM": 512}])[0]
    assert ghost.status == "failed" and ghost.error == NOT_RECORDED
    assert real.true_ms({**best.point, "BM": 512}) == math.inf


def test_replay_file_shapes(tmp_path):
    two = {"1024": {"timings_ms": {"A=1": 1.0}}, "2048": {"timings_ms": {"A=1": 2.0, "A=2": None}}}
    p = tmp_path / "two.json"
    p.write_text(json.dumps(two))
    assert ReplayRunner.from_file(str(p), shape="2048").best.ms == 2.0
    with pytest.raises(ValueError, match="several shapes"):
        ReplayRunner.from_file(str(p))
    with pytest.raises(KeyError, match="1024"):
        ReplayRunner.from_file(str(p), shape="4096")
    flat = tmp_path / "flat.json"
    flat.write_text(json.dumps({"A=1": 3.0, "A=2": 1.5}))
    assert ReplayRunner.from_file(str(flat)).best.point == {"A": 2}


def test_replay_keys_noise_and_clock():
    triton_keys = {"BM: 32, num_warps: 4, num_ctas: 1, num_stages: 2, maxnreg: None": 2.0,
                   "BM: 64, num_warps: 4, num_ctas: 1, num_stages: 2, maxnreg: None": 1.0}
    rr = ReplayRunner(triton_keys)
    assert rr.true_ms({"BM": 64, "num_warps": 4, "num_stages": 2}) == 1.0   # defaults do not matter
    with pytest.raises(ValueError, match="twice"):
        ReplayRunner({"BM=32,num_warps=4": 1.0, "BM: 32, num_warps: 4, num_ctas: 1": 2.0})
    with pytest.raises(ValueError, match="empty"):
        ReplayRunner({})
    land = {f"B={b}": 1.0 for b in range(200)}
    a = ReplayRunner(land, noise=0.02, seed=3, seconds_per_eval=0.5)
    b = ReplayRunner(land, noise=0.02, seed=3)
    pts = a.points()
    ms_a = [t.ms for t in a(pts)]
    ms_b = [t.ms for t in b(pts[::-1])][::-1]
    assert ms_a == ms_b                                          # order-independent, seeded
    assert 0.01 < np.std(np.log(ms_a)) < 0.03 and len(set(ms_a)) == 200
    assert ms_a != [t.ms for t in ReplayRunner(land, noise=0.02, seed=4)(pts)]
    assert a.clock() == 100.0 and a.evaluations == 200 and a.calls == 1
    assert a.best.ms == 1.0                                      # noise-free truth


def test_synthetic_landscapes_are_realistic():
    for kind in ("bowl", "roofline", "multimodal"):
        land = synthetic_landscape(kind, seed=1)
        assert len(land) == 384
        times = np.array([v for v in land.values() if math.isfinite(v)])
        assert 250 < len(times) < 384 and times.min() > 0 and times.max() / times.min() > 3
        assert synthetic_landscape(kind, seed=1) == land and synthetic_landscape(kind, seed=2) != land
    with pytest.raises(ValueError):
        synthetic_landscape("flat")
    base = synthetic_landscape("bowl", 0)
    perm = permute_param(base, "BM", seed=0)
    assert sorted(perm.values()) == sorted(base.values()) and perm != base
    assert len(matmul_grid()) == 384


# ---------------------------------------------------------------------- registry
def test_registry():
    assert DEFAULT_STRATEGY in STRATEGIES
    assert set(ALL) >= {"exhaustive", "random", "tpe", "coordinate", "hybrid"}
    for name, cls in STRATEGIES.items():
        assert issubclass(cls, Strategy) and cls.name == name and cls.__doc__
    assert isinstance(get_strategy(), STRATEGIES[DEFAULT_STRATEGY])
    with pytest.raises(ValueError, match="random") as e:
        get_strategy("simulated-annealing")
    assert all(n in str(e.value) for n in ALL)
    with pytest.raises(ValueError, match="no option"):
        get_strategy("random", bogus=1)
    with pytest.raises(ValueError):
        get_strategy("coordinate", neighbourhood="diagonal")


def test_optuna_is_imported_lazily():
    code = "import sys, tritonkit.tune.strategies; print('optuna' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ---------------------------------------------------------------------- every strategy
@pytest.mark.parametrize("name", ALL)
def test_budget_is_honoured_and_only_candidates_are_measured(name, real):
    cands = real.points()
    keys = {point_key(p) for p in cands}
    for budget in (1, 7, 30):
        rr = ReplayRunner(real.landscape())
        ev = run(name, cands, rr, Budget(budget), seed=1)
        assert ev.evaluations == budget and rr.evaluations == budget
        assert set(ev.trials) <= keys
        assert ev.best is None or point_key(ev.best.point) in keys   # one evaluation may hit a failed config
    assert ev.best is not None


@pytest.mark.parametrize("name", ALL)
def test_constrained_space_and_failures(name):
    # a constraint leaves a sparse set of candidates; some of them fail to "compile"
    space = Space({"BM": [16, 32, 64, 128, 256], "BN": [16, 32, 64, 128, 256], "num_warps": [2, 4, 8]},
                  constraints=[lambda p, k: p["BM"] * p["BN"] <= 8192 and p["BM"] != 32])
    cands = space.points()
    keys = {point_key(p) for p in cands}
    rec = Recorder(lambda p: 1 + abs(math.log2(p["BM"] / p["BN"])) + (p["num_warps"] == 2),
                   fail=lambda p: p["BM"] == 256)
    ev = run(name, cands, rec, Budget(len(cands)))
    assert set(rec.seen) == keys and len(rec.seen) == len(keys)   # all, once each, nothing else
    assert ev.best.ms == 1.0


@pytest.mark.parametrize("name", ALL)
def test_full_budget_finds_the_unique_minimum(name):
    rec = Recorder(bowl)
    ev = run(name, SMALL.points(), rec, Budget())
    assert ev.best.point == {"BM": 64, "BN": 128, "BK": 32, "num_warps": 4, "num_stages": 3}
    assert ev.best.ms == 1.0 and ev.evaluations == len(SMALL.points())


def test_exhaustive_evaluates_everything_in_batches():
    cands = SMALL.points()
    rec = Recorder(bowl)
    ev = run("exhaustive", cands, rec, Budget(), batch=10)
    assert rec.seen == [point_key(p) for p in cands] and rec.calls == 4 and ev.evaluations == 36
    rec = Recorder(bowl)
    run("exhaustive", cands, rec, Budget(), batch=0)
    assert rec.calls == 1


@pytest.mark.parametrize("name", SEEDED)
def test_seeded_strategies_are_reproducible(name, real):
    def order(seed):
        rr = ReplayRunner(real.landscape())
        return list(run(name, real.points(), rr, Budget(25), seed=seed).trials)
    first = order(7)
    assert order(7) == first
    assert order(8) != first


def test_tpe_beats_random_on_a_smooth_landscape():
    # a smooth bowl, 30 evaluations (8% of the space), 8 seeds: TPE's model must pay off
    gaps = {"tpe": [], "random": []}
    for seed in range(8):
        land = synthetic_landscape("bowl", seed)
        for name in gaps:
            rr = ReplayRunner(land)
            ev = run(name, rr.points(), rr, Budget(30), seed=seed)
            gaps[name].append(math.log(ev.best.ms / rr.best.ms))
    wins = sum(t < r for t, r in zip(gaps["tpe"], gaps["random"]))
    assert wins >= 6, gaps
    assert np.mean(gaps["tpe"]) < 0.5 * np.mean(gaps["random"]), gaps


def test_tpe_does_not_loop_when_it_proposes_non_candidates():
    # 4 candidates in a 6**3 grid: TPE mostly proposes points that are not candidates
    grid = Space({"A": list(range(6)), "B": list(range(6)), "C": list(range(6))})
    cands = [p for p in grid.points() if p["A"] == p["B"] == p["C"] and p["A"] % 2 == 0] + [{"A": 5, "B": 0, "C": 3}]
    rec = Recorder(lambda p: 1.0 + p["A"] + p["B"])
    ev = run("tpe", cands, rec, Budget(), max_misses=3)
    assert ev.evaluations == len(cands) == 4 and ev.best.ms == 1.0


# ---------------------------------------------------------------------- the default's goal
def test_default_strategy_meets_the_goal_on_the_shared_landscape(real):
    """Within 2% of the exhaustive best, with at most 20% of the 384 evaluations (failed configs
    count), in at least 4 of 5 seeds."""
    cands = real.points()
    budget = Budget.parse("20%", len(cands))
    assert budget.evaluations == 76
    optimum = min(real.true_ms(p) for p in cands)
    hits = 0
    for seed in range(5):
        rr = ReplayRunner(real.landscape())
        ev = Evaluator(cands, rr, budget)
        get_strategy(seed=seed).run(ev)
        assert ev.evaluations <= 76 and rr.evaluations <= 76
        hits += ev.best.ms <= 1.02 * optimum
    assert hits >= 4


def test_default_strategy_is_robust_to_noise_and_permutation(real):
    """The default is not tuned to the exact landscape: with 1.5% noise and with BLOCK_M's values
    permuted it still hits (2%, 20%) in most seeds."""
    land = real.landscape()
    hits = 0
    for seed in range(4):
        for rr in (ReplayRunner(land, noise=0.015, seed=seed), ReplayRunner(permute_param(land, "BM", seed))):
            ev = Evaluator(rr.points(), rr, Budget(76))
            get_strategy(DEFAULT_STRATEGY, seed=seed).run(ev)
            hits += rr.true_ms(ev.best.point) <= 1.02 * rr.best.ms
    assert hits >= 6


@pytest.mark.parametrize("shape", ["4096,4096,4096", "8192,8192,2048"])
def test_default_strategy_meets_the_goal_on_landscapes_measured_by_tritonkit(shape):
    """Two more landscapes of the same kernel and space, measured on the H100 by
    ``benchmarks/tune_gpu.py`` (exhaustive, interleaved timing): 2% of the best with 20% of the
    384 configs in at least 4 of 5 seeds."""
    path = os.path.join(os.path.dirname(__file__), "data", "matmul_bf16_h100_tritonkit_landscapes.json")
    with open(path) as fh:
        land = json.load(fh)[shape]
    hits = 0
    for seed in range(5):
        rr = ReplayRunner(land)
        ev = Evaluator(rr.points(), rr, Budget.parse("20%", len(rr.points())))
        get_strategy(seed=seed).run(ev)
        assert ev.evaluations <= 76
        hits += ev.best.ms <= 1.02 * rr.best.ms
    assert hits >= 4
