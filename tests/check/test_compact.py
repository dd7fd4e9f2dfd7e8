"""Divergent loops run compacted (finished programs leave the batch) against one program at a time.

Each kernel runs three ways: one program at a time (the oracle), batched with compaction, and
batched with the finished programs masked off / split by trip count (``simt.COMPACT = False``);
outputs must be identical bit for bit and findings identical.
"""
import contextlib
import io

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import tritonkit
from tritonkit.check.interp import compact, rewrite, simt


def _run(fn, engine, compaction=True):
    """(outputs, findings, launch records, stdout, narrowings: times a loop dropped finished programs)."""
    torch.manual_seed(0)
    old, simt.COMPACT = simt.COMPACT, compaction
    narrow, calls = compact.Compaction.narrow, []

    def counted(self, *args):
        calls.append(1)
        return narrow(self, *args)
    compact.Compaction.narrow = counted
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            with tritonkit.checking(engine=engine) as s:
                result = fn()
    finally:
        simt.COMPACT = old
        compact.Compaction.narrow = narrow
    findings = [{k: v for k, v in f.to_dict().items() if k != "launches"} for f in s.findings]
    return result, findings, s.launches, out.getvalue(), len(calls)


def _three(fn):
    """(one at a time, compacted, masked) runs of ``fn``; asserts the three agree bit for bit."""
    seq, com, mas = _run(fn, "sequential"), _run(fn, "auto"), _run(fn, "auto", compaction=False)
    for other in (com, mas):
        for a, b in zip(seq[0], other[0]):
            assert a.dtype == b.dtype and torch.equal(a.nan_to_num(), b.nan_to_num())
        assert other[1] == seq[1] and other[3] == seq[3]
    assert mas[4] == 0
    return seq, com, mas


@triton.jit
def attention_rows(q_ptr, k_ptr, v_ptr, o_ptr, trips_ptr, last_ptr, D: tl.constexpr, BLOCK: tl.constexpr,
                   PER_START: tl.constexpr):
    """An online softmax over a per-program number of key blocks (``trips[pid]``): loop-carried
    blocks, read-only blocks and pointers, temporaries assigned in the body, an fma contracted from
    a product made before the loop, (``PER_START``) a start that differs per program, and the loop
    index's last value stored after the loop."""
    pid = tl.program_id(0)
    rows = tl.arange(0, BLOCK)
    cols = tl.arange(0, D)
    q = tl.load(q_ptr + pid * BLOCK * D + rows[:, None] * D + cols[None, :])
    scale = tl.load(trips_ptr + pid).to(tl.float32) * 0.5 + 0.25
    m_i = tl.full((BLOCK,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK,), dtype=tl.float32)
    acc = tl.zeros((BLOCK, D), dtype=tl.float32)
    bias = q * scale  # a product the loop adds to: contracted into an fma
    n = tl.load(trips_ptr + pid)
    start = pid % 3 if PER_START else 0
    for j in range(start, start + n):
        k = tl.load(k_ptr + j * BLOCK * D + rows[None, :] * D + cols[:, None])
        s = tl.dot(q, k, input_precision="ieee")
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        p = tl.exp(s - m_new[:, None])
        alpha = tl.exp(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_ptr + j * BLOCK * D + rows[:, None] * D + cols[None, :])
        acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee") + bias
        m_i = m_new
    tl.store(o_ptr + pid * BLOCK * D + rows[:, None] * D + cols[None, :], acc / l_i[:, None])
    tl.store(last_ptr + pid, j)


