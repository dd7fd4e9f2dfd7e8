"""``tritonkit check --gpu`` without a GPU: the kernel rewrite (provenance of each access's pointer,
the guard added to its mask), the guard's records and masking run in Triton's interpreter, the
records file folded into findings, and the command's refusal without a GPU. The run on a GPU is in
``tests/gpu/test_gpu_instrumented.py``."""
import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from tritonkit.check.gpu import instrument, runtime, sanitizer
from tritonkit.cli import main

KERNEL = textwrap.dedent('''
    import torch, triton, triton.language as tl

    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        p = x_ptr + offs
        x = tl.load(p)
        y = tl.load(y_ptr + offs, mask=offs < n + 5, other=0.0)
        either = tl.where(pid == 0, x_ptr, y_ptr)
        z = tl.load(either + offs, mask=offs < n)
        tl.store(out_ptr + offs, x + y + z * 0, mask=offs < n)
''')


def test_the_rewrite_finds_each_accesss_argument_and_guards_its_mask():
    src = KERNEL.split("@triton.jit\n")[1]
    new, sites, roots, skipped, name = instrument.rewrite(src, frozenset({"x_ptr", "y_ptr", "out_ptr"}), 10)
    assert name == "add_kernel" and roots == ["x_ptr", "y_ptr", "out_ptr"]
    assert [(s.line, s.access, s.root) for s in sites.values()] == [
        (14, "load", "x_ptr"), (15, "load", "y_ptr"), (18, "store", "out_ptr")]
    assert skipped == [17]  # tl.where of two arguments: no single argument, not checked
    assert "mask=_tritonkit_gpu_guard(p, None, _tk_lo_x_ptr" in new
    assert "_tritonkit_gpu_guard(y_ptr + offs, offs < n + 5, _tk_lo_y_ptr" in new
    # only the tensors of the launch are roots; an access through a pointer passed None cannot run
    _, _, roots2, skipped2, _ = instrument.rewrite(src, frozenset({"x_ptr"}), 10, absent=frozenset({"y_ptr"}))
    assert roots2 == ["x_ptr"] and skipped2 == [17, 18]  # out_ptr: not a tensor, not None: unchecked


CHILD = textwrap.dedent('''
    import json, sys, torch
    sys.path.insert(0, sys.argv[1])
    import kernel_mod
    from tritonkit.check.gpu import instrument, device
    inst = instrument.instrumented(kernel_mod.add_kernel, frozenset({"x_ptr", "y_ptr", "out_ptr"}))
    x, y = torch.randn(1000), torch.randn(1000)
    out = torch.full((1000,), 7.0)
    rec = torch.zeros(1 + 64 * device.RECORD, dtype=torch.int64)
    extra = {"_tk_rec": rec, "_tk_cap": 64}
    for r, t in (("x_ptr", x), ("y_ptr", y), ("out_ptr", out)):
        lo = t.untyped_storage().data_ptr()
        extra["_tk_lo_" + r], extra["_tk_hi_" + r] = lo, lo + t.untyped_storage().nbytes()
    inst.jit[(4,)](x, y, out, 1000, BLOCK=256, **extra)
    rows = [[r[0] - device.MAGIC.value] + r[1:] for r in rec[1:1 + 7 * int(rec[0])].view(-1, 7).tolist()]
    print(json.dumps({"count": int(rec[0]), "rows": rows, "ok": bool(torch.allclose(out, x + y)),
                      "sites": {k: [s.line, s.access, s.root] for k, s in inst.sites.items()}}))
''')


