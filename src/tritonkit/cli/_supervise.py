"""The script's process under ``tritonkit check``: run in a process group of its own, with the
signals that ask tritonkit to stop passed on to it, and the terminal lent to it.

Why a group of its own: a script that cleans up with ``os.killpg(os.getpgid(0), SIGTERM)`` must not
kill the command that reports on it. What that costs, and how it is paid:

* The terminal sends Ctrl-C (SIGINT), Ctrl-\\ (SIGQUIT) and Ctrl-Z (SIGTSTP) to its *foreground*
  process group only. Where tritonkit runs in the foreground of a terminal that is its stdin and
  stdout, it makes the script's group the foreground (``tcsetpgrp``): Ctrl-C and Ctrl-Z reach the
  script as they would without tritonkit, and a script that reads the terminal (``input()``, pdb,
  ``--pdb``) is not stopped by SIGTTIN. tritonkit takes the terminal back when the script ends.
  Where stdout is not the terminal (``| less``, ``| tee log``) the script's group stays in the
  background, so that a pager in tritonkit's own group keeps the terminal; the terminal's signals
  then reach tritonkit, which passes them on; a script that reads the terminal there (it is stopped
  by SIGTTIN/SIGTTOU) is lent it then.
* Ctrl-Z: a script stopped by SIGTSTP (or by SIGTTIN/SIGTTOU while tritonkit is in the background)
  is a job stopped: tritonkit takes the terminal back and stops its own group with SIGTSTP, so the
  shell sees the job stopped; ``fg`` continues tritonkit, which lends the terminal again and
  continues the script. SIGTSTP sent to tritonkit is passed on first. Without a terminal, a
  stopped script is left to whoever stopped it.
* SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to tritonkit (``kill PID``, a CI job cancelled,
  ``timeout``, ``docker stop``) are passed on to the script's whole group. After SIGTERM or SIGHUP
  the script has :data:`TERM_GRACE_S` seconds to end, then its group is killed (SIGKILL). A signal
  tritonkit was started with ignored (``nohup``) stays ignored, for the script too.
* On Linux the script is killed (SIGKILL) if tritonkit itself is (``PR_SET_PDEATHSIG``): nothing is
  left running that no one reports on.
"""
from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import threading
import time
from typing import Callable, Dict, List, Optional

#: seconds the script's group has to end after tritonkit passed SIGTERM/SIGHUP on, before SIGKILL
#: (``TRITONKIT_TERM_GRACE``): under ``docker stop``'s 10 s, leaving time for the report
TERM_GRACE_S = 5.0
#: the signals passed on to the script's group as they come
_PASSED_ON = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
_ENDING = (signal.SIGTERM, signal.SIGHUP)
_TTY_STOPS = (signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU)
_POLL_S = 0.5  # the longest sleep between two looks at the script (a wake-up is never missed: see _sleep)


def seconds_from_env(name: str, default: float) -> float:
    """A number of seconds from the environment variable ``name`` (0 or more), else ``default``
    (also where it is not a number)."""
    try:
        value = float(os.environ.get(name, ""))
    except ValueError:
        return default
    return value if value >= 0 else default


