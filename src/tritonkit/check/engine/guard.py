"""The batched engine's guard: which programs of a batch (or of the whole launch) touch which
elements, to tell when running them interleaved would differ from running them one after another."""
from __future__ import annotations

from typing import Dict, Optional, Tuple

import numpy as np

from ..errors import Unbatchable
from ..memory import PagedCells, element_cells
from ..memory.cells import PAGE, PAGE_BITS
from .runs import Runs, as_runs, lane_pids, lane_runs, row_runs, span_runs

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


def _item_runs(item, nbytes: int, res=None):
    """The runs of one access (``item``: as :meth:`Guard.access` holds it; ``res``: its resolved
    lanes where they are all in the storage, for the ways that need no pass over the lanes), in
    cells of a storage of ``nbytes`` bytes; None where its lanes are wider or narrower than a cell,
    it counts for every program (uniform), or it makes too many runs (see :func:`as_runs`)."""
    off, n, lanes, per, order, size, g, ncells, uniform, span = item
    if uniform or size != g or not n:
        return None
    if res is None and isinstance(off, _Offsets):
        res = off.res
    if res is not None and lanes is None:
        cut = span_runs(res, order, g, nbytes) if span else row_runs(res, order, g, ncells)
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
        return as_runs(cells, lane_pids(lanes, per, order, n), min(n, order.shape[0]))
    return lane_runs(every, ends[0], n, lanes, per, order, g)


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
        # id(storage) -> Runs: storages whose programs so far touch only elements of their own, as runs
        self.runs: Dict[int, Runs] = {}

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
            runs_ok = kind != "atomic" and not uniform and size == g
            if runs is None and kind == "store" and runs_ok and key not in self.written:
                runs = self._start_runs(key, storage.nbytes)  # an output, or each program's own cells updated
            if runs is not None:
                if runs_ok:
                    cut = _item_runs(item, storage.nbytes, res if sel is None else None)
                    if cut is not None and runs.add(*cut, self.why, store=kind == "store"):
                        continue
                self._materialize(key, ncells)  # an atomic, scattered lanes, shared loads: cells from now on
            owners = self._owners(key, ncells)
            if key not in self.written:
                self.written.add(key)
                for pending in self._take_pending(key):
                    self._enter_lazy(owners, pending, _LOAD)
            self._enter_lazy(owners, item, {"load": _LOAD, "store": _STORE}.get(kind, _ATOMIC))

    def _take_pending(self, key: int) -> list:
        """The storage's pending loads, no longer pending (the count of pending lanes updated)."""
        items = self.pending.pop(key, [])
        if items:
            self.pending_lanes = sum(0 if i[9] else i[1] for v in self.pending.values() for i in v)
        return items

    def _start_runs(self, key: int, nbytes: int) -> Optional[Runs]:
        """The first write to a storage: keep it as runs, its pending loads (if any) entered as load
        runs; None (nothing changed) where a pending load is not one run per program (see
        :func:`_item_runs`) or two programs load one cell."""
        runs = Runs()
        for item in self.pending.get(key, ()):
            cut = _item_runs(item, nbytes)
            if cut is None or not runs.add(*cut, self.why, store=False):
                return None
        self._take_pending(key)
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
        pids = lane_pids(lanes, per, order, n)
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
