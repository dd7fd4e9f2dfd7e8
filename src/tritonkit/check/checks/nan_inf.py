"""``nan_inf``: where a NaN or Inf that reaches memory was born. Off by default (``--nan``).

A NaN at a kernel's output says nothing about where it came from. With this check on, every
floating-point result is examined: lanes that are NaN/Inf although every input of the operation
was finite at that lane are an *origin* (``exp`` of a large logit, ``x / 0``, a sum or an fp16 cast
that overflows), recorded with the line, the program, the lane and the input values, and marked
(a lane taint carried through later operations like the undefined-lane taint). Lanes loaded from
memory that already hold NaN/Inf are an origin of their own kind: the input already had them.

A finding is made only when a marked lane still holds NaN/Inf where it is stored (or given to an
atomic) and the mask lets it through, and it names the origin, not the store: one finding per
origin line. So values that are non-finite on purpose do not count: ``other=-float("inf")`` and
``float("inf")`` constants are not operations on finite inputs, ``x - max`` of two ``-inf`` lanes
is not born from finite inputs, and garbage in masked-off lanes that is never stored is never
reported.
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from ..findings import Violation, program_label
from ..interp import taint as _taint
from ..interp.numerics import BITS_TYPES, values
from .base import Check, performed_lanes
from .uninitialized import UninitializedCheck, sentinel_of_type

_NP_NAMES = {"true_divide": "div", "divide": "div", "multiply": "mul", "subtract": "sub", "power": "pow",
             "fmod": "fmod", "add": "add"}


def _op_name(op) -> str:
    name = getattr(op, "__name__", None) or str(op)
    return _NP_NAMES.get(name, name)


def _floating(h) -> bool:
    """Whether a handle holds floats (numpy floats, or bf16/fp8 held as raw bits)."""
    if h is None:
        return False
    kind = h.data.dtype.kind
    return kind == "f" or (kind == "u" and h.dtype.scalar.name in BITS_TYPES)


def _nonfinite(out):
    """``(values, finite)`` of a float result that has NaN/Inf lanes; None for other results, and for
    all-finite ones (whose carried ``nan`` taint is then dropped: the value is clean again)."""
    if not _floating(out):
        return None
    v = values(out.data, out.dtype.scalar)
    fin = np.isfinite(v)
    if fin.all():
        if out.nan is not None:
            _taint.mark(out, "nan", None, None)
        return None
    return v, fin


def _batched(handles) -> bool:
    """Whether any of these handles has the batched engine's program axis."""
    return any(getattr(h, "bat", False) for h in handles if h is not None)


def _fmt(x: float) -> str:
    return repr(float(x)) if np.isfinite(x) else str(float(x))


