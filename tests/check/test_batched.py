"""The batched engine against the one-program-at-a-time engine (the oracle).

Differential tests run the same work both ways and require identical outputs (bit for bit) and
identical findings; engine tests exercise what makes batching hard: control flow that diverges
between programs (``if pid``, a per-row loop bound, a ``while`` on loaded data), atomics between
programs of one batch, spin locks (which must fall back), and the memory budget.
"""
import contextlib
import io

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import tritonkit
from tritonkit.check.interp.batched import BatchedBuilder

import embedding as em
import grad_accumulate as ga
import histogram as hg
import layer_norm as ln
import matmul as mm
import row_sum as rs
import softmax as sm
import split_k_matmul as sk
import tensor_descriptor as td
import vector_add as va

EXAMPLES = [em, ga, hg, ln, mm, rs, sm, sk, td, va]
_VOLATILE = ("launches",)  # finding fields that count launches, not what happened in them


def _findings(session):
    out = []
    for f in session.findings:
        d = f.to_dict()
        for k in _VOLATILE:
            d.pop(k, None)
        out.append(d)
    return out


def _run(fn, engine, **kw):
    """Run ``fn()`` under a check session with ``engine``; returns (result, findings, launch records)."""
    torch.manual_seed(0)
    result = None
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            with tritonkit.checking(engine=engine, **kw) as s:
                result = fn()
        except tritonkit.CheckAborted:
            pass
    return result, _findings(s), s.launches, out.getvalue()


def _same(a, b):
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a.nan_to_num(), b.nan_to_num()) \
            and torch.equal(a.isnan(), b.isnan())
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (np.isnan(a) and np.isnan(b))
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


# --- differential: every example, every bug -----------------------------------------------------------
@pytest.mark.parametrize("module,bug", [(m, b) for m in EXAMPLES for b in m.BUGS],
                         ids=[f"{m.__name__}-{b}" for m in EXAMPLES for b in m.BUGS])
def test_example_gives_the_same_outputs_and_findings_both_ways(module, bug):
    from tritonkit.check.checks import AccessMap, default_checks
    argv = ["--bug", bug]
    # with the AccessMap check too: bytes, distinct bytes and access maps must not depend on the engine
    seq = _run(lambda: module.main(argv), "sequential", checks=[*default_checks(), AccessMap()])
    bat = _run(lambda: module.main(argv), "auto", checks=[*default_checks(), AccessMap()])
    assert _same(bat[0], seq[0])
    assert bat[1] == seq[1]
    assert bat[3] == seq[3]  # what the script printed (its max error, device_print lines)
    work = ("flops_by_width", "bytes_read", "bytes_written", "unique_bytes_read", "unique_bytes_written",
            "access_maps")
    assert [[getattr(r, f) for f in work] for r in bat[2]] == [[getattr(r, f) for f in work] for r in seq[2]]
    assert all(r.engine == "sequential" for r in seq[2])
    if bug == "none":  # a correct kernel runs batched: no fallback
        assert all(r.engine == "batched" and r.fallback is None for r in bat[2]), [r.fallback for r in bat[2]]


# --- differential: the Liger-Kernel ops ---------------------------------------------------------------
def test_liger_op_gives_the_same_outputs_and_findings_both_ways(liger, liger_op):
    runs = [_run(lambda: liger.CASES[liger_op]().run_liger(), engine, nan=True) for engine in ("sequential", "auto")]
    (seq, seq_findings, seq_records, _), (bat, bat_findings, records, _) = runs
    assert sorted(bat) == sorted(seq) and all(_same(bat[k], seq[k]) for k in seq)
    assert [r.flops_by_width for r in records] == [r.flops_by_width for r in seq_records]
    assert bat_findings == seq_findings == []
    assert any(r.engine != "sequential" for r in records)


