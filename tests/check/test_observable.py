"""Undefined and uninitialized values are reported where they become observable (a stored element,
an atomic, an address or mask, a branch, a print, an assert), tracked per lane through scans,
reductions, ``tl.dot``, ``tl.where`` and loop-carried values: a value polluted only in lanes that
are discarded later gives no finding, under both engines."""
from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

import tritonkit

ENGINES = ("sequential", "auto")


def _findings(engine, fn):
    with tritonkit.checking(engine=engine) as s:
        fn()
    return s.findings


@triton.jit
def prefix_sum(x_ptr, y_ptr, n, BLOCK: tl.constexpr, REVERSE: tl.constexpr, STORE_ALL: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    m = pid * BLOCK + offs < n
    x = tl.load(x_ptr + pid * BLOCK + offs, mask=m)  # LINE: load
    y = tl.cumsum(x, axis=0, reverse=REVERSE)
    if STORE_ALL:
        tl.store(y_ptr + pid * BLOCK + offs, y)  # LINE: store_all
    else:
        tl.store(y_ptr + pid * BLOCK + offs, y, mask=m)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_prefix_sum_over_a_tail_masked_block_stored_with_the_same_mask_is_clean(engine):
    n, B = 100, 64
    x = torch.arange(n, dtype=torch.float32)
    y = torch.zeros(128)
    assert not _findings(engine, lambda: prefix_sum[(2,)](x, y, n, BLOCK=B, REVERSE=False, STORE_ALL=False))
    ref = torch.cat([torch.cumsum(x[:64], 0), torch.cumsum(x[64:], 0)])
    torch.testing.assert_close(y[:n], ref)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_reverse_scan_spreads_the_tail_to_every_lane_before_it(engine, line_of):
    """A reverse cumsum's lane i sees lanes >= i: the undefined tail reaches every stored lane of the
    last block, and none of the full first block."""
    n, B = 100, 64
    x = torch.arange(n, dtype=torch.float32)
    y = torch.zeros(128)
    (f,) = _findings(engine, lambda: prefix_sum[(2,)](x, y, n, BLOCK=B, REVERSE=True, STORE_ALL=False))
    assert f.kind == "undefined_value" and f.count == n - B
    assert f.program_ids == [[1]]
    assert f"test_observable.py:{line_of(prefix_sum, 'load')}" in f.message


@pytest.mark.parametrize("engine", ENGINES)
def test_a_scan_stored_unmasked_reports_the_tail_lanes_only(engine, line_of):
    n, B = 100, 64
    x = torch.arange(n, dtype=torch.float32)
    y = torch.zeros(128)
    (f,) = _findings(engine, lambda: prefix_sum[(2,)](x, y, n, BLOCK=B, REVERSE=False, STORE_ALL=True))
    assert (f.line, f.count, f.program_ids) == (line_of(prefix_sum, "store_all"), 128 - n, [[1]])


@triton.jit
def running_sum(x_ptr, out_ptr, n, BLOCK: tl.constexpr, USE_AFTER: tl.constexpr):
    acc = 0.0
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n)  # LINE: load
        tl.store(out_ptr + offs, x * 2.0, mask=offs < n)
        acc += tl.sum(x, axis=0)
    if USE_AFTER:
        tl.store(out_ptr + n, acc)  # LINE: use


@pytest.mark.parametrize("engine", ENGINES)
def test_a_polluted_loop_carried_sum_that_is_never_read_is_clean(engine):
    n = 100
    x = torch.ones(n)
    out = torch.zeros(n + 1)
    assert not _findings(engine, lambda: running_sum[(1,)](x, out, n, BLOCK=32, USE_AFTER=False))
    assert torch.equal(out[:n], 2 * x)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_polluted_loop_carried_sum_that_is_stored_is_reported(engine, line_of):
    n = 100
    x = torch.ones(n)
    out = torch.zeros(n + 1)
    (f,) = _findings(engine, lambda: running_sum[(1,)](x, out, n, BLOCK=32, USE_AFTER=True))
    assert (f.kind, f.line) == ("undefined_value", line_of(running_sum, "use"))
    assert f"test_observable.py:{line_of(running_sum, 'load')}" in f.message


