"""Running a launch's programs in batches, with the one-at-a-time engine as the fallback.

The batched engine (:mod:`._batched`) runs the kernel's body once for a batch of programs. This
module decides which programs form a batch and makes the result the same as running them one
after another (the sequential engine, which stays the oracle):

* **One transaction per launch.** A launch runs as a series of *batches*: contiguous ranges of
  programs (in the order the sequential engine runs them), the first of ``_PROBE`` programs, the
  next sized so that no single value exceeds the memory budget. While they run, every byte written
  (stores, atomics) and every change of the checks' state is journaled, and findings and
  ``device_print`` lines are held back. At the end the findings are released in program order,
  exactly as the sequential engine makes them; or everything is undone and the launch runs one
  program at a time.
* **Divergence.** Python control flow on a value that differs between programs (``if pid == 0``,
  a loop bound that depends on the row, a ``while`` on loaded data) stops the batch; what it did
  is undone and each group of programs that agree runs again as its own batch, in order. Nothing
  is executed twice with a visible effect.
* **Independence.** A batch runs its programs' operations interleaved, which equals running them
  one after another only if no program reads or writes what another one of the batch writes. A
  :class:`Guard` watches every element the batch touches; when two programs share an element that
  one of them writes (other than with atomics, which are applied in program order), the launch is
  undone. While ``data_race`` runs, the guard watches the whole launch instead of one batch: two
  programs of a launch that share an element one of them writes either race or are ordered by
  atomics, and both are decided by the race check's vector clocks, one program at a time. A launch
  the guard lets through has no race, so the race check's per-element shadow is not kept while
  the batched engine runs.
* **Fallback.** A launch that is undone (a conflict, or what the batched engine cannot do:
  :class:`~._batched.Unbatchable`, such as spin polls) runs again from its first program one at a
  time, and its record says why (``LaunchRecord.fallback``).
"""
from __future__ import annotations

import os
import sys
import traceback
from typing import Callable, Dict, List, Optional

import numpy as np

from ._batched import Divergence, Unbatchable
from .checks._base import PagedCells, element_cells

DEFAULT_BATCH_MEMORY = 256 << 20  # bytes: the largest single value a batch may make
_PROBE = 4  # programs in the first batch, which measures the values' size per program
# the largest value (bytes per program) seen for a compiled kernel's specialization (``Launch.spec_key``):
# its values are block-shaped, so later launches of it size their first batch from this, without a probe
_PER_PROGRAM: Dict[tuple, float] = {}
_MAX_BATCH = 1 << 16
_NONE = -1
_LOAD, _STORE, _ATOMIC, _SHARED, _LATE = 1, 2, 4, 8, 16
_PENDING_LANES = 1 << 25  # lanes of loads the guard holds unentered (8 bytes each) before it enters them


class Transaction:
    """What a launch's batched run did that can be undone or is held back until it commits.

    ``undo``: callables that restore state, in the order the changes were made; ``reports``:
    ``(execution index, n, violation)`` held back; ``prints``: ``(execution index, n, text)``.
    ``guard``: the :class:`Guard` over the elements touched so far.
    """

    def __init__(self, guard: "Guard") -> None:
        self.undo: List[Callable[[], None]] = []
        self.reports: list = []
        self.prints: list = []
        self.guard = guard

    def mark(self) -> tuple:
        return len(self.undo), len(self.reports), len(self.prints)

    def rollback_to(self, mark: tuple) -> None:
        n_undo, n_rep, n_print = mark
        while len(self.undo) > n_undo:
            self.undo.pop()()
        del self.reports[n_rep:]
        del self.prints[n_print:]


class _Owners(PagedCells):
    """Per element (cell) of one storage the guard watches: the first program that touched it
    (``own``, an execution index), what was done to it (``flags``) and the latest program that made
    an atomic on it (``aseq``); paged like the race check's shadow (5 bytes a touched cell, 9 with
    atomics)."""

    _FIELDS = {"own": (_NONE, np.int32), "flags": (0, np.uint8)}
    _LAZY = {"aseq": (_NONE, np.int32)}  # only once an atomic is entered


