"""The worker protocol of the tuning pool: what travels between the driver and a worker, and what a
worker does with it. Every engine (local processes, Ray actors) carries the same messages.

Driver to worker:

* ``("key", key_id, job, journal)``: a :class:`KeyJob` (what the worker needs to measure configs
  at one key: the launch's arguments, or a recorded landscape) and, where the worker can write the
  driver's cache directory, a :class:`Journal`. Sent once per key to each worker that gets work of
  that key, before its first config of that key.
* ``("run", item_id, key_id, point)``: measure one config.
* ``("forget", key_id)``: the key is tuned; drop its arguments.
* ``("stop",)``: exit.

Worker to driver:

* ``("hello", info)``: the worker is up; ``info`` has ``pid``, ``host``, ``gpu`` (its
  ``CUDA_VISIBLE_DEVICES``) and ``device`` (the device's name).
* ``("begin", item_id)``: the key's runner is built and the config starts now (a worker that dies
  after this is blamed on the config).
* ``("done", item_id, trial, journaled)``: the measurement, and whether the worker wrote it to
  the ledger.
* ``("error", item_id, text)``: the runner raised (a bug, a wrong reference function): the
  caller's tuning of that key raises :class:`WorkerError` with the worker's traceback.
* ``("poisoned", item_id, text)``: the config broke the worker's CUDA context; the worker exits.

The driver side is :mod:`._pool`; the engines (:mod:`._local`) only start workers
and move these messages.
"""
from __future__ import annotations

import os
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Protocol, Tuple

from .._cache import KernelId
from .._cache._journal import this_host
from .._replay import ReplayRunner
from .._result import Trial
from .._runner import ContextPoisoned
from .._runner_api import Runner
from .._space import Point
from . import _ledger

#: exit status of a worker whose CUDA context a config broke.
EXIT_POISONED = 86


class WorkerError(RuntimeError):
    """A worker could not measure: its runner raised (the message holds the worker's traceback),
    a key's arguments killed workers while loading, or no worker is left to run the work."""


class KeyJob(Protocol):
    """What a worker needs to measure the configs of one kernel at one key. Picklable: it travels
    once per key to each worker that measures that key (with the launch's real arguments, where
    there are any), never once per config."""

    def runner(self) -> Runner:
        """Build the runner for this key, in the worker (on the worker's GPU).

        Returns:
            A :class:`~tritonkit.tune.Runner`; the worker calls it with one config at a time.

        Raises:
            Exception: the key cannot be measured here; the driver's caller gets a
                :class:`WorkerError` with the traceback.
        """
        ...


@dataclass(frozen=True)
class Journal:
    """Where a worker journals each finished measurement of one key: its ledger directory (under
    the driver's cache directory, so only for workers on the driver's host or a shared
    filesystem), the kernel identity and the key (strings)."""

    ledger_dir: str
    kernel_id: KernelId
    key: Tuple[str, ...]


@dataclass
class ReplayJob:
    """A :class:`KeyJob` that replays a recorded landscape instead of launching a kernel, sleeping
    ``seconds`` per config measured to stand in for a GPU's time.

    Attributes:
        landscape: ``{point_key or str(triton.Config): ms}`` (``inf``/None: the config failed).
        seconds: wall seconds each measurement takes (a sleep).
        noise: relative noise of the replayed times (see :class:`~tritonkit.tune.ReplayRunner`).
        seed: seed of the noise.
        crash: point keys whose measurement kills the worker (``os._exit``, as a segfault would):
            for tests of fault handling.
    """

    landscape: Mapping[str, Any]
    seconds: float = 0.0
    noise: float = 0.0
    seed: int = 0
    crash: Tuple[str, ...] = ()

    def runner(self) -> Runner:
        """A :class:`~tritonkit.tune.ReplayRunner` over the landscape that sleeps ``seconds`` per
        config (and dies on the ``crash`` configs)."""
        return _SleepyReplay(ReplayRunner(dict(self.landscape), noise=self.noise, seed=self.seed),
                             self.seconds, set(self.crash))


class _SleepyReplay(Runner):
    """A replay runner that takes ``seconds`` per config, like a GPU would."""

    def __init__(self, replay: ReplayRunner, seconds: float, crash: set):
        self.replay, self.seconds, self.crash = replay, seconds, crash

    def __call__(self, points):
        from .._space import point_key
        out = []
        for p in points:
            if self.seconds > 0:
                time.sleep(self.seconds)
            if point_key(p) in self.crash:
                os._exit(139)  # what a segfault in a kernel looks like from outside
            out.extend(self.replay([p]))
        return out


def worker_info(gpu: str, device: Optional[str] = None) -> Dict[str, Any]:
    """What a worker says in its ``hello``: pid, host, its GPU (``CUDA_VISIBLE_DEVICES``) and the
    device's name (``device`` where given, else read through NVML, else ``"cpu"``)."""
    return {"pid": os.getpid(), "host": this_host(), "gpu": gpu, "device": device or device_name(gpu)}


def device_name(gpu: str) -> str:
    """The name of GPU ``gpu`` (an index or a ``GPU-...`` UUID, as in ``CUDA_VISIBLE_DEVICES``)
    through NVML, without initialising CUDA; ``"cpu"`` where there is no such GPU or no NVML."""
    try:
        import pynvml
        pynvml.nvmlInit()
        try:
            h = pynvml.nvmlDeviceGetHandleByUUID(gpu) if gpu.startswith(("GPU-", "MIG-")) else \
                pynvml.nvmlDeviceGetHandleByIndex(int(gpu))
            name = pynvml.nvmlDeviceGetName(h)
            return name.decode() if isinstance(name, bytes) else str(name)
        finally:
            pynvml.nvmlShutdown()
    except Exception:
        return "cpu"


