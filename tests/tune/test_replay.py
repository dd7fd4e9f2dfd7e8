"""The replay runner (recorded and synthetic timing landscapes instead of a GPU) and the synthetic
landscape generators, against the recorded H100 matmul landscape in ``tests/data``."""
import json
import math

import numpy as np
import pytest

from tritonkit.tune import Runner
from tritonkit.tune._replay import (NOT_RECORDED, OUT_OF_RESOURCES, ReplayRunner, matmul_grid, permute_param,
                                    synthetic_landscape)


# ---------------------------------------------------------------------- ReplayRunner
def test_replay_from_the_shared_file(real, landscape_path):
    assert len(real) == 384 and len(real.points()) == 384
    best = real.best
    assert best.source == "replay" and best.ok
    assert best.point["BM"] == 128 and best.point["BN"] == 256 and best.point["BK"] == 64
    assert best.point["num_warps"] == 8 and best.point["num_stages"] == 3
    assert best.ms == pytest.approx(0.190208, rel=1e-5)
    with open(landscape_path) as f:
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


def test_a_landscape_round_trips_through_a_file(tmp_path):
    """What :meth:`ReplayRunner.landscape` gives, written as JSON (``inf`` for failed configs),
    reads back through :meth:`ReplayRunner.from_file` as the same runner."""
    rr = ReplayRunner(synthetic_landscape("roofline", seed=3))
    path = tmp_path / "landscape.json"
    path.write_text(json.dumps(rr.landscape()))
    again = ReplayRunner.from_file(str(path))
    assert again.landscape() == rr.landscape()
    assert again.points() == rr.points() and again.best == rr.best
    assert sum(not math.isfinite(v) for v in again.landscape().values()) > 0


def test_replay_runner_is_a_runner():
    rr = ReplayRunner({"A=1": 1.0, "A=2": None})
    assert isinstance(rr, Runner)
    trials = rr([{"A": 2}, {"A": 1}])
    assert [t.point for t in trials] == [{"A": 2}, {"A": 1}]      # one trial per point, in order
    assert [(t.status, t.ms) for t in trials] == [("failed", math.inf), ("ok", 1.0)]
