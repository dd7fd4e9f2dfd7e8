"""``tritonkit check --gpu`` without a GPU: the kernel rewrite (provenance of each access's pointer,
its offset computed again in int64, the guard added to its mask), the guard's records and masking
run in Triton's interpreter (out of bounds, outside a view, int32 overflow, the address-based
fallback), the records file folded into findings, the rewritten kernels compiled for an H100
(sm_90) on this machine with their loads' vector width kept, and the command's refusal without a
GPU. The run on a GPU is in ``tests/gpu/test_gpu_instrumented.py``."""
import json
import os
import re
import subprocess
import sys
import textwrap

import pytest
import torch

from tritonkit.check.gpu import instrument, runtime, sanitizer
from tritonkit.cli import main

KERNELS = textwrap.dedent('''
    import triton, triton.language as tl

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

    @triton.jit
    def rows_kernel(x_ptr, out_ptr, stride, n_cols, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * stride + cols, mask=cols < n_cols, other=0.0)
        tl.store(out_ptr + row * BLOCK + cols, x)

    @triton.jit
    def wrap_kernel(x_ptr, out_ptr, stride, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        off = row * stride
        ptrs = x_ptr + off + cols
        x = tl.load(ptrs)
        tl.store(out_ptr + row * BLOCK + cols, x)

    @triton.jit
    def gather_kernel(x_ptr, idx_ptr, out_ptr, BLOCK: tl.constexpr):
        i = tl.arange(0, BLOCK)
        p = x_ptr + tl.load(idx_ptr + i)
        tl.store(out_ptr + i, tl.load(p))

    @triton.jit
    def loop_kernel(x_ptr, out_ptr, n, K: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        p = x_ptr + offs + 2
        acc = tl.zeros((BLOCK,), tl.float32)
        for k in range(0, K):
            acc += tl.load(p, mask=offs < n - k * BLOCK, other=0.0)
            p += BLOCK
        tl.store(out_ptr + offs, acc)
''')
FIRST = 2  # the line of "import triton" in the module written from KERNELS


def _rewrite(name, tensors, absent=frozenset()):
    src = KERNELS.split("@triton.jit\n")[1:]
    src = next(s for s in src if s.startswith(f"def {name}("))
    start = KERNELS[:KERNELS.index(src)].count("\n") + 1
    return instrument.rewrite(src.split("\n\n")[0] + "\n", frozenset(tensors), start, absent)


def test_the_rewrite_finds_each_accesss_argument_and_computes_its_offset_again():
    new, sites, roots, skipped, name = _rewrite("add_kernel", {"x_ptr", "y_ptr", "out_ptr"})
    assert name == "add_kernel" and roots == ["x_ptr", "y_ptr", "out_ptr"]
    assert [(s.line, s.access, s.root, s.exact) for s in sites.values()] == [
        (9, "load", "x_ptr", True), (10, "load", "y_ptr", True), (13, "store", "out_ptr", True)]
    assert sites[0].ptr_line == 8  # x's pointer was formed where p was assigned
    assert skipped == [12]  # tl.where of two arguments: no single argument, not checked
    # the access goes through the root plus the int64 offset; the kernel's own pointer is compared
    assert "offs__tk = pid__tk * BLOCK + _tritonkit_gpu_wide(tl.arange(0, BLOCK))" in new
    assert "x = tl.load(_tk_root_x_ptr + p__tk, mask=_tritonkit_gpu_guard_offset(p__tk, None, _tk_hi_x_ptr" in new
    assert "p__tk = 0 + _tritonkit_gpu_term(offs, offs__tk)" in new  # an int32 term: its width checked
    assert "_tritonkit_gpu_guard_offset(0 + _tritonkit_gpu_term(offs, offs__tk), offs < n + 5, _tk_hi_y_ptr" in new
    assert "_tk_g_x_ptr: tl.constexpr" in new
    # only the tensors of the launch are roots; an access through a pointer passed None cannot run
    _, _, roots2, skipped2, _ = _rewrite("add_kernel", {"x_ptr"}, absent=frozenset({"y_ptr"}))
    assert roots2 == ["x_ptr"] and skipped2 == [12, 13]  # out_ptr: not a tensor, not None: unchecked


