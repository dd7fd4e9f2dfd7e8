"""Launches that could not finish: each is a finding too, so that a run never ends quietly.

* ``unsupported``: an operation the CPU cannot run (inline assembly, a libdevice function with no
  CPU version);
* ``timeout``: the launch ran longer than ``--timeout``;
* ``kernel_error``: the kernel raised while it ran (the message is the exception).

The launch reports these (:mod:`tritonkit.check.launch.run`); this declares how they read.
"""
from __future__ import annotations

from .base import FindingKind

_GREY = "#475569"


class _LaunchStopped(FindingKind):
    aborts_launch = True  # the launch stops with it: --stop-on-first has nothing more to stop
    level = "warning"  # the launch was not checked to its end: not itself a bug in the kernel


class Unsupported(_LaunchStopped):
    """An operation the CPU interpreter cannot run; the launch stops there."""

    kind = "unsupported"
    title = "cannot run on the CPU"
    color = _GREY

    @classmethod
    def hint(cls, f) -> str:
        return "the CPU interpreter cannot run this operation; check the rest of the kernel without it"


class Timeout(_LaunchStopped):
    """The launch ran longer than the session's ``timeout``; it is stopped where it was."""

    kind = "timeout"
    title = "launch timed out"
    color = _GREY

    @classmethod
    def hint(cls, f) -> str:
        return "a loop that never ends? check its condition (spin locks wait on other programs, which run later here)"


class KernelError(_LaunchStopped):
    """The kernel raised while it ran in the interpreter."""

    kind = "kernel_error"
    title = "the kernel raised"
    color = _GREY

    @classmethod
    def hint(cls, f) -> str:
        return "the kernel raised while it ran in the interpreter; the message says why"
