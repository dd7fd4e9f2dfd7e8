"""``int_overflow``: integer arithmetic that overflows its type and then feeds an address."""
from __future__ import annotations

import operator

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import tritonkit
from tritonkit.check.checks.overflow import overflowing


def of_kind(session, kind):
    return [f for f in session.findings if f.kind == kind]


@triton.jit
def copy_rows(x, y, stride, n, B: tl.constexpr, WIDE: tl.constexpr):
    row = tl.program_id(0)
    if WIDE:
        row = row.to(tl.int64)
    start = row * stride  # LINE: row_times_stride
    cols = tl.arange(0, B)
    tl.store(y + start + cols, tl.load(x + start + cols, mask=cols < n), mask=cols < n)  # LINE: access


def test_row_times_stride_in_int32_on_a_large_row_index(line_of):
    """The product overflows for rows >= 2**31 / 40_000_000, i.e. 54; no 2 GiB tensor is needed to see it."""
    x, y = torch.randn(8, 100), torch.zeros(8, 100)
    with tritonkit.checking() as s:
        copy_rows[(60,)](x, y, 40_000_000, 100, 128, False)
    (f,) = of_kind(s, "int_overflow")
    assert (f.line, f.reason, f.arg) == (line_of(copy_rows, "row_times_stride"), "mul", "x")
    assert f.access == "load/store"
    assert f.program_ids == [[p] for p in range(54, 60)] and f.num_programs == 6
    (v,) = f.examples[0]["values"]
    assert (v["lhs"], v["rhs"], v["exact"]) == (54, 40_000_000, 54 * 40_000_000)
    assert v["wrapped"] == 54 * 40_000_000 - 2 ** 32
    assert "int32 mul overflows: 54 * 40000000 = 2160000000" in f.message
    # the wrapped addresses are out of bounds here as well: reported at the access
    assert {g.line for g in of_kind(s, "out_of_bounds")} == {line_of(copy_rows, "access")}


def test_the_same_product_in_int64_does_not_overflow():
    x, y = torch.randn(8, 100), torch.zeros(8, 100)
    with tritonkit.checking() as s:
        copy_rows[(60,)](x, y, 40_000_000, 100, 128, True)
    assert of_kind(s, "int_overflow") == [] and of_kind(s, "out_of_bounds")


@triton.jit
def hashed_bucket(x, out, n_buckets, B: tl.constexpr):
    i = tl.program_id(0) * B + tl.arange(0, B)
    h = i * 1103515245 + 12345  # LINE: hash
    tl.store(out + i, (h % 7).to(tl.float32) + tl.load(x + i))


def test_overflow_that_never_reaches_an_address_is_not_reported():
    x = torch.randn(256)
    out = torch.zeros(256)
    with tritonkit.checking() as s:
        hashed_bucket[(2,)](x, out, 7, 128)
    assert s.findings == []


@triton.jit
def narrowed_index(x, out, big_offset, B: tl.constexpr):
    i = tl.arange(0, B)
    idx = (big_offset + i).to(tl.int32)  # LINE: narrow
    tl.store(out + i, tl.load(x + idx, mask=i < 0, other=0.0) + tl.load(x + (idx - idx)))


def test_a_narrowing_cast_feeding_an_address_is_reported_where_every_lane_is_masked_off_nothing_is(line_of):
    x = torch.randn(16)
    out = torch.zeros(16)
    with tritonkit.checking() as s:
        narrowed_index[(1,)](x, out, 2 ** 32, 16)
    (f,) = of_kind(s, "int_overflow")
    assert (f.line, f.reason) == (line_of(narrowed_index, "narrow"), "cast")
    assert f.examples[0]["values"][0] == {"lane": [0], "value": 2 ** 32, "wrapped": 0}
    # the first load's mask lets no lane through: only the second load reports
    assert f.access == "load" and f.count == 16


@triton.jit
def annotated_stride(x, y, stride: tl.int64, n, B: tl.constexpr):
    start = tl.program_id(0) * stride
    cols = tl.arange(0, B)
    tl.store(y + start + cols, tl.load(x + start + cols, mask=cols < n), mask=cols < n)