def test_an_offset_with_a_load_inside_falls_back_to_the_addresses():
    new, sites, _, _, _ = _rewrite("gather_kernel", {"x_ptr", "idx_ptr", "out_ptr"})
    assert [(s.root, s.exact) for s in sites.values()] == [("idx_ptr", True), ("x_ptr", False), ("out_ptr", True)]
    assert "tl.load(p, mask=_tritonkit_gpu_guard(p, None, _tk_hi_x_ptr" in new


def test_a_pointer_the_loop_advances_keeps_its_offset_in_step():
    new, sites, _, _, _ = _rewrite("loop_kernel", {"x_ptr", "out_ptr"})
    assert all(s.exact for s in sites.values())
    assert "p__tk = p__tk + _tritonkit_gpu_term(BLOCK, BLOCK)" in new


def test_view_layouts():
    big = torch.zeros(8, 64)
    assert instrument.view_layout(big) == (512, [], True)
    assert instrument.view_layout(big[:, :40]) == (7 * 64 + 40, [(64, 40)], True)
    assert instrument.view_layout(big.t()) == (512, [], True)  # a permutation has no gap
    assert instrument.view_layout(big[2:5]) == (192, [], True)
    assert instrument.view_layout(big[:, ::2]) == (7 * 64 + 63, [(64, 63), (2, 1)], True)
    assert instrument.view_layout(torch.zeros(4, 6, 8)[:, :3, :5]) == (3 * 48 + 2 * 8 + 5, [(48, 21), (8, 5)], True)
    h, levels, exact = instrument.view_layout(torch.zeros(4, 6, 8)[:, :3, ::2])  # three gap levels
    assert not exact and levels == [(48, 23), (8, 7)]
    assert instrument.view_layout(torch.zeros(5).expand(3, 5)) == (5, [], True)  # stride 0: the row
    assert instrument.view_layout(torch.zeros(10).as_strided((3, 4), (2, 1)))[2] is False  # overlapping
    assert instrument.view_layout(torch.zeros(0, 4)) == (0, [], True)


CHILD = textwrap.dedent('''
    import json, sys, torch
    sys.path.insert(0, sys.argv[1])
    import kernel_mod
    from tritonkit.check.gpu import instrument, device

    from tritonkit.check.gpu.runtime import take_records
    rec = torch.zeros(device.HEADER + 64 * device.RECORD, dtype=torch.int64)

    def run(kernel, grid, args, meta):
        """As the runtime launches: the records, and a replay where counted sites offended."""
        named = dict(zip(kernel.arg_names, args))
        tensors = frozenset(k for k, v in named.items() if isinstance(v, torch.Tensor))
        inst = instrument.instrumented(kernel, tensors)
        inst.jit[grid](*args, **meta, **instrument.extra_arguments(inst, named, rec, 64))
        _, rows, counted = take_records(rec, 64)
        if counted:
            before = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
            inst.jit[grid](*args, **meta, **instrument.extra_arguments(inst, named, rec, 64, replay=True))
            _, again, _ = take_records(rec, 64)
            rows += again
            assert all(not isinstance(a, torch.Tensor) or torch.equal(a, b) for a, b in zip(args, before))
        assert not rec.any()  # zeroed for the next launch
        return sorted(rows), {str(k): n for k, n in counted.items()}

    out = {}
    x, y, o = torch.randn(1000), torch.randn(1000), torch.full((1000,), 7.0)
    out["add"], out["add_counted"] = run(kernel_mod.add_kernel, (4,), [x, y, o, 1000], {"BLOCK": 256})
    out["add_ok"] = bool(torch.allclose(o, x + y))
    big = torch.randn(8, 64)
    view, o = big[:, :40], torch.zeros(8, 64)
    out["rows"], out["rows_counted"] = run(kernel_mod.rows_kernel, (8,), [view, o, 64, 44], {"BLOCK": 64})
    out["rows_ok"] = bool(torch.equal(o[:, :40], view) and not o[:, 40:].any())
    x, o = torch.randn(4096), torch.zeros(64)
    out["wrap"], out["wrap_counted"] = run(kernel_mod.wrap_kernel, (4,), [x, o, 2 ** 30], {"BLOCK": 16})
    x, idx, o = torch.randn(100), torch.tensor([0, 5, 99, 100, 3, 4, -1, 2], dtype=torch.int32), torch.zeros(8)
    out["gather"], out["gather_counted"] = run(kernel_mod.gather_kernel, (1,), [x, idx, o], {"BLOCK": 8})
    out["gather_out"] = [o[3].item(), o[6].item(), o[2].item() == x[99].item()]
    x, o = torch.randn(64), torch.zeros(16)
    # K a constant: Triton 3.6's interpreter runs range() of a constant only
    out["loop"], out["loop_counted"] = run(kernel_mod.loop_kernel, (1,), [x, o, 64], {"K": 4, "BLOCK": 16})
    out["loop_ok"] = bool(torch.allclose(o, torch.cat([x[2:], torch.zeros(2)]).view(4, 16).sum(0)))
    print(json.dumps(out))
''')