class WorkerState:
    """A worker's state, whatever the engine: the jobs it was sent, their runners (built at the
    first config of a key), and the ledger it journals into.

    Args:
        label: the worker's name in ledger lines (``gpu 3, pid 1234``).
    """

    def __init__(self, label: str = ""):
        self.label = label
        self.jobs: Dict[int, Tuple[KeyJob, Optional[Journal]]] = {}
        self.runners: Dict[int, Runner] = {}
        #: held while a finished measurement is being journaled: the watchdog waits for it, so a
        #: worker stopped because its driver died never leaves a measurement half kept.
        self.commit_lock = threading.Lock()

    def open(self, key_id: int, job: KeyJob, journal: Optional[Journal]) -> None:
        """Keep ``job`` for ``key_id`` (its runner is built at its first config)."""
        self.jobs[key_id] = (job, journal)

    def forget(self, key_id: int) -> None:
        """Drop the job and runner of ``key_id`` (frees the key's arguments)."""
        self.jobs.pop(key_id, None)
        runner = self.runners.pop(key_id, None)
        finish = getattr(runner, "finish", None)
        if finish is not None:
            finish()

    def prepare(self, key_id: int) -> Runner:
        """The runner of ``key_id``, built now if needed.

        Raises:
            KeyError: the key was never sent to this worker (a protocol error).
            Exception: from the job's ``runner()``.
        """
        if key_id not in self.runners:
            self.runners[key_id] = self.jobs[key_id][0].runner()
        return self.runners[key_id]

    def measure(self, key_id: int, point: Point) -> Tuple[Trial, bool]:
        """Measure ``point`` with the key's runner and journal it.

        Returns:
            (the trial, whether it was written to the ledger).

        Raises:
            ContextPoisoned: the config broke the CUDA context (the worker must exit).
            Exception: anything else the runner raised.
        """
        trials = self.prepare(key_id)([point])
        if len(trials) != 1:
            raise RuntimeError(f"the runner returned {len(trials)} trials for one config")
        trial = trials[0]
        journal = self.jobs[key_id][1]
        if journal is None:
            return trial, False
        with self.commit_lock:
            _ledger.append(_ledger.ledger_file(journal.ledger_dir), journal.kernel_id, list(journal.key), trial,
                           self.label)
        return trial, True

    def handle(self, message: Tuple, send: Callable[[Tuple], None]) -> bool:
        """Carry out one message from the driver, sending the replies through ``send``.

        Returns:
            False where the worker must stop (``stop``), True otherwise.
        """
        kind = message[0]
        if kind == "key":
            self.open(message[1], message[2], message[3])
        elif kind == "forget":
            self.forget(message[1])
        elif kind == "stop":
            return False
        elif kind == "run":
            _, item_id, key_id, point = message
            try:
                self.prepare(key_id)
                send(("begin", item_id))
                trial, journaled = self.measure(key_id, point)
            except ContextPoisoned as e:
                send(("poisoned", item_id, e.error))
                os._exit(EXIT_POISONED)
            except Exception:
                send(("error", item_id, traceback.format_exc()))
                return True
            send(("done", item_id, trial, journaled))
        return True


def watch_parent(state: WorkerState, parent: int, every_s: float = 0.05) -> threading.Thread:
    """Exit this worker (``os._exit``) as soon as its driver ``parent`` is gone, so a killed driver
    leaves no worker measuring for nobody; a measurement being journaled is finished first.

    Returns:
        The watchdog thread (a daemon).
    """
    def watch():
        while True:
            time.sleep(every_s)
            if os.getppid() != parent:
                with state.commit_lock:
                    os._exit(0)

    t = threading.Thread(target=watch, name="tritonkit-worker-watchdog", daemon=True)
    t.start()
    return t


def key_strings(key: Mapping[str, Any]) -> List[str]:
    """A sweep key (name -> value) as the tuner's key: its values as strings, in order."""
    return [str(v) for v in key.values()]


@dataclass
class WorkerSummary:
    """What one worker slot did during a pool's life (a slot is one GPU; a replaced worker keeps
    its slot).

    Attributes:
        slot: the slot's index.
        gpu: the slot's GPU (``CUDA_VISIBLE_DEVICES`` of its workers, or the Ray node and GPU).
        device: the device's name.
        host: the host its workers ran on.
        pids: every process that served the slot (more than one after a death).
        measured: configs measured.
        busy_s: wall seconds spent measuring (from ``begin`` to ``done``).
        deaths: workers of this slot that died.
        requeued: configs taken back from dead workers and dealt out again.
        crashed: configs recorded ``crashed`` after killing workers.
        keys: distinct keys the slot was sent arguments for.
    """

    slot: int
    gpu: str = ""
    device: str = ""
    host: str = ""
    pids: List[int] = field(default_factory=list)
    measured: int = 0
    busy_s: float = 0.0
    deaths: int = 0
    requeued: int = 0
    crashed: int = 0
    keys: int = 0

    def to_dict(self) -> Dict[str, Any]:
        """Plain JSON data."""
        return dict(self.__dict__)
