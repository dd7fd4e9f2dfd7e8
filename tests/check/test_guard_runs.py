"""The batched engine's guard keeps a storage that programs only store to as runs (intervals of
elements, each stored by one program) instead of 5 bytes per element. Generated stores (hypothesis)
against a model that keeps every element: the runs raise exactly when two programs store one
element, and otherwise hold exactly the model's elements and programs."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tritonkit.check.engine.runs import LANES_PER_RUN, Runs, as_runs, lane_pids, lane_runs, row_runs, span_runs
from tritonkit.check.errors import Unbatchable

# one store: lanes (program, first element, elements) of consecutive elements
_piece = st.tuples(st.integers(0, 5), st.integers(0, 200), st.integers(1, 40))
_store = st.lists(_piece, min_size=1, max_size=6)


def _lanes(store):
    cells = np.concatenate([np.arange(c0, c0 + n, dtype=np.int64) for _, c0, n in store])
    pids = np.concatenate([np.full(n, p, dtype=np.int32) for p, _, n in store])
    return cells, pids


def _split(cells, pids):
    """Runs of consecutive elements of one program, with no limit on how many."""
    breaks = np.flatnonzero((np.diff(cells) != 1) | (np.diff(pids) != 0)) + 1
    first = np.concatenate(([0], breaks))
    last = np.concatenate((breaks, [cells.shape[0]])) - 1
    return cells[first], cells[last] + 1, pids[first]


@settings(max_examples=300, deadline=None)
@given(st.lists(_store, min_size=1, max_size=5))
def test_runs_conflict_exactly_when_two_programs_store_one_element(stores):
    runs, model = Runs(), {}
    for store in stores:
        cells, pids = _lanes(store)
        clash = any(model.get(c, p) != p for c, p in zip(cells.tolist(), pids.tolist()))
        clash = clash or len({(c, p) for c, p in zip(cells.tolist(), pids.tolist())}) != len(set(cells.tolist()))
        if clash:
            with pytest.raises(Unbatchable, match="share an element"):
                runs.add(*_split(cells, pids), "why")
            return
        runs.add(*_split(cells, pids), "why")
        model.update(zip(cells.tolist(), pids.tolist()))
        got_cells, got_pids = runs.cells()
        assert dict(zip(got_cells.tolist(), got_pids.tolist())) == model
        assert got_cells.shape[0] == len(model)  # disjoint runs: no element twice
        assert (np.diff(runs.lo) > 0).all() and (runs.hi[:-1] <= runs.lo[1:]).all()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 1000)), min_size=1, max_size=200))
def test_an_access_is_runs_only_when_it_makes_few(lanes):
    cells = np.array([c for _, c in lanes], dtype=np.int64)
    pids = np.array([p for p, _ in lanes], dtype=np.int32)
    cut = as_runs(cells, pids)
    lo, hi, pid = _split(cells, pids)
    if lo.shape[0] > max(1, cells.shape[0] // LANES_PER_RUN):
        assert cut is None
    else:
        assert cut is not None
        assert all(np.array_equal(a, b) for a, b in zip(cut, (lo, hi, pid)))


class _Span:
    """The parts of a resolved access ``span_runs`` reads: a span of consecutive ``size``-byte
    elements starting at byte ``lo``, ``per`` lanes per program."""

    def __init__(self, lo, n, per, size):
        self.lo, self.n, self.per, self.hi = lo, n, per, lo + (n - 1) * size


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 40), st.integers(1, 300), st.integers(0, 64), st.sampled_from([1, 2, 4, 8]),
       st.integers(0, 500), st.booleans())
def test_a_span_store_makes_the_runs_its_lanes_make(programs, per, first, size, spare, repeat):
    """A store of consecutive elements by consecutive programs (vector add's): one run per
    program, computed from its first byte, the same as from its lanes, or None where the lanes'
    way would give none (too many runs, a lane past the storage)."""
    order = np.arange(first, first + programs, dtype=np.int64)
    if repeat and programs > 1:
        order[1] = order[0]
    n = programs * per
    lo = size * (first % 7)
    nbytes = lo + n * size + size * (spare - 100)
    span = _Span(lo, n, per, size)
    got = span_runs(span, order, size, nbytes)
    cells = lo // size + np.arange(n, dtype=np.int64)
    pids = np.repeat(order.astype(np.int32), per)
    inside = lo + n * size <= nbytes
    if not inside or (repeat and programs > 1):
        assert got is None
        return
    want = as_runs(cells, pids)
    if want is None:
        assert got is None
    else:
        assert got is not None and all(np.array_equal(a, b) and a.dtype == b.dtype for a, b in zip(got, want))


class _Rows:
    """The parts of a resolved access ``row_runs`` reads: rows of ``length`` consecutive elements
    starting at ``starts``, every lane active."""

    def __init__(self, starts, length):
        self.starts, self.length, self.n = starts, length, starts.shape[0] * length

    def rows(self, size):
        return self.starts, self.length


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 6), st.integers(1, 5), st.sampled_from([8, 16, 32, 64]), st.integers(8, 96),
       st.integers(-4, 4000), st.booleans(), st.integers(0, 2 ** 32 - 1))
def test_a_tile_store_makes_the_runs_its_lanes_make(programs, rows, length, stride, first, shuffled, seed):
    """A store of each program's tile rows (a matmul's output tile, an attention's): the runs
    computed from the rows' first elements are those of its lanes (rows that continue each other
    joined), or None where the lanes' way would give none or a row leaves the storage."""
    rng = np.random.default_rng(seed)
    tiles = rng.permutation(programs) if shuffled else np.arange(programs)
    starts = (first + tiles[:, None] * rows * stride + np.arange(rows)[None, :] * stride).reshape(-1)
    order = np.arange(10, 10 + programs, dtype=np.int64)
    ncells = 4096
    got = row_runs(_Rows(starts.astype(np.int64), length), order, 4, ncells)
    cells = (starts[:, None] + np.arange(length)).reshape(-1)
    if cells.min() < 0 or cells.max() >= ncells:
        assert got is None
        return
    want = as_runs(cells, np.repeat(order.astype(np.int32), rows * length))
    if length < LANES_PER_RUN:
        assert got is None
        return
    assert got is not None and want is not None
    assert all(np.array_equal(a, b) and a.dtype == b.dtype for a, b in zip(got, want))