def _pdeathsig():
    """``prctl`` where the script can be tied to tritonkit's life (Linux), else None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _pdeathsig()
_PR_SET_PDEATHSIG = 1
#: the environment variable with tritonkit's pid, for the script's process (:func:`die_with_parent`)
PARENT_ENV = "TRITONKIT_PARENT_PID"


class Supervisor:
    """Runs the script's process and waits for it, as the module says. Use it as a context
    manager: entering installs the signal handlers (in the main thread only: elsewhere signals are
    neither caught nor passed on), leaving restores them and takes the terminal back. Signals that
    come after the script ended (while the report is made) are recorded, not acted on.

    Attributes:
        code: the script's exit status once it ended (negative: the signal that killed it).
        interrupted: SIGINT reached tritonkit (and was passed on), or the script ended by Ctrl-C.
        terminated: the first of SIGTERM/SIGHUP that reached tritonkit, or None.
        killed: the script's group was killed (SIGKILL) when the grace after ``terminated`` ran out.
    """

    def __init__(self, grace_s: Optional[float] = None):
        self.grace_s = seconds_from_env("TRITONKIT_TERM_GRACE", TERM_GRACE_S) if grace_s is None else grace_s
        self.proc: Optional[subprocess.Popen] = None
        self.code: Optional[int] = None
        self.interrupted = False
        self.terminated: Optional[int] = None
        self.killed = False
        self._pending: List[int] = []
        self._handlers: Dict[int, object] = {}
        self._wake: Optional[tuple] = None
        self._old_wakeup = -1
        self._kill_at: Optional[float] = None
        self._tty: Optional[int] = None
        self._lend = False  # the script's group is to have the terminal whenever tritonkit has it to give

    # --- set-up -------------------------------------------------------------------------------------
    def __enter__(self) -> "Supervisor":
        if threading.current_thread() is not threading.main_thread():
            return self
        r, w = os.pipe()
        os.set_blocking(r, False)
        os.set_blocking(w, False)
        try:
            self._old_wakeup = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
        except (ValueError, OSError):
            os.close(r)
            os.close(w)
            return self
        self._wake = (r, w)
        for sig in (*_PASSED_ON, signal.SIGTSTP, signal.SIGCHLD):
            old = signal.getsignal(sig)
            if old == signal.SIG_IGN and sig != signal.SIGCHLD:
                continue  # ignored when tritonkit started (nohup): the script inherits that
            self._handlers[sig] = old
            signal.signal(sig, self._on_signal)
        return self

    def __exit__(self, *exc) -> None:
        self.reclaim_terminal()
        for sig, old in self._handlers.items():
            signal.signal(sig, old)
        self._handlers = {}
        if self._wake is not None:
            signal.set_wakeup_fd(self._old_wakeup)
            for fd in self._wake:
                os.close(fd)
            self._wake = None

    def _on_signal(self, signum, frame) -> None:
        self._pending.append(signum)  # acted on by the waiting loop (a handler runs between any two lines)

    def start(self, cmd: List[str], env: Dict[str, str]) -> None:
        """Start the script's process (``cmd`` with ``env``) in a process group of its own, lent the
        terminal where the module says.

        Raises:
            OSError: it cannot be started.
        """
        self._tty = _foreground_terminal()
        self._lend = self._tty is not None and _isatty(1)
        env = dict(env, **{PARENT_ENV: str(os.getpid())})
        if sys.version_info >= (3, 11):
            self.proc = subprocess.Popen(cmd, env=env, process_group=0)
        else:  # pragma: no cover - Python 3.10
            self.proc = subprocess.Popen(cmd, env=env, preexec_fn=os.setpgrp)
        try:
            os.setpgid(self.proc.pid, self.proc.pid)  # the child did too; whichever runs first
        except OSError:
            pass
        if self._lend:
            self._give_terminal()

    # --- waiting ------------------------------------------------------------------------------------
    def wait(self) -> int:
        """Wait for the script's process to end, passing signals on meanwhile; its exit status
        (negative: killed by that signal)."""
        while True:
            self._handle_pending()
            self._reap()
            if self.code is not None:
                self.reclaim_terminal()
                return self.code
            if self._kill_at is not None and time.monotonic() >= self._kill_at:
                self.kill_group()
            wait = _POLL_S if self._kill_at is None else min(_POLL_S, self._kill_at - time.monotonic())
            self._sleep(max(0.0, wait))

    def wait_while(self, busy: Callable[[], bool], seconds: float) -> bool:
        """After the script's process ended: wait while ``busy()`` (asked every 0.1 s), ``seconds`` at
        most (after SIGTERM/SIGHUP, what is left of the grace at most), passing signals on to what
        is left of its group meanwhile. Whether ``busy()`` turned false."""
        end = time.monotonic() + seconds
        while True:
            self._handle_pending()
            if not busy():
                return True
            now = time.monotonic()
            limit = end if self._kill_at is None else min(end, self._kill_at)
            if now >= limit:
                return False
            self._sleep(min(0.1, limit - now))

    def settle(self) -> None:
        """Take the signals that came since the last look as records only (``interrupted``,
        ``terminated``), passing nothing on: the script is done with, the report is being made."""
        self._handle_pending(act=False)

    def kill_group(self) -> None:
        """Kill (SIGKILL) what is left of the script's process group (``killed`` where anything was)."""
        self._kill_at = None
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.killed = True
        except OSError:
            pass
        if self.code is None:
            try:
                os.kill(self.proc.pid, signal.SIGKILL)  # where it left its group
                self.killed = True
            except OSError:
                pass

    def _sleep(self, seconds: float) -> None:
        """Sleep until a signal comes (the wake-up pipe: one that came since the last look is in it
        already) or ``seconds`` pass."""
        if self._wake is None:
            time.sleep(min(seconds, 0.05))
            return
        try:
            select.select([self._wake[0]], [], [], seconds)
        except (OSError, ValueError):
            time.sleep(0.05)
        try:
            while os.read(self._wake[0], 512):
                pass
        except (BlockingIOError, OSError):
            pass

    def _reap(self) -> None:
        if self.proc is None or self.code is not None:
            return
        try:
            pid, status = os.waitpid(self.proc.pid, os.WNOHANG | os.WUNTRACED)
        except ChildProcessError:
            self.code = self.proc.returncode if self.proc.returncode is not None else 0
            return
        if pid == 0:
            return
        if os.WIFSTOPPED(status):
            self._stopped(os.WSTOPSIG(status))
            return
        self.code = self.proc.returncode = os.waitstatus_to_exitcode(status)
        if self.code == -signal.SIGINT:
            self.interrupted = True

    # --- signals ------------------------------------------------------------------------------------
    def _handle_pending(self, act: bool = True) -> None:
        while self._pending:
            sig = self._pending.pop(0)
            if sig == signal.SIGINT:
                self.interrupted = True
            if sig in _ENDING and self.terminated is None:
                self.terminated = sig
                if act:
                    self._kill_at = time.monotonic() + self.grace_s
            if not act or sig == signal.SIGCHLD or self.proc is None:
                continue
            if sig == signal.SIGTSTP:
                if self.code is None:
                    self._suspend(passed_on=True)
                continue
            self._signal_group(sig)
            if sig in _ENDING:
                self._signal_group(signal.SIGCONT)  # a stopped process acts on it only once continued

    def _signal_group(self, sig: int) -> None:
        """Send ``sig`` to the script's process group, and to the script's process itself where it
        left the group."""
        pid = self.proc.pid
        try:
            os.killpg(pid, sig)
        except OSError:
            pass
        if self.code is None:
            try:
                if os.getpgid(pid) != pid:
                    os.kill(pid, sig)
            except OSError:
                pass

    def _stopped(self, sig: int) -> None:
        """The script's process stopped with ``sig``."""
        if self._tty is None or sig not in _TTY_STOPS:
            return  # no terminal, or SIGSTOP: whoever stopped it continues it
        if sig != signal.SIGTSTP and self._foreground():
            self._lend = True  # it reads the terminal, or sets its modes: lend it, go on
            self._give_terminal()
            self._signal_group(signal.SIGCONT)
            return
        self._suspend(passed_on=False)

    def _suspend(self, passed_on: bool) -> None:
        """Stop tritonkit as the job it is (Ctrl-Z), the script with it; continue both after ``fg``/``bg``.
        ``passed_on``: tritonkit got SIGTSTP itself (its group did, or it was sent to it): pass it on
        and stop this process; else the script stopped on its own: stop tritonkit's whole group, as
        the terminal would have."""
        if passed_on:
            self._signal_group(signal.SIGTSTP)
        self.reclaim_terminal()
        handler = signal.getsignal(signal.SIGTSTP)
        signal.signal(signal.SIGTSTP, signal.SIG_DFL)
        try:
            if passed_on or self._tty is None:
                os.kill(os.getpid(), signal.SIGTSTP)
            else:
                os.killpg(os.getpgrp(), signal.SIGTSTP)
        except OSError:
            pass
        finally:  # continued (fg, bg, SIGCONT)
            signal.signal(signal.SIGTSTP, handler)
        if self._lend and self._foreground():
            self._give_terminal()
        self._signal_group(signal.SIGCONT)

    # --- the terminal -------------------------------------------------------------------------------
    def _foreground(self) -> bool:
        try:
            return self._tty is not None and os.tcgetpgrp(self._tty) == os.getpgrp()
        except OSError:
            return False

    def _give_terminal(self) -> None:
        if self._tty is not None and self.proc is not None and self.code is None:
            _set_foreground(self._tty, self.proc.pid)

    def reclaim_terminal(self) -> None:
        """Make tritonkit's group the terminal's foreground again where the script's group has it."""
        if self._tty is None or self.proc is None:
            return
        try:
            if os.tcgetpgrp(self._tty) == self.proc.pid:
                _set_foreground(self._tty, os.getpgrp())
        except OSError:
            pass


