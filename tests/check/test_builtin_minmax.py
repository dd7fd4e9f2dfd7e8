"""``min``/``max`` in a kernel mean what Triton's compiler makes of them: ``tl.minimum``/``tl.maximum``
over kernel values (one promoted dtype, NaN not propagated), Python's builtins over constexprs. Both
engines; the batched engine does not split a batch on them."""
from __future__ import annotations

import math

import pytest
import torch
import triton
import triton.language as tl

import tritonkit


@triton.jit
def clamped_row_sums(x, out, n_rows, n_cols, rows_per_program, B: tl.constexpr):
    """Program ``p`` sums rows ``[p * rows_per_program, min((p + 1) * rows_per_program, n_rows))``:
    the persistent-row pattern of Liger-Kernel's and Triton's normalization backward kernels."""
    pid = tl.program_id(0).to(tl.int64)
    row_end = min((pid + 1) * rows_per_program, n_rows)
    cols = tl.arange(0, B)
    acc = tl.zeros((B,), dtype=tl.float32)
    for r in range(pid * rows_per_program, row_end):
        acc += tl.load(x + r * n_cols + cols, mask=cols < n_cols, other=0.0)
    tl.store(out + pid * B + cols, acc)


@triton.jit
def scaled_min(out, n, big):
    """``n`` is int32, ``big`` int64: Triton's ``min`` gives int64, so the product does not overflow."""
    v = min(n, big)
    tl.store(out, v * 100000)


@triton.jit
def min_max_of_nan(x, out):
    a = tl.load(x)
    tl.store(out, min(a, 0.5))
    tl.store(out + 1, max(a, 0.5))
    tl.store(out + 2, min(0.5, a))
    tl.store(out + 3, max(a, 2.0, 1.0))
    tl.store(out + 4, min(tl.load(x + 1), 3.0, 2.0))


@triton.jit
def arange_to_min(out, B: tl.constexpr):
    cols = tl.arange(0, min(B, 16))  # constexprs: Python's min, still a constexpr
    tl.store(out + cols, cols + max(B, 1))


@pytest.mark.parametrize("engine", ["sequential", "auto"])
def test_a_clamped_row_range_runs_as_one_batch_with_the_right_sums(engine):
    torch.manual_seed(0)
    n_rows, n_cols, programs = 10, 24, 4
    per = math.ceil(n_rows / programs)  # 3: the last program has one row
    x = torch.randn(n_rows, n_cols)
    out = torch.zeros(programs, 32)
    with tritonkit.checking(engine=engine) as s:
        clamped_row_sums[(programs,)](x, out, n_rows, n_cols, per, B=32)
    assert s.findings == []
    (rec,) = s.launches
    if engine == "auto":
        assert rec.engine == "batched" and rec.fallback is None and rec.groups == 0
    ref = torch.zeros(programs, 32)
    for p in range(programs):
        ref[p, :n_cols] = x[p * per:min((p + 1) * per, n_rows)].sum(0)
    torch.testing.assert_close(out, ref)


@pytest.mark.parametrize("engine", ["sequential", "auto"])
def test_min_of_int32_and_int64_is_int64_as_on_the_gpu(engine):
    out = torch.zeros(1, dtype=torch.int64)
    with tritonkit.checking(engine=engine) as s:
        scaled_min[(1,)](out, 100000, 2**40)
    assert [f.kind for f in s.findings] == []  # Python's min would give the int32 n, whose product overflows
    assert out.item() == 100000 * 100000


@pytest.mark.parametrize("engine", ["sequential", "auto"])
def test_min_and_max_of_a_nan_give_the_other_operand_as_on_the_gpu(engine):
    x = torch.tensor([float("nan"), 5.0])
    out = torch.full((5,), -1.0)
    with tritonkit.checking(engine=engine) as s:
        min_max_of_nan[(1,)](x, out)
    assert s.findings == []
    assert out.tolist() == [0.5, 0.5, 0.5, 2.0, 2.0]


@pytest.mark.parametrize("engine", ["sequential", "auto"])
def test_min_and_max_of_constexprs_stay_constexprs(engine):
    out = torch.zeros(64, dtype=torch.int32)
    with tritonkit.checking(engine=engine) as s:
        arange_to_min[(1,)](out, B=64)
    assert s.findings == []
    assert out[:16].tolist() == list(range(64, 80)) and not out[16:].any()
