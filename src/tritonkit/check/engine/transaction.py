"""The batched engine's transaction: everything a batched run did that can be undone, or is held
back until it commits (findings, ``device_print`` lines), and the counters it changed."""
from __future__ import annotations

import sys
from typing import Callable, Dict, List, NamedTuple, Tuple

import numpy as np

#: the launch record's counts of work done: restored to a mark when a batch is undone
WORK = ("programs", "accesses", "lanes", "flops", "flops_by_width")
#: the engine's own counts: restored only when the whole transaction is undone
ENGINE = ("batches", "groups", "masked_loops", "masked_branches")


class Mark(NamedTuple):
    """A point of a transaction to go back to (see :meth:`Transaction.rollback_to`)."""

    undo: int
    reports: int
    prints: int
    work: Dict


#: bytes of a storage compared at a time when looking for one repeated value (an untouched
#: ``torch.empty``, ``torch.zeros`` or ``torch.full`` output): the look stops at the first that differs
_FILL_CHUNK = 1 << 22


def _fill_value(buf: np.ndarray):
    """The one value a storage's bytes (``buf``, uint8) repeat, as a length-1 array of the widest
    unsigned type that tiles them; None when they hold more than one value. Reads at most
    ``_FILL_CHUNK`` bytes at a time and stops at the first chunk that differs."""
    n = buf.shape[0]
    width = next((w for w in (8, 4, 2, 1) if n % w == 0), 1)
    if n == 0:
        return None
    view = buf.view(np.dtype(f"u{width}"))
    first = view[:1].copy()
    step = max(1, _FILL_CHUNK // width)
    for i in range(0, view.shape[0], step):
        if not (view[i:i + step] == first[0]).all():
            return None
    return first


#: a snapshot kept on the device: the host copy is restored from the device storage (see Transaction.hold)
ON_DEVICE = object()


def _counts(record, names) -> Dict:
    return {n: dict(v) if isinstance(v, dict) else v for n in names for v in (getattr(record, n),)}


class Transaction:
    """What a launch's batched run did that can be undone or is held back until it commits.

    Making one starts it: the launch's :attr:`~tritonkit.check.launch.Launch.tx` is set, and every
    byte its address space writes is journaled into :attr:`undo`.

    Args:
        launch: the :class:`~tritonkit.check.launch.Launch`.
        guard: the :class:`~.guard.Guard` over the elements touched so far (replaced per batch
            unless the whole launch is guarded).

    Attributes:
        undo: callables that restore state, in the order the changes were made (memory writes,
            the checks' state: ``launch.on_undo``).
        reports: ``(execution index, n, violation)`` held back until :meth:`commit`.
        prints: ``(execution index, n, text)`` of ``device_print`` held back.
    """

    def __init__(self, launch, guard) -> None:
        self.launch = launch
        self.guard = guard
        self.undo: List[Callable[[], None]] = []
        self.reports: list = []
        self.prints: list = []
        # storage id -> (storage, a copy of its bytes as they were when the transaction began, or the
        # one value they all held then: see _fill_value)
        self.snapshots: Dict[int, Tuple[object, np.ndarray]] = {}
        # storage id -> the value that storage was filled with before its first write (None: not one value)
        self._fills: Dict[int, object] = {}
        self._journaled: Dict[int, tuple] = {}  # storage id -> (storage, bytes its journal entries keep alive)
        self._settled = 0  # entries of ``undo`` before this index have been counted
        self._start = _counts(launch.record, WORK + ENGINE)
        launch.tx = self
        launch.space.journal = self.undo
        launch.space.first_write = self._first_write

    def _first_write(self, storage) -> None:
        """Before a storage is first written in this transaction: note whether its bytes are one
        repeated value (an output made by ``torch.empty``, which the uninitialized-read check fills
        with one marker value, or ``torch.zeros``): then :meth:`settle` keeps that value instead of
        a copy of the storage or a journal of its old bytes."""
        key = id(storage)
        if key not in self._fills:
            # a host copy written by no committed transaction (nor outside one) holds the device's
            # bytes, whose one value (if any) the device found when it was copied (see ..memory.host)
            self._fills[key] = storage.fill if storage.fill is not False else _fill_value(storage.buf)

    def hold(self, storage) -> None:
        """Before workers of a launch shared out write ``storage`` in place (a host copy in a shared
        mapping, see :mod:`..memory.host`): make the transaction able to undo their writes without
        journaling them. It keeps the one value the storage held when the transaction began or, where
        it held more than one, restores from the device's bytes (the host copy was made from them
        and they change only when the launch copies back). The storage's journal entries so far are
        dropped (no :class:`Mark` may be outstanding)."""
        key = id(storage)
        if key in self.snapshots:
            return
        self._first_write(storage)
        fill = self._fills[key]
        self.snapshots[key] = (storage, ON_DEVICE if fill is None else fill)
        self._journaled.pop(key, None)
        from ..memory.space import Write
        def kept(entries):
            return [e for e in entries if not (isinstance(e, Write) and e.storage is storage)]
        settled = kept(self.undo[:self._settled])
        self.undo[:] = settled + kept(self.undo[self._settled:])
        self._settled = len(settled)

    def on_access(self, launch, kind: str, res, size: int) -> None:
        """An access of the running batch (``res`` with at least one lane): the guard enters it.

        Raises:
            Unbatchable: two programs share an element that one of them writes.
        """
        self.guard.access(launch, kind, res, size)

    def mark(self) -> Mark:
        """The transaction now, to go back to."""
        return Mark(len(self.undo), len(self.reports), len(self.prints), _counts(self.launch.record, WORK))

    def reported_since(self, mark: Mark) -> bool:
        """Whether a finding was held back since ``mark``."""
        return len(self.reports) > mark.reports

    def rollback_to(self, mark: Mark) -> None:
        """Undo what happened since ``mark``: writes, the checks' state, findings, prints, counts of work."""
        while len(self.undo) > mark.undo:
            self.undo.pop()()
        del self.reports[mark.reports:]
        del self.prints[mark.prints:]
        for name, value in mark.work.items():
            setattr(self.launch.record, name, dict(value) if isinstance(value, dict) else value)

    def settle(self) -> None:
        """Bound what the journal keeps: called between batches (no :class:`Mark` outstanding).

        A write is journaled as its old values and their indices (8-16 bytes an element), which
        over a launch that rewrites a large tensor would come to several times the tensor. Once a
        storage's journal keeps more than half its size, it is replaced by one copy of the storage
        as it was when the transaction began (the copy, with the journal's old values put back),
        and the storage's later writes are dropped from the journal when their batch settles: what
        a transaction keeps is then at most about the size of the storages it wrote.
        """
        from ..memory.space import Write
        undo, journaled, snaps = self.undo, self._journaled, self.snapshots
        fresh = False
        for entry in undo[self._settled:]:
            if isinstance(entry, Write):
                key = id(entry.storage)
                fresh = fresh or key in snaps
                if key not in snaps:
                    n = journaled.get(key, (entry.storage, 0))[1]
                    journaled[key] = (entry.storage, n + entry.nbytes)
        self._settled = len(undo)
        fills = self._fills
        big = [key for key, (storage, n) in journaled.items()
               if 2 * n > storage.nbytes or fills.get(key) is not None]
        if not big and not fresh:
            return
        for key in big:
            storage = journaled.pop(key)[0]
            if fills.get(key) is not None:  # one value before the first write: nothing to copy
                snaps[key] = (storage, fills[key])
                continue
            snap = storage.buf.copy()
            for entry in reversed(undo):
                if isinstance(entry, Write) and entry.storage is storage:
                    entry.undo_into(snap)
            snaps[key] = (storage, snap)
        undo[:] = [e for e in undo if not (isinstance(e, Write) and id(e.storage) in snaps)]
        self._settled = len(undo)

    def _end(self) -> None:
        self.launch.tx = None
        self.launch.space.journal = None
        self.launch.space.first_write = None
        self._fills.clear()

    def rollback(self) -> None:
        """Undo everything and end: the launch is as before the transaction (memory, the checks'
        state, its record's counts)."""
        self._end()
        self.rollback_to(Mark(0, 0, 0, self._start))
        for storage, snap in self.snapshots.values():
            if snap is ON_DEVICE:
                storage.host_storage.copy_(storage.device_storage)
            elif snap.shape[0] == storage.nbytes:
                storage.buf[:] = snap
            else:  # one value (see _fill_value), repeated
                storage.buf.view(snap.dtype)[:] = snap[0]
        self.snapshots.clear()

    def commit(self) -> None:
        """End, releasing the held-back prints and findings in program order (as the sequential
        engine makes them).

        Raises:
            CheckAborted: a released finding stops the program (``stop_on_first``).
        """
        self._end()
        self.snapshots.clear()
        for storage in self.launch.space.storages.values():
            if storage.written:  # for good: the value the device found is gone
                storage.fill = False
        if self.prints:
            self.prints.sort(key=lambda r: (r[0], r[1]))
            sys.stdout.write("".join(text for _, _, text in self.prints))
        if self.reports:
            self.reports.sort(key=lambda r: (r[0], r[1]))
            for _, _, v in self.reports:
                self.launch.session.add_violation(v, self.launch)
