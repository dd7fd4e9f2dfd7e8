"""``tritonkit check --baseline/--update-baseline/--sarif``: a team accepts the findings it has and
fails only on new ones; the findings go to code scanning as SARIF 2.1.0, validated against the
OASIS schema.

``tests/data/sarif-schema-2.1.0.json`` is the OASIS SARIF 2.1.0 schema (errata 01,
``sarif-2.1/schema/sarif-schema-2.1.0.json`` of https://github.com/oasis-tcs/sarif-spec), kept here
because no package on the index ships it.
"""
import json
import os
import textwrap

import pytest

from tritonkit.check.baseline import Baseline, BaselineError, baseline_document, finding_key, relative_source
from tritonkit.check.findings import Finding
from tritonkit.cli import main
from tritonkit.report.sarif import to_sarif

SCHEMA = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "sarif-schema-2.1.0.json")

SCRIPT = textwrap.dedent('''
    import sys
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def add(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs)  # LOAD
        tl.store(out_ptr + offs, x, mask=offs < n)

    @triton.jit
    def scale(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n)
        tl.store(out_ptr + offs, x * 2)  # STORE

    n = int(sys.argv[1])
    x, out = torch.ones(n), torch.empty(n)
    add[(triton.cdiv(n, 32),)](x, out, n, BLOCK=32)
    if "--second" in sys.argv:
        scale[(triton.cdiv(n, 32),)](x, out, n, BLOCK=32)
''')


def _line(marker):
    return next(i for i, text in enumerate(SCRIPT.splitlines(), 1) if f"# {marker}" in text)


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A project directory with the script, tritonkit run from it (as CI runs from a checkout's root)."""
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "script.py").write_text(SCRIPT)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _validator():
    jsonschema = pytest.importorskip("jsonschema")
    with open(SCHEMA) as fh:
        schema = json.load(fh)
    return jsonschema.Draft4Validator(schema)


def test_a_baseline_accepts_todays_findings_and_fails_on_a_new_one(project, capfd):
    run = ["--", "python", "kernels/script.py", "100"]
    assert main(["check", "--update-baseline", "baseline.json", *run]) == 0  # accepted: not a failure
    doc = json.loads((project / "baseline.json").read_text())
    assert [(f["kind"], f["kernel"], f["file"], f["line"], f["arg"]) for f in doc["findings"]] == [
        ("out_of_bounds", "add", "kernels/script.py", _line("LOAD"), "x_ptr")]  # relative to where it ran
    capfd.readouterr()

    assert main(["check", "--baseline", "baseline.json", "--json", "out.json", *run]) == 0
    out = capfd.readouterr().out
    assert "1 of the findings is known" in out and "x_ptr[" not in out  # reported as known, not in full
    data = json.loads((project / "out.json").read_text())
    assert [f["baseline"] for f in data["findings"]] == ["known"]
    assert data["summary"]["baseline"]["known"] == 1 and data["summary"]["baseline"]["new"] == 0

    assert main(["check", "--baseline", "baseline.json", "--json", "out.json", *run, "--second"]) == 1
    out = capfd.readouterr().out
    assert "out_ptr[" in out  # the new finding in full
    data = json.loads((project / "out.json").read_text())
    assert sorted((f["kernel"], f["baseline"]) for f in data["findings"]) == [("add", "known"), ("scale", "new")]


def test_a_json_report_is_a_baseline_and_sizes_do_not_matter(project):
    """Elements and program ids move with sizes: a finding at the same line and argument is known."""
    assert main(["check", "--json", "first.json", "--", "python", "kernels/script.py", "100"]) == 1
    assert main(["check", "--baseline", "first.json", "--", "python", "kernels/script.py", "1000"]) == 0


def test_a_baseline_matches_when_the_checkout_moved(tmp_path):
    """Paths are kept relative to the directory tritonkit ran in: the same file in a checkout
    elsewhere matches; another file, line, kind or argument does not."""
    a, b = tmp_path / "ci-1", tmp_path / "ci-2"
    f = Finding(kind="out_of_bounds", kernel="add", file=str(a / "k.py"), line=7, arg="x_ptr")
    base_file = tmp_path / "b.json"
    base_file.write_text(json.dumps(baseline_document([f], root=str(a))))
    base = Baseline.load(str(base_file), root=str(b))
    assert base.known(Finding(kind="out_of_bounds", kernel="add", file=str(b / "k.py"), line=7, arg="x_ptr",
                              elements="x_ptr[5:9]", program_ids=[[9]]))
    for change in ({"line": 8}, {"arg": "y_ptr"}, {"kind": "data_race"}, {"kernel": "other"},
                   {"file": str(b / "other.py")}):
        g = Finding(**{"kind": "out_of_bounds", "kernel": "add", "file": str(b / "k.py"), "line": 7, "arg": "x_ptr",
                       **change})
        assert not base.known(g), change
    assert relative_source(str(tmp_path.parent / "x.py"), str(a)) == str(tmp_path.parent / "x.py")
    assert finding_key({"kind": "k", "kernel": "n", "file": "", "line": "3", "arg": None}) == ("k", "n", "", 3, "")