# --- divergence ------------------------------------------------------------------------------------
@triton.jit
def first_program_writes_a_flag(out, flag, n, B: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * B + tl.arange(0, B)
    tl.store(out + offs, offs * 2, mask=offs < n)
    if pid == 0:
        tl.store(flag, 7)


@triton.jit
def causal_row_sums(x, out, n, B: tl.constexpr):
    """Row ``r`` sums the first ``r + 1`` blocks of its row: a loop bound that differs per program."""
    r = tl.program_id(0)
    acc = tl.zeros((B,), dtype=tl.float32)
    for start in range(0, (r + 1) * B, B):
        cols = start + tl.arange(0, B)
        acc += tl.load(x + r * n + cols, mask=cols < n, other=0.0)
    tl.store(out + r * B + tl.arange(0, B), acc)


@triton.jit
def collatz_steps(x, out):
    """A ``while`` on loaded data: every program iterates a different number of times."""
    pid = tl.program_id(0)
    v = tl.load(x + pid)
    steps = 0
    while v != 1:
        if v % 2 == 0:
            v = v // 2
        else:
            v = 3 * v + 1
        steps += 1
    tl.store(out + pid, steps)


def _both(fn, **kw):
    seq = _run(fn, "sequential", **kw)
    bat = _run(fn, "auto", **kw)
    return seq, bat


def test_an_if_on_the_program_id_after_the_programs_work_runs_masked_and_writes_once():
    def go():
        out = torch.zeros(1000, dtype=torch.int32)
        flag = torch.zeros(1, dtype=torch.int32)
        first_program_writes_a_flag[(8,)](out, flag, 1000, B=128)
        return out, flag
    seq, bat = _both(go)
    assert _same(bat[0], seq[0]) and bat[1] == seq[1] == []
    (rec,) = bat[2]
    assert rec.engine == "batched" and rec.groups == 0 and rec.masked_branches >= 1 and rec.programs == 8
    assert bat[0][1].item() == 7 and torch.equal(bat[0][0], torch.arange(1000, dtype=torch.int32) * 2)


def test_a_loop_bound_that_differs_per_program_runs_once_for_the_batch_with_an_active_mask():
    def go():
        x = torch.randn(16, 16 * 8)
        out = torch.empty(16, 8)
        causal_row_sums[(16,)](x, out, 16 * 8, B=8)
        return out, x
    seq, bat = _both(go)
    assert _same(bat[0][0], seq[0][0]) and bat[1] == seq[1] == []
    (rec,) = bat[2]
    assert rec.engine == "batched" and rec.fallback is None and rec.groups == 0 and rec.masked_loops >= 1
    out, x = bat[0]
    ref = torch.stack([x[r, : (r + 1) * 8].reshape(-1, 8).sum(0) for r in range(16)])
    torch.testing.assert_close(out, ref)


@triton.jit
def row_sums_to_a_loaded_bound(x, bounds, out, n, B: tl.constexpr):
    """Row ``r`` sums its row's blocks up to ``bounds[r]`` (a bound per program, as causal attention's)."""
    r = tl.program_id(0)
    acc = tl.zeros((B,), dtype=tl.float32)
    for start in range(0, tl.load(bounds + r), B):
        cols = start + tl.arange(0, B)
        acc += tl.load(x + r * n + cols)
    tl.store(out + r * B + tl.arange(0, B), acc)


@pytest.mark.parametrize("compaction", [False, True])
@pytest.mark.parametrize("overrun", [False, True])
def test_programs_far_apart_in_trip_count_run_as_groups_with_the_results_of_one_at_a_time(monkeypatch, overrun,
                                                                                          compaction):
    """Without compaction, a batch whose loop trip counts are far apart runs as groups of close
    counts (less masked work); with it (the default), as one batch whose finished programs leave
    it: outputs and findings are still those of one program at a time, an out-of-bounds read in
    the last row's extra iteration included."""
    from tritonkit.check.interp import simt
    monkeypatch.setattr(simt, "COMPACT", compaction)
    monkeypatch.setattr(simt, "LOOP_OVERHEAD_BYTES", 1)  # split wherever it saves work, at any size
    rows, B = 16, 8

    def go():
        x = torch.randn(rows, rows * B)
        bounds = (torch.arange(rows, dtype=torch.int32) + 1) * B
        if overrun:
            bounds[-1] += B  # the last row reads one block past the end of x
        out = torch.empty(rows, B)
        row_sums_to_a_loaded_bound[(rows,)](x, bounds, out, rows * B, B=B)
        return out, x
    seq, bat = _both(go)
    assert _same(bat[0][0], seq[0][0]) and bat[1] == seq[1]
    assert [f["kind"] for f in bat[1]] == (["out_of_bounds"] if overrun else [])
    (rec,) = bat[2]
    assert rec.engine == "batched" and rec.fallback is None and (rec.groups == 0 if compaction else rec.groups >= 1)
    if not overrun:
        out, x = bat[0]
        ref = torch.stack([x[r, : (r + 1) * B].reshape(-1, B).sum(0) for r in range(rows)])
        torch.testing.assert_close(out, ref)


def test_trip_counts_are_split_where_the_groups_cost_less_than_the_batch():
    from tritonkit.check.interp.simt import LOOP_OVERHEAD_BYTES, MAX_CANDIDATES, split_by_trips
    assert split_by_trips(np.full(64, 8), 1 << 20) is None  # no divergence
    assert split_by_trips(np.arange(64) % 8 + 1, 64) is None  # tiny programs: an iteration's overhead dominates
    trips = np.repeat([1, 16], 32)
    groups = split_by_trips(trips, LOOP_OVERHEAD_BYTES)  # one program's work: the overhead of an iteration
    assert groups is not None and groups.tolist() == [0] * 32 + [1] * 32
    causal = np.repeat(np.arange(1, 17), 8)  # causal attention's 16 query blocks x 8 heads
    groups = split_by_trips(causal, 32 << 10)
    assert groups is not None and (np.diff(groups) >= 0).all() and 2 <= groups.max() + 1 <= 16
    # each group's programs have closer trip counts than the batch's
    assert all(np.ptp(causal[groups == g]) < np.ptp(causal) for g in range(groups.max() + 1))
    # thousands of distinct trip counts (a per-row length): the search runs over at most 64 bins of them
    many = np.arange(20000) % 5000 + 1
    groups = split_by_trips(many, 64 << 10)
    assert groups is not None and 2 <= groups.max() + 1 <= MAX_CANDIDATES
    assert all(np.ptp(many[groups == g]) < np.ptp(many) for g in range(groups.max() + 1))


@triton.jit
def causal_row_sums_staged(x, out, n, STAGE: tl.constexpr, B: tl.constexpr):
    """``causal_row_sums`` with ``mask`` assigned only under a compile-time branch inside the loop,
    as the fused-attention tutorial's ``_attn_fwd_inner`` does (``if STAGE == 2: mask = ...``)."""
    r = tl.program_id(0)
    acc = tl.zeros((B,), dtype=tl.float32)
    for start in range(0, (r + 1) * B, B):
        cols = start + tl.arange(0, B)
        if STAGE == 2:
            mask = cols < n
            acc += tl.load(x + r * n + cols, mask=mask, other=0.0)
        else:
            acc += tl.load(x + r * n + cols)
    tl.store(out + r * B + tl.arange(0, B), acc)


@pytest.mark.parametrize("stage", [1, 2])
def test_a_name_assigned_only_under_a_compile_time_branch_of_a_divergent_loop_runs_batched(stage):
    """Before, the loop's merge read the name the untaken branch never assigned: UnboundLocalError,
    and the launch fell back to one program at a time (29 of the fused-attention tutorial's 30)."""
    def go():
        x = torch.randn(16, 16 * 8)
        out = torch.empty(16, 8)
        causal_row_sums_staged[(16,)](x, out, 16 * 8, STAGE=stage, B=8)
        return out, x
    seq, bat = _both(go)
    assert _same(bat[0][0], seq[0][0]) and bat[1] == seq[1] == []
    (rec,) = bat[2]
    assert rec.engine == "batched" and rec.fallback is None and rec.masked_loops >= 1
    out, x = bat[0]
    ref = torch.stack([x[r, : (r + 1) * 8].reshape(-1, 8).sum(0) for r in range(16)])
    torch.testing.assert_close(out, ref)


def test_a_while_loop_on_loaded_data_gives_the_results_of_one_program_at_a_time():
    def go():
        x = torch.tensor([1, 2, 3, 6, 7, 9, 12, 27, 5, 16], dtype=torch.int32)
        out = torch.full((10,), -1, dtype=torch.int32)
        collatz_steps[(10,)](x, out)
        return out
    seq, bat = _both(go)
    assert torch.equal(bat[0], seq[0]) and bat[1] == seq[1] == []
    assert bat[0].tolist() == [0, 1, 7, 8, 16, 19, 9, 111, 5, 4]
    (rec,) = bat[2]  # the loop masked, and the if/else inside it masked too: one group
    assert rec.engine == "batched" and rec.groups == 0 and rec.masked_loops >= 1 and rec.masked_branches >= 1


@triton.jit
def causal_sums_that_check_and_print(x, out, n, LIMIT: tl.constexpr, B: tl.constexpr):
    """A per-row loop bound with a device_assert that fails only in some programs' late iterations,
    a device_print in the loop, and a Python int carried through it."""
    r = tl.program_id(0)
    acc = tl.zeros((B,), dtype=tl.float32)
    blocks = 0
    for start in range(0, (r + 1) * B, B):
        cols = start + tl.arange(0, B)
        acc += tl.load(x + r * n + cols, mask=cols < n, other=0.0)
        blocks += 1
        tl.device_assert(start < LIMIT, "the row is too long")
        if r == 2:
            tl.device_print("start", start)
    tl.store(out + r * B + tl.arange(0, B), acc)
    tl.store(out + 16 * B + r, blocks.to(tl.float32) if hasattr(blocks, "to") else blocks * 1.0)


def test_a_masked_loop_reports_asserts_prints_and_carried_values_like_one_program_at_a_time():
    def go():
        x = torch.randn(6, 6 * 4)
        out = torch.zeros(16 * 4 + 16)
        causal_sums_that_check_and_print[(6,)](x, out, 6 * 4, LIMIT=12, B=4)
        return out
    seq, bat = _both(go)
    assert _same(bat[0], seq[0]) and bat[1] == seq[1] and bat[3] == seq[3]
    assert bat[0][16 * 4:16 * 4 + 6].tolist() == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]  # each row's own trip count
    (failed,) = [f for f in bat[1] if f["kind"] == "assert_failed"]
    assert failed["program_ids"] == [[3], [4], [5]] and failed["count"] == 6  # iterations with start >= 12
    assert bat[3].count("start") == 3  # row 2 prints in its 3 iterations only
    (rec,) = bat[2]
    assert rec.engine == "batched" and rec.masked_loops >= 1 and rec.masked_branches >= 1  # (`if r == 2`)


