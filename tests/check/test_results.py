"""What a checked run produces crosses processes and files as plain data: a CheckReport, its
findings, kernels and launch records round-trip through to_dict/from_dict, and reading a damaged
report keeps what can be read."""
import json

import torch
import triton
import triton.language as tl

import tritonkit
from tritonkit.check import CheckReport, Finding, KernelSummary, LaunchRecord
from tritonkit.check.checks import AccessMap


@triton.jit
def overrun(x_ptr, out_ptr, B: tl.constexpr):
    offs = tl.program_id(0) * B + tl.arange(0, B)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) * 2)


def _session():
    x, out = torch.randn(100), torch.zeros(100)
    with tritonkit.checking(checks=["out_of_bounds", AccessMap(maps_per_kernel=1)]) as s:
        overrun[(2,)](x, out, B=64)
    return s


def test_a_session_report_round_trips_through_json():
    s = _session()
    report = s.report(script={"target": ["x.py", "1"], "failed": False})
    data = json.loads(json.dumps(report.to_dict()))
    back = CheckReport.from_dict(data)
    assert back.to_dict() == data
    assert [f.kind for f in back.findings] == ["out_of_bounds", "out_of_bounds"]
    assert back.launch_records[0].grid == (2, 1, 1) and back.launch_records[0].access_maps
    assert back.kernels == [KernelSummary("overrun", launches=1, programs=2, findings=2,
                                          seconds=back.kernels[0].seconds)]
    assert back.script == {"target": ["x.py", "1"], "failed": False}
    assert s.to_dict() == {k: v for k, v in report.to_dict().items() if k != "script"}


def test_a_damaged_report_keeps_what_can_be_read():
    good = _session().to_dict()
    data = dict(good, findings=good["findings"] + [{"no": "kind"}, "text"], kernels="not a list",
                launch_records=[good["launch_records"][0], 7], summary=None, launches="two")
    back = CheckReport.from_dict(data)
    assert [f.to_dict() for f in back.findings[:-1]] == good["findings"]
    assert (back.findings[-1].kind, back.findings[-1].line) == ("unknown", 0)  # an object: read with defaults
    assert back.kernels == [] and len(back.launch_records) == 1 and back.summary == {} and back.launches == 0


def test_records_and_findings_ignore_unknown_keys_and_fill_missing_ones():
    r = LaunchRecord.from_dict({"kernel": "k", "grid": [4, 1, 1], "from_a_newer_version": 1})
    assert (r.kernel, r.grid, r.status, r.flops_by_width) == ("k", (4, 1, 1), "ok", {})
    r = LaunchRecord.from_dict({"programs": "many", "seconds": 2, "access_maps": {"not": "a list"}})
    assert (r.kernel, r.grid, r.programs, r.seconds, r.access_maps) == ("?", (), 0, 2.0, [])
    f = Finding.from_dict({"kind": "out_of_bounds", "kernel": "k", "file": "f.py", "line": 3, "extra": True})
    assert (f.kind, f.line, f.program_ids, f.examples) == ("out_of_bounds", 3, [], [])
    f = Finding.from_dict({"kind": "data_race", "line": "7", "count": None, "tensor": [1], "other": {"line": 2}})
    assert (f.kind, f.kernel, f.line, f.count, f.tensor, f.other) == ("data_race", "", 0, 0, None, {"line": 2})
    assert KernelSummary.from_dict({"name": "k"}) == KernelSummary("k")
