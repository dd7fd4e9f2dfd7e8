"""tritonkit.report.charts on the CPU: the roofline's numbers (roofs, ridges, kernel points), the time
breakdown's sums, unique labels, the charts written as PNG and SVG from the recorded H100 profile
(tests/data/proton/workload_h100.hatchet), and chart data computed without matplotlib."""
import os
import subprocess
import sys

import pytest

from tritonkit.profile import Ceiling, DevicePeaks, KernelReport
from tritonkit.report.charts import (NO_WORK_NOTE, roofline_chart, roofline_data, save_figure,
                                     time_breakdown_chart, time_breakdown_data)

ABS = "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_10AbsFunctorIfEESt5arrayIPcLm2EEEEviT0_T1_"


def _report(name, total_ms=1.0, bytes_=None, flops=None, dtype=None, peaks=None, scope=()):
    """A KernelReport with one launch of ``total_ms``, filled in as analyze_kernel would."""
    r = KernelReport(name, list(scope), 1, total_ms, total_ms * 1e3, bytes=bytes_, flops=flops, flops_dtype=dtype)
    secs = total_ms / 1e3
    if bytes_:
        r.gbps = bytes_ / secs / 1e9
        r.pct_peak_bw = 100 * r.gbps / peaks.bandwidth_gbps
    if flops:
        r.tflops = flops / secs / 1e12
        r.pct_peak_flops = 100 * r.tflops / peaks.tflops[dtype]
    if bytes_ and flops:
        r.intensity = flops / bytes_
    r.bound = "memory" if bytes_ and not flops else "compute" if flops else "unknown"
    return r


def test_roofline_data_roofs_and_ridge(reports, peaks):
    data = roofline_data(reports, peaks)
    assert data.dtypes == ["bf16"] and data.bandwidth_gbps == 3350.0
    mem = [r for r in data.roofs if r.kind == "memory" and not r.measured]
    comp = [r for r in data.roofs if r.kind == "compute" and not r.measured]
    assert len(mem) == 1 and len(comp) == 1
    # the memory roof: TFLOP/s = intensity (FLOP/byte) x GB/s / 1000 at every vertex
    for x, y in mem[0].points:
        assert y == pytest.approx(x * 3350.0 / 1e3)
    # the bf16 compute roof is flat at the peak, from the ridge rightwards
    assert [y for _, y in comp[0].points] == [989.4, 989.4]
    ridge = peaks.ridge("bf16")
    assert ridge == pytest.approx(989.4e12 / 3350e9)
    assert comp[0].points[0][0] == pytest.approx(ridge)
    assert mem[0].points[-1] == pytest.approx((ridge, 989.4))  # the roofs meet at the ridge
    assert [(r.dtype, r.intensity) for r in data.ridges] == [("bf16", pytest.approx(ridge))]
    assert "3350 GB/s" in mem[0].label and "989.4 TFLOP/s" in comp[0].label and "bf16/fp16" in comp[0].label
    assert data.attainable(1.0, "bf16") == pytest.approx(3.35)
    assert data.attainable(1e4, "bf16") == pytest.approx(989.4)
    assert data.attainable(ridge, "bf16") == pytest.approx(989.4)
    x_lo, x_hi = data.x_range
    assert x_lo <= 0.1 and x_hi >= 10 * 1365.4 and mem[0].points[0][0] == x_lo and comp[0].points[-1][0] == x_hi
    with pytest.raises(ValueError):
        data.attainable(0.0, "bf16")


def test_roofline_data_kernels(reports, peaks):
    data = roofline_data(reports, peaks)
    (mm,) = data.points
    assert mm.name == "matmul_kernel M=4096 N=4096 K=4096" and mm.bound == "compute"
    assert mm.intensity == pytest.approx(2 * 4096 ** 3 / (3 * 4096 * 4096 * 2))  # 1365.3 FLOP/byte
    assert mm.tflops == pytest.approx(5 * 2 * 4096 ** 3 / (mm.total_ms / 1e3) / 1e12)
    assert mm.pct_roof == pytest.approx(100 * mm.tflops / 989.4)  # right of the ridge: the compute roof
    off = {k.name: k for k in data.off_roof}
    add = off["add_kernel n=16777216"]
    assert add.metric == "bandwidth" and add.unit == "GB/s" and add.pct_peak == pytest.approx(100 * add.value / 3350)
    nvjet = off["nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"]
    assert nvjet.metric == "compute" and nvjet.dtype == "bf16" and nvjet.pct_peak == pytest.approx(
        100 * nvjet.value / 989.4)
    # every kernel with bytes or FLOPs is drawn somewhere, with a label; the others are counted
    with_work = {r.name for r in reports if r.bytes or r.flops}
    assert {p.name for p in data.points} | set(off) == with_work
    assert data.without_work == len(reports) - len(with_work)
    assert all(p.label for p in data.points + data.off_roof)
    assert any("not shown" in n for n in data.notes)


