"""The console every command prints to."""
from __future__ import annotations

import os

#: columns of a report written to a file or a pipe: rich's default there is 80, which folds a wide
#: table (``tritonkit profile``'s 14 columns) into unreadable 3-character columns
PIPED_WIDTH = 160


def make_console():
    """A rich ``Console`` on stdout: the terminal's width on a terminal; :data:`PIPED_WIDTH` columns
    where stdout is a file or a pipe, unless ``COLUMNS`` says otherwise."""
    from rich.console import Console
    console = Console()
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = Console(width=PIPED_WIDTH)
    return console
