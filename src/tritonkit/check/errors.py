"""Every exception the checked interpreter raises to change the course of a launch or a program,
and the rule for the launch time limit they enforce (:func:`launch_timeout`).

Those a user sees are :class:`CheckAborted` (and its subclasses) and :class:`UsageError`; the rest
are control flow between the engines and the kernel's body and never leave a launch.
"""
from __future__ import annotations

from typing import Optional


class CheckAborted(BaseException):
    """Raised through the user's program to stop it: a launch could not finish (the reason is a
    finding), or ``stop_on_first`` was asked for and a finding was made.

    A ``BaseException`` so that a script's ``except Exception`` does not swallow it.
    """


class InternalError(CheckAborted):
    """tritonkit itself failed while running a launch (a bug to report), not the kernel."""


class StaticAssertFailed(CheckAborted):
    """A ``tl.static_assert`` failed: the kernel would not compile for these constexpr values."""


class UsageError(Exception):
    """A launch that cannot be checked as given (missing argument, bad grid, a tensor on the
    ``meta`` device, ...); the message says what to change."""


class LaunchTimeout(BaseException):
    """The launch ran longer than the session's ``timeout`` (raised by its timer in the main thread)."""


def launch_timeout(seconds: Optional[float]) -> Optional[float]:
    """A launch time limit as given (seconds): the limit, or None for none (None or ``inf``).

    Raises:
        ValueError: NaN, 0 or less; the message ("must be a positive number of seconds (or inf
            for no limit), not X") is meant to follow the option's name.
    """
    if seconds is not None and not seconds > 0:  # NaN too
        raise ValueError(f"must be a positive number of seconds (or inf for no limit), not {seconds}")
    return None if seconds == float("inf") else seconds


class LaunchStalled(LaunchTimeout):
    """A program polled one address ``polls`` times while nothing changed memory: it waits for a
    value that no program running one at a time will ever write (a spin on a flag a later program
    sets). ``message`` says where."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Divergence(BaseException):
    """Python control flow on a value that differs between the programs of a batch (batched engine).

    ``values``: the value per program of the batch, a numpy array of shape ``(P,)``. A
    ``BaseException`` so that nothing between the kernel and the engine swallows it.
    """

    def __init__(self, values) -> None:
        super().__init__("divergent control flow")
        self.values = values


class Unbatchable(BaseException):
    """An operation the batched engine cannot run; ``reason`` says which (shown in the summary), and
    the launch runs one program at a time."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
