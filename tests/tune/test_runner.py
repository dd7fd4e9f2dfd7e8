"""The runner interface (tritonkit.tune._runner_api.Runner) as the real launch runner implements it,
on the CPU with a stand-in kernel, and the launch runner's output comparison (tritonkit.tune._runner)."""
import math

import pytest
import torch
import triton

from tritonkit.tune import Runner
from tritonkit.tune._runner import LaunchRunner, _as_named, outputs_differ
from tritonkit.tune._space import point_from_config, point_key


class ScaleKernel:
    """Stands for a ``JITFunction``: ``run(x, o, n, ...)`` writes ``o = x * SCALE``; SCALE 0 does not
    launch (as a config out of resources)."""

    def __init__(self):
        self.launches = 0

    def run(self, x, o, n, warmup=False, grid=None, **meta):
        if meta["SCALE"] == 0:
            raise RuntimeError("out of resource: shared memory, Required: 300000, Hardware limit: 232448")
        self.launches += 1
        o.copy_(x * meta["SCALE"])


def test_launch_runner_is_a_runner_one_trial_per_point_in_order():
    x, o = torch.randn(64), torch.zeros(64)
    configs = {point_key(point_from_config(c)): c for c in (triton.Config({"SCALE": s}) for s in (3, 2, 0))}
    points = [point_from_config(c) for c in configs.values()]
    kernel = ScaleKernel()
    runner = LaunchRunner(kernel, [x, o, 64], {"grid": (1,)}, ["x", "o", "n"], configs,
                          reference=lambda x, o, n: x * 2, cuda=False)
    assert isinstance(runner, Runner)
    trials = runner(points)
    assert [t.point for t in trials] == points
    assert [t.status for t in trials] == ["wrong", "ok", "failed"]
    ok = trials[1]
    assert math.isfinite(ok.ms) and ok.ms > 0 and ok.samples == 3 and ok.error == ""
    assert trials[0].ms == trials[2].ms == math.inf
    assert "'o'" in trials[0].error and "out of resource" in trials[2].error
    assert {t.source for t in trials} == {"cpu"}
    assert kernel.launches > 3
    runner.finish()
    assert torch.equal(o, torch.zeros(64))  # the arguments are restored


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