def test_the_guard_masks_and_records_out_of_bounds_lanes_in_the_interpreter(tmp_path):
    (tmp_path / "kernel_mod.py").write_text(KERNEL)
    (tmp_path / "child.py").write_text(CHILD)
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run([sys.executable, str(tmp_path / "child.py"), str(tmp_path)], capture_output=True,
                          text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["ok"]  # in-bounds lanes computed as without the guard
    # program 3 of 4 (256 lanes each over 1000 elements): x load 24 lanes past the end, y load 5
    assert sorted(r[:5] for r in got["rows"]) == [[0, 3, 0, 0, 24], [1, 3, 0, 0, 5]]
    x_row = next(r for r in got["rows"] if r[0] == 0)
    assert x_row[5:] == [4000, 4092]  # byte offsets of the first and last offending lane


def test_the_records_file_becomes_findings(tmp_path):
    path = tmp_path / "records.jsonl"
    t = {"name": "x_ptr", "ptr": 1 << 20, "base": 1 << 20, "nbytes": 4000, "shape": [1000], "strides": [1],
         "dtype": "float32", "itemsize": 4}
    launch = {"t": "launch", "kernel": "k", "file": "/src/k.py", "count": 2, "grid": [4, 1, 1],
              "sites": {"0": [14, "load", "x_ptr"]}, "tensors": {"x_ptr": t},
              "records": [[0, 3, 0, 0, 24, 4000, 4092], [0, 2, 0, 0, 1, -4, -4]], "meta": {}}
    with open(path, "w") as fh:
        fh.write(json.dumps(launch) + "\n" + json.dumps({"t": "clean", "counts": {"k": 3}}) + "\n")
        fh.write(json.dumps({"t": "unchecked", "kernel": "k2", "why": "x"}) + "\n" + '{"t": "laun')
    launches, clean, unchecked = runtime.read(str(path))
    assert len(launches) == 1 and clean == {"k": 3} and unchecked[0]["kernel"] == "k2"
    # records an unchecked access wrote over (no magic number: site -1; a program outside the grid)
    with open(path, "w") as fh:
        fh.write(json.dumps(dict(launch, records=launch["records"] + [[-1, 3, 0, 0, 5, 0, 0],
                                                                      [0, 9, 0, 0, 2, 4000, 4004]])) + "\n")
    (kept,), _, notes = runtime.read(str(path))
    assert kept["records"] == launch["records"]
    assert [n["why"].split(" record")[0] for n in notes] == ["2"]
    (f,) = runtime.to_findings(launches)
    assert (f.kind, f.line, f.arg, f.access, f.count) == ("out_of_bounds", 14, "x_ptr", "load", 25)
    assert f.program_ids == [[2], [3]] and f.element_indices == [[-1], [1023]]
    assert f.reason == "past_end" and "past the end of x_ptr" in f.message


def test_without_a_gpu_the_instrumented_mode_says_so(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(sanitizer, "gpu_visible", lambda: False)
    script = tmp_path / "s.py"
    script.write_text("print('ran')\n")
    assert main(["check", "--gpu", "--", "python", str(script)]) == 2
    assert "no GPU is visible" in capsys.readouterr().err


def test_a_gpu_report_counts_clean_launches_without_a_record_each():
    from tritonkit.check.findings import Finding
    from tritonkit.check.gpu.report import make_report
    from tritonkit.check.results import LaunchRecord
    from tritonkit.cli._target import Target
    found = [Finding(kind="out_of_bounds", kernel="k", file="k.py", line=3)]
    rep = make_report(Target("script", "s.py"), 0, found, [LaunchRecord("k", (4, 1, 1), engine="gpu")],
                      {"mode": "instrumented"}, counted={"k": 2, "other": 1_000_000})
    assert rep.launches == rep.summary["launches"] == 1_000_003 and len(rep.launch_records) == 1
    assert [(k.name, k.launches, k.findings) for k in rep.kernels] == [("k", 3, 1), ("other", 1_000_000, 0)]
    assert rep.summary["engine"] is None and rep.summary["gpu"] == {"mode": "instrumented"}


def test_an_element_has_coordinates_only_inside_a_contiguous_tensor():
    from tritonkit.check.gpu.report import element_index
    t = {"shape": [4, 6], "strides": [6, 1]}
    assert element_index(t, 13) == [2, 1] and element_index(t, 24) == [24] and element_index(t, -1) == [-1]
    assert element_index({"shape": [6, 4], "strides": [1, 6]}, 13) == [13]  # a transposed view: flat
    assert element_index({"shape": [1, 6], "strides": [99, 1]}, 5) == [0, 5]  # a size-1 axis's stride is free


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a CUDA device")
def test_a_script_without_a_cuda_device_is_reported_unchecked_not_clean(monkeypatch, capsys, tmp_path):
    """The whole --gpu command where nvidia-smi cannot tell (None): the script runs, nothing is
    instrumented, and the report says that no kernel was checked."""
    monkeypatch.setattr(sanitizer, "gpu_visible", lambda: None)
    script = tmp_path / "s.py"
    script.write_text("import torch, triton\nprint('ran')\n")
    out = tmp_path / "r.json"
    assert main(["check", "--gpu", "--json", str(out), "--", "python", str(script)]) == 0
    data = json.loads(out.read_text())
    assert data["findings"] == [] and data["summary"]["engine"] is None
    assert any("no CUDA device" in u for u in data["summary"]["gpu"]["unchecked"])
    assert "not checked: every kernel" in capsys.readouterr().out
