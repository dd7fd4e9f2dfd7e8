"""The batched engine's guard: which programs of a batch (or of the whole launch) touch which
elements, to tell when running them interleaved would differ from running them one after another."""
from __future__ import annotations

from typing import Dict, Optional, Tuple

import numpy as np

from ..errors import Unbatchable
from ..memory import PagedCells, element_cells, interval_cells, runs_within
from ..memory.cells import PAGE, PAGE_BITS

_NONE = -1
_LOAD, _STORE, _ATOMIC, _SHARED, _LATE = 1, 2, 4, 8, 16
#: lanes of scattered loads the guard holds unentered (their offsets, 8 bytes each, and lane indices)
#: before it keeps only their byte ranges (see Guard._summarize_pending); 2M lanes: about 16-32 MiB
_PENDING_LANES = 1 << 21


class NeedPrecise(Exception):
    """A write landed where the guard kept only the range of a storage's loads (see
    :meth:`Guard._summarize_pending`): the launch must run again with that storage's loads entered.

    Attributes:
        key: the storage's ``id``.
    """

    def __init__(self, key: int) -> None:
        super().__init__(key)
        self.key = key


class _Owners(PagedCells):
    """Per element (cell) of one storage the guard watches: the first program that touched it
    (``own``, an execution index), what was done to it (``flags``) and the latest program that made
    an atomic on it (``aseq``); paged like the race check's shadow (5 bytes a touched cell, 9 with
    atomics)."""

    _FIELDS = {"own": (_NONE, np.int32), "flags": (0, np.uint8)}
    _LAZY = {"aseq": (_NONE, np.int32)}  # only once an atomic is entered


#: load runs a storage may hold and still take in runs out of order (each such access sorts them all:
#: a launch loading scalars in reverse program order would sort them once per batch); more: elements
_MAX_SORTED_LOAD_RUNS = 1 << 16
#: an access is entered as runs (see :class:`_Runs`) while it makes at most one run per this many lanes
_LANES_PER_RUN = 16


class _Runs:
    """The elements (cells) of one storage the watched programs touched, as runs while every
    program's cells are its own: sorted intervals of cells, each touched by one program, those
    stored to (``lo``, ``hi``: int64 cell bounds, ``hi`` exclusive; ``pid``: int32 execution index)
    and those loaded (``load_lo``, ``load_hi``, ``load_pid``), each list disjoint. An output written
    row by row or tile by tile, or a row updated in place by its program (a cross-entropy's logits
    turned into gradients), costs a few numbers per program here instead of 5 bytes per element."""

    def __init__(self) -> None:
        self.lo, self.hi, self.pid = _no_runs()
        self.load_lo, self.load_hi, self.load_pid = _no_runs()

    def cells(self):
        """Every cell of the stored runs (int64) and the program of each (int32), run by run."""
        return interval_cells(self.lo, self.hi), np.repeat(self.pid, self.hi - self.lo)

    def load_cells(self):
        """Every cell of the loaded runs (int64) and the program of each (int32), run by run."""
        return interval_cells(self.load_lo, self.load_hi), np.repeat(self.load_pid, self.load_hi - self.load_lo)

    def add(self, lo: np.ndarray, hi: np.ndarray, pid: np.ndarray, why: str, store: bool = True) -> bool:
        """Enter the runs one access made (any order; a program may repeat its own cells).

        Returns:
            False (nothing entered) when a load's runs overlap cells another program loaded (that is
            no conflict, but runs cannot hold it) or would be sorted into more than
            :data:`_MAX_SORTED_LOAD_RUNS` load runs: the caller enters the storage as cells.
        Raises:
            Unbatchable: a cell is stored by one program and touched by another (in this access or
            with an earlier one).
        """
        lo, hi, pid = _merge_runs(lo, hi, pid, why if store else None)
        if pid is None:
            return False
        if _crosses(self.lo, self.hi, self.pid, lo, hi, pid) or (
                store and _crosses(self.load_lo, self.load_hi, self.load_pid, lo, hi, pid)):
            raise Unbatchable(f"programs of one launch share an element that one of them writes: {why}")
        if store:
            self.lo, self.hi, self.pid = _insert_runs((self.lo, self.hi, self.pid), lo, hi, pid, why)
            return True
        merged = _insert_runs((self.load_lo, self.load_hi, self.load_pid), lo, hi, pid, None)
        if merged[2] is None:
            return False
        self.load_lo, self.load_hi, self.load_pid = merged
        return True