class Guard:
    """Watches the elements a batched run touches for programs that depend on each other (see the
    module). :meth:`access` is called by :meth:`Launch.access` for every access of a batch.

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


def batch_order(launch, order: np.ndarray):
    """(linear program ids, (x, y, z) ids) of programs given by their execution index (the order
    the sequential engine runs them: ``z`` fastest, then ``y``, then ``x``)."""
    gx, gy, gz = launch.grid
    x = order // (gy * gz)
    y = (order // gz) % gy
    z = order % gz
    return x + gx * (y + gy * z), (x.astype(np.int32), y.astype(np.int32), z.astype(np.int32))


def _run_groups(launch, fn, call_args, order: np.ndarray) -> None:
    """Run the programs ``order`` (execution indices), splitting them where control flow diverges."""
    tx = launch.tx
    pending = [order]
    runs, limit = 0, 2 * order.shape[0] + 16
    while pending:
        group = pending.pop(0)
        r = launch.record
        mark = tx.mark() + (r.accesses, r.lanes, r.flops, dict(r.flops_by_width))
        launch.begin_batch(group)
        try:
            fn(**call_args)
        except Divergence as d:
            tx.rollback_to(mark[:3])
            r.accesses, r.lanes, r.flops, r.flops_by_width = mark[3:]
            runs += 1
            if runs > limit:
                raise Unbatchable("control flow diverges between too many groups of programs") from None
            values = d.values
            if values.shape[0] != group.shape[0]:  # pragma: no cover - a value of another batch
                raise Unbatchable("control flow on a value of unexpected shape") from None
            _, inv = np.unique(values, return_inverse=True)
            groups = [group[inv.reshape(-1) == k] for k in range(int(inv.max()) + 1)]
            groups.sort(key=lambda g: int(g[0]))
            pending = groups + pending
            launch.record.groups += len(groups) - 1
            continue
        finally:
            launch.end_batch()
        launch.record.programs += int(group.shape[0])


def run_batched(launch, fn, call_args, budget: int) -> Optional[str]:
    """Run a launch's programs batched, in one transaction (see the module).

    Args:
        launch: the :class:`~._launch.Launch` (its builder a :class:`~._batched.BatchedBuilder`).
        fn: the kernel's rewritten body; call_args: its arguments by name.
        budget: bytes the largest single value of a batch may take.
    Returns:
        None when every program ran; else why the launch must run one program at a time (all it
        did is undone).
    Raises:
        whatever aborts the launch (a timeout, ``stop_on_first``, a failed ``static_assert``), after
        releasing the findings held back.
    """
    from ._launch import CheckAborted, UsageError, _LaunchTimeout

    total = launch.grid[0] * launch.grid[1] * launch.grid[2]
    builder = launch.builder
    whole = launch.race_state is not None  # data_race runs: one guard over the launch
    why = ("they are checked for data races one program at a time" if whole
           else "they are run one at a time, in order")
    launch.begin_tx(Guard(why))
    first = 0
    per_program = _PER_PROGRAM.get(launch.spec_key, 0.0)
    size = int(max(1, min(_MAX_BATCH, budget // per_program))) if per_program else _PROBE
    try:
        while first < total:
            n = min(size, total - first)
            if not whole and first:
                launch.tx.guard = Guard(why)
            builder.max_bytes = 0
            _run_groups(launch, fn, call_args, np.arange(first, first + n, dtype=np.int64))
            first += n
            per_program = max(per_program, builder.max_bytes / max(1, n))
            size = int(max(1, min(_MAX_BATCH, budget // max(1.0, per_program))))
            if builder.max_bytes:
                _PER_PROGRAM[launch.spec_key] = per_program
    except Unbatchable as e:
        launch.rollback_tx()
        return e.reason
    except (CheckAborted, UsageError, KeyboardInterrupt, _LaunchTimeout):
        launch.commit_tx()
        raise
    except Exception as e:
        launch.rollback_tx()
        if os.environ.get("TRITONKIT_DEBUG_ENGINE"):
            traceback.print_exc()
        return f"the kernel raised {type(e).__name__} in a batch: the programs are replayed one at a time"
    launch.commit_tx()
    return None


def flush(launch, tx: Transaction) -> None:
    """Release a committed transaction's held-back findings and prints, in program order."""
    if tx.prints:
        tx.prints.sort(key=lambda r: (r[0], r[1]))
        sys.stdout.write("".join(text for _, _, text in tx.prints))
    if tx.reports:
        tx.reports.sort(key=lambda r: (r[0], r[1]))
        session = launch.session
        for _, _, v in tx.reports:
            session._add_violation(v, launch)