def _isatty(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False


def _foreground_terminal() -> Optional[int]:
    """stdin's file descriptor where it is a terminal whose foreground process group is tritonkit's,
    else None (no terminal, or tritonkit runs in the background)."""
    try:
        if _isatty(0) and os.tcgetpgrp(0) == os.getpgrp():
            return 0
    except OSError:
        pass
    return None


def _set_foreground(tty: int, pgid: int) -> None:
    """``tcsetpgrp`` with SIGTTOU blocked (a process in the background may then give the terminal)."""
    try:
        old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTTOU})
    except (OSError, ValueError):
        old = None
    try:
        os.tcsetpgrp(tty, pgid)
    except OSError:
        pass
    finally:
        if old is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)


def die_with_parent() -> None:
    """In the script's process, first thing: be killed (SIGKILL) when tritonkit dies (Linux), so that
    nothing runs on that no one reports on; where tritonkit died already, now. Takes
    :data:`PARENT_ENV` out of the environment (the script's children do not inherit it)."""
    parent = os.environ.pop(PARENT_ENV, None)
    if _PRCTL is None or not parent:
        return
    try:
        _PRCTL(_PR_SET_PDEATHSIG, int(signal.SIGKILL))
    except Exception:  # noqa: BLE001 - a libc without prctl: nothing is tied
        return
    if str(os.getppid()) != parent:  # tritonkit died before the line above
        os.kill(os.getpid(), signal.SIGKILL)
