"""Bad input to the commands: a clear message and exit status 2, and nothing the user owns touched."""
import math

import pytest

import tritonkit
from tritonkit.cli import main

SCRIPT = "import sys\nprint('ran', sys.argv[1:])\n"


@pytest.fixture
def script(tmp_path):
    p = tmp_path / "victim.py"
    p.write_text(SCRIPT)
    return p


@pytest.mark.parametrize("command", [["check"], ["tune"], ["profile"]])
def test_an_output_path_that_is_the_script_is_refused_and_the_script_kept(script, capfd, command, monkeypatch):
    monkeypatch.chdir(script.parent)
    assert main([*command, "--json", "victim.py", "--", "python", "victim.py"]) == 2
    err = capfd.readouterr().err
    assert "victim.py is the script (victim.py): writing it would overwrite it" in err
    assert script.read_text() == SCRIPT


def test_an_output_path_that_is_an_input_of_the_script_is_refused(script, tmp_path, capfd):
    data = tmp_path / "data.txt"
    data.write_text("the user's data")
    assert main(["check", "--json", str(data), "--", "python", str(script), str(data)]) == 2
    assert "is an input of the run" in capfd.readouterr().err
    assert data.read_text() == "the user's data"


def test_an_output_path_that_is_a_directory_is_refused(script, tmp_path, capfd):
    assert main(["check", "--json", str(tmp_path), "--", "python", str(script)]) == 2
    assert "it is a directory" in capfd.readouterr().err


def test_distill_does_not_write_over_its_own_input(tmp_path, capfd):
    results = tmp_path / "tuned.json"
    results.write_text("{}")
    assert main(["distill", "k", "--from", str(results), "--out", str(results)]) == 2
    assert "--out" in capfd.readouterr().err and results.read_text() == "{}"


@pytest.mark.parametrize("value", ["nan", "0", "-1"])
@pytest.mark.parametrize("command", ["check", "doctor"])
def test_a_timeout_that_is_not_a_positive_number_is_refused_before_anything_runs(script, tmp_path, capfd, value,
                                                                                  command):
    extra = ["--out", str(tmp_path / "doc")] if command == "doctor" else []
    assert main([command, *extra, "--timeout", value, "--", "python", str(script)]) == 2
    captured = capfd.readouterr()
    assert "--timeout must be a positive number of seconds" in captured.err and "ran" not in captured.out


def test_an_infinite_timeout_means_no_limit(script, capfd):
    assert main(["check", "--timeout", "inf", "--", "python", str(script), "x"]) == 0
    assert "ran ['x']" in capfd.readouterr().out


@pytest.mark.parametrize("timeout", [math.nan, 0.0, -3.0])
def test_the_api_refuses_a_timeout_that_is_not_positive(timeout):
    with pytest.raises(ValueError, match="timeout must be a positive number of seconds"):
        with tritonkit.checking(timeout=timeout):
            pass
    with tritonkit.checking(timeout=math.inf) as s:
        assert s.timeout is None


HOSTILE = '''
import torch
import triton
import triton.language as tl


@triton.jit
def hostile_kernel(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.device_assert(x > 0, "\\x1b]0;pwned\\x07\\x1b[2Jcleared")


hostile_kernel[(1,)](torch.zeros(16), BLOCK=16)
'''


def test_a_kernels_message_cannot_send_the_terminal_commands(tmp_path, capfd):
    """A device_assert message with ESC sequences (retitle the window, clear the screen) is printed
    with its control characters escaped; the JSON keeps the message as it was."""
    script = tmp_path / "hostile.py"
    script.write_text(HOSTILE)
    out = tmp_path / "f.json"
    assert main(["check", "--json", str(out), "--", "python", str(script)]) == 1
    text = capfd.readouterr().out
    assert "\x1b]0;" not in text and "\x1b[2J" not in text and "\x07" not in text
    assert "\\x1b]0;pwned\\x07\\x1b[2Jcleared" in text
    import json
    (finding,) = json.loads(out.read_text())["findings"]
    assert "\x1b]0;pwned\x07\x1b[2Jcleared" in finding["message"]


ALARM = '''
import signal, time
import torch
import triton
import triton.language as tl


@triton.jit
def copy_kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs))


fired = []
signal.signal(signal.SIGALRM, lambda *a: fired.append(time.monotonic()))
signal.setitimer(signal.ITIMER_REAL, 0.5)
start = time.monotonic()
copy_kernel[(1,)](torch.zeros(16), torch.empty(16), BLOCK=16)
while not fired and time.monotonic() - start < 5:
    time.sleep(0.01)
print("ALARM", bool(fired))
'''


