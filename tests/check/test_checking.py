"""The checked interpreter on small kernels: findings (kind, line, argument, programs, elements),
dropped lanes, atomics, device functions, autotune/heuristics, and launches that cannot finish."""
import os
import re

import pytest
import torch
import triton
import triton.language as tl

import tritonkit
from tritonkit.check import CheckAborted, UsageError, checking

KFILE = os.path.abspath(__file__)


# --- the kernels these tests launch (each with a marker comment on the line a test expects) -----------
@triton.jit
def copy_rows(x_ptr, out_ptr, stride_x, ncols, NCOL: tl.constexpr):
    r = tl.program_id(0)
    c = tl.arange(0, NCOL)
    v = tl.load(x_ptr + r * stride_x + c, mask=c < ncols, other=0.0)  # LINE: copy_rows.load
    tl.store(out_ptr + r * NCOL + c, v)


@triton.jit
def _load_block(p, offs):
    return tl.load(p + offs)  # LINE: _load_block.load


@triton.jit
def calls_helper(x_ptr, out_ptr, B: tl.constexpr):
    offs = tl.program_id(0) * B + tl.arange(0, B)
    tl.store(out_ptr + offs, _load_block(x_ptr, offs))  # LINE: calls_helper.call


@triton.jit
def histogram(idx_ptr, cnt_ptr, n, B: tl.constexpr):
    offs = tl.program_id(0) * B + tl.arange(0, B)
    i = tl.load(idx_ptr + offs, mask=offs < n)
    tl.atomic_add(cnt_ptr + i, 1, mask=offs < n)  # LINE: histogram.atomic


@triton.jit
def unmasked_store(out_ptr, value, B: tl.constexpr):
    offs = tl.program_id(0) * B + tl.arange(0, B)
    tl.store(out_ptr + offs, value)  # LINE: unmasked_store.store


@triton.jit
def spin_on_flag(flag_ptr):
    while tl.load(flag_ptr) == 0:  # LINE: spin_on_flag.loop
        pass


@triton.jit
def uses_inline_asm(x_ptr, B: tl.constexpr):
    offs = tl.arange(0, B)
    x = tl.load(x_ptr + offs)
    y = tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], dtype=tl.int32, is_pure=True,  # LINE: asm
                                  pack=1)
    tl.store(x_ptr + offs, y)