@pytest.mark.parametrize("order", ["increasing", "shuffled"])
@pytest.mark.parametrize("per_start", [False, True])
def test_an_attention_loop_runs_compacted_with_the_results_of_one_program_at_a_time(order, per_start):
    """Trip counts that grow with the program id leave contiguous ranges (views); shuffled ones
    leave scattered programs (copies): both give one-at-a-time's outputs, in one batch, not split."""
    P, BLOCK, D = 12, 16, 16
    trips = torch.arange(1, P + 1, dtype=torch.int32)
    if order == "shuffled":
        trips = trips[torch.randperm(P, generator=torch.Generator().manual_seed(3))]

    def go():
        q = torch.randn(P, BLOCK, D)
        k, v = torch.randn(P + 3, BLOCK, D), torch.randn(P + 3, BLOCK, D)
        o, last = torch.empty(P, BLOCK, D), torch.full((P,), -1, dtype=torch.int32)
        attention_rows[(P,)](q, k, v, o, trips, last, D=D, BLOCK=BLOCK, PER_START=per_start)
        return o, last
    seq, com, mas = _three(go)
    (rec,) = com[2]
    # one loop per batch, none split (a first launch's probe is undone, its loop not counted)
    assert rec.engine == "batched" and rec.fallback is None and rec.groups == 0
    assert rec.masked_loops == rec.batches and rec.programs == P and com[4] >= P - 2
    # each program's own last j (start + trips - 1), not the longest program's
    want = [(p % 3 if per_start else 0) + int(trips[p]) - 1 for p in range(P)]
    assert com[0][1].tolist() == want
    assert np.isfinite(com[0][0].numpy()).all()


@triton.jit
def carried_python_values(x_ptr, out_ptr, n_ptr, B: tl.constexpr):
    """A Python int and float carried through a divergent loop, and a name first bound in it."""
    pid = tl.program_id(0)
    count = 0
    total = 0.0
    offs = tl.arange(0, B)
    for i in range(tl.load(n_ptr + pid)):
        count += 1
        total = total + 0.5
        seen = tl.load(x_ptr + i * B + offs)
    tl.store(out_ptr + pid * (B + 2) + offs, seen)
    tl.store(out_ptr + pid * (B + 2) + B, count * 1.0)
    tl.store(out_ptr + pid * (B + 2) + B + 1, total)


def test_python_values_carried_through_a_compacted_loop_become_each_programs_own():
    P, B = 6, 8
    n = torch.tensor([3, 1, 5, 2, 5, 4], dtype=torch.int32)

    def go():
        x = torch.randn(8, B)
        out = torch.zeros(P, B + 2)
        carried_python_values[(P,)](x, out, n, B=B)
        return out, x
    seq, com, _ = _three(go)
    out, x = com[0]
    assert out[:, B].tolist() == [float(t) for t in n] and out[:, B + 1].tolist() == [0.5 * float(t) for t in n]
    assert torch.equal(out[:, :B], x[n.long() - 1])  # each program's last loaded row
    (rec,) = com[2]
    assert rec.groups == 0 and rec.masked_loops == rec.batches and com[4] >= 3


@triton.jit
def branch_inside_a_divergent_loop(x_ptr, out_ptr, B: tl.constexpr):
    """An ``if`` on a value that differs between the programs still iterating, and a nested loop
    whose trip count differs too (by program and by outer iteration)."""
    pid = tl.program_id(0)
    offs = tl.arange(0, B)
    acc = tl.zeros((B,), dtype=tl.float32)
    for i in range(pid + 1):
        if (pid + i) % 3 == 0:
            acc += tl.load(x_ptr + i * B + offs)
        for j in range(i + pid % 2):
            acc = acc * 0.5 + j
    tl.store(out_ptr + pid * B + offs, acc)


def test_an_if_and_a_nested_loop_that_diverge_inside_a_compacted_loop():
    P, B = 7, 8

    def go():
        x = torch.randn(P, B)
        out = torch.zeros(P, B)
        branch_inside_a_divergent_loop[(P,)](x, out, B=B)
        return (out,)
    seq, com, _ = _three(go)
    (rec,) = com[2]
    assert rec.engine == "batched" and rec.fallback is None and rec.groups == 0 and rec.masked_branches >= 1
    assert com[4] >= 1


