"""``tritonkit check`` loses no finding however the run ends (issue 45): SIGTERM/SIGHUP/SIGINT sent to
tritonkit are passed on to the script and the report is still made; a script that kills its own
process group does not take tritonkit with it; a usage error after findings keeps them; checked
processes the script leaves running are waited for; Python children that escape checking are
checked or named; launches from ``atexit`` handlers and late threads are checked; a journal that
cannot be written (a full disk, a file-size limit) degrades to a warning and a report that says it
may be incomplete; and, on a terminal, input, Ctrl-C and Ctrl-Z reach the script as without
tritonkit."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

KERNEL = textwrap.dedent('''
    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def double_kernel(x_ptr, out_ptr, B: tl.constexpr):
        offs = tl.program_id(0) * B + tl.arange(0, B)
        tl.store(out_ptr + offs, tl.load(x_ptr + offs) * 2)  # no mask: 100 elements, 2 x 64 lanes


    @triton.jit
    def other_kernel(x_ptr, B: tl.constexpr):
        offs = tl.arange(0, B)
        tl.store(x_ptr + offs, tl.zeros((B,), tl.float32))  # no mask: a finding of another line


    def launch(grid=(2,)):
        x, out = torch.randn(100), torch.zeros(100)
        double_kernel[grid](x, out, B=64)
        return out


    def other():
        other_kernel[(1,)](torch.zeros(10), B=16)
''')
PRELUDE = "import os, sys\nsys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))\nimport oob\n"
OOB = {("out_of_bounds", "x_ptr"), ("out_of_bounds", "out_ptr")}


def _write(tmp_path, body, name="script.py"):
    (tmp_path / "oob.py").write_text(KERNEL)
    script = tmp_path / name
    script.write_text(PRELUDE + textwrap.dedent(body))
    return script


def _env(tmp_path, **extra):
    """The environment of a run: its temporary directories under ``tmp_path/tmp``, to see what is left."""
    tmp = tmp_path / "tmp"
    tmp.mkdir(exist_ok=True)
    return {**os.environ, "COLUMNS": "120", "TMPDIR": str(tmp), **extra}


def _left_behind(tmp_path):
    return sorted(p.name for p in (tmp_path / "tmp").iterdir() if p.name.startswith("tritonkit-check-"))


def _start(tmp_path, script, *options, **env):
    """``tritonkit check [options] --json rel.json -- python script`` in a session of its own (a
    signal sent to its process group reaches nothing of this test), stderr to a file."""
    cmd = [sys.executable, "-m", "tritonkit", "check", *options, "--json", "rel.json", "--", "python", str(script)]
    err = open(tmp_path / "stderr.txt", "w")
    proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=err, text=True,
                            start_new_session=True, env=_env(tmp_path, **env), preexec_fn=_as_from_a_terminal)
    err.close()
    return proc


def _as_from_a_terminal() -> None:
    """tritonkit as a shell starts it in the foreground: SIGINT at its default. A test run started as a
    background job (``cmd &`` in a script, as a CI runner may) has SIGINT ignored, and a process that
    starts with it ignored keeps it so, by convention: tritonkit too."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _until(proc, word, timeout=120):
    """Read the run's stdout until a line holds ``word``; what was read."""
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        seen.append(line)
        if word in line:
            return "".join(seen)
    raise AssertionError(f"{word!r} never came: {''.join(seen)}")


def _finish(proc, tmp_path, timeout=120):
    out = proc.stdout.read()
    proc.wait(timeout=timeout)
    err = (tmp_path / "stderr.txt").read_text()
    path = tmp_path / "rel.json"
    return out, err, (json.loads(path.read_text()) if path.exists() else None)


def _run(tmp_path, script, *options, **env):
    """A whole run: ``(exit status, stdout, stderr, the JSON or None)``."""
    proc = _start(tmp_path, script, *options, **env)
    out, err, data = _finish(proc, tmp_path)
    return proc.returncode, out, err, data