@triton.jit
def grid2d_copy(x_ptr, out_ptr, M, N, stride_m, BM: tl.constexpr, BN: tl.constexpr):
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    mask = (rm[:, None] < M) & (rn[None, :] <= N)  # off by one in N
    v = tl.load(x_ptr + rm[:, None] * stride_m + rn[None, :], mask=mask)  # LINE: grid2d_copy.load
    tl.store(out_ptr + rm[:, None] * N + rn[None, :], v, mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def gather_pointer_table(table_ptr, out_ptr, B: tl.constexpr):
    # a pointer loaded as an integer and used: points into no argument
    addr = tl.load(table_ptr)
    p = addr.to(tl.pointer_type(tl.float32))
    v = tl.load(p + tl.arange(0, B))  # LINE: gather_pointer_table.load
    tl.store(out_ptr + tl.arange(0, B), v)


@triton.autotune(configs=[triton.Config({"B": 16}), triton.Config({"B": 32}), triton.Config({"B": 64})],
                 key=["n"])
@triton.jit
def tuned_scale(x_ptr, out_ptr, n, B: tl.constexpr):
    offs = tl.program_id(0) * B + tl.arange(0, B)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(out_ptr + offs, x * 2, mask=offs < n + (B - 16))  # LINE: tuned_scale.store


@triton.heuristics(values={"B": lambda args: 64 if args["n"] > 100 else 16})
@triton.jit
def heuristic_scale(x_ptr, out_ptr, n, B: tl.constexpr):
    offs = tl.program_id(0) * B + tl.arange(0, B)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(out_ptr + offs, x * 3, mask=offs < n)


def marker_line(marker: str) -> int:
    """The 1-based line in this file carrying ``# LINE: marker``."""
    with open(__file__) as fh:
        for i, text in enumerate(fh, 1):
            m = re.search(r"# LINE: (\S+)", text)
            if m and m.group(1) == marker:
                return i
    raise KeyError(marker)


@triton.jit
def desc_copy(in_desc, out_desc, BM: tl.constexpr, BN: tl.constexpr):
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    tile = in_desc.load([pm * BM, pn * BN])  # LINE: desc_copy.load
    out_desc.store([pm * BM, pn * BN], tile)


if hasattr(tl, "make_block_ptr") and "removed" not in (tl.make_block_ptr.__doc__ or ""):
    @triton.jit
    def block_ptr_copy(x_ptr, out_ptr, M, N, stride_m, M_DECLARED, BM: tl.constexpr, BN: tl.constexpr):
        pm = tl.program_id(0)
        src = tl.make_block_ptr(x_ptr, shape=(M_DECLARED, N), strides=(stride_m, 1), offsets=(pm * BM, 0),
                                block_shape=(BM, BN), order=(1, 0))
        dst = tl.make_block_ptr(out_ptr, shape=(M, N), strides=(N, 1), offsets=(pm * BM, 0),
                                block_shape=(BM, BN), order=(1, 0))
        tile = tl.load(src, boundary_check=(0, 1))  # LINE: block_ptr_copy.load
        tl.store(dst, tile, boundary_check=(0, 1))
else:
    block_ptr_copy = None


def only(session):
    assert len(session.findings) == 1, [f.message for f in session.findings]
    return session.findings[0]


def test_view_overrun_is_reported_in_view_coordinates_and_not_performed():
    big = torch.arange(8 * 200, dtype=torch.float32).reshape(8, 200)
    view = big[:, :100]
    out = torch.full((8, 128), -1.0)
    s = tritonkit.check_launch(copy_rows, (8,), view, out, view.stride(0), 128, NCOL=128)
    f = only(s)
    assert (f.kind, f.reason, f.arg, f.access, f.masked) == ("out_of_bounds", "outside_view", "x_ptr", "load", True)
    assert (os.path.abspath(f.file), f.line) == (KFILE, marker_line("copy_rows.load"))
    assert f.tensor == {"shape": [8, 100], "dtype": "float32", "strides": [200, 1]}
    assert f.elements == "x_ptr[0:8, 100:128]"
    assert f.num_programs == 8 and f.program_ids == [[i] for i in range(8)]
    assert f.count == 8 * 28
    # offending lanes yield 0 (the load had no `other`), in-bounds lanes the data
    torch.testing.assert_close(out[:, :100], view)
    assert (out[:, 100:] == 0).all()


def test_correct_view_copy_has_no_findings():
    big = torch.randn(8, 200)
    view = big[:, :100]
    out = torch.zeros(8, 128)
    s = tritonkit.check_launch(copy_rows, (8,), view, out, view.stride(0), 100, NCOL=128)
    assert s.findings == []
    torch.testing.assert_close(out[:, :100], view)


def test_negative_offsets_are_before_start(shifted_copy, line_of):
    x = torch.arange(40, dtype=torch.float32)
    out = torch.zeros(40)
    f = only(tritonkit.check_launch(shifted_copy, (3,), x, out, 40, SHIFT=3, B=16))
    assert (f.reason, f.arg, f.elements, f.program_ids) == ("before_start", "x_ptr", "x_ptr[-3:0]", [[0]])
    assert f.line == line_of(shifted_copy, "shifted_copy.load")
    torch.testing.assert_close(out[3:], x[:-3])


def test_finding_inside_device_function_names_its_line_and_caller():
    f = only(tritonkit.check_launch(calls_helper, (2,), torch.arange(20.0), torch.zeros(32), B=16))
    assert f.kernel == "calls_helper"
    assert f.line == marker_line("_load_block.load")
    assert [fr["function"] for fr in f.call_stack] == ["calls_helper", "_load_block"]
    assert f.call_stack[0]["line"] == marker_line("calls_helper.call")
    assert (f.elements, f.program_ids, f.masked) == ("x_ptr[20:32]", [[1]], False)


def test_atomics_count_in_order_and_out_of_range_index_is_dropped():
    idx = torch.tensor([0, 1, 1, 3, 3, 3, 7, 4], dtype=torch.int32)
    cnt = torch.zeros(5, dtype=torch.int32)
    f = only(tritonkit.check_launch(histogram, (1,), idx, cnt, 8, B=8))
    assert cnt.tolist() == [1, 2, 0, 3, 1]
    assert (f.access, f.arg, f.elements, f.line) == ("atomic_add", "cnt_ptr", "cnt_ptr[7]",
                                                      marker_line("histogram.atomic"))


def test_dropped_store_leaves_neighbouring_memory_untouched():
    big = torch.full((40,), 7.0)
    out = big[10:20]
    f = only(tritonkit.check_launch(unmasked_store, (1,), out, 1.5, B=16))
    assert (f.access, f.masked, f.reason, f.elements) == ("store", False, "past_end", "out_ptr[10:16]")
    assert "no mask" in f.hint
    assert (big[10:20] == 1.5).all() and (big[:10] == 7.0).all() and (big[20:] == 7.0).all()


def test_2d_grid_program_ids_and_elements():
    M, N = 10, 12
    x = torch.randn(M, N + 4)[:, :N]
    out = torch.zeros(M, N)
    s = tritonkit.check_launch(grid2d_copy, (triton.cdiv(M, 8), triton.cdiv(N, 8)), x, out, M, N, x.stride(0),
                               BM=8, BN=8)
    f = only(s)
    assert (f.reason, f.elements) == ("outside_view", "x_ptr[0:10, 12]")
    assert sorted(map(tuple, f.program_ids)) == [(0, 1), (1, 1)]
    torch.testing.assert_close(out, x)


def test_pointer_into_no_argument():
    table = torch.tensor([0x1000], dtype=torch.int64)
    f = only(tritonkit.check_launch(gather_pointer_table, (1,), table, torch.zeros(8), B=8))
    assert (f.reason, f.arg, f.line) == ("no_argument", None, marker_line("gather_pointer_table.load"))
    assert f.elements.startswith("0x1000")


def test_inline_asm_is_an_unsupported_finding_with_its_line():
    with pytest.raises(CheckAborted):
        with checking() as s:
            uses_inline_asm[(1,)](torch.zeros(16, dtype=torch.int32), B=16)
    f = only(s)
    assert f.kind == "unsupported" and f.line == marker_line("asm")
    assert "inline assembly" in f.message
    assert s.launches[0].status == "aborted"


def test_timeout_stops_a_launch_and_says_where():
    with pytest.raises(CheckAborted):
        with checking(timeout=0.5) as s:
            spin_on_flag[(2,)](torch.zeros(1, dtype=torch.int32))
    f = only(s)
    # the timer fires in the loop's condition or in its body (`pass`), whichever runs at that moment
    assert f.kind == "timeout" and f.program_ids == [[0]]
    assert f.line in (marker_line("spin_on_flag.loop"), marker_line("spin_on_flag.loop") + 1)


def test_zero_program_grid_runs_nothing_and_is_noted():
    out = torch.zeros(4)
    s = tritonkit.check_launch(unmasked_store, (0,), out, 1.0, B=16)
    assert s.findings == []
    assert s.summary()["empty_grids"] == 1 and s.launches[0].programs == 0
    assert (out == 0).all()


def test_bad_grid_and_missing_argument_are_usage_errors():
    with pytest.raises(UsageError, match="negative"):
        with checking():
            unmasked_store[(-1,)](torch.zeros(4), 1.0, B=16)
    with pytest.raises(UsageError, match="value"):
        with checking():
            unmasked_store[(1,)](torch.zeros(4), B=16)


def test_autotune_checks_every_config_once_per_key_and_names_configs():
    n = 40
    x = torch.arange(n, dtype=torch.float32)
    out = torch.zeros(n)
    with checking() as s:
        for _ in range(2):
            tuned_scale[lambda m: (triton.cdiv(n, m["B"]),)](x, out, n)
    configs = [r.config.split(",")[0] for r in s.launches]
    assert configs == ["B=32", "B=64", "B=16", "B=16"]  # others once (restored), then the kept one twice
    torch.testing.assert_close(out, 2 * x)
    f = only(s)
    assert f.line == marker_line("tuned_scale.store")
    assert [c.split(",")[0] for c in f.configs] == ["B=32", "B=64"]


def test_heuristics_values_reach_the_kernel():
    n = 200
    x = torch.randn(n)
    out = torch.zeros(n)
    with checking() as s:
        heuristic_scale[lambda m: (triton.cdiv(n, m["B"]),)](x, out, n)
    assert s.findings == [] and s.launches[0].programs == triton.cdiv(n, 64)
    torch.testing.assert_close(out, 3 * x)


@pytest.mark.parametrize("engine", ["sequential", "auto"])
def test_stop_on_first_raises_at_the_first_finding(engine):
    with pytest.raises(CheckAborted):
        with checking(stop_on_first=True, engine=engine) as s:
            unmasked_store[(4,)](torch.zeros(10), 2.0, B=16)
            unmasked_store[(4,)](torch.zeros(10), 2.0, B=16)
    # one program at a time stops inside program 0; the batched engine after its batch (the finding is
    # the same: the first program's)
    assert len(s.launches) == 1 and s.launches[0].status == "aborted"
    assert s.launches[0].programs == (0 if engine == "sequential" else 4)
    assert len(s.findings) == 1 and s.findings[0].program_ids == [[0]]
    assert s.summary()["aborted"].startswith("stopped at the first finding")


def test_checks_off_still_drops_lanes_outside_the_storage():
    big = torch.full((40,), 7.0)
    s = tritonkit.check_launch(unmasked_store, (1,), big[30:], 1.0, B=16, checks=[])
    assert s.findings == []
    assert (big[30:] == 1.0).all() and (big[:30] == 7.0).all()


def test_findings_fold_over_launches():
    with checking() as s:
        for _ in range(3):
            unmasked_store[(2,)](torch.zeros(20), 1.0, B=16)
    f = only(s)
    assert (f.launches, f.occurrences, f.count, f.program_ids) == (3, 3, 36, [[1]])


def test_sessions_do_not_nest_and_patches_are_removed():
    run_before = triton.runtime.jit.JITFunction.run
    with checking():
        with pytest.raises(RuntimeError, match="nest"):
            with checking():
                pass
    assert triton.runtime.jit.JITFunction.run is run_before


def test_findings_round_trip_through_json():
    import json
    f = only(tritonkit.check_launch(unmasked_store, (1,), torch.zeros(4), 1.0, B=16))
    again = tritonkit.Finding.from_dict(json.loads(json.dumps(f.to_dict())))
    assert again == f


@pytest.mark.gpu
def test_gpu_tensors_are_copied_to_the_host_and_back():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    big = torch.full((40,), 7.0, device="cuda")
    f = only(tritonkit.check_launch(unmasked_store, (1,), big[10:20], 1.5, B=16))
    assert f.elements == "out_ptr[10:16]"
    assert (big[10:20] == 1.5).all().item() and (big[20:] == 7.0).all().item()


def test_tensor_descriptor_with_wrong_shape_is_reported():
    from triton.tools.tensor_descriptor import TensorDescriptor

    M, N = 24, 16
    x = torch.randn(M + 8, N)[:M]  # a view of the first 24 rows
    out = torch.zeros(M + 8, N)
    good_in = TensorDescriptor.from_tensor(x, [16, 16])
    good_out = TensorDescriptor.from_tensor(out[:M], [16, 16])
    s = tritonkit.check_launch(desc_copy, (2, 1), good_in, good_out, BM=16, BN=16)
    assert s.findings == []
    torch.testing.assert_close(out[:M], x)
    # a descriptor that claims 32 rows of a 24-row tensor
    bad_in = TensorDescriptor(x, [M + 8, N], list(x.stride()), [16, 16])
    f = only(tritonkit.check_launch(desc_copy, (2, 1), bad_in, good_out, BM=16, BN=16))
    assert (f.arg, f.access, f.reason, f.elements, f.program_ids) == (
        "in_desc.base", "descriptor_load", "past_end", "in_desc.base[24:32, 0:16]", [[1, 0]])
    assert f.line == marker_line("desc_copy.load")


def test_block_pointer_with_wrong_shape_is_reported():
    if block_ptr_copy is None:
        pytest.skip("tl.make_block_ptr was removed in this Triton")
    M, N = 20, 16
    x = torch.randn(M, N)
    out = torch.zeros(M, N)
    s = tritonkit.check_launch(block_ptr_copy, (2,), x, out, M, N, N, M, BM=16, BN=16)
    assert s.findings == []
    torch.testing.assert_close(out, x)
    f = only(tritonkit.check_launch(block_ptr_copy, (2,), x, out, M, N, N, 32, BM=16, BN=16))
    assert (f.arg, f.access, f.reason, f.elements) == ("x_ptr", "block_ptr_load", "past_end", "x_ptr[20:32, 0:16]")


def test_a_failure_inside_tritonkit_is_an_internal_error_not_a_finding(monkeypatch):
    from tritonkit.check import InternalError
    from tritonkit.check.memory import Layout

    monkeypatch.setattr(Layout, "valid", None)  # a TypeError raised inside tritonkit's own code
    with pytest.raises(InternalError, match="not callable"):
        with checking() as s:
            unmasked_store[(1,)](torch.zeros(16), 1.0, B=32)  # past the end: the layout is consulted
    assert s.findings == []


def test_sparse_tensor_argument_is_a_usage_error():
    with pytest.raises(UsageError, match="dense"):
        with checking():
            unmasked_store[(1,)](torch.zeros(16).to_sparse(), 1.0, B=16)


def test_outputs_is_validated_and_cpu_tensors_keep_the_checked_results():
    """``outputs`` takes ``"checked"`` or ``"gpu"``; with ``"gpu"``, a launch whose tensors are not on a
    CUDA device has nothing to run natively and keeps the interpreter's results."""
    with pytest.raises(ValueError, match="outputs must be one of checked, gpu"):
        with tritonkit.checking(outputs="native"):
            pass
    x = torch.arange(64, dtype=torch.float32)
    out = torch.zeros(64)
    with tritonkit.checking(outputs="gpu") as s:
        _copy_for_outputs[(1,)](x, out, BLOCK=64)
    assert torch.equal(out, x) and s.launches[0].outputs == "checked"


@triton.jit
def _copy_for_outputs(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs))


