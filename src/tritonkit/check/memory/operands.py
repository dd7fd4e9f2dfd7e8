"""Resolving a pointer block from its operands (``base + offsets * size``) instead of its addresses:
see :mod:`tritonkit.check.interp.addresses` for why, and :meth:`.space.AddressSpace.resolve_sum`
for what a caller gets."""
from __future__ import annotations

import math
from typing import Dict, Optional, Tuple

import numpy as np

from .layout import SLOT_HALF, SLOT_SHIFT
from .resolved import Resolved, in_slot, steps_are

_SMALL = 1 << 16  # a pointer block up to this size is looked at for one repeated pointer (a splat)
_MIN_ROW = 8  # rows of consecutive elements this long or longer are gathered whole


def _compact(a: np.ndarray, shape) -> np.ndarray:
    """``a`` broadcast to ``shape``, then cut to its first element along each axis it repeats over
    (stride 0): its distinct values, at full rank (size 1 where it repeats). A view."""
    if a.shape != shape:
        a = np.broadcast_to(a, shape)
    if 0 in a.strides:
        a = a[tuple(slice(0, 1) if st == 0 and n > 1 else slice(None) for st, n in zip(a.strides, a.shape))]
    return a


def _set_aligned(res: Optional["Resolved"], aligned: bool) -> Optional["Resolved"]:
    if res is not None:
        res.aligned = aligned
    return res


def _consecutive(db, bshape, oshape, shape, size: int) -> bool:
    """Whether ``db + offsets * size`` over ``shape`` is consecutive ``size``-byte elements in lane
    order, given that the offsets (compact shape ``oshape``) are consecutive in their own order and
    ``db`` (an int, or an int64 array of compact shape ``bshape``) varies over other axes: the
    offsets must span the trailing axes, and the per-row bases step by a row's bytes."""
    k = len(shape)
    while k > 0 and oshape[k - 1] == shape[k - 1]:
        k -= 1
    if any(d != 1 for d in oshape[:k]):
        return False  # the offsets repeat over an axis inside the trailing ones
    if isinstance(db, int):
        return k == 0 or all(d == 1 for d in shape[:k])
    if any(d != 1 for d in bshape[k:]):
        return False
    rows = db.reshape(-1)
    if rows.shape[0] != math.prod(shape[:k]):
        return False  # the base repeats over a leading axis
    row = math.prod(shape[k:]) * size
    return rows.shape[0] < 2 or (int(rows[-1]) - int(rows[0]) == (rows.shape[0] - 1) * row
                                 and steps_are(rows, row))


class OffsetStats:
    """What one batch's offsets arrays are (extremes, order), kept while the batch runs: the loads
    and the store of one block of offsets (``x + offs``, ``y + offs``, ``out + offs``) pass over it
    once. Each entry holds its array, so that its memory is not reused while the entry stands."""

    def __init__(self) -> None:
        self._kept: Dict[tuple, tuple] = {}

    def clear(self) -> None:
        """Forget every array (a new batch)."""
        self._kept.clear()

    def _kept_value(self, what: str, oc: np.ndarray, compute):
        """``compute(oc)``, kept for the batch under ``what`` and the array's memory, shape, strides
        and dtype (at most 4 entries)."""
        key = (what, oc.__array_interface__["data"][0], oc.shape, oc.strides, oc.dtype.str)
        got = self._kept.get(key)
        if got is None:
            if len(self._kept) >= 4:
                self._kept.clear()
            got = self._kept[key] = (oc, compute(oc))  # holds the array: its memory is not reused meanwhile
        return got[1]

    def extremes(self, oc: np.ndarray) -> Tuple[int, int, bool]:
        """``(smallest, largest, whether consecutive in lane order)`` of an integer offsets array."""
        return self._kept_value("extremes", oc, _extremes)

    def rows_consecutive(self, oc: np.ndarray) -> bool:
        """Whether each row (the last axis) of an integer offsets array is consecutive elements."""
        return self._kept_value("rows", oc, _rows_consecutive)


def _extremes(oc: np.ndarray) -> Tuple[int, int, bool]:
    flat = oc.reshape(-1)
    n = flat.shape[0]
    first, last = int(flat[0]), int(flat[-1])
    if n > 1 and last - first == n - 1 and steps_are(flat, 1):
        return first, last, True
    return int(flat.min()), int(flat.max()), n == 1


def _rows_consecutive(oc: np.ndarray) -> bool:
    length = oc.shape[-1]
    steps = np.diff(oc, axis=-1)  # an int32 step that wraps is caught by the rows' spans
    return bool((steps == 1).all()) and bool(
        ((oc[..., -1].astype(np.int64) - oc[..., 0].astype(np.int64)) == length - 1).all())


