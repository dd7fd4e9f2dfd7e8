"""An ``if`` whose condition differs between the programs of a batch runs each branch once for the
batch, masked to the programs that take it (an early ``return`` folded into an ``else``), or splits
the batch into a group per branch (an ``if`` early in the kernel, or one that cannot be masked):
either way with the outputs, findings and prints of one program at a time. The tests run both
ways (``mode``: ``simt.MASK_AFTER_BYTES`` at 0, every divergent ``if`` masked, or at infinity, every
one outside loops split)."""
from __future__ import annotations

import contextlib
import io

import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st
import triton
import triton.language as tl

import tritonkit
from tritonkit.check.interp import simt

_VOLATILE = ("launches",)


@pytest.fixture(params=["masked", "split"])
def mode(request, monkeypatch):
    monkeypatch.setattr(simt, "MASK_AFTER_BYTES", 0 if request.param == "masked" else float("inf"))
    return request.param


def _diverged(rec, mode) -> bool:
    """Whether the launch ran its divergent ``if`` statements the way ``mode`` says."""
    return rec.groups == 0 and rec.masked_branches >= 1 if mode == "masked" else rec.groups >= 1


def _run(fn, engine):
    torch.manual_seed(0)
    out = io.StringIO()
    result = None
    with contextlib.redirect_stdout(out):
        try:
            with tritonkit.checking(engine=engine) as s:
                result = fn()
        except tritonkit.CheckAborted:
            pass
    findings = [{k: v for k, v in f.to_dict().items() if k not in _VOLATILE} for f in s.findings]
    return result, findings, s.launches, out.getvalue()


def _both(fn):
    """The sequential and batched runs of ``fn``; asserts they agree (tensors bit for bit, findings,
    printed lines) and returns the batched run's launch record and findings."""
    seq, bat = _run(fn, "sequential"), _run(fn, "auto")
    for a, b in zip(seq[0], bat[0]):
        assert a.dtype == b.dtype and torch.equal(a.nan_to_num(), b.nan_to_num())
    assert bat[1] == seq[1]
    assert sorted(bat[3].splitlines()) == sorted(seq[3].splitlines())
    (rec,) = bat[2]
    assert rec.engine == "batched" and rec.fallback is None
    return rec, bat[1], bat[3]


@triton.jit
def rows_past_the_grid_return(x, out, n_rows, B: tl.constexpr):
    """The grid is rounded up: programs past the last row return first, and the rest load their row
    without a mask (masked-off programs must not read out of bounds)."""
    row = tl.program_id(0)
    if row >= n_rows:
        return
    cols = tl.arange(0, B)
    v = tl.load(x + row * B + cols)
    tl.store(out + row * B + cols, v * 2)


def test_an_early_return_on_the_program_id_runs_without_out_of_bounds_lanes(mode):
    def go():
        x = torch.randn(5, 16)
        out = torch.zeros(8, 16)
        rows_past_the_grid_return[(8,)](x, out, 5, B=16)
        return out, x
    rec, findings, _ = _both(go)
    assert findings == [] and _diverged(rec, mode)


@triton.jit
def ignored_rows(x, y, out, loss, ignore_index, B: tl.constexpr):
    """Cross entropy's shape: a row whose label is ``ignore_index`` zeroes its gradient and returns;
    the others compute, then choose by the sign of a reduction."""
    row = tl.program_id(0)
    cols = tl.arange(0, B)
    label = tl.load(y + row)
    if label == ignore_index:
        tl.store(out + row * B + cols, tl.zeros((B,), dtype=tl.float32))
        tl.store(loss + row, 0.0)
        return
    v = tl.load(x + row * B + cols)
    s = tl.sum(v)
    if s > 0:
        g = v * 2.0
        scale = s
    elif s > -1.0:
        g = v - 1.0
        scale = 1.0
    else:
        g = -v
        scale = -s
    tl.store(out + row * B + cols, g / scale)
    tl.store(loss + row, tl.load(x + row * B + label) * scale)


def test_branches_that_assign_and_return_match_one_program_at_a_time(mode):
    def go():
        x = torch.randn(12, 8)
        x[3] += 1.0  # rows of each branch
        x[4] -= 3.0
        y = torch.tensor([0, -100, 2, 3, -100, 5, 6, 7, 1, -100, 4, 4])
        out = torch.full((12, 8), 9.0)
        loss = torch.full((12,), 9.0)
        ignored_rows[(12,)](x, y, out, loss, -100, B=8)
        return out, loss
    rec, findings, _ = _both(go)
    assert findings == [] and _diverged(rec, mode)
    out, loss = _run(go, "auto")[0]
    assert not out[1].any() and not out[4].any() and loss[9].item() == 0.0


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(labels=st.lists(st.sampled_from([-100, 0, 3, 7]), min_size=1, max_size=24),
       shift=st.floats(-2.0, 2.0), seed=st.integers(0, 2**16), masked=st.booleans())
