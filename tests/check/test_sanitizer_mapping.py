"""``tritonkit check --gpu=sanitizer`` without a GPU: memcheck's text parsed, its errors mapped to
findings through the launch log (argument, elements, program ids, full source path), the launch log
itself, and the command's clear refusals (no compute-sanitizer, ``--gpu`` alone, CPU-only options).
The run on a GPU is in ``tests/gpu/test_gpu_sanitizer.py``."""
import json

import pytest
import torch

from tritonkit.check.gpu import launch_log, sanitizer
from tritonkit.cli import main

# compute-sanitizer 2025.3.1's output on the H100 for examples/vector_add.py --bug missing_mask
# (n = 1000 fp32, 4 programs of 256), --print-limit 3
MEMCHECK = """\
========= COMPUTE-SANITIZER
========= Invalid __global__ read of size 8 bytes
=========     at _add_kernel_missing_mask+0xc0 in vector_add.py:83
=========     by thread (116,0,0) in block (3,0,0)
=========     Access to 0x7fab86800fa0 is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7fab86800000 of size 4,000 bytes
========= 
========= Invalid __global__ read of size 8 bytes
=========     at _add_kernel_missing_mask+0xc0 in vector_add.py:83
=========     by thread (117,0,0) in block (3,0,0)
=========     Access to 0x7fab86800fa8 is out of bounds
=========     and is 9 bytes after the nearest allocation at 0x7fab86800000 of size 4,000 bytes
========= 
========= Invalid __global__ write of size 4 bytes
=========     at _add_kernel_missing_mask+0x1f0 in vector_add.py:85
=========     by thread (3,0,0) in block (3,0,0)
=========     Access to 0x7fab99000000 is out of bounds
=========     and is 4,193,281 bytes after the nearest allocation at 0x7fab98c00000 of size 2,048 bytes
========= 
========= Error: process didn't terminate successfully
========= Target application returned an error
========= ERROR SUMMARY: 16 errors
========= ERROR SUMMARY: 13 errors were not printed. Use --print-limit option to adjust the number of printed errors
"""

BASE = 0x7fab86800000
LAUNCHES = [{"kernel": "_add_kernel_missing_mask", "file": "/src/examples/vector_add.py", "first_line": 78,
             "grid": [4, 1, 1],
             "tensors": [{"name": "x_ptr", "ptr": BASE, "base": BASE, "nbytes": 4000, "shape": [1000],
                          "strides": [1], "dtype": "float32", "itemsize": 4, "device": "cuda:0"},
                         {"name": "y_ptr", "ptr": BASE + 4096, "base": BASE + 4096, "nbytes": 4000, "shape": [1000],
                          "strides": [1], "dtype": "float32", "itemsize": 4, "device": "cuda:0"}]}]


def test_memcheck_text_is_parsed_into_one_record_per_thread():
    errors, total = sanitizer.parse_memcheck(MEMCHECK)
    assert total == 16 and len(errors) == 3
    e = errors[0]
    assert (e.access, e.size, e.kernel, e.file, e.line) == ("read", 8, "_add_kernel_missing_mask", "vector_add.py", 83)
    assert e.thread == (116, 0, 0) and e.block == (3, 0, 0) and e.address == BASE + 4000
    assert (e.alloc, e.alloc_size, e.distance, e.relation) == (BASE, 4000, 1, "after")
    assert errors[2].access == "write" and errors[2].distance == 4193281 and errors[2].alloc_size == 2048


def test_errors_become_findings_with_the_argument_elements_and_program_ids():
    errors, _ = sanitizer.parse_memcheck(MEMCHECK)
    found = sanitizer.to_findings(errors, LAUNCHES)
    assert [(f.kind, f.line, f.arg, f.access) for f in found] == [
        ("out_of_bounds", 83, "x_ptr", "load"), ("out_of_bounds", 85, None, "store")]
    x = found[0]
    assert x.file == "/src/examples/vector_add.py"  # memcheck's base name, the launch log's path
    assert x.program_ids == [[3]] and x.num_programs == 1 and x.count == 2
    assert x.element_indices == [[1000], [1002]] and x.reason == "past_end"
    assert x.tensor == {"shape": [1000], "dtype": "float32", "strides": [1]}
    assert "past the end of x_ptr" in x.message
    assert "no argument of the launch owns" in found[1].message  # an allocation no logged tensor is


