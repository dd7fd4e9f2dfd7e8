"""What the processes a check session forks share: how many to use, the flags a forked worker
carries, each process's BLAS threads, and waiting for workers.

Used by the config workers of :mod:`.launch.parallel` and the launch shares of
:mod:`.engine.shares`; it imports neither.
"""
from __future__ import annotations

import contextlib
import os
import pickle
import select
import signal
import sys
import time
from typing import Dict, Optional

#: set around a worker's fork (configs' or shares'): the fork hook of :mod:`..process` leaves such a child alone
IN_WORKER_FORK = False
#: set in a config worker: it runs its configs' launches itself, never shared out (see ..engine.shares)
IN_WORKER = False
#: set in a share worker (see .engine.shares): it never shares out again (and the config workers' fork hook applies)
IN_SHARE_WORKER = False
#: config pools whose workers run now: this process's launches meanwhile are not shared out
POOLS_RUNNING = 0
#: seconds without a finished config after which a worker is taken for hung (at least)
MIN_STALL = 300.0


def available_cores() -> int:
    """The cores this process may run on (``os.sched_getaffinity`` where there is one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def resolve_workers(workers: Optional[int]) -> int:
    """The worker count a session uses: ``workers`` if given (1: serial), else
    ``TRITONKIT_WORKERS`` if set, else :func:`available_cores` shared between the processes of a
    pytest-xdist run (``PYTEST_XDIST_WORKER_COUNT``, which xdist sets in each of its workers: ``-n 8``
    on 16 cores gives each test process 2).

    Raises:
        ValueError: a count that is not a positive integer (the variable's too).
    """
    if workers is None:
        env = os.environ.get("TRITONKIT_WORKERS", "").strip()
        if not env:
            return max(1, available_cores() // _xdist_processes())
        try:
            workers = int(env)
        except ValueError:
            raise ValueError(f"TRITONKIT_WORKERS must be a positive number of processes, not {env!r}") from None
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a positive number of processes, not {workers!r}")
    return workers


def _xdist_processes() -> int:
    """The processes of the pytest-xdist run this process is a worker of (1: none)."""
    try:
        return max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
    except ValueError:
        return 1


#: threadpoolctl's view of this process's thread pools, made once (finding them walks every loaded
#: library: 37 ms a launch in a pytest process with torch and CUDA loaded, on the GPU machine's host)
_CONTROLLER: list = []


def limit_threads(threads: int):
    """A context in which the BLAS libraries NumPy uses (``tl.dot`` is a ``numpy.matmul``) run
    ``threads`` threads, through threadpoolctl where it is installed (a no-op where not): a worker
    and the parent each running a BLAS with every core's threads would oversubscribe the machine.
    The libraries are those loaded at the first call (NumPy's BLAS is loaded with NumPy)."""
    if not _CONTROLLER:
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:
            _CONTROLLER.append(None)
        else:
            _CONTROLLER.append(ThreadpoolController())
    if _CONTROLLER[0] is None:
        return contextlib.nullcontext()
    return _CONTROLLER[0].limit(limits=max(1, threads), user_api="blas")


def pass_threads(session) -> int:
    """Threads a memory-bound pass over a large array may take in this process (see
    :func:`~.memory.host.in_parallel`): the session's workers, but 1 in a worker process or while
    config workers run (the other processes have the other cores)."""
    return 1 if IN_WORKER or IN_SHARE_WORKER or POOLS_RUNNING else max(1, session.workers)


def can_fork(session) -> bool:
    """Whether this session may fork workers (for configs, or for shares of a launch)."""
    return hasattr(os, "fork") and sys.platform != "win32" and not session.pdb and session.workers > 1


def pools(change: int) -> None:
    """Count config pools starting (+1) or ending (-1)."""
    global POOLS_RUNNING
    POOLS_RUNNING += change


def wait(children) -> Dict[int, bool]:
    """Wait for the workers; one that makes no progress for the stall time is killed. Returns
    ``{worker: exited cleanly}``."""
    pipes = {r: w for w, (_, r) in children.items()}
    last = {w: time.monotonic() for w in children}
    longest = 0.0
    while pipes:
        stall = max(MIN_STALL, 20 * longest)
        ready, _, _ = select.select(list(pipes), [], [], 1.0)
        now = time.monotonic()
        for r in ready:
            w = pipes[r]
            data = os.read(r, 64)
            if data:
                longest = max(longest, (now - last[w]) / len(data))
                last[w] = now
            else:  # the worker closed its end: it has exited
                os.close(r)
                del pipes[r]
        for r, w in list(pipes.items()):
            if now - last[w] > stall:
                kill(children[w][0])
                os.close(r)
                del pipes[r]
    out = {}
    for w, (pid, _) in children.items():
        try:
            _, status = os.waitpid(pid, 0)
            out[w] = os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
        except ChildProcessError:  # pragma: no cover
            out[w] = False
    return out


def read_result(path: str) -> Optional[dict]:
    """The dict a worker pickled to ``path``, or None where there is none or it does not read back."""
    try:
        with open(path, "rb") as f:
            got = pickle.load(f)
    except Exception:
        return None
    return got if isinstance(got, dict) else None


def kill(pid: int) -> None:
    """Kill a worker (SIGKILL); one that has exited already is no error."""
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
