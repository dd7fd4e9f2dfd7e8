"""tritonkit.profile on the CPU: Proton tree files recorded on the H100 (benchmarks/profile_workload.py
under ``python -m triton.profiler.proton -k triton``), device peaks, roofline arithmetic, bounds,
rendering and bad input."""
import json
import os

import pytest
from rich.console import Console

from tritonkit.cli import main
from tritonkit.profile import (Ceiling, DevicePeaks, KernelStats, analyze, analyze_kernel, identify, parse_proton,
                               peaks_by_name, peaks_from_attributes, read_proton)
from tritonkit.cli.profile import by_report as _by_report
from tritonkit.report.profile import kernel_table, scope_tree

DATA = os.path.join(os.path.dirname(__file__), "data", "proton")
WORKLOAD = os.path.join(DATA, "workload_h100.hatchet")


@pytest.fixture(scope="module")
def prof():
    return read_proton(WORKLOAD)


@pytest.fixture(scope="module")
def raw():
    with open(WORKLOAD) as fh:
        return json.load(fh)


def test_kernels_scopes_and_devices_are_read(prof, raw):
    by_name = {k.name: k for k in prof.kernels}
    add = by_name["add_kernel n=16777216"]
    assert add.scope == ("vector_add",) and add.launches == 5 and add.work_source == "launch_metadata"
    assert add.bytes == 5 * 3 * (1 << 24) * 4  # 3 float32 vectors per launch, summed over 5 launches
    mm = by_name["matmul_kernel M=4096 N=4096 K=4096"]
    assert mm.flops == {16: 5 * 2.0 * 4096 ** 3}
    cublas = [k for k in prof.kernels if k.scope == ("torch_matmul",)]
    assert len(cublas) == 1 and cublas[0].work_source == "scope" and cublas[0].flops == {16: 5 * 2.0 * 4096 ** 3}
    assert by_name["add_kernel_plain"].work_source is None
    assert prof.devices == {"CUDA:0": raw[1]["CUDA"]["0"]}
    # inclusive time of the root is every kernel's time
    assert prof.tree.inclusive_ns == pytest.approx(sum(k.time_ns for k in prof.kernels))


def test_device_peaks_from_the_table_and_from_attributes(prof):
    info = prof.device_info()
    assert identify(info).name == "NVIDIA H100 SXM5 80GB"
    assert identify({**info, "bus_width": 6144}).bandwidth_gbps == 4800.0  # an H200
    assert peaks_by_name("NVIDIA H100 80GB HBM3").tflops["bf16"] == 989.4
    assert peaks_by_name("NVIDIA H100 PCIe").bandwidth_gbps == 2000.0
    assert peaks_by_name("NVIDIA A100-SXM4-40GB").bandwidth_gbps == 1555.0
    assert peaks_by_name("Some Future GPU") is None
    computed = peaks_from_attributes(info)
    assert computed.bandwidth_gbps == pytest.approx(2 * info["memory_clock_rate"] * 1e3 * info["bus_width"] / 8 / 1e9)
    assert computed.tflops["fp32"] == pytest.approx(info["num_sms"] * 128 * 2 * info["clock_rate"] * 1e3 / 1e12)
    assert "bf16" not in computed.tflops  # tensor-core peaks are not guessed
    assert abs(computed.bandwidth_gbps / 3350 - 1) < 0.01 and abs(computed.tflops["fp32"] / 67 - 1) < 0.01
    a100 = peaks_from_attributes({"arch": "80", "num_sms": 108, "clock_rate": 1410000, "memory_clock_rate": 1593000,
                                  "bus_width": 5120})
    assert a100.tflops["fp32"] == pytest.approx(19.49, rel=0.01)  # 64 FP32 lanes per SM on sm_80
    with pytest.raises(ValueError, match="num_sms"):
        peaks_from_attributes({"arch": "90"})


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


def test_host_times_map_to_launch_metadata_names():
    ks = [KernelStats("add_kernel n=4096", (), 1, 1.0), KernelStats("softmax_kernel", (), 1, 1.0),
          KernelStats("other", (), 1, 1.0)]
    got = _by_report(ks, {"add_kernel": 7.5, "softmax_kernel": 9.0, "add": 1.0})
    assert got == {"add_kernel n=4096": 7.5, "softmax_kernel": 9.0}


def test_rendering(prof):
    peaks = identify(prof.device_info())
    console = Console(width=220, record=True)
    console.print(kernel_table(analyze(prof.kernels, peaks), peaks))
    console.print(scope_tree(prof.tree, min_share=0.05))
    text = console.export_text()
    assert "matmul_kernel M=4096 N=4096 K=4096" in text and "compute" in text and "memory" in text
    assert "triton_matmul" in text and "NVIDIA H100 datasheet" in text
    assert "softmax_kernel" not in text.split("GPU time")[1]  # under 5% of the time: left out of the tree


def test_bad_input_is_clear(tmp_path, capsys):
    with pytest.raises(ValueError, match="not JSON"):
        bad = tmp_path / "bad.hatchet"
        bad.write_bytes(b"\x00\x01garbage")
        read_proton(str(bad))
    with pytest.raises(ValueError, match="not a Proton tree profile"):
        parse_proton({"traceEvents": []}, "trace.json")
    assert main(["profile", "--from", str(tmp_path / "missing.hatchet")]) == 2
    assert "No such file" in capsys.readouterr().err
    empty = tmp_path / "empty.hatchet"
    empty.write_text(json.dumps([{"frame": {"name": "ROOT", "type": "function"}, "metrics": {}, "children": []}, {}]))
    assert main(["profile", "--from", str(empty)]) == 0
    assert "no GPU kernel ran" in capsys.readouterr().out
    assert main(["profile"]) == 2
    assert "nothing to profile" in capsys.readouterr().err


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="checks the message shown without a GPU")
def test_profile_without_a_gpu_says_so(tmp_path, capsys):
    script = tmp_path / "s.py"
    script.write_text("print('hi')\n")
    assert main(["profile", "--", "python", str(script)]) == 2
    err = capsys.readouterr().err
    assert "no CUDA GPU" in err and "--from" in err


