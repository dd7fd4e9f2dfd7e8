"""A long launch shows its progress on standard error and journals it, so a run killed in the
middle of a launch still reports the programs it checked."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap

import torch
import triton
import triton.language as tl

import tritonkit
from tritonkit.check.launch import progress


@triton.jit
def slow_kernel(x_ptr, out_ptr, ITERS: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for _ in range(ITERS):
        acc += tl.load(x_ptr + offs)
    tl.store(out_ptr + pid * BLOCK + offs, acc)


def test_a_long_launch_prints_its_progress_to_stderr(monkeypatch, capfd):
    monkeypatch.setenv(progress.ENV, "0.05")
    x = torch.ones(16)
    out = torch.zeros(64 * 16)
    with tritonkit.checking(engine="sequential") as s:
        slow_kernel[(64,)](x, out, ITERS=60, BLOCK=16)
    assert not s.findings and out.eq(60).all()
    err = capfd.readouterr().err
    lines = re.findall(r"tritonkit: checking slow_kernel \(grid 64\): (\d+) of 64 programs in .*", err)
    assert lines, err
    assert all(0 <= int(n) <= 64 for n in lines)
    assert "programs/s, about" in err


def test_no_progress_line_for_a_short_launch_or_when_turned_off(monkeypatch, capfd):
    x = torch.ones(16)
    out = torch.zeros(4 * 16)
    with tritonkit.checking():
        slow_kernel[(4,)](x, out, ITERS=2, BLOCK=16)  # far under SHOW_AFTER_S
    monkeypatch.setenv(progress.ENV, "0")
    with tritonkit.checking(engine="sequential"):
        slow_kernel[(64,)](x, out.new_zeros(64 * 16), ITERS=30, BLOCK=16)
    assert "tritonkit: checking" not in capfd.readouterr().err


def test_a_run_killed_in_the_middle_of_a_launch_reports_the_programs_it_checked(tmp_path):
    script = tmp_path / "killed.py"
    script.write_text(textwrap.dedent(f"""
        import os, signal, sys, threading, time
        sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})
        import torch
        from test_progress import slow_kernel
        threading.Timer(2.0, lambda: os.kill(os.getpid(), signal.SIGKILL)).start()
        x = torch.ones(16)
        out = torch.zeros(100000 * 16)
        slow_kernel[(100000,)](x, out, ITERS=20, BLOCK=16)
        print("SCRIPT-DONE")
    """))
    report = tmp_path / "report.json"
    # wide enough for the summary's line on one line (pytest-xdist's workers have COLUMNS=80)
    env = dict(os.environ, COLUMNS="200", **{progress.ENV: "0.2"})
    proc = subprocess.run([sys.executable, "-m", "tritonkit", "check", "--engine", "sequential", "--json", str(report),
                           "--", sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert "SCRIPT-DONE" not in proc.stdout
    assert "killed by signal 9" in proc.stderr, proc.stderr[-2000:]
    (u,) = json.loads(report.read_text())["summary"]["unfinished"]
    assert u["kernel"] == "slow_kernel" and u["grid"] == [100000, 1, 1]
    assert 0 < u["programs"] < 100000 and u["seconds"] > 0
    assert re.search(r"unfinished: slow_kernel \(grid 100000x1x1\): the process ended in the middle of this launch; "
                     r"[\d,]+ of 100,000 programs checked", " ".join(proc.stdout.split())), proc.stdout[-3000:]