@triton.jit
def row_norms(x_ptr, y_ptr, n_rows, n_cols, BR: tl.constexpr, BC: tl.constexpr, ROW_MASK_ON_STORE: tl.constexpr):
    rows = tl.program_id(0) * BR + tl.arange(0, BR)
    cols = tl.arange(0, BC)
    rmask = rows < n_rows
    x = tl.load(x_ptr + rows[:, None] * n_cols + cols[None, :], mask=rmask[:, None])  # rows only
    ss = tl.sum(x * x, axis=1)
    scale = 1.0 / tl.sqrt(ss + 1e-6)
    y = x * scale[:, None]
    if ROW_MASK_ON_STORE:
        tl.store(y_ptr + rows[:, None] * n_cols + cols[None, :], y, mask=rmask[:, None])
    else:
        tl.store(y_ptr + rows[:, None] * n_cols + cols[None, :], y, mask=cols[None, :] < n_cols)  # LINE: store


@pytest.mark.parametrize("engine", ENGINES)
def test_undefined_rows_reduced_along_columns_stay_in_their_rows(engine):
    n_rows, n_cols = 10, 16
    x = torch.randn(n_rows, n_cols)
    y = torch.zeros(16, n_cols)
    assert not _findings(engine, lambda: row_norms[(1,)](x, y, n_rows, n_cols, BR=16, BC=16, ROW_MASK_ON_STORE=True))
    torch.testing.assert_close(y[:n_rows], x / torch.sqrt((x * x).sum(1, keepdim=True) + 1e-6))


@pytest.mark.parametrize("engine", ENGINES)
def test_undefined_rows_stored_without_the_row_mask_are_reported_per_row(engine, line_of):
    n_rows, n_cols = 10, 16
    x = torch.randn(n_rows, n_cols)
    y = torch.zeros(16, n_cols)
    (f,) = _findings(engine, lambda: row_norms[(1,)](x, y, n_rows, n_cols, BR=16, BC=16, ROW_MASK_ON_STORE=False))
    assert (f.line, f.count) == (line_of(row_norms, "store"), (16 - n_rows) * n_cols)