def test_json_output(tmp_path):
    out = tmp_path / "p.json"
    assert main(["profile", "--from", WORKLOAD, "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["peaks"]["name"] == "NVIDIA H100 SXM5 80GB"
    names = [k["name"] for k in data["kernels"]]
    assert "add_kernel n=16777216" in names and data["tree"]["children"]
    for suffix in ("_roofline.png", "_roofline.svg", "_time.png", "_time.svg"):
        assert (tmp_path / ("p" + suffix)).stat().st_size > 1000
    assert sorted(os.path.basename(c) for c in data["charts"]) == sorted(
        ["p_roofline.png", "p_roofline.svg", "p_time.png", "p_time.svg"])


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


def test_compare_with_a_fake_bench():
    from tritonkit.profile import compare
    from tritonkit.report.profile import comparison_table
    peaks = peaks_by_name("H100")
    times = {"a": (2.0, 1.9, 2.1), "b": (1.0, 0.95, 1.05)}
    fns = {"cuBLAS": lambda: "a", "Triton": lambda: "b"}
    cmp = compare(fns, flops=2.0 * 8192 ** 3, dtype="bf16", peaks=peaks, bench=lambda fn: times[fn()])
    cublas, tri = cmp.rows
    assert cublas.tflops == pytest.approx(2.0 * 8192 ** 3 / 2e-3 / 1e12)
    assert tri.pct_peak == pytest.approx(100 * tri.tflops / 989.4)
    assert cublas.speedup == 1.0 and tri.speedup == pytest.approx(2.0)
    console = Console(width=160, record=True)
    console.print(comparison_table(cmp))
    text = console.export_text()
    assert "cuBLAS" in text and "2.000x" in text and "peak 989.4" in text
    mem = compare({"copy": lambda: "b"}, bytes=2e9, peaks=peaks, bench=lambda fn: times[fn()])
    assert mem.rows[0].gbps == pytest.approx(2000.0) and mem.rows[0].pct_peak == pytest.approx(100 * 2000 / 3350)
    with pytest.raises(ValueError, match="at least one"):
        compare({}, peaks=peaks)


def test_calibration_is_kept_per_device(tmp_path):
    from tritonkit.profile._calibrate import load, save
    from tritonkit.report.profile import ceiling_table
    path = str(tmp_path / "cal" / "calibrate.json")
    assert load("NVIDIA H100 80GB HBM3", path) is None
    c = Ceiling(3010.0, {"bf16": 760.0}, "test")
    save("NVIDIA H100 80GB HBM3", c, path)
    save("NVIDIA A100-SXM4-80GB", Ceiling(1800.0, {}, "other"), path)
    got = load("NVIDIA H100 80GB HBM3", path)
    assert got.bandwidth_gbps == 3010.0 and got.tflops == {"bf16": 760.0}
    assert load("NVIDIA A100-SXM4-80GB", path).bandwidth_gbps == 1800.0
    (tmp_path / "cal" / "calibrate.json").write_text("{broken")
    assert load("NVIDIA H100 80GB HBM3", path) is None  # an unreadable file is no calibration, not a crash
    console = Console(width=120, record=True)
    console.print(ceiling_table(c, peaks_by_name("H100")))
    assert "89.9%" in console.export_text()  # 3010 of 3350 GB/s


def test_counters_fill_kernels_without_metadata(prof, monkeypatch, capsys):
    from tritonkit.cli._target import Target
    from tritonkit.cli.profile import with_counters
    from tritonkit.profile import _counters
    from tritonkit.profile._counters import CounterRecord, CountersUnavailable
    seen = {}

    def fake_run_ncu(program, kernels, **kw):
        seen["program"], seen["kernels"] = program, kernels
        return [CounterRecord(name="add_kernel_plain", launch_id=i, time_ns=62_000.0, dram_bytes=201_326_592.0)
                for i in range(5)]

    monkeypatch.setattr(_counters, "run_ncu", fake_run_ncu)
    target = Target("script", "w.py", ("--repeat", "5"))
    console = Console(width=200, record=True)
    kernels = with_counters(prof.kernels, target, console)
    plain = next(k for k in kernels if k.name == "add_kernel_plain")
    assert plain.work_source == "ncu" and plain.bytes == pytest.approx(5 * 201_326_592.0)
    assert seen["program"] == ["w.py", "--repeat", "5"] and "add_kernel_plain" in seen["kernels"]
    assert "Proton" in console.export_text()  # the time comparison with ncu is printed

    def unavailable(program, kernels, **kw):
        raise CountersUnavailable("ncu was not found")
    monkeypatch.setattr(_counters, "run_ncu", unavailable)
    console = Console(width=200, record=True)
    assert with_counters(prof.kernels, target, console) == prof.kernels
    assert "ncu was not found" in console.export_text()
    console = Console(width=200, record=True)
    with_counters(prof.kernels, None, console)  # --from: no script to run again
    assert "skipped" in console.export_text()
