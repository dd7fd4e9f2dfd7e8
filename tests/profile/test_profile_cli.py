"""``tritonkit profile`` on the CPU: ``--from`` a recorded Proton file, its ``--json`` document and
charts, host times and counters keyed by the profile's kernel names, and bad input."""
import json
import os

import pytest
from rich.console import Console

from tritonkit.cli import main
from tritonkit.cli.profile import by_report as _by_report
from tritonkit.profile import KernelStats, parse_proton, read_proton


def test_host_times_map_to_launch_metadata_names():
    ks = [KernelStats("add_kernel n=4096", (), 1, 1.0), KernelStats("softmax_kernel", (), 1, 1.0),
          KernelStats("other", (), 1, 1.0)]
    got = _by_report(ks, {"add_kernel": 7.5, "softmax_kernel": 9.0, "add": 1.0})
    assert got == {"add_kernel n=4096": 7.5, "softmax_kernel": 9.0}

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

def test_json_output(tmp_path, workload_path):
    out = tmp_path / "p.json"
    assert main(["profile", "--from", workload_path, "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["peaks"]["name"] == "NVIDIA H100 SXM5 80GB"
    names = [k["name"] for k in data["kernels"]]
    assert "add_kernel n=16777216" in names and data["tree"]["children"]
    for suffix in ("_roofline.png", "_roofline.svg", "_time.png", "_time.svg"):
        assert (tmp_path / ("p" + suffix)).stat().st_size > 1000
    assert sorted(os.path.basename(c) for c in data["charts"]) == sorted(
        ["p_roofline.png", "p_roofline.svg", "p_time.png", "p_time.svg"])

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


def test_json_output_is_a_profile_report(tmp_path, workload_path, prof):
    from tritonkit.profile import ProfileReport
    out = tmp_path / "p.json"
    assert main(["profile", "--from", workload_path, "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert list(data) == ["peaks", "ceiling", "kernels", "tree", "source", "charts"]
    report = ProfileReport.from_dict(data)
    assert report.to_dict() == data  # what the file holds is exactly a ProfileReport
    assert report.source == workload_path and report.ceiling is None
    assert report.peaks.name == "NVIDIA H100 SXM5 80GB" and len(report.kernels) == len(prof.kernels)
    assert report.tree.inclusive_ns == pytest.approx(prof.tree.inclusive_ns)
