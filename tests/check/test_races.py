"""``data_race``: plain accesses of one element by two programs of a launch with no order between them."""
from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

import tritonkit


def races(session):
    return [f for f in session.findings if f.kind == "data_race"]


@triton.jit
def split_k_matmul(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, ATOMIC: tl.constexpr):
    pm, pn, pk = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = pk * BK + tl.arange(0, BK)
    x = tl.load(a + rm[:, None] * K + rk[None, :])
    y = tl.load(b + rk[:, None] * N + rn[None, :])
    acc = tl.dot(x, y, input_precision="ieee")
    if ATOMIC:
        tl.atomic_add(c + rm[:, None] * N + rn[None, :], acc)
    else:
        tl.store(c + rm[:, None] * N + rn[None, :], acc)  # LINE: partial_store


def test_split_k_without_atomics_is_a_write_write_race_between_k_slices(line_of):
    a, b = torch.randn(32, 64), torch.randn(64, 32)
    c = torch.zeros(32, 32)
    with tritonkit.checking() as s:
        split_k_matmul[(2, 2, 4)](a, b, c, 32, 32, 64, 16, 16, 16, False)
    (f,) = s.findings
    line = line_of(split_k_matmul, "partial_store")
    assert (f.kind, f.line, f.arg, f.access, f.reason) == ("data_race", line, "c", "store", "write_write")
    assert f.other["line"] == line and f.other["access"] == "store"
    # the first conflict: program (0, 0, 1) stores the tile that (0, 0, 0) stored
    assert f.program_ids[0] == [0, 0, 1] and f.other["program_ids"][0] == [0, 0, 0]
    # every tile is stored by 4 programs: all but the first of each tile race
    assert f.num_programs == 2 * 2 * 3
    assert f.elements == "c[0:32, 0:32]" and f.num_elements == 32 * 32
    assert "races with the store at line" in f.message


def test_split_k_with_atomics_has_no_race():
    a, b = torch.randn(32, 64), torch.randn(64, 32)
    c = torch.zeros(32, 32)
    with tritonkit.checking() as s:
        split_k_matmul[(2, 2, 4)](a, b, c, 32, 32, 64, 16, 16, 16, True)
    assert s.findings == []
    torch.testing.assert_close(c, a @ b, rtol=1e-4, atol=1e-4)


@triton.jit
def row_sum_2d_grid(x, out, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)  # program_id(1) is ignored: every column block reduces the whole row
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        acc += tl.load(x + row * n_cols + cols, mask=cols < n_cols, other=0.0)
    tl.store(out + row, tl.sum(acc, axis=0))  # LINE: row_store


def test_reduction_launched_on_a_grid_larger_than_the_data(line_of):
    x = torch.randn(5, 100)
    out = torch.zeros(5)
    with tritonkit.checking() as s:
        row_sum_2d_grid[(5, 3)](x, out, 100, 32)
    (f,) = races(s)
    assert (f.line, f.reason, f.arg) == (line_of(row_sum_2d_grid, "row_store"), "write_write", "out")
    assert f.program_ids[0] == [0, 1] and f.other["program_ids"][0] == [0, 0]
    assert f.num_programs == 5 * 2 and f.elements == "out[0:5]"
    with tritonkit.checking() as s:
        row_sum_2d_grid[(5,)](x, out, 100, 32)
    assert s.findings == []


@triton.jit
def shift_left_in_place(x, n, B: tl.constexpr):
    offs = tl.program_id(0) * B + tl.arange(0, B)
    v = tl.load(x + offs + 1, mask=offs + 1 < n)  # LINE: shifted_load
    tl.store(x + offs, v, mask=offs + 1 < n)  # LINE: shifted_store


def test_in_place_shift_reads_what_the_next_program_writes(line_of):
    x = torch.arange(64, dtype=torch.float32)
    with tritonkit.checking() as s:
        shift_left_in_place[(4,)](x, 64, 16)
    (f,) = s.findings
    # program p loads x[16(p+1)], the first element program p + 1 stores: a read then a write
    assert (f.line, f.reason, f.access) == (line_of(shift_left_in_place, "shifted_store"), "read_write", "store")
    assert f.other["line"] == line_of(shift_left_in_place, "shifted_load") and f.other["access"] == "load"
    assert f.program_ids == [[1], [2], [3]] and f.other["program_ids"] == [[0], [1], [2]]
    assert f.elements == "x[16], x[32], x[48]" and f.count == 3


