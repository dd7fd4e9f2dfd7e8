"""``out_of_bounds``: every active lane must address an element of the tensor it was derived from.

A lane is in bounds when its bytes lie inside the *view* of the argument its address belongs to
(its slot in the virtual address space, see ``_memory``) or of another argument on the same
storage, and the address is a multiple of the access size. Offending lanes are not performed: a
load yields ``other`` (or 0) there and a store is dropped.
"""
from __future__ import annotations

import numpy as np

from .._memory import slot_base
from ..findings import Violation
from ._base import Access, Check


class BoundsCheck(Check):
    """Reports loads, stores and atomics outside the launch's tensor arguments."""

    kind = "out_of_bounds"

    def on_access(self, launch, access: Access, res) -> None:
        if res.n == 0:
            return
        space = launch.space
        ok = space.in_view(res, access.size)
        size = access.size
        if size > 1 and res.contiguous(size):  # consecutive elements from an aligned first one
            res.aligned = True
        elif size > 1:
            misaligned = (res.off & (size - 1)) != 0
            if misaligned.any():
                ok = ~misaligned if ok is None else ok & ~misaligned
            else:
                res.aligned = True
        if ok is None or ok.all():
            return
        res.keep(ok)
        slot_all = res.slot
        for pid, pos in launch.by_program(res, np.flatnonzero(~ok)):
            slots = slot_all[pos]
            offs = res.off[pos]
            for slot in np.unique(slots):
                sel = slots == slot
                self._report(launch, access, space.region(int(slot)), int(slot), offs[sel], pid)

    def _report(self, launch, access: Access, region, slot: int, off: np.ndarray, pid) -> None:
        """Report the offending lanes (byte offsets ``off``) of one program into one slot."""
        size = access.size
        if region is None:
            addresses = [slot_base(slot) + int(o) for o in off[:8]]
            launch.report(Violation(kind=self.kind, kernel="", frames=[], program_id=pid, access=access.op,
                                    masked=access.masked, lanes=int(off.shape[0]), reason="no_argument",
                                    addresses=addresses))
            return
        layout = region.layout
        reason = np.full(off.shape, "outside_view", dtype=object)
        reason[off >= layout.end] = "past_end"
        reason[off < layout.start] = "before_start"
        misaligned = (off & (size - 1)) != 0 if size > 1 else np.zeros(off.shape, bool)
        reason[misaligned & (off >= layout.start) & (off < layout.end)] = "misaligned"
        for why in ("past_end", "before_start", "outside_view", "misaligned"):
            part = reason == why
            if not part.any():
                continue
            launch.report(Violation(kind=self.kind, kernel="", frames=[], program_id=pid, access=access.op,
                                    masked=access.masked, lanes=int(part.sum()), arg=region.describe(),
                                    offsets=layout.coords(off[part]), reason=why))

