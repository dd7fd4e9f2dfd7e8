"""The local engine: one worker process per GPU of this host, started with the standard library's
``multiprocessing`` (``spawn``: a fresh interpreter, no CUDA state inherited) and
``CUDA_VISIBLE_DEVICES`` set to its GPU, so each worker sees exactly one device as ``cuda:0``.

Each worker talks to the driver through its own pipe; the driver waits on every pipe and every
process's sentinel at once (``multiprocessing.connection.wait``), so a worker that dies (a signal,
``os._exit``) is noticed at once, after whatever it sent before dying has been read. Workers
ignore SIGINT (Ctrl-C stops the driver, which stops them) and exit by themselves when the driver
is gone (:func:`~._protocol.watch_parent`). Workers write the driver's cache directory (the same
filesystem), so each journals its own measurements (:mod:`._ledger`).
"""
from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from .._cache._journal import proc_start_time
from ._pool import Engine
from ._protocol import WorkerState, watch_parent, worker_info


def visible_gpus() -> List[str]:
    """The GPUs this process may use, as ``CUDA_VISIBLE_DEVICES`` entries: that variable's entries
    where it is set (up to the first invalid one, as CUDA reads it), else every GPU NVML sees
    (indices), else none. CUDA is not initialised."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        out = []
        for x in (e.strip() for e in env.split(",")):
            if not x or x.startswith("-"):
                break
            out.append(x)
        return out
    try:
        import pynvml
        pynvml.nvmlInit()
        try:
            return [str(i) for i in range(pynvml.nvmlDeviceGetCount())]
        finally:
            pynvml.nvmlShutdown()
    except Exception:
        return []


@dataclass
class _Proc:
    process: Any
    conn: Any


def serve(conn, gpu: str, env: Mapping[str, str], device: Optional[str], parent: int) -> None:
    """A worker process's main function: set its GPU, say hello, then carry out the driver's
    messages (:class:`~._protocol.WorkerState`) until ``stop`` or the driver is gone."""
    os.environ["CUDA_VISIBLE_DEVICES"] = gpu
    os.environ.update(env)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent()
    state = WorkerState(label=f"gpu {gpu}, pid {os.getpid()}")
    watch_parent(state, parent, every_s=0.02)
    info = worker_info(gpu, device)
    info["start"] = proc_start_time(os.getpid())
    try:
        conn.send(("hello", info))
        while True:
            try:
                message = conn.recv()
            except (EOFError, OSError):
                return
            if not state.handle(message, conn.send):
                return
    except (BrokenPipeError, EOFError, OSError):  # the driver is gone
        return


def _die_with_parent() -> None:
    """Linux: have the kernel SIGKILL this worker the moment the driver's thread that started it
    ends (``prctl(PR_SET_PDEATHSIG)``), so a killed driver's workers stop at once, not at the
    watchdog's next look. Elsewhere the watchdog alone does it."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class LocalEngine(Engine):
    """Worker processes on this host, one per GPU (see the module).

    Args:
        workers: how many workers (default: one per GPU of ``gpus``; 1 where there is none).
        gpus: the GPUs to use, as ``CUDA_VISIBLE_DEVICES`` entries (default :func:`visible_gpus`).
            With more workers than GPUs, GPUs are shared round-robin. Where there is no GPU (a
            CPU machine replaying landscapes), workers get ``CUDA_VISIBLE_DEVICES`` 0, 1, ...
            all the same, as they would on a GPU host.
        env: more environment variables for the workers (``TRITON_INTERPRET=1`` to run kernels in
            Triton's CPU interpreter).
        device_name: the device name workers report (default: read through NVML; ``"cpu"``
            without a GPU); replays of a recording pass the recording's device.
        start_method: ``multiprocessing``'s start method (``spawn``; ``forkserver`` also works;
            ``fork`` is unsafe once CUDA or threads are up).

    Raises:
        ValueError: ``workers`` is below 1.
    """

    name = "local"
    shared_filesystem = True

    def __init__(self, workers: Optional[int] = None, gpus: Optional[Sequence[str]] = None,
                 env: Optional[Mapping[str, str]] = None, device_name: Optional[str] = None,
                 start_method: str = "spawn"):
        gpus = [str(g) for g in (gpus if gpus is not None else visible_gpus())]
        n = workers if workers is not None else max(1, len(gpus))
        if n < 1:
            raise ValueError(f"workers must be at least 1, got {n}")
        if not gpus:
            gpus = [str(i) for i in range(n)]
        self._slots = [gpus[i % len(gpus)] for i in range(n)]
        self.env: Dict[str, str] = dict(env or {})
        self.device_name = device_name
        self._ctx = multiprocessing.get_context(start_method)
        self._wake_r, self._wake_w = self._ctx.Pipe(duplex=False)

    def slots(self) -> List[str]:
        """The GPU of each worker slot."""
        return list(self._slots)

    def start(self, slot: int) -> _Proc:
        """Start the worker process of ``slot`` (it says hello when up)."""
        parent, child = self._ctx.Pipe()
        p = self._ctx.Process(target=serve, name=f"tritonkit-tune-worker-{slot}", daemon=True,
                              args=(child, self._slots[slot], self.env, self.device_name, os.getpid()))
        p.start()
        child.close()
        return _Proc(p, parent)

    def send(self, handle: _Proc, message: Tuple) -> None:
        """Send ``message`` down the worker's pipe (dropped if the worker is gone: its death is an event)."""
        try:
            handle.conn.send(message)
        except (OSError, ValueError):
            pass

    def wait(self, handles: Sequence[_Proc], timeout: float) -> List[Tuple[_Proc, Tuple]]:
        """Messages from the workers, and ``("died", why)`` for those that are gone."""
        objs: List[Any] = [self._wake_r]
        for h in handles:
            objs += [h.conn, h.process.sentinel]
        ready = set(multiprocessing.connection.wait(objs, timeout))
        events: List[Tuple[_Proc, Tuple]] = []
        for h in handles:
            if h.conn not in ready and h.process.sentinel not in ready:
                continue
            dead = False
            try:
                while h.conn.poll():
                    events.append((h, h.conn.recv()))
            except (EOFError, OSError):
                dead = True
            if dead or h.process.sentinel in ready:
                h.process.join(5)
                events.append((h, ("died", _why(h.process.exitcode))))
                h.conn.close()
        if self._wake_r in ready:
            while self._wake_r.poll():
                self._wake_r.recv_bytes()
        return events

    def wake(self) -> None:
        """Make a :meth:`wait` in progress return."""
        try:
            self._wake_w.send_bytes(b"")
        except OSError:
            pass

    def close(self, handles: Sequence[_Proc], timeout: float) -> None:
        """Ask every worker to stop, wait up to ``timeout`` seconds, then kill those left."""
        for h in handles:
            self.send(h, ("stop",))
        for h in handles:
            h.process.join(timeout)
            if h.process.is_alive():
                h.process.kill()
                h.process.join(5)
            try:
                h.conn.close()
            except OSError:
                pass


def _why(exitcode: Optional[int]) -> str:
    """A dead worker's exit, in words."""
    if exitcode is None:
        return "the worker stopped answering"
    if exitcode < 0:
        try:
            return f"signal {-exitcode} ({signal.Signals(-exitcode).name})"
        except ValueError:
            return f"signal {-exitcode}"
    return f"exit status {exitcode}"
