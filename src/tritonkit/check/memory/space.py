"""The checked interpreter's memory: a virtual address space with one region per tensor argument.

Triton's own interpreter hands a kernel real host addresses and dereferences them in C++, so a
stray lane reads heap garbage or corrupts the heap. Here every tensor argument of a launch gets
its own 1 TiB slot of a *virtual* address space; the kernel only ever sees virtual addresses, and
every load and store is translated back to (argument, byte offset) before numpy touches the host
copy of the argument's storage. So:

* any address maps to exactly one argument (its provenance), also when it overruns the tensor by
  up to 512 GiB in either direction, which is what lets a finding name the argument;
* two arguments that are views of one storage get two slots mapped onto the same host bytes, so
  aliasing behaves as on the GPU;
* nothing outside a storage is ever read or written, whatever the kernel computes.

Nothing in this module reports findings: it resolves addresses and moves bytes. The checks
(``checks/``) decide which lanes are allowed.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional, Tuple

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .layout import SLOT_HALF, SLOT_SHIFT, HostStorage, Layout, Region
from .operands import OffsetStats, resolve_sum
from .resolved import Resolved, in_slot, runs_within

_SHIFT_OF = {2: 1, 4: 2, 8: 3, 16: 4}


class Write:
    """One journaled write of a transaction: the old values of ``arr[idx]`` (``arr``: the bytes of
    ``storage``, viewed as the written type), put back when called.

    Attributes:
        storage: the :class:`HostStorage` written.
        nbytes: what the entry keeps alive (indices and old values), in bytes.
    """

    __slots__ = ("storage", "arr", "idx", "old", "length")

    def __init__(self, storage: HostStorage, arr: np.ndarray, idx, old: np.ndarray, length: int = 0) -> None:
        # length > 0: idx are the first elements of rows of that many (old: one row of values each)
        self.storage, self.arr, self.idx, self.old, self.length = storage, arr, idx, old, length

    def __call__(self) -> None:
        self._target(self.arr)[self.idx] = self.old

    def _target(self, arr: np.ndarray) -> np.ndarray:
        return row_windows(arr, self.length, writeable=True) if self.length else arr

    @property
    def nbytes(self) -> int:
        return self.old.nbytes + (self.idx.nbytes if isinstance(self.idx, np.ndarray) else 0)

    def undo_into(self, buf: np.ndarray) -> None:
        """Put the old values back into ``buf``, a copy of the storage's bytes (uint8)."""
        view = buf[: self.arr.shape[0] * self.arr.itemsize].view(self.arr.dtype)
        self._target(view)[self.idx] = self.old


def row_windows(typed: np.ndarray, length: int, writeable: bool = False) -> np.ndarray:
    """Every run of ``length`` consecutive elements of the 1-D array ``typed`` (at least ``length``
    long: :func:`~.resolved.runs_within` checks the runs first), as a 2-D view of shape
    ``(len(typed) - length + 1, length)``, row ``i`` being ``typed[i:i + length]``; written through
    only with ``writeable``. Rows of a tile are read or written whole by their first elements.
    Measured on the CPU machine (2026-11-27): a gather through it took a third of the time of an
    index per lane."""
    return as_strided(typed, (typed.shape[0] - length + 1, length), (typed.strides[0],) * 2, writeable=writeable)


