"""Lane taints: per-lane facts that travel with a value from the operation that made them.

A value handle (Triton's interpreter ``TensorHandle``) may carry, for each taint kind, a bool
array of the lanes it marks and where that came from:

* ``undef`` / ``undef_at``: lanes that derive from a masked-off lane of a load without ``other=``
  (``undefined_value``; the origin is the load's kernel frames);
* ``ovf`` / ``ovf_at``: lanes that derive from integer arithmetic that overflowed its type
  (``int_overflow``; the origin is an :class:`Origin`);
* ``nan`` / ``nan_at``: lanes holding a NaN/Inf that an operation made from finite inputs, or
  that a load read from memory (``nan_inf``; an :class:`Origin`);
* ``uninit`` / ``uninit_at``: lanes a load read from elements nothing had written
  (``uninitialized_read``; the origin's ``info["finding"]`` is the finding the load made, held
  back until the value is observed).

Elementwise operations, casts, shape operations and ``tl.dot`` (row/column-wise) carry taints
from inputs to result; ``tl.where`` keeps only the lanes it selects. Reductions and scans carry
the :data:`OBSERVED` taints per lane (:func:`through_reduce`: a reduced lane is tainted when a
lane it combines is; a scan's lane ``i`` when a lane at or before ``i`` is). ``tainted`` is True
on a handle with any taint, so the common case (none) costs one attribute test.

The :data:`OBSERVED` taints are reported where the value becomes observable
(:func:`observe`, and the store, atomic and address hooks), not where it is made: a polluted
value that is never stored, used as an address or a mask, branched on, printed or asserted
changes nothing the program does, as on the GPU.
"""
from __future__ import annotations

import dataclasses
from typing import Dict, List, Optional

import numpy as np
from triton.runtime import interpreter as _interp

TensorHandle = _interp.TensorHandle
KINDS = ("undef", "ovf", "nan", "uninit")
#: the taints reported where a value is observed, carried through reductions and scans
OBSERVED = ("undef", "uninit")
_AT = {k: k + "_at" for k in KINDS}


@dataclasses.dataclass
class Origin:
    """Where a taint started: the kernel frames (innermost first), the program, and facts
    (the operation, the lane, the input values) for the finding."""

    frames: list
    program_id: tuple
    info: Dict[str, object]


class BatchOrigin:
    """Where a taint started, under the batched engine: one :class:`Origin` per program of the batch
    that had marked lanes (``programs``: bool, ``(P,)``), made by ``make(b)`` when a finding asks."""

    def __init__(self, programs: np.ndarray, make) -> None:
        self.programs = programs
        self._make = make
        self._made: Dict[int, Origin] = {}

    def of(self, b: int) -> Optional[Origin]:
        """The origin of program ``b`` of the batch, or None where it had no marked lane."""
        if not self.programs[b]:
            return None
        o = self._made.get(b)
        if o is None:
            o = self._made[b] = self._make(b)
        return o


class MergedOrigin:
    """Two origins of values combined (batched engine): a program's origin is the first one's, if it
    has one for that program, else the second one's."""

    def __init__(self, first, second) -> None:
        self.first, self.second = first, second

    def of(self, b: int) -> Optional[Origin]:
        """The origin of program ``b``: the first one's, else the second one's, else None."""
        o = origin_for(self.first, b)
        return o if o is not None else origin_for(self.second, b)


def origin_for(at, b: int):
    """The origin of program ``b`` of the batch (any origin outside the batched engine)."""
    if isinstance(at, (BatchOrigin, MergedOrigin)):
        return at.of(b)
    return at


def by_program(launch, lanes: np.ndarray, at):
    """Split the marked ``lanes`` (bool, the value's shape) of a value whose taint origin is ``at``
    by program: yields ``(that program's Origin, its lanes)`` for every program with a marked lane
    and an origin (once, for the running program, outside the batched engine)."""
    for b, _, mine in launch.block_programs(lanes):
        origin = origin_for(at, b)
        if origin is not None:
            yield origin, mine


def merge(a, b):
    """The origin of a value made from values with origins ``a`` and ``b``: the first one's (one
    program at a time); per program the first that has one (batched engine)."""
    if a is None:
        return b
    if b is None or a is b:
        return a
    if isinstance(a, (BatchOrigin, MergedOrigin)) or isinstance(b, (BatchOrigin, MergedOrigin)):
        return MergedOrigin(a, b)
    return a