def _gone(pid, timeout=10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        with open(f"/proc/{pid}/stat") as fh:
            if fh.read().rsplit(")", 1)[1].split()[0] == "Z":
                return True
        time.sleep(0.1)
    return False


SLEEPER = '''
    import signal
    {before}
    oob.launch()
    print("PID", os.getpid(), flush=True)
    import time
    time.sleep(60)
'''


@pytest.mark.parametrize("sig, behaviour", [(signal.SIGTERM, "dies"), (signal.SIGHUP, "dies"),
                                            (signal.SIGTERM, "ignores")])
def test_sigterm_or_sighup_to_tritonkit_ends_the_script_and_reports(tmp_path, sig, behaviour):
    """``kill PID``, ``timeout``, a cancelled CI job: the script ends (SIGKILL after the grace if it
    ignores the signal), the report and the JSON are written, nothing is left behind, 128 + signal."""
    before = "signal.signal(signal.SIGTERM, signal.SIG_IGN)" if behaviour == "ignores" else ""
    proc = _start(tmp_path, _write(tmp_path, SLEEPER.format(before=before)), TRITONKIT_TERM_GRACE="1")
    pid = int(_until(proc, "PID").split()[-1])
    os.kill(proc.pid, sig)  # tritonkit's pid alone, as `kill PID` does
    assert _gone(pid, timeout=30), "the script runs on"  # it would sleep 60 s
    out, err, data = _finish(proc, tmp_path)
    name = signal.Signals(sig).name
    assert proc.returncode == 128 + sig, out + err
    assert data is not None and {(f["kind"], f["arg"]) for f in data["findings"]} == OOB, err
    assert data["summary"]["terminated"] == name
    assert f"terminated ({name})" in out and f"tritonkit check: terminated ({name})" in err
    assert ("killed (SIGKILL)" in err) == (behaviour == "ignores"), err
    assert _left_behind(tmp_path) == []


def test_sigint_to_tritonkits_pid_alone_reaches_the_script(tmp_path):
    proc = _start(tmp_path, _write(tmp_path, SLEEPER.format(before="")))
    pid = int(_until(proc, "PID").split()[-1])
    os.kill(proc.pid, signal.SIGINT)  # not the process group: `kill -INT PID`
    assert _gone(pid, timeout=30), "the script never got SIGINT"  # it would sleep 60 s
    out, err, data = _finish(proc, tmp_path)
    assert proc.returncode == 130, out + err
    assert data["summary"]["interrupted"] is True and len(data["findings"]) == 2
    assert "tritonkit check: interrupted" in err


def test_a_script_that_kills_its_own_process_group_is_still_reported(tmp_path):
    script = _write(tmp_path, '''
        import signal
        oob.launch()
        os.killpg(os.getpgid(0), signal.SIGTERM)  # its cleanup: every process of its group
    ''')
    proc = _start(tmp_path, script)
    out, err, data = _finish(proc, tmp_path)
    assert proc.returncode == 1, out + err
    assert {(f["kind"], f["arg"]) for f in data["findings"]} == OOB
    assert "killed by signal 15 (SIGTERM)" in err and "out_of_bounds: double_kernel" in out


def test_tritonkit_killed_outright_takes_the_script_with_it(tmp_path):
    if not sys.platform.startswith("linux"):
        pytest.skip("PR_SET_PDEATHSIG is Linux's")
    proc = _start(tmp_path, _write(tmp_path, SLEEPER.format(before="")))
    pid = int(_until(proc, "PID").split()[-1])
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert _gone(pid), "the script runs on, orphaned"


def test_a_usage_error_after_findings_keeps_them(tmp_path):
    script = _write(tmp_path, '''
        oob.launch()
        oob.launch(grid=(1, 70000))  # over the GPU's y limit: refused
        print("NOT REACHED")
    ''')
    rc, out, err, data = _run(tmp_path, script)
    assert rc == 2 and data is not None, out + err
    assert {(f["kind"], f["arg"]) for f in data["findings"]} == OOB
    assert "larger than a GPU launches" in data["summary"]["error"]
    assert "error: kernel double_kernel: the grid" in out and "out_of_bounds: double_kernel" in out
    assert "NOT REACHED" not in out and "internal error" not in err


def test_checked_children_the_script_leaves_running_are_waited_for(tmp_path):
    """One ends 1.5 s after the script: its findings are in; one runs on: named, its finding made
    before the report is in."""
    (tmp_path / "late.py").write_text(PRELUDE + "import time\nprint('LATE', flush=True)\ntime.sleep(1.5)\n"
                                                "oob.launch()\n")
    (tmp_path / "daemon.py").write_text(PRELUDE + "import time\noob.other()\nprint('DAEMON', os.getpid(), "
                                                  "flush=True)\ntime.sleep(60)\n")
    script = _write(tmp_path, '''
        import subprocess
        here = os.path.dirname(os.path.abspath(__file__))
        late = subprocess.Popen([sys.executable, os.path.join(here, "late.py")], stdout=subprocess.PIPE, text=True)
        d = subprocess.Popen([sys.executable, os.path.join(here, "daemon.py")], stdout=subprocess.PIPE, text=True)
        late.stdout.readline()  # checking started there (it imported triton): then the script ends
        print(d.stdout.readline().strip(), flush=True)
    ''')
    proc = _start(tmp_path, script, TRITONKIT_CHILD_WAIT="5")
    daemon = int(_until(proc, "DAEMON").split()[-1])
    try:
        out, err, data = _finish(proc, tmp_path)
    finally:
        os.kill(daemon, signal.SIGKILL)
    assert proc.returncode == 1, out + err
    found = {(f["kind"], f["arg"], f["kernel"]) for f in data["findings"]}
    assert found == {("out_of_bounds", "x_ptr", "double_kernel"), ("out_of_bounds", "out_ptr", "double_kernel"),
                     ("out_of_bounds", "x_ptr", "other_kernel")}, err
    notes = data["summary"]["incomplete"]
    assert len(notes) == 1 and f"pid {daemon}" in notes[0] and "still running" in notes[0]
    assert "waiting up to 5 s" in err and f"may be incomplete: pid {daemon}" in out


def test_python_children_that_escape_the_start_up_hook_are_checked_or_named(tmp_path):
    (tmp_path / "child.py").write_text(PRELUDE + "oob.launch()\n")
    script = _write(tmp_path, '''
        import subprocess
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "child.py")
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        subprocess.run([sys.executable, path], env=env, check=True)  # PYTHONPATH taken away: checked all the same
        subprocess.run([sys.executable, "-I", "-c", "print('isolated')"], check=True)  # -I: no hook can reach it
    ''')
    rc, out, err, data = _run(tmp_path, script)
    assert rc == 1 and {(f["kind"], f["arg"]) for f in data["findings"]} == OOB, out + err
    assert all(f["process"]["argv"][-1].endswith("child.py") for f in data["findings"])
    notes = data["summary"]["incomplete"]
    assert len(notes) == 1 and "-I -c" in notes[0] and "never reached" in notes[0], notes


def test_launches_from_atexit_handlers_and_late_threads_are_checked(tmp_path):
    script = _write(tmp_path, '''
        import atexit, threading, time
        atexit.register(oob.launch)
        threading.Thread(target=lambda: (time.sleep(0.5), oob.other())).start()  # runs on after the script's end
    ''')
    rc, out, err, data = _run(tmp_path, script)
    assert rc == 1, out + err
    found = {(f["kind"], f["arg"], f["kernel"]) for f in data["findings"]}
    assert found == {("out_of_bounds", "x_ptr", "double_kernel"), ("out_of_bounds", "out_ptr", "double_kernel"),
                     ("out_of_bounds", "x_ptr", "other_kernel")}, out + err
    assert data["launches"] == 2


FULL = '''
    import resource
    from tritonkit.check.launch.active import active_session
    oob.launch()
    {fill}
    oob.other()  # a new finding, where nothing more can be written
    oob.launch()
    print("SCRIPT DONE", flush=True)
'''


def _full(fill: str) -> str:
    return FULL.format(fill=textwrap.indent(fill, " " * 4).lstrip())


def test_a_journal_that_cannot_be_written_warns_once_and_the_report_says_it(tmp_path):
    """A file-size limit (RLIMIT_FSIZE: writes fail with EFBIG, as a full disk's with ENOSPC)."""
    fill = ("path = active_session().journal.path\n"
            "resource.setrlimit(resource.RLIMIT_FSIZE, (os.path.getsize(path), resource.RLIM_INFINITY))")
    rc, out, err, data = _run(tmp_path, _write(tmp_path, _full(fill)))
    assert rc == 1 and data is not None, out + err
    assert "SCRIPT DONE" in out and "Traceback" not in err, err
    assert err.count("cannot write the run's journal") == 1, err
    assert {(f["kind"], f["arg"]) for f in data["findings"]} == OOB  # those written before
    notes = data["summary"]["incomplete"]
    assert notes and "could not be written whole" in notes[0], notes
    assert "may be incomplete: the journal of the script's process" in out


def test_a_full_temporary_directory_degrades_the_same_way(tmp_path):
    mount = tmp_path / "tmp"
    mount.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)],
                                           capture_output=True).returncode != 0:
        pytest.skip("mounting a small tmpfs needs root (CAP_SYS_ADMIN)")
    try:
        fill = ("try:\n"
                "    with open(os.path.join(os.environ['TMPDIR'], 'filler'), 'wb') as fh:\n"
                "        while True:\n"
                "            fh.write(b'x' * 4096); fh.flush()\n"
                "except OSError:\n"
                "    pass")
        rc, out, err, data = _run(tmp_path, _write(tmp_path, _full(fill)))
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)
    assert rc == 1 and data is not None, out + err
    assert "SCRIPT DONE" in out and "Traceback" not in err, err
    assert err.count("cannot write the run's journal") == 1, err
    assert OOB <= {(f["kind"], f["arg"]) for f in data["findings"]}
    assert any("could not be written whole" in n for n in data["summary"]["incomplete"])