def test_an_int64_annotation_on_the_stride_widens_the_product():
    x, y = torch.randn(8, 100), torch.zeros(8, 100)
    with tritonkit.checking(checks=["int_overflow"]) as s:
        annotated_stride[(60,)](x, y, 40_000_000, 100, 128)
    assert s.findings == []


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.int16])
def test_overflow_detection_matches_exact_integer_arithmetic(dtype):
    rng = np.random.default_rng(0)
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max, 2000, dtype=dtype, endpoint=True)
    b = rng.integers(info.min, info.max, 2000, dtype=dtype, endpoint=True)
    b[:50] = rng.integers(-3, 3, 50, dtype=dtype)  # small operands: mostly no overflow
    for op in (np.add, np.subtract, np.multiply):
        with np.errstate(all="ignore"):
            r = op(a, b)
        bad = overflowing(op, a, b, r)
        exact_op = {np.add: operator.add, np.subtract: operator.sub, np.multiply: operator.mul}[op]
        exact = [exact_op(int(x), int(y)) for x, y in zip(a, b)]
        want = np.array([not (info.min <= e <= info.max) for e in exact])
        got = np.zeros(len(a), bool) if bad is None else bad
        assert np.array_equal(got, want), op


@triton.jit
def gather_rows(idx_ptr, w_ptr, out_ptr, B: tl.constexpr):
    i = tl.program_id(0) * B + tl.arange(0, B)
    idx = tl.load(idx_ptr + i)
    tl.store(out_ptr + i, tl.load(w_ptr + idx))  # LINE: gather


@triton.jit
def store_far(out_ptr, B: tl.constexpr):
    tl.store(out_ptr + (tl.arange(0, B).to(tl.int64) + (1 << 62)), tl.zeros([B], tl.float32) + 5)  # LINE: far


@pytest.mark.parametrize("engine", ["auto", "sequential"])
def test_an_int64_offset_whose_byte_address_wraps_is_reported(line_of, engine):
    """``idx * 4`` bytes past 2**64 wraps to a small address on the GPU too, which then lands inside
    the tensor: only int_overflow can see it (the bounds check sees an in-bounds address)."""
    idx = torch.tensor([3, 5, 2 ** 62 + 7, -2 ** 62 + 9, 0, 1, 2, 3])
    w, out = torch.arange(16, dtype=torch.float32), torch.zeros(8)
    with tritonkit.checking(engine=engine) as s:
        gather_rows[(2,)](idx, w, out, B=4)
        store_far[(1,)](torch.zeros(16), B=16)
    got = sorted((f.line, f.arg, f.reason, f.count) for f in of_kind(s, "int_overflow"))
    assert got == sorted([(line_of(gather_rows, "gather"), "w_ptr", "mul", 2),
                          (line_of(store_far, "far"), "out_ptr", "mul", 16)])
    gather = next(f for f in s.findings if f.arg == "w_ptr")
    assert gather.program_ids == [[0]] and [v["lhs"] for v in gather.examples[0]["values"]] == [2 ** 62 + 7,
                                                                                              -2 ** 62 + 9]
    assert out.tolist()[:4] == [3.0, 5.0, 7.0, 9.0]  # what the GPU reads too: the address wrapped
    # offsets that fit are not reported, however large the tensor they could address
    with tritonkit.checking(engine=engine) as s2:
        gather_rows[(2,)](torch.tensor([0, 1, 2, 3, 15, 14, 13, 12]), w, out, B=4)
    assert not s2.findings


@triton.jit
def gather_scaled(idx_ptr, w_ptr, out_ptr, SCALE: tl.constexpr, B: tl.constexpr):
    i = tl.arange(0, B)
    idx = tl.load(idx_ptr + i) * SCALE  # LINE: scale
    tl.store(out_ptr + i, tl.load(w_ptr + idx))  # LINE: wraps


@pytest.mark.parametrize("engine", ["auto", "sequential"])
def test_a_byte_address_that_wraps_in_one_lane_is_reported_when_another_lane_overflowed_earlier(engine, line_of):
    """Lane 0's index overflowed at ``* SCALE`` (an int64 multiply); lane 2's index fits in int64 but
    its byte offset (``idx * 4``) wraps at the load: both lanes are reported, neither silently reads
    the wrong element."""
    idx = torch.tensor([2 ** 62, 1, 2 ** 61 + 3, 0])
    w, out = torch.arange(16, dtype=torch.float32), torch.zeros(4)
    with tritonkit.checking(engine=engine) as s:
        gather_scaled[(1,)](idx, w, out, SCALE=2, B=4)
    found = of_kind(s, "int_overflow")
    assert sum(f.count for f in found) == 2
    assert {f.line for f in found} <= {line_of(gather_scaled, "scale"), line_of(gather_scaled, "wraps")}
