"""``undefined_value``: masked-off lanes of a load without ``other=`` have no defined value on the GPU.

Triton's interpreter gives them 0, which hides bugs that show on the GPU (a sum over a row whose
tail was never loaded, an fp16 max over garbage). Under check such lanes are *poisoned* (NaN for
floats, the type's largest value for integers) and *tracked* as the ``undef`` lane taint
(:mod:`tritonkit.check.interp.taint`), whose origin is the kernel line of the load.

Undefined lanes travel through arithmetic, casts, shape operations, ``tl.where`` (the lanes it
selects), ``tl.dot`` (per row and column), reductions (a reduced lane is undefined when a lane
it combines is) and scans (lane ``i`` when a lane at or before it is), and loop-carried values.
A finding is made only where an undefined lane becomes *observable*:

* a store or atomic whose mask lets the lane through (the garbage is written to memory);
* the address or the mask of a load, store or atomic;
* a branch or loop condition, a loop bound, a ``tl.device_print`` or a ``tl.device_assert``.

A value polluted only in lanes that are masked off later, or never used (a running sum after
the loop's last iteration, a prefix sum's tail, the rows a row mask drops), gives no finding,
as it changes nothing on the GPU. The finding is made at the line that observes the value and
names the load that made the undefined lanes.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..findings import Violation
from ..interp import taint as _taint
from ..interp.numerics import BITS_TYPES, from_float
from .base import Check, performed_lanes


def poison(value, off: np.ndarray, origin) -> None:
    """Poison the lanes ``off`` (bool, True = masked off) of a loaded block (a TensorHandle, in
    place) and mark them undefined with ``origin`` (the load's kernel frames)."""
    out, ty = value.data, value.dtype.scalar
    if out.dtype.kind == "f":
        out[off] = np.nan
    elif ty.name in BITS_TYPES:
        out[off] = from_float(np.array([np.nan], dtype=np.float32), ty)[0]
    elif out.dtype.kind in "iu":
        out[off] = np.iinfo(out.dtype).max
    _taint.mark(value, "undef", off, origin)


class UndefinedValues(Check):
    """Poisons the masked-off lanes of loads without ``other=`` and reports where they become
    observable: memory, an address or mask, a branch, a print or an assert (see the module).
    Raises nothing itself."""

    kind = "undefined_value"
    title = "undefined value used"
    color = "#ca8a04"
    order = 10
    first_message_only = True

    @classmethod
    def hint(cls, f) -> str:
        return ("on the GPU masked-off lanes of a load without other= hold garbage: give the load other= (0 for a "
                "sum, -inf for a max), or mask the store/reduction the same way")

    def on_load(self, launch, access, res, value, mask, other) -> None:
        if other is not None or mask is None or not access.masked:
            return
        off = ~np.broadcast_to(mask, value.data.shape)
        if off.any():
            poison(value, off, launch.here())

    def on_store(self, launch, access, res, value, flat) -> None:
        if value.undef is not None:
            lanes = _taint.active(value, "undef", access.shape, performed_lanes(res, access.shape))
            _report(launch, lanes, value.undef_at, access.op)

    def on_address(self, launch, access, ptrs, mask, res) -> None:
        if ptrs.undef is not None:
            _report(launch, _taint.active(ptrs, "undef", access.shape, mask), ptrs.undef_at, f"{access.op} address")

    def on_observe(self, launch, what, value, lanes) -> None:
        if value.undef is not None:
            shape = np.shape(value.data)
            _report(launch, _taint.active(value, "undef", shape, lanes), value.undef_at, what)


def _report(launch, lanes: Optional[np.ndarray], origin, op: str) -> None:
    """Undefined lanes (``lanes``: bool, None for none) reached ``op`` (a store, a reduction, ...)."""
    if lanes is None:
        return
    where = origin[0].at() if origin else "a masked load"
    for _, pid, mine in launch.block_programs(lanes):
        n = int(np.count_nonzero(mine))
        if not n:
            continue
        launch.report(Violation(kind=UndefinedValues.kind, kernel=launch.kernel, frames=[], program_id=pid,
                                access=op, masked=False, lanes=n,
                                message=f"{op} uses undefined lanes: masked off by the load at {where}, "
                                        "which has no other=",
                                example=dict(launch.example(np.argwhere(mine.reshape(mine.shape or (1,))), pid),
                                             loaded_at=where)))