# --- on a terminal: the script in a process group of its own, lent the terminal ------------------------

SHELL = '''
import os, signal, sys
signal.signal(signal.SIGTTOU, signal.SIG_IGN)  # a shell with job control: the terminal to its jobs and back
pid = os.fork()
if pid == 0:
    os.setpgid(0, 0)
    os.tcsetpgrp(0, os.getpgrp())
    signal.signal(signal.SIGTTOU, signal.SIG_DFL)
    os.execv(sys.executable, [sys.executable, *sys.argv[1:]])
try:
    os.setpgid(pid, pid)
except OSError:
    pass
os.tcsetpgrp(0, pid)
_, status = os.waitpid(pid, os.WUNTRACED)
if os.WIFSTOPPED(status):
    os.tcsetpgrp(0, os.getpgrp())
    print("JOB STOPPED", flush=True)
    os.tcsetpgrp(0, pid)  # fg
    os.killpg(pid, signal.SIGCONT)
    _, status = os.waitpid(pid, 0)
print("JOB EXIT", os.waitstatus_to_exitcode(status), flush=True)
'''


class _Terminal:
    """``tritonkit check --json rel.json -- python SCRIPT`` started by a small job-control shell on a
    pseudo-terminal of its own (its session's controlling terminal)."""

    def __init__(self, tmp_path, script):
        import pty
        (tmp_path / "shell.py").write_text(SHELL)
        argv = [sys.executable, str(tmp_path / "shell.py"), "-m", "tritonkit", "check", "--json", "rel.json", "--",
                "python", str(script)]
        env = _env(tmp_path)
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # pragma: no cover - the child
            try:
                os.chdir(tmp_path)
                os.execve(sys.executable, argv, env)
            finally:
                os._exit(127)
        self.text = ""

    def _more(self, deadline) -> None:
        import select
        left = deadline - time.monotonic()
        data = b""
        if left > 0 and select.select([self.fd], [], [], left)[0]:
            try:
                data = os.read(self.fd, 65536)
            except OSError:  # the terminal's last process is gone
                pass
        if not data:
            raise AssertionError(f"no more output: {self.text}")
        self.text += data.decode("utf-8", "replace").replace("\r\n", "\n")

    def until(self, word, timeout=120) -> None:
        """Read the terminal until ``word`` was written to it."""
        deadline = time.monotonic() + timeout
        while word not in self.text:
            self._more(deadline)

    def until_exit(self) -> None:
        """Until the shell said the job's exit status."""
        self.until("JOB EXIT")
        deadline = time.monotonic() + 10
        while "\n" not in self.text.split("JOB EXIT", 1)[1]:
            self._more(deadline)

    def type(self, keys: bytes) -> None:
        os.write(self.fd, keys)

    def close(self):
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.waitpid(self.pid, 0)
        os.close(self.fd)


