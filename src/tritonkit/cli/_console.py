"""The console every command prints to, and its ``--width N`` option."""
from __future__ import annotations

import argparse
import os
import sys
from typing import Optional

#: columns of a report written to a file or a pipe (a CI log): the tables fit it (each row one line,
#: long names cut in the middle, a table too wide for it printed in parts: :mod:`tritonkit.report.fit`)
PIPED_WIDTH = 80
#: the narrowest console ``--width`` takes, columns: below it a table's name column and one number
#: column no longer fit side by side
MIN_WIDTH = 40

_CLASS = None


def make_console(width: Optional[int] = None):
    """A rich ``Console`` on stdout, ``width`` columns wide where given (``--width N``); otherwise
    ``COLUMNS`` where set, else the terminal's width on a terminal and :data:`PIPED_WIDTH` columns
    where stdout is a file or a pipe.

    Where the reader of stdout goes away (``tritonkit check ... | head -1``), the console stops
    printing quietly (:func:`stdout_to_devnull`) and the command goes on to its end and its exit
    status; rich's own console would end the process there (``SystemExit(1)``), before the
    command had written its files or said how the run went.

    Args:
        width: the console's width in columns (terminal cells), or None.

    Raises:
        ValueError: ``width`` is under :data:`MIN_WIDTH`.
    """
    global _CLASS
    if width is not None and width < MIN_WIDTH:
        raise ValueError(f"a console width of {width} columns is under the least, {MIN_WIDTH}")
    if _CLASS is None:
        from rich.console import Console

        class QuietOnClosedPipe(Console):
            """A rich Console that a closed stdout silences instead of ending the process."""

            def on_broken_pipe(self) -> None:
                self.quiet = True
                stdout_to_devnull()

        _CLASS = QuietOnClosedPipe
    if width is not None:
        return _CLASS(width=width)
    console = _CLASS()
    if not console.is_terminal and not os.environ.get("COLUMNS", "").isdigit():
        console = _CLASS(width=PIPED_WIDTH)
    return console


def console_width(text: str) -> int:
    """The value of ``--width N``: a number of columns, at least :data:`MIN_WIDTH` (argparse's
    ``type``).

    Raises:
        argparse.ArgumentTypeError: ``text`` is not a whole number, or is under :data:`MIN_WIDTH`
            (argparse then prints the message with the usage and exits with status 2).
    """
    try:
        width = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of columns: give a whole number, "
                                         f"such as --width {PIPED_WIDTH}") from None
    if width < MIN_WIDTH:
        raise argparse.ArgumentTypeError(f"{width} columns is too narrow for the tables: give --width {MIN_WIDTH} or "
                                         f"more, or leave --width out (the terminal's width; {PIPED_WIDTH} when the "
                                         "output is a file or a pipe)")
    return width


def add_width_option(parser: argparse.ArgumentParser) -> None:
    """Add ``--width N`` (the console's width, :func:`console_width`) to a command's parser."""
    parser.add_argument("--width", type=console_width, metavar="N",
                        help=f"print N columns wide (at least {MIN_WIDTH}; default: $COLUMNS where set, else the "
                             f"terminal's width, or {PIPED_WIDTH} when the output is a file or a pipe); table rows "
                             "stay one line each, long names are cut in the middle")


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
