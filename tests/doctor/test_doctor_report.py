"""The doctor's results through JSON: ``StepResult`` and ``DoctorReport`` (``doctor.json``) round-trip
through ``to_dict`` / ``from_dict``, each step's part read by its own type (the check's as a dict
for now), and a missing or malformed part read as None, never an error."""
import json
import os

import pytest

from tritonkit.check import CheckReport

from tritonkit.doctor import DoctorReport, StepResult
from tritonkit.profile import ProfileReport
from tritonkit.tune import TuneReport

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "doctor")


def _fixture(name):
    with open(os.path.join(DATA, name)) as fh:
        return json.load(fh)


def test_step_results_round_trip_and_take_defaults():
    step = StepResult("tune", "failed", why="exit status 7", json=None, seconds=2.5, exit_code=7,
                      command="tritonkit tune --json t.json -- python x.py")
    assert StepResult.from_dict(json.loads(json.dumps(step.to_dict()))) == step
    assert StepResult.from_dict({"name": "check", "seconds": "long", "exit_code": "x", "extra": 1}) == \
        StepResult("check", "?")
    with pytest.raises(TypeError):
        StepResult.from_dict("check")


def test_the_fixture_report_reads_each_part_as_its_type_and_round_trips():
    data = _fixture("report.json")
    report = DoctorReport.from_dict(data)
    assert report.command == data["command"] and report.device == data["device"]
    assert [s.name for s in report.steps] == ["check", "tune", "profile"] and report.steps[0].seconds == 21.4
    assert isinstance(report.check, CheckReport)
    assert len(report.check.findings) == len(data["check"]["findings"])
    assert [{k: f.to_dict()[k] for k in d} for f, d in zip(report.check.findings, data["check"]["findings"])] \
        == data["check"]["findings"]
    assert [{k: r.to_dict()[k] for k in d} for r, d in zip(report.check.launch_records, data["check"]["launch_records"])] \
        == data["check"]["launch_records"]  # every field the (older) fixture has, read as written
    assert isinstance(report.tune, TuneReport) and [r.kernel for r in report.tune.results] == \
        [r["kernel"] for r in data["tune"]["results"]]
    assert isinstance(report.profile, ProfileReport) and report.profile.peaks.bandwidth_gbps == 3350.0
    assert report.profile.ceiling.tflops == {"fp16": 755.0}
    assert [k.name for k in report.profile.kernels] == [k["name"] for k in data["profile"]["kernels"]]
    again = json.loads(json.dumps(report.to_dict()))
    assert DoctorReport.from_dict(again) == report and DoctorReport.from_dict(again).to_dict() == again
    only = DoctorReport.from_dict(_fixture("check_only.json"))
    assert only.tune is None and only.profile is None and only.device is None
    assert [s.status for s in only.steps] == ["ran", "skipped", "skipped"]


def test_missing_and_malformed_parts_are_none_not_errors():
    report = DoctorReport.from_dict({"command": None, "versions": {"triton": "3.6.0", "torch": None},
                                     "steps": [{"name": "check", "status": "ran"}, "not a step"],
                                     "check": ["not", "a", "dict"], "tune": {"results": 5},
                                     "profile": {"peaks": {"name": "no bandwidth"}, "kernels": [{"name": "k"}]}})
    assert report.command == "" and report.versions == {"triton": "3.6.0"} and len(report.steps) == 1
    assert report.check is None and report.tune is None
    assert report.profile.peaks is None and [k.name for k in report.profile.kernels] == ["k"]
    assert DoctorReport.from_dict({}) == DoctorReport()
    assert DoctorReport.from_dict(DoctorReport().to_dict()) == DoctorReport()
    with pytest.raises(TypeError):
        DoctorReport.from_dict(["not", "a", "dict"])
