"""Roofline arithmetic on the recorded profile: achieved GB/s and TFLOP/s, % of peak and of a
measured ceiling, bounds, resources and occupancy, and the kernel reports' and ceilings' JSON."""
import pytest

from tritonkit.profile import Ceiling, DevicePeaks, KernelReport, KernelStats, analyze, analyze_kernel, identify
from tritonkit.cli.profile import by_report as _by_report


def test_roofline_figures_and_bounds(prof):
    peaks = identify(prof.device_info())
    reports = {r.name: r for r in analyze(prof.kernels, peaks)}
    add = reports["add_kernel n=16777216"]
    k = next(k for k in prof.kernels if k.name == add.name)
    gbps = k.bytes / (k.time_ns / 1e9) / 1e9
    assert add.gbps == pytest.approx(gbps) and add.pct_peak_bw == pytest.approx(100 * gbps / 3350)
    assert add.bound == "memory" and add.pct_peak_bw > 85
    mm = reports["matmul_kernel M=4096 N=4096 K=4096"]
    assert mm.flops_dtype == "bf16" and mm.bound == "compute"
    assert mm.intensity == pytest.approx(2.0 * 4096 ** 3 / (2 * 3 * 4096 ** 2))
    assert mm.pct_peak_flops == pytest.approx(100 * mm.tflops / 989.4)
    assert reports["add_kernel_plain"].bound == "unknown"
    ordered = analyze(prof.kernels, peaks)
    assert [r.total_ms for r in ordered] == sorted((r.total_ms for r in ordered), reverse=True)
    ceil = analyze(prof.kernels, peaks, Ceiling(bandwidth_gbps=3000.0, tflops={"bf16": 700.0}))
    add_c = next(r for r in ceil if r.name == add.name)
    assert add_c.pct_ceiling_bw == pytest.approx(100 * gbps / 3000.0)

def test_classification_rules():
    peaks = DevicePeaks("test", 1000.0, {"fp32": 10.0, "tf32": 100.0, "bf16": 200.0})
    # 32-bit FLOPs above the plain fp32 peak can only be tf32
    k = KernelStats("dot", (), 1, 1e6, flops={32: 50e12 * 1e-3})
    r = analyze_kernel(k, peaks)
    assert r.flops_dtype == "tf32" and r.pct_peak_flops == pytest.approx(50.0) and r.bound == "compute"
    small = KernelStats("tiny", (), 10, 10 * 5e3, bytes=10 * 1e6)  # 1 MB in 5 us: 200 GB/s = 20% of 1000
    assert analyze_kernel(small, peaks).bound == "latency"
    hosty = analyze_kernel(small, peaks, host_us=20.0)
    assert hosty.bound == "host" and "20.0 us of host time" in hosty.bound_reason
    # near a roof, a slow launch does not make it host bound (the GPU is busy with the work)
    busy = KernelStats("busy", (), 10, 10 * 5e3, bytes=10 * 4e6)  # 800 GB/s = 80% of 1000
    assert analyze_kernel(busy, peaks, host_us=20.0).bound == "memory"
    assert analyze_kernel(KernelStats("x", (), 1, 1e3), peaks, host_us=5.0).bound == "host"
    assert analyze_kernel(KernelStats("x", (), 1, 1e3), peaks).bound == "unknown"

def test_resources_and_occupancy(prof):
    from tritonkit.profile._devices import occupancy
    peaks = identify(prof.device_info())
    res = {"add_kernel": {"registers": 26, "spills": 0, "shared": 0, "num_warps": 4, "num_stages": 3},
           "matmul_kernel": {"registers": 255, "spills": 0, "shared": 98304, "num_warps": 8, "num_stages": 3}}
    reports = {r.name: r for r in analyze(prof.kernels, peaks, resources=_by_report(prof.kernels, res))}
    assert reports["add_kernel n=16777216"].resources["occupancy"] == 1.0  # 16 blocks of 4 warps = 64 warps
    mm = reports["matmul_kernel M=4096 N=4096 K=4096"].resources
    # 255 registers -> 8192 per warp (256-register units) -> one 8-warp block per SM: 8 of 64 warps
    assert mm["occupancy"] == pytest.approx(8 / 64)
    assert occupancy(32, 120000, 4, peaks) == pytest.approx(4 / 64)  # shared memory allows one block
    assert occupancy(32, 0, 0, peaks) is None


def test_kernel_reports_and_ceilings_round_trip_through_json(prof):
    import json
    peaks = identify(prof.device_info())
    ceiling = Ceiling(3000.0, {"bf16": 700.0}, "measured")
    res = {"add_kernel": {"registers": 26, "spills": 0, "shared": 0, "num_warps": 4, "num_stages": 3}}
    for r in analyze(prof.kernels, peaks, ceiling, host_us={"add_kernel n=16777216": 5.0},
                     resources=_by_report(prof.kernels, res)):
        data = json.loads(json.dumps(r.to_dict()))
        assert KernelReport.from_dict(data) == r and KernelReport.from_dict(data).to_dict() == data
    assert Ceiling.from_dict(json.loads(json.dumps(ceiling.to_dict()))) == ceiling
    assert list(ceiling.to_dict()) == ["bandwidth_gbps", "tflops", "source"]


def test_kernel_report_and_ceiling_from_dict_are_tolerant():
    got = KernelReport.from_dict({"name": "k", "total_ms": 1.0, "launches": "x", "gbps": float("nan"),
                                  "tflops": "fast", "scope": ["a", 1], "resources": [1], "bound": None})
    assert got == KernelReport("k", ["a", "1"], 0, 1.0, 0.0)
    assert KernelReport.from_dict({}) == KernelReport("?", [], 0, 0.0, 0.0)
    assert Ceiling.from_dict({"bandwidth_gbps": "fast", "tflops": {"bf16": 700, "fp16": None}}) == \
        Ceiling(None, {"bf16": 700.0})
    with pytest.raises(TypeError):
        KernelReport.from_dict("k")
    with pytest.raises(TypeError):
        Ceiling.from_dict(3010.0)