@triton.jit
def observers(x_ptr, out_ptr, n, HOW: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    s = tl.max(x, axis=0)
    if HOW == "branch":
        if s > 0:  # LINE: branch
            tl.store(out_ptr, 1.0)
    elif HOW == "print":
        tl.device_print("s", s)  # LINE: print
    elif HOW == "mask":
        tl.store(out_ptr + offs, 1.0, mask=x > 0)  # LINE: mask
    elif HOW == "address":
        tl.store(out_ptr + s.to(tl.int32), 1.0)  # LINE: address
    elif HOW == "assert":
        tl.device_assert(s < 1e30, "small")  # LINE: assert
    elif HOW == "where":
        tl.store(out_ptr + offs, tl.where(offs < n, x, 0.0))


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("how", ["branch", "print", "mask", "address", "assert"])
def test_a_reduction_of_undefined_lanes_is_reported_where_it_decides_something(engine, how, line_of, capfd):
    x = torch.ones(100)
    out = torch.zeros(128)
    found = _findings(engine, lambda: observers[(1,)](x, out, 100, HOW=how, BLOCK=128))
    assert [(f.kind, f.line) for f in found] == [("undefined_value", line_of(observers, how))]


@pytest.mark.parametrize("engine", ENGINES)
def test_where_selecting_the_defined_lanes_is_clean(engine):
    x = torch.ones(100)
    out = torch.zeros(128)
    assert not _findings(engine, lambda: observers[(1,)](x, out, 100, HOW="where", BLOCK=128))
    assert out[:100].eq(1).all() and out[100:].eq(0).all()


@triton.jit
def maybe_uses(buf_ptr, x_ptr, out_ptr, n, USE: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    stale = tl.load(buf_ptr + offs, mask=m, other=0.0)  # LINE: stale
    x = tl.load(x_ptr + offs, mask=m, other=0.0)
    if USE == "none":
        y = x
    elif USE == "sum":
        y = x + tl.sum(stale, axis=0)
    elif USE == "where":  # only lanes >= n, which the store masks off, would take the stale value
        y = tl.where(m, x, stale)
    else:  # "branch": the stale value decides whether the program stores
        y = x
        if tl.max(stale, axis=0) > 0:
            y = x * 2
    tl.store(out_ptr + offs, y, mask=m)  # LINE: store


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("use", ["none", "where"])
def test_an_uninitialized_load_whose_value_is_never_used_is_clean(engine, use):
    n = 200
    x = torch.randn(n)
    out = torch.zeros(n)

    def run():
        buf = torch.empty(n)  # tracked: nothing writes it
        maybe_uses[(4,)](buf, x, out, n, USE=use, BLOCK=64)
    assert not _findings(engine, run)
    assert torch.equal(out, x)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("use", ["sum", "branch"])
def test_an_uninitialized_load_is_reported_at_its_line_once_its_value_is_used(engine, use, line_of):
    n = 200
    x = torch.randn(n)
    out = torch.zeros(n)

    def run():
        buf = torch.empty(n)
        maybe_uses[(4,)](buf, x, out, n, USE=use, BLOCK=64)
    (f,) = _findings(engine, run)
    assert (f.kind, f.line, f.arg) == ("uninitialized_read", line_of(maybe_uses, "stale"), "buf_ptr")
    assert sorted(f.program_ids) == [[0], [1], [2], [3]]
    assert f.count == n
    where = "store" if use == "sum" else "branch condition"
    assert f"reaches the {where} at test_observable.py:" in f.message


@triton.jit
def shared_row(buf_ptr, x_ptr, out_ptr, USE: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    w = tl.load(buf_ptr + offs)  # the same elements in every program: loaded once for a batch
    x = tl.load(x_ptr + pid * BLOCK + offs)
    if USE:
        x = x * w
    tl.store(out_ptr + pid * BLOCK + offs, x)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_load_every_program_shares_is_held_for_each_program(engine):
    x = torch.randn(8 * 32)
    out = torch.zeros(8 * 32)

    def run(use):
        buf = torch.empty(32)
        shared_row[(8,)](buf, x, out, USE=use, BLOCK=32)
    assert not _findings(engine, lambda: run(False))
    (f,) = _findings(engine, lambda: run(True))
    assert f.kind == "uninitialized_read" and sorted(f.program_ids) == [[p] for p in range(8)]


@triton.jit
def rearranged(x_ptr, idx_ptr, out_ptr, n, HOW: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)  # lanes >= n undefined
    if HOW == "gather":
        y = tl.gather(x, tl.load(idx_ptr + offs), 0)
    elif HOW == "join_split":
        a, b = tl.split(tl.join(x, x * 2))
        y = a + b
    elif HOW == "reshape":
        y = tl.reshape(tl.permute(tl.reshape(x, (2, BLOCK // 2)), (1, 0)), (BLOCK,))
    else:
        y = x
    tl.store(out_ptr + offs, y, mask=offs < n)  # LINE: store


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("how,indices,bad", [
    ("gather", "defined", 0), ("gather", "undefined", 2),  # indices picking lanes >= n: 2 stored lanes
    ("join_split", None, 0), ("reshape", None, 2)])  # a transpose moves lanes 12 and 14 to 9 and 11
def test_lanes_moved_by_shape_operations_keep_their_taints(engine, how, indices, bad, line_of):
    n, B = 12, 16
    x = torch.arange(B, dtype=torch.float32)
    idx = torch.arange(B, dtype=torch.int32) % n
    if indices == "undefined":
        idx[3], idx[5] = 14, 15
    out = torch.zeros(B)
    found = _findings(engine, lambda: rearranged[(1,)](x, idx, out, n, HOW=how, BLOCK=B))
    if not bad:
        assert not found
    else:
        (f,) = found
        assert (f.kind, f.line, f.count) == ("undefined_value", line_of(rearranged, "store"), bad)


@triton.jit
def masked_scalar_loads(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    v = tl.load(x_ptr + pid, mask=pid < n, other=0)  # a scalar: Triton's interpreter asks `if other`
    offs = pid + tl.arange(0, BLOCK)
    w = tl.load(x_ptr + offs, mask=offs < n, other=0)  # a block of one element, the same
    z = tl.load(x_ptr + pid, mask=pid < n)  # LINE: no_other
    tl.store(out_ptr + pid, v)
    tl.store(out_ptr + 8 + offs, w)
    tl.store(out_ptr + 16 + pid, z)


@pytest.mark.parametrize("engine", ENGINES)
def test_other_zero_of_a_one_element_masked_load_is_kept(engine, line_of):
    """``other=0`` on a scalar (or one-element) masked load fills its masked-off lane with 0, as
    compiled code does; Triton's front end tests ``if other``, which the interpreter answered with
    the value (0: false) and dropped it, a false ``undefined_value``. A load with no ``other=`` is
    still reported, for the programs whose lane is masked off."""
    x = torch.ones(4)
    out = torch.full((24,), 5.0)
    (f,) = _findings(engine, lambda: masked_scalar_loads[(8,)](x, out, 4, BLOCK=1))
    assert f.kind == "undefined_value"
    assert f"test_observable.py:{line_of(masked_scalar_loads, 'no_other')}" in f.message
    assert sorted(p[0] for p in f.program_ids) == [4, 5, 6, 7]
    assert out[:16].tolist() == [1.0] * 4 + [0.0] * 4 + [1.0] * 4 + [0.0] * 4