def make_origin(launch, lanes: np.ndarray, batched: bool, describe, n: int = 1):
    """The origin of the marked ``lanes`` (bool, the value's shape) of a value made by the running
    operation. ``describe(pairs)`` gives the facts from the first ``n`` marked lanes, each as a pair
    (index into the value, index into the block: they differ by the program axis when ``batched``).

    Returns an :class:`Origin`, or a :class:`BatchOrigin` under the batched engine."""
    frames = launch.here()
    batch = launch.batch
    if batch is None:
        ixs = _first(lanes, n)
        return Origin(frames=frames, program_id=launch.program_id(), info=describe([(ix, ix) for ix in ixs]))
    pids = batch.pids
    if not batched:  # a value the same in every program: the same facts for each
        ixs = _first(lanes, n)
        info = describe([(ix, ix) for ix in ixs])
        return BatchOrigin(np.ones(pids.shape[0], dtype=bool),
                           lambda b: Origin(frames=frames, program_id=launch.program_of(int(pids[b])), info=info))
    programs = lanes.reshape(lanes.shape[0], -1).any(axis=1)

    def make(b: int) -> Origin:
        ixs = _first(lanes[b], n)
        return Origin(frames=frames, program_id=launch.program_of(int(pids[b])),
                      info=describe([((b,) + ix, ix) for ix in ixs]))
    return BatchOrigin(programs, make)


def _first(lanes: np.ndarray, n: int) -> List[tuple]:
    if not lanes.shape:
        return [()]
    return [tuple(int(i) for i in ix) for ix in np.argwhere(lanes)[:n]]


def install(scope) -> None:
    """Give every TensorHandle class-level empty taints (fast to test) for the launch."""
    scope.set_attr(TensorHandle, "tainted", False)
    for k in KINDS:
        scope.set_attr(TensorHandle, k, None)
        scope.set_attr(TensorHandle, _AT[k], None)


def mark(h: TensorHandle, kind: str, lanes: Optional[np.ndarray], origin) -> TensorHandle:
    """Set taint ``kind`` of ``h`` to ``lanes`` (bool, ``h``'s shape or broadcastable; None clears)."""
    setattr(h, kind, lanes)
    setattr(h, _AT[kind], origin if lanes is not None else None)
    if lanes is not None:
        h.tainted = True
    return h


def carry(out: TensorHandle, *ins) -> TensorHandle:
    """``out`` computed elementwise (with broadcasting) from ``ins``: tainted where any input is,
    and where the operation itself already marked it (an address whose byte offset wrapped: the
    inputs' origin, the earlier one, names those lanes too, so that none goes unreported)."""
    shape = None
    for k in KINDS:
        u = None
        origin = None
        for h in ins:
            hu = getattr(h, k, None)
            if hu is not None:
                origin = merge(origin, getattr(h, _AT[k]))
                u = hu if u is None else (u | hu)
        if u is not None:
            if shape is None:
                shape = np.shape(out.data)
            own = getattr(out, k, None)
            if own is not None:  # the operation's own lanes stay marked
                u = u | own
                origin = merge(origin, getattr(out, _AT[k]))
            mark(out, k, u if u.shape == shape else np.broadcast_to(u, shape), origin)
    return out


def carry_shape(out: TensorHandle, src: TensorHandle, fn) -> TensorHandle:
    """``out`` is ``src`` reshaped/transposed/broadcast by ``fn`` (applied to each taint too)."""
    if src.tainted:
        for k in KINDS:
            u = getattr(src, k)
            if u is not None:
                mark(out, k, fn(u), getattr(src, _AT[k]))
    return out