def resolve_sum(nslots: int, stats: OffsetStats, base: np.ndarray, offsets: np.ndarray, size: int,
                mask: Optional[np.ndarray]) -> Optional[Resolved]:
    """Resolve the addresses ``base + offsets * size`` without making them (see
    :mod:`tritonkit.check.interp.addresses`): what :meth:`.space.AddressSpace.resolve` returns for
    them, or None where this cannot tell it cheaply (lanes in several slots, offsets that could wrap)
    and the addresses are to be made and resolved.

    Lanes that are consecutive elements get their extremes and contiguity from the operands (no
    per-lane offsets are made until something reads ``off``); rows of consecutive elements get the
    first element of each row (:meth:`.resolved.Resolved.rows`); other aligned lanes get their element
    indices in one pass (:meth:`.resolved.Resolved.element_index`). A mask that switches whole
    programs off (a divergent loop's) resolves the active programs' lanes as a block of their own.

    Args:
        nslots: the address space's slots (its arguments).
        stats: the batch's kept offsets extremes (see :class:`OffsetStats`).
        base: uint64 addresses broadcastable to ``offsets.shape`` (one pointer, or one per
            program, is a broadcast view: its repeats cost nothing here).
        offsets: the element offsets, an integer array of the block's shape.
        size: bytes an element.
        mask: bool, broadcastable to the block, or None for all lanes.
    """
    shape = offsets.shape
    bc = _compact(base, shape)
    if 1 < bc.size <= _SMALL and (bc == bc.flat[0]).all():  # one pointer, made by a splat
        bc = bc.reshape(-1)[:1].reshape((1,) * len(shape))
    if bc.size == 0:
        return None
    s0 = int(bc.flat[0]) >> SLOT_SHIFT
    if not 1 <= s0 <= nslots:
        return None
    origin = (s0 << SLOT_SHIFT) + SLOT_HALF
    if bc.size == 1:
        db = int(bc.flat[0]) - origin
        dlo = dhi = db
    else:
        db = (bc - np.uint64(origin)).view(np.int64)
        dlo, dhi = int(db.min()), int(db.max())
    oc = _compact(offsets, shape)
    olo, ohi, linear = stats.extremes(oc)
    if dlo < -SLOT_HALF or dhi >= SLOT_HALF or olo * size < -SLOT_HALF or ohi * size >= SLOT_HALF:
        return None  # other slots, or products that may wrap: from the addresses
    # every lane is aligned when every base is: offsets * size are multiples of size
    aligned = (db if isinstance(db, int) else int(np.bitwise_or.reduce(db.reshape(-1)))) % size == 0

    def make() -> np.ndarray:  # every lane's byte offset, int64, flat
        out = np.multiply(np.broadcast_to(oc, shape), size, dtype=np.int64)
        out += db
        return out.reshape(-1)

    lanes = None
    if mask is not None and len(shape) > 1:
        mc = _compact(mask, shape)
        if mc.shape[0] == shape[0] > 1 and all(d == 1 for d in mc.shape[1:]):  # whole programs (a loop's)
            act = np.flatnonzero(mc.reshape(-1))
            if act.shape[0] == shape[0]:
                mask = None
            elif act.shape[0]:  # the active programs' lanes, as a block of their own
                sub = (act.shape[0],) + shape[1:]
                got = resolve_sum(nslots, stats, np.broadcast_to(bc[act] if bc.shape[0] > 1 else bc, sub),
                                       np.broadcast_to(oc[act] if oc.shape[0] > 1 else oc, sub), size, None)
                if got is not None:
                    per = math.prod(shape[1:])
                    got._lanes = (act[:, None] * per + np.arange(per)).reshape(-1)
                    got.programs = (act, per)
                return got
    if mask is not None:
        m = mask if mask.shape == shape else np.broadcast_to(mask, shape)
        m = m.reshape(-1)
        if not m.all():
            lanes = np.flatnonzero(m)
            if lanes.shape[0] == 0:
                return Resolved(lanes, None, np.zeros(0, dtype=np.int64), 0)
            return _set_aligned(in_slot(lanes, make()[lanes], s0), aligned)
    n = math.prod(shape)
    if n == 0:
        return Resolved(None, None, np.zeros(0, dtype=np.int64), 0)
    if any(b > 1 and o > 1 for b, o in zip(bc.shape, oc.shape)):  # not a sum over separate axes
        return _set_aligned(in_slot(None, make(), s0), aligned)
    lo, hi = dlo + olo * size, dhi + ohi * size
    if lo < -SLOT_HALF or hi >= SLOT_HALF:
        return None
    res = Resolved(None, None, (n, make), s0, lo, hi)
    res.aligned = aligned
    if linear and _consecutive(db, bc.shape, oc.shape, shape, size):
        res._contig = (size, lo % size == 0)
    elif aligned:  # gathers and scatters index elements: base // size + offsets, in one pass
        res._index = (size, lambda: np.add(np.broadcast_to(oc, shape), db // size, dtype=np.int64).reshape(-1))
        length = shape[-1]
        if length >= _MIN_ROW and bc.shape[-1] == 1 and oc.shape[-1] == length and stats.rows_consecutive(oc):
            # rows of consecutive elements (a tile's rows): a gather takes them whole, by their first
            starts = shape[:-1] + (1,)
            res._rows = (size, length, lambda: np.broadcast_to(np.add(oc[..., :1], db // size, dtype=np.int64),
                                                          starts).reshape(-1))
        elif (len(shape) >= 2 and shape[-2] >= _MIN_ROW and bc.shape[-2] == 1 and oc.shape[-2] == shape[-2]
              and stats.rows_consecutive(np.swapaxes(oc, -1, -2))):
            # columns of consecutive elements (a tile loaded transposed, K^T): gathered whole, by their first
            starts = shape[:-2] + (1, shape[-1])
            res._cols = (size, shape[-2], shape[-1], lambda: np.broadcast_to(
                np.add(oc[..., :1, :], db // size, dtype=np.int64), starts).reshape(-1))
    return res