@pytest.mark.parametrize("content, said", [(None, "no such file"), ("{not json", "not JSON"),
                                           ('{"results": []}', "not a baseline")])
def test_a_bad_baseline_is_refused_before_the_script_runs(project, capfd, content, said):
    if content is not None:
        (project / "b.json").write_text(content)
    marker = project / "ran"
    (project / "touch.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    assert main(["check", "--baseline", "b.json", "--", "python", "touch.py"]) == 2
    assert said in capfd.readouterr().err
    assert not marker.exists()
    with pytest.raises(BaselineError):
        Baseline.load(str(project / "b.json"))


def test_outputs_naming_the_same_file_are_refused(project, capfd):
    assert main(["check", "--json", "x.json", "--sarif", "x.json", "--", "python", "kernels/script.py", "10"]) == 2
    assert "same file" in capfd.readouterr().err


def test_the_sarif_output_is_valid_sarif_2_1_0_with_one_result_per_finding(project):
    validator = _validator()
    run = ["--", "python", "kernels/script.py", "100"]
    assert main(["check", "--update-baseline", "baseline.json", *run]) == 0
    assert main(["check", "--sarif", "out.sarif", "--baseline", "baseline.json", *run, "--second"]) == 1
    log = json.loads((project / "out.sarif").read_text())
    validator.validate(log)
    (sarif_run,) = log["runs"]
    rules = [r["id"] for r in sarif_run["tool"]["driver"]["rules"]]
    results = sorted(sarif_run["results"], key=lambda r: r["locations"][0]["physicalLocation"]["region"]["startLine"])
    assert len(results) == 2 and rules == ["out_of_bounds"]
    load, store = results
    for res, line, state, arg in ((load, _line("LOAD"), "unchanged", "x_ptr"), (store, _line("STORE"), "new", "out_ptr")):
        loc = res["locations"][0]["physicalLocation"]
        assert loc["artifactLocation"] == {"uri": "kernels/script.py", "uriBaseId": "SRCROOT"}
        assert loc["region"]["startLine"] == line
        assert res["ruleId"] == "out_of_bounds" and rules[res["ruleIndex"]] == "out_of_bounds"
        assert res["baselineState"] == state and res["properties"]["arg"] == arg
        assert f"{arg}[" in res["message"]["text"] and "Hint:" in res["message"]["text"]
    assert load["partialFingerprints"] != store["partialFingerprints"]


def test_sarif_of_every_finding_kind_and_odd_paths_is_valid(tmp_path):
    """Each kind becomes a rule; a source outside the root is a file URI; a finding with no line
    or argument, non-ASCII text and no source still validates."""
    validator = _validator()
    from tritonkit.check.checks import FINDING_KINDS
    findings = [Finding(kind=k, kernel=f"k{i}", file=str(tmp_path / "src" / "k.py"), line=i + 1, arg="x",
                        message=f"{k} ü", hint="h", elements="x[0:1]", program_ids=[[0, 1]], source="tl.load(x)")
                for i, k in enumerate(FINDING_KINDS)]
    findings.append(Finding(kind="out_of_bounds", kernel="far", file="/elsewhere/k.py", line=0))
    log = to_sarif(findings, root=str(tmp_path), command=["python", "x.py"])
    validator.validate(log)
    (run,) = log["runs"]
    assert [r["id"] for r in run["tool"]["driver"]["rules"]] == list(FINDING_KINDS)
    levels = {r["ruleId"]: r["level"] for r in run["results"]}
    assert levels["out_of_bounds"] == "error" and levels["timeout"] == "warning"  # not checked is not a bug
    assert run["results"][-1]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "file:///elsewhere/k.py"
    assert run["results"][-1]["locations"][0]["physicalLocation"]["region"]["startLine"] == 1
    assert run["originalUriBaseIds"]["SRCROOT"]["uri"].endswith("/")
    bad = json.loads(json.dumps(log))
    bad["runs"][0]["results"][0]["level"] = "fatal"  # the schema check can fail
    assert not validator.is_valid(bad)