def select(out: TensorHandle, cond: TensorHandle, lhs: TensorHandle, rhs: TensorHandle) -> TensorHandle:
    """``tl.where(cond, lhs, rhs)``: tainted where the selected side is, or the condition is."""
    if not (cond.tainted or lhs.tainted or rhs.tainted):
        return out
    shape = np.shape(out.data)
    c = np.broadcast_to(np.asarray(cond.data, dtype=bool), shape)
    for k in KINDS:
        cu, lu, ru = getattr(cond, k), getattr(lhs, k), getattr(rhs, k)
        if cu is None and lu is None and ru is None:
            continue
        u = np.where(c, np.broadcast_to(lu, shape) if lu is not None else False,
                     np.broadcast_to(ru, shape) if ru is not None else False)
        if cu is not None:
            u = u | np.broadcast_to(cu, shape)
        if np.any(u):
            at = _AT[k]
            mark(out, k, np.asarray(u, dtype=bool),
                 merge(merge(getattr(cond, at), getattr(lhs, at)), getattr(rhs, at)))
    return out


def dot(out: TensorHandle, a: TensorHandle, b: TensorHandle, d: TensorHandle) -> TensorHandle:
    """``a @ b + d``: an output lane is tainted when its row of ``a`` or column of ``b`` is."""
    if not (a.tainted or b.tainted or d.tainted):
        return out
    shape = np.shape(out.data)
    for k in KINDS:
        au, bu, du = getattr(a, k), getattr(b, k), getattr(d, k)
        if au is None and bu is None and du is None:
            continue
        u = np.zeros(shape, dtype=bool)
        if au is not None:
            u |= np.broadcast_to(np.broadcast_to(au, np.shape(a.data)).any(axis=-1)[..., :, None], shape)
        if bu is not None:
            u |= np.broadcast_to(np.broadcast_to(bu, np.shape(b.data)).any(axis=-2)[..., None, :], shape)
        if du is not None:
            u |= np.broadcast_to(du, shape)
        at = _AT[k]
        mark(out, k, u, merge(merge(getattr(a, at), getattr(b, at)), getattr(d, at)))
    return out


def active(h: TensorHandle, kind: str, shape, mask: Optional[np.ndarray]) -> Optional[np.ndarray]:
    """The lanes of ``h`` (broadcast to ``shape``) with taint ``kind`` that ``mask`` lets through."""
    u = getattr(h, kind)
    if u is None:
        return None
    u = np.broadcast_to(u, shape)
    if mask is not None:
        u = u & np.broadcast_to(mask, shape)
    return u if u.any() else None


def first_lane(lanes: np.ndarray) -> tuple:
    """The index (a tuple, ``()`` for a 0-d array) of the first True lane of a bool array with one."""
    return tuple(int(i) for i in np.argwhere(lanes.reshape(lanes.shape or (1,)))[0]) if lanes.shape else ()


def first_lanes(lanes: np.ndarray, n: int) -> List[List[int]]:
    """Indices (in the block) of the first ``n`` True lanes of a bool array."""
    return [list(map(int, ix)) for ix in np.argwhere(lanes.reshape(lanes.shape or (1,)))[:n]]


def through_reduce(op, outs, ins, P: int = 1) -> None:
    """Carry the :data:`OBSERVED` taints of ``ins`` (``tl.tensor`` s, the operands of one
    ``tl.reduce``/``tl.associative_scan``) to ``outs`` (its results), lane by lane.

    ``op`` is Triton's ``ReduceOps`` (``axis``: an int or None for every axis, ``keep_dims``) or
    ``ScanOps`` (``axis``, ``reverse``); under the batched engine (``P`` programs) operands may
    carry the program axis first. A reduced lane is tainted when any lane it combines (of any
    operand) is; a scan's lane ``i`` when any lane at or before ``i`` along the axis is (after it,
    with ``reverse``). Raises nothing; a result whose shape the taint does not fit is tainted whole.
    """
    hs = [getattr(t, "handle", None) for t in ins]
    if not any(getattr(h, "tainted", False) for h in hs):
        return
    first = ins[0]
    block = tuple(int(d) for d in first.type.shape) if first.type.is_block() else ()
    bat = any(getattr(h, "bat", False) for h in hs)
    full = ((P,) if bat else ()) + block
    lead = 1 if bat else 0
    scan = isinstance(op, _interp.ScanOps)
    axis = op.axis
    if axis is not None and block:
        axis = (axis if axis >= 0 else axis + len(block)) + lead
    for k in OBSERVED:
        u, origin = None, None
        for h in hs:
            hu = getattr(h, k, None)
            if hu is None:
                continue
            hu = np.broadcast_to(np.broadcast_to(hu, np.shape(h.data)).reshape(
                (P,) + block if getattr(h, "bat", False) else block), full)
            u = hu if u is None else (u | hu)
            origin = merge(origin, getattr(h, _AT[k]))
        if u is None:
            continue
        if not block:
            r = u
        elif scan:
            r = np.flip(u, axis) if op.reverse else u
            r = np.logical_or.accumulate(r, axis=axis)
            r = np.flip(r, axis) if op.reverse else r
        else:
            axes = tuple(range(lead, len(full))) if axis is None else axis
            r = u.any(axis=axes, keepdims=bool(op.keep_dims))
        for t in outs:
            h = getattr(t, "handle", None)
            if h is None:
                continue
            shape = np.shape(h.data)
            if r.shape == shape:
                lanes = r
            elif r.size == int(np.prod(shape)):
                lanes = r.reshape(shape)
            else:
                lanes = np.broadcast_to(r.any(), shape)
            mark(h, k, np.ascontiguousarray(lanes) if lanes.any() else None, origin)