@triton.jit
def read_neighbours_output(x, out, B: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * B + tl.arange(0, B)
    tl.store(out + offs, tl.load(x + offs) * 2)  # LINE: own_store
    if pid > 0:
        prev = tl.load(out + offs - B)  # LINE: neighbour_load
        tl.store(x + offs, prev)


def test_loading_what_another_program_stored_is_a_write_read_race(line_of):
    x = torch.randn(64)
    out = torch.zeros(64)
    with tritonkit.checking() as s:
        read_neighbours_output[(4,)](x, out, 16)
    (f,) = races(s)
    assert (f.line, f.reason, f.access) == (line_of(read_neighbours_output, "neighbour_load"), "write_read", "load")
    assert f.other["line"] == line_of(read_neighbours_output, "own_store")
    assert f.program_ids == [[1], [2], [3]] and f.other["program_ids"] == [[0], [1], [2]]


@triton.jit
def locked_partial_sums(x, dw, lock, count, n, GROUP: tl.constexpr, B: tl.constexpr, LOCKED: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, B)
    m = cols < n
    part = tl.load(x + row * n + cols, mask=m, other=0.0)
    g = row % GROUP
    if LOCKED:
        while tl.atomic_cas(lock + g, 0, 1) == 1:
            pass
    first = tl.load(count + g)  # LINE: count_load
    if first == 0:
        tl.store(count + g, 1)  # LINE: count_store
    else:
        part += tl.load(dw + g * n + cols, mask=m)  # LINE: dw_load
    tl.store(dw + g * n + cols, part, mask=m)  # LINE: dw_store
    if LOCKED:
        tl.atomic_xchg(lock + g, 0)


def test_a_lock_through_atomic_cas_and_xchg_orders_the_programs_it_protects():
    """Triton's layer-norm backward tutorial pattern: partial sums shared by a group under a lock."""
    x = torch.randn(16, 100)
    dw = torch.zeros(4, 100)
    lock = torch.zeros(4, dtype=torch.int32)
    count = torch.zeros(4, dtype=torch.int32)
    with tritonkit.checking() as s:
        locked_partial_sums[(16,)](x, dw, lock, count, 100, 4, 128, True)
    assert s.findings == []
    torch.testing.assert_close(dw, x.view(4, 4, 100).sum(0))


def test_the_same_sharing_without_the_lock_races(line_of):
    x = torch.randn(16, 100)
    dw, count = torch.zeros(4, 100), torch.zeros(4, dtype=torch.int32)
    lock = torch.zeros(4, dtype=torch.int32)
    with tritonkit.checking() as s:
        locked_partial_sums[(16,)](x, dw, lock, count, 100, 4, 128, False)
    got = {(f.line, f.reason) for f in races(s)}
    k = locked_partial_sums
    assert (line_of(k, "count_load"), "write_read") in got
    assert (line_of(k, "dw_load"), "write_read") in got
    assert (line_of(k, "dw_store"), "write_write") in got
    dw_store = next(f for f in races(s) if f.line == line_of(k, "dw_store") and f.reason == "write_write")
    # rows 4..15 share a group with an earlier row: program 4 follows program 0 in group 0
    assert dw_store.program_ids[0] == [4] and dw_store.other["program_ids"][0] == [0]


@triton.jit
def last_program_reduces(x, partial, counter, out, n_programs, B: tl.constexpr, SEM: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * B + tl.arange(0, B)
    tl.store(partial + pid, tl.sum(tl.load(x + offs), axis=0))
    done = tl.atomic_add(counter, 1, sem=SEM)
    if done == n_programs - 1:
        idx = tl.arange(0, 16)
        parts = tl.load(partial + idx, mask=idx < n_programs, other=0.0)  # LINE: partials_load
        tl.store(out, tl.sum(parts, axis=0))


def test_a_counter_through_atomic_add_orders_partials_before_the_last_program():
    x = torch.randn(8 * 32)
    partial, out = torch.zeros(8), torch.zeros(1)
    counter = torch.zeros(1, dtype=torch.int32)
    with tritonkit.checking() as s:
        last_program_reduces[(8,)](x, partial, counter, out, 8, 32, "acq_rel")
    assert s.findings == []
    torch.testing.assert_close(out, x.sum().reshape(1), rtol=1e-5, atol=1e-4)


def test_a_relaxed_counter_does_not_order_anything(line_of):
    x = torch.randn(8 * 32)
    partial, out = torch.zeros(8), torch.zeros(1)
    counter = torch.zeros(1, dtype=torch.int32)
    with tritonkit.checking() as s:
        last_program_reduces[(8,)](x, partial, counter, out, 8, 32, "relaxed")
    (f,) = races(s)
    assert (f.line, f.reason) == (line_of(last_program_reduces, "partials_load"), "write_read")
    assert f.program_ids == [[7]] and sorted(f.other["program_ids"]) == [[p] for p in range(7)]


@triton.jit
def histogram(values, counts, n, B: tl.constexpr):
    offs = tl.program_id(0) * B + tl.arange(0, B)
    m = offs < n
    bins = tl.load(values + offs, mask=m, other=0)
    tl.atomic_add(counts + bins, 1, mask=m)


def test_a_histogram_with_atomic_add_has_no_race():
    values = torch.randint(0, 10, (1000,), dtype=torch.int32)
    counts = torch.zeros(10, dtype=torch.int32)
    with tritonkit.checking() as s:
        histogram[(8,)](values, counts, 1000, 128)
    assert s.findings == []
    assert torch.equal(counts, torch.bincount(values, minlength=10).to(torch.int32))


@triton.jit
def scale_in_place(x, n, B: tl.constexpr):
    offs = tl.program_id(0) * B + tl.arange(0, B)
    m = offs < n
    tl.store(x + offs, tl.load(x + offs, mask=m) * 2, mask=m)


def test_a_program_touching_its_own_elements_and_separate_launches_do_not_race():
    x = torch.randn(1000)
    want = x * 4
    with tritonkit.checking() as s:
        scale_in_place[(8,)](x, 1000, 128)
        scale_in_place[(8,)](x, 1000, 128)  # the second launch reads what the first wrote: ordered
    assert s.findings == []
    torch.testing.assert_close(x, want)


def test_only_the_race_check_can_be_selected():
    a, b = torch.randn(32, 64), torch.randn(64, 32)
    with tritonkit.checking(checks=["data_race"]) as s:
        split_k_matmul[(2, 2, 4)](a, b, torch.zeros(32, 32), 32, 32, 64, 16, 16, 16, False)
    assert [f.kind for f in s.findings] == ["data_race"]
    with tritonkit.checking(checks=["out_of_bounds"]) as s:
        split_k_matmul[(2, 2, 4)](a, b, torch.zeros(32, 32), 32, 32, 64, 16, 16, 16, False)
    assert s.findings == []


def test_an_unknown_check_is_refused_with_the_known_ones():
    with pytest.raises(ValueError, match="data_race"):
        with tritonkit.checking(checks=["races"]):
            pass


@triton.jit
def gather_two_rows(table, out, rows, n_cols, B: tl.constexpr):
    r = tl.load(rows + tl.program_id(0)).to(tl.int64)
    cols = tl.arange(0, B)
    tl.store(out + tl.program_id(0) * n_cols + cols, tl.load(table + r * n_cols + cols, mask=cols < n_cols),
             mask=cols < n_cols)


def test_race_shadow_memory_follows_what_a_launch_touches_not_the_tensor_size():
    """Two rows of a 64 MiB table: the shadow pages cover the touched elements only."""
    import tracemalloc

    table = torch.randn(4096, 4096)
    out = torch.zeros(2, 4096)
    rows = torch.tensor([7, 4000], dtype=torch.int32)
    tracemalloc.start()
    try:
        with tritonkit.checking(checks=["data_race"]) as s:
            gather_two_rows[(2,)](table, out, rows, 4096, 4096)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert s.findings == []
    assert torch.equal(out, table[[7, 4000]])
    assert peak < 16 * 2 ** 20  # a whole-table shadow would be 24 bytes x 16 Mi elements = 384 MiB


@triton.jit
def overlapping_windows(x, out, n, B: tl.constexpr, STEP: tl.constexpr):
    offs = tl.program_id(0) * STEP + tl.arange(0, B)
    tl.store(out + offs, tl.load(x + offs, mask=offs < n), mask=offs < n)  # LINE: window_store


def test_races_are_found_across_shadow_pages(line_of):
    """Windows of 2**15 elements every 2**15 - 8: each overlaps the next by 8 elements, across pages."""
    n = 5 * (2 ** 15 - 8) + 8
    x = torch.randn(n)
    out = torch.zeros(n)
    with tritonkit.checking(checks=["data_race"]) as s:
        overlapping_windows[(5,)](x, out, n, 2 ** 15, 2 ** 15 - 8)
    (f,) = s.findings
    assert (f.line, f.reason) == (line_of(overlapping_windows, "window_store"), "write_write")
    step = 2 ** 15 - 8
    assert f.program_ids == [[1], [2], [3], [4]] and f.count == 4 * 8
    assert f.elements == ", ".join(f"out[{p * step}:{p * step + 8}]" for p in range(1, 5))


@triton.jit
def scatter(idx, x, out, B: tl.constexpr):
    offs = tl.arange(0, B)
    tl.store(out + tl.load(idx + offs), tl.load(x + offs))  # LINE: scatter_store


def test_lanes_of_one_store_writing_different_values_to_one_element(line_of):
    """index_put without accumulate: with a repeated index, which lane's value lands is undefined."""
    idx = torch.tensor([3, 1, 3, 0, 7, 1, 5, 6], dtype=torch.int32)
    x = torch.arange(8, dtype=torch.float32)
    with tritonkit.checking() as s:
        scatter[(1,)](idx, x, torch.zeros(8), 8)
    (f,) = s.findings
    assert (f.kind, f.line, f.reason) == ("data_race", line_of(scatter, "scatter_store"), "same_program")
    assert f.program_ids == [[0]] and f.count == 4 and f.elements == "out[1], out[3]"
    assert "which lane's value lands is undefined" in f.message


def test_lanes_storing_the_same_value_to_one_element_are_fine():
    idx = torch.tensor([3, 1, 3, 0, 7, 1, 5, 6], dtype=torch.int32)
    x = torch.tensor([9.0, 4.0, 9.0, 0.0, 1.0, 4.0, 2.0, 3.0])  # repeated indices carry equal values
    with tritonkit.checking() as s:
        scatter[(1,)](idx, x, torch.zeros(8), 8)
    assert s.findings == []


@triton.jit
def tile_rows(x, out, STRIDE: tl.constexpr, R: tl.constexpr, C: tl.constexpr):
    rows = tl.arange(0, R)[:, None]
    cols = tl.arange(0, C)[None, :]
    vals = tl.load(x + tl.program_id(0) * R * C + rows * C + cols)
    tl.store(out + tl.program_id(0) * R * STRIDE + rows * STRIDE + cols, vals)  # LINE: tile_store


@pytest.mark.parametrize("engine", ["auto", "sequential"])
@pytest.mark.parametrize("stride", [32, 48, 16])  # rows apart, as wide as their tensor's, overlapping
def test_tile_rows_that_overlap_within_a_program_write_one_element_twice(line_of, engine, stride):
    """A tile store whose rows (of 32 consecutive elements) overlap within a program writes the
    overlap twice with different values; rows apart (or each one right after the last) do not."""
    x = torch.arange(4 * 8 * 32, dtype=torch.float32)
    out = torch.zeros(4 * 8 * 48)
    with tritonkit.checking(engine=engine) as s:
        tile_rows[(4,)](x, out, stride, 8, 32)
    if stride >= 32:
        assert races(s) == []
        return
    # (the last rows also reach the next program's first: a write-write race between programs too)
    assert (line_of(tile_rows, "tile_store"), "same_program") in {(f.line, f.reason) for f in races(s)}


@triton.jit
def _store_vs_atomic(out_ptr, FIRST: tl.constexpr, SECOND: tl.constexpr):
    pid = tl.program_id(0)
    if pid == 0:
        if FIRST == "store":
            tl.store(out_ptr, 1.0)  # LINE: first_store
        elif FIRST == "load":
            tl.store(out_ptr + 1, tl.load(out_ptr))
        else:
            tl.atomic_add(out_ptr, 1.0, sem="relaxed")
    else:
        if SECOND == "store":
            tl.store(out_ptr, 2.0)
        elif SECOND == "load":
            tl.store(out_ptr + 2, tl.load(out_ptr))
        else:
            tl.atomic_add(out_ptr, 2.0, sem="relaxed")  # LINE: second_atomic


@pytest.mark.parametrize("engine", ["sequential", "auto"])
@pytest.mark.parametrize("first,second,reason", [("store", "atomic", "write_write"), ("atomic", "store", "write_write"),
                                                 ("load", "atomic", "read_write"), ("atomic", "load", "write_read")])
def test_a_plain_access_and_an_atomic_of_another_program_on_one_element_race(engine, first, second, reason):
    out = torch.zeros(4)
    with tritonkit.checking(engine=engine) as s:
        _store_vs_atomic[(2,)](out, FIRST=first, SECOND=second)
    (f,) = s.findings
    assert (f.kind, f.reason, f.program_ids) == ("data_race", reason, [[1]])
    assert f.elements == "out_ptr[0]"


@pytest.mark.parametrize("engine", ["sequential", "auto"])
def test_atomics_of_two_programs_on_one_element_do_not_race(engine):
    out = torch.zeros(4)
    with tritonkit.checking(engine=engine) as s:
        _store_vs_atomic[(2,)](out, FIRST="atomic", SECOND="atomic")
    assert not s.findings and out[0].item() == 3.0


@triton.jit
def _partials_then_last_reduces(part_ptr, count_ptr, out_ptr, N: tl.constexpr):
    pid = tl.program_id(0)
    tl.atomic_add(part_ptr + pid % 2, 1.0, sem="relaxed")
    done = tl.atomic_add(count_ptr, 1)  # acq_rel: orders each program's partial before the last's loads
    if done == N - 1:
        tl.store(out_ptr, tl.load(part_ptr) + tl.load(part_ptr + 1))


def test_atomic_partials_read_by_the_last_program_after_a_counter_do_not_race():
    part, count, out = torch.zeros(2), torch.zeros(1, dtype=torch.int32), torch.zeros(1)
    with tritonkit.checking() as s:
        _partials_then_last_reduces[(6,)](part, count, out, N=6)
    assert not s.findings and out.item() == 6.0
