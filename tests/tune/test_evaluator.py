"""The Evaluator (the one door between strategies and measurements) and the Budget it enforces.

No GPU: measurements come from a cost function (the ``recorder`` fixture) or a replayed landscape.
"""
import math

import pytest

from tritonkit.tune._evaluator import Budget, BudgetExhausted, Evaluator
from tritonkit.tune._replay import ReplayRunner
from tritonkit.tune._result import Trial
from tritonkit.tune._space import point_key


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
def test_evaluator_dedups_and_skips_non_candidates(small, bowl, recorder):
    cands = small.points()
    rec = recorder(bowl)
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


def test_evaluator_cache_hits_spend_budget_but_no_measurement(small, bowl, recorder):
    cands = small.points()
    cached = {point_key(cands[0]): Trial(dict(cands[0]), ms=0.5, source="cache")}
    rec, decided = recorder(bowl), []
    ev = Evaluator(cands, rec, Budget(2), lookup=lambda p: cached.get(point_key(p)), on_trial=decided.append)
    assert ev.evaluate([cands[0], cands[1]]) == [0.5, bowl(cands[1])]
    assert rec.seen == [point_key(cands[1])]
    assert ev.evaluations == 2 and ev.exhausted
    assert [t.source for t in decided] == ["cache", "fake"]
    assert ev.best.ms == 0.5


def test_evaluator_budget_cuts_a_batch_and_raises(small, bowl, recorder):
    cands = small.points()
    rec = recorder(bowl)
    ev = Evaluator(cands, rec, Budget(5))
    ev.evaluate(cands[:3])
    with pytest.raises(BudgetExhausted):
        ev.evaluate(cands[:8])                               # 3 seen, 2 fit, 3 cut
    assert ev.evaluations == 5 and len(rec.seen) == 5 and rec.seen == [point_key(p) for p in cands[:5]]
    assert ev.evaluate(cands[:5]) == [bowl(p) for p in cands[:5]]   # only seen points: no raise
    with pytest.raises(BudgetExhausted):
        ev.evaluate([cands[6]])
    assert ev.evaluations == 5


def test_evaluator_time_budget_with_a_simulated_clock(small, bowl):
    rr = ReplayRunner({point_key(p): bowl(p) for p in small.points()}, seconds_per_eval=1.0)
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


def test_evaluator_errors(small, bowl, recorder):
    with pytest.raises(ValueError, match="nothing to tune"):
        Evaluator([], recorder(bowl))
    ev = Evaluator(small.points(), lambda pts: [])
    with pytest.raises(RuntimeError, match="returned 0 trials"):
        ev.evaluate(small.points()[:2])