@pytest.fixture(scope="module")
def interpreted(tmp_path_factory):
    """The records each kernel of ``KERNELS`` makes, instrumented, in Triton's interpreter."""
    tmp = tmp_path_factory.mktemp("gpu_instrument")
    (tmp / "kernel_mod.py").write_text(KERNELS)
    (tmp / "child.py").write_text(CHILD)
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run([sys.executable, str(tmp / "child.py"), str(tmp)], capture_output=True,
                          text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_guard_masks_and_records_out_of_bounds_lanes_in_the_interpreter(interpreted):
    assert interpreted["add_ok"]  # in-bounds lanes computed as without the guard
    # program 3 of 4 (256 lanes each over 1000 elements): x load 24 lanes past the end, y load 5;
    # fields: site, program id, lanes, the first and last offending offset (elements), what
    assert interpreted["add"] == [[0, 3, 0, 0, 24, 1000, 1023, 0], [1, 3, 0, 0, 5, 1000, 1004, 0]]


def test_a_read_past_a_views_columns_is_outside_the_view(interpreted):
    # a 40-column slice of 8x64 read with 44 columns: 4 lanes a row in the gap, not performed
    assert interpreted["rows"] == [[0, r, 0, 0, 4, 64 * r + 40, 64 * r + 43, 0] for r in range(8)]
    assert interpreted["rows_ok"]


def test_int32_offsets_that_wrap_make_an_overflow_record(interpreted):
    # row * 2**30 in int32: row 2 and 3 wrap (2**31, 3 * 2**30); row 1 is only past the end.
    # A wrapped program's record has the kernel's own (wrapped) offsets and says that they wrapped
    assert interpreted["wrap"] == [
        [0, 1, 0, 0, 16, 2 ** 30, 2 ** 30 + 15, 0],
        [0, 2, 0, 0, 16, -2 ** 31, -2 ** 31 + 15, 1],
        [0, 3, 0, 0, 16, -2 ** 30, -2 ** 30 + 15, 1]]


def test_the_address_fallback_checks_a_gathered_pointer(interpreted):
    # x_ptr + idx (a load inside the offset): index 100 past the end, -1 before the start
    assert interpreted["gather"] == [[1, 0, 0, 0, 2, -1, 100, 0]]
    assert interpreted["gather_out"] == [0.0, 0.0, True]


def test_a_loop_advanced_pointer_is_checked_each_iteration(interpreted):
    # the pointer starts 2 elements in, the mask does not know: the last iteration's lanes 14 and
    # 15 reach offsets 64 and 65 of the 64-element x; they read nothing (0), the others are summed
    assert interpreted["loop"] == [[0, 0, 0, 0, 2, 64, 65, 0]]
    assert interpreted["loop_counted"] == {"0": 2}  # counted in the loop; the replay made the record
    assert interpreted["loop_ok"]  # the replay wrote nothing (the child checks every argument)


def test_the_records_file_becomes_findings(tmp_path):
    path = tmp_path / "records.jsonl"
    t = {"name": "x_ptr", "ptr": 1 << 20, "base": 1 << 20, "nbytes": 4000, "shape": [1000], "strides": [1],
         "dtype": "float32", "itemsize": 4}
    launch = {"t": "launch", "kernel": "k", "file": "/src/k.py", "count": 2, "grid": [4, 1, 1],
              "sites": {"0": [14, "load", "x_ptr", 12]}, "tensors": {"x_ptr": t},
              "records": [[0, 3, 0, 0, 24, 1000, 1023, 0], [0, 2, 0, 0, 1, 1000, 1000, 0]], "meta": {}}
    with open(path, "w") as fh:
        fh.write(json.dumps(launch) + "\n" + json.dumps({"t": "clean", "counts": {"k": 3}}) + "\n")
        fh.write(json.dumps({"t": "unchecked", "kernel": "k2", "why": "x"}) + "\n" + '{"t": "laun')
    launches, clean, unchecked = runtime.read(str(path))
    assert len(launches) == 1 and clean == {"k": 3} and unchecked[0]["kernel"] == "k2"
    # records an unchecked access wrote over (no magic number: site -1; a program outside the grid;
    # an unknown kind of record)
    with open(path, "w") as fh:
        fh.write(json.dumps(dict(launch, records=launch["records"] + [[-1, 3, 0, 0, 5, 0, 0, 0],
                                                                      [0, 9, 0, 0, 2, 1000, 1001, 0],
                                                                      [0, 1, 0, 0, 2, 1000, 1001, 7]])) + "\n")
    (kept,), _, notes = runtime.read(str(path))
    assert kept["records"] == launch["records"]
    assert [n["why"].split(" record")[0] for n in notes] == ["3"]
    (f,) = runtime.to_findings(launches)
    assert (f.kind, f.line, f.arg, f.access, f.count) == ("out_of_bounds", 14, "x_ptr", "load", 25)
    assert f.program_ids == [[2], [3]] and f.element_indices == [[1000], [1023]]
    assert f.reason == "past_end" and "past the end of x_ptr" in f.message
    assert "check its bound" in f.hint  # the CPU check's hint: sites written before `masked` count as masked
    # the site of an unmasked access (its 5th field): the hint says to add a mask, as the CPU check's does
    (g,) = runtime.to_findings([dict(launches[0], sites={"0": [14, "load", "x_ptr", 12, False]})])
    assert not g.masked and "has no mask" in g.hint


def test_records_outside_a_view_and_of_overflow_become_their_findings():
    # a 40-column slice (stride 64) of an 8x64 storage that starts 64 elements before the view
    t = {"name": "x", "ptr": (1 << 20) + 256, "base": 1 << 20, "nbytes": 8 * 64 * 4, "shape": [7, 40],
         "strides": [64, 1], "dtype": "float32", "itemsize": 4}
    launch = {"t": "launch", "kernel": "k", "file": "/src/k.py", "count": 4, "grid": [8, 1, 1],
              "sites": {"0": [20, "load", "x", 18]}, "tensors": {"x": t},
              "records": [[0, 1, 0, 0, 4, 104, 107, 0], [0, 0, 0, 0, 4, -70, -67, 0],
                          [0, 7, 0, 0, 4, 488, 491, 0], [0, 5, 0, 0, 16, 2 ** 31, 2 ** 31 + 15, 1]]}
    got = {(f.kind, f.reason): f for f in runtime.to_findings([launch])}
    assert set(got) == {("out_of_bounds", "outside_view"), ("out_of_bounds", "before_start"),
                        ("out_of_bounds", "past_end"), ("int_overflow", "int32")}
    assert got["out_of_bounds", "outside_view"].element_indices == [[104], [107]]  # a strided view: flat
    ovf = got["int_overflow", "int32"]
    assert ovf.line == 18 and ovf.program_ids == [[5]] and "load at k.py:20" in ovf.message
    # lanes whose offsets wrapped to elements of the view: the overflow alone (the CPU check reads
    # the wrapped element without complaint); wrapped outside it: the out-of-bounds access as well
    inside = dict(launch, records=[[0, 6, 0, 0, 3, 10, 12, 1]])
    assert [(f.kind, f.program_ids) for f in runtime.to_findings([inside])] == [("int_overflow", [[6]])]
    outside = dict(launch, records=[[0, 6, 0, 0, 3, -2 ** 31, -2 ** 31 + 2, 1]])
    assert sorted((f.kind, f.reason) for f in runtime.to_findings([outside])) == [
        ("int_overflow", "int32"), ("out_of_bounds", "before_start")]


def _sm90_ptx(fn, signature, constants, divisible, num_warps=4):
    """The PTX Triton makes of ``fn`` for an H100 (sm_90), on this machine (no GPU needed)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    attrs = {(fn.arg_names.index(n),): [["tt.divisibility", 16]] for n in divisible}
    src = ASTSource(fn, signature=signature, constexprs=constants, attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": num_warps}).asm["ptx"]


def test_compiled_for_an_h100_the_checked_loads_keep_their_vector_width(tmp_path):
    """The guard's mask is computed from int64 offsets, so Triton still proves 16-byte runs of lanes:
    a checked matmul's tiles still move by 16-byte ``cp.async`` copies, as unchecked."""
    pytest.importorskip("triton.backends.nvidia")
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        pytest.skip("kernels are interpreted in this process (TRITON_INTERPRET is set): nothing is compiled")
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "examples"))
    os.environ.pop("TRITON_INTERPRET", None)
    try:
        import importlib
        mm = importlib.import_module("matmul")
    finally:
        sys.path.pop(0)
    from triton.runtime.jit import JITFunction
    kernel = mm._matmul_kernel
    while not isinstance(kernel, JITFunction):
        kernel = kernel.fn
    meta = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_SIZE_M=8, stride_ak=1, stride_bn=1, stride_cn=1)
    sig = {n: "*bf16" for n in ("a_ptr", "b_ptr", "c_ptr")}
    sig.update({n: "i32" for n in ("M", "N", "K", "stride_am", "stride_bk", "stride_cm")})
    sig.update({n: "constexpr" for n in meta})
    div = ["a_ptr", "b_ptr", "c_ptr", "M", "N", "K", "stride_am", "stride_bk", "stride_cm"]
    try:
        native = _sm90_ptx(kernel, sig, meta, div, num_warps=8)
    except Exception as e:  # a Triton without the CUDA compiler's tools
        pytest.skip(f"cannot compile for sm_90 here: {e}")
    inst = instrument.instrumented(kernel, frozenset({"a_ptr", "b_ptr", "c_ptr"}))
    sig2, meta2 = dict(sig, _tk_rec="*i64", _tk_cap="i32", _tk_replay="constexpr"), dict(meta, _tk_replay=0)
    div2 = div + ["_tk_rec"]
    for r in inst.roots:
        sig2[instrument.param_name("hi", r)] = "i64"
        div2.append(instrument.param_name("hi", r))
        for k in ("s1", "e1", "s2", "e2", "g"):
            sig2[instrument.param_name(k, r)] = "constexpr"
            meta2[instrument.param_name(k, r)] = 0 if k == "g" else 1
    checked = _sm90_ptx(inst.jit, sig2, meta2, div2, num_warps=8)

    def copies(ptx):
        return len(re.findall(r"cp\.async\.cg\.shared\.global \[[^]]*\], \[[^]]*\], 0x10", ptx))
    assert copies(native) > 0 and copies(checked) == copies(native)
    assert "ld.global.b16" not in checked  # no load fell back to one element at a time


