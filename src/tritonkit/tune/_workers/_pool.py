"""The driver of the tuning pool: one work queue of configs, dealt out to workers (one per GPU) by
whatever engine starts them, behind the :class:`~tritonkit.tune.Runner` interface.

:class:`WorkPool` owns the queue and a dispatcher thread. :meth:`WorkPool.runner` gives one
:class:`PoolRunner` per key; the evaluator of that key calls it with a batch of configs exactly
as it calls the in-process runner, and gets one trial per config back. Each config of the batch is
one work item in the queue; an idle worker gets the next item (and, before its first item of a
key, that key's job: the arguments travel once per key and worker). Batches of several keys
(a sweep's concurrent keys) share the queue, so every worker stays busy even for one key.

Faults: a worker that dies (a signal, an exit, a config that broke its CUDA context) has its
items put back at the front of the queue, and a replacement is started on its slot. The item it
had begun is blamed: the second worker it kills makes it a ``crashed`` trial (``crash_after``). A
measurement the dead worker had journaled before dying is taken from its ledger, not measured
again. Workers that die before saying hello count against their slot (``max_start_failures``);
when no worker is left, every waiting caller gets :class:`WorkerError`.

The engine (:class:`Engine`) is the only part that knows how workers run: local processes
(:mod:`._local`), or Ray actors (:mod:`._ray`). Strategies, the evaluator and the cache never learn
where a measurement came from.
"""
from __future__ import annotations

import collections
import itertools
import queue
import threading
import time
from concurrent.futures import FIRST_EXCEPTION, Future, wait
from dataclasses import dataclass, field
from typing import Any, Deque, Dict, List, Optional, Sequence, Tuple

from .._cache import KernelId, TuneCache
from .._result import Trial
from .._runner_api import Runner
from .._space import Point
from . import _ledger
from ._protocol import Journal, KeyJob, WorkerError, WorkerSummary


class Engine:
    """How workers are started and talked to: one module per engine (:mod:`._local`, :mod:`._ray`).

    An engine starts a worker for a slot, sends it protocol messages (:mod:`._protocol`) and
    reports what its workers say as events ``(handle, message)``, plus ``(handle, ("died", why))``
    when one is gone. All calls come from the pool's dispatcher thread, but :meth:`wake`.

    Attributes:
        name: the engine's name (``local``, ``ray``).
        shared_filesystem: whether workers can write the driver's cache directory (then they
            journal their own measurements; else the driver does as results arrive); an engine
            whose workers differ says so per worker (:meth:`writes_ledger`).
    """

    name = "engine"
    shared_filesystem = False

    def slots(self) -> List[str]:
        """The GPU of each worker slot (its length is the number of workers)."""
        raise NotImplementedError

    def start(self, slot: int) -> Any:
        """Start a worker for ``slot`` without waiting for it; returns its handle."""
        raise NotImplementedError

    def send(self, handle: Any, message: Tuple) -> None:
        """Send ``message`` to a worker (a dead worker's messages are dropped; its death is an event)."""
        raise NotImplementedError

    def wait(self, handles: Sequence[Any], timeout: float) -> List[Tuple[Any, Tuple]]:
        """Events of ``handles`` that arrived, waiting up to ``timeout`` seconds (or until :meth:`wake`)."""
        raise NotImplementedError

    def wake(self) -> None:
        """Make a :meth:`wait` in progress return (called from other threads)."""

    def close(self, handles: Sequence[Any], timeout: float) -> None:
        """Stop every worker: ask, wait up to ``timeout`` seconds, then kill."""
        raise NotImplementedError

    def writes_ledger(self, handle: Any) -> bool:
        """Whether the worker of ``handle`` journals its own measurements (it writes the driver's
        cache directory); else the driver journals them as they arrive. Asked after its ``hello``.
        Default: :attr:`shared_filesystem`."""
        return self.shared_filesystem


@dataclass
class _Item:
    id: int
    key_id: int
    point: Point
    future: Future
    kills: int = 0
    why: str = ""