def whole(out: TensorHandle, *ins) -> TensorHandle:
    """``out`` made by an operation whose lanes each may depend on any lane of ``ins`` (a gather's
    indices, a histogram): tainted in every lane where any input lane is tainted."""
    if not any(getattr(h, "tainted", False) for h in ins):
        return out
    shape = np.shape(out.data)
    for k in KINDS:
        hit = [h for h in ins if getattr(h, k, None) is not None and np.any(getattr(h, k))]
        if hit:
            origin = None
            for h in hit:
                origin = merge(origin, getattr(h, _AT[k]))
            mark(out, k, np.ones(shape, dtype=bool), origin)
    return out


def observe(launch, h, what: str, lanes: Optional[np.ndarray] = None) -> None:
    """The value ``h`` (a TensorHandle) is observed by ``what`` (``"branch"``, ``"device_print"``,
    ``"store mask"``, ...): the checks' ``observe`` hooks report the :data:`OBSERVED` taints of
    its lanes (``lanes``: bool, broadcastable to ``h``; None: every lane). Nothing outside a
    checked launch, or for an untainted value."""
    if launch is None or not getattr(h, "tainted", False):
        return
    if not any(getattr(h, k, None) is not None for k in OBSERVED):
        return
    for hook in launch.hooks.observe:
        hook(launch, what, h, lanes)


def observe_tensor(t, what: str) -> None:
    """:func:`observe` for a ``tl.tensor`` (or any value) ``t`` of the running launch, if any, that
    decides control flow (a condition, a loop bound): its :data:`OBSERVED` taints are then
    cleared, so the one decision is reported once (the rewritten ``if`` and Triton's
    ``bool(cond)`` both see it)."""
    h = getattr(t, "handle", None)
    if getattr(h, "tainted", False):
        launch = getattr(_interp.interpreter_semantic.builder, "launch", None)
        observe(launch, h, what, running_lanes(launch, h))
        for k in OBSERVED:
            if getattr(h, k, None) is not None:
                mark(h, k, None, None)


def running_lanes(launch, h) -> Optional[np.ndarray]:
    """The lanes of ``h`` whose programs run now (a divergent loop or branch of the batched engine
    masks the others), or None for all."""
    active = getattr(getattr(launch, "builder", None), "active", None)
    if active is None or not getattr(h, "bat", False):
        return None
    shape = np.shape(h.data)
    return np.broadcast_to(np.asarray(active, dtype=bool).reshape((-1,) + (1,) * (len(shape) - 1)), shape)


# --- shape operations that rearrange lanes: each output lane's taint from the lanes it came from -----
def _lanes(h, k, shape=None) -> np.ndarray:
    """Taint ``k`` of ``h`` broadcast to its data's shape (or ``shape``); all False where it has none."""
    u = getattr(h, k, None)
    shape = np.shape(h.data) if shape is None else shape
    return np.zeros(shape, dtype=bool) if u is None else np.broadcast_to(u, shape)