def _no_runs():
    return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int32)


def _crosses(old_lo, old_hi, old_pid, lo, hi, pid) -> bool:
    """Whether any of the runs ``[lo, hi)`` overlaps a run of another program among the sorted,
    disjoint runs ``old_*``."""
    if not old_lo.shape[0]:
        return False
    first = np.searchsorted(old_hi, lo, side="right")  # the first old run that ends after lo
    end = np.searchsorted(old_lo, hi, side="left")  # ... and the first that starts at or after hi
    touched = end > first
    if not touched.any():
        return False
    one = touched & (end - first == 1)
    if (old_pid[first[one]] != pid[one]).any():
        return True
    return any((old_pid[first[i]:end[i]] != pid[i]).any() for i in np.flatnonzero(touched & ~one).tolist())


def _insert_runs(old, lo, hi, pid, why):
    """The sorted, disjoint runs ``old`` with the sorted, disjoint runs ``lo, hi, pid`` taken in
    (runs of one program that overlap merged; see :func:`_merge_runs` for ``why``). A run inside an
    old one of its program adds nothing, and runs past the last old one are appended: a launch's
    programs touching rows in order, or again, cost no sort."""
    old_lo, old_hi, old_pid = old
    if not old_lo.shape[0]:
        return lo, hi, pid
    at = np.searchsorted(old_lo, lo, side="right") - 1  # the old run starting at or before each new one
    inside = at >= 0
    inside[inside] = (hi[inside] <= old_hi[at[inside]]) & (old_pid[at[inside]] == pid[inside])
    if inside.all():
        return old
    if inside.any():
        keep = ~inside
        lo, hi, pid = lo[keep], hi[keep], pid[keep]
    if lo[0] >= old_hi[-1]:
        return np.concatenate((old_lo, lo)), np.concatenate((old_hi, hi)), np.concatenate((old_pid, pid))
    if why is None and old_lo.shape[0] + lo.shape[0] > _MAX_SORTED_LOAD_RUNS:  # loads: elements from now on
        return lo, hi, None
    return _merge_runs(np.concatenate((old_lo, lo)), np.concatenate((old_hi, hi)), np.concatenate((old_pid, pid)), why)


def _merge_runs(lo, hi, pid, why):
    """Sort runs by their first cell and merge those of one program that overlap.

    Returns:
        the merged runs; ``(lo, hi, None)`` where two runs of different programs overlap and ``why`` is None.
    Raises:
        Unbatchable: two runs of different programs overlap (``why``: the reason's end).
    """
    order = np.argsort(lo, kind="stable")
    lo, hi, pid = lo[order], hi[order], pid[order]
    if lo.shape[0] < 2:
        return lo, hi, pid
    reach = np.maximum.accumulate(hi)
    joins = lo[1:] < reach[:-1]  # overlaps a run before it
    if not joins.any():
        return lo, hi, pid
    starts = np.flatnonzero(np.concatenate(([True], ~joins)))
    if (np.minimum.reduceat(pid, starts) != np.maximum.reduceat(pid, starts)).any():
        if why is None:
            return lo, hi, None
        raise Unbatchable(f"programs of one launch share an element that one of them writes: {why}")
    return lo[starts], np.maximum.reduceat(hi, starts), pid[starts]


