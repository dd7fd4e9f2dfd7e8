"""Fixtures shared by the tests of tritonkit.tune: the test data directory, the recorded H100
matmul landscape as a replay runner, a cost function with a known minimum, a small space, and a
fake runner that records what it is asked to measure."""
import math
import os

import pytest

from tritonkit.tune._replay import ReplayRunner
from tritonkit.tune._result import Trial
from tritonkit.tune._space import Space, point_key

DATA_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data")


@pytest.fixture(scope="session")
def data_dir():
    """``tests/data``: the recorded landscapes (copies of the shared measurements, so a clean clone
    runs the tests)."""
    return DATA_DIR


@pytest.fixture(scope="session")
def landscape_path(data_dir):
    """The shared H100 recording of a bf16 matmul's 384-config space at 4096^3 (times in ms)."""
    return os.path.join(data_dir, "matmul_bf16_4096_h100_landscape.json")


@pytest.fixture(scope="module")
def real(landscape_path):
    """The shared recording at 4096^3, as a :class:`ReplayRunner` (one per test module)."""
    return ReplayRunner.from_file(landscape_path, shape="4096")


def _bowl(point):
    """A cost function with a unique minimum (1.0 ms) at BM=64, BN=128, BK=32, num_warps=4."""
    return 1.0 + (math.log2(point["BM"]) - 6) ** 2 + 0.5 * (math.log2(point["BN"]) - 7) ** 2 \
        + 0.25 * (math.log2(point["BK"]) - 5) ** 2 + 0.1 * (point["num_warps"] != 4)


@pytest.fixture(scope="session")
def bowl():
    """A cost function (point -> ms) with a unique minimum (1.0 ms) at BM=64, BN=128, BK=32, num_warps=4."""
    return _bowl


@pytest.fixture(scope="session")
def small():
    """A 36-point space over BM, BN, BK and num_warps that holds the minimum of ``bowl``."""
    return Space({"BM": [32, 64, 128], "BN": [64, 128, 256], "BK": [32, 64], "num_warps": [4, 8]})


class Recorder:
    """A runner from a cost function (ms) that records every point it is asked to measure.

    Args:
        cost: point -> ms.
        fail: point -> whether the config "fails" (a ``failed`` trial, error ``"boom"``).
    """

    def __init__(self, cost, fail=lambda p: False):
        self.cost, self.fail, self.seen, self.calls = cost, fail, [], 0

    def __call__(self, points):
        self.calls += 1
        self.seen += [point_key(p) for p in points]
        return [Trial(dict(p), status="failed", error="boom", source="fake") if self.fail(p)
                else Trial(dict(p), ms=self.cost(p), source="fake") for p in points]


@pytest.fixture(scope="session")
def recorder():
    """The :class:`Recorder` class: ``recorder(cost, fail=...)`` makes a fake runner."""
    return Recorder
