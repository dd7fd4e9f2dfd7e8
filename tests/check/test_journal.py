"""Per-process journals: what a process wrote is read back whole, a line cut by a hard exit is
skipped, a journal is followed as it grows, and a run's journals merge into one report."""
import json
import os

from tritonkit.check.findings import Finding
from tritonkit.check.journal import Journal, JournalTail, RunWatcher, merge, read_journal, read_run
from tritonkit.check.process import CheckOptions, _child_env_for, child_env, is_python
from tritonkit.check.results import LaunchRecord


def _finding(line, count=1):
    return Finding(kind="out_of_bounds", kernel="k", file="k.py", line=line, source="tl.load(x)", count=count)


def test_a_journal_reads_back_and_a_cut_last_line_is_skipped(tmp_path):
    j = Journal(str(tmp_path), "root", ["out_of_bounds"], "auto")
    j.new_finding(0, _finding(5))
    j.launch(LaunchRecord("k", (2, 1, 1), programs=2))
    j.new_finding(0, _finding(5, count=7))  # the same finding, updated
    j.exit(0, False)
    j.close()
    with open(j.path, "a") as fh:
        fh.write('{"t": "finding", "i": 1, "f": {"kind": "out_of')  # what a kill mid-write leaves
    run = read_journal(j.path)
    assert run.role == "root" and run.pid == os.getpid() and run.argv
    assert list(run.findings) == [(0, 0)] and run.findings[(0, 0)].count == 7
    assert [r.kernel for r in run.launch_records] == ["k"] and run.exit["status"] == 0


def test_a_tail_takes_only_complete_lines_as_they_come(tmp_path):
    j = Journal(str(tmp_path), "child", ["out_of_bounds"], "auto")
    tail = JournalTail(j.path)
    assert tail.poll() == ([], [])
    j.new_finding(0, _finding(3))
    with open(j.path, "a") as fh:
        fh.write(json.dumps({"t": "finding", "i": 1, "f": _finding(4).to_dict()})[:20])  # half a line
    keys, _ = tail.poll()
    assert keys == [(0, 0)]
    with open(j.path, "a") as fh:
        fh.write(json.dumps({"t": "finding", "i": 1, "f": _finding(4).to_dict()})[20:] + "\n")
    keys, _ = tail.poll()
    assert keys == [(0, 1)] and tail.run.findings[(0, 1)].line == 4


def test_scopes_keep_each_sessions_findings_apart(tmp_path):
    j = Journal(str(tmp_path), "root", [], "auto", extra={"worker": "gw1"}, launches=False)
    j.scope("t.py::a (call)")
    j.new_finding(0, _finding(1))
    j.launch(LaunchRecord("k", (1, 1, 1)))  # not written: launches=False
    j.scope("t.py::b (call)")
    j.new_finding(0, _finding(2))
    run = read_journal(j.path)
    assert run.extra == {"worker": "gw1"} and run.launch_records == []
    assert {run.scope_of(k): f.line for k, f in run.findings.items()} == {"t.py::a (call)": 1, "t.py::b (call)": 2}


def test_an_unsettled_side_journal_is_read_into_its_owners_scope_and_a_settled_one_is_not(tmp_path):
    """Side journals (a config worker's findings before its parent took them): read into the owner,
    after its own findings of the scope the side journal was made in; left out once settled; not
    followed by a watcher (they are the owner's, not a child process's)."""
    own = Journal(str(tmp_path), "root", [], "auto", launches=False)
    watcher = RunWatcher(str(tmp_path), exclude=[own.path])
    own.scope("t.py::a (call)")
    own.new_finding(0, _finding(1))
    own.scope("t.py::b (call)")
    own.new_finding(0, _finding(2))
    lost = own.side()  # made during test b: its parent was killed before taking it
    lost.new_finding(0, _finding(3))
    lost.new_finding(1, _finding(4))
    taken = own.side()  # taken into the owner's findings, then settled
    taken.new_finding(0, _finding(9))
    own.new_finding(1, _finding(9))
    own.settled(taken.path)
    assert os.path.basename(lost.path).startswith("s") and watcher.poll() == ([], [])
    (run,) = read_run(str(tmp_path))
    assert [(run.scope_of(k), f.line) for k, f in sorted(run.findings.items())] == [
        ("t.py::a (call)", 1), ("t.py::b (call)", 2), ("t.py::b (call)", 9), ("t.py::b (call)", 3),
        ("t.py::b (call)", 4)]


def test_a_watcher_follows_new_journals_and_marks_their_process(tmp_path):
    own = Journal(str(tmp_path), "root", [], "auto")
    watcher = RunWatcher(str(tmp_path), exclude=[own.path])
    own.new_finding(0, _finding(1))
    child = Journal(str(tmp_path), "child", [], "auto")
    child.new_finding(0, _finding(2))
    child.launch(LaunchRecord("k", (1, 1, 1)))
    found, records = watcher.poll()
    assert [(key, f.line, f.process["pid"]) for _, key, f in found] == [((0, 0), 2, os.getpid())]
    assert [r.kernel for _, r in records] == ["k"]
    assert watcher.poll() == ([], [])