def test_generated_rows_take_the_branches_of_one_program_at_a_time(labels, shift, seed, masked):
    """Rows whose labels and sums fall on every side of the kernel's branches, in any mix, masked
    or split."""
    def go():
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(len(labels), 8, generator=g) + shift
        y = torch.tensor(labels)
        out = torch.full((len(labels), 8), 9.0)
        loss = torch.full((len(labels),), 9.0)
        ignored_rows[(len(labels),)](x, y, out, loss, -100, B=8)
        return out, loss
    old, simt.MASK_AFTER_BYTES = simt.MASK_AFTER_BYTES, 0 if masked else float("inf")
    try:
        rec, findings, _ = _both(go)
    finally:
        simt.MASK_AFTER_BYTES = old
    assert findings == [] and (rec.groups == 0 if masked else rec.masked_branches == 0)


@triton.jit
def asserts_and_prints_in_a_branch(x, out):
    pid = tl.program_id(0)
    v = tl.load(x + pid)
    if v < 0:
        tl.device_print("negative", v)
        tl.device_assert(v > -2.0, "too negative")
        w = -v
    else:
        w = v
    tl.store(out + pid, w)


def test_asserts_and_prints_in_a_branch_come_from_the_programs_that_take_it(mode):
    def go():
        x = torch.tensor([1.0, -1.0, 2.0, -3.0, 0.5, -0.5, -5.0, 4.0])
        out = torch.zeros(8)
        asserts_and_prints_in_a_branch[(8,)](x, out)
        return out, x
    rec, findings, printed = _both(go)
    (failed,) = findings
    assert failed["kind"] == "assert_failed" and failed["program_ids"] == [[3], [6]]
    assert printed.count("negative") == 4
    assert _diverged(rec, mode)


@triton.jit
def return_inside_a_loop(x, out, n_steps):
    """A ``return`` inside a loop cannot become an ``else``: the batch splits into groups."""
    pid = tl.program_id(0)
    v = tl.load(x + pid)
    acc = 0.0
    for i in range(n_steps):
        if v < i:
            tl.store(out + pid, acc)
            return
        acc += v
    tl.store(out + pid, -acc)


def test_a_branch_that_cannot_be_masked_splits_the_batch_with_the_same_results():
    def go():
        x = torch.tensor([0.5, 3.5, 1.5, 9.0, 2.5, -1.0])
        out = torch.zeros(6)
        return_inside_a_loop[(6,)](x, out, 5)
        return out, x
    rec, findings, _ = _both(go)
    assert findings == [] and rec.groups >= 1


@triton.jit
def nested_divergent_branches(x, out, n):
    pid = tl.program_id(0)
    if pid < n:
        v = tl.load(x + pid)
        if v > 0:
            r = v + 100.0
            if v > 1:
                r = r * 2.0
        else:
            r = v - 100.0
        tl.store(out + pid, r)