def test_on_a_terminal_the_script_reads_it_and_ctrl_c_interrupts_it(tmp_path):
    term = _Terminal(tmp_path, _write(tmp_path, '''
        oob.launch()
        name = input("NAME? ")
        print("HELLO", name, flush=True)
        print("WAIT" + "ING", flush=True)
        import time
        time.sleep(60)
    '''))
    try:
        term.until("NAME? ")
        term.type(b"bob\n")  # no SIGTTIN: the script's group is the terminal's foreground
        term.until("WAITING")
        term.type(b"\x03")  # Ctrl-C
        term.until_exit()
    finally:
        term.close()
    assert "HELLO bob" in term.text and "interrupted (Ctrl-C)" in term.text, term.text
    assert "JOB EXIT 130" in term.text, term.text
    data = json.loads((tmp_path / "rel.json").read_text())
    assert data["summary"]["interrupted"] is True and len(data["findings"]) == 2


def test_on_a_terminal_ctrl_z_stops_the_job_and_fg_goes_on(tmp_path):
    term = _Terminal(tmp_path, _write(tmp_path, '''
        oob.launch()
        print("WAIT" + "ING", flush=True)
        import time
        t = time.monotonic()
        while time.monotonic() - t < 3:
            time.sleep(0.05)
        print("SCRIPT" + " END", flush=True)
    '''))
    try:
        term.until("WAITING")
        term.type(b"\x1a")  # Ctrl-Z: the script stops, and tritonkit with it, as one job
        term.until("JOB STOPPED")
        term.until_exit()
    finally:
        term.close()
    assert "SCRIPT END" in term.text.split("JOB STOPPED")[1] and "JOB EXIT 1\n" in term.text, term.text
