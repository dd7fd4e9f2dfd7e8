"""Exit statuses of the ``tritonkit`` commands, and the usage error every command raises.

Every command returns one of these (``tritonkit tune``'s child process also uses
:data:`tritonkit.tune.EXIT_CONTEXT_POISONED` to tell its supervisor that a config broke the CUDA
context).
"""
from __future__ import annotations

#: the command did what was asked and found nothing wrong
OK = 0
#: ``check`` / ``doctor``: findings were made (a kernel that could not run or timed out is a finding)
FINDINGS = 1
#: ``cache show``: no cached kernel of that name
NOT_FOUND = 1
#: bad usage (missing script, bad option, a file that cannot be written), or a failure of tritonkit itself
USAGE = 2
#: the user's script raised or exited with a non-zero status (and, for ``check``, nothing was found)
SCRIPT_FAILED = 3
#: interrupted (Ctrl-C)
INTERRUPTED = 130
#: stdout's reader went away (``tritonkit ... | head``) while a command printed outside its console
#: (128 + SIGPIPE, what a shell reports for a process that SIGPIPE ended)
BROKEN_PIPE = 141


class BadUsage(Exception):
    """A command was used wrongly: the message says what to do. ``tritonkit`` prints it as
    ``tritonkit COMMAND: error: MESSAGE`` and exits with :data:`USAGE`."""
