"""``tritonkit check`` end to end: scripts, exit status, JSON, bad input."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

from tritonkit.cli import main

SCRIPT = textwrap.dedent('''
    import sys
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n)
        y = tl.load(y_ptr + offs{mask})
        tl.store(out_ptr + offs, x + y, mask=offs < n)

    n = int(sys.argv[1])
    x, y, out = torch.randn(n), torch.randn(n), torch.empty(n)
    add_kernel[(triton.cdiv(n, 128),)](x, y, out, n, BLOCK=128)
    {after}
''')


def write(tmp_path, mask="", after="", name="script.py"):
    p = tmp_path / name
    p.write_text(SCRIPT.format(mask=mask, after=after))
    return str(p)


def test_buggy_script_exits_1_and_writes_json(tmp_path, capfd):
    script = write(tmp_path)
    out = tmp_path / "findings.json"
    assert main(["check", "--json", str(out), "--", "python", script, "1000"]) == 1
    data = json.loads(out.read_text())
    assert data["launches"] == 1
    assert [k["name"] for k in data["kernels"]] == ["add_kernel"]
    (f,) = data["findings"]
    assert {k: f[k] for k in ("kind", "kernel", "line", "arg", "access", "program_ids", "count")} == {
        "kind": "out_of_bounds", "kernel": "add_kernel", "line": 11, "arg": "y_ptr", "access": "load",
        "program_ids": [[7]], "count": 24}
    assert f["file"] == script
    text = capfd.readouterr().out
    assert "out_of_bounds: add_kernel" in text and "y_ptr[1000:1024]" in text
    assert ">11" in text.replace(" ", "")  # the line is marked in the source context


def test_clean_script_exits_0(tmp_path, capfd):
    script = write(tmp_path, mask=", mask=offs < n", after="assert torch.allclose(out, x + y)")
    assert main(["check", "--", "python", script, "1000"]) == 0
    assert "no findings" in capfd.readouterr().out


def test_the_interpreter_variable_is_left_as_it_was(tmp_path, monkeypatch):
    """Checking needs no TRITON_INTERPRET (every launch goes to the checked interpreter either way):
    the script and its children see it as the user set it, so that nothing unchecked (a CUDA graph
    capture, a child that is not Python) runs in Triton's interpreter because of tritonkit."""
    seen = tmp_path / "seen.txt"
    script = write(tmp_path, after=f"open({str(seen)!r}, 'w').write(__import__('os').environ.get('TRITON_INTERPRET', '-'))")
    for before in (None, "0", "1"):
        if before is None:
            monkeypatch.delenv("TRITON_INTERPRET", raising=False)
        else:
            monkeypatch.setenv("TRITON_INTERPRET", before)
        assert main(["check", "--", "python", script, "1000"]) == 1  # the finding, whatever the variable
        assert seen.read_text() == (before or "-")
        assert os.environ.get("TRITON_INTERPRET") == before


def test_script_that_raises_prints_traceback_and_exits_3(tmp_path, capfd):
    script = write(tmp_path, mask=", mask=offs < n", after="raise ValueError('boom in the script')")
    assert main(["check", "--", "python", script, "1000"]) == 3
    err = capfd.readouterr().err
    assert "ValueError: boom in the script" in err and "tritonkit/cli" not in err


def test_stop_on_first(tmp_path):
    script = write(tmp_path, after="add_kernel[(8,)](x, y, out, n, BLOCK=128)\nprint('SECOND LAUNCH RAN')")
    out = tmp_path / "f.json"
    assert main(["check", "--stop-on-first", "--json", str(out), "--", "python", script, "1000"]) == 1
    data = json.loads(out.read_text())
    assert data["launches"] == 1 and data["summary"]["aborted"]


@pytest.mark.parametrize("setup,message", [
    (lambda p: None, "no such script"),
    (lambda p: p.write_bytes(b"\x7fELF\x00\x01"), "not a Python script"),
    (lambda p: p.write_text("def broken(:\n"), "SyntaxError at line 1"),
])
def test_bad_scripts_exit_2_with_a_clear_message(tmp_path, capfd, setup, message):
    p = tmp_path / "target.py"
    setup(p)
    assert main(["check", "--", "python", str(p)]) == 2
    assert message in capfd.readouterr().err