@triton.jit
def read_ahead_in_place(x, n, AHEAD: tl.constexpr, B: tl.constexpr):
    offs = tl.program_id(0) * B + tl.arange(0, B)
    src = offs + AHEAD * B
    v = tl.load(x + src, mask=src < n, other=0.0)
    tl.store(x + offs, v + 1, mask=offs < n)


@triton.jit
def read_ahead_reversed_in_place(x, n, AHEAD: tl.constexpr, B: tl.constexpr):
    offs = tl.program_id(0) * B + tl.arange(0, B)
    src = (tl.program_id(0) + AHEAD) * B + (B - 1 - tl.arange(0, B))  # not a span: its lanes are held
    v = tl.load(x + src, mask=src < n, other=0.0)
    tl.store(x + offs, v + 1, mask=offs < n)


@pytest.mark.parametrize("pending", [None, 64], ids=["loads-held", "loads-summarized"])
def test_a_race_between_programs_of_different_batches_is_found_like_one_program_at_a_time(monkeypatch, pending):
    """The guard watches the whole launch while data_race runs: program 0 reads the block program 4
    writes, and they run in different batches (the first batch has 4 programs); the launch still
    falls back and the race is reported as one program at a time reports it. Also when the guard
    held too many loads and kept only their range: the store inside it runs the launch again with
    the loads entered."""
    from tritonkit.check.engine import batched as _engine
    from tritonkit.check.engine import guard as _guard
    monkeypatch.setenv("TRITONKIT_CHECK_CACHE", "0")  # no batch size learned by an earlier process
    if pending is not None:
        monkeypatch.setattr(_guard, "_PENDING_LANES", pending)

    kernel = read_ahead_in_place if pending is None else read_ahead_reversed_in_place
    needed = []
    check_summary = _guard.Guard._check_summary

    def checked(self, key, off, size, ends=None):
        try:
            return check_summary(self, key, off, size, ends)
        except _guard.NeedPrecise:
            needed.append(key)
            raise
    monkeypatch.setattr(_guard.Guard, "_check_summary", checked)

    monkeypatch.setattr(_engine, "_probe", lambda *args: 0.0)  # no probe: a first batch of 4 programs

    def go():
        _engine._PER_PROGRAM.clear()  # the first batch has 4 programs, whatever ran before
        x = torch.arange(5 * 128, dtype=torch.float32)
        kernel[(5,)](x, 5 * 128, AHEAD=4, B=128)  # program 0 reads the block program 4 writes
        return x
    seq, bat = _both(go)
    assert torch.equal(bat[0], seq[0]) and bat[1] == seq[1]
    assert [f["kind"] for f in bat[1]] == ["data_race"]
    assert bat[2][0].engine == "sequential" and "share an element" in bat[2][0].fallback
    assert bool(needed) == (pending is not None)  # the store inside the loads' range: run again
    # without the race check batches run in order and no batch has both programs: nothing to fall back for
    seq2, bat2 = _both(go, checks=["out_of_bounds"])
    assert torch.equal(bat2[0], seq2[0]) and bat2[2][0].engine == "batched" and bat2[2][0].batches == 2


