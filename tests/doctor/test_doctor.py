"""``tritonkit doctor``: the steps it runs (check, then tune and profile on a GPU), what it does when
one is skipped or fails, and the report it writes."""
import argparse
import json
import os
import subprocess
import sys

from tritonkit.check import CheckReport
from tritonkit.doctor import build_report, run_doctor
from tritonkit.tune import TuneReport

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(HERE, "..", "..", "examples")
#: what the fake tune step writes: a tune report with one result (``tritonkit tune --json``'s form)
TUNE = {"results": [{"kernel": "_k", "key": ["1024"], "strategy": "brute_force", "tuning_s": 1.5, "compile_s": 0.5,
                     "check_s": 0.2, "timing_s": 0.8, "flops": None, "bytes": None, "winner": "BLOCK=64",
                     "trials": [{"point": {"BLOCK": 64}, "status": "ok", "ms": 1.0, "ci_ms": None, "samples": 5,
                                 "error": "", "sm_clock_mhz": None, "mem_clock_mhz": None, "compile_s": None,
                                 "source": "gpu"}]}],
        "restarts": 0}
#: what the fake check step writes: a check report with one finding (``tritonkit check --json``'s form)
CHECK = {"findings": [{"kind": "out_of_bounds", "kernel": "_k", "file": "x.py", "line": 3, "count": 24}],
         "launches": 1, "kernels": [{"name": "_k", "launches": 1, "programs": 4}],
         "launch_records": [{"kernel": "_k", "grid": [4, 1, 1], "programs": 4}],
         "summary": {"launches": 1}, "versions": {"triton": "3.9.0"}, "script": {"target": ["x.py"], "failed": False}}


def _ns(out, **kw):
    d = dict(out=str(out), skip="", nan=False, no_children=False, access_maps=2, budget=None, timeout=None)
    d.update(kw)
    return argparse.Namespace(**d)


class _FakeRun:
    """Stands in for subprocess.run: records the commands, writes each step's JSON unless told not to."""

    def __init__(self, fail=(), data=None):
        self.commands = []
        self.fail = set(fail)
        self.data = data or {}

    def __call__(self, cmd, timeout=None, env=None):
        self.commands.append(cmd)
        self.env = env
        step = cmd[3]
        if step not in self.fail:
            path = cmd[cmd.index("--json") + 1]
            with open(path, "w") as fh:
                json.dump(self.data.get(step, {"step": step}), fh)
        return subprocess.CompletedProcess(cmd, 7 if step in self.fail else 0)


def test_on_a_gpu_the_steps_run_in_order_with_their_options(tmp_path):
    fake = _FakeRun(data={"tune": TUNE})
    target = ["python", "x.py", "--n", "5"]
    steps = run_doctor(_ns(tmp_path, budget="20%", nan=True, no_children=True), target, gpu=True, run=fake,
                       log=lambda m: None)
    assert [s.name for s in steps] == ["check", "tune", "profile"] and all(s.status == "ran" for s in steps)
    check, tune, profile = fake.commands
    assert check[3:] == ["check", "--json", str(tmp_path / "check.json"), "--access-maps", "2", "--nan",
                         "--no-children", "--", *target]
    assert tune[3:] == ["tune", "--json", str(tmp_path / "tune.json"), "--budget", "20%", "--", *target]
    assert profile[3:] == ["profile", "--json", str(tmp_path / "profile.json"), "--tuned", "--", *target]
    report = build_report(steps, target, "GPU X")
    assert report.tune == TuneReport.from_dict(TUNE) and report.tune.to_dict() == TUNE and report.device == "GPU X"
    assert report.command == "python x.py --n 5"


def test_without_a_gpu_tune_and_profile_are_skipped_and_say_why(tmp_path):
    fake = _FakeRun(data={"check": CHECK})
    steps = run_doctor(_ns(tmp_path), ["python", "x.py"], gpu=False, run=fake, log=lambda m: None)
    assert [c[3] for c in fake.commands] == ["check"]
    assert [(s.name, s.status) for s in steps] == [("check", "ran"), ("tune", "skipped"), ("profile", "skipped")]
    assert all("no CUDA GPU" in s.why for s in steps[1:])
    report = build_report(steps, ["python", "x.py"])
    assert report.tune is None and report.profile is None and report.check == CheckReport.from_dict(CHECK)
    assert (report.check.findings[0].count, report.check.launch_records[0].grid) == (24, (4, 1, 1))


def test_a_step_that_writes_nothing_failed_and_an_older_result_is_not_shown_as_new(tmp_path):
    (tmp_path / "tune.json").write_text('{"results": ["from an older run"]}')
    fake = _FakeRun(fail={"tune"})
    steps = run_doctor(_ns(tmp_path, skip="profile"), ["python", "x.py"], gpu=True, run=fake, log=lambda m: None)
    by = {s.name: s for s in steps}
    assert by["tune"].status == "failed" and "exit status 7" in by["tune"].why
    assert by["profile"].status == "skipped" and "--skip" in by["profile"].why
    assert not (tmp_path / "tune.json").exists()
    assert build_report(steps, ["python", "x.py"]).tune is None