class AddressSpace:
    """All tensor arguments of one launch, mapped into the virtual address space."""

    def __init__(self) -> None:
        self.regions: List[Region] = []
        self.storages: Dict[Tuple[str, int], HostStorage] = {}
        # while the batched engine runs a transaction: the undo list every write is journaled into,
        # and what it is told before a storage's first journaled write (its bytes still untouched)
        self.journal: Optional[list] = None
        self.first_write: Optional[Callable[[HostStorage], None]] = None
        #: raw addresses (a pointer table's ``data_ptr()`` values) -> (slot, storage base address) per
        #: address, slot 0 where none: maps the live tensors they point into (see
        #: :class:`~tritonkit.check.launch.arguments.RawPointers`); None: not looked up
        self.foreign: Optional[Callable[[np.ndarray], Tuple[np.ndarray, np.ndarray]]] = None
        #: writes that changed memory so far (stores; atomics that changed a value): a program that
        #: polls one address while this stays the same is waiting for a change nothing will make
        self.changes = 0
        # offsets arrays' extremes and order, kept for a batch (see resolve_sum)
        self._stats = OffsetStats()

    def _journal(self, storage: HostStorage, arr: np.ndarray, idx, length: int = 0) -> None:
        """Remember the values at ``arr[idx]`` (``arr``: ``storage``'s bytes, typed or not; ``idx``
        an index array or a slice; ``length`` > 0: ``idx`` are the first elements of rows of that
        many, see :func:`row_windows`) so that the running transaction can put them back."""
        if self.journal is not None:
            if self.first_write is not None:
                self.first_write(storage)
            if length:
                old = row_windows(arr, length)[idx]
            else:
                old = arr[idx].copy() if isinstance(idx, slice) else arr[idx]
            if isinstance(idx, np.ndarray) and arr.shape[0] <= np.iinfo(np.int32).max and idx.dtype.itemsize > 4:
                idx = idx.astype(np.int32)  # kept until the batch settles: half the bytes
            self.journal.append(Write(storage, arr, idx, old, length))

    def _written(self, storage: HostStorage) -> None:
        """A lane is about to write ``storage``; outside a transaction for good, so the one value its
        device found when it was copied (``HostStorage.fill``) no longer holds."""
        storage.written = True
        if self.journal is None:
            storage.fill = False

    def region(self, slot: int) -> Optional[Region]:
        """The region mapped in ``slot`` (1-based), or None for an address in no argument's slot."""
        if 1 <= slot <= len(self.regions):
            return self.regions[slot - 1]
        return None

    def cell_bytes(self, storage: HostStorage) -> int:
        """The element size (bytes) at which accesses to ``storage`` are compared: the smallest
        element type of the arguments mapped onto it."""
        return min(r.layout.itemsize for r in self.regions if r.storage is storage)

    def region_of(self, res: "Resolved") -> Optional[Region]:
        """The region of an access's first active lane (None when there is none, or it points into no
        argument)."""
        if res.n == 0:
            return None
        return self.region(res.single_slot if res.single_slot >= 0 else int(res.slot[0]))

    def add(self, name: str, storage: HostStorage, start: int, itemsize: int, shape, strides, dtype: str) -> Region:
        """Map a tensor argument (its view: ``start`` byte in ``storage``, ``itemsize`` bytes an
        element, ``shape`` and ``strides`` in elements, the torch ``dtype``'s name) into the next slot."""
        region = Region(slot=len(self.regions) + 1, name=name, shape=tuple(shape), strides=tuple(strides),
                        dtype=dtype, storage=storage, layout=Layout(start, itemsize, shape, strides))
        self.regions.append(region)
        return region

    def resolve(self, addrs: np.ndarray, mask: Optional[np.ndarray]) -> Resolved:
        """Resolve a block of addresses.

        Args:
            addrs: uint64 virtual addresses, any shape.
            mask: bool of the same shape (or broadcastable), or None for all lanes.
        """
        flat = addrs.reshape(-1) if addrs.dtype == np.uint64 else np.asarray(addrs, dtype=np.uint64).reshape(-1)
        lanes = None
        act = flat
        if mask is not None:
            m = mask if mask.shape == addrs.shape else np.broadcast_to(mask, addrs.shape)
            m = m.reshape(-1)
            if not m.all():
                lanes = np.flatnonzero(m)
                act = flat[lanes]
        if act.shape[0] == 0:
            return Resolved(lanes, None, np.zeros(0, dtype=np.int64), 0)
        s0 = int(act[0]) >> SLOT_SHIFT
        if 1 <= s0 <= len(self.regions):  # one slot, the common case: one subtraction (the base is < 2**63)
            res = in_slot(lanes, act.view(np.int64) - np.int64((s0 << SLOT_SHIFT) + SLOT_HALF), s0)
            if res is not None:
                return res
        slot = (act >> np.uint64(SLOT_SHIFT)).astype(np.int64)
        off = (act - ((slot.astype(np.uint64) << np.uint64(SLOT_SHIFT)) + np.uint64(SLOT_HALF))).view(np.int64)
        if self.foreign is not None:
            self._map_foreign(act, slot, off)
            if slot.shape[0] and (slot == slot[0]).all() and 1 <= int(slot[0]) <= len(self.regions):
                return Resolved(lanes, None, off, int(slot[0]), int(off.min()), int(off.max()))
        return Resolved(lanes, slot, off, -1)

    def resolve_sum(self, base: np.ndarray, offsets: np.ndarray, size: int,
                    mask: Optional[np.ndarray]) -> Optional[Resolved]:
        """Resolve the addresses ``base + offsets * size`` without making them (see
        :mod:`tritonkit.check.interp.addresses`): what :meth:`resolve` returns for them, or None
        where this cannot tell it cheaply (lanes in several slots, offsets that could wrap) and the
        addresses are to be made and resolved (:func:`.operands.resolve_sum`).

        Args:
            base: uint64 addresses broadcastable to ``offsets.shape`` (one pointer, or one per
                program, is a broadcast view: its repeats cost nothing here).
            offsets: the element offsets, an integer array of the block's shape.
            size: bytes an element.
            mask: bool, broadcastable to the block, or None for all lanes.
        """
        return resolve_sum(len(self.regions), self._stats, base, offsets, size, mask)


    def new_batch(self) -> None:
        """Forget what :meth:`resolve_sum` kept of the last batch's offsets."""
        self._stats.clear()

    def _map_foreign(self, act: np.ndarray, slot: np.ndarray, off: np.ndarray) -> None:
        """Lanes in no argument's slot whose address is a raw address inside a live tensor (a
        pointer table): their slot and offset become that tensor's region's (in place)."""
        stray = np.flatnonzero((slot < 1) | (slot > len(self.regions)))
        if stray.shape[0] == 0:
            return
        found, base = self.foreign(act[stray])
        hit = found > 0
        if hit.any():
            idx = stray[hit]
            slot[idx] = found[hit]
            off[idx] = (act[idx] - base[hit].astype(np.uint64)).view(np.int64)

    def in_storage(self, res: Resolved, size: int) -> Optional[np.ndarray]:
        """Lanes whose ``size`` bytes lie inside their slot's storage (the bare safety condition).

        Returns None when every lane does.
        """
        if res.single_slot >= 0:
            region = self.region(res.single_slot)
            if region is None:
                return np.zeros(res.n, dtype=bool)
            if res.lo >= 0 and res.hi + size <= region.storage.nbytes:
                return None
            return (res.off >= 0) & (res.off + size <= region.storage.nbytes)
        nbytes = np.zeros(len(self.regions) + 2, dtype=np.int64)
        nbytes[1:len(self.regions) + 1] = [r.storage.nbytes for r in self.regions]
        slot = np.clip(res.slot, 0, len(self.regions) + 1)
        return (res.off >= 0) & (res.off + size <= nbytes[slot]) & (res.slot == slot)

    def in_view(self, res: Resolved, size: int) -> Optional[np.ndarray]:
        """Lanes inside the view of their own argument or of another argument on the same storage.

        Returns None when every lane is.
        """
        if res.single_slot >= 0:
            region = self.region(res.single_slot)
            if region is None:
                return np.zeros(res.n, dtype=bool)
            layout = region.layout
            if layout.dense and res.n and res.lo >= layout.start and res.hi + size <= layout.end:
                return None
            ok = layout.valid(res.off, size)
            if not ok.all():
                for other in self.regions:
                    if other is not region and other.storage is region.storage:
                        bad = ~ok
                        ok[bad] = other.layout.valid(res.off[bad], size)
            return ok
        ok = np.zeros(res.n, dtype=bool)
        for slot in np.unique(res.slot):
            if self.region(int(slot)) is None:
                continue
            sel = res.slot == slot
            off = res.off[sel]
            sub = Resolved(None, None, off, int(slot), int(off.min()), int(off.max()))
            sub_ok = self.in_view(sub, size)
            ok[sel] = True if sub_ok is None else sub_ok
        return ok

    # --- moving bytes (lanes already filtered by ``res.ok``) ---------------------------------------
    def _groups(self, res: Resolved):
        """Yield (region, selector into res arrays or None for all) for the lanes allowed by ``res.ok``."""
        if res.single_slot >= 0:
            region = self.region(res.single_slot)
            if region is None or res.n == 0:
                return
            if res._ok is None:
                yield region, None
            elif res._ok.any():
                yield region, res._ok
            return
        ok = res.ok
        for slot in np.unique(res.slot[ok]):
            region = self.region(int(slot))
            if region is not None:
                yield region, ok & (res.slot == slot)

    @staticmethod
    def _lanes(res: Resolved, sel) -> np.ndarray:
        """Block lane indices of the lanes ``sel`` picks (None: all of ``res``)."""
        return res.lanes if sel is None else res.lanes[sel]

    @staticmethod
    def _index(region: Region, off: np.ndarray, dtype: np.dtype, aligned: bool):
        size = dtype.itemsize
        if size == 1:
            return region.storage.typed(dtype), off
        if aligned or not (off & (size - 1)).any():
            return region.storage.typed(dtype), off >> _SHIFT_OF[size]
        return None, None

    def _indexed(self, res: Resolved, sel, region: Region, dtype: np.dtype):
        """``(typed storage, element index of each selected lane, their byte offsets or None)``; the
        typed storage is None where the lanes are misaligned (then the offsets are given). The
        indices come from the resolver where it made them (:meth:`Resolved.element_index`)."""
        idx = res.element_index(dtype.itemsize) if sel is None else None
        if idx is not None:
            return region.storage.typed(dtype), idx, None
        off = res.off if sel is None else res.off[sel]
        typed, idx = self._index(region, off, dtype, res.aligned)
        return typed, idx, off

    @classmethod
    def _rows(cls, res: Resolved, sel, region: Region, dtype: np.dtype, whole: bool = False):
        """``(typed storage, row starts, row length)`` where every lane is allowed and the lanes are
        rows of consecutive elements inside the storage (:meth:`Resolved.rows`); else None."""
        return cls._inside("rows", res, sel, region, dtype, whole)

    @staticmethod
    def _inside(kind: str, res: Resolved, sel, region: Region, dtype: np.dtype, whole: bool = False):
        """``(typed storage,) + runs`` where every lane is allowed (``whole``: or every lane of some
        programs, :attr:`Resolved.programs`), the resolver found them to be runs of consecutive
        elements (``kind`` "rows": :meth:`Resolved.rows`, ``(starts, length)``; "cols":
        :meth:`Resolved.cols`, ``(starts, length, width)``) and every run lies inside the storage;
        else None."""
        if sel is not None or not (res.all_lanes or (whole and res.programs is not None and res._ok is None)):
            return None
        runs = getattr(res, kind)(dtype.itemsize)
        if runs is None:
            return None
        typed = region.storage.typed(dtype)
        if not runs_within(runs[0], runs[1], typed.shape[0]):
            return None
        return (typed,) + tuple(runs)

    @staticmethod
    def _span(res: Resolved, sel, dtype: np.dtype) -> Optional[slice]:
        """The element slice of the lanes' storage (as ``dtype``) that they cover, when they
        are all allowed and consecutive (see :meth:`Resolved.contiguous`); else None."""
        size = dtype.itemsize
        if sel is not None or not res.contiguous(size):
            return None
        start = res.lo // size
        return slice(start, start + res.n)

    def gather(self, res: Resolved, dtype: np.dtype, out_flat: np.ndarray) -> None:
        """Read the allowed lanes into ``out_flat`` (a flat array of ``dtype`` over the block)."""
        for region, sel in self._groups(res):
            span = self._span(res, sel, dtype)
            if span is not None:
                typed = region.storage.typed(dtype)
                if res.all_lanes:
                    out_flat[:] = typed[span]
                else:
                    out_flat[res.lanes] = typed[span]
                continue
            rows = self._rows(res, sel, region, dtype, whole=True)
            cols = self._inside("cols", res, sel, region, dtype, whole=True) if rows is None else None
            if rows is not None or cols is not None:
                # every lane, or every lane of some programs (a divergent loop's active ones): whole
                # rows through a view of every run of a row's length, or columns the same way, then
                # each block transposed
                into = out_flat if res.all_lanes else np.empty(res.n, dtype=dtype)
                if rows is not None:
                    typed, starts, length = rows
                    into.reshape(-1, length)[:] = row_windows(typed, length)[starts]
                else:
                    typed, starts, length, width = cols
                    got = row_windows(typed, length)[starts].reshape(-1, width, length)
                    into.reshape(-1, length, width)[:] = got.transpose(0, 2, 1)
                if into is not out_flat:
                    programs, per = res.programs
                    out_flat.reshape(-1, per)[programs] = into.reshape(-1, per)
                continue
            typed, idx, off = self._indexed(res, sel, region, dtype)
            if typed is not None:
                if sel is None and res.all_lanes:
                    out_flat[:] = typed[idx]
                else:
                    out_flat[self._lanes(res, sel)] = typed[idx]
            else:  # misaligned lanes (allowed only when checks are off): byte by byte
                size = dtype.itemsize
                raw = region.storage.buf[off[:, None] + np.arange(size)[None, :]]
                out_flat[self._lanes(res, sel)] = raw.copy().view(dtype).reshape(-1)

    def scatter(self, res: Resolved, values_flat: np.ndarray) -> None:
        """Write ``values_flat[lane]`` for the allowed lanes (later lanes win on duplicates)."""
        dtype = values_flat.dtype
        self.changes += 1
        for region, sel in self._groups(res):
            self._written(region.storage)
            vals = values_flat if (sel is None and res.all_lanes) else values_flat[self._lanes(res, sel)]
            span = self._span(res, sel, dtype)
            if span is not None:
                typed = region.storage.typed(dtype)
                self._journal(region.storage, typed, span)
                typed[span] = vals
                continue
            rows = self._rows(res, sel, region, dtype)
            if rows is not None:
                typed, starts, length = rows
                self._journal(region.storage, typed, starts, length)
                row_windows(typed, length, writeable=True)[starts] = vals.reshape(-1, length)
                continue
            typed, idx, off = self._indexed(res, sel, region, dtype)
            if typed is not None:
                self._journal(region.storage, typed, idx)
                typed[idx] = vals
            else:
                size = dtype.itemsize
                raw = np.ascontiguousarray(vals).view(np.uint8).reshape(-1, size)
                byte_idx = off[:, None] + np.arange(size)[None, :]
                self._journal(region.storage, region.storage.buf, byte_idx)
                region.storage.buf[byte_idx] = raw

    def read_modify_write(self, res: Resolved, dtype: np.dtype, fn) -> np.ndarray:
        """Apply ``new = fn(old, lanes)`` to the allowed lanes; return the old values.

        ``fn`` gets the old values and the positions (into ``res`` arrays) of those lanes. Lanes
        that hit the same element are applied one after another in lane order, as atomics are.

        Returns:
            the old value of every active lane (``dtype``, zeros where a lane was not allowed),
            in ``res.lanes`` order.
        """
        olds = np.zeros(res.n, dtype=dtype)
        for region, sel in self._groups(res):
            pos = np.arange(res.n) if sel is None else np.flatnonzero(sel)
            typed, idx = self._index(region, res.off[pos], dtype, res.aligned)
            if typed is None:
                continue  # misaligned atomics are dropped (the bounds check reports them)
            self._written(region.storage)
            self._journal(region.storage, typed, idx)
            order = np.argsort(idx, kind="stable")
            sidx = idx[order]
            dup = sidx[1:] == sidx[:-1]
            if not dup.any():
                old = typed[idx].copy()
                new = fn(old, pos)
                typed[idx] = new
                olds[pos] = old
                if not np.array_equal(np.asarray(new, dtype=typed.dtype).view(np.uint8), old.view(np.uint8)):
                    self.changes += 1
                continue
            # lanes that hit one element are applied one after another in lane order: in rounds, the
            # k-th lane of every element in round k
            starts = np.r_[0, np.flatnonzero(~dup) + 1]
            run = np.diff(np.r_[starts, sidx.shape[0]])
            for k in range(int(run.max())):
                live = run > k
                sel = order[starts[live] + k]
                i, p = idx[sel], pos[sel]
                old = typed[i].copy()
                typed[i] = fn(old, p)
                olds[p] = old
                self.changes += 1
        return olds