@triton.jit
def rows_in_place(x, label, stride, n_cols, SHARED: tl.constexpr, B: tl.constexpr):
    """Each program turns its row into row - max + x[label] (the label's element of its own row, or
    with SHARED one of the first two elements of row 0, which no program writes), in place, over
    column blocks masked at the row's end: a cross-entropy's logits turned into gradients."""
    row = tl.program_id(0) + 1
    y = tl.load(label + row)
    pick = (tl.program_id(0) % 2) if SHARED else row * stride + y
    x_y = tl.load(x + pick)
    m = float("-inf")
    for i in range(0, n_cols, B):
        cols = i + tl.arange(0, B)
        m = tl.maximum(m, tl.max(tl.load(x + row * stride + cols, mask=cols < n_cols, other=float("-inf"))))
    for i in range(0, n_cols, B):
        cols = i + tl.arange(0, B)
        v = tl.load(x + row * stride + cols, mask=cols < n_cols)
        tl.store(x + row * stride + cols, v - m + x_y, mask=cols < n_cols)


@pytest.mark.parametrize("shared", [False, True], ids=["own-row", "shared-loads"])
def test_rows_updated_in_place_run_batched_with_the_guard_holding_runs(monkeypatch, shared):
    """A storage each program loads and stores only in its own row (masked at the row's end) is
    watched as runs, with the race check's whole-launch guard: batched, no fallback, the results
    of one program at a time, and its elements never entered one by one. Where programs also load
    one element in common (no conflict), the guard enters the storage as elements, with the same
    results."""
    from tritonkit.check.engine import guard as _guard
    as_elements = []  # storages the guard entered element by element
    owners = _guard.Guard._owners

    def counted(self, key, ncells):
        as_elements.append(key)
        return owners(self, key, ncells)
    monkeypatch.setattr(_guard.Guard, "_owners", counted)

    def go():
        rows, cols = 37, 300
        x = torch.randn(rows + 1, cols)
        label = torch.randint(0, cols, (rows + 1,))
        rows_in_place[(rows,)](x, label, x.stride(0), cols, SHARED=shared, B=128)
        return x
    seq, bat = _both(go)
    assert torch.equal(bat[0], seq[0]) and bat[1] == seq[1] == []
    rec = bat[2][0]
    assert rec.engine == "batched" and rec.fallback is None
    assert bool(as_elements) == shared


