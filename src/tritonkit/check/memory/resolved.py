"""One access's lanes resolved against the address space (:class:`Resolved`), and the passes that
tell evenly spaced lanes from others (:func:`in_slot`). Made by :mod:`.space` (from addresses) and
:mod:`.operands` (from a pointer block's operands)."""
from __future__ import annotations

from typing import Optional, Tuple

import numpy as np

from .layout import SLOT_HALF

_CHUNK = 1 << 16
_FIRST_CHUNK = 1 << 10
_MAX_STEP = 16  # the widest element an access moves (bytes): a larger even step is no contiguous access


def steps_are(off: np.ndarray, step: int) -> bool:
    """Whether consecutive elements of ``off`` (integers, 1-D) differ by ``step``, compared in chunks
    that stay in cache (and stop at the first chunk that differs; the first is short, so that an
    access whose first lanes only are consecutive, a row of a tile, costs little)."""
    n = off.shape[0]
    if n < 2:
        return True
    buf = np.empty(min(_CHUNK, n - 1), dtype=off.dtype)  # an int32 step that wraps: the caller checks the ends
    i = 0
    while i < n - 1:
        j = min(n - 1, i + (_FIRST_CHUNK if i == 0 else _CHUNK))
        d = buf[: j - i]
        np.subtract(off[i + 1:j + 1], off[i:j], out=d)
        if not (d == step).all():
            return False
        i = j
    return True