def test_the_launch_timeout_leaves_the_programs_own_alarm_running(tmp_path, capfd):
    script = tmp_path / "alarm.py"
    script.write_text(ALARM)
    assert main(["check", "--timeout", "30", "--", "python", str(script)]) == 0
    assert "ALARM True" in capfd.readouterr().out


def test_an_error_that_triton_itself_raises_is_the_kernels_not_the_cpus(tmp_path, capfd):
    import inspect

    import triton.language as tl
    if "have been removed" not in inspect.getsource(tl.make_block_ptr):
        pytest.skip("this Triton still has block pointers")
    script = tmp_path / "block_ptr.py"
    script.write_text('''
import torch
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, BLOCK: tl.constexpr):
    p = tl.make_block_ptr(x_ptr, (16,), (1,), (0,), (BLOCK,), (0,))
    tl.store(p, tl.load(p) + 1)


k[(1,)](torch.zeros(16), BLOCK=16)
''')
    out = tmp_path / "f.json"
    assert main(["check", "--json", str(out), "--", "python", str(script)]) == 1
    import json
    (f,) = json.loads(out.read_text())["findings"]
    assert f["kind"] == "kernel_error" and "Triton raised NotImplementedError" in f["message"]
    assert "cannot run on the CPU" not in capfd.readouterr().out


OVERRUN = '''
import torch
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) + 1)


k[(1,)](torch.zeros(8), BLOCK=16)
'''


def test_a_script_read_from_a_pipe_or_a_fifo_runs_once_and_is_checked(tmp_path):
    """``cat x.py | tritonkit check -- python /dev/stdin`` and a FIFO: the source is read once (to
    check its syntax), and what was read is what runs."""
    import os
    import subprocess
    import sys
    import threading
    cmd = [sys.executable, "-m", "tritonkit", "check", "--json", str(tmp_path / "a.json"), "--", "python"]
    r = subprocess.run(cmd + ["/dev/stdin"], input=OVERRUN, capture_output=True, text=True, timeout=240)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "1 finding (1 out_of_bounds)" in " ".join(r.stdout.split())
    fifo = tmp_path / "script.fifo"
    os.mkfifo(fifo)
    writer = threading.Thread(target=fifo.write_text, args=(OVERRUN,))
    writer.start()
    r = subprocess.run(cmd + [str(fifo)], capture_output=True, text=True, timeout=240)
    writer.join(5)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "1 finding (1 out_of_bounds)" in " ".join(r.stdout.split())


def test_tune_without_a_gpu_says_so_before_running_the_script(script, capfd, monkeypatch):
    import torch
    if torch.cuda.is_available():
        pytest.skip("a GPU is here")
    monkeypatch.delenv("TRITONKIT_TUNE_ON_CPU", raising=False)
    assert main(["tune", "--", "python", str(script)]) == 2
    captured = capfd.readouterr()
    assert "no CUDA GPU here" in captured.err and "tritonkit check" in captured.err and "ran" not in captured.out


def test_reports_written_to_a_file_or_a_pipe_fit_80_columns(monkeypatch, capsys):
    """Piped (a CI log), the commands' console is 80 columns, or what COLUMNS says; a table of 14
    columns then keeps its rows on one line each, its numbers whole, in parts that fit (rich's own
    table folded every cell into 3-character columns)."""
    from tritonkit.cli._console import PIPED_WIDTH, make_console
    from tritonkit.report.fit import Column, FitTable
    monkeypatch.delenv("COLUMNS", raising=False)
    console = make_console()
    assert not console.is_terminal and console.width == PIPED_WIDTH == 80
    table = FitTable(Column("kernel", shorten=True, key=True), *(Column(f"c{i}", justify="right") for i in range(13)))
    table.add_row("a_kernel_with_a_name_much_longer_than_its_column_" * 2, *[f"{1000 + i}.125" for i in range(13)])
    console.print(table)
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 80
    rows = [line for line in out.splitlines() if line.startswith("│")]
    assert all(any(f"{1000 + i}.125" in row for row in rows) for i in range(13))  # every number whole
    assert len(rows) == sum(line.startswith("┏") for line in out.splitlines())  # one line per part
    monkeypatch.setenv("COLUMNS", "100")
    assert make_console().width == 100


def _cache_with(tmp_path, names=("alpha", "beta", "gamma")):
    from tritonkit.tune import Trial, TuneCache
    from tritonkit.tune._cache import KernelId
    d = tmp_path / "cache"
    cache = TuneCache(d)
    for name in names:
        cache.record(KernelId(name, "h" + name, "3.9", "cpu"), ["n=1"], Trial(point={"BLOCK": 16}, ms=1.0))
    return d