# one access: a load or a store, and its lanes as pieces (program, first element, elements)
_access = st.tuples(st.booleans(), _store)


@settings(max_examples=400, deadline=None)
@given(st.lists(_access, min_size=1, max_size=6))
def test_load_and_store_runs_conflict_exactly_when_a_stored_element_is_shared(accesses):
    """Loads and stores of one storage as runs, against a model that keeps, per element, the
    programs that loaded and stored it: an access raises exactly when afterwards an element one
    program stored is touched by another; a load that two programs make of one element (in it, or
    with an earlier load) is refused instead (False, nothing entered: the guard then keeps the
    storage as elements); otherwise the runs hold the model's elements exactly."""
    runs, loaded, stored = Runs(), {}, {}
    for is_store, pieces in accesses:
        cells, pids = _lanes(pieces)
        new = {}
        for c, p in zip(cells.tolist(), pids.tolist()):
            new.setdefault(c, set()).add(p)
        ld = {c: set(ps) for c, ps in loaded.items()}
        st_ = {c: set(ps) for c, ps in stored.items()}
        for c, ps in new.items():
            (st_ if is_store else ld).setdefault(c, set()).update(ps)
        conflict = any(len(st_[c] | ld.get(c, set())) > 1 for c in st_)
        shared_in_access = any(len(ps) > 1 for ps in new.values())
        shared_load = any(len(ps) > 1 for ps in ld.values())
        if is_store:
            expect = "raise" if conflict else True
        else:
            expect = False if shared_in_access else "raise" if conflict else False if shared_load else True
        before = (runs.lo, runs.hi, runs.pid, runs.load_lo, runs.load_hi, runs.load_pid)
        if expect == "raise":
            with pytest.raises(Unbatchable, match="share an element"):
                runs.add(*_split(cells, pids), "why", store=is_store)
            return
        assert runs.add(*_split(cells, pids), "why", store=is_store) is expect
        if not expect:
            after = (runs.lo, runs.hi, runs.pid, runs.load_lo, runs.load_hi, runs.load_pid)
            assert all(a is b for a, b in zip(before, after))
            return
        loaded, stored = ld, st_
        for got, want in ((runs.cells(), stored), (runs.load_cells(), loaded)):
            assert dict(zip(got[0].tolist(), got[1].tolist())) == {c: min(ps) for c, ps in want.items()}
            assert got[0].shape[0] == len(want)
        for lo, hi in ((runs.lo, runs.hi), (runs.load_lo, runs.load_hi)):
            assert (np.diff(lo) > 0).all() and (hi[:-1] <= lo[1:]).all()