class Resolved:
    """Addresses of the active lanes of one access, resolved against the address space.

    Attributes:
        n: number of active lanes.
        lanes: flat indices (into the access's block) of the active lanes, ascending (the guard
            finds each program's first lane by bisection).
        slot: int64 slot of each active lane (0 or past the last region: no argument).
        off: int64 byte offset of each active lane from byte 0 of its slot's storage (made on first
            read where the resolver knew the rest without it).
        ok: bool per active lane, whether it may be performed (the checks clear lanes).
        single_slot: the slot every lane is in, or -1 if they differ.
        lo, hi: the smallest and largest ``off`` (only meaningful when ``single_slot >= 0``).
        aligned: every lane's ``off`` is a multiple of the access size (set by a check, or by the
            resolver where a pointer block's bases prove it).
        programs: ``(programs, lanes a program)`` where the active lanes are every lane of those
            programs (int64, in order) of a block of programs x lanes (a divergent loop's active
            ones, found by the resolver), else None.
    """

    __slots__ = ("n", "_lanes", "_slot", "_off", "_ok", "single_slot", "lo", "hi", "aligned", "per", "_contig",
                 "_index", "_rows", "_cols", "programs")

    def __init__(self, lanes, slot, off, single_slot: int, lo: int = 0, hi: int = 0):
        # off: an int64 array, or ``(n, make)`` where ``make()`` returns it (made when first read)
        if isinstance(off, tuple):
            self.n, self._off = off
        else:
            self.n, self._off = off.shape[0], off
        self._lanes = lanes  # None: all lanes of the block, in order
        self._slot = slot  # None: all in single_slot
        self._ok = None  # None: all ok
        self.single_slot = single_slot
        self.lo, self.hi = lo, hi
        self.aligned = False
        self.per = 0  # batched engine: lanes per program (the block's size); lane // per is the program
        self._contig = None  # (size, whether contiguous), see contiguous()
        self._index = None  # (size, make): element indices of every lane (see element_index)
        self._rows = None  # (size, row length, make): the first element of each row (see rows)
        self._cols = None  # (size, column length, columns a block, make): the first of each column (see cols)
        self.programs = None  # see the class's attributes (set by operands.resolve_sum)

    @property
    def off(self) -> np.ndarray:
        """The byte offset of each active lane from byte 0 of its slot's storage (int64 ``(n,)``)."""
        off = self._off
        if not isinstance(off, np.ndarray):
            off = self._off = off()
        return off

    @property
    def all_lanes(self) -> bool:
        """Whether every lane of the block is active (no mask cleared one)."""
        return self._lanes is None

    @property
    def lanes(self) -> np.ndarray:
        """Flat indices into the block of the active lanes (int64 ``(n,)``)."""
        return np.arange(self.n) if self._lanes is None else self._lanes

    @property
    def slot(self) -> np.ndarray:
        """The slot of each active lane (int64 ``(n,)``)."""
        return np.full(self.n, self.single_slot, dtype=np.int64) if self._slot is None else self._slot

    @property
    def ok(self) -> np.ndarray:
        """Whether each active lane may be performed (bool ``(n,)``: the checks clear lanes)."""
        return np.ones(self.n, dtype=bool) if self._ok is None else self._ok

    def contiguous(self, size: int) -> bool:
        """Whether the active lanes, in lane order, are consecutive ``size``-byte elements of one
        slot (``off == lo + size * arange(n)``, ``lo`` a multiple of ``size``): then memory and the
        checks' per-element state are read and written as slices. Cached per ``size``; lanes the
        checks cleared (``ok``) do not change it."""
        c = self._contig
        if c is not None and c[0] == size:
            return c[1]
        n = self.n
        yes = self.single_slot >= 0 and n > 0 and self.lo % size == 0 and self.hi - self.lo == (n - 1) * size
        if yes:
            rows = self.rows(size)
            if rows is not None:  # every lane, as rows: consecutive when each row starts where the last ended
                starts, length = rows
                yes = starts.shape[0] < 2 or bool((starts[1:] - starts[:-1] == length).all())
            else:
                yes = steps_are(self.off, size)
        self._contig = (size, yes)
        return yes

    def element_index(self, size: int) -> Optional[np.ndarray]:
        """Every lane's index into its storage as ``size``-byte elements (int64 ``(n,)``), where the
        resolver can make it without the byte offsets (from a pointer block's operands, see
        :meth:`AddressSpace.resolve_sum`); None otherwise."""
        got = self._index
        if got is None or got[0] != size or isinstance(self._off, np.ndarray):
            return None
        if not isinstance(got[1], np.ndarray):
            got = self._index = (size, got[1]())
        return got[1]

    def rows(self, size: int) -> Optional[Tuple[np.ndarray, int]]:
        """``(starts, length)``: the lanes are rows of ``length`` consecutive ``size``-byte elements
        (the block's last axis), row ``i`` starting at element ``starts[i]`` of its storage (int64);
        None where the resolver did not find so from a pointer block's operands."""
        got = self._rows
        if got is None or got[0] != size:
            return None
        if not isinstance(got[2], np.ndarray):
            got = self._rows = (size, got[1], got[2]())
        return got[2], got[1]

    def cols(self, size: int) -> Optional[Tuple[np.ndarray, int, int]]:
        """``(starts, length, width)``: the lanes are a block of ``(..., length, width)`` whose
        columns (the second-to-last axis) are ``length`` consecutive ``size``-byte elements (a tile
        loaded transposed), column ``j`` of leading block ``i`` starting at element
        ``starts[i * width + j]`` of its storage (int64); None where the resolver did not find so."""
        got = self._cols
        if got is None or got[0] != size:
            return None
        if not isinstance(got[3], np.ndarray):
            got = self._cols = (size, got[1], got[2], got[3]())
        return got[3], got[1], got[2]

    def keep(self, keep: Optional[np.ndarray]) -> None:
        """Clear the lanes where ``keep`` is False (None keeps all)."""
        if keep is not None:
            self._ok = keep if self._ok is None else (self._ok & keep)


def runs_within(starts: np.ndarray, length: int, n: int) -> bool:
    """Whether every run of ``length`` elements starting at ``starts`` (the rows or columns of
    :meth:`Resolved.rows` / :meth:`Resolved.cols`) lies inside elements ``[0, n)`` of a storage (and
    there is at least one)."""
    return bool(starts.shape[0]) and length <= n and int(starts.min()) >= 0 and int(starts.max()) <= n - length


def in_slot(lanes, off: np.ndarray, s0: int) -> Optional[Resolved]:
    """The lanes ``lanes`` with byte offsets ``off`` (int64) from slot ``s0``'s byte 0, resolved
    into that slot; None where one lies outside it."""
    n = off.shape[0]
    step = int(off[1]) - int(off[0]) if n > 1 else 0
    if 0 < step <= _MAX_STEP and int(off[-1]) - int(off[0]) == (n - 1) * step \
            and steps_are(off, step):  # evenly spaced (consecutive elements):
        lo, hi = int(off[0]), int(off[-1])  # the ends are the extremes, no pass for min and max
        contig = (step, lo % step == 0)
    else:
        lo, hi = int(off.min()), int(off.max())
        contig = None
    if lo < -SLOT_HALF or hi >= SLOT_HALF:
        return None
    res = Resolved(lanes, None, off, s0, lo, hi)
    if contig is not None:
        res._contig = contig
    return res
