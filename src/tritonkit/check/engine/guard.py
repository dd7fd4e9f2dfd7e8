"""The batched engine's guard: which programs of a batch (or of the whole launch) touch which
elements, to tell when running them interleaved would differ from running them one after another."""
from __future__ import annotations

from typing import Dict

import numpy as np

from ..errors import Unbatchable
from ..memory import PagedCells, element_cells

_NONE = -1
_LOAD, _STORE, _ATOMIC, _SHARED, _LATE = 1, 2, 4, 8, 16
_PENDING_LANES = 1 << 25  # lanes of loads the guard holds unentered (8 bytes each) before it enters them


class _Owners(PagedCells):
    """Per element (cell) of one storage the guard watches: the first program that touched it
    (``own``, an execution index), what was done to it (``flags``) and the latest program that made
    an atomic on it (``aseq``); paged like the race check's shadow (5 bytes a touched cell, 9 with
    atomics)."""

    _FIELDS = {"own": (_NONE, np.int32), "flags": (0, np.uint8)}
    _LAZY = {"aseq": (_NONE, np.int32)}  # only once an atomic is entered


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

    def __init__(self, why: str) -> None:
        self.why = why
        self.owners: Dict[int, _Owners] = {}
        # id(storage) -> loads not entered yet: (off, n, lanes, per, order, size, g, ncells, uniform, span)
        self.pending: Dict[int, list] = {}
        self.pending_lanes = 0
        self.written: set = set()

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
            off = res.off if sel is None else res.off[sel]
            lanes = res._lanes if sel is None else res.lanes[sel]
            span = sel is None and size == g and res.contiguous(size)
            item = (off, off.shape[0], lanes, res.per, order, size, g, ncells, uniform, span)
            if kind == "load" and key not in self.written:
                if span:  # a span is entered by its first cell and length: its offsets are not held
                    item = (off[:1].copy(),) + item[1:]
                else:
                    self.pending_lanes += off.shape[0]
                self.pending.setdefault(key, []).append(item)
                if self.pending_lanes > _PENDING_LANES:
                    self._enter_pending()
                continue
            owners = self._owners(key, ncells)
            if key not in self.written:
                self.written.add(key)
                for pending in self.pending.pop(key, []):
                    self._enter_lazy(owners, pending, _LOAD)
                self.pending_lanes = sum(0 if i[9] else i[1] for v in self.pending.values() for i in v)
            self._enter_lazy(owners, item, {"load": _LOAD, "store": _STORE}.get(kind, _ATOMIC))

    def _owners(self, key: int, ncells: int) -> _Owners:
        owners = self.owners.get(key)
        if owners is None:
            owners = self.owners[key] = _Owners(ncells)
        return owners

    def _enter_pending(self) -> None:
        """Enter every pending load (too many lanes are held)."""
        for key, items in self.pending.items():
            owners = self._owners(key, items[0][7])
            self.written.add(key)  # entered from now on
            for item in items:
                self._enter_lazy(owners, item, _LOAD)
        self.pending.clear()
        self.pending_lanes = 0

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
        cells = element_cells(off, size, g, ncells)
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


def _lane_pids(lanes, per: int, order: np.ndarray, n: int) -> np.ndarray:
    """The execution index (int32) of the program of each of ``n`` active lanes (``lanes``: their
    flat indices into the batch's block, None for all; ``per`` lanes a program)."""
    if lanes is None:
        if per == 1:
            return order.astype(np.int32)
        return np.repeat(order.astype(np.int32), per)
    return order.astype(np.int32)[lanes // per]