def _doctor(*args, cwd):
    return subprocess.run([sys.executable, "-m", "tritonkit", "doctor", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=600, env=dict(os.environ, CUDA_VISIBLE_DEVICES=""))


def test_bad_input_is_a_usage_error(tmp_path):
    assert _doctor("--", "python", str(tmp_path / "missing.py"), cwd=tmp_path).returncode == 2
    p = _doctor("--skip", "check,lint", "--", "python", os.path.join(EXAMPLES, "vector_add.py"), cwd=tmp_path)
    assert p.returncode == 2 and "unknown step lint" in p.stderr
    p = _doctor(cwd=tmp_path)
    assert p.returncode == 2 and "nothing to examine" in p.stderr


def test_doctor_on_a_buggy_example_writes_the_report_and_the_json(tmp_path):
    out = tmp_path / "doc"
    p = _doctor("--out", str(out), "--", "python", os.path.join(EXAMPLES, "vector_add.py"), "--bug", "missing_mask",
                cwd=tmp_path)
    assert p.returncode == 1, p.stdout + p.stderr  # findings
    data = json.loads((out / "doctor.json").read_text())
    assert [s["status"] for s in data["steps"]] == ["ran", "skipped", "skipped"]
    kinds = {f["kind"] for f in data["check"]["findings"]}
    assert kinds == {"out_of_bounds"}
    (rec,) = data["check"]["launch_records"]
    assert {m["arg"] for m in rec["access_maps"]} == {"x_ptr", "y_ptr", "out_ptr"}
    html = (out / "report.html").read_text()
    assert "out_of_bounds" in html and "_add_kernel_missing_mask" in html and "no CUDA GPU" in html
    assert "check: ran" in p.stdout and "report:" in p.stdout


def test_a_script_that_fails_under_check_is_exit_3_and_the_page_is_still_written(tmp_path):
    script = tmp_path / "boom.py"
    script.write_text("raise SystemExit(5)\n")
    out = tmp_path / "doc"
    p = _doctor("--out", str(out), "--", "python", str(script), cwd=tmp_path)
    assert p.returncode == 3, p.stdout + p.stderr
    assert (out / "report.html").exists()
    data = json.loads((out / "doctor.json").read_text())
    assert data["check"]["script"]["failed"] is True and data["check"]["findings"] == []


def test_a_step_past_the_timeout_is_failed_and_the_next_steps_still_run(tmp_path):
    class Slow(_FakeRun):
        def __call__(self, cmd, timeout=None, env=None):
            if cmd[3] == "tune":
                self.commands.append(cmd)
                raise subprocess.TimeoutExpired(cmd, timeout)
            return super().__call__(cmd, timeout, env)
    fake = Slow()
    steps = run_doctor(_ns(tmp_path, timeout=5.0), ["python", "x.py"], gpu=True, run=fake, log=lambda m: None)
    assert [(s.name, s.status) for s in steps] == [("check", "ran"), ("tune", "failed"), ("profile", "ran")]
    assert "--timeout 5 s" in steps[1].why


def test_ctrl_c_ends_the_running_step_skips_the_rest_and_keeps_what_ran(tmp_path):
    class _Interrupted(_FakeRun):
        def __call__(self, cmd, timeout=None, env=None):
            if cmd[3] == "tune":
                self.commands.append(cmd)
                raise KeyboardInterrupt
            return super().__call__(cmd, timeout, env)
    fake = _Interrupted(data={"check": CHECK})
    steps = run_doctor(_ns(tmp_path), ["python", "x.py"], gpu=True, run=fake, log=lambda m: None)
    assert [(s.name, s.status) for s in steps] == [("check", "ran"), ("tune", "failed"), ("profile", "skipped")]
    assert steps[1].why == "interrupted (Ctrl-C)" and steps[1].exit_code == 130
    assert "interrupted" in steps[2].why and len(fake.commands) == 2  # profile never started
    report = build_report(steps, ["python", "x.py"])
    assert report.check is not None and report.check.findings  # what ran is in the report


def test_the_doctor_command_writes_the_report_and_exits_130_on_ctrl_c(tmp_path, monkeypatch, capsys):
    from tritonkit.cli import main
    from tritonkit.doctor import StepResult
    script = tmp_path / "s.py"
    script.write_text("print('hi')\n")
    monkeypatch.setattr("tritonkit.doctor.run_doctor", lambda *a, **k: [
        StepResult("check", "failed", why="interrupted (Ctrl-C)", exit_code=130),
        StepResult("tune", "skipped", why="not run: the doctor was interrupted (Ctrl-C)"),
        StepResult("profile", "skipped", why="not run: the doctor was interrupted (Ctrl-C)")])
    assert main(["doctor", "--out", str(tmp_path / "out"), "--", "python", str(script)]) == 130
    assert (tmp_path / "out" / "report.html").exists() and "interrupted (Ctrl-C)" in capsys.readouterr().out