@triton.jit
def scale_by_shared(x, w, out, n, B: tl.constexpr):
    offs = tl.program_id(0) * B + tl.arange(0, B)
    cols = tl.arange(0, B)
    tl.store(out + offs, tl.load(x + offs, mask=offs < n) * tl.load(w + cols), mask=offs < n)


def test_loads_summarized_by_range_cost_no_rerun_when_nothing_writes_there(monkeypatch):
    """Every program reads all of ``w`` and nothing writes it: past the guard's limit of held load
    lanes, ``x`` and ``w`` are kept as byte ranges and the launch runs batched once, with the result
    of one program at a time."""
    from tritonkit.check.engine import batched as _engine
    from tritonkit.check.engine import guard as _guard
    monkeypatch.setattr(_guard, "_PENDING_LANES", 256)
    reruns = []
    run = _engine.BatchedEngine._run

    def counted(self, launch, fn, call_args, precise=frozenset()):
        reruns.append(precise)
        return run(self, launch, fn, call_args, precise)
    monkeypatch.setattr(_engine.BatchedEngine, "_run", counted)

    def go():
        x, w = torch.randn(64 * 128), torch.randn(128)
        out = torch.empty_like(x)
        scale_by_shared[(64,)](x, w, out, x.numel(), B=128)
        return out
    seq, bat = _both(go)
    assert torch.equal(bat[0], seq[0]) and bat[1] == seq[1] == []
    assert bat[2][0].engine == "batched" and reruns == [frozenset()]


@triton.jit
def bump_and_read_ahead(x, n, AHEAD: tl.constexpr, B: tl.constexpr):
    offs = tl.program_id(0) * B + tl.arange(0, B)
    src = offs + AHEAD * B
    v = tl.load(x + src, mask=src < n, other=0.0)
    tl.store(x + offs, tl.load(x + offs) + v + 1, mask=offs < n)  # a replay on unrestored memory adds twice


def test_a_launch_undone_after_its_journal_became_a_snapshot_is_restored_exactly(monkeypatch):
    """Many small batches each rewrite a block of one tensor: once the journal keeps more than half
    the tensor's size it becomes one copy of the tensor as it was (memory stays bounded); the last
    program then writes what program 0 read, the launch is undone (from that copy) and replayed
    one program at a time, with the outputs and findings of the one-program-at-a-time engine."""
    from tritonkit.check.engine import batched as _engine
    from tritonkit.check.engine.transaction import Transaction
    seen = []
    settle = Transaction.settle

    def spy(self):
        settle(self)
        seen.append(len(self.snapshots))
    monkeypatch.setattr(Transaction, "settle", spy)
    n_prog, b = 64, 128

    def go():
        _engine._PER_PROGRAM.clear()
        x = torch.arange(n_prog * b, dtype=torch.float32)
        bump_and_read_ahead[(n_prog,)](x, n_prog * b, AHEAD=n_prog - 1, B=b)
        return x
    seq, bat = _both(go, batch_memory=4 * b * 8)  # a few programs a batch
    assert torch.equal(bat[0], seq[0]) and bat[1] == seq[1]
    assert [f["kind"] for f in bat[1]] == ["data_race"]
    assert bat[2][0].engine == "sequential" and "share an element" in bat[2][0].fallback
    assert max(seen) == 1, seen  # the tensor's journal became a snapshot before the launch was undone
    assert len(seen) > 4


