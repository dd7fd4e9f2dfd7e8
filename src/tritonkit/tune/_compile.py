"""Parallel compilation: every candidate config compiled on all CPU cores before any is timed.

Triton's compiler is partly Python (the front end holds the GIL), so threads overlap only its
native parts. :class:`ForkCompileExecutor` instead runs each compile job first in a forked child
process, which writes the result to Triton's on-disk cache, and then once more in this process,
where it is a cache hit. It plugs into Triton's own ``AsyncCompileMode`` (which hands its
executor a closure that calls ``triton.compile`` with the target already resolved), so nothing of
Triton's is re-implemented; a child never touches the GPU. Where ``os.fork`` is missing, or with
``TRITONKIT_COMPILE=threads``, a thread pool is used instead.
"""
from __future__ import annotations

import os
import time
import warnings
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import Callable, List, Tuple


class ForkCompileExecutor(Executor):
    """An executor for Triton's ``AsyncCompileMode``: :meth:`submit` queues, :meth:`run_all` runs.

    Args:
        workers: child processes at a time (default: the CPU count).
        child_timeout_s: a child still compiling after this many seconds is killed (its job then
            runs, and fails or succeeds, in this process).
    """

    def __init__(self, workers: int = 0, child_timeout_s: float = 600.0):
        self.workers = max(1, workers or os.cpu_count() or 1)
        self.child_timeout_s = child_timeout_s
        self._jobs: List[Tuple[Callable, Future]] = []
        self.child_failures = 0

    def submit(self, fn, /, *args, **kwargs) -> Future:
        """Queue ``fn(*args, **kwargs)``; its future resolves in :meth:`run_all`."""
        fut: Future = Future()
        self._jobs.append((lambda: fn(*args, **kwargs), fut))
        return fut

    def run_all(self) -> None:
        """Compile every queued job in forked children (``workers`` at a time), then finish each in
        this process (a disk-cache hit where the child succeeded) and resolve its future."""
        jobs, self._jobs = self._jobs, []
        running = {}
        queue = list(range(len(jobs)))
        while queue or running:
            while queue and len(running) < self.workers:
                i = queue.pop(0)
                with warnings.catch_warnings():  # the child only compiles: no thread it lacks is needed
                    warnings.simplefilter("ignore", DeprecationWarning)
                    pid = os.fork()
                if pid == 0:  # the child: compile into Triton's disk cache, never return
                    code = 1
                    try:
                        jobs[i][0]()
                        code = 0
                    except BaseException:
                        pass
                    finally:
                        os._exit(code)
                running[pid] = (i, time.monotonic())
            pid, status = os.waitpid(-1, 0)
            if pid in running:
                del running[pid]
                if status != 0:
                    self.child_failures += 1
            now = time.monotonic()
            for p, (_, started) in list(running.items()):
                if now - started > self.child_timeout_s:
                    try:
                        os.kill(p, 9)
                    except ProcessLookupError:
                        pass
        for fn, fut in jobs:
            try:
                fut.set_result(fn())
            except BaseException as e:
                fut.set_exception(e)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Run what is still queued (unless ``wait`` is False or ``cancel_futures``)."""
        if self._jobs and wait and not cancel_futures:
            self.run_all()


def make_executor(workers: int = 0):
    """(executor, run) for :func:`compile_all`: fork-based where possible, else threads."""
    if hasattr(os, "fork") and os.environ.get("TRITONKIT_COMPILE", "fork") != "threads":
        ex = ForkCompileExecutor(workers)
        return ex, ex.run_all
    ex = ThreadPoolExecutor(max_workers=max(1, workers or os.cpu_count() or 1))
    return ex, lambda: None
