"""The console every command prints to."""
from __future__ import annotations

import os
import sys

#: columns of a report written to a file or a pipe: rich's default there is 80, which folds a wide
#: table (``tritonkit profile``'s 14 columns) into unreadable 3-character columns
PIPED_WIDTH = 160

_CLASS = None


def make_console():
    """A rich ``Console`` on stdout: the terminal's width on a terminal; :data:`PIPED_WIDTH` columns
    where stdout is a file or a pipe, unless ``COLUMNS`` says otherwise.

    Where the reader of stdout goes away (``tritonkit check ... | head -1``), the console stops
    printing quietly (:func:`stdout_to_devnull`) and the command goes on to its end and its exit
    status; rich's own console would end the process there (``SystemExit(1)``), before the
    command had written its files or said how the run went.
    """
    global _CLASS
    if _CLASS is None:
        from rich.console import Console

        class QuietOnClosedPipe(Console):
            """A rich Console that a closed stdout silences instead of ending the process."""

            def on_broken_pipe(self) -> None:
                self.quiet = True
                stdout_to_devnull()

        _CLASS = QuietOnClosedPipe
    console = _CLASS()
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = _CLASS(width=PIPED_WIDTH)
    return console


def stdout_to_devnull() -> None:
    """Point stdout's file descriptor at ``os.devnull`` after its reader went away (a
    ``BrokenPipeError``), so later prints and the flush at exit neither fail nor print a
    traceback ("Exception ignored ... BrokenPipeError"). Nothing is raised: a stdout without a
    file descriptor (a test's buffer) is left as it is."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, ValueError, OSError):
        return
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
    except OSError:
        return
    try:
        os.dup2(devnull, fd)
    except OSError:
        pass
    finally:
        os.close(devnull)