def test_an_access_of_one_element_per_program_is_one_run_per_program():
    """A scalar load or store per program (a row's label, its loss) makes one run per program,
    within the programs allowance; scattered lanes beyond it are still refused."""
    cells = np.array([5, 70, 300], dtype=np.int64)
    pids = np.array([0, 1, 2], dtype=np.int32)
    assert as_runs(cells, pids) is None
    lo, hi, pid = as_runs(cells, pids, programs=3)
    assert lo.tolist() == [5, 70, 300] and hi.tolist() == [6, 71, 301] and pid.tolist() == [0, 1, 2]
    assert as_runs(np.array([5, 9, 70, 90], dtype=np.int64), np.array([0, 0, 1, 1], dtype=np.int32), 2) is None


@settings(max_examples=400, deadline=None)
@given(st.integers(1, 6), st.sampled_from([1, 2, 4, 8, 16, 32]), st.sampled_from([1, 2, 4, 8]),
       st.integers(0, 2 ** 32 - 1), st.booleans(), st.booleans(), st.booleans())
def test_lane_runs_are_the_runs_of_every_lane(programs, per, g, seed, masked, scattered, shuffled):
    """The runs found from where the offsets stop stepping by one cell and where each program's
    first lane is (bisection over ascending lanes) are those of every lane's cell and program, or
    None where those would be None."""
    rng = np.random.default_rng(seed)
    order = (rng.permutation(programs) if shuffled else np.arange(programs)).astype(np.int64) + 3
    lanes_all = np.arange(programs * per, dtype=np.int64)
    if scattered:
        cells_all = rng.integers(0, 64, programs * per)
    else:  # each program's block: consecutive cells from a start of its own (rows)
        cells_all = (rng.integers(0, 8, programs)[:, None] * per + np.arange(per)).reshape(-1)
    keep = rng.random(programs * per) < 0.7 if masked else np.ones(programs * per, dtype=bool)
    if not keep.any():
        keep[0] = True
    lanes = lanes_all[keep] if masked else None
    off = cells_all[keep] * g
    n = off.shape[0]
    got = lane_runs(off, int(off.min()), n, lanes, per, order, g)
    want = as_runs(off // g, lane_pids(lanes, per, order, n), min(n, programs))
    if want is None:
        assert got is None
    else:
        assert got is not None and all(np.array_equal(a, b) for a, b in zip(got, want))
        assert got[2].dtype == np.int32


def test_loads_out_of_order_past_the_sorted_limit_are_refused(monkeypatch):
    """Load runs taken in out of order sort every run the storage holds; past the limit the runs
    refuse them (the guard then keeps the storage as elements), while runs in order, or inside a
    program's earlier ones, are still taken."""
    from tritonkit.check.engine import runs as _runs
    monkeypatch.setattr(_runs, "MAX_SORTED_LOAD_RUNS", 4)
    runs = Runs()
    ones = np.ones(3, dtype=np.int64)
    assert runs.add(np.array([10, 20, 30]), np.array([10, 20, 30]) + ones, np.array([0, 1, 2], dtype=np.int32),
                    "why", store=False)
    assert runs.add(np.array([40, 50]), np.array([41, 51]), np.array([3, 4], dtype=np.int32), "why", store=False)
    assert runs.add(np.array([10]), np.array([11]), np.array([0], dtype=np.int32), "why", store=False)  # again
    before = runs.load_lo
    assert not runs.add(np.array([5]), np.array([6]), np.array([5], dtype=np.int32), "why", store=False)
    assert runs.load_lo is before and runs.load_lo.tolist() == [10, 20, 30, 40, 50]