def test_usage_errors_exit_2(tmp_path, capfd):
    script = write(tmp_path)
    assert main(["check", "--"]) == 2
    assert main(["check", "--timeout", "0", "--", "python", script, "10"]) == 2
    assert main(["check", "--json", str(tmp_path / "missing" / "x.json"), "--", "python", script, "10"]) == 2
    err = capfd.readouterr().err
    assert "nothing to run" in err and "--timeout" in err and "no directory" in err


def test_json_is_not_half_written_when_the_directory_is_readonly(tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root can write into a read-only directory")
    script = write(tmp_path)
    d = tmp_path / "ro"
    d.mkdir()
    (d / "f.json").write_text("previous")
    d.chmod(0o500)
    try:
        assert main(["check", "--json", str(d / "f.json"), "--", "python", script, "100"]) == 2
        assert (d / "f.json").read_text() == "previous"
    finally:
        d.chmod(0o700)


def test_console_script_runs_a_module_in_a_subprocess(tmp_path):
    pkg = tmp_path / "mykernels.py"
    pkg.write_text(SCRIPT.format(mask="", after="").replace("int(sys.argv[1])", "300"))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))
    r = subprocess.run([sys.executable, "-m", "tritonkit", "check", "--", "python", "-m", "mykernels"],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert r.returncode == 1, r.stderr
    assert "y_ptr[300:384]" in r.stdout


RACY = textwrap.dedent('''
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def softmax_rows(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        row = tl.program_id(0) // 2  # two programs per row: both store it
        cols = tl.arange(0, BLOCK)
        v = tl.load(x_ptr + row * n + cols, mask=cols < n, other=-float("inf"))
        e = tl.exp(v)
        tl.store(y_ptr + row * n + cols, e / tl.sum(e, axis=0), mask=cols < n)

    x = torch.randn(3, 50) * 100
    y = torch.empty_like(x)
    softmax_rows[(6,)](x, y, 50, BLOCK=64)
''')


def test_summary_counts_checks_and_findings_by_kind(tmp_path, capfd):
    script = tmp_path / "racy.py"
    script.write_text(RACY)
    out = tmp_path / "f.json"
    assert main(["check", "--nan", "--json", str(out), "--", "python", str(script)]) == 1
    data = json.loads(out.read_text())
    summary = data["summary"]
    assert (summary["launches"], summary["programs"], summary["accesses"]) == (1, 6, 12)
    assert summary["findings_by_kind"] == {"data_race": 1, "nan_inf": 1}
    assert "nan_inf" in summary["checks"] and "data_race" in summary["checks"]
    text = capfd.readouterr().out
    flat = " ".join(text.split())
    assert "races with store at" in flat and "in programs (0,), (2,), (4,)" in flat
    assert "2 findings (1 nan_inf, 1 data_race) in 1 launch, 6 programs, 12 accesses" in flat
    # without --nan the exp overflow is not looked for; --checks picks kinds
    assert main(["check", "--json", str(out), "--", "python", str(script)]) == 1
    assert json.loads(out.read_text())["summary"]["findings_by_kind"] == {"data_race": 1}
    assert main(["check", "--checks", "out_of_bounds", "--", "python", str(script)]) == 0


@pytest.mark.parametrize("flags,message", [
    (["--checks", "races"], "unknown check races"),
    (["--no-checks", "--nan"], "--no-checks runs no check"),
])
def test_bad_check_selection_exits_2(tmp_path, capfd, flags, message):
    script = tmp_path / "racy.py"
    script.write_text(RACY)
    assert main(["check", *flags, "--", "python", str(script)]) == 2
    assert message in capfd.readouterr().err


def test_json_stays_standard_when_a_finding_holds_inf(tmp_path):
    script = tmp_path / "racy.py"
    script.write_text(RACY)
    out = tmp_path / "f.json"
    assert main(["check", "--nan", "--json", str(out), "--", "python", str(script)]) == 1
    def refuse(name):  # what json.dumps writes by default for inf/nan, and standard parsers reject
        raise AssertionError(f"non-standard JSON constant {name}")

    data = json.loads(out.read_text(), parse_constant=refuse)
    nan = next(f for f in data["findings"] if f["kind"] == "nan_inf")
    assert nan["examples"][0]["result"] == "inf" and nan["examples"][0]["inputs"][0] > 88