@pytest.mark.parametrize("grid,over", [((1, 70000), "y = 70000"), ((1, 1, 65536), "z = 65536"),
                                       ((2 ** 31,), "x = 2147483648")])
def test_a_grid_larger_than_a_gpu_launches_is_refused(grid, over):
    x = torch.arange(64, dtype=torch.float32)
    out = torch.zeros(64)
    with pytest.raises(UsageError, match=f"larger than a GPU launches \\({over};"):
        with checking():
            _copy_for_outputs[grid](x, out, BLOCK=64)
    assert torch.equal(out, torch.zeros(64))  # nothing ran


@triton.jit
def _mark_y(out_ptr):
    tl.store(out_ptr + tl.program_id(1), tl.program_id(1).to(tl.float32))


def test_the_largest_grid_a_gpu_launches_runs():
    out = torch.zeros(65535)
    with checking() as s:
        _mark_y[(1, 65535)](out)
    assert s.launches[0].grid == (1, 65535, 1) and not s.findings
    assert torch.equal(out, torch.arange(65535, dtype=torch.float32))


@triton.jit
def _overrun_by_8(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.zeros([BLOCK], tl.float32), mask=offs < n + 8)


def test_findings_on_one_line_from_tensors_of_different_shapes_are_not_folded_together():
    with checking() as s:
        _overrun_by_8[(1,)](torch.zeros(16), 16, BLOCK=32)
        _overrun_by_8[(1,)](torch.zeros(4, 6), 24, BLOCK=64)
        _overrun_by_8[(1,)](torch.zeros(16), 16, BLOCK=32)  # the first tensor's shape again: folded with it
    got = [(f.tensor["shape"], f.launches, f.count) for f in s.findings]
    assert got == [([16], 2, 16), ([4, 6], 1, 8)], got  # launches, lanes


