"""Running a launch's programs in batches, with the one-at-a-time engine as the fallback.

The batched engine (:mod:`._batched`) runs the kernel's body once for a batch of programs. This
module decides which programs form a batch and makes the result the same as running them one
after another (the sequential engine, which stays the oracle):

* **Transactions.** Programs run in *transactions*: a contiguous range of programs (in the order
  the sequential engine runs them), sized so that no single value exceeds the memory budget. While
  one runs, every byte written (stores, atomics) and every change of the checks' state is journaled,
  and findings and ``device_print`` lines are held back. At the end the findings are released in
  program order, exactly as the sequential engine makes them; or everything is undone.
* **Divergence.** Python control flow on a value that differs between programs (``if pid == 0``,
  a loop bound that depends on the row, a ``while`` on loaded data) stops the batch; what it did
  is undone and each group of programs that agree runs again as its own batch, in order. Nothing
  is executed twice with a visible effect.
* **Independence.** The batch runs its programs' operations interleaved, which equals running
  them one after another only if no program reads or writes what another one of the batch writes.
  A guard watches every element the transaction touches; when two programs of the batch share an
  element that one of them writes (other than with atomics of a single operation, which are applied
  in program order), the transaction is undone. So are batches that need what the batched engine
  cannot do (:class:`~._batched.Unbatchable`): spin locks, and atomics that order programs while
  ``data_race`` runs.
* **Fallback.** An undone transaction and every program after it run one at a time, and the
  launch's record says why (``LaunchRecord.fallback``).
"""
from __future__ import annotations

import os
import sys
import traceback
from typing import Callable, List, Optional, Tuple

import numpy as np

from ._batched import Divergence, Unbatchable
from .checks._base import PagedCells, element_cells

DEFAULT_BATCH_MEMORY = 256 << 20  # bytes: the largest single value a batch may make
_PROBE = 4  # programs in the first transaction, which measures the values' size per program
_MAX_BATCH = 1 << 16
_NONE = -1
_LOAD, _STORE, _ATOMIC, _SHARED, _LATE = 1, 2, 4, 8, 16


class Transaction:
    """What a transaction did that can be undone or is held back until it commits.

    ``undo``: callables that restore state, in the order the changes were made; ``reports``:
    ``(execution index, n, violation)`` held back; ``prints``: ``(execution index, n, text)``.
    """

    def __init__(self) -> None:
        self.undo: List[Callable[[], None]] = []
        self.reports: list = []
        self.prints: list = []
        self.guard: dict = {}  # id(storage) -> _Owners
        self.guard_pending: dict = {}  # id(storage) -> [(cells, pids)] loads not yet entered
        self.guard_written: set = set()

    def mark(self) -> tuple:
        return len(self.undo), len(self.reports), len(self.prints)

    def rollback_to(self, mark: tuple) -> None:
        n_undo, n_rep, n_print = mark
        while len(self.undo) > n_undo:
            self.undo.pop()()
        del self.reports[n_rep:]
        del self.prints[n_print:]


class _Owners(PagedCells):
    """Per element (cell) a transaction touched: the first program that touched it (``own``, an
    execution index), what was done to it (``flags``) and the latest program that made an atomic on
    it (``aseq``); paged like the race check's shadow."""

    _FIELDS = {"own": (_NONE, np.int64), "flags": (0, np.uint8), "aseq": (_NONE, np.int64)}