@triton.jit
def loop_over_undefined_lanes(x_ptr, out_ptr, n, B: tl.constexpr):
    """A value with undefined lanes (a masked load without ``other``) carried into a divergent loop:
    the loop cannot be compacted (lane taints) and the batch splits by trip count instead."""
    pid = tl.program_id(0)
    offs = tl.arange(0, B)
    v = tl.load(x_ptr + offs, mask=offs < n)
    acc = tl.zeros((B,), dtype=tl.float32)
    for i in range(pid + 1):
        acc += v
    tl.store(out_ptr + pid * B + offs, acc)


def test_a_tainted_value_in_a_divergent_loop_splits_the_batch_and_keeps_the_findings():
    P, B = 5, 8

    def go():
        x = torch.randn(B)
        out = torch.zeros(P, B)
        loop_over_undefined_lanes[(P,)](x, out, 5, B=B)
        return (out,)
    seq, com, _ = _three(go)
    assert any(f["kind"] == "undefined_value" for f in com[1])
    (rec,) = com[2]
    assert rec.engine == "batched" and rec.fallback is None and rec.groups >= 1


def test_rows_of_a_value_are_views_where_they_can_be():
    a = np.arange(6 * 4 * 3, dtype=np.float32).reshape(6, 4, 3)
    part = compact._sub(a, np.array([2, 3, 4]))
    assert np.shares_memory(part, a) and np.array_equal(part, a[2:5])
    scattered = compact._sub(a, np.array([0, 5]))
    assert np.array_equal(scattered, a[[0, 5]])
    splat = np.broadcast_to(np.arange(6, dtype=np.float32)[:, None, None], (6, 4, 3))
    got = compact._sub(splat, np.array([1, 4]))
    assert got.strides[1:] == (0, 0) and np.array_equal(got, splat[[1, 4]])  # stays a broadcast
    same = np.broadcast_to(np.ones((1, 4), np.float32), (6, 4))
    assert compact._sub(same, np.array([0, 3])).strides[0] == 0


def test_a_value_built_back_from_rows_covers_every_program():
    ty = tl.block_type(tl.float32, [2])
    parts = [(np.array([1, 3]), compact.narrow_value(_bat(np.arange(8, dtype=np.float32).reshape(4, 2)),
                                                     np.array([1, 3]), 4)),
             (np.array([0]), compact.UNSET),
             (np.array([2]), _bat(np.full((1, 2), 9.0, np.float32)))]
    got = compact.build(parts, 4)
    assert got.type == ty and got.handle.bat
    assert got.handle.data.tolist() == [[0, 0], [2, 3], [9, 9], [6, 7]]  # never bound: zeros
    assert compact.build([(np.array([0, 1]), 3), (np.array([2]), 3)], 3) == 3
    ints = compact.build([(np.array([0, 2]), 3), (np.array([1]), 4)], 3)
    assert ints.dtype == tl.int32 and ints.handle.data.tolist() == [3, 4, 3]
    with pytest.raises(compact.CannotCompact):
        compact.build([(np.array([0]), "a"), (np.array([1]), "b")], 2)


def _bat(data):
    from tritonkit.check.interp.batched_ops import bat_tensor
    return bat_tensor(data, tl.float32)


def test_a_variable_is_narrowed_unless_the_body_assigns_it_before_reading_it():
    import ast
    body = ast.parse("a += 1\na = 2\nb = c\nif d:\n    e = 1\ne = 3\nf = f + 1\n").body
    dead = rewrite._dead_on_entry(body, ["a", "b", "c", "d", "e", "f", "g"])
    # a: read by +=; b: assigned first; c, d: read; e: assigned (under an if, then at the top level)
    # before any read; f: read by its own assignment; g: not in the body
    assert dead == [False, True, False, False, True, False, False]


