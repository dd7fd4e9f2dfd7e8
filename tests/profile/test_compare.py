"""Implementations of one operation side by side (``tritonkit.profile.compare``), with a fake bench."""
import pytest
from rich.console import Console

from tritonkit.profile import peaks_by_name


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


def test_a_comparison_round_trips_through_json():
    import json

    from tritonkit.profile import CompareRow, Comparison, compare
    peaks = peaks_by_name("H100")
    times = {"a": (2.0, 1.9, 2.1), "b": (1.0, 0.95, 1.05)}
    cmp = compare({"cuBLAS": lambda: "a", "Triton": lambda: "b"}, flops=2.0 * 8192 ** 3, bytes=3 * 2.0 * 8192 ** 2,
                  peaks=peaks, bench=lambda fn: times[fn()])
    data = json.loads(json.dumps(cmp.to_dict()))
    assert Comparison.from_dict(data) == cmp and Comparison.from_dict(data).to_dict() == data
    assert CompareRow.from_dict(cmp.rows[1].to_dict()) == cmp.rows[1]
    got = Comparison.from_dict({"rows": [{"name": "x", "ms": 2.0}, "no"], "peaks": {"name": "no bandwidth"}})
    assert got == Comparison([CompareRow("x", 2.0, 2.0, 2.0)])
    with pytest.raises(TypeError):
        Comparison.from_dict(None)
