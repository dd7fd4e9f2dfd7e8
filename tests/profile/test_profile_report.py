"""``ProfileReport``: a whole profile (peaks, ceiling, kernels, scope tree, chart files) through
``to_dict`` / ``from_dict``, as ``tritonkit profile --json`` writes it and the doctor reads it back."""
import json

import pytest

from tritonkit.profile import Ceiling, KernelReport, ProfileReport, analyze, identify


def test_a_profile_round_trips_through_json(prof):
    peaks = identify(prof.device_info())
    ceiling = Ceiling(3000.0, {"bf16": 700.0}, "measured")
    report = ProfileReport(peaks, ceiling, analyze(prof.kernels, peaks, ceiling), prof.tree, "p.hatchet",
                           ["p_roofline.png", "p_roofline.svg"])
    data = json.loads(json.dumps(report.to_dict()))
    assert ProfileReport.from_dict(data) == report
    assert ProfileReport.from_dict(data).to_dict() == data
    assert ProfileReport.from_dict(ProfileReport().to_dict()) == ProfileReport()


def test_missing_or_malformed_parts_are_none_and_never_raise():
    got = ProfileReport.from_dict({"peaks": {"name": "no bandwidth"}, "ceiling": {}, "tree": "not a tree",
                                   "kernels": [{"name": "k", "total_ms": 1.0}, "not a kernel", None],
                                   "charts": "not a list", "source": None})
    assert got.peaks is None and got.ceiling is None and got.tree is None
    assert got.kernels == [KernelReport("k", [], 0, 1.0, 0.0)] and got.charts == [] and got.source == ""
    assert ProfileReport.from_dict({"kernels": "none"}) == ProfileReport()
    assert ProfileReport.from_dict({"peaks": None, "ceiling": {"bandwidth_gbps": 3000}}).ceiling == Ceiling(3000.0)
    with pytest.raises(TypeError):
        ProfileReport.from_dict(["not", "a", "dict"])
