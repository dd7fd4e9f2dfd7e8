"""Cooperative scheduling of one launch's programs, as the sequential engine runs them.

Programs run one at a time, in order (``z`` fastest), each to its end, as Triton's interpreter runs
them. A program that waits for memory only another program changes (a spin on a flag or a lock,
``while tl.atomic_cas(lock, 0, 1) == 1: pass``, a lock handed from program to program) would wait
forever there; on a GPU the programs resident at once run side by side, and the one that sets the
flag runs meanwhile. So here, when the running program *polls* (an atomic, or a volatile load:
``tl.load(p, volatile=True)``, ``tl.atomic_load``) the same addresses
:data:`YIELD_POLLS` times in a row while nothing writes to memory, it *gives way*
(:meth:`Cooperative.give_way`, called by :meth:`~tritonkit.check.launch.Launch.access` before the
poll is performed): it is suspended, and the next program runs, chosen in this order:

1. a suspended program whose polled values changed since it gave way (in the order they gave way);
2. else the next program that has not started, while fewer than :data:`MAX_RESIDENT` programs are
   started and not finished (a GPU does not hold every program of a large grid at once either);
3. else the program that gave way first, which then polls on however long, since no other program
   can change memory: one that polls ``stall_polls`` times with no change is a hang, reported as a
   ``timeout`` finding with ``reason: stalled`` naming it, its polling line and the programs that
   wait with it (:meth:`Cooperative.waiting`).

A suspended program keeps its stack: the first program runs in the calling (main) thread as
before, and a program started while another one is suspended runs in a thread of its own, which
ends with its program (or goes on with the next one). Exactly one of them runs at any time: each
waits for its turn on its own event, and the thread that stops running decides which runs next by
the rules above (deterministically) and hands it the turn. What makes a program the running one
(its ids, the builder's state inside the operation it stopped in, its poll count, the checks'
per-program state such as the race check's vector clock: :meth:`Launch.program_state`) is saved
when it gives way and given back when it resumes, so every hook and finding names it. A launch
whose programs never give way starts no thread.

What stops the launch (an exception from a program, ``stop_on_first``, the time limit, ``^C``)
stops every program: the suspended ones are ended one by one (:class:`Cancelled`, raised where each
waits), and the exception is raised in the main thread with the failing program the running one
again. The time limit (``SIGALRM``) and ``^C`` arrive in the main thread; while a program of another
thread runs, that thread is asked to raise them (:func:`_raise_in`), so that the finding names that
program and its line; while the main thread hands its turn over they are held, and passed on once
it waits (so that two threads never run a program at once).
"""
from __future__ import annotations

import contextvars
import ctypes
import signal
import threading
from collections import deque
from typing import Deque, List, Optional

import numpy as np

#: programs started and not finished at once, at most: past it a program that gives way resumes
#: the suspended ones instead of starting a new one. A GPU holds a few thousand small programs at
#: once (an H100: 132 SMs of at most 32 blocks, fewer with more warps or shared memory); a grid whose
#: programs all wait for one of its last programs hangs there too when that one is not resident.
MAX_RESIDENT = 1024
#: identical polls with no write in between after which a program gives way (or the stall limit,
#: where it is lower). Switching costs tens of microseconds, less than a poll (a few hundred)
YIELD_POLLS = 8

_NEW = object()  # _pick: start the next program
#: what the main thread gets while another thread may run a program: the time limit, ^C
_SIGNALS = tuple(getattr(signal, name) for name in ("SIGALRM", "SIGINT") if hasattr(signal, name))


class Cancelled(BaseException):
    """Ends a suspended program's thread when its launch stops (raised where the program waits)."""


class _Stop(BaseException):
    """Unwinds the main thread's program when a program of another thread stopped the launch."""


class _Runner:
    """A thread that runs programs: the main thread, or one started for a program."""

    __slots__ = ("thread", "event", "task", "in_kernel", "interrupted", "main")

    def __init__(self, main: bool) -> None:
        self.thread: Optional[threading.Thread] = threading.current_thread() if main else None
        self.event = threading.Event()
        self.task = None  # what it is handed with its turn: "resume", ("new", index), "done", "error", "cancel"
        self.in_kernel = False  # running a program's code (another thread may ask it to raise)
        self.interrupted = False  # asked to raise (see _raise_in)
        self.main = main


