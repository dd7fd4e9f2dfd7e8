"""``out_of_bounds``: every active lane must address an element of the tensor it was derived from.

A lane is in bounds when its bytes lie inside the *view* of the argument its address belongs to
(its slot in the virtual address space, see :mod:`tritonkit.check.memory`) or of another argument on the same
storage, and the address is a multiple of the access size. Offending lanes are not performed: a
load yields ``other`` (or 0) there and a store is dropped.

A block-pointer load or store (``tl.make_block_ptr``) must also stay inside the block pointer's
declared ``shape`` on the dimensions ``boundary_check`` leaves out: a lane past it that still lies
inside the argument (the next head's rows of ``x + i_bh * T * K``) is reported with reason
``outside_block_shape`` and performed, as the GPU performs it; one outside the argument gets the
reason of its address (``past_end``, ...) and is not performed.
"""
from __future__ import annotations

import numpy as np

from ..findings import Violation, program_label
from ..memory import slot_base
from .base import Access, Check

REASON_TEXT = {
    "past_end": "past the end of",
    "before_start": "before the start of",
    "outside_view": "outside the view (inside the storage) of",
    "misaligned": "misaligned in",
    "no_argument": "outside every tensor",
    "outside_block_shape": "outside its block pointer's declared shape (not boundary-checked), into",
}
#: how a reason reads in a list of several (the message's parenthesis)
_SHORT = {"outside_block_shape": "outside the declared shape"}


def _tuple(xs) -> str:
    return program_label(xs) if xs else "()"


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
            msg += " (" + ", ".join(f"{n} {_SHORT.get(r) or REASON_TEXT.get(r, r).replace(' of', '').replace(' in', '')}"
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
        if f.reason == "outside_block_shape":
            dims = sorted({d for ex in f.examples for d in ex.get("dims", [])}) or [0]
            return (f"the block runs outside the block pointer's declared shape on dimension "
                    f"{', '.join(map(str, dims))}, which boundary_check leaves unmasked, so the GPU "
                    f"{'reads' if 'load' in f.access else 'writes'} the neighbouring elements (another row "
                    f"block, head or batch): add boundary_check=({', '.join(map(str, dims))},)"
                    f"{' and padding_option=' + repr('zero') if 'load' in f.access else ''} to the "
                    f"{f.access.replace('block_ptr_', '')}, or fix the shape or offsets")
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
        out = [("lanes", f"{f.count} in {_plural(f.occurrences, 'access', 'accesses')} over "
                         f"{_plural(f.launches, 'launch', 'launches')}")]
        blocks = [ex for ex in f.examples if "block_shape" in ex]
        if blocks:
            ex = blocks[0]
            out.append(("block", f"declared shape {_tuple(ex['shape'])}, block {_tuple(ex['block_shape'])} at "
                                 f"offsets {_tuple(ex['offsets'])} in program {program_label(ex['program_id'])}, "
                                 f"boundary_check={_tuple(ex['boundary_check'])}"))
        return out

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
        if access.block is not None:
            self._outside_block_shape(launch, access, res, ok)
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

    def _outside_block_shape(self, launch, access: Access, res, ok) -> None:
        """Report the lanes of a block-pointer access that lie outside the block pointer's declared
        shape on a dimension ``boundary_check`` leaves unmasked but inside their argument (``ok``:
        the lanes the address check lets through, None for all). The GPU performs them, and so does
        the check (the results stay the GPU's); lanes outside the argument keep their own reason."""
        block = access.block
        outside = block.outside(access.shape)
        if outside is None:
            return
        sel = outside[res.lanes]
        if ok is not None:
            sel &= ok
        if not sel.any():
            return
        space = launch.space
        lanes = res.lanes
        for pid, pos in launch.by_program(res, np.flatnonzero(sel)):
            slots = res.slot[pos]
            offs = res.off[pos]
            example = block.example(pid[: max(1, launch.grid_ndim)], int(lanes[pos[0]]), access.shape)
            for slot in np.unique(slots):
                part = slots == slot
                region = space.region(int(slot))
                launch.report(Violation(kind=self.kind, kernel="", frames=[], program_id=pid, access=access.op,
                                        masked=access.masked, lanes=int(part.sum()), arg=region.describe(),
                                        offsets=region.layout.coords(offs[part]), reason="outside_block_shape",
                                        example=example))
