"""The timing scheduler (with a fake timer), the median's confidence interval, output comparison,
and pruning before compile (against the shared H100 landscape's out-of-resources configs)."""
import json
import math
import os

import numpy as np
import pytest
import torch

from tritonkit.tune._bench import RoundTimer, TimingOptions, median_ci, time_interleaved
from tritonkit.tune._prune import DeviceLimits, estimate_shared_bytes, misfit, prune
from tritonkit.tune._runner import _as_named, outputs_differ
from tritonkit.tune._space import point_from_triton_str

LANDSCAPE = os.path.join(os.path.dirname(__file__), "data", "matmul_bf16_4096_h100_landscape.json")


class FakeTimer(RoundTimer):
    """Config i takes base[i] ms, plus a drift that grows with every sample taken (a warming GPU)."""

    def __init__(self, base, drift=0.0):
        self.base = list(base)
        self.drift = drift
        self.log = []
        self.warmed = None
        self.prepared = {}

    def warmup(self, indices, ms):
        self.warmed = (list(indices), ms)

    def prepare(self, index, graph, launches):
        self.prepared[index] = (graph, launches)

    def round(self, indices):
        self.log.append(list(indices))
        out = []
        for i in indices:
            out.append(self.base[i] + self.drift * sum(len(r) for r in self.log))
        return out


def test_rounds_interleave_in_a_fresh_order_and_respect_sample_bounds():
    timer = FakeTimer([1.0, 2.0, 0.5, 4.0])
    opts = TimingOptions(target_ms=10.0, min_samples=5, max_samples=12, retime_top=0, graph_below_us=0.0)
    out = time_interleaved(4, timer, opts, rng=np.random.default_rng(1))
    assert timer.warmed == ([0, 1, 2, 3], opts.warmup_ms)
    counts = [len(t.samples_ms) for t in out]
    # target 10 ms: 10, 5, 20 -> 12 (max), 2.5 -> 5 (min); plus 3 estimate runs are not samples
    assert counts == [10, 5, 12, 5]
    rounds = timer.log[3:]  # after the 3 estimate rounds
    assert timer.log[:3] == [[0, 1, 2, 3]] * 3
    assert len({tuple(r) for r in rounds[:3]}) > 1, "configs must be shuffled between rounds"
    assert [t.median_ms for t in out] == [1.0, 2.0, 0.5, 4.0]


def test_drift_hits_every_config_alike():
    # with a drift, sequential timing would favour the first config; interleaving keeps the order
    timer = FakeTimer([1.0, 1.0, 1.0], drift=0.001)
    opts = TimingOptions(target_ms=20.0, min_samples=20, max_samples=20, retime_top=0, graph_below_us=0.0)
    out = time_interleaved(3, timer, opts)
    meds = [t.median_ms for t in out]
    assert max(meds) - min(meds) < 0.01 * min(meds)


def test_top_configs_are_timed_again():
    timer = FakeTimer([1.0, 1.01, 3.0, 5.0])
    opts = TimingOptions(target_ms=5.0, min_samples=5, max_samples=5, retime_top=2, graph_below_us=0.0)
    out = time_interleaved(4, timer, opts)
    assert [len(t.samples_ms) for t in out] == [10, 10, 5, 5]


def test_small_kernels_use_graphs_one_mode_per_batch():
    timer = FakeTimer([0.005, 0.004, 1.0])
    out = time_interleaved(3, timer, TimingOptions(graph_below_us=10.0, graph_launches_us=500.0, retime_top=0))
    assert timer.prepared[0] == (True, 100) and timer.prepared[1] == (True, 125)
    assert timer.prepared[2] == (True, 1)  # the slow one too: the batch's median decides
    assert all(t.graph for t in out)
    timer = FakeTimer([0.005, 1.0, 2.0])
    out = time_interleaved(3, timer, TimingOptions(graph_below_us=10.0, retime_top=0))
    assert not any(t.graph for t in out)


def test_median_ci_covers_the_median_at_the_stated_rate():
    rng = np.random.default_rng(0)
    covered = 0
    trials = 400
    for _ in range(trials):
        s = rng.exponential(1.0, size=25)  # skewed, like kernel times
        lo, hi = median_ci(s)
        covered += lo <= math.log(2) <= hi
    assert 0.92 <= covered / trials <= 0.995
    assert median_ci([1.0]) is None
    with pytest.raises(ValueError):
        median_ci([1, 2, 3], confidence=1.5)


def test_outputs_differ_is_dtype_aware_and_scale_relative():
    ref = torch.randn(1000) * 100
    assert outputs_differ(ref + 1e-3, ref) is None  # tf32-sized noise on float32
    assert "elements differ" in outputs_differ(ref * 1.5, ref)
    bf = ref.to(torch.bfloat16)
    assert outputs_differ((bf.float() * 1.01).to(torch.bfloat16), bf) is None
    assert "NaN" in outputs_differ(torch.where(ref > 0, float("nan"), ref), ref)
    assert "shape" in outputs_differ(ref[:10], ref)
    ints = torch.arange(10)
    assert outputs_differ(ints, ints) is None
    assert "1 of 10" in outputs_differ(ints + (ints == 3), ints)


def test_reference_results_must_match_written_arguments():
    a, b = torch.zeros(2), torch.ones(2)
    assert set(_as_named((a, b), ["x", "y"])) == {"x", "y"}
    assert _as_named(a, ["x"])["x"] is a
    with pytest.raises(ValueError, match="return one per written argument"):
        _as_named((a, b), ["x"])
    with pytest.raises(ValueError, match="return a value for"):
        _as_named({"x": a}, ["x", "y"])


def test_misfit_reasons():
    h100 = DeviceLimits(name="H100")
    assert "power of two" in misfit({"num_warps": 6}, h100)
    assert "threads per block" in misfit({"num_warps": 64}, h100)
    assert misfit({"num_warps": 32}, h100) is None
    assert "registers" in misfit({"num_warps": 16, "maxnreg": 255}, h100)
    big = {"BLOCK_M": 256, "BLOCK_N": 256, "BLOCK_K": 128, "num_stages": 4, "num_warps": 8}
    assert estimate_shared_bytes(big, 2) == 4 * (256 * 128 + 128 * 256) * 2
    assert "shared memory" in misfit(big, h100, element_bytes=2)
    assert misfit(big, h100) is None  # no estimate without an element size
    assert estimate_shared_bytes({"BLOCK": 1024}, 4) is None


def test_shared_memory_estimate_flags_the_landscapes_out_of_resources_configs():
    with open(LANDSCAPE) as fh:
        timings = json.load(fh)["4096"]["timings_ms"]
    points = {k: point_from_triton_str(k) for k in timings}
    keep, out = prune(list(points.values()), DeviceLimits(name="H100 80GB HBM3"), element_bytes=2)
    failed = {k for k, v in timings.items() if not math.isfinite(v)}
    flagged = {k for k, p in points.items() if any(p is q for q, _ in out)}
    assert failed <= flagged  # every config that failed out of resources on the H100 is pruned
    assert len(flagged - failed) <= 2  # and at most two that ran (both far from the best)
    best = min(timings.values())
    assert all(timings[k] > 2 * best for k in flagged - failed)