def test_roofline_data_ceiling_and_several_dtypes():
    peaks = DevicePeaks("dev", 2000.0, {"fp32": 50.0, "bf16": 800.0, "fp8": 1600.0})
    reports = [_report("a", bytes_=1e9, flops=1e10, dtype="fp32", peaks=peaks),
               _report("b", bytes_=1e8, flops=1e11, dtype="fp8", peaks=peaks)]
    data = roofline_data(reports, peaks, Ceiling(1500.0, {"fp8": 1200.0, "fp32": 40.0, "bf16": 700.0}))
    assert data.dtypes == ["fp8", "fp32"]
    sheet = {r.dtype: r for r in data.roofs if r.kind == "compute" and not r.measured}
    assert set(sheet) == {"fp8", "fp32"} and sheet["fp32"].value == 50.0
    mem = next(r for r in data.roofs if r.kind == "memory" and not r.measured)
    assert mem.points[-1][0] == pytest.approx(1600e3 / 2000.0)  # up to the highest ridge (fp8, 800 FLOP/B)
    measured = {(r.kind, r.dtype): r for r in data.roofs if r.measured}
    assert set(measured) == {("memory", None), ("compute", "fp8"), ("compute", "fp32")}  # bf16: no kernel
    assert measured[("memory", None)].points[0][1] == pytest.approx(data.x_range[0] * 1.5)
    ridges = {(r.dtype, r.measured): r.intensity for r in data.ridges}
    assert ridges[("fp8", True)] == pytest.approx(1200e3 / 1500.0)
    assert ridges[("fp32", False)] == pytest.approx(peaks.ridge("fp32")) == pytest.approx(25.0)
    a = next(p for p in data.points if p.name == "a")
    assert a.intensity == 10.0 and a.pct_roof == pytest.approx(100 * a.tflops / min(10 * 2.0, 50.0))


def test_no_bytes_or_flops_gives_a_note_not_a_crash(tmp_path, peaks):
    bare = [_report("plain_kernel", peaks=peaks), _report("other_kernel", peaks=peaks)]
    data = roofline_data(bare, peaks)
    assert data.notes[0] == NO_WORK_NOTE and not data.points and not data.off_roof and data.without_work == 2
    png, svg = save_figure(roofline_chart(bare, peaks), str(tmp_path / "empty"))
    assert "no kernel has bytes or FLOPs" in open(svg, encoding="utf-8").read()
    save_figure(roofline_chart([], peaks), str(tmp_path / "none"))
    assert "no kernel has bytes or FLOPs" in open(tmp_path / "none.svg", encoding="utf-8").read()
    with pytest.raises(ValueError):
        roofline_data(bare, DevicePeaks("broken", 0.0))


def test_roofline_chart_renders_png_and_svg(tmp_path, reports, peaks):
    paths = save_figure(roofline_chart(reports, peaks, Ceiling(3000.0, {"bf16": 800.0}), title="workload"),
                        str(tmp_path / "sub" / "roofline"))
    assert paths == [str(tmp_path / "sub" / "roofline.png"), str(tmp_path / "sub" / "roofline.svg")]
    with open(paths[0], "rb") as fh:
        assert fh.read(8) == b"\x89PNG\r\n\x1a\n"
    svg = open(paths[1], encoding="utf-8").read()
    assert svg.lstrip().startswith("<?xml") and "</svg>" in svg
    for text in ("matmul_kernel M=4096 N=4096 K=4096", "add_kernel n=16777216", "nvjet_sm90", "3350 GB/s",
                 "989.4 TFLOP/s", "measured 3000 GB/s", "ridge 295 FLOP/B", "workload"):
        assert text in svg, text
    assert os.path.getsize(paths[0]) > 10_000
    assert sorted(os.listdir(tmp_path / "sub")) == ["roofline.png", "roofline.svg"]  # no temp files left


def test_time_breakdown_sums_to_the_total(prof, reports):
    total = sum(r.total_ms for r in reports)
    data = time_breakdown_data(reports, top=5)
    assert len(data.bars) == 6 and data.bars[-1].name == "other" and data.bars[-1].kernels == len(reports) - 5
    assert data.total_ms == pytest.approx(total) == pytest.approx(prof.tree.inclusive_ns / 1e6)
    assert sum(b.ms for b in data.bars) == pytest.approx(total)
    assert sum(b.pct for b in data.bars) == pytest.approx(100.0)
    assert [b.ms for b in data.bars[:5]] == sorted((r.total_ms for r in reports), reverse=True)[:5]
    assert data.bars[1].bound == "compute" and data.bars[-1].label == f"other ({len(reports) - 5} kernels)"
    # from the scope tree (or the profile): the same kernels and total, bound unknown
    tree = time_breakdown_data(prof.tree, top=5)
    assert tree.total_ms == pytest.approx(total) and [b.ms for b in tree.bars] == pytest.approx(
        [b.ms for b in data.bars])
    assert time_breakdown_data(prof, top=100).bars[-1].name != "other"
    assert len(time_breakdown_data(reports, top=100).bars) == len(reports)
    assert time_breakdown_data([], top=3).bars == []
    with pytest.raises(ValueError):
        time_breakdown_data(reports, top=0)