def _rearranged(out, ins, make) -> None:
    """Mark ``out`` (a handle, or a tuple of handles) with ``make(k)`` (the lanes, or a tuple of
    lanes, of taint ``k``) for each taint kind some input of ``ins`` carries; an output whose shape
    the lanes do not fit is tainted whole (never left unmarked)."""
    outs = out if isinstance(out, tuple) else (out,)
    for k in KINDS:
        hit = [h for h in ins if getattr(h, k, None) is not None]
        if not hit:
            continue
        origin = None
        for h in hit:
            origin = merge(origin, getattr(h, _AT[k]))
        try:
            made = make(k)
        except (ValueError, IndexError):
            made = None
        made = made if isinstance(made, tuple) else (made,)
        for o, lanes in zip(outs, made):
            shape = np.shape(o.data)
            if lanes is None or np.shape(lanes) != shape:
                lanes = np.ones(shape, dtype=bool)
            if lanes.any():
                mark(o, k, np.ascontiguousarray(lanes), origin)


def wrap_shape_ops(builder) -> None:
    """Make ``builder``'s (a :class:`~.builder.CheckedBuilder`'s) operations that move lanes around
    (``tl.join``, ``tl.split``, ``tl.cat``, ``tl.gather``, ``tl.histogram``, unsplat) carry taints:
    each output lane from the lanes it came from (a gather's also from its index, a histogram's
    bins from every lane). Under the batched engine an operand may carry the program axis first."""
    def bat(h) -> bool:
        return bool(getattr(h, "bat", False))

    def join(fn):
        def op(lhs, rhs):
            out = fn(lhs, rhs)
            if lhs.tainted or rhs.tainted:
                shape = np.shape(out.data)[:-1]
                _rearranged(out, (lhs, rhs), lambda k: np.stack([_lanes(lhs, k, shape), _lanes(rhs, k, shape)], -1))
            return out
        return op

    def split(fn):
        def op(val):
            out = fn(val)
            if val.tainted:
                _rearranged(out, (val,), lambda k: (_lanes(val, k)[..., 0], _lanes(val, k)[..., 1]))
            return out
        return op

    def cat(fn):
        def op(lhs, rhs):
            out = fn(lhs, rhs)
            if lhs.tainted or rhs.tainted:
                lead = 1 if bat(out) else 0

                def lanes(k):
                    a, b = _lanes(lhs, k), _lanes(rhs, k)
                    if lead:
                        a = a if bat(lhs) else np.broadcast_to(a, np.shape(out.data)[:1] + a.shape)
                        b = b if bat(rhs) else np.broadcast_to(b, np.shape(out.data)[:1] + b.shape)
                    return np.concatenate([a, b], axis=lead)
                _rearranged(out, (lhs, rhs), lanes)
            return out
        return op

    def gather(fn):
        def op(src, indices, axis):
            out = fn(src, indices, axis)
            if src.tainted or indices.tainted:
                shape = np.shape(out.data)

                def lanes(k):
                    u = _lanes(src, k)
                    idx = np.asarray(indices.data).astype(np.int64)
                    ax = axis + (1 if bat(out) else 0)
                    if bat(out) and not bat(src):
                        u = np.broadcast_to(u, shape[:1] + u.shape)
                    if bat(out) and not bat(indices):
                        idx = np.broadcast_to(idx, shape[:1] + idx.shape)
                    got = np.take_along_axis(u, np.clip(idx, 0, u.shape[ax] - 1), axis=ax)
                    return got | _lanes(indices, k, shape) if getattr(indices, k, None) is not None else got
                _rearranged(out, (src, indices), lanes)
            return out
        return op

    def histogram(fn):
        def op(data, bins, mask):
            out = fn(data, bins, mask)
            ins = (data,) if mask is None else (data, mask)
            if any(h.tainted for h in ins):
                _rearranged(out, ins, lambda k: None)  # a bin counts every lane: tainted whole
            return out
        return op

    def unsplat(fn):
        def op(arg):
            out = fn(arg)
            if arg.tainted:
                def lanes(k):
                    u = _lanes(arg, k)
                    return u.reshape(u.shape[0], -1)[:, 0] if bat(arg) else u.reshape(-1)[:1].reshape(np.shape(out.data))
                _rearranged(out, (arg,), lanes)
            return out
        return op

    for name, wrap in (("create_join", join), ("create_split", split), ("create_cat", cat),
                       ("create_gather", gather), ("create_histogram", histogram), ("create_unsplat", unsplat)):
        fn = getattr(builder, name, None)
        if fn is not None:
            setattr(builder, name, wrap(fn))
