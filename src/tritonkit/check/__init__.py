"""``tritonkit.check``: run Triton kernels on the CPU in a checked interpreter.

Public names: :func:`checking`, :func:`check_launch`, :class:`CheckSession`, :class:`Finding`,
:class:`CheckReport`, :class:`LaunchRecord`, :class:`KernelSummary`, :class:`CheckAborted`,
:class:`InternalError`, :class:`UsageError`, :func:`mark_uninitialized`, :data:`CHECK_KINDS` (the
checks one can ask for), :data:`FINDING_KINDS` (every kind a finding can have), :func:`write_json`.

How a launch runs, from Triton's launch path to a printed finding, is in ``docs/internals.md``:
:mod:`.launch` (the procedure and the launch's state), :mod:`.engine` (batched, or one program at a
time), :mod:`.interp` (the builders under Triton's front end), :mod:`.memory` (the address space),
:mod:`.checks` (one module per finding kind), :mod:`.findings` (folding), :mod:`.session`.

Names that need torch and triton (the session, the checks) are imported when first used, so that
``tritonkit.check.results`` and ``tritonkit.check.journal`` (what a report is built from) load light.
"""
from .errors import CheckAborted, InternalError, UsageError
from .findings import Finding, write_json
from .results import CheckReport, KernelSummary, LaunchRecord

__all__ = ["checking", "check_launch", "CheckSession", "Finding", "CheckReport", "CheckAborted", "InternalError",
           "UsageError", "LaunchRecord", "KernelSummary", "active_session", "mark_uninitialized", "CHECK_KINDS",
           "FINDING_KINDS", "write_json"]

_LAZY = {"checking": ".session", "check_launch": ".session", "CheckSession": ".session",
         "active_session": ".session", "mark_uninitialized": ".checks", "CHECK_KINDS": ".checks",
         "FINDING_KINDS": ".checks"}


def __getattr__(name):
    if name in _LAZY:
        import importlib
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module 'tritonkit.check' has no attribute {name!r}")
