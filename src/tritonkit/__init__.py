"""tritonkit: find what is wrong with a Triton kernel, make it fast, show how far it is from the hardware.

The public API is small and imported lazily (``import tritonkit`` does not import torch or triton):

* :func:`tritonkit.checking` — a context manager: every Triton launch inside runs in the checked
  CPU interpreter; read ``session.findings`` afterwards.
* :func:`tritonkit.check_launch` — check one launch of one kernel.
* :class:`tritonkit.Finding` — one folded finding (plain data, ``to_dict()`` / ``from_dict()``).
* :class:`tritonkit.CheckReport` — a whole checked run (what ``tritonkit check --json`` writes).
* :func:`tritonkit.mark_uninitialized` — declare a buffer's elements uninitialized (``torch.empty*``
  allocations are tracked automatically while checking).
* :func:`tritonkit.autotune` — a drop-in for ``triton.autotune`` (see :mod:`tritonkit.tune`).
"""
from ._version import __version__

__all__ = ["__version__", "checking", "check_launch", "CheckSession", "Finding", "CheckReport", "CheckAborted",
           "mark_uninitialized", "autotune"]

_LAZY = {"checking", "check_launch", "CheckSession", "Finding", "CheckReport", "CheckAborted", "mark_uninitialized"}


def __getattr__(name):
    if name == "autotune":
        from .tune import autotune
        return autotune
    if name in _LAZY:
        from . import check
        return getattr(check, name)
    raise AttributeError(f"module 'tritonkit' has no attribute {name!r}")
