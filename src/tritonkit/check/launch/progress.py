"""A long launch's progress: programs done, their rate and the time left, shown and journaled.

A launch of thousands of programs with long ``tl.dot`` loops can take minutes in the interpreter.
While one runs longer than :data:`SHOW_AFTER_S`, :class:`Progress` (a daemon thread that only
reads the launch's counters) prints a line to standard error every :data:`EVERY_S` seconds
(:data:`EVERY_TTY_S` on a terminal)::

    tritonkit: checking attn_fwd (grid 64x64): 1,024 of 4,096 programs in 30 s, 34.1 programs/s, about 1.5 min left

and writes the launch's record so far to the process's journal (a ``running`` line, see
:mod:`tritonkit.check.journal`), so a run killed or stopped in the middle of a launch still reports
what it checked: the launch appears with ``status`` ``"unfinished"`` and the programs it got to.

Where a launch's programs are shared out between forked workers (see
:mod:`tritonkit.check.engine.shares`), this process counts only its own share; the launch's
:attr:`~tritonkit.check.launch.Launch.share` then scales the count to the whole launch.
"""
from __future__ import annotations

import os
import sys
import threading
import time
from typing import Optional

#: seconds a launch runs before its progress is first shown
SHOW_AFTER_S = 10.0
#: seconds between two progress lines (standard error not a terminal: a CI log)
EVERY_S = 30.0
#: seconds between two progress lines on a terminal
EVERY_TTY_S = 10.0
#: ``0``: no progress lines (the journal's ``running`` lines are still written); a number of
#: seconds: the first line after that long, and one that often after
ENV = "TRITONKIT_PROGRESS"


def _setting() -> Optional[float]:
    """:data:`ENV`'s seconds (None: unset or not a number; 0: off)."""
    try:
        value = float(os.environ.get(ENV, ""))
    except ValueError:
        return None
    return value if value >= 0 else None


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def done_programs(launch) -> int:
    """Programs of ``launch`` run so far, the whole launch's (this process's share scaled by the
    launch's ``share``, ``(programs before the share, the share's programs, the programs left
    when it started)``, where a share is running)."""
    done = int(launch.record.programs)
    share = getattr(launch, "share", None)
    if share is not None:
        before, mine, rest = share
        if mine > 0:
            done = before + (done - before) * rest // mine
    return done


def line(launch, elapsed: float) -> str:
    """The progress line of ``launch`` after ``elapsed`` seconds (see the module)."""
    gx, gy, gz = launch.grid
    total = gx * gy * gz
    dims = [gx, gy, gz][: max(1, launch.grid_ndim)]
    done = min(done_programs(launch), total)
    text = (f"tritonkit: checking {launch.kernel} (grid {'x'.join(str(d) for d in dims)}): "
            f"{done:,} of {total:,} programs in {_duration(elapsed)}")
    if done > 0 and elapsed > 0:
        rate = done / elapsed
        text += f", {rate:.3g} programs/s, about {_duration((total - done) / rate)} left"
    return text


class Progress:
    """Show and journal ``launch``'s progress while a ``with`` block runs it (see the module).

    Args:
        launch: the running :class:`~tritonkit.check.launch.Launch`.
        journal: the process's :class:`~tritonkit.check.journal.Journal`, or None.
        stream: where progress lines go (None: standard error, unless :data:`ENV` is ``0``).
        after: seconds before the first line (None: :data:`ENV`'s, else :data:`SHOW_AFTER_S`);
            every: seconds between lines (None: :data:`ENV`'s, else :data:`EVERY_TTY_S` on a
            terminal, :data:`EVERY_S` elsewhere).
    """

    def __init__(self, launch, journal=None, stream=None, after: Optional[float] = None,
                 every: Optional[float] = None) -> None:
        self.launch, self.journal = launch, journal
        setting = _setting()
        if stream is None and setting != 0:
            stream = sys.stderr
        self.stream = stream
        if setting:
            after, every = setting if after is None else after, setting if every is None else every
        if every is None:
            every = EVERY_TTY_S if stream is not None and getattr(stream, "isatty", lambda: False)() else EVERY_S
        self.after, self.every = SHOW_AFTER_S if after is None else after, every
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self.lines = 0  # progress lines shown so far
        self.journaled = False  # a running line was written

    def __enter__(self) -> "Progress":
        if self.stream is not None or self.journal is not None:
            self.start = time.monotonic()
            self._thread = threading.Thread(target=self._run, name="tritonkit-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> bool:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            if self.journaled:
                try:
                    self.journal.not_running()
                except (OSError, ValueError):
                    pass
        return False

    def _run(self) -> None:
        if self._stop.wait(self.after):
            return
        while True:
            self.tick()
            if self._stop.wait(self.every):
                return

    def tick(self) -> None:
        """Show one progress line and journal the launch's record so far. Never raises: a closed
        stream or a failed journal write only stops that output."""
        elapsed = time.monotonic() - self.start
        launch = self.launch
        if self.journal is not None:
            try:  # the record's dicts may change under this thread: a failed copy waits for the next tick
                record = launch.record.to_dict()
            except RuntimeError:
                record = None
            if record is not None:
                record["status"] = "unfinished"
                record["programs"] = min(done_programs(launch), launch.grid[0] * launch.grid[1] * launch.grid[2])
                record["seconds"] = elapsed
                try:
                    self.journal.running(record)
                    self.journaled = True
                except (OSError, ValueError):
                    self.journal = None
        if self.stream is not None:
            try:
                self.stream.write(line(launch, elapsed) + "\n")
                self.stream.flush()
                self.lines += 1
            except (OSError, ValueError):
                self.stream = None
