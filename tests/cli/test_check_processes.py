"""``tritonkit check`` on programs that start processes or end hard: every Python child is checked
and its findings reach the report, nothing found is lost when a process ends without cleaning up,
and the report reaches the terminal whatever the script did with its own ``sys.stdout``."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

KERNEL = textwrap.dedent('''
    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def double_kernel(x_ptr, out_ptr, B: tl.constexpr):
        offs = tl.program_id(0) * B + tl.arange(0, B)
        tl.store(out_ptr + offs, tl.load(x_ptr + offs) * 2)  # no mask: 100 elements, 2 x 64 lanes


    def launch():
        x, out = torch.randn(100), torch.zeros(100)
        double_kernel[(2,)](x, out, B=64)
        return out


    if __name__ == "__main__":
        launch()
''')
KERNEL_LINE = 10  # the line of the store (and load) in KERNEL

PRELUDE = "import os, sys\nsys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))\nimport oob\n"

SCRIPTS = {
    "subprocess": '''
        import subprocess
        r = subprocess.run([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "oob.py")])
        print("child exit", r.returncode)
    ''',
    "fork_pool": '''
        import multiprocessing as mp
        def work(_):
            oob.launch()
            return 1
        if __name__ == "__main__":
            with mp.get_context("fork").Pool(2) as pool:
                print("done", sum(pool.map(work, range(2))))
    ''',
    "spawn": '''
        import multiprocessing as mp
        def work():
            oob.launch()
        if __name__ == "__main__":
            p = mp.get_context("spawn").Process(target=work)
            p.start(); p.join()
            print("child exit", p.exitcode)
    ''',
    "os_exit": '''
        oob.launch()
        os._exit(0)
    ''',
    "sigkill": '''
        import signal
        oob.launch()
        os.kill(os.getpid(), signal.SIGKILL)
    ''',
    "stdout_replaced": '''
        import io
        sys.stdout = io.StringIO()
        oob.launch()
    ''',
    "stdout_closed": '''
        oob.launch()
        sys.stdout.close()
    ''',
    "chdir": '''
        import tempfile
        os.chdir(tempfile.mkdtemp())
        oob.launch()
    ''',
}
SCRIPTS["forkserver"] = SCRIPTS["spawn"].replace('"spawn"', '"forkserver"')
CHILD = {"subprocess", "fork_pool", "spawn", "forkserver"}


def _write(tmp_path, body):
    (tmp_path / "oob.py").write_text(KERNEL)
    script = tmp_path / "script.py"
    script.write_text(PRELUDE + textwrap.dedent(body))
    return script


def _check(tmp_path, script, *options, env=None, timeout=240):
    """``tritonkit check [options] --json rel.json -- python script`` from ``tmp_path``, in a process of
    its own: ``(completed process, the JSON or None)``."""
    cmd = [sys.executable, "-m", "tritonkit", "check", *options, "--json", "rel.json", "--", "python", str(script)]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "COLUMNS": "120", **(env or {})})
    path = tmp_path / "rel.json"
    return proc, (json.loads(path.read_text()) if path.exists() else None)


@pytest.mark.parametrize("case", sorted(SCRIPTS))
def test_findings_reach_the_report_however_the_program_runs_or_ends(tmp_path, case):
    if case == "forkserver" and sys.platform != "linux":
        pytest.skip("forkserver is a Linux start method")
    proc, data = _check(tmp_path, _write(tmp_path, SCRIPTS[case]))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert data is not None, out  # a relative --json is the command's, not where the script chdir'ed to
    kinds = {(f["kind"], f["arg"], f["line"]) for f in data["findings"]}
    assert kinds == {("out_of_bounds", "x_ptr", KERNEL_LINE), ("out_of_bounds", "out_ptr", KERNEL_LINE)}, out
    assert "out_of_bounds: double_kernel" in proc.stdout  # printed on the real stdout
    processes = [f.get("process") for f in data["findings"]]
    if case in CHILD:
        assert all(p and p["pid"] for p in processes), processes
        assert "process" in proc.stdout and f"pid {processes[0]['pid']}" in proc.stdout
        if case == "subprocess":
            assert processes[0]["argv"][-1].endswith("oob.py")
            assert "child exit 0" in proc.stdout
        if case == "fork_pool":
            assert all(p.get("fork_of") for p in processes)
    else:
        assert processes == [None, None]  # the program's own
    if case == "sigkill":
        assert "killed by signal 9 (SIGKILL)" in proc.stderr


def test_no_children_leaves_the_children_unchecked(tmp_path):
    proc, data = _check(tmp_path, _write(tmp_path, SCRIPTS["subprocess"]), "--no-children")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert data["findings"] == [] and data["launches"] == 0


def test_a_fork_pool_with_no_children_writes_nothing_into_the_programs_journal(tmp_path):
    body = SCRIPTS["fork_pool"].replace('print("done"', 'oob.launch(); print("done"')
    proc, data = _check(tmp_path, _write(tmp_path, body), "--no-children")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert len(data["findings"]) == 2 and all(f.get("process") is None for f in data["findings"])
    assert data["launches"] == 1  # the program's own launch; the workers' are not reported


def test_a_child_that_is_not_python_gets_the_environment_without_tritonkit(tmp_path):
    body = '''
        import json, subprocess
        keys = ("TRITON_INTERPRET", "TRITONKIT_RUN_DIR", "TRITONKIT_CHECK_OPTIONS", "PYTHONPATH")
        out = subprocess.run(["env"], capture_output=True, text=True).stdout
        seen = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
        print("NOT_PYTHON", json.dumps({k: seen.get(k) for k in keys}))
        code = "import os, json; print(json.dumps({k: os.environ.get(k) for k in %r}))" % (keys,)
        out = subprocess.run([sys.executable, "-c", code], env={"PATH": os.environ["PATH"]},
                             capture_output=True, text=True).stdout
        print("PYTHON_OWN_ENV", out.strip())
    '''
    # the user's PYTHONPATH: one of its own, and whatever makes tritonkit importable here (a checkout on it)
    user_path = os.pathsep.join(["/nowhere"] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    proc, data = _check(tmp_path, _write(tmp_path, body), env={"PYTHONPATH": user_path, "TRITON_INTERPRET": "0"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    line = next(x for x in proc.stdout.splitlines() if x.startswith("NOT_PYTHON"))
    env = json.loads(line.split(" ", 1)[1])
    assert env == {"TRITON_INTERPRET": "0", "TRITONKIT_RUN_DIR": None, "TRITONKIT_CHECK_OPTIONS": None,
                   "PYTHONPATH": user_path}  # as the user had them
    line = next(x for x in proc.stdout.splitlines() if x.startswith("PYTHON_OWN_ENV"))
    env = json.loads(line.split(" ", 1)[1])
    assert env["TRITONKIT_RUN_DIR"] and env["TRITONKIT_CHECK_OPTIONS"]


def test_a_python_child_given_its_own_environment_is_checked(tmp_path):
    body = '''
        import subprocess
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "oob.py")
        subprocess.run([sys.executable, path], env={"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/")})
    '''
    proc, data = _check(tmp_path, _write(tmp_path, body))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert len(data["findings"]) == 2 and all(f["process"]["pid"] for f in data["findings"])


def test_a_child_that_cannot_import_tritonkit_is_named_and_the_run_goes_on(tmp_path):
    shadow = tmp_path / "shadow"  # a tritonkit that cannot be imported, first on the child's path
    (shadow / "tritonkit").mkdir(parents=True)
    (shadow / "tritonkit" / "__init__.py").write_text("raise ImportError('broken on purpose')\n")
    body = '''
        import subprocess
        subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, '.'); import triton"], cwd=%r)
        oob.launch()
    ''' % str(shadow)
    proc, data = _check(tmp_path, _write(tmp_path, body))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "cannot import tritonkit" in proc.stderr and "runs unchecked" in proc.stderr
    assert len(data["findings"]) == 2 and all(f.get("process") is None for f in data["findings"])


def test_an_interrupted_run_says_so(tmp_path):
    import signal
    import time
    script = _write(tmp_path, '''
        oob.launch()
        print("LAUNCHED", flush=True)
        import time
        time.sleep(60)
    ''')
    cmd = [sys.executable, "-m", "tritonkit", "check", "--json", "rel.json", "--", "python", str(script)]
    proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    deadline = time.monotonic() + 120
    line = ""
    while "LAUNCHED" not in line and time.monotonic() < deadline:
        line = proc.stdout.readline()
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C does: the whole foreground process group
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, out + err
    data = json.loads((tmp_path / "rel.json").read_text())
    assert data["summary"]["interrupted"] is True and len(data["findings"]) == 2
    assert "interrupted" in out and "tritonkit check: interrupted" in err


def test_stop_on_first_in_a_child_says_so_in_one_line_not_a_traceback(tmp_path):
    script = _write(tmp_path, SCRIPTS["subprocess"])
    proc, report = _check(tmp_path, script, "--stop-on-first")
    assert proc.returncode == 1 and report["findings"]
    assert "checking stopped this process" in proc.stderr
    assert "Traceback" not in proc.stderr and "tritonkit/check" not in proc.stderr, proc.stderr[-2000:]


def test_a_fork_of_the_program_is_labelled_with_the_programs_own_command(tmp_path):
    script = _write(tmp_path, '''
        pid = os.fork()
        if pid == 0:
            oob.launch()
            os._exit(0)
        os.waitpid(pid, 0)
    ''')
    proc, report = _check(tmp_path, script)
    forked = [f for f in report["findings"] if f.get("process")]
    assert forked, proc.stdout[-2000:]
    argv = forked[0]["process"]["argv"]
    assert argv[-1] == str(script) and not any("tritonkit" in a for a in argv), argv