def test_time_breakdown_chart_renders(tmp_path, prof, reports):
    png, svg = save_figure(time_breakdown_chart(reports, top=6), str(tmp_path / "time.png"))
    assert png.endswith("time.png") and svg.endswith("time.svg")
    with open(png, "rb") as fh:
        assert fh.read(8) == b"\x89PNG\r\n\x1a\n"
    text = open(svg, encoding="utf-8").read()
    assert "matmul_kernel M=4096 N=4096 K=4096" in text and "other (14 kernels)" in text and "ms (" in text
    png2, _ = save_figure(time_breakdown_chart(prof.tree), str(tmp_path / "tree"))
    assert os.path.getsize(png2) > 0
    save_figure(time_breakdown_chart([]), str(tmp_path / "empty"))
    assert "no kernels" in open(tmp_path / "empty.svg", encoding="utf-8").read()



def test_labels_are_unique_and_short(reports, peaks):
    data = roofline_data(reports, peaks)
    labels = [b.label for b in time_breakdown_data(reports, top=100).bars]
    assert len(set(labels)) == len(labels) and max(map(len, labels)) <= 40
    twins = [_report(ABS + "x", bytes_=1e6, peaks=peaks), _report(ABS + "y", bytes_=1e6, peaks=peaks)]
    off = roofline_data(twins, peaks).off_roof
    assert len({k.label for k in off}) == 2
    assert data.points[0].label == "matmul_kernel M=4096 N=4096 K=4096"


def test_save_figure_is_atomic(tmp_path, reports, peaks):
    fig = time_breakdown_chart(reports)
    target = tmp_path / "chart.png"
    target.write_bytes(b"old")

    def broken(*args, **kwargs):
        raise OSError("disk full")

    fig.savefig = broken
    with pytest.raises(OSError, match="disk full"):
        save_figure(fig, str(tmp_path / "chart"))
    assert target.read_bytes() == b"old" and sorted(os.listdir(tmp_path)) == ["chart.png"]


def test_no_pyplot_and_no_backend_switch():
    # the module must not import pyplot or pick a backend (checked in a fresh process)
    code = ("import os, sys, tempfile, types, matplotlib; "
            "before = matplotlib.rcParams._get_backend_or_none(); "
            "import tritonkit.report.charts as c; "
            "peaks = types.SimpleNamespace(name='d', bandwidth_gbps=100.0, tflops={}, source=''); "
            "d = tempfile.mkdtemp(); c.save_figure(c.roofline_chart([], peaks), os.path.join(d, 'x')); "
            "assert 'matplotlib.pyplot' not in sys.modules; "
            "assert matplotlib.rcParams._get_backend_or_none() == before, before")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_chart_data_needs_no_matplotlib_and_drawing_names_the_extra(tmp_path, run_without):
    workload = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "proton",
                            "workload_h100.hatchet")
    out = run_without(("matplotlib", "PIL"), """
import os, sys
from tritonkit._imports import MissingDependency
from tritonkit.profile import analyze, identify, read_proton
from tritonkit.report.charts import (heatmap_data, heatmap_png, heatmap_rgba, roofline_chart, roofline_data,
                                     save_figure, time_breakdown_data, tuning_landscape_data)
prof = read_proton(sys.argv[1])
peaks = identify(prof.device_info())
reports = analyze(prof.kernels, peaks)
assert roofline_data(reports, peaks).points
assert time_breakdown_data(reports).bars
trial = {"point": {"B": 1}, "status": "ok", "ms": 1.0}
assert tuning_landscape_data({"kernel": "k", "key": [], "trials": [trial]}).winner_ms == 1.0
m = {"arg": "x", "shape": [4], "dtype": "float32", "rows": 1, "cols": 4, "reads": [[1, 2, 1, 0]]}
data = heatmap_data(m)
assert data.legend and heatmap_rgba(data, "density").shape[2] == 4
assert not any(n.split(".")[0] in ("matplotlib", "PIL") for n in sys.modules)
for draw in (lambda: roofline_chart(reports, peaks), lambda: heatmap_png(data, "reads"),
             lambda: save_figure(None, os.path.join(sys.argv[2], "x"))):
    try:
        draw()
    except MissingDependency as e:
        assert "tritonkit[report]" in str(e), e
        print("missing:", str(e).split(" needs ")[1].split(",")[0])
    else:
        raise AssertionError("drew without matplotlib or Pillow")
""", workload, str(tmp_path))
    assert out.split() == ["missing:", "matplotlib", "missing:", "Pillow", "missing:", "matplotlib"]
    assert list(tmp_path.iterdir()) == []