@triton.jit
def staged_attention_inner(q_ptr, k_desc, v_ptr, o_ptr, N_CTX, D: tl.constexpr, BLOCK: tl.constexpr,
                           STAGE: tl.constexpr):
    """The shape of the fused-attention tutorial's inner loops: a bound per program (causal), keys
    through a host tensor descriptor (an object the loop reads, not a value), values through a
    pointer block advanced in the loop (``ptrs += ...``), a loop-carried offset, ``tl.multiple_of``
    on the loop index, ``-=`` on a block, and a name assigned only under a compile-time branch."""
    start_m = tl.program_id(0)
    rows = tl.arange(0, BLOCK)
    cols = tl.arange(0, D)
    offs_m = start_m * BLOCK + rows
    q = tl.load(q_ptr + offs_m[:, None] * D + cols[None, :])
    m_i = tl.zeros([BLOCK], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK], dtype=tl.float32) + 1.0
    acc = tl.zeros([BLOCK, D], dtype=tl.float32)
    v_ptrs = v_ptr + rows[:, None] * D + cols[None, :]
    offset_k = 0
    for start_n in range(0, (start_m + 1) * BLOCK, BLOCK):
        start_n = tl.multiple_of(start_n, BLOCK)
        k = k_desc.load([offset_k, 0]).T
        qk = tl.dot(q, k, input_precision="ieee")
        if STAGE == 2:
            mask = offs_m[:, None] >= (start_n + rows[None, :])
            qk = qk + tl.where(mask, 0, -1.0e6)
        m_ij = tl.maximum(m_i, tl.max(qk, 1))
        qk -= m_ij[:, None]
        p = tl.math.exp2(qk)
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = tl.dot(p, tl.load(v_ptrs), acc * alpha[:, None], input_precision="ieee")
        m_i = m_ij
        v_ptrs += BLOCK * D
        offset_k += BLOCK
    tl.store(o_ptr + offs_m[:, None] * D + cols[None, :], acc / l_i[:, None])


@pytest.mark.parametrize("stage", [1, 2])
def test_a_tutorial_shaped_attention_loop_runs_compacted(stage):
    from triton.tools.tensor_descriptor import TensorDescriptor
    P, BLOCK, D = 6, 16, 16

    def go():
        q, k, v = (torch.randn(P * BLOCK, D) for _ in range(3))
        o = torch.zeros(P * BLOCK, D)
        desc = TensorDescriptor(k, list(k.shape), list(k.stride()), [BLOCK, D])
        staged_attention_inner[(P,)](q, desc, v, o, P * BLOCK, D=D, BLOCK=BLOCK, STAGE=stage)
        return (o,)
    seq, com, _ = _three(go)
    (rec,) = com[2]
    assert rec.engine == "batched" and rec.fallback is None and rec.groups == 0 and com[4] >= P - 2
    assert torch.isfinite(com[0][0]).all()


@triton.jit
def sum_from_a_python_zero(x_ptr, out_ptr, n_ptr, B: tl.constexpr):
    """``total = 0.0`` before the loop, a kernel value after its first iteration: a program that ran
    none keeps the Python number."""
    pid = tl.program_id(0)
    total = 0.0
    for i in range(tl.load(n_ptr + pid)):
        total += tl.sum(tl.load(x_ptr + i * B + tl.arange(0, B)), axis=0)
    tl.store(out_ptr + pid, total)


def test_a_python_number_that_becomes_a_kernel_value_in_a_compacted_loop():
    P, B = 5, 8
    n = torch.tensor([2, 0, 3, 1, 3], dtype=torch.int32)

    def go():
        x = torch.randn(4, B)
        out = torch.full((P,), -1.0)
        sum_from_a_python_zero[(P,)](x, out, n, B=B)
        return out, x
    seq, com, _ = _three(go)
    out, x = com[0]
    assert out[1].item() == 0.0 and com[4] >= 1
    (rec,) = com[2]
    assert rec.groups == 0