@triton.jit
def _wait_for_a_later_program(flag_ptr, out_ptr, VOLATILE: tl.constexpr):
    pid = tl.program_id(0)
    if pid == 0:
        if VOLATILE:
            while tl.load(flag_ptr, volatile=True) == 0:  # LINE: poll_load
                pass
        else:
            while tl.atomic_add(flag_ptr, 0) == 0:  # LINE: poll_atomic
                pass
        tl.store(out_ptr, 1)
    else:
        tl.atomic_xchg(flag_ptr, 1)


@pytest.mark.parametrize("engine", ["auto", "sequential"])
@pytest.mark.parametrize("volatile", [False, True])
def test_a_program_waiting_for_a_later_one_gives_way_to_it_and_the_launch_ends(engine, volatile):
    """Issue 40: program 0 spins on a flag program 1 sets; co-resident on a GPU it ends, and so it
    does here: program 0 gives way, program 1 runs, program 0 resumes (a real hang:
    tests/check/test_cooperative.py)."""
    flag, out = torch.zeros(1, dtype=torch.int32), torch.zeros(1, dtype=torch.int32)
    with checking(engine=engine, stall_polls=500) as s:
        _wait_for_a_later_program[(2,)](flag, out, VOLATILE=volatile)
    assert s.findings == [] and out.item() == 1 and flag.item() == 1
    assert s.launches[0].status == "ok" and s.launches[0].engine == "sequential"
    # once the flag is set the poll ends at once: no stall, however low the limit
    flag.fill_(1)
    with checking(engine=engine, stall_polls=2) as s2:
        _wait_for_a_later_program[(2,)](flag, out, VOLATILE=volatile)
    assert not s2.findings and out.item() == 1


def test_stall_polls_is_validated():
    with pytest.raises(ValueError, match="stall_polls"):
        with checking(stall_polls=-1):
            pass