def test_merge_puts_the_programs_findings_first_and_counts_processes(tmp_path):
    child = Journal(str(tmp_path), "child", ["out_of_bounds"], "auto")
    child.new_finding(0, _finding(2))
    root = Journal(str(tmp_path), "root", ["out_of_bounds"], "auto")
    root.new_finding(0, _finding(1))
    root.launch(LaunchRecord("k", (1, 1, 1), programs=1))
    report = merge(read_run(str(tmp_path)), interrupted=True)
    assert [f.line for f in report.findings] == [1, 2]
    assert report.findings[0].process is None and report.findings[1].process["pid"] == os.getpid()
    assert report.summary["processes"] == 2 and report.summary["interrupted"] is True and report.launches == 1


def test_which_programs_are_python(tmp_path):
    import sys
    assert is_python(sys.executable) and is_python("python3") and not is_python("env")
    script = tmp_path / "tool"
    script.write_text("#!/usr/bin/env python3\nprint(1)\n")
    assert is_python(str(script))
    script.write_text("#!/bin/sh\necho 1\n")
    assert not is_python(str(script))


def test_child_environments(tmp_path, monkeypatch):
    import tritonkit.check.process as process
    base = {"PATH": "/bin", "PYTHONPATH": "/mine", "KEEP": "1"}
    env = child_env(str(tmp_path), CheckOptions(nan=True), base=base)
    assert "TRITON_INTERPRET" not in env and env["PYTHONPATH"].split(os.pathsep)[0] == process.BOOT_DIR
    assert env["PYTHONPATH"].split(os.pathsep)[-1] == "/mine" and env["KEEP"] == "1"
    assert CheckOptions.from_dict(json.loads(env[process.OPTIONS_ENV])).nan is True
    monkeypatch.setattr(process, "_installed", {})  # as if install() ran
    monkeypatch.setattr(os, "environ", env)
    clean = _child_env_for(["env"], None, False, None)  # not Python: as before tritonkit
    assert clean == base
    assert _child_env_for(["sh", "-c", "python x.py"], None, False, None) is None  # a shell keeps them
    assert _child_env_for([sys_python(), "x.py"], None, False, None) is None  # inherits os.environ: checked
    given = _child_env_for([sys_python(), "x.py"], None, False, {"PATH": "/bin"})
    assert given[process.RUN_DIR_ENV] == str(tmp_path) and given["PYTHONPATH"].startswith(process.BOOT_DIR)


def sys_python():
    import sys
    return sys.executable


def test_a_python_child_whose_environment_lost_the_start_up_hook_gets_it_back(tmp_path, monkeypatch):
    import tritonkit.check.process as process
    env = child_env(str(tmp_path), CheckOptions(), base={"PATH": "/bin", "PYTHONPATH": "/mine"})
    monkeypatch.setattr(process, "_installed", {})
    monkeypatch.setattr(os, "environ", env)
    no_path = {k: v for k, v in env.items() if k != "PYTHONPATH"}  # the run's variables, the hook's path taken away
    given = _child_env_for([sys_python(), "x.py"], None, False, no_path)
    assert given is not None and given["PYTHONPATH"].split(os.pathsep)[0] == process.BOOT_DIR
    assert json.loads(given[process.BEFORE_ENV]) == {"PYTHONPATH": None}  # its own grandchildren: as it chose
    own = _child_env_for([sys_python(), "x.py"], None, False, dict(env, PYTHONPATH="/other"))
    assert own["PYTHONPATH"].split(os.pathsep) == [process.BOOT_DIR, process.PACKAGE_PARENT, "/other"]


def _failing_writes(monkeypatch, journal, how):
    """``os.write`` to ``journal``'s file fails (``how[0]``: "enospc", "short" for half a write, or None)."""
    import errno
    import tritonkit.check.journal as journal_module
    real = os.write
    monkeypatch.setattr(journal_module, "_WARNED", False, raising=False)
    mine = getattr(journal, "_fd", None)

    def write(fd, data):
        if fd == mine and how[0] == "enospc":
            raise OSError(errno.ENOSPC, "No space left on device")
        if fd == mine and how[0] == "short":
            how[0] = "enospc"  # half of it lands, then the disk is full
            return real(fd, bytes(data)[:len(data) // 2])
        return real(fd, data)
    monkeypatch.setattr(os, "write", write)


def test_a_journal_write_that_fails_is_kept_said_once_and_marked(tmp_path, monkeypatch, capfd):
    j = Journal(str(tmp_path), "root", ["out_of_bounds"], "auto")
    j.new_finding(0, _finding(1))
    how = ["short"]
    _failing_writes(monkeypatch, j, how)
    j.new_finding(1, _finding(2))  # half a line written, then the disk is full: nothing raised
    j.launch(LaunchRecord("k", (1, 1, 1)))
    j.new_finding(2, _finding(3))
    assert capfd.readouterr().err.count("cannot write the run's journal (No space left on device)") == 1
    assert os.path.exists(tmp_path / ("w" + os.path.basename(j.path)))
    run = read_run(str(tmp_path))[0]
    assert [f.line for f in run.findings.values()] == [1] and run.write_error  # the cut line is not read
    assert "could not be written whole" in merge([run]).summary["incomplete"][0]
    how[0] = None  # room again: what waited is written, in order, the cut line completed
    j.exit(0, False)
    j.close()
    run = read_journal(j.path)
    assert [f.line for _, f in sorted(run.findings.items())] == [1, 2, 3] and run.exit["status"] == 0
    assert [r.kernel for r in run.launch_records] == ["k"] and run.write_error == "No space left on device"
