"""Debug operations under check: static_print/static_assert once per specialization, device_print per
element with the program id, device_assert always on (a finding), and pdb at the faulty line."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch
import triton
import triton.language as tl

import tritonkit


@triton.jit
def static_kernel(x_ptr, BLOCK: tl.constexpr, SCALE: tl.constexpr):
    tl.static_print("BLOCK =", BLOCK, "SCALE =", SCALE)
    tl.static_assert(BLOCK % 16 == 0, "BLOCK must be a multiple of 16")  # LINE: static_assert
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) * SCALE)


def test_static_print_once_per_specialization(capsys):
    x = torch.ones(256)
    with tritonkit.checking() as s:
        static_kernel[(4,)](x, BLOCK=64, SCALE=2)
        static_kernel[(4,)](x, BLOCK=64, SCALE=2)  # same specialization: no new print
        static_kernel[(2,)](x, BLOCK=128, SCALE=2)  # a new one
        static_kernel[(8,)](x.to(torch.float64), BLOCK=32, SCALE=2)  # new block size
    assert not s.findings
    out = capsys.readouterr().out.splitlines()
    assert out == ["BLOCK = 64 SCALE = 2", "BLOCK = 128 SCALE = 2", "BLOCK = 32 SCALE = 2"]
    assert torch.equal(x, torch.full((256,), 8.0))  # the kernels did run every time


def test_static_print_shows_tensor_types_like_the_compiler(capsys):
    @triton.jit
    def kernel(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.static_print(offs, n)
        tl.store(x_ptr + offs, offs.to(tl.float32), mask=offs < n)

    with tritonkit.checking():
        kernel[(3,)](torch.zeros(16), 16, BLOCK=16)
    assert capsys.readouterr().out.splitlines() == ["int32[16] int32[]"]


def test_static_assert_failure_is_a_finding_and_stops_the_launch(line_of):
    x = torch.ones(256)
    with pytest.raises(tritonkit.CheckAborted):
        with tritonkit.checking() as s:
            static_kernel[(4,)](x, BLOCK=24, SCALE=2)
    (f,) = s.findings
    assert (f.kind, f.access, f.line) == ("assert_failed", "static_assert", line_of(static_kernel, "static_assert"))
    assert "BLOCK must be a multiple of 16" in f.message
    assert torch.equal(x, torch.ones(256))  # as on the GPU: the kernel never ran


@triton.jit
def print_kernel(x_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    if pid == 1:
        tl.device_print("x", x)
        tl.device_print("pid", pid)


def test_device_print_per_element_with_program_id(capsys):
    x = torch.arange(40, dtype=torch.float32)
    with tritonkit.checking():
        print_kernel[(3,)](x, 40, BLOCK=16)
    lines = capsys.readouterr().out.splitlines()
    want = [f"pid (1, 0, 0) idx ({i:>2}) x: {16 + i:f}" for i in range(16)] + ["pid (1, 0, 0) idx () pid: 1"]
    assert lines == want


def test_device_print_hex_and_bf16(capsys):
    @triton.jit
    def kernel(x_ptr):
        x = tl.load(x_ptr + tl.arange(0, 2))
        tl.device_print("v", x)
        tl.device_print("h", x.to(tl.int16, bitcast=True), hex=True)

    with tritonkit.checking():
        kernel[(1,)](torch.tensor([1.5, -2.0], dtype=torch.bfloat16))
    assert capsys.readouterr().out.splitlines() == [
        "pid (0, 0, 0) idx (0) v: 1.500000", "pid (0, 0, 0) idx (1) v: -2.000000",
        "pid (0, 0, 0) idx (0) h: 0x3fc0", "pid (0, 0, 0) idx (1) h: 0xc000"]


@triton.jit
def assert_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0)
    tl.device_assert((x >= 0) | (offs < 0), "x must be non-negative")  # LINE: device_assert
    tl.store(x_ptr + offs, tl.sqrt(x), mask=m)


def test_device_assert_is_always_on_and_reports_lanes_and_values(line_of):
    x = torch.arange(64, dtype=torch.float32)
    x[37] = -3.0
    x[40] = -5.0
    with tritonkit.checking() as s:
        assert_kernel[(4,)](x, 64, BLOCK=16)
    (f,) = s.findings
    assert (f.kind, f.line, f.access) == ("assert_failed", line_of(assert_kernel, "device_assert"), "device_assert")
    assert f.message == "device_assert failed: x must be non-negative"
    assert f.count == 2 and f.program_ids == [[2]]
    assert f.examples == [{"program_id": [2], "lanes": [[5], [8]],
                           "values": {"x": [-3.0, -5.0], "offs": [37, 40]}}]
    # the kernel went on, as a finding does not stop the check
    assert x[36].item() == 6.0


def test_device_assert_respects_its_mask():
    @triton.jit
    def kernel(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n, other=-1.0)
        tl.device_assert(x >= 0, "negative", mask=offs < n)

    with tritonkit.checking() as s:
        kernel[(1,)](torch.ones(10), 10, BLOCK=16)  # lanes 10..15 are -1 but masked off
    assert not s.findings


PDB_SCRIPT = textwrap.dedent('''
    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offsets = pid * BLOCK + tl.arange(0, BLOCK)
        mask = offsets <= n
        x = tl.load(x_ptr + offsets, mask=mask)
        y = tl.load(y_ptr + offsets, mask=mask)
        tl.store(out_ptr + offsets, x + y, mask=mask)


    x = torch.arange(40, dtype=torch.float32)
    out = torch.empty_like(x)
    add_kernel[(3,)](x, x, out, 40, BLOCK=16)
    print("script done")
''')


def _run_check(tmp_path, script, args, stdin):
    path = tmp_path / "script.py"
    path.write_text(script)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    env.pop("PYTHONBREAKPOINT", None)
    proc = subprocess.run([sys.executable, "-m", "tritonkit", "check", *args, "--", sys.executable, str(path)],
                          input=stdin, capture_output=True, text=True, timeout=300, env=env)
    return path, proc


def test_pdb_stops_at_the_first_finding_in_the_kernel(tmp_path):
    path, proc = _run_check(tmp_path, PDB_SCRIPT, ["--pdb"], "p offsets\np mask\np pid\nn\n"
                                                                 "import numpy as np\np np.asarray(x)[7:9]\nc\n")
    out = proc.stdout
    assert proc.returncode == 1, proc.stderr
    line = PDB_SCRIPT.splitlines().index("    x = tl.load(x_ptr + offsets, mask=mask)") + 1
    # the banner, then pdb at the offending line of the offending program (2: offsets 32..47, n = 40)
    assert "tritonkit: out_of_bounds in add_kernel, program (2, 0, 0)" in out
    assert f"{path}({line})add_kernel()" in out
    assert "array([32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47]" in out
    assert "array([ True,  True,  True,  True,  True,  True,  True,  True,  True,\n       False," in out
    assert "array([2], dtype=int32)" in out
    # 'n' steps to the next kernel line, where x (loaded with the bad lane dropped) is visible
    assert f"{path}({line + 1})add_kernel()" in out
    assert "array([39.,  0.], dtype=float32)" in out  # lane 40 (out of bounds) was not loaded
    assert "script done" in out  # 'c' went on checking to the end
    assert out.count("(Pdb)") == 7  # one stop only: later findings do not reopen pdb


def test_breakpoint_in_a_kernel_works(tmp_path):
    script = PDB_SCRIPT.replace("    mask = offsets <= n\n", "    mask = offsets < n\n    breakpoint()\n")
    assert "breakpoint()" in script
    path, proc = _run_check(tmp_path, script, [], "p pid\nc\nc\nc\n")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("(Pdb)") == 4  # one stop per program, then the end
    assert "array([0], dtype=int32)" in proc.stdout
    assert "script done" in proc.stdout


@triton.autotune(configs=[triton.Config({"BLOCK": 24}), triton.Config({"BLOCK": 32}), triton.Config({"BLOCK": 40})],
                 key=["n"])
@triton.jit
def tuned_static(x_ptr, n, BLOCK: tl.constexpr):
    tl.static_assert(BLOCK % 16 == 0, "BLOCK must be a multiple of 16")
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)


def test_autotune_skips_configs_that_fail_a_static_assert_like_triton():
    """Triton's autotuner times a config that does not compile as infinite; the kept config is the
    first that compiles (here BLOCK=32), and nothing is reported."""
    x = torch.zeros(100)
    with tritonkit.checking() as s:
        tuned_static[lambda m: (triton.cdiv(100, m["BLOCK"]),)](x, 100)
    assert not s.findings
    assert tuned_static.best_config.kwargs == {"BLOCK": 32}
    assert torch.equal(x, torch.ones(100))  # applied once: the tried configs were restored
    only_bad = triton.autotune(configs=[triton.Config({"BLOCK": 24}), triton.Config({"BLOCK": 40})],
                               key=["n"])(tuned_static.fn)
    with pytest.raises(tritonkit.CheckAborted):
        with tritonkit.checking() as s:
            only_bad[lambda m: (triton.cdiv(100, m["BLOCK"]),)](x, 100)
    assert [(f.kind, f.access) for f in s.findings] == [("assert_failed", "static_assert")]
