"""Per-element state over a storage, paged: what the race check's shadow and the batched engine's
guard keep for every element a launch touches, costing memory only for the pages it touches."""
from __future__ import annotations

from typing import Dict, List, Tuple

import numpy as np


def element_cells(off: np.ndarray, size: int, g: int, ncells: int) -> np.ndarray:
    """Shadow cells (elements of ``g`` bytes) that accesses of ``size`` bytes at byte offsets ``off`` cover.

    Args:
        off: int64 byte offsets from the storage's first byte, one per lane, shape ``(n,)``.
        size: bytes per lane; a lane wider than a cell covers ``size // g`` consecutive cells.
        g: bytes per cell; ncells: cells in the storage (results are clipped to ``[0, ncells)``).
    Returns:
        a new int64 array: ``(n,)``, or ``(n * (size // g),)`` lane-major when ``size > g``.
    """
    cells = off // g  # a new array: the caller's offsets are never modified
    if size > g:
        cells = (cells[:, None] + np.arange(size // g)[None, :]).reshape(-1)
    np.clip(cells, 0, ncells - 1, out=cells)
    return cells


def interval_cells(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Every cell of the intervals ``[lo, hi)`` (int64 arrays; empty ones allowed), interval by
    interval, as one int64 array."""
    lengths = np.maximum(hi - lo, 0)
    starts = np.repeat(lo - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
    return starts + np.arange(int(lengths.sum()), dtype=np.int64)


PAGE_BITS = 14
PAGE = 1 << PAGE_BITS


class PagedCells:
    """Per-element (cell) arrays over one storage, paged: the cells are split into pages of
    ``2**14``, and only pages that are touched get memory, so state over a large table costs what a
    launch touches, not the table's size.

    Subclasses name their arrays in ``_FIELDS`` (name -> (initial value, numpy dtype)); each is an
    attribute holding the pool of all allocated pages. :meth:`index` maps cell numbers to positions
    in those pools.

    Args:
        ncells: cells in the storage (an int >= 0).
    """

    _FIELDS: Dict[str, Tuple[int, type]] = {}
    _LAZY: Dict[str, Tuple[int, type]] = {}  # fields allocated by :meth:`need` when first used

    def __init__(self, ncells: int) -> None:
        self.ncells = ncells
        self.page_slot = np.full(max(1, -(-ncells // PAGE)), -1, dtype=np.int64)
        self.used = 0
        self.cap = 0
        for name in list(self._FIELDS) + list(self._LAZY):
            setattr(self, name, None)
        self._grow(min(4, self.page_slot.shape[0]))

    def _grow(self, pages: int) -> None:
        # double (amortized growth), but never past the pages the storage has: a launch that touches
        # a whole storage ends with pools of exactly its size
        cap = max(pages, min(2 * self.cap, self.page_slot.shape[0]))
        for name, (init, dtype) in self._FIELDS.items():
            self._extend(name, cap, init, dtype)
        for name, (init, dtype) in self._LAZY.items():
            if getattr(self, name) is not None:
                self._extend(name, cap, init, dtype)
        self.cap = cap

    def need(self, name: str) -> np.ndarray:
        """The pool of the lazy field ``name``, allocated (initial values) on first use."""
        pool = getattr(self, name)
        if pool is None:
            init, dtype = self._LAZY[name]
            self._extend(name, self.cap, init, dtype)
            pool = getattr(self, name)
        return pool

    def _extend(self, name: str, cap: int, init: int, dtype) -> None:
        n = cap * PAGE
        old = getattr(self, name)
        if old is None:
            setattr(self, name, np.full(n, init, dtype=dtype))
            return
        setattr(self, name, None)  # ``old`` is then the pool's only reference
        start = old.shape[0]
        try:
            # realloc: a large pool grows where it is (mremap), without a second copy alive at once
            old.resize(n, refcheck=True)
            old[start:] = init
            new = old
        except ValueError:  # a view of the pool is alive elsewhere: grow by copying
            new = np.full(n, init, dtype=dtype)
            new[:start] = old
        except BaseException:  # out of memory: the pool stays as it was
            setattr(self, name, old)
            raise
        setattr(self, name, new)

    def index(self, cells: np.ndarray) -> np.ndarray:
        """Pool positions (int64) of cells (int64 array, each in ``[0, ncells)``), allocating the
        pages they fall in."""
        pages = cells >> PAGE_BITS
        lo, hi = int(pages.min()), int(pages.max())
        if lo == hi:
            slot = self.page_slot[lo]
            if slot < 0:
                slot = self._allocate(np.array([lo]))[0]
            return (int(slot) << PAGE_BITS) + (cells & (PAGE - 1))
        slots = self.page_slot[pages]
        if (slots < 0).any():
            self._allocate(np.unique(pages[slots < 0]))
            slots = self.page_slot[pages]
        return (slots << PAGE_BITS) + (cells & (PAGE - 1))

    def spans(self, c0: int, c1: int) -> List[Tuple[slice, slice, bool]]:
        """Pool positions of the consecutive cells ``[c0, c1)`` as slices, allocating the pages they
        fall in: one piece per run of pages that lie one after another in the pools (one piece when
        none of them was allocated yet: they are allocated now, in order).

        Returns:
            ``[(pool slice, slice of the range (0-based), fresh)]``: ``fresh`` is True when the piece's
            pages were allocated by this call, so its cells still hold the fields' initial values.
        """
        p0, p1 = c0 >> PAGE_BITS, ((c1 - 1) >> PAGE_BITS) + 1
        slots = self.page_slot[p0:p1]
        missing = slots < 0
        if missing.any():
            self._allocate(np.flatnonzero(missing) + p0)
            slots = self.page_slot[p0:p1]
        if p1 - p0 == 1:
            cuts = np.zeros(0, dtype=np.int64)
        else:
            cuts = np.flatnonzero((np.diff(slots) != 1) | (missing[1:] != missing[:-1])) + 1
        out = []
        for i, j in zip([0] + cuts.tolist(), cuts.tolist() + [p1 - p0]):
            lo = max(c0, (p0 + i) << PAGE_BITS)
            hi = min(c1, (p0 + j) << PAGE_BITS)
            base = (int(slots[i]) << PAGE_BITS) + (lo & (PAGE - 1))
            out.append((slice(base, base + hi - lo), slice(lo - c0, hi - c0), bool(missing[i])))
        return out

    def _allocate(self, pages: np.ndarray) -> np.ndarray:
        need = self.used + pages.shape[0]
        if need > self.cap:
            self._grow(need)
        slots = np.arange(self.used, need, dtype=np.int64)
        self.page_slot[pages] = slots
        self.used = need
        return slots
