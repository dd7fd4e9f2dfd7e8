"""The tuner's plain result objects (tritonkit.tune._result): Trial, TuneResult and TuneReport go to
plain JSON and come back the same (they cross from the tuned script's process to its supervisor,
and into the cache and ``tritonkit tune --json`` files)."""
import json
import math

import pytest

from tritonkit.tune import STATUSES, Trial, TuneReport, TuneResult


def _json(d):
    """``d`` through strict JSON text and back, as a file or a pipe carries it."""
    return json.loads(json.dumps(d, allow_nan=False))


TRIALS = [Trial({"BM": 64, "num_warps": 4, "num_stages": 3}, ms=0.125, ci_ms=(0.12, 0.13), samples=25,
                sm_clock_mhz=1980.0, mem_clock_mhz=2619.0, compile_s=0.8),
          Trial({"BM": 128, "num_warps": 8, "num_stages": 3}, status="failed", error="out of resources", source="cpu"),
          Trial({"BM": 32, "num_warps": 4, "num_stages": 2, "num_ctas": 1}, status="wrong", error="2 of 10 differ",
                source="cache"),
          Trial({"BM": 256, "num_warps": 8, "num_stages": 4, "maxnreg": 128}, status="crashed", error="pid 1"),
          Trial({"BM": 512, "num_warps": 8, "num_stages": 5}, status="pruned", error="shared memory", source="replay"),
          Trial({"BLOCK": 16, "FLAG": True, "MODE": "fast"}, ms=2.0, samples=3, source="fake")]


@pytest.mark.parametrize("trial", TRIALS, ids=lambda t: t.status)
def test_trial_round_trips(trial):
    d = trial.to_dict()
    back = Trial.from_dict(_json(d))
    assert back == trial
    assert back.to_dict() == d
    assert back.key == trial.key and back.ok == trial.ok


def test_trial_dict_is_strict_json():
    d = TRIALS[1].to_dict()
    assert d["ms"] is None and d["ci_ms"] is None  # inf is not JSON
    assert Trial.from_dict(d).ms == math.inf
    assert TRIALS[0].to_dict()["ci_ms"] == [0.12, 0.13]
    assert {t.status for t in TRIALS} == set(STATUSES)
    with pytest.raises(ValueError, match="unknown trial status"):
        Trial.from_dict({**d, "status": "exploded"})


def test_tune_result_round_trips():
    r = TuneResult("matmul", ["4096", "4096", "torch.bfloat16"], trials=list(TRIALS), tuning_s=3.5,
                   strategy="hybrid", flops=2 * 4096 ** 3, bytes=3 * 4096 ** 2 * 2, compile_s=1.2, check_s=0.3,
                   timing_s=1.9)
    d = r.to_dict()
    assert d["winner"] == TRIALS[0].key
    back = TuneResult.from_dict(_json(d))
    assert back == r
    assert back.to_dict() == d
    assert back.winner == r.winner and back.tflops() == pytest.approx(r.tflops())
    empty = TuneResult("k", [])
    assert TuneResult.from_dict(_json(empty.to_dict())) == empty


def test_tune_report_round_trips_and_skips_unreadable_results():
    report = TuneReport([TuneResult("a", ["1"], [TRIALS[0]], strategy="exhaustive"),
                         TuneResult("b", ["2", "torch.float16"], list(TRIALS[1:]))], restarts=2)
    d = report.to_dict()
    back = TuneReport.from_dict(_json(d))
    assert back == report and back.to_dict() == d
    assert TuneReport.from_dict({"results": [d["results"][0], {"key": ["x"]}, "junk"]}).results == report.results[:1]
    assert TuneReport.from_dict({}) == TuneReport()
    with pytest.raises(TypeError):
        TuneReport.from_dict([d])