def _cache_json(d, name):
    return next(p for p in d.iterdir() if p.name.startswith(name + "-") and p.name.endswith(".json"))


def test_cache_list_and_show_change_nothing_and_name_the_files_they_skip(tmp_path, capsys):
    d = _cache_with(tmp_path)
    (d / "x.json").mkdir()
    (d / "zeta-000000000000.json").write_text("{bad")
    for p in d.glob("*.lock"):
        p.unlink()
    before = sorted(p.name for p in d.iterdir())
    assert main(["cache", "list", "--dir", str(d)]) == 0
    out = capsys.readouterr().out
    assert "3 key(s) in 3 file(s)" in out
    out = " ".join(out.split())  # a message longer than the console's 80 columns goes on over lines
    assert "skipped: x.json: " in out and "a directory" in out and "skipped: zeta-000000000000.json: " in out
    assert main(["cache", "show", "alpha", "--dir", str(d)]) == 0
    assert sorted(p.name for p in d.iterdir()) == before  # nothing renamed, no lock file made
    assert (d / "zeta-000000000000.json").read_text() == "{bad"


def test_cache_clear_clears_what_it_can_and_names_what_it_could_not(tmp_path, capsys):
    d = _cache_with(tmp_path)
    target = tmp_path / "not_the_cache.txt"
    target.write_text("keep")
    lock = _cache_json(d, "beta").with_name(_cache_json(d, "beta").name + ".lock")
    lock.unlink()
    lock.symlink_to(target)  # a lock that is a symlink: not followed, not taken, its target untouched
    assert main(["cache", "clear", "--dir", str(d)]) == 2
    out = capsys.readouterr().out
    assert "removed 2 cached config(s)" in out and "not cleared: beta-" in out
    assert [p.name.split("-")[0] for p in d.glob("*.json")] == ["beta"]  # alpha and gamma went
    assert target.read_text() == "keep"


def test_the_doctor_reports_a_script_whose_name_is_not_utf8(tmp_path, monkeypatch):
    """Undecodable bytes in the script's name or arguments (held by Python as lone surrogates) are
    written into the report as \\udcXX escapes, not a UnicodeEncodeError with no report."""
    import os
    raw = os.path.join(os.fsencode(str(tmp_path)), b"s\xff.py")
    with open(raw, "w") as fh:
        fh.write("print('hi')\n")
    monkeypatch.setattr("tritonkit.doctor.gpu_present", lambda: False)
    out = tmp_path / "out"
    assert main(["doctor", "--out", str(out), "--", "python", os.fsdecode(raw), "arg\udcfe"]) == 0
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "s\\udcff.py" in html


@pytest.mark.parametrize("content,says", [
    ('{"hello": 1}', "is not a `tritonkit tune --json` file"), ("[1, 2]", "is not a `tritonkit tune --json` file"),
    ("not json", "is not JSON"), ('{"results": [{"kernel": "k", "key": 3}]}', "is not a tuning result")])
def test_distill_from_a_file_that_is_not_a_tune_json_is_a_usage_error(tmp_path, capfd, content, says):
    bad = tmp_path / "other.json"
    bad.write_text(content)
    assert main(["distill", "k", "--from", str(bad), "--out", str(tmp_path / "k_h.py")]) == 2
    err = capfd.readouterr().err
    assert says in err and "Traceback" not in err and "internal error" not in err


def test_a_script_that_exits_with_a_message_shows_it_as_python_does(tmp_path, capfd):
    script = tmp_path / "fails.py"
    script.write_text("import sys\nsys.exit('fatal: bad config')\n")
    assert main(["check", "--", "python", str(script)]) == 3
    err = capfd.readouterr().err
    assert "fatal: bad config\n" in err and "status 1" in err and "status fatal" not in err


def test_a_program_that_is_not_a_python_script_is_named_as_such(tmp_path, capfd, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["check", "--", "bash", "run.sh"]) == 2
    assert "bash is a program, not a Python script" in capfd.readouterr().err


def test_another_python_named_by_path_is_said_not_silently_replaced(tmp_path, capfd):
    other = tmp_path / "bin" / "python3"
    other.parent.mkdir()
    other.symlink_to("/bin/true")
    script = tmp_path / "ok.py"
    script.write_text("print('ran')\n")
    assert main(["check", "--", str(other), str(script)]) == 0
    err = capfd.readouterr().err
    assert f"not {other}" in err and "-m tritonkit" in err