@dataclass
class _Key:
    id: int
    job: KeyJob
    journal: Optional[Journal]
    device: Optional[str]
    sent_to: set = field(default_factory=set)
    load_deaths: int = 0


@dataclass
class _Worker:
    id: int
    slot: int
    handle: Any
    ready: bool = False
    alive: bool = True
    info: Dict[str, Any] = field(default_factory=dict)
    inflight: Dict[int, _Item] = field(default_factory=dict)
    begun: Optional[int] = None
    begun_at: float = 0.0


class WorkPool:
    """A work queue of configs dealt out to workers, one per GPU (see the module).

    Args:
        engine: starts the workers (:class:`~tritonkit.tune._workers._local.LocalEngine`, ...).
        prefetch: items a worker holds at once (1: the one it measures; more hides the round trip
            but a dead worker's extra items are only requeued, never blamed).
        crash_after: a config is recorded ``crashed`` once it killed this many workers.
        max_start_failures: a slot whose workers die this many times before saying hello is given up.

    Use it as a context manager (or call :meth:`start` and :meth:`close`).

    Raises:
        ValueError: ``prefetch``, ``crash_after`` or ``max_start_failures`` is below 1.
    """

    def __init__(self, engine: Engine, prefetch: int = 1, crash_after: int = 2, max_start_failures: int = 3):
        if prefetch < 1 or crash_after < 1 or max_start_failures < 1:
            raise ValueError("prefetch, crash_after and max_start_failures must be at least 1")
        self.engine = engine
        self.prefetch, self.crash_after, self.max_start_failures = prefetch, crash_after, max_start_failures
        self.gpus = list(engine.slots())
        self._summaries = [WorkerSummary(slot=i, gpu=g) for i, g in enumerate(self.gpus)]
        self._start_failures = [0] * len(self.gpus)
        self._commands: "queue.SimpleQueue[Tuple]" = queue.SimpleQueue()
        self._queue: Deque[_Item] = collections.deque()
        self._keys: Dict[int, _Key] = {}
        self._workers: Dict[int, _Worker] = {}
        self._ids = itertools.count()
        self._changed = threading.Condition()
        self._thread: Optional[threading.Thread] = None
        self._closing = False
        self._failure: Optional[BaseException] = None
        self._driver_ledger: Dict[str, str] = {}
        self._last_death = "none died"

    # ------------------------------------------------------------------ life
    def start(self) -> "WorkPool":
        """Start the dispatcher thread, which starts one worker per slot. Returns self."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="tritonkit-pool", daemon=True)
            self._thread.start()
        return self

    def __enter__(self) -> "WorkPool":
        return self.start()

    def __exit__(self, *exc) -> bool:
        self.close()
        return False

    def close(self, timeout: float = 10.0) -> None:
        """Stop the workers (asked, then killed after ``timeout`` seconds); callers still waiting
        get :class:`WorkerError`."""
        if self._thread is None:
            return
        self._closing = True
        self._command(("close",))
        self._thread.join(timeout + 5.0)
        self._thread = None

    def wait_ready(self, timeout: float = 120.0) -> List[Dict[str, Any]]:
        """Wait until every slot's worker said hello (or was given up), up to ``timeout`` seconds.

        Returns:
            The ``hello`` info of the workers up (pid, host, gpu, device).

        Raises:
            WorkerError: no worker came up.
        """
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                up = [w.info for w in self._workers.values() if w.alive and w.ready]
                pending = [w for w in self._workers.values() if w.alive and not w.ready]
                if self._failure is not None:
                    raise WorkerError(str(self._failure))
                if (up and not pending and len(self._workers) >= len(self.gpus)) or time.monotonic() > deadline:
                    break
                self._changed.wait(min(0.5, max(0.01, deadline - time.monotonic())))
        if not up:
            raise WorkerError(f"no {self.engine.name} worker came up within {timeout:g} s (the last death: "
                              f"{self._last_death})")
        return up

    def devices(self, timeout: float = 120.0) -> List[str]:
        """The distinct device names of the workers up, in slot order (waits for them: :meth:`wait_ready`)."""
        out: List[str] = []
        for info in self.wait_ready(timeout):
            if info.get("device") not in out:
                out.append(info.get("device"))
        return out

    def summary(self) -> List[WorkerSummary]:
        """What each slot did so far (a copy)."""
        with self._changed:
            return [WorkerSummary(**s.to_dict()) for s in self._summaries]

    def worker_pids(self) -> Dict[int, Optional[Tuple[int, float]]]:
        """For each live, ready worker's pid: (item id, seconds since it began) of the config it
        measures now, or None when idle (the fault benchmark kills workers in mid-measurement)."""
        now = time.monotonic()
        with self._changed:
            return {w.info["pid"]: ((w.begun, now - w.begun_at) if w.begun is not None else None)
                    for w in self._workers.values() if w.alive and w.ready and "pid" in w.info}

    # ------------------------------------------------------------------ callers
    def runner(self, job: KeyJob, cache: Optional[TuneCache] = None, kernel_id: Optional[KernelId] = None,
               key: Sequence[Any] = (), device: Optional[str] = None) -> "PoolRunner":
        """A :class:`PoolRunner` for one key.

        Args:
            job: what a worker needs to measure configs at this key (sent once to each worker that
                measures it).
            cache, kernel_id, key: where each finished measurement is journaled (the cache's
                ledger, :mod:`._ledger`); None: not journaled.
            device: only workers whose device has this name measure this key (None: any).

        Raises:
            TuneCacheError: the cache's directory cannot be used.
        """
        journal = None
        if cache is not None and kernel_id is not None:
            journal = Journal(_ledger.ledger_dir(cache), kernel_id, tuple(str(k) for k in key))
        key_id = next(self._ids)
        self._command(("key", _Key(key_id, job, journal, device)))
        return PoolRunner(self, key_id)

    def _submit(self, key_id: int, points: Sequence[Point]) -> List[Future]:
        items = [_Item(next(self._ids), key_id, dict(p), Future()) for p in points]
        if self._failure is not None or self._closing:
            for it in items:
                it.future.set_exception(WorkerError(f"the pool is closed{': ' + str(self._failure) if self._failure else ''}"))
            return [it.future for it in items]
        self._command(("submit", items))
        return [it.future for it in items]

    def _command(self, command: Tuple) -> None:
        self._commands.put(command)
        self.engine.wake()

    # ------------------------------------------------------------------ the dispatcher
    def _loop(self) -> None:
        try:
            for slot in range(len(self.gpus)):
                self._spawn(slot)
            while True:
                if not self._drain():
                    break
                self._deal()
                live = [w.handle for w in self._workers.values() if w.alive]
                if not live:
                    self._failure = WorkerError(f"no {self.engine.name} worker is left: every slot failed to "
                                                f"start {self.max_start_failures} times (the last: "
                                                f"{self._last_death})")
                    self._fail_all(self._failure)
                    break
                events = self.engine.wait(live, 0.2)
                by_handle = {id(w.handle): w for w in self._workers.values() if w.alive}
                for handle, message in events:
                    w = by_handle.get(id(handle))
                    if w is not None and w.alive:
                        with self._changed:
                            self._on_event(w, message)
                            self._changed.notify_all()
        except BaseException as e:  # a bug here must not leave callers waiting forever
            self._failure = e
            self._fail_all(WorkerError(f"the tuning pool's dispatcher failed: {type(e).__name__}: {e}"))
        finally:
            with self._changed:
                self._changed.notify_all()
            self.engine.close([w.handle for w in self._workers.values() if w.alive], 10.0)
            self._fail_all(WorkerError("the pool was closed before this config was measured"))

    def _drain(self) -> bool:
        """Carry out the callers' commands; False once the pool closes."""
        while True:
            try:
                cmd = self._commands.get_nowait()
            except queue.Empty:
                return True
            kind = cmd[0]
            if kind == "close":
                return False
            if kind == "key":
                self._keys[cmd[1].id] = cmd[1]
            elif kind == "submit":
                self._queue.extend(it for it in cmd[1] if not it.future.done())
            elif kind == "cancel":
                ids = set(cmd[1])
                self._queue = collections.deque(it for it in self._queue if it.id not in ids)
            elif kind == "forget":
                k = self._keys.pop(cmd[1], None)
                if k is not None:
                    for w in self._workers.values():
                        if w.alive and w.id in k.sent_to:
                            self.engine.send(w.handle, ("forget", k.id))

    def _spawn(self, slot: int) -> None:
        handle = self.engine.start(slot)
        w = _Worker(next(self._ids), slot, handle)
        with self._changed:
            self._workers[w.id] = w

    def _deal(self) -> None:
        idle = sorted((w for w in self._workers.values() if w.alive and w.ready and len(w.inflight) < self.prefetch),
                      key=lambda w: len(w.inflight))
        for w in idle:
            while len(w.inflight) < self.prefetch and self._queue:
                item = self._take(w)
                if item is None:
                    break
                k = self._keys[item.key_id]
                if w.id not in k.sent_to:
                    k.sent_to.add(w.id)
                    self._summaries[w.slot].keys += 1
                    self.engine.send(w.handle, ("key", k.id, k.job,
                                                k.journal if self.engine.writes_ledger(w.handle) else None))
                w.inflight[item.id] = item
                self.engine.send(w.handle, ("run", item.id, item.key_id, item.point))

    def _take(self, w: _Worker) -> Optional[_Item]:
        """The first queued item ``w`` may measure (its key's device is ``w``'s, where one is set)."""
        for i, item in enumerate(self._queue):
            if item.future.done():
                continue
            k = self._keys.get(item.key_id)
            if k is None:
                continue
            if k.device is None or k.device == w.info.get("device"):
                del self._queue[i]
                return item
        self._queue = collections.deque(it for it in self._queue
                                        if not it.future.done() and it.key_id in self._keys)
        return None

    # ------------------------------------------------------------------ events
    def _on_event(self, w: _Worker, message: Tuple) -> None:
        kind = message[0]
        s = self._summaries[w.slot]
        if kind == "hello":
            w.ready, w.info = True, dict(message[1])
            self._start_failures[w.slot] = 0
            s.device, s.host = str(w.info.get("device", "")), str(w.info.get("host", ""))
            s.gpu = str(w.info.get("gpu", s.gpu))
            s.pids.append(int(w.info.get("pid", 0)))
        elif kind == "begin":
            w.begun, w.begun_at = message[1], time.monotonic()
        elif kind == "done":
            _, item_id, trial, journaled = message
            item = w.inflight.pop(item_id, None)
            if w.begun == item_id:
                s.busy_s += time.monotonic() - w.begun_at
                w.begun = None
            s.measured += 1
            if item is not None:
                if not journaled:
                    self._journal(item, trial)
                _resolve(item, trial)
        elif kind == "error":
            item = w.inflight.pop(message[1], None)
            w.begun = None if w.begun == message[1] else w.begun
            if item is not None and not item.future.done():
                item.future.set_exception(WorkerError(f"a worker (gpu {s.gpu}, pid {w.info.get('pid')}) failed to "
                                                      f"measure {item.point}:\n{message[2]}"))
        elif kind == "poisoned":
            w.begun = message[1]
            w.info["why"] = f"the config broke the CUDA context: {message[2]}"
        elif kind == "died":
            self._on_death(w, w.info.pop("why", None) or message[1])

    def _on_death(self, w: _Worker, why: str) -> None:
        w.alive = False
        self._last_death = why
        s = self._summaries[w.slot]
        s.deaths += 1
        items = list(w.inflight.values())
        w.inflight.clear()
        back: List[_Item] = []
        for item in items:
            if item.future.done():
                continue
            if item.id == w.begun:
                kept = self._kept(w, item)
                if kept is not None:
                    _resolve(item, kept)
                    continue
                item.kills += 1
                item.why = why
                if item.kills >= self.crash_after:
                    trial = Trial(dict(item.point), "crashed",
                                  error=f"killed {item.kills} workers (the last: {why})")
                    self._journal(item, trial)
                    s.crashed += 1
                    _resolve(item, trial)
                    continue
            back.append(item)
        if w.begun is None and w.ready and back:  # died while building a key's runner
            k = self._keys.get(back[0].key_id)
            if k is not None:
                k.load_deaths += 1
                if k.load_deaths >= self.crash_after:
                    self._fail_key(k.id, back, WorkerError(
                        f"loading the arguments of a key killed {k.load_deaths} workers (the last: {why})"))
        s.requeued += sum(1 for it in back if not it.future.done())
        self._queue.extendleft(reversed([it for it in back if not it.future.done()]))
        if not w.ready:
            self._start_failures[w.slot] += 1
        if self._start_failures[w.slot] < self.max_start_failures and not self._closing:
            self._spawn(w.slot)

    def _kept(self, w: _Worker, item: _Item) -> Optional[Trial]:
        """The measurement of ``item`` that dead worker ``w`` journaled before dying, if any."""
        k = self._keys.get(item.key_id)
        if k is None or k.journal is None or not self.engine.writes_ledger(w.handle) or "pid" not in w.info:
            return None
        path = _ledger.ledger_file(k.journal.ledger_dir, w.info["pid"], w.info.get("host"), w.info.get("start"))
        return _ledger.find(path, list(k.journal.key), item.point)

    def _journal(self, item: _Item, trial: Trial) -> None:
        """Journal a trial in the driver's own ledger (results of remote workers, crashes)."""
        k = self._keys.get(item.key_id)
        if k is None or k.journal is None:
            return
        path = self._driver_ledger.setdefault(k.journal.ledger_dir, _ledger.ledger_file(k.journal.ledger_dir))
        _ledger.append(path, k.journal.kernel_id, list(k.journal.key), trial, "driver")

    def driver_ledgers(self) -> List[str]:
        """The ledger files this driver wrote (crashes, and results of workers on other hosts)."""
        return list(self._driver_ledger.values())

    def _fail_key(self, key_id: int, extra: List[_Item], error: BaseException) -> None:
        for it in list(self._queue) + extra:
            if it.key_id == key_id and not it.future.done():
                it.future.set_exception(error)

    def _fail_all(self, error: BaseException) -> None:
        items = list(self._queue) + [it for w in self._workers.values() for it in w.inflight.values()]
        self._queue.clear()
        for it in items:
            if not it.future.done():
                it.future.set_exception(error)
        while True:  # submissions that arrive now fail at once too
            try:
                cmd = self._commands.get_nowait()
            except queue.Empty:
                break
            if cmd[0] == "submit":
                for it in cmd[1]:
                    if not it.future.done():
                        it.future.set_exception(error)
            elif cmd[0] == "close":
                self._closing = True