class Guard:
    """Watches the elements a transaction touches for programs that depend on each other (see the
    module). Called by :meth:`Launch.access` for every access of a batched transaction."""

    @staticmethod
    def access(launch, kind: str, res, size: int) -> None:
        tx = launch.tx
        space = launch.space
        for region, sel in space._groups(res):
            storage = region.storage
            key = id(storage)
            pos = np.arange(res.n) if sel is None else np.flatnonzero(sel)
            off = res.off[pos]
            pids = launch.batch.order[res.lanes[pos] // res.per]
            g = space.cell_bytes(storage)
            ncells = -(-storage.nbytes // g)
            cells = element_cells(off, size, g, ncells)
            if size > g:
                pids = np.repeat(pids, size // g)
            if kind == "load" and key not in tx.guard_written:
                tx.guard_pending.setdefault(key, []).append((cells, pids))
                continue
            owners = tx.guard.get(key)
            if owners is None:
                owners = tx.guard[key] = _Owners(ncells)
            if key not in tx.guard_written:
                tx.guard_written.add(key)
                for c, p in tx.guard_pending.pop(key, []):
                    Guard._enter(owners, c, p, _LOAD)
            Guard._enter(owners, cells, pids, {"load": _LOAD, "store": _STORE}.get(kind, _ATOMIC))

    @staticmethod
    def _enter(owners: _Owners, cells, pids, bit: int) -> None:
        """Enter one access's elements (``cells``) and the execution index of each (``pids``)."""
        pos = owners.index(cells)
        own = owners.own
        o = own[pos]
        fresh = o == _NONE
        if fresh.any():
            own[pos[fresh]] = pids[fresh]
        shared = own[pos] != pids
        flags = owners.flags
        if shared.any():
            flags[pos[shared]] |= _SHARED
        flags[pos] |= bit
        if bit == _ATOMIC:  # atomics apply in the order programs run: each element's must be increasing
            late = pids < owners.aseq[pos]
            if late.any():
                flags[pos[late]] |= _LATE
            owners.aseq[pos] = pids  # lanes come in program order: the last one per element is the latest
        f = flags[pos]
        bad = (f & _SHARED) != 0
        if bad.any():
            f = f[bad]
            conflict = (f & (_STORE | _LATE)) | ((f & _ATOMIC) * ((f & _LOAD) != 0))
            if conflict.any():
                raise Unbatchable("programs of one batch share an element that one of them writes: they are run "
                                  "one at a time, in order")


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
        mark = tx.mark() + (launch.record.accesses, launch.record.lanes)
        launch.begin_batch(group)
        try:
            fn(**call_args)
        except Divergence as d:
            tx.rollback_to(mark[:3])
            launch.record.accesses, launch.record.lanes = mark[3:]
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


def run_batched(launch, fn, call_args, budget: int) -> Tuple[int, Optional[str]]:
    """Run a launch's programs batched, in transactions (see the module).

    Args:
        launch: the :class:`~._launch.Launch` (its builder a :class:`~._batched.BatchedBuilder`).
        fn: the kernel's rewritten body; call_args: its arguments by name.
        budget: bytes the largest single value of a batch may take.
    Returns:
        ``(first, reason)``: every program before execution index ``first`` has run; ``reason``
        (None when all ran) says why the rest must run one at a time.
    Raises:
        whatever aborts the launch (a timeout, ``stop_on_first``, a failed ``static_assert``), after
        releasing the findings held back.
    """
    from ._launch import CheckAborted, UsageError, _LaunchTimeout

    total = launch.grid[0] * launch.grid[1] * launch.grid[2]
    builder = launch.builder
    first = 0
    size = min(total, _PROBE)
    per_program = 0.0
    while first < total:
        n = min(size, total - first)
        launch.begin_tx()
        builder.max_bytes = 0
        try:
            _run_groups(launch, fn, call_args, np.arange(first, first + n, dtype=np.int64))
        except Unbatchable as e:
            launch.rollback_tx()
            return first, e.reason
        except (CheckAborted, UsageError, KeyboardInterrupt, _LaunchTimeout):
            launch.commit_tx()
            raise
        except Exception as e:
            launch.rollback_tx()
            if os.environ.get("TRITONKIT_DEBUG_ENGINE"):
                traceback.print_exc()
            return first, f"the kernel raised {type(e).__name__} in a batch: the programs are replayed one at a time"
        launch.commit_tx()
        first += n
        per_program = max(per_program, builder.max_bytes / max(1, n))
        size = int(max(1, min(_MAX_BATCH, budget // max(1.0, per_program))))
    return total, None


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