class NanInfCheck(Check):
    """Reports the origin of NaN/Inf values that reach memory (see the module).

    Constructed without arguments (``nan=True`` or ``checks=["nan_inf"]``). The builder calls its
    hooks with the interpreter's value handles (numpy arrays of any block shape; bf16/fp8 held as
    raw bits and decoded here, fp16/fp32/fp64 as numpy floats; non-float handles are ignored).
    None of them raises: origins are marked, and findings go through ``launch.report``.
    """

    kind = "nan_inf"
    title = "where a NaN/Inf was made"
    color = "#db2777"
    order = 50
    default = False  # --nan: some kernels use Inf on purpose, and it costs time
    by_origin = True
    first_message_only = True

    def __init__(self) -> None:
        self._sentinels = False  # the uninitialized check runs: its sentinel NaNs are its findings

    @classmethod
    def hint(cls, f) -> str:
        if f.reason == "loaded":
            return "the input already holds NaN/Inf: look at what produced it before this kernel"
        return ("this operation is where the NaN/Inf is made from finite values: e.g. subtract the row max "
                "before exp, guard divisions, accumulate in float32")

    @classmethod
    def facts(cls, f):
        if not f.examples:
            return []
        ex = f.examples[0]
        inputs = ", ".join(repr(x) for x in ex.get("inputs", []))
        return [("first", f"program {program_label(ex['program_id'])}, lane {ex.get('lane')}: inputs ({inputs}) "
                          f"-> {ex.get('result')}"),
                ("reaches", f"the {f.access} at {ex.get('stored_at', '?')}")]

    def begin_launch(self, launch) -> None:
        self._sentinels = any(isinstance(c, UninitializedCheck) for c in launch.checks)

    # --- where values are made -----------------------------------------------------------------------
    def on_result(self, launch, op, out, ins: Sequence) -> None:
        """``out`` was computed elementwise by ``op`` (a numpy ufunc or a name) from ``ins`` (handles
        broadcastable to ``out``'s shape; only float inputs count as inputs that must be finite)."""
        got = _nonfinite(out)
        if got is None:
            return
        v, fin = got
        shape = v.shape
        nonfin = ~fin
        inputs = [(h, values(h.data, h.dtype.scalar)) for h in ins if _floating(h)]
        born = nonfin.copy()
        for _, hv in inputs:
            born &= np.broadcast_to(np.isfinite(hv), shape)
        self._update(launch, out, nonfin, born, _batched(ins), lambda ix: (
            f"{_op_name(op)}({', '.join(_fmt(np.broadcast_to(hv, shape)[ix]) for _, hv in inputs)}) = "
            f"{_fmt(v[ix])}", [float(np.broadcast_to(hv, shape)[ix]) for _, hv in inputs], float(v[ix])))

    def on_dot(self, launch, out, a, b, d) -> None:
        """``out = a @ b + d``: a lane is born non-finite when its row of ``a``, column of ``b`` and
        ``d`` are finite."""
        got = _nonfinite(out)
        if got is None:
            return
        v, fin = got
        av, bv = values(a.data, a.dtype.scalar), values(b.data, b.dtype.scalar)
        born = ~fin & np.isfinite(av).all(axis=-1)[..., :, None] & np.isfinite(bv).all(axis=-2)[..., None, :]
        if _floating(d):
            born &= np.broadcast_to(np.isfinite(values(d.data, d.dtype.scalar)), v.shape)
        self._update(launch, out, ~fin, born, _batched((a, b, d)),
                     lambda ix: (f"dot: the sum of products is {_fmt(v[ix])} (every input finite)", [], float(v[ix])))

    def on_reduce(self, launch, what: str, name: str, outs, ins) -> None:
        for o, i in zip(outs, ins):
            self._reduced(launch, name, o, i)

    def _reduced(self, launch, name: str, out, inp) -> None:
        """A reduction or scan ``name`` (``"sum"``, ``"max"``, ...) made ``out`` (a ``tl.tensor``) from
        ``inp`` (a ``tl.tensor``): non-finite results of all-finite inputs are an origin."""
        oh, ih = getattr(out, "handle", None), getattr(inp, "handle", None)
        if oh is None or ih is None or not _floating(oh) or not _floating(ih):
            return
        v = np.asarray(values(oh.data, oh.dtype.scalar))
        fin = np.isfinite(v)
        if fin.all():
            return
        if ih.nan is not None and np.any(ih.nan):
            _taint.mark(oh, "nan", np.broadcast_to(~fin, v.shape).copy(), ih.nan_at)
            return
        if not np.isfinite(values(ih.data, ih.dtype.scalar)).all():
            return
        born = ~fin
        self._update(launch, oh, born, born, _batched((ih,)),
                     lambda ix: (f"{name} of finite values is {_fmt(v[ix])}", [], float(v[ix])))

    def _update(self, launch, out, nonfin: np.ndarray, born: np.ndarray, batched: bool, describe) -> None:
        carried = out.nan
        if carried is not None:
            carried = np.broadcast_to(carried, nonfin.shape) & nonfin
            if not carried.any():
                carried = None
        if carried is None and not born.any():
            _taint.mark(out, "nan", None, None)
            return

        def info(pairs) -> dict:
            full, lane = pairs[0]
            text, inputs, result = describe(full)
            return {"origin": "produced", "text": text, "lane": list(lane), "inputs": inputs, "result": result}
        if carried is not None:  # an earlier origin is the first operation: it stays
            origin = out.nan_at
            if batched and born.any():  # programs with no earlier origin get this one
                origin = _taint.merge(origin, _taint.make_origin(launch, born, True, info))
            _taint.mark(out, "nan", carried | born, origin)
            return
        _taint.mark(out, "nan", born, _taint.make_origin(launch, born, batched, info))

    def on_load(self, launch, access, res, out, mask, other) -> None:
        """A load put values read from memory into ``out``: lanes really read that hold NaN/Inf,
        other than the uninitialized check's sentinel bits, become a ``loaded`` origin."""
        if not _floating(out):
            return
        v = values(out.data, out.dtype.scalar)
        bad = ~np.isfinite(v)
        if not bad.any():
            return
        bad &= performed_lanes(res, bad.shape)
        if not bad.any():
            return
        sentinel: Optional[int] = sentinel_of_type(out.dtype.scalar) if self._sentinels else None
        if sentinel is not None:  # uninitialized elements are another finding
            raw = out.data.view(np.dtype(f"u{out.data.dtype.itemsize}"))
            bad &= raw != np.array(sentinel).astype(raw.dtype)
            if not bad.any():
                return
        region = launch.space.region_of(res)

        def info(pairs) -> dict:
            ix, lane = pairs[0]
            flat = int(np.ravel_multi_index(ix, bad.shape)) if bad.shape else 0
            element = ""
            if region is not None:
                pos = int(np.searchsorted(res.lanes, flat))
                if pos < res.n and int(res.lanes[pos]) == flat:
                    coords = region.layout.coords(res.off[pos:pos + 1])[0]
                    element = f"{region.name}[{', '.join(str(int(c)) for c in coords)}]"
            name = region.name if region is not None else "memory"
            text = f"`{name}` already holds {_fmt(v[ix])}" + (f" at {element}" if element else "") + \
                   " (loaded here: it was in the input, not made by this kernel)"
            return {"origin": "loaded", "text": text, "lane": list(lane), "inputs": [], "result": float(v[ix]),
                    "element": element}
        _taint.mark(out, "nan", bad, _taint.make_origin(launch, bad, getattr(out, "bat", False), info))

    # --- where they reach memory ---------------------------------------------------------------------
    def on_store(self, launch, access, res, value, flat) -> None:
        """A store/atomic writes ``value`` (broadcast to the block): report the NaN/Inf lanes it
        performs that carry an origin."""
        if value.nan is None:
            return
        shape, op = access.shape, access.op
        lanes = _taint.active(value, "nan", shape, performed_lanes(res, shape))
        if lanes is None:
            return
        region = launch.space.region_of(res)
        arg = region.describe() if region else None
        v = np.broadcast_to(values(value.data, value.dtype.scalar), shape)
        lanes = lanes & ~np.isfinite(v)
        if not lanes.any():
            return
        here = launch.here()
        at = here[0].at() if here else "?"
        for origin, mine in _taint.by_program(launch, lanes, value.nan_at):
            info = origin.info
            launch.report(Violation(
                kind=self.kind, kernel="", frames=list(origin.frames), program_id=origin.program_id, access=op,
                masked=True, lanes=int(np.count_nonzero(mine)), arg=arg, reason=str(info["origin"]),
                message=f"{info['text']}; it reaches the {op} at {at}",
                example={"program_id": list(origin.program_id[: max(1, launch.grid_ndim)]), "lane": info["lane"],
                         "inputs": info["inputs"], "result": info["result"], "stored_at": at}))
        _taint.mark(value, "nan", None, None)
