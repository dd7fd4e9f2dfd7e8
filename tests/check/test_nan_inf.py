"""``nan_inf`` (``nan=True`` / ``--nan``): where a NaN/Inf that reaches memory was made."""
from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

import tritonkit


@triton.jit
def softmax(x, y, n, B: tl.constexpr, SUBTRACT_MAX: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, B)
    m = cols < n
    v = tl.load(x + row * n + cols, mask=m, other=-float("inf"))
    if SUBTRACT_MAX:
        v = v - tl.max(v, axis=0)
    e = tl.exp(v)  # LINE: exp
    tl.store(y + row * n + cols, e / tl.sum(e, axis=0), mask=m)  # LINE: store


def large_logits():
    x = torch.randn(4, 100)
    x[1, 7] = 95.0  # exp(95) > 3.4e38: inf in float32
    x[3, 2] = 120.0
    return x


def test_softmax_without_max_subtraction_on_large_logits(line_of):
    x = large_logits()
    with tritonkit.checking(nan=True) as s:
        y = torch.empty_like(x)
        softmax[(4,)](x, y, 100, 128, False)
    (f,) = s.findings
    assert (f.kind, f.line, f.reason, f.access) == ("nan_inf", line_of(softmax, "exp"), "produced", "store")
    assert f.program_ids == [[1], [3]]  # the rows with a large logit
    ex = f.examples[0]
    assert ex["program_id"] == [1] and ex["lane"] == [7] and ex["inputs"] == [95.0] and ex["result"] == float("inf")
    assert ex["stored_at"].endswith(f":{line_of(softmax, 'store')}")
    assert f.message.startswith("exp(95.0) = inf")
    assert torch.isnan(y[1]).any()  # what the user sees: NaN rows, far from the exp


def test_the_check_is_off_by_default_and_the_correct_softmax_gives_nothing():
    x = large_logits()
    with tritonkit.checking() as s:
        softmax[(4,)](x, torch.empty_like(x), 100, 128, False)
    assert s.findings == []
    with tritonkit.checking(nan=True) as s:
        y = torch.empty_like(x)
        softmax[(4,)](x, y, 100, 128, True)  # other=-inf for the max: -inf on purpose, never reported
    assert s.findings == []
    torch.testing.assert_close(y, torch.softmax(x, dim=-1))


@triton.jit
def scale(x, y, n, B: tl.constexpr):
    offs = tl.program_id(0) * B + tl.arange(0, B)
    m = offs < n
    v = tl.load(x + offs, mask=m, other=0.0)  # LINE: load
    r = 1.0 / v  # LINE: reciprocal
    tl.store(y + offs, tl.where(m, v * 2.0, r), mask=m)  # LINE: scale_store


def test_nan_already_in_the_input_is_reported_at_its_load_as_such(line_of):
    x = torch.ones(100)
    x[42] = float("nan")
    with tritonkit.checking(nan=True) as s:
        scale[(1,)](x, torch.zeros(100), 100, 128)
    (f,) = s.findings
    assert (f.kind, f.line, f.reason) == ("nan_inf", line_of(scale, "load"), "loaded")
    assert f.count == 1 and "x[42]" in f.message and "already holds nan" in f.message


def test_inf_made_in_masked_off_lanes_that_are_never_stored_is_not_reported():
    # 1/v is inf in the 28 masked-off lanes (other=0.0), but tl.where keeps v * 2 there and the store
    # masks them off anyway
    with tritonkit.checking(nan=True) as s:
        scale[(1,)](torch.ones(100), torch.zeros(100), 100, 128)
    assert s.findings == []


@triton.jit
def to_half(x, y, n, B: tl.constexpr):
    offs = tl.arange(0, B)
    m = offs < n
    h = tl.load(x + offs, mask=m).to(tl.float16)  # LINE: cast
    tl.store(y + offs, h * 0.0 + h, mask=m)


def test_a_float16_cast_that_overflows_is_an_origin(line_of):
    x = torch.ones(16)
    x[5] = 70000.0
    with tritonkit.checking(nan=True) as s:
        to_half[(1,)](x, torch.zeros(16, dtype=torch.float16), 16, 16)
    (f,) = s.findings
    assert (f.line, f.reason) == (line_of(to_half, "cast"), "produced")
    assert f.examples[0]["inputs"] == [70000.0] and f.examples[0]["lane"] == [5]
    # h * 0.0 is NaN at that lane: made from an inf, so the origin stays the cast


@triton.jit
def row_total(x, out, B: tl.constexpr):
    v = tl.load(x + tl.arange(0, B))
    tl.store(out, tl.sum(v, axis=0))  # LINE: sum


def test_a_sum_of_finite_values_that_overflows_is_an_origin(line_of):
    x = torch.full((64,), 1e37)
    with tritonkit.checking(nan=True) as s:
        row_total[(1,)](x, torch.zeros(1), 64)
    (f,) = s.findings
    assert (f.line, f.reason) == (line_of(row_total, "sum"), "produced")
    assert "sum of finite values is inf" in f.message


@triton.jit
def square(x, y, B: tl.constexpr):
    offs = tl.arange(0, B)
    v = tl.load(x + offs)
    tl.store(y + offs, v * v)  # LINE: square


@pytest.mark.parametrize("dtype,big", [(torch.bfloat16, 2e19), (torch.float16, 300.0)])
def test_low_precision_arithmetic_overflows_at_its_own_range(line_of, dtype, big):
    """300 * 300 = 90000 is past float16's 65504; 2e19 squared is past bfloat16's 3.4e38."""
    x = torch.ones(16, dtype=dtype)
    x[9] = big
    with tritonkit.checking(nan=True) as s:
        square[(1,)](x, torch.zeros(16, dtype=dtype), 16)
    (f,) = s.findings
    assert (f.kind, f.line, f.reason) == ("nan_inf", line_of(square, "square"), "produced")
    assert f.examples[0]["lane"] == [9] and f.examples[0]["inputs"] == [float(x[9]), float(x[9])]