@triton.jit
def fill_then_read_first(x, y, n, LAST: tl.constexpr, B: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * B + tl.arange(0, B)
    v = tl.load(x + offs, mask=offs < n, other=0.0)
    if pid == LAST:  # the last program also reads the block program 0 wrote: a race, found late
        v += tl.load(y + tl.arange(0, B))
    tl.store(y + offs, v + 1, mask=offs < n)


@pytest.mark.parametrize("fill", ["empty", "zeros", "full", "random"])
def test_an_output_that_held_one_value_is_undone_without_a_copy_of_it(monkeypatch, fill):
    """An output that held one repeated value before the launch wrote it (``torch.empty``, which the
    uninitialized-read check marks with one value, ``torch.zeros``, ``torch.full``) is kept as that
    value instead of a copy of the tensor or a journal of its old bytes: undone late in the launch,
    it is put back exactly, and the replay one program at a time gives that engine's outputs and
    findings. A tensor of random values is copied as before."""
    from tritonkit.check.engine import batched as _engine
    from tritonkit.check.engine.transaction import Transaction
    sizes = []
    settle = Transaction.settle

    def spy(self):
        settle(self)
        sizes.extend(snap.nbytes for _, snap in self.snapshots.values())
    monkeypatch.setattr(Transaction, "settle", spy)
    n_prog, b = 32, 128
    make = {"empty": lambda n: torch.empty(n), "zeros": torch.zeros, "full": lambda n: torch.full((n,), 7.0),
            "random": torch.randn}[fill]

    def go():
        _engine._PER_PROGRAM.clear()
        torch.manual_seed(0)
        x = torch.randn(n_prog * b)
        y = make(n_prog * b)
        fill_then_read_first[(n_prog,)](x, y, n_prog * b, LAST=n_prog - 1, B=b)
        return y
    seq, bat = _both(go, batch_memory=4 * b * 8)
    assert bat[2][0].engine == "sequential" and "share an element" in bat[2][0].fallback
    assert [f["kind"] for f in bat[1]] == [f["kind"] for f in seq[1]]
    assert "data_race" in [f["kind"] for f in bat[1]]
    assert torch.equal(bat[0], seq[0])
    assert sizes, "no snapshot was made"
    if fill == "random":
        assert max(sizes) == n_prog * b * 4  # a copy of the tensor
    else:
        assert max(sizes) <= 8  # one value


# --- atomics ---------------------------------------------------------------------------------------
@triton.jit
def float_histogram(x, bins, weights, n, NB: tl.constexpr, B: tl.constexpr):
    offs = tl.program_id(0) * B + tl.arange(0, B)
    m = offs < n
    b = tl.load(x + offs, mask=m, other=0) % NB
    tl.atomic_add(bins + b, tl.load(weights + offs, mask=m, other=0.0), mask=m)


@triton.jit
def ticket(counter, tickets):
    pid = tl.program_id(0)
    t = tl.atomic_add(counter, 1, sem="relaxed")
    tl.store(tickets + pid, t)


def test_atomics_of_many_programs_on_one_element_apply_in_program_order():
    """Float atomics from many programs into a few bins: the sums (rounded in a fixed order) are the
    same bits as one program at a time, and the launch is not split."""
    def go():
        g = torch.Generator().manual_seed(3)
        x = torch.randint(0, 1000, (5000,), generator=g, dtype=torch.int32)
        w = torch.randn(5000, generator=g) * 1e3
        bins = torch.zeros(7)
        float_histogram[(triton.cdiv(5000, 256),)](x, bins, w, 5000, NB=7, B=256)
        return bins
    seq, bat = _both(go)
    assert torch.equal(bat[0], seq[0]) and bat[1] == seq[1] == []
    (rec,) = bat[2]
    assert rec.engine == "batched" and rec.fallback is None


def test_the_old_values_atomics_return_follow_program_order():
    def go():
        counter = torch.zeros(1, dtype=torch.int32)
        tickets = torch.full((64,), -1, dtype=torch.int32)
        ticket[(64,)](counter, tickets)
        return tickets
    seq, bat = _both(go)
    assert torch.equal(bat[0], seq[0]) and bat[0].tolist() == list(range(64))
    (rec,) = bat[2]
    assert rec.engine == "batched"


@triton.jit
def spin_lock_increment(lock, total, x):
    pid = tl.program_id(0)
    while tl.atomic_cas(lock, 0, 1) == 1:
        pass
    tl.store(total, tl.load(total) + tl.load(x + pid))
    tl.atomic_xchg(lock, 0)


def test_a_spin_lock_falls_back_to_one_program_at_a_time_and_says_why():
    def go():
        lock = torch.zeros(1, dtype=torch.int32)
        total = torch.zeros(1)
        spin_lock_increment[(12,)](lock, total, torch.arange(12, dtype=torch.float32))
        return total
    seq, bat = _both(go)
    assert torch.equal(bat[0], seq[0]) and bat[0].item() == 66.0 and bat[1] == seq[1] == []
    (rec,) = bat[2]
    # the spin: programs leave the `while` at different iterations, and an atomic_cas for only the
    # programs still spinning is not something the batched engine does
    assert rec.engine == "sequential" and "atomic_cas in a loop" in rec.fallback
    # the same without the race check
    seq2, bat2 = _both(go, checks=["out_of_bounds"])
    assert torch.equal(bat2[0], seq2[0]) and bat2[0].item() == 66.0
    assert bat2[2][0].engine == "sequential" and "atomic_cas in a loop" in bat2[2][0].fallback


def test_a_race_inside_a_batch_falls_back_and_is_reported_like_one_program_at_a_time(shifted_copy):

    def go():
        x = torch.arange(600, dtype=torch.float32)
        shifted_copy[(5,)](x, x, 600, SHIFT=-1, B=128)  # in place, reading the next program's block
        return x
    seq, bat = _both(go)
    assert torch.equal(bat[0], seq[0]) and bat[1] == seq[1]
    assert [f["kind"] for f in bat[1]].count("data_race") >= 1
    assert bat[2][0].fallback is not None and "share an element" in bat[2][0].fallback


# --- modes and the memory budget -------------------------------------------------------------------
def test_a_small_memory_budget_makes_more_batches_with_the_same_result():
    x = torch.randn(300, 100)
    outs, batches = [], []
    for budget in (None, 8 << 10):
        with tritonkit.checking(batch_memory=budget) as s:
            outs.append(sm.softmax(x.clone()))
        (rec,) = s.launches
        assert rec.engine == "batched" and not s.findings
        batches.append(rec.batches)
    assert torch.equal(outs[0], outs[1])
    assert batches[1] > batches[0] >= 1  # 300 rows of 128 lanes: many more batches under an 8 KiB budget


def test_forced_sequential_runs_one_program_at_a_time():
    with tritonkit.checking(engine="sequential") as s:
        va.add(torch.randn(1000), torch.randn(1000))
    (rec,) = s.launches
    assert rec.engine == "sequential" and rec.batches == 0 and rec.fallback is None
    assert s.summary()["engine"] == "sequential" and s.summary()["batched_launches"] == 0


def test_bad_engine_arguments_are_rejected_with_what_to_do():
    with pytest.raises(ValueError, match="engine must be one of auto, sequential"):
        with tritonkit.checking(engine="fast"):
            pass
    with pytest.raises(ValueError, match="batch_memory must be a positive number of bytes"):
        with tritonkit.checking(batch_memory=0):
            pass


def test_the_summary_lists_the_launches_that_fell_back():
    with tritonkit.checking() as s:
        lock = torch.zeros(1, dtype=torch.int32)
        spin_lock_increment[(3,)](lock, torch.zeros(1), torch.ones(3))
    (fb,) = s.summary()["fallbacks"]
    assert fb["kernel"] == "spin_lock_increment" and fb["grid"] == [3, 1, 1] and "atomic_cas" in fb["reason"]


# --- the probe: the first programs with every loop cut to one iteration, undone --------------------------
@triton.jit
def looped_dots(a, b, out, log, K: tl.constexpr, B: tl.constexpr):
    """Each program sums K products of B x B tiles, counts its iterations in ``log`` (an atomic) and
    prints from its last one."""
    pid = tl.program_id(0)
    r = tl.arange(0, B)
    acc = tl.zeros((B, B), dtype=tl.float32)
    for k in range(K):
        x = tl.load(a + (pid * K + k) * B * B + r[:, None] * B + r[None, :])
        y = tl.load(b + k * B * B + r[:, None] * B + r[None, :])
        acc += tl.dot(x, y, input_precision="ieee")
        tl.atomic_add(log + pid, 1)
        if k == K - 1:
            tl.device_print("last", k)
    tl.store(out + pid * B * B + r[:, None] * B + r[None, :], acc)


@triton.jit
def needs_every_iteration(x, out, K: tl.constexpr, B: tl.constexpr):
    """What follows the loop is defined only after its second iteration: a probe's one iteration
    raises there (a name not bound), the real run does not."""
    pid = tl.program_id(0)
    r = tl.arange(0, B)
    acc = tl.zeros((B,), dtype=tl.float32)
    i = 0
    while i < K:
        acc += tl.load(x + pid * K * B + i * B + r)
        if i == 1:
            second = acc
        i += 1
    tl.store(out + pid * B + r, second + acc)


def _count_probes(monkeypatch):
    from tritonkit.check.engine import batched as _engine
    monkeypatch.setenv("TRITONKIT_CHECK_CACHE", "0")  # no bytes per program from an earlier process
    _engine._PER_PROGRAM.clear()
    probes, dots = [], []
    probe = _engine._probe

    def counted(launch, *args):
        per = probe(launch, *args)
        probes.append(per)
        return per
    monkeypatch.setattr(_engine, "_probe", counted)
    create_dot = BatchedBuilder.create_dot

    def dot(self, *args, **kwargs):
        dots.append(self.probing)
        return create_dot(self, *args, **kwargs)
    monkeypatch.setattr(BatchedBuilder, "create_dot", dot)
    return probes, dots


def test_the_probe_runs_each_loop_once_and_leaves_nothing_behind(monkeypatch):
    """A first launch probes its first 4 programs with one iteration per loop; everything the probe
    did (atomics, prints, counts) is undone: outputs, findings, prints and counts are those of one
    program at a time, and those of a launch that needed no probe."""
    from tritonkit.check.engine import batched as _engine
    K, B, P = 6, 16, 12

    def go():
        a, b = torch.randn(P * K, B, B), torch.randn(K, B, B)
        out, log = torch.zeros(P, B, B), torch.zeros(P, dtype=torch.int32)
        looped_dots[(P,)](a, b, out, log, K=K, B=B)
        return out, log
    probes, dots = _count_probes(monkeypatch)
    seq, bat = _both(go)
    assert len(probes) == 1 and probes[0] > 0  # the batched run probed (the sequential one never does)
    assert dots.count(True) == 1  # the probe ran the loop's body once for its batch of 4 programs
    assert _same(bat[0], seq[0]) and bat[1] == seq[1] and bat[3] == seq[3]
    assert bat[0][1].tolist() == [K] * P and bat[3].count("last") == P
    (rec,) = bat[2]
    assert rec.engine == "batched" and rec.programs == P and rec.batches == 1
    known = _run(go, "auto")  # the same launch again in this process: bytes per program known, no probe
    assert len(probes) == 1 and _same(known[0], bat[0]) and known[3] == bat[3]
    assert (known[2][0].programs, known[2][0].accesses, known[2][0].lanes) == (rec.programs, rec.accesses, rec.lanes)
    assert _engine._PER_PROGRAM  # what the probe measured is kept for later launches


def test_a_probe_that_raises_leaves_the_first_batch_to_measure(monkeypatch):
    K, B, P = 3, 32, 10

    def go():
        x = torch.randn(P * K * B)
        out = torch.zeros(P * B)
        needs_every_iteration[(P,)](x, out, K=K, B=B)
        return out, x
    probes, _ = _count_probes(monkeypatch)
    seq, bat = _both(go)
    assert probes == [0.0]  # the cut loop left ``second`` unbound
    assert _same(bat[0], seq[0]) and bat[1] == seq[1] == []
    (rec,) = bat[2]
    assert rec.engine == "batched" and not rec.fallback and rec.batches == 2  # 4 programs, then the rest
    x = bat[0][1].reshape(P, K, B)
    assert torch.allclose(bat[0][0].reshape(P, B), x[:, :2].sum(1) + x.sum(1))


@triton.jit
def writes_aside_after_one_iteration(x, out, aside, K: tl.constexpr, B: tl.constexpr):
    """``aside`` is written only where the loop ran once: by the probe, never by the launch."""
    pid = tl.program_id(0)
    r = tl.arange(0, B)
    acc = tl.zeros((B,), dtype=tl.float32)
    n = 0
    for k in range(K):
        acc += tl.load(x + (pid * K + k) * B + r)
        n += 1
    if n == 1:
        tl.store(aside + pid * B + r, acc)
    tl.store(out + pid * B + r, acc)


def test_what_only_the_probe_wrote_is_not_taken_for_written(monkeypatch):
    """The probe's writes are undone, and so is the mark of a storage written (which sends a host
    copy back to its device and drops the one value the device found)."""
    from tritonkit.check.launch.arguments import ArgMapper
    probes, _ = _count_probes(monkeypatch)
    flags = []
    copy_back = ArgMapper.copy_back

    def recorded(self):
        flags.append([hs.written for hs in self.space.storages.values()])
        return copy_back(self)
    monkeypatch.setattr(ArgMapper, "copy_back", recorded)
    P, K, B = 8, 3, 16
    x, out, aside = torch.randn(P * K * B), torch.zeros(P * B), torch.zeros(P * B)
    with tritonkit.checking() as s:
        writes_aside_after_one_iteration[(P,)](x, out, aside, K=K, B=B)
    assert not s.findings and len(probes) == 1 and probes[0] > 0
    assert torch.equal(aside, torch.zeros(P * B)) and torch.allclose(out, x.reshape(P, K, B).sum(1).reshape(-1))
    assert flags == [[False, True, False]]  # x read, out written, aside written only by the probe
