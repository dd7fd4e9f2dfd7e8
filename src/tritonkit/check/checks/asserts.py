"""``assert_failed``: a ``tl.device_assert`` false in some lanes (always on: no ``TRITON_DEBUG``
needed), or a ``tl.static_assert`` false for a specialization (the GPU compile would fail).

Not a check one turns on or off: the launch reports these (see
:mod:`tritonkit.check.launch.debug_ops` and :mod:`tritonkit.check.triton_hooks`); this declares how
they read.
"""
from __future__ import annotations

from .base import FindingKind


class AssertFailed(FindingKind):
    """A failed ``tl.device_assert`` (the failing lanes and the values of the condition's variables
    there are in ``examples``) or ``tl.static_assert`` (``access == "static_assert"``)."""

    kind = "assert_failed"
    title = "failed assertion"
    color = "#be123c"

    @classmethod
    def hint(cls, f) -> str:
        if f.access == "static_assert":
            return "a compile-time assertion failed for these constexpr values: the GPU compile would fail too"
        return "the condition is false in the lanes listed; the values of its variables there are under examples"