def _as_runs(cells: np.ndarray, pids: np.ndarray, programs: int = 1):
    """The runs (``lo``, ``hi``, ``pid``) of one access's cells, each lane's program in ``pids``:
    None when they break into more than one run per ``_LANES_PER_RUN`` lanes and more than
    ``programs`` runs (an access of a few elements per program makes one run per program; scattered
    accesses are cheaper as cells)."""
    n = cells.shape[0]
    if n == 0:
        return None
    breaks = np.flatnonzero((np.diff(cells) != 1) | (np.diff(pids) != 0)) + 1
    if breaks.shape[0] + 1 > max(1, n // _LANES_PER_RUN, programs):
        return None
    first, last = _split_at(breaks, n)
    return cells[first], cells[last] + 1, pids[first]


def _item_runs(item, nbytes: int, res=None):
    """The runs of one access (``item``: as :meth:`Guard.access` holds it; ``res``: its resolved
    lanes where they are all in the storage, for the ways that need no pass over the lanes), in
    cells of a storage of ``nbytes`` bytes; None where its lanes are wider or narrower than a cell,
    it counts for every program (uniform), or it makes too many runs (see :func:`_as_runs`)."""
    off, n, lanes, per, order, size, g, ncells, uniform, span = item
    if uniform or size != g or not n:
        return None
    if res is None and isinstance(off, _Offsets):
        res = off.res
    if res is not None and lanes is None:
        cut = _span_runs(res, order, g, nbytes) if span else _row_runs(res, order, g, ncells)
        if cut is not None:
            return cut
    every = None if span else off.res.off if isinstance(off, _Offsets) else off
    if span:
        ends = int(off[0]), int(off[0]) + (n - 1) * g
    elif res is not None:  # every lane of one slot: its smallest and largest offsets are known
        ends = res.lo, res.hi
    else:
        ends = int(every.min()), int(every.max())
    if ends[0] < 0 or ends[1] + g > nbytes:  # a lane outside: clipped like element_cells (never performed)
        cells = (int(off[0]) // g + np.arange(n, dtype=np.int64)) if span else every // g
        np.clip(cells, 0, ncells - 1, out=cells)
        return _as_runs(cells, _lane_pids(lanes, per, order, n), min(n, order.shape[0]))
    return _lane_runs(every, ends[0], n, lanes, per, order, g)


def _lane_runs(off, first_off: int, n: int, lanes, per: int, order: np.ndarray, g: int):
    """The runs of ``n`` lanes inside a storage of ``g``-byte cells (``off``: their byte offsets,
    int64, or None for consecutive cells from ``first_off``; ``lanes``: their indices into the
    batch's block, ascending, None for all; ``per`` lanes a program of ``order``), found from where
    the offsets stop stepping by one cell and where the program changes, without a program or a
    cell per lane; None where :func:`_as_runs` would give none."""
    programs = order.shape[0]
    if per < 1:
        return None
    if lanes is None:
        program_breaks = np.arange(per, n, per, dtype=np.int64)
    else:  # the first lane of each program after the first (lanes ascend)
        cuts = np.searchsorted(lanes, per * np.arange(1, int(lanes[-1]) // per + 1, dtype=np.int64))
        program_breaks = cuts[(cuts > 0) & (cuts < n)]
    breaks = program_breaks if off is None else np.union1d(np.flatnonzero(np.diff(off) != g) + 1, program_breaks)
    if breaks.shape[0] + 1 > max(1, n // _LANES_PER_RUN, min(n, programs)):
        return None
    first, last = _split_at(breaks, n)
    if off is None:
        lo, hi = first_off // g + first, first_off // g + last + 1
    else:
        lo, hi = off[first] // g, off[last] // g + 1
    return lo, hi, order.astype(np.int32)[(first if lanes is None else lanes[first]) // per]


def _split_at(breaks: np.ndarray, n: int):
    """The first and last index (int64) of each part of ``range(n)`` cut before each of ``breaks``."""
    return np.concatenate(([0], breaks)), np.concatenate((breaks, [n])) - 1


def _span_runs(res, order: np.ndarray, g: int, nbytes: int):
    """The runs of a store whose lanes are all active and consecutive cells inside the storage
    (``res.contiguous``), ``res.per`` lanes per program of ``order``: one run per program, found
    without a pass over the lanes (what :func:`_as_runs` gives them). None when that does not hold."""
    per, n = res.per, res.n
    if per < 1 or n != per * order.shape[0] or res.lo < 0 or res.hi + g > nbytes:
        return None
    if order.shape[0] > max(1, n // _LANES_PER_RUN):  # as cells (see _as_runs)
        return None
    lo = res.lo // g + per * np.arange(order.shape[0], dtype=np.int64)
    if order.shape[0] > 1 and (np.diff(order) == 0).any():  # one program twice: its runs join
        return None
    return lo, lo + per, order.astype(np.int32)


def _row_runs(res, order: np.ndarray, g: int, ncells: int):
    """The runs of a store of every lane whose lanes are rows of consecutive cells inside the storage
    (:meth:`~tritonkit.check.memory.resolved.Resolved.rows`, ``g``-byte elements: a tile's rows), each
    program's rows one after another: the runs found from the rows' first cells, without a pass over
    the lanes (what :func:`_as_runs` gives them). None when that does not hold."""
    rows = res.rows(g)
    if rows is None:
        return None
    starts, length = rows
    nrows, programs = starts.shape[0], order.shape[0]
    if (length < _LANES_PER_RUN or nrows % programs or nrows * length != res.n
            or not runs_within(starts, length, ncells)):
        return None
    pids = np.repeat(order.astype(np.int32), nrows // programs)
    # rows that continue the one before (a tile as wide as its tensor's rows) join it
    breaks = np.flatnonzero((starts[1:] != starts[:-1] + length) | (pids[1:] != pids[:-1])) + 1
    first, last = _split_at(breaks, nrows)
    return starts[first], starts[last] + length, pids[first]


class _Offsets:
    """The byte offsets of every lane of an access in one slot (``res.off``), made when they are
    first entered: while they wait (a pending load), their count and ends are known without them."""

    __slots__ = ("res",)

    def __init__(self, res) -> None:
        self.res = res

    @property
    def shape(self) -> Tuple[int]:
        return (self.res.n,)

    def min(self) -> int:
        return self.res.lo

    def max(self) -> int:
        return self.res.hi


class Guard:
    """Watches the elements a batched run touches for programs that depend on each other (see the
    module). :meth:`access` is called (through the running :class:`~.transaction.Transaction`) by the launch
    for every access of a batch.

    Loads of a storage that nothing has written yet in the watched range are only remembered (by
    reference to the access's offsets, up to ``_PENDING_LANES`` lanes): an input that is only read,
    however many programs read it, costs nothing. They are entered when the storage is first
    written, or when too many are pending.

    Args:
        why: the end of the :class:`Unbatchable` reason given on a conflict (what happens next).
    """

    def __init__(self, why: str, precise: frozenset = frozenset()) -> None:
        self.why = why
        # storages whose loads are entered when too many are pending, instead of being summarized
        self.precise = precise
        # id(storage) -> (first, last) byte offset of loads summarized (see _summarize_pending)
        self.summary: Dict[int, tuple] = {}
        self.owners: Dict[int, _Owners] = {}
        # id(storage) -> loads not entered yet: (off, n, lanes, per, order, size, g, ncells, uniform, span)
        self.pending: Dict[int, list] = {}
        self.pending_lanes = 0
        self.written: set = set()
        # id(storage) -> _Runs: storages only stored to so far, each program's cells in runs
        self.runs: Dict[int, _Runs] = {}

    def access(self, launch, kind: str, res, size: int) -> None:
        """Enter one access of the running batch (``kind``: ``"load"``, ``"store"`` or ``"atomic"``;
        ``size`` bytes a lane). A uniform load (``launch.uniform_access``: the same addresses in every
        program, made once) counts as made by every program of the batch.

        Raises:
            Unbatchable: two programs share an element that one of them writes.
        """
        space = launch.space
        order = launch.batch.order
        uniform = launch.uniform_access
        if uniform:
            order = order[[0, -1]] if order.shape[0] > 1 else order
        for region, sel in space._groups(res):
            storage = region.storage
            key = id(storage)
            g = space.cell_bytes(storage)
            ncells = -(-storage.nbytes // g)
            lanes = res._lanes if sel is None else res.lanes[sel]
            span = sel is None and size == g and res.contiguous(size)
            if span:  # consecutive cells from res.lo: entered by the first and the count, not lane by lane
                off = np.array([res.lo], dtype=np.int64)
                n = res.n
            elif sel is None and res.single_slot >= 0:  # made when entered (a summary takes their ends only)
                off, n = _Offsets(res), res.n
            else:
                off = res.off if sel is None else res.off[sel]
                n = off.shape[0]
            item = (off, n, lanes, res.per, order, size, g, ncells, uniform, span)
            if key in self.summary:
                # the lanes' extremes: known already where every lane of one slot is in (no pass over them)
                ends = (res.lo, res.hi) if sel is None and res.single_slot >= 0 else None
                if kind == "load" and key not in self.written and not span:
                    self._widen(key, off, size, ends)
                    continue
                if kind != "load":
                    self._check_summary(key, off, size, ends)
            if kind == "load" and key not in self.written:
                if not span:  # a span is entered by its first cell and length: its offsets are not held
                    self.pending_lanes += n
                self.pending.setdefault(key, []).append(item)
                if self.pending_lanes > _PENDING_LANES:
                    self._summarize_pending()
                continue
            runs = self.runs.get(key)
            as_runs = kind != "atomic" and not uniform and size == g
            if runs is None and kind == "store" and as_runs and key not in self.written:
                runs = self._start_runs(key, storage.nbytes)  # an output, or each program's own cells updated
            if runs is not None:
                if as_runs:
                    cut = _item_runs(item, storage.nbytes, res if sel is None else None)
                    if cut is not None and runs.add(*cut, self.why, store=kind == "store"):
                        continue
                self._materialize(key, ncells)  # an atomic, scattered lanes, shared loads: cells from now on
            owners = self._owners(key, ncells)
            if key not in self.written:
                self.written.add(key)
                for pending in self.pending.pop(key, []):
                    self._enter_lazy(owners, pending, _LOAD)
                self.pending_lanes = sum(0 if i[9] else i[1] for v in self.pending.values() for i in v)
            self._enter_lazy(owners, item, {"load": _LOAD, "store": _STORE}.get(kind, _ATOMIC))

    def _start_runs(self, key: int, nbytes: int) -> Optional[_Runs]:
        """The first write to a storage: keep it as runs, its pending loads (if any) entered as load
        runs; None (nothing changed) where a pending load is not one run per program (see
        :func:`_item_runs`) or two programs load one cell."""
        runs = _Runs()
        for item in self.pending.get(key, ()):
            cut = _item_runs(item, nbytes)
            if cut is None or not runs.add(*cut, self.why, store=False):
                return None
        if self.pending.pop(key, None):
            self.pending_lanes = sum(0 if i[9] else i[1] for v in self.pending.values() for i in v)
        self.runs[key] = runs
        self.written.add(key)
        return runs

    def _materialize(self, key: int, ncells: int) -> None:
        """Turn a storage's runs into cells (each stored or loaded by its run's program)."""
        runs = self.runs.pop(key)
        owners = self._owners(key, ncells)
        for (cells, pids), bit in ((runs.cells(), _STORE), (runs.load_cells(), _LOAD)):
            if cells.shape[0]:
                self._enter(owners, owners.index(cells), pids, bit, False)

    def _owners(self, key: int, ncells: int) -> _Owners:
        owners = self.owners.get(key)
        if owners is None:
            owners = self.owners[key] = _Owners(ncells)
        return owners

    def _summarize_pending(self) -> None:
        """Too many lanes of loads are pending: keep of each storage's scattered loads only the range
        of bytes they read (a matmul's or an attention's inputs, read by every program and never
        written, then cost two numbers), except for the storages in ``precise``, whose loads are
        entered. Loads of consecutive elements (spans) stay pending: they are held as a first cell
        and a length. A later write inside a storage's range raises :class:`NeedPrecise`: the
        launch is run again with that storage's loads entered."""
        kept: Dict[int, list] = {}
        for key, items in self.pending.items():
            if key in self.precise:
                owners = self._owners(key, items[0][7])
                self.written.add(key)  # entered from now on
                for item in items:
                    self._enter_lazy(owners, item, _LOAD)
                continue
            spans = [item for item in items if item[9]]
            for item in items:
                if not item[9]:
                    self._widen(key, item[0], item[5])
            if spans:
                kept[key] = spans
        self.pending = kept
        self.pending_lanes = 0

    def _widen(self, key: int, off: np.ndarray, size: int, ends=None) -> None:
        """Widen a storage's summarized load range to take in the lanes at byte offsets ``off``
        (``ends``: their smallest and largest, where known)."""
        if off.shape[0] == 0:
            return
        lo, hi = ends if ends is not None else (int(off.min()), int(off.max()))
        hi += size
        old = self.summary.get(key)
        self.summary[key] = (lo, hi) if old is None else (min(old[0], lo), max(old[1], hi))

    def _check_summary(self, key: int, off: np.ndarray, size: int, ends=None) -> None:
        """A write to a storage with summarized loads: it must land outside their range (``ends``:
        the smallest and largest of ``off``, where known).

        Raises:
            NeedPrecise: it lands inside: whether it conflicts takes the loads themselves.
        """
        lo, hi = self.summary[key]
        if not off.shape[0]:
            return
        first, last = ends if ends is not None else (int(off.min()), int(off.max()))
        if first < hi and last + size > lo:
            raise NeedPrecise(key)

    def _enter_lazy(self, owners: _Owners, item, bit: int) -> None:
        off, n, lanes, per, order, size, g, ncells, uniform, span = item
        if uniform:  # every program of the batch: the first one owns the cells, the last one shares them
            for pid in order.tolist():
                self._enter_lazy(owners, (off, n, lanes, per, np.array([pid]), size, g, ncells, False, span), bit)
            return
        pids = _lane_pids(lanes, per, order, n)
        if span:  # consecutive elements: slices of the pools instead of gathers
            c0 = int(off[0]) // g
            for pool, part, fresh in owners.spans(c0, c0 + n):
                self._enter(owners, pool, pids[part], bit, fresh)
            return
        cells = element_cells(off.res.off if isinstance(off, _Offsets) else off, size, g, ncells)
        if size > g:
            pids = np.repeat(pids, size // g)
        self._enter(owners, owners.index(cells), pids, bit, False)

    def _enter(self, owners: _Owners, pos, pids: np.ndarray, bit: int, fresh: bool) -> None:
        """Enter one access's elements (pool positions ``pos``: an index array, or a slice of distinct
        cells) and the execution index of the program of each (``pids``)."""
        if fresh:  # cells nothing touched: this access owns them
            owners.own[pos] = pids
            owners.flags[pos] = bit
            if bit == _ATOMIC:
                owners.need("aseq")[pos] = pids
            return
        own = owners.own
        flags = owners.flags
        if isinstance(pos, slice):
            o = own[pos]  # views: written through
            new = o == _NONE
            if new.any():
                o[new] = pids[new]
            shared = o != pids
            f = flags[pos]
            if shared.any():
                f[shared] |= _SHARED
            f |= bit
            if bit == _ATOMIC:
                a = owners.need("aseq")[pos]
                late = pids < a
                if late.any():
                    f[late] |= _LATE
                a[:] = pids
        else:
            o = own[pos]
            new = o == _NONE
            if new.any():
                own[pos[new]] = pids[new]  # duplicates: one of them owns the cell, the others share it
            shared = own[pos] != pids
            if shared.any():
                flags[pos[shared]] |= _SHARED
            flags[pos] |= bit
            if bit == _ATOMIC:  # atomics apply in the order programs run: each element's must be increasing
                late = pids < owners.need("aseq")[pos]
                if late.any():
                    flags[pos[late]] |= _LATE
                owners.aseq[pos] = pids  # lanes come in program order: the last one per element is the latest
            f = flags[pos]
        bad = (f & _SHARED) != 0
        if bad.any():
            f = f[bad]
            conflict = (f & (_STORE | _LATE)) | ((f & _ATOMIC) * ((f & _LOAD) != 0))
            if conflict.any():
                raise Unbatchable(f"programs of one launch share an element that one of them writes: {self.why}")


    def footprint(self, cell_bytes: Dict[int, int]) -> Dict[int, tuple]:
        """What the watched programs touched, per storage (by ``id``), for comparing with what other
        processes' programs touched (:mod:`.shares`): ``{key: (written, touched)}``, each an interval
        list ``(lo, hi)`` of cells (int64 arrays, sorted, disjoint, ``hi`` exclusive; a cell is the
        storage's element as :meth:`~tritonkit.check.memory.AddressSpace.cell_bytes` gives it).
        ``written``: cells stored to or updated by an atomic; ``touched``: those and every cell loaded
        (scattered loads of a storage these programs never wrote count as their whole byte range:
        another process's write there is taken for a conflict). ``cell_bytes``: each storage's
        cell size in bytes, by ``id``."""
        out: Dict[int, tuple] = {}
        empty = np.zeros(0, dtype=np.int64)

        def add(key, lo, hi, written):
            w, t = out.setdefault(key, ([], []))
            t.append((lo, hi))
            if written:
                w.append((lo, hi))
        for key, runs in self.runs.items():
            add(key, runs.lo, runs.hi, True)
            add(key, runs.load_lo, runs.load_hi, False)
        for key, owners in self.owners.items():
            pages = np.flatnonzero(owners.page_slot >= 0)
            if not pages.shape[0]:
                continue
            flags = owners.flags.reshape(-1, PAGE)[owners.page_slot[pages]]
            add(key, *_page_runs(flags != 0, pages), False)
            add(key, *_page_runs((flags & (_STORE | _ATOMIC)) != 0, pages), True)
        for key, items in self.pending.items():
            for off, n, _lanes, _per, _order, size, g, ncells, _uniform, span in items:
                if span:
                    c0 = int(off[0]) // g
                    add(key, np.array([c0]), np.array([c0 + n]), False)
                elif off.shape[0]:  # scattered loads of a storage nothing here wrote: their byte range
                    add(key, np.array([int(off.min()) // g]), np.array([-(-(int(off.max()) + size) // g)]), False)
        for key, (lo, hi) in self.summary.items():  # a byte range: the cells it falls in
            g = cell_bytes[key]
            add(key, np.array([lo // g]), np.array([-(-hi // g)]), False)
        return {key: (_union(w) if w else (empty, empty), _union(t)) for key, (w, t) in out.items()}


def _page_runs(mask: np.ndarray, pages: np.ndarray):
    """The runs ``(lo, hi)`` of cells set in ``mask`` (bool ``(len(pages), PAGE)``: one row per page,
    ``pages`` their numbers), without an array of cell numbers (a page's runs end with it)."""
    width = PAGE + 1
    flat = np.zeros((mask.shape[0], width), dtype=np.int8)
    flat[:, :PAGE] = mask
    edges = np.diff(flat.reshape(-1), prepend=np.int8(0))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    return ((pages[starts // width] << PAGE_BITS) + starts % width,
            (pages[ends // width] << PAGE_BITS) + ends % width)


def _union(parts):
    """The union of interval lists ``[(lo, hi), ...]`` as one sorted, disjoint list."""
    lo = np.concatenate([p[0] for p in parts]).astype(np.int64)
    hi = np.concatenate([p[1] for p in parts]).astype(np.int64)
    if not lo.shape[0]:
        return lo, hi
    order = np.argsort(lo, kind="stable")
    lo, hi = lo[order], hi[order]
    reach = np.maximum.accumulate(hi)
    starts = np.flatnonzero(np.r_[True, lo[1:] > reach[:-1]])
    return lo[starts], np.maximum.reduceat(reach, starts)


def _lane_pids(lanes, per: int, order: np.ndarray, n: int) -> np.ndarray:
    """The execution index (int32) of the program of each of ``n`` active lanes (``lanes``: their
    flat indices into the batch's block, None for all; ``per`` lanes a program)."""
    if lanes is None:
        if per == 1:
            return order.astype(np.int32)
        return np.repeat(order.astype(np.int32), per)
    if per & (per - 1) == 0:  # a block of a power-of-two size (Triton's): a shift, not a division
        return order.astype(np.int32)[lanes >> (int(per).bit_length() - 1)]
    return order.astype(np.int32)[lanes // per]


