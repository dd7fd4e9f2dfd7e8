"""``out_of_bounds``: every active lane must address an element of the tensor it was derived from.

A lane is in bounds when its bytes lie inside the *view* of the argument its address belongs to
(its slot in the virtual address space, see :mod:`tritonkit.check.memory`) or of another argument on the same
storage, and the address is a multiple of the access size. Offending lanes are not performed: a
load yields ``other`` (or 0) there and a store is dropped.
"""
from __future__ import annotations

import numpy as np

from ..findings import Violation
from ..memory import slot_base
from .base import Access, Check

REASON_TEXT = {
    "past_end": "past the end of",
    "before_start": "before the start of",
    "outside_view": "outside the view (inside the storage) of",
    "misaligned": "misaligned in",
    "no_argument": "outside every tensor",
}


def _plural(n: int, word: str, plural: str = "") -> str:
    return f"{n} {word}" if n == 1 else f"{n} {plural or word + 's'}"


class BoundsCheck(Check):
    """Reports loads, stores and atomics outside the launch's tensor arguments, and keeps them from
    being performed. Runs first: the other checks see only the lanes it lets through."""

    kind = "out_of_bounds"
    title = "out-of-bounds access"
    color = "#dc2626"
    order = 0
    first = True
    keeps_lanes_in_bounds = True

    @classmethod
    def message(cls, f) -> str:
        where = REASON_TEXT.get(f.reason, "outside")
        target = f" `{f.arg}`" if f.arg and f.reason != "no_argument" else ""
        msg = f"{f.access} {where}{target}: {_plural(f.count, 'lane')} in {_plural(f.num_programs, 'program')}"
        if len(f.reasons) > 1:
            msg += " (" + ", ".join(f"{n} {REASON_TEXT.get(r, r).replace(' of', '').replace(' in', '')}"
                                    for r, n in sorted(f.reasons.items(), key=lambda kv: -kv[1])) + ")"
        return msg

    @classmethod
    def hint(cls, f) -> str:
        if f.reason == "misaligned":
            return "the address is not a multiple of the element size: check pointer casts and byte offsets"
        if f.reason == "no_argument":
            return ("the address is in no tensor argument and in no live tensor of the program (a raw "
                    "address from a pointer table resolves to the tensor it points into): check pointers "
                    "loaded from memory or built from integers, and that the tensors they point to are "
                    "large enough and still alive")
        if f.reason == "outside_view":
            return ("the address is inside the tensor's storage but not in this view: index with the view's "
                    "strides (x.stride(0)) and bound by its shape, not the underlying tensor's")
        if f.reason == "before_start":
            return "negative offsets: check the index arithmetic (pid/offset minus something) or mask i >= 0"
        if not f.masked:
            extra = " (and other= for the value of masked-off lanes)" if "load" in f.access else ""
            return f"this {f.access} has no mask: add mask=offsets < n{extra} to it"
        return ("the mask lets these lanes through: check its bound (< vs <=, the tail of the last block, "
                "the right size for this dimension)")

    @classmethod
    def facts(cls, f):
        if not f.count:
            return []
        return [("lanes", f"{f.count} in {_plural(f.occurrences, 'access', 'accesses')} over "
                          f"{_plural(f.launches, 'launch', 'launches')}")]

    def on_access(self, launch, access: Access, res) -> None:
        if res.n == 0:
            return
        space = launch.space
        ok = space.in_view(res, access.size)
        size = access.size
        if size == 1 or res.aligned:  # known aligned (a pointer block whose bases are)
            pass
        elif res.contiguous(size):  # consecutive elements from an aligned first one
            res.aligned = True
        else:
            if int(np.bitwise_or.reduce(res.off)) & (size - 1) == 0:  # one pass: no lane has a low bit set
                res.aligned = True
            else:
                misaligned = (res.off & (size - 1)) != 0
                ok = ~misaligned if ok is None else ok & ~misaligned
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