class _Program:
    """A started program: its execution index and thread; while suspended, its saved state and
    what it polled (the resolved lanes and their values then, or None) at ``changes``."""

    __slots__ = ("index", "runner", "state", "watch", "changes")

    def __init__(self, index: int, runner: _Runner) -> None:
        self.index, self.runner = index, runner
        self.state = self.watch = None
        self.changes = -1


def _raise_in(thread: threading.Thread, exc_type) -> None:
    """Ask ``thread`` to raise ``exc_type`` at its next bytecode (None: take a pending request back)."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident),
                                               None if exc_type is None else ctypes.py_object(exc_type))


class Cooperative:
    """Runs the programs of ``launch`` through the kernel's rewritten body ``fn`` with ``call_args``,
    one at a time, letting a program that waits for another give way (see the module).

    Made and run by the sequential engine, which sets it as ``launch.scheduler`` meanwhile.
    """

    def __init__(self, launch, fn, call_args) -> None:
        self.launch, self.fn, self.call_args = launch, fn, call_args
        gx, gy, gz = launch.grid
        self.total = gx * gy * gz
        self.next = 0  # the next program (execution index) to start
        self.live = 0  # started and not finished
        self.suspended: Deque[_Program] = deque()  # in the order they gave way
        self.lock = threading.Lock()
        self.main = _Runner(main=True)
        self.holder = self.main  # the runner whose turn it is
        self.running: Optional[_Program] = None
        self.idle = False  # the main thread waits with no program of its own
        self.threads: List[threading.Thread] = []
        self.context: Optional[contextvars.Context] = None  # the main thread's (numpy's errstate, ...)
        self.error = None  # (exception, state of its program) of another thread that stops the launch
        self.signal: Optional[BaseException] = None  # what the main thread got while another thread ran
        # signals are delivered to the main thread: this one, while it hands its turn over, holds them
        self.signals = threading.current_thread() is threading.main_thread()
        self._held: Optional[list] = None  # (signal, its handler) while held, and the signals that came
        self._came: List[int] = []

    # --- the main thread ---------------------------------------------------------------------------
    def run(self) -> None:
        """Run every program (in the main thread, with threads only for programs that start while
        another one is suspended). Raises what stops the launch, with its program the running one."""
        main = self.main
        failed: Optional[BaseException] = None
        try:
            index = self._claim()
            while index is not None:
                self._run_program(main, index)
                index = self._after(main)
        except BaseException as exc:  # every exception stops every program
            failed = exc
        if failed is not None:
            self._stop(failed)
        self._join()

    def _stop(self, failed: BaseException) -> None:
        """End every other program and raise what stopped the launch, its program running again."""
        launch = self.launch
        if isinstance(failed, _Stop) and self.error is not None:
            failed, state = self.error
        else:
            state = launch.program_state()
        with self.lock:
            waiting = [p.runner for p in self.suspended if not p.runner.main]
            self.suspended.clear()
        for runner in waiting:  # one at a time: each unwinds its program's code alone
            with self.lock:
                self._hand(runner, "cancel")
            self._join_one(runner.thread)
        self._join()
        self.signal = None
        launch.resume_program(state)
        raise failed

    def _join(self) -> None:
        for t in self.threads:
            self._join_one(t)
        self.threads.clear()

    @staticmethod
    def _join_one(thread: Optional[threading.Thread]) -> None:
        while thread is not None and thread.is_alive():
            try:
                thread.join()
            except BaseException:  # ^C again: the thread is ending anyway
                continue

    # --- every thread ------------------------------------------------------------------------------
    def _claim(self) -> Optional[int]:
        """Start counting the next program as started; its execution index (None: all started)."""
        if self.next >= self.total:
            return None
        index = self.next
        self.next += 1
        self.live += 1
        return index

    def _run_program(self, runner: _Runner, index: int) -> None:
        launch = self.launch
        _, gy, gz = launch.grid
        self.running = _Program(index, runner)
        launch.begin_program(index // (gy * gz), (index // gz) % gy, index % gz)
        if not runner.main:
            self._enter(runner)
        self.fn(**self.call_args)
        if not runner.main:
            with self.lock:
                runner.in_kernel = False
        launch.record.programs += 1

    def _after(self, runner: _Runner) -> Optional[int]:
        """``runner`` finished its program: the next program it runs (None: none, it is done)."""
        if runner.main and not self.threads and not self.suspended:  # no program ever gave way
            self.live -= 1
            return self._claim()
        held = runner.main and self._hold_signals()
        try:
            with self.lock:
                self.live -= 1
                choice = self._pick()
                if choice is _NEW or choice is None:  # go on with the next program, or every program ran
                    if choice is None and not runner.main:
                        self._hand(self.main, "done")
                    if held:
                        self._release_signals()
                    return self._claim() if choice is _NEW else None
                self._hand(choice.runner, "resume")
                if not runner.main:
                    return None  # the thread ends
                self.idle = True
        except BaseException:
            if held:
                self._restore_signals()
            raise
        task = self._wait(runner)
        if task == "error":
            raise _Stop()
        self._signalled(runner)
        return task[1] if isinstance(task, tuple) else None

    def give_way(self, acc, addrs: np.ndarray, mask: Optional[np.ndarray]) -> bool:
        """The running program polls ``addrs`` (``mask``: its lanes) with ``acc`` (an atomic or a
        volatile load, not performed yet) and nothing changed memory since its last polls: suspend
        it while another program runs (see the module for which).

        Returns:
            False where no other program can run now (it polls on); True once it runs again.
        Raises:
            Cancelled: the launch stopped while it was suspended.
        """
        launch = self.launch
        me = self.running
        runner = me.runner
        held = runner.main and self._hold_signals()
        try:
            with self.lock:
                self._signalled(runner)
                choice = self._pick()
                if choice is None:
                    if held:
                        self._release_signals()
                    return False
                runner.in_kernel = False
                if self.context is None:  # the first program to give way runs in the main thread
                    self.context = contextvars.copy_context()
                me.state = launch.program_state()
                me.watch = self._watched(addrs, mask, acc.size)
                me.changes = launch.space.changes
                self.suspended.append(me)
                if choice is not _NEW:
                    self._hand(choice.runner, "resume")
                elif self.idle:
                    self.idle = False
                    self._hand(self.main, ("new", self._claim()))
                else:
                    self._start(self._claim())
        except BaseException:
            if held:
                self._restore_signals()
            raise
        task = self._wait(runner)
        if task == "cancel":
            raise Cancelled()
        if task == "error":
            raise _Stop()
        self.running = me
        launch.resume_program(me.state)
        me.state = me.watch = None
        if not runner.main:
            self._enter(runner)
        else:
            self._signalled(runner)
        return True

    def waiting(self) -> str:
        """What the other programs do, for a stall's message: those suspended, and those the bound
        on resident programs keeps from starting."""
        parts = []
        ids = [self._program_id(p.index) for p in self.suspended if p is not self.running]
        if ids:
            shown = ", ".join(_label(i) for i in ids[:8]) + (", ..." if len(ids) > 8 else "")
            parts.append(f"{_count(len(ids), 'other program')} wait{'s' if len(ids) == 1 else ''} too ({shown})")
        left = self.total - self.next
        if left:
            parts.append(f"{_count(left, 'program')} did not start: at most {MAX_RESIDENT} programs run at once "
                         f"here, as a GPU holds only so many")
        return "; ".join(parts) if parts else "no other program is left to run"

    def _program_id(self, index: int) -> tuple:
        _, gy, gz = self.launch.grid
        return (index // (gy * gz), (index // gz) % gy, index % gz)[: max(1, self.launch.grid_ndim)]

    # --- choosing and handing over the turn (under self.lock) -------------------------------------------
    def _pick(self):
        """Which runs next: a suspended program, :data:`_NEW`, or None (nothing else can run)."""
        for p in self.suspended:
            if self._changed(p):
                self.suspended.remove(p)
                return p
        if self.next < self.total and self.live < MAX_RESIDENT:
            return _NEW
        return self.suspended.popleft() if self.suspended else None

    def _changed(self, p: _Program) -> bool:
        """Whether what suspended program ``p`` polls changed since it gave way."""
        space = self.launch.space
        if p.changes == space.changes:
            return False
        if p.watch is None:
            return True
        res, dtype, before = p.watch
        now = np.zeros_like(before)
        space.gather(res, dtype, now)
        if np.array_equal(now, before):
            p.changes = space.changes  # not looked at again before the next write
            return False
        return True

    def _watched(self, addrs: np.ndarray, mask: Optional[np.ndarray], size: int):
        """``(resolved lanes, dtype, their values)`` of a poll's lanes inside their storages (None
        where its element size has no integer type: then any write wakes it)."""
        if size not in (1, 2, 4, 8):
            return None
        space = self.launch.space
        res = space.resolve(addrs, mask)
        res.keep(space.in_storage(res, size))
        dtype = np.dtype(f"u{size}")
        values = np.zeros(addrs.size, dtype=dtype)
        space.gather(res, dtype, values)
        return res, dtype, values

    def _hand(self, runner: _Runner, task) -> None:
        runner.task = task
        self.holder = runner
        runner.event.set()

    def _start(self, index: int) -> None:
        """Start program ``index`` in a thread of its own, with the turn."""
        runner = _Runner(main=False)
        runner.task = ("new", index)
        self.holder = runner
        thread = threading.Thread(target=self.context.copy().run, args=(self._thread, runner),
                                  name=f"tritonkit-program-{index}", daemon=True)
        runner.thread = thread
        self.threads.append(thread)
        thread.start()

    # --- a program's thread ------------------------------------------------------------------------
    def _thread(self, runner: _Runner) -> None:
        try:
            with self.lock:  # the thread that started it has handed the turn over
                _, index = runner.task
                runner.task = None
            while index is not None:
                self._run_program(runner, index)
                index = self._after(runner)
        except Cancelled:
            return
        except BaseException as exc:  # the launch's to report
            self._fail(runner, exc)

    def _fail(self, runner: _Runner, exc: BaseException) -> None:
        """A program of this thread raised ``exc``: hand it to the main thread, which stops the launch."""
        while True:
            try:
                with self.lock:
                    runner.in_kernel = False
                    if runner.interrupted:
                        runner.interrupted = False
                        _raise_in(runner.thread, None)
                    self.error = (exc, self.launch.program_state())
                    self._hand(self.main, "error")
                return
            except BaseException:  # a request to raise that came meanwhile: it is this one
                continue

    def _enter(self, runner: _Runner) -> None:
        """A program's thread goes on with its program's code (raising what the main thread got)."""
        with self.lock:
            self._signalled(runner)
            runner.in_kernel = True

    def _signalled(self, runner: _Runner) -> None:
        """Raise, in the program's thread about to go on, what the main thread got meanwhile."""
        exc = self.signal
        if exc is None:
            return
        self.signal = None
        if runner.interrupted:
            runner.interrupted = False
            _raise_in(runner.thread, None)
        raise exc if runner.main else type(exc)()

    # --- waiting for the turn -----------------------------------------------------------------------
    def _hold_signals(self) -> bool:
        """In the main thread, keep the time limit and ``^C`` from being raised while it hands its turn
        over (then another thread may run a program): they are raised when it waits
        (:meth:`_release_signals`), and passed on there. Returns whether they are held."""
        if not self.signals:
            return False
        came = self._came

        def hold(signum, frame):
            came.append(signum)
        self._held = [(s, signal.signal(s, hold)) for s in _SIGNALS]
        return True

    def _restore_signals(self) -> List[int]:
        """Put the held signals' handlers back; the signals that came meanwhile."""
        for s, handler in self._held or ():
            if handler is not None:  # None: a handler not set from Python, which stays
                signal.signal(s, handler)
        self._held = None
        came, self._came[:] = list(self._came), []
        return came

    def _release_signals(self) -> None:
        """Put the handlers back and raise the signals that came while they were held: their
        handlers run here (and raise: the time limit, ^C)."""
        for s in self._restore_signals():
            signal.raise_signal(s)

    def _wait(self, runner: _Runner):
        """Wait for ``runner``'s turn; what it is handed. In the main thread, the time limit or ``^C``
        arriving meanwhile (or while it was held) is passed on to the program running (see
        :meth:`_interrupt`)."""
        release = runner.main and self._held is not None
        while True:
            try:
                if release:
                    release = False
                    self._release_signals()
                runner.event.wait()
                break
            except BaseException as exc:  # only the main thread gets signals
                self._interrupt(exc)
        runner.event.clear()
        task, runner.task = runner.task, None
        return task

    def _interrupt(self, exc: BaseException) -> None:
        """The main thread got ``exc`` (its time limit, ``^C``) while it waited: the running program
        raises it, in its own thread where it runs code, else when it goes on."""
        with self.lock:
            self.signal = exc
            other = self.holder
            if other is not self.main and other.in_kernel and not other.interrupted:
                other.interrupted = True
                _raise_in(other.thread, type(exc))


def _label(pid) -> str:
    return "(" + ", ".join(str(int(i)) for i in pid) + ("," if len(pid) == 1 else "") + ")"


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"
