"""Runs: the intervals of a storage's elements the batched engine's guard (:mod:`.guard`) keeps
instead of per-element state while every program touches elements of its own, and the ways an
access's runs are found (from its lanes, from a span's first element, from a tile's rows, or from
where its offsets stop stepping by one element and where each program's first lane is).

The runs of an access, as these functions give them, are ``(lo, hi, pid)``: three arrays of one
entry per run, the run's first cell (int64), its end (int64, exclusive) and its program's execution
index (int32); a cell is an element of the storage (``g`` bytes). None of them raises but
:meth:`Runs.add`."""
from __future__ import annotations

import numpy as np

from ..errors import Unbatchable
from ..memory import interval_cells, runs_within

#: load runs a storage may hold and still take in runs out of order (each such access sorts them all:
#: a launch loading scalars in reverse program order would sort them once per batch); more: elements
MAX_SORTED_LOAD_RUNS = 1 << 16
#: an access is entered as runs (see :class:`Runs`) while it makes at most one run per this many lanes
LANES_PER_RUN = 16


class Runs:
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
        return _cells(self.lo, self.hi, self.pid)

    def load_cells(self):
        """Every cell of the loaded runs (int64) and the program of each (int32), run by run."""
        return _cells(self.load_lo, self.load_hi, self.load_pid)

    def add(self, lo: np.ndarray, hi: np.ndarray, pid: np.ndarray, why: str, store: bool = True) -> bool:
        """Enter the runs ``lo``, ``hi``, ``pid`` one access made (see the module; any order, a program
        may repeat its own cells); ``store``: a store (else a load).

        Returns:
            False (nothing entered) when a load's runs overlap cells another program loaded (that is
            no conflict, but runs cannot hold it) or would be sorted into more than
            :data:`MAX_SORTED_LOAD_RUNS` load runs: the caller enters the storage as cells.
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


def _cells(lo, hi, pid):
    return interval_cells(lo, hi), np.repeat(pid, hi - lo)


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
    if why is None and old_lo.shape[0] + lo.shape[0] > MAX_SORTED_LOAD_RUNS:  # loads: elements from now on
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


def as_runs(cells: np.ndarray, pids: np.ndarray, programs: int = 1):
    """The runs of one access's cells (int64 ``(n,)``), each lane's program in ``pids`` (int32 ``(n,)``):
    None when they break into more than one run per ``LANES_PER_RUN`` lanes and more than
    ``programs`` runs (an access of a few elements per program makes one run per program; scattered
    accesses are cheaper as cells)."""
    n = cells.shape[0]
    if n == 0:
        return None
    breaks = np.flatnonzero((np.diff(cells) != 1) | (np.diff(pids) != 0)) + 1
    if breaks.shape[0] + 1 > max(1, n // LANES_PER_RUN, programs):
        return None
    first, last = _split_at(breaks, n)
    return cells[first], cells[last] + 1, pids[first]


def lane_runs(off, first_off: int, n: int, lanes, per: int, order: np.ndarray, g: int):
    """The runs of ``n`` lanes inside a storage of ``g``-byte cells (``off``: their byte offsets,
    int64, or None for consecutive cells from ``first_off``; ``lanes``: their indices into the
    batch's block, ascending, None for all; ``per`` lanes a program of ``order``), found from where
    the offsets stop stepping by one cell and where the program changes, without a program or a
    cell per lane; None where :func:`as_runs` would give none."""
    programs = order.shape[0]
    if per < 1:
        return None
    if lanes is None:
        program_breaks = np.arange(per, n, per, dtype=np.int64)
    else:  # the first lane of each program after the first (lanes ascend)
        cuts = np.searchsorted(lanes, per * np.arange(1, int(lanes[-1]) // per + 1, dtype=np.int64))
        program_breaks = cuts[(cuts > 0) & (cuts < n)]
    breaks = program_breaks if off is None else np.union1d(np.flatnonzero(np.diff(off) != g) + 1, program_breaks)
    if breaks.shape[0] + 1 > max(1, n // LANES_PER_RUN, min(n, programs)):
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


def span_runs(res, order: np.ndarray, g: int, nbytes: int):
    """The runs of an access whose lanes are all active and consecutive cells inside the storage
    (``res.contiguous``), ``res.per`` lanes per program of ``order``: one run per program, found
    without a pass over the lanes (what :func:`as_runs` gives them). None when that does not hold."""
    per, n = res.per, res.n
    if per < 1 or n != per * order.shape[0] or res.lo < 0 or res.hi + g > nbytes:
        return None
    if order.shape[0] > max(1, n // LANES_PER_RUN):  # as cells (see as_runs)
        return None
    lo = res.lo // g + per * np.arange(order.shape[0], dtype=np.int64)
    if order.shape[0] > 1 and (np.diff(order) == 0).any():  # one program twice: its runs join
        return None
    return lo, lo + per, order.astype(np.int32)


def row_runs(res, order: np.ndarray, g: int, ncells: int):
    """The runs of an access of every lane whose lanes are rows of consecutive cells inside the storage
    (:meth:`~tritonkit.check.memory.resolved.Resolved.rows`, ``g``-byte elements: a tile's rows), each
    program's rows one after another: the runs found from the rows' first cells, without a pass over
    the lanes (what :func:`as_runs` gives them). None when that does not hold."""
    rows = res.rows(g)
    if rows is None:
        return None
    starts, length = rows
    nrows, programs = starts.shape[0], order.shape[0]
    if (length < LANES_PER_RUN or nrows % programs or nrows * length != res.n
            or not runs_within(starts, length, ncells)):
        return None
    pids = np.repeat(order.astype(np.int32), nrows // programs)
    # rows that continue the one before (a tile as wide as its tensor's rows) join it
    breaks = np.flatnonzero((starts[1:] != starts[:-1] + length) | (pids[1:] != pids[:-1])) + 1
    first, last = _split_at(breaks, nrows)
    return starts[first], starts[last] + length, pids[first]


def lane_pids(lanes, per: int, order: np.ndarray, n: int) -> np.ndarray:
    """The execution index (int32) of the program of each of ``n`` active lanes (``lanes``: their
    flat indices into the batch's block, None for all; ``per`` lanes a program)."""
    if lanes is None:
        if per == 1:
            return order.astype(np.int32)
        return np.repeat(order.astype(np.int32), per)
    if per & (per - 1) == 0:  # a block of a power-of-two size (Triton's): a shift, not a division
        return order.astype(np.int32)[lanes >> (int(per).bit_length() - 1)]
    return order.astype(np.int32)[lanes // per]
