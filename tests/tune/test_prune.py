"""Pruning before compile (tritonkit.tune._prune): the reasons, and the shared-memory estimate
against the shared H100 landscape's out-of-resources configs."""
import json
import math

from tritonkit.tune._prune import DeviceLimits, estimate_shared_bytes, misfit, prune
from tritonkit.tune._space import point_from_triton_str


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


def test_shared_memory_estimate_flags_the_landscapes_out_of_resources_configs(landscape_path):
    with open(landscape_path) as fh:
        timings = json.load(fh)["4096"]["timings_ms"]
    points = {k: point_from_triton_str(k) for k in timings}
    keep, out = prune(list(points.values()), DeviceLimits(name="H100 80GB HBM3"), element_bytes=2)
    failed = {k for k, v in timings.items() if not math.isfinite(v)}
    flagged = {k for k, p in points.items() if any(p is q for q, _ in out)}
    assert failed <= flagged  # every config that failed out of resources on the H100 is pruned
    assert len(flagged - failed) <= 2  # and at most two that ran (both far from the best)
    best = min(timings.values())
    assert all(timings[k] > 2 * best for k in flagged - failed)