@pytest.mark.parametrize("programs", [1, 7, 64])
def test_nested_branches_match_one_program_at_a_time(programs, mode):
    def go():
        x = torch.randn(programs) * 2
        out = torch.zeros(programs)
        nested_divergent_branches[(programs,)](x, out, programs - programs // 3)
        return out, x
    rec, findings, _ = _both(go)
    assert findings == [] and (_diverged(rec, mode) or programs == 1)


@triton.jit
def conditions_with_and_or_not(x, y, out, lo, hi, HAS_Y: tl.constexpr):
    """``or``/``and``/``not`` of kernel values (Triton's compiler makes them ``|``/``&``/``== 0``;
    Python's would take each program's truth), and ``and`` short-circuiting on a constexpr: with
    ``HAS_Y`` off, ``y`` is None and ``tl.load(y + pid)`` must not run."""
    pid = tl.program_id(0)
    v = tl.load(x + pid)
    outside = (v < lo) | (v >= hi)
    if outside or v == 0:
        r = -1.0
    elif HAS_Y and tl.load(y + pid) > 0:
        r = 1.0
    else:
        r = 2.0
    if not outside:
        r += 10.0
    tl.store(out + pid, r)


@pytest.mark.parametrize("has_y", [False, True])
def test_and_or_not_of_kernel_values_short_circuit_on_constexprs_only(has_y, mode):
    def go():
        x = torch.tensor([0.0, 1.5, -3.0, 2.5, 9.0, 0.5, 4.0, -0.5])
        y = torch.tensor([1.0, -1.0, 1.0, 1.0, -1.0, -1.0, 1.0, 1.0]) if has_y else None
        out = torch.zeros(8)
        conditions_with_and_or_not[(8,)](x, y, out, -1.0, 3.0, HAS_Y=has_y)
        return (out,)
    rec, findings, _ = _both(go)
    assert findings == [] and _diverged(rec, mode)
    (out,) = _run(go, "auto")[0]
    xs, ys = [0.0, 1.5, -3.0, 2.5, 9.0, 0.5, 4.0, -0.5], [1.0, -1.0, 1.0, 1.0, -1.0, -1.0, 1.0, 1.0]

    def ref(v, w):  # the kernel in Python, one program at a time
        outside = v < -1.0 or v >= 3.0
        r = -1.0 if outside or v == 0 else (1.0 if has_y and w > 0 else 2.0)
        return r if outside else r + 10.0
    assert out.tolist() == [ref(v, w) for v, w in zip(xs, ys)]


@triton.jit
def skip_masked_rows(x, mask, out, B: tl.constexpr):
    """GRPO's shape: the early return sits in a branch on a constexpr (``mask is not None``)."""
    row = tl.program_id(0)
    if mask is not None:
        keep = tl.load(mask + row)
        if keep == 0:
            return
    cols = tl.arange(0, B)
    tl.store(out + row * B + cols, tl.load(x + row * B + cols) + 1.0)


@pytest.mark.parametrize("with_mask", [False, True])
def test_an_early_return_inside_a_branch_folds(with_mask, mode):
    def go():
        x = torch.randn(6, 4)
        mask = torch.tensor([1, 0, 1, 1, 0, 1], dtype=torch.int32) if with_mask else None
        out = torch.zeros(6, 4)
        skip_masked_rows[(6,)](x, mask, out, B=4)
        return out, x
    rec, findings, _ = _both(go)
    assert findings == [] and (_diverged(rec, mode) if with_mask else rec.groups == rec.masked_branches == 0)


@triton.jit
def branches_with_blocks_of_other_shapes(x, out, n, A: tl.constexpr, B: tl.constexpr):
    """Fused MoE's shape: each branch assigns ``offs`` a block of its own size (Triton allows it: the
    name is not used after the ``if``); the two cannot be merged, so the batch splits by branch."""
    pid = tl.program_id(0)
    if pid < n:
        offs = tl.arange(0, A)
        tl.store(out + pid * A + offs, tl.load(x + offs) * 2)
    else:
        offs = tl.arange(0, B)
        tl.store(out + n * A + offs, tl.load(x + offs))


def test_branches_whose_values_cannot_merge_split_the_batch_with_the_same_results():
    def go():
        x = torch.randn(16)
        out = torch.zeros(3 * 16 + 8)
        branches_with_blocks_of_other_shapes[(4,)](x, out, 3, A=16, B=8)
        return out, x
    rec, findings, _ = _both(go)
    assert findings == [] and rec.groups >= 1


@triton.jit
def late_flag(x, out, flags, B: tl.constexpr):
    """The divergent ``if`` comes after the row's work: masked, the work is not run again per group."""
    row = tl.program_id(0)
    cols = tl.arange(0, B)
    v = tl.load(x + row * B + cols)
    e = tl.exp(v - tl.max(v))
    s = tl.sum(e)
    tl.store(out + row * B + cols, e / s)
    if tl.max(v) > 1.0:
        tl.store(flags + row, 1)


def test_by_default_an_early_if_splits_the_batch_and_a_late_one_runs_masked():
    def early():
        x = torch.randn(5, 16)
        out = torch.zeros(8, 16)
        rows_past_the_grid_return[(8,)](x, out, 5, B=16)
        return out, x

    def late():
        x = torch.rand(8, 16)
        x[::2] += 1.5  # rows 0, 2, 4, 6 flag
        out = torch.zeros(8, 16)
        flags = torch.zeros(8, dtype=torch.int32)
        late_flag[(8,)](x, out, flags, B=16)
        return out, flags
    rec, _, _ = _both(early)
    assert rec.groups >= 1 and rec.masked_branches == 0
    rec, _, _ = _both(late)
    assert rec.groups == 0 and rec.masked_branches >= 1
    assert _run(late, "auto")[0][1].tolist() == [1, 0, 1, 0, 1, 0, 1, 0]
    assert simt.MASK_AFTER_BYTES == 256  # (the figure the benchmark measured; change both together)


@triton.jit
def conditional_expressions(x, out, n, B: tl.constexpr):
    """``a if c else b`` on per-program values: only the taken operand's load runs in a program (the
    others would read out of bounds), and blocks are chosen per program."""
    pid = tl.program_id(0)
    first = tl.load(x + pid * B) if pid < n else -1.0
    cols = tl.arange(0, B)
    row = tl.load(x + pid * B + cols, mask=pid < n, other=0.0)
    picked = row * 2.0 if first > 0 else row - 1.0
    tl.store(out + pid * B + cols, picked + first)


def test_a_conditional_expression_evaluates_each_programs_own_operand():
    def go():
        x = torch.randn(5, 8)
        out = torch.zeros(8, 8)
        conditional_expressions[(8,)](x, out, 5, B=8)
        return out, x
    rec, findings, _ = _both(go)
    assert findings == [] and rec.groups == 0 and rec.masked_branches >= 2
    out, x = _run(go, "auto")[0]
    first = torch.cat([x[:, 0], torch.full((3,), -1.0)])
    rows = torch.cat([x, torch.zeros(3, 8)])
    want = torch.where(first[:, None] > 0, rows * 2.0, rows - 1.0) + first[:, None]
    torch.testing.assert_close(out, want)
