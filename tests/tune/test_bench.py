"""The timing scheduler (with a fake timer) and the median's confidence interval (tritonkit.tune._bench)."""
import math

import numpy as np
import pytest

from tritonkit.tune._bench import RoundTimer, TimingOptions, median_ci, time_interleaved


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
