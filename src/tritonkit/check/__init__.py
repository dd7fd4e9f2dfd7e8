"""``tritonkit.check``: run Triton kernels on the CPU in a checked interpreter.

Public names: :func:`checking`, :func:`check_launch`, :class:`CheckSession`, :class:`Finding`,
:class:`CheckAborted`, :class:`UsageError`, :func:`mark_uninitialized`, :data:`CHECK_KINDS`.
"""
from ._launch import CheckAborted, LaunchRecord, UsageError
from ._session import CheckSession, KernelSummary, active_session, check_launch, checking
from .checks import CHECK_KINDS, mark_uninitialized
from .findings import Finding

__all__ = ["checking", "check_launch", "CheckSession", "Finding", "CheckAborted", "UsageError", "LaunchRecord",
           "KernelSummary", "active_session", "mark_uninitialized", "CHECK_KINDS"]
