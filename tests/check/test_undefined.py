"""``undefined_value``: masked-off lanes of a load without ``other=`` are poisoned and tracked."""
from __future__ import annotations

import torch
import triton
import triton.language as tl

import tritonkit


@triton.jit
def row_sum(x_ptr, out_ptr, n, MODE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)  # LINE: load
    if MODE == "raw":
        s = tl.sum(x * 2.0, axis=0)  # LINE: sum
    elif MODE == "where":
        s = tl.sum(tl.where(m, x, 0.0), axis=0)
    else:
        s = tl.sum(tl.load(x_ptr + offs, mask=m, other=0.0), axis=0)
    tl.store(out_ptr, s)  # LINE: store


def test_a_reduction_over_undefined_lanes_is_reported_where_it_is_stored_with_the_load_line(line_of):
    x = torch.ones(100)
    out = torch.zeros(1)
    with tritonkit.checking() as s:
        row_sum[(1,)](x, out, 100, MODE="raw", BLOCK=128)
    (f,) = s.findings
    assert (f.kind, f.line, f.access, f.count) == ("undefined_value", line_of(row_sum, "store"), "store", 1)
    assert f"test_undefined.py:{line_of(row_sum, 'load')}" in f.message
    assert torch.isnan(out).all()  # poisoned: the GPU's garbage shows in the result, not a silent 0


def test_where_and_other_make_the_lanes_defined():
    x = torch.ones(100)
    out = torch.zeros(1)
    with tritonkit.checking() as s:
        row_sum[(1,)](x, out, 100, MODE="where", BLOCK=128)
        row_sum[(1,)](x, out, 100, MODE="other", BLOCK=128)
    assert not s.findings
    assert out.item() == 100.0


@triton.jit
def copy(x_ptr, y_ptr, n, STORE_ALL: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    y = (x + 1).to(tl.int32)
    if STORE_ALL:
        tl.store(y_ptr + offs, y)  # LINE: store_all
    else:
        tl.store(y_ptr + offs, y, mask=offs < n)


def test_store_masked_like_the_load_is_fine_and_an_unmasked_one_is_reported(line_of):
    x = torch.arange(100, dtype=torch.float32)
    y = torch.zeros(128, dtype=torch.int32)
    with tritonkit.checking() as s:
        copy[(1,)](x, y, 100, STORE_ALL=False, BLOCK=128)
    assert not s.findings and torch.equal(y[:100], torch.arange(1, 101, dtype=torch.int32))
    with tritonkit.checking() as s:
        copy[(1,)](x, y, 100, STORE_ALL=True, BLOCK=128)
    (f,) = s.findings
    assert (f.kind, f.line, f.count) == ("undefined_value", line_of(copy, "store_all"), 28)


@triton.jit
def small_matmul(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                 SAFE: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_mask = (rm[:, None] < M) & (rk[None, :] < K)
    b_mask = (rk[:, None] < K) & (rn[None, :] < N)
    if SAFE:
        a = tl.load(a_ptr + rm[:, None] * K + rk[None, :], mask=a_mask, other=0.0)
        b = tl.load(b_ptr + rk[:, None] * N + rn[None, :], mask=b_mask, other=0.0)
    else:
        a = tl.load(a_ptr + rm[:, None] * K + rk[None, :], mask=a_mask)
        b = tl.load(b_ptr + rk[:, None] * N + rn[None, :], mask=b_mask)
    c = tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], c, mask=(rm[:, None] < M) & (rn[None, :] < N))  # LINE: c


def test_dot_over_an_undefined_k_tail_reaches_the_store(line_of):
    M, N, K = 16, 16, 20  # K is not a multiple of BK = 32: the tail of K is masked off
    a, b = torch.randn(M, K), torch.randn(K, N)
    c = torch.zeros(M, N)
    with tritonkit.checking() as s:
        small_matmul[(1,)](a, b, c, M, N, K, BM=16, BN=16, BK=32, SAFE=True)
    assert not s.findings
    torch.testing.assert_close(c, a @ b, atol=1e-2, rtol=1e-2)  # tf32
    with tritonkit.checking() as s:
        small_matmul[(1,)](a, b, c, M, N, K, BM=16, BN=16, BK=32, SAFE=False)
    (f,) = s.findings
    assert (f.kind, f.line, f.count) == ("undefined_value", line_of(small_matmul, "c"), M * N)


def test_masked_rows_of_a_dot_do_not_count():
    """Rows of A that are masked off only make rows of C that the store masks off too."""
    M, N, K = 10, 16, 32
    a, b = torch.randn(M, K), torch.randn(K, N)
    c = torch.zeros(M, N)
    with tritonkit.checking() as s:
        small_matmul[(1,)](a, b, c, M, N, K, BM=16, BN=16, BK=32, SAFE=False)
    assert not s.findings
