"""``int_overflow``: integer arithmetic that overflows its type and then feeds an address.

On the GPU integer arithmetic wraps silently: ``row * stride`` in int32 (``tl.program_id`` and
int arguments below 2**31 are int32) wraps past 2**31 and the load goes somewhere else, the
classic cause of illegal memory accesses at production sizes. Every integer ``+``, ``-``, ``*``,
``<<`` and narrowing cast is computed exactly alongside the wrapped result; lanes where they
differ are marked (a lane taint that travels through later arithmetic, casts and shape ops) with
the operation, its line and the operand values. A finding is made where a marked lane reaches the
address of a load, store or atomic that the mask lets through, naming the overflowing line (not
the access), its values and the access it fed.

Overflow that never reaches an address (hashes, random-number generators that wrap on purpose)
is not reported. Nothing needs a tensor of 2**31 elements: the overflow is seen when the product
is computed, whatever the result then addresses (out of bounds as well, usually, which the
``out_of_bounds`` check reports at the access).
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..findings import Violation, program_label
from ..interp import taint as _taint
from .base import Check

_OPS = {np.add: ("+", "add"), np.subtract: ("-", "sub"), np.multiply: ("*", "mul"), np.left_shift: ("<<", "shl")}
_SHOWN = 4


def overflowing(op, a: np.ndarray, b: np.ndarray, r: np.ndarray) -> Optional[np.ndarray]:
    """Lanes where ``r`` (the wrapped result of ``a op b``, all of one integer dtype) is not the exact one.

    Returns a bool array of the broadcast shape, or None if no lane overflowed.
    """
    dt = r.dtype
    if op is not np.left_shift and a.size and b.size:  # the operands' ranges often prove there is none
        amin, amax, bmin, bmax = int(a.min()), int(a.max()), int(b.min()), int(b.max())
        if op is np.add:
            lo, hi = amin + bmin, amax + bmax
        elif op is np.subtract:
            lo, hi = amin - bmax, amax - bmin
        else:
            ends = (amin * bmin, amin * bmax, amax * bmin, amax * bmax)
            lo, hi = min(ends), max(ends)
        info = np.iinfo(dt)
        if info.min <= lo and hi <= info.max:
            return None
    if dt.itemsize < 8:
        wa, wb = a.astype(np.int64), b.astype(np.int64)
        if op is np.left_shift:
            exact = np.where((wb >= 0) & (wb < 40), wa * (np.int64(1) << np.clip(wb, 0, 39)), np.int64(1) << 62)
        else:
            exact = op(wa, wb)
        bad = exact != r.astype(np.int64)
    elif dt.kind == "i":
        if op is np.add:
            bad = ((a ^ r) & (b ^ r)) < 0
        elif op is np.subtract:
            bad = ((a ^ b) & (a ^ r)) < 0
        elif op is np.multiply:
            safe = np.where(a == 0, 1, a)
            bad = (a != 0) & ((r // safe != b) | ((a == -1) & (b == np.iinfo(dt).min)))
        else:
            bad = (b < 0) | (b >= 64) | ((r >> np.clip(b, 0, 63)) != a)
    else:  # uint64
        if op is np.add:
            bad = r < a
        elif op is np.subtract:
            bad = a < b
        elif op is np.multiply:
            safe = np.where(a == 0, 1, a)
            bad = (a != 0) & (r // safe != b)
        else:
            bad = (b >= 64) | ((r >> np.clip(b, 0, 63)) != a)
    bad = np.asarray(bad)
    return bad if bad.any() else None


def _exact(op, x: int, y: int) -> int:
    if op is np.left_shift:
        return x << y if 0 <= y < 128 else x
    return {np.add: x + y, np.subtract: x - y, np.multiply: x * y}[op]


class OverflowCheck(Check):
    """Reports integer arithmetic that overflowed its type and reached an address (see the module).

    Constructed without arguments (``checks=["int_overflow"]``). The builder calls its hooks with the
    interpreter's value handles (numpy arrays of any block shape, ``()`` or ``(1,)`` for scalars);
    none of them raises: overflowed lanes are marked, and findings go through ``launch.report``.
    """

    kind = "int_overflow"
    title = "integer overflow in an address"
    color = "#a16207"
    order = 40
    by_origin = True
    first_message_only = True

    @classmethod
    def hint(cls, f) -> str:
        return ("compute offsets in 64 bits: cast the program id or the index first, e.g. "
                "pid.to(tl.int64) * stride, or annotate the argument (stride: tl.int64)")

    @classmethod
    def facts(cls, f):
        if not f.examples:
            return []
        ex = f.examples[0]
        vals = "; ".join(_value_text(v) for v in ex.get("values", [])[:3])
        return [("values", f"program {program_label(ex['program_id'])}: {vals}"),
                ("feeds", f"the {f.access} at {ex.get('access_at', '?')}")]

    def on_int_arith(self, launch, op, out, lhs, rhs) -> None:
        """``out = lhs op rhs`` (``op`` a numpy ufunc: add, subtract, multiply, left_shift) was computed
        with wrapping on signed or unsigned integers of one dtype (``lhs``/``rhs`` broadcast to
        ``out``'s shape); mark the lanes that overflowed. Other ops and dtypes are ignored."""
        if op not in _OPS or out.data.dtype.kind not in "iu" or out.data.dtype == np.bool_:
            return
        a, b, r = lhs.data, rhs.data, out.data
        if a.dtype != r.dtype or b.dtype != r.dtype:
            return
        bad = overflowing(op, a, b, r)
        if bad is None:
            return
        shape = np.shape(r)
        a_b, b_b, r_b = np.broadcast_to(a, shape), np.broadcast_to(b, shape), np.asarray(r)
        sym, name = _OPS[op]
        ty = out.dtype.scalar.name

        def describe(pairs) -> dict:
            values = []
            for full, lane in pairs:
                x, y, w = int(a_b[full]), int(b_b[full]), int(r_b[full])
                values.append({"lane": list(lane), "lhs": x, "op": sym, "rhs": y, "exact": _exact(op, x, y),
                               "wrapped": w})
            v0 = values[0]
            text = f"{ty} {name} overflows: {v0['lhs']} {sym} {v0['rhs']} = {v0['exact']} does not fit in {ty} " \
                   f"(wraps to {v0['wrapped']})"
            return {"op": name, "dtype": ty, "values": values, "text": text}
        self._mark(launch, out, np.broadcast_to(bad, shape) if bad.shape != shape else bad, describe, _SHOWN,
                   getattr(lhs, "bat", False) or getattr(rhs, "bat", False))

    def on_cast(self, launch, src, out) -> None:
        """``out`` is the integer handle ``src`` cast to a narrower integer type (same shape): mark
        the lanes whose value changed. Widening and same-width (sign) casts are ignored."""
        s, r = src.data, out.data
        if s.dtype.kind not in "iu" or r.dtype.kind not in "iu" or s.dtype == np.bool_ or r.dtype == np.bool_:
            return
        if r.dtype.itemsize > s.dtype.itemsize or (r.dtype.itemsize == s.dtype.itemsize and r.dtype == s.dtype):
            return
        if r.dtype.itemsize == s.dtype.itemsize:  # signed <-> unsigned reinterpretation: wraps on purpose
            return
        bad = np.asarray(r.astype(np.int64) != s.astype(np.int64)) if s.dtype != np.uint64 else \
            np.asarray(r.astype(np.uint64) != s)
        if not bad.any():
            return
        ty = out.dtype.scalar.name
        s_a, r_a = np.asarray(s), np.asarray(r)

        def describe(pairs) -> dict:
            full, lane = pairs[0]
            x, w = int(s_a[full]), int(r_a[full])
            return {"op": "cast", "dtype": ty, "values": [{"lane": list(lane), "value": x, "wrapped": w}],
                    "text": f"cast to {ty} overflows: {x} does not fit in {ty} (becomes {w})"}
        self._mark(launch, out, bad, describe, 1, getattr(src, "bat", False))

    def _mark(self, launch, out, bad, describe, n: int, batched: bool) -> None:
        origin = _taint.make_origin(launch, bad, batched, describe, n)
        old = out.ovf
        if old is not None:  # already carrying an earlier overflow: the earlier origin stays
            _taint.mark(out, "ovf", np.asarray(np.broadcast_to(old, bad.shape) | bad), _taint.merge(out.ovf_at, origin))
            return
        _taint.mark(out, "ovf", bad, origin)

    def on_address(self, launch, access, ptrs, mask: Optional[np.ndarray], res) -> None:
        """A load/store/atomic with address handle ``ptrs`` (uint64, the block's shape) and bool
        ``mask`` (broadcastable, None for all lanes): report the overflowed lanes the mask lets through,
        naming the tensor it addresses."""
        if ptrs.ovf is None:
            return
        lanes = _taint.active(ptrs, "ovf", access.shape, mask)
        if lanes is None:
            return
        region = launch.space.region_of(res)
        arg = region.describe() if region else None
        op = access.op
        here = launch.here()
        at = here[0].at() if here else "?"
        for origin, mine in _taint.by_program(launch, lanes, ptrs.ovf_at):
            info = origin.info
            launch.report(Violation(
                kind=self.kind, kernel="", frames=list(origin.frames), program_id=origin.program_id, access=op,
                masked=mask is not None, lanes=int(np.count_nonzero(mine)), arg=arg, reason=str(info["op"]),
                message=f"{info['text']}; the result feeds the address of the {op} at {at}",
                example={"program_id": list(origin.program_id[: max(1, launch.grid_ndim)]),
                         "values": info["values"], "access_at": at, "lanes": _taint.first_lanes(mine, 8)}))
        _taint.mark(ptrs, "ovf", None, None)


def _value_text(v: dict) -> str:
    """One overflowing lane: ``lane [3]: 53688 * 40000 = 2147520000 -> -2147447296``."""
    if "lhs" in v:
        return f"lane {v['lane']}: {v['lhs']} {v.get('op', '?')} {v['rhs']} = {v['exact']} -> {v['wrapped']}"
    return f"lane {v['lane']}: {v['value']} -> {v['wrapped']}"
