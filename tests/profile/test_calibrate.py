"""Measured ceilings kept per device (``tritonkit calibrate``'s file) and its ``--json`` document."""
import json

from rich.console import Console

from tritonkit.profile import Calibration, Ceiling, peaks_by_name


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


def test_kept_entries_are_ceilings_as_json(tmp_path):
    from tritonkit.profile._calibrate import load, save
    path = tmp_path / "calibrate.json"
    c = Ceiling(3010.0, {"bf16": 760.0}, "test")
    save("GPU", c, str(path))
    assert json.loads(path.read_text()) == {"GPU": c.to_dict()}
    path.write_text(json.dumps({"GPU": {"bandwidth_gbps": "fast", "tflops": {"bf16": 760.0, "fp16": "?"}},
                                "Other": [1, 2]}))
    assert load("GPU", str(path)) == Ceiling(None, {"bf16": 760.0})  # what can be read is kept
    assert load("Other", str(path)) is None


def test_calibration_document_round_trips():
    cal = Calibration("NVIDIA H100 80GB HBM3", peaks_by_name("H100"), Ceiling(3010.0, {"bf16": 760.0}, "test"))
    data = json.loads(json.dumps(cal.to_dict()))
    assert list(data) == ["device", "peaks", "ceiling"] and data["ceiling"] == cal.ceiling.to_dict()
    assert Calibration.from_dict(data) == cal
    assert Calibration.from_dict({"device": "X", "peaks": {"name": "no bandwidth"}, "ceiling": "?"}) == \
        Calibration("X")