def _resolve(item: _Item, trial: Trial) -> None:
    if not item.future.done():
        item.future.set_result(trial)


class PoolRunner(Runner):
    """The :class:`~tritonkit.tune.Runner` of one key on a :class:`WorkPool`: each config of a
    batch is one item of the pool's queue; the call returns when all are measured.

    Made by :meth:`WorkPool.runner`; call :meth:`finish` once the key is tuned.
    """

    def __init__(self, pool: WorkPool, key_id: int):
        self.pool, self.key_id = pool, key_id

    def __call__(self, points: Sequence[Point]) -> List[Trial]:
        """Measure ``points`` on the pool's workers.

        Returns:
            One :class:`~tritonkit.tune.Trial` per point, in order (``crashed`` for a config that
            killed ``crash_after`` workers).

        Raises:
            WorkerError: a worker's runner raised for this key (with the worker's traceback), the
                key's arguments killed workers while loading, or no worker is left.
        """
        if not points:
            return []
        futures = self.pool._submit(self.key_id, points)
        wait(futures, return_when=FIRST_EXCEPTION)
        for f in futures:
            if f.done() and f.exception() is not None:
                for other in futures:  # still queued: never dealt out (the dispatcher skips them)
                    other.cancel()
                raise f.exception()
        return [f.result() for f in futures]

    def finish(self) -> None:
        """Tell the workers to drop this key's job (its arguments)."""
        self.pool._command(("forget", self.key_id))