def test_without_a_gpu_the_instrumented_mode_says_so(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(sanitizer, "gpu_visible", lambda: False)
    script = tmp_path / "s.py"
    script.write_text("print('ran')\n")
    assert main(["check", "--gpu", "--", "python", str(script)]) == 2
    assert "no GPU is visible" in capsys.readouterr().err


def test_without_nvidia_smi_and_without_a_gpu_the_instrumented_mode_says_so(monkeypatch, capsys, tmp_path):
    """No nvidia-smi to ask (a container without the tool): torch decides; none here is a usage error,
    not a run that reports every kernel unchecked and exits 0."""
    import torch
    monkeypatch.setattr(sanitizer, "gpu_visible", lambda: None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
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
    """The whole --gpu command where this process sees a GPU but the script's does not: the script
    runs, nothing is instrumented, and the report says that no kernel was checked."""
    import torch
    monkeypatch.setattr(sanitizer, "gpu_visible", lambda: None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # here only: the script's process has none
    script = tmp_path / "s.py"
    script.write_text("import torch, triton\nprint('ran')\n")
    out = tmp_path / "r.json"
    assert main(["check", "--gpu", "--json", str(out), "--", "python", str(script)]) == 0
    data = json.loads(out.read_text())
    assert data["findings"] == [] and data["summary"]["engine"] is None
    assert any("no CUDA device" in u for u in data["summary"]["gpu"]["unchecked"])
    assert "not checked: every kernel" in capsys.readouterr().out


DESCRIPTORS = textwrap.dedent('''
    import json, sys, torch
    sys.path.insert(0, sys.argv[1])
    import tensor_descriptor as td
    from triton.tools.tensor_descriptor import TensorDescriptor
    from tritonkit.check.gpu import instrument, device
    from tritonkit.check.gpu.runtime import take_records, to_findings
    from tritonkit.check.gpu.launch_log import describe_tensor
    out = {}
    for bug in ("none", "padded_shape", "contiguous_strides"):
        M, N, bm, bn = 70, 100, 32, 32
        # storages larger than the views: the padded store must not hit the interpreter's own memory
        x = torch.randn(M + 40, N + 12)[:M, :N]
        y = torch.empty(200 * 128)[:M * N].view(M, N)
        bias = torch.randn(N)
        if bug == "padded_shape":
            xd = TensorDescriptor(x, [96, 128], list(x.stride()), [bm, bn])
            yd = TensorDescriptor(y, [96, 128], list(y.stride()), [bm, bn])
        elif bug == "contiguous_strides":
            xd, yd = TensorDescriptor(x, [M, N], [N, 1], [bm, bn]), TensorDescriptor.from_tensor(y, [bm, bn])
        else:
            xd, yd = TensorDescriptor.from_tensor(x, [bm, bn]), TensorDescriptor.from_tensor(y, [bm, bn])
        named = {"x_desc": xd, "y_desc": yd, "bias_ptr": bias, "N": N}
        inst = instrument.instrumented(td._bias_relu_kernel, frozenset({"bias_ptr"}), frozenset(),
                                       frozenset({("x_desc", 2), ("y_desc", 2)}))
        rec = torch.zeros(device.HEADER + 256 * device.RECORD, dtype=torch.int64)
        grid = ((M + bm - 1) // bm, (N + bn - 1) // bn)
        inst.jit[grid](xd, yd, bias, N, BLOCK_M=bm, BLOCK_N=bn, **instrument.extra_arguments(inst, named, rec, 256))
        _, rows, _ = take_records(rec, 256)
        launch = {"kernel": "k", "file": "f.py", "grid": list(grid) + [1], "records": rows,
                  "sites": {str(i): [s.line, s.access, s.arg, s.ptr_line] for i, s in inst.sites.items()},
                  "tensors": {s.arg: describe_tensor(s.arg, getattr(named[s.root], "base", named[s.root]))
                              for s in inst.sites.values()}}
        out[bug] = {"skipped": inst.skipped, "findings": [[f.kind, f.line, f.arg, f.reason, f.program_ids]
                                                          for f in to_findings([launch])]}
    print(json.dumps(out))
''')


def test_a_tensor_descriptors_blocks_are_checked_against_its_base_tensor(tmp_path):
    """Host-side tensor descriptors: each ``desc.load``/``desc.store`` block's elements inside the
    descriptor's shape are checked against the view of its base tensor (run in the interpreter):
    a shape rounded up to whole blocks reaches past the views, strides of a contiguous tensor given
    for a column slice reach into its gaps; a right descriptor, nothing."""
    (tmp_path / "child.py").write_text(DESCRIPTORS)
    examples = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "examples")
    proc = subprocess.run([sys.executable, str(tmp_path / "child.py"), examples], capture_output=True, text=True,
                          env=dict(os.environ, TRITON_INTERPRET="1"), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["none"] == {"skipped": [], "findings": []}
    assert [f[:4] for f in got["contiguous_strides"]["findings"]] == [["out_of_bounds", 59, "x_desc.base",
                                                                       "outside_view"]]
    assert [0, 0] in got["contiguous_strides"]["findings"][0][4]  # row 1 of the first block is in the gap
    padded = {tuple(f[:3]) for f in got["padded_shape"]["findings"]}
    assert padded == {("out_of_bounds", 59, "x_desc.base"), ("out_of_bounds", 63, "y_desc.base")}


def test_only_counters_of_counted_sites_are_taken():
    """A header cell of a site the kernel does not count (an unchecked write ran over it) is set
    apart, not taken for lanes counted in a loop."""
    sites = {0: instrument.Site(10, "load", "x", counted=True), 1: instrument.Site(12, "store", "y")}
    assert runtime.split_counters({0: 3, 1: 7, 40: 1}, sites) == ({0: 3}, {1: 7, 40: 1})
    assert runtime.split_counters({}, sites) == ({}, {})
