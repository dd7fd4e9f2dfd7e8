"""``pytest --tritonkit`` with ``--tritonkit-baseline``, ``--tritonkit-update-baseline``,
``--tritonkit-sarif`` and ``--tritonkit-repro``: a suite with a known bug is accepted once, then only
a new bug fails a test, in one process and under pytest-xdist; the SARIF file validates against the
SARIF 2.1.0 schema; each launch with a finding gets a reproducer that shows the same findings."""
import json
import os
import sys
import textwrap

import pytest

from test_pytest_plugin import KERNELS, _bug_line, _json, _run

pytest_plugins = ["pytester"]

SCHEMA = os.path.join(os.path.dirname(__file__), "data", "sarif-schema-2.1.0.json")

OLD = textwrap.dedent('''
    import torch
    from kern import copy


    def test_clean():
        x = torch.randn(100)
        assert torch.equal(copy(x), x)


    def test_known_bug():
        copy(torch.randn(100), mask=False)


    def test_known_bug_other_size():
        copy(torch.randn(1000), mask=False)
''')

NEW = textwrap.dedent('''
    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def fill(out_ptr, n, B: tl.constexpr):
        offs = tl.program_id(0) * B + tl.arange(0, B)
        tl.store(out_ptr + offs, 1.0)  # NEW BUG


    def test_new_bug():
        out = torch.empty(100)
        fill[(2,)](out, 100, B=64)
''')


@pytest.fixture
def suite(pytester):
    pytester.makepyfile(kern=KERNELS, test_old=OLD)
    pytester.syspathinsert()
    return pytester


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one_process", "xdist"])
def test_a_baseline_lets_known_findings_pass_and_fails_new_ones(suite, workers):
    result, out = _run(suite, "--tritonkit", "--tritonkit-update-baseline", "base.json", *workers)
    result.assert_outcomes(passed=3)  # accepted: nothing fails while the baseline is written
    doc = json.loads((suite.path / "base.json").read_text())
    bug = _bug_line(suite)
    assert sorted((f["kernel"], f["file"], f["line"], f["arg"]) for f in doc["findings"]) == [
        ("copy_kernel", "kern.py", bug, "out_ptr"), ("copy_kernel", "kern.py", bug, "x_ptr")]  # distinct, relative

    suite.makepyfile(test_new=NEW)
    result, out = _run(suite, "--tritonkit", "--tritonkit-baseline", "base.json", "--tritonkit-json", "tk.json",
                       "--tritonkit-sarif", "tk.sarif", *workers)
    result.assert_outcomes(passed=3, failed=1)
    assert "FAILED test_new.py::test_new_bug" in out
    assert "2 of 3 distinct findings known from the baseline" in out
    data = _json(suite)
    states = {(n, f["baseline"]) for n, t in data["tests"].items() for f in t["findings"]}
    assert states == {("test_old.py::test_known_bug", "known"), ("test_old.py::test_known_bug_other_size", "known"),
                      ("test_new.py::test_new_bug", "new")}

    jsonschema = pytest.importorskip("jsonschema")
    with open(SCHEMA) as fh:
        jsonschema.Draft4Validator(json.load(fh)).validate(json.loads((suite.path / "tk.sarif").read_text()))
    (run,) = json.loads((suite.path / "tk.sarif").read_text())["runs"]
    got = sorted((r["properties"]["kernel"], r["properties"]["arg"], r["baselineState"],
                  r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]) for r in run["results"])
    assert got == [("copy_kernel", "out_ptr", "unchanged", "kern.py"), ("copy_kernel", "x_ptr", "unchanged", "kern.py"),
                   ("fill", "out_ptr", "new", "test_new.py")]  # one result per distinct finding


def test_a_missing_baseline_is_a_usage_error_before_any_test(suite):
    result, out = _run(suite, "--tritonkit", "--tritonkit-baseline", "missing.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--tritonkit-baseline" in out and "no such file" in out


def test_baseline_options_need_tritonkit(suite):
    (suite.path / "b.json").write_text('{"findings": []}')
    result, out = _run(suite, "--tritonkit-baseline", "b.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR and "add --tritonkit" in out


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one_process", "xdist"])
def test_tritonkit_repro_writes_a_reproducer_per_launch_with_a_finding(suite, workers):
    result, out = _run(suite, "--tritonkit", "--tritonkit-repro", "repro", *workers)
    result.assert_outcomes(passed=1, failed=2)
    folders = sorted(os.listdir(suite.path / "repro"))
    assert len(folders) == 2 and all(f.endswith("copy_kernel") for f in folders)  # one per buggy launch
    for name in folders:
        rerun = suite.run(sys.executable, "-m", "tritonkit", "check", "--json", "again.json", "--", "python",
                          str(suite.path / "repro" / name / "repro.py"), timeout=300)
        assert rerun.ret == 1, rerun.stdout.str() + rerun.stderr.str()
        found = {(f["kind"], f["line"], f["arg"]) for f in _json(suite, "again.json")["findings"]}
        assert found == {("out_of_bounds", _bug_line(suite), "x_ptr"), ("out_of_bounds", _bug_line(suite), "out_ptr")}