def test_an_overrun_reported_as_before_the_next_tensor_is_given_to_the_tensor_it_ran_past():
    """What the H100 printed for the x load of vector_add.py --bug missing_mask: the later threads'
    addresses are nearer y's allocation (48 bytes before it) than x's end."""
    text = MEMCHECK.split("========= Invalid __global__ write")[0] + """\
========= Invalid __global__ read of size 8 bytes
=========     at _add_kernel_missing_mask+0xc0 in vector_add.py:83
=========     by thread (122,0,0) in block (3,0,0)
=========     Access to 0x7fab86800fd0 is out of bounds
=========     and is 48 bytes before the nearest allocation at 0x7fab86801000 of size 4,000 bytes
=========
"""
    errors, _ = sanitizer.parse_memcheck(text)
    assert [e.relation for e in errors] == ["after", "after", "before"]
    (f,) = sanitizer.to_findings(errors, LAUNCHES)
    assert f.arg == "x_ptr" and f.count == 3 and f.reason == "past_end"
    assert f.element_indices == [[1000], [1002], [1012]]


def test_an_error_of_a_kernel_never_logged_keeps_what_memcheck_said():
    errors, _ = sanitizer.parse_memcheck(MEMCHECK)
    (f, g) = sanitizer.to_findings(errors, [])
    assert f.arg is None and f.file == "vector_add.py" and f.program_ids == [[3]]


def test_the_launch_log_records_tensor_arguments_and_survives_a_cut_line(tmp_path):
    path = tmp_path / "launches.jsonl"

    class Fn:
        __name__ = "k"
        arg_names = ["x", "n", "y"]

        def fn(self):
            pass
    fn = Fn()
    fn.fn = lambda: None
    x, y = torch.zeros(4, 6), torch.zeros(10)[2:]
    with open(path, "a") as fh:
        launch_log.record(fh, fn, (x, 6), {"y": y}, lambda meta: (meta["n"], 2))
        fh.write('{"kernel": "cut')  # a process killed while writing
    (rec,) = launch_log.read(str(path))
    assert rec["kernel"] == "k" and rec["grid"] == [6, 2, 1]
    tx, ty = rec["tensors"]
    assert tx["name"] == "x" and tx["shape"] == [4, 6] and tx["strides"] == [6, 1] and tx["nbytes"] == 96
    assert ty["name"] == "y" and ty["ptr"] - ty["base"] == 8 and ty["dtype"] == "float32"
    assert launch_log.read(str(tmp_path / "missing.jsonl")) == []


def test_without_compute_sanitizer_the_command_says_what_to_do(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(sanitizer, "find_sanitizer", lambda: None)
    script = tmp_path / "s.py"
    script.write_text("print('ran')\n")
    code = main(["check", "--gpu=sanitizer", "--", "python", str(script)])
    captured = capsys.readouterr()
    assert code == 2 and "compute-sanitizer was not found" in captured.err
    assert "tritonkit check -- python" in captured.err and "ran" not in captured.out


@pytest.mark.parametrize("argv,says", [(["--gpu=sanitizer", "--nan"], "--nan"),
                                       (["--gpu=sanitizer", "--workers", "2"], "--workers")])
def test_gpu_mode_refuses_what_it_cannot_do(tmp_path, capsys, argv, says):
    script = tmp_path / "s.py"
    script.write_text("print('ran')\n")
    code = main(["check", *argv, "--", "python", str(script)])
    err = capsys.readouterr().err
    assert code == 2 and says in err


def test_without_a_gpu_the_command_says_so(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(sanitizer, "find_sanitizer", lambda: "/bin/true")
    monkeypatch.setattr(sanitizer, "gpu_visible", lambda: False)
    script = tmp_path / "s.py"
    script.write_text("print('ran')\n")
    assert main(["check", "--gpu=sanitizer", "--", "python", str(script)]) == 2
    assert "no GPU is visible" in capsys.readouterr().err


def test_the_json_of_a_gpu_run_has_its_findings_and_mode(monkeypatch, tmp_path, capsys):
    """The whole command with a stand-in for compute-sanitizer that writes the canned report."""
    fake = tmp_path / "compute-sanitizer"
    fake.write_text("#!/bin/sh\nwhile [ \"$1\" != \"--log-file\" ]; do shift; done\ncat > \"$2\" <<'EOF'\n"
                    + MEMCHECK + "EOF\nexit 0\n")
    fake.chmod(0o755)
    monkeypatch.setattr(sanitizer, "find_sanitizer", lambda: str(fake))
    monkeypatch.setattr(sanitizer, "gpu_visible", lambda: True)
    script = tmp_path / "s.py"
    script.write_text("print('ran')\n")
    out = tmp_path / "f.json"
    assert main(["check", "--gpu=sanitizer", "--json", str(out), "--", "python", str(script)]) == 1
    data = json.loads(out.read_text())
    assert [f["line"] for f in data["findings"]] == [83, 85]
    assert data["summary"]["gpu"]["memcheck_errors"] == 16 and "data races" in data["summary"]["gpu"]["races"]
    assert "on the GPU: compute-sanitizer memcheck, 16 error report(s)" in capsys.readouterr().out
