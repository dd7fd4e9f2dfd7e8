"""Loops whose trip count differs between the programs of a batch, and branches they disagree on,
run once for the whole batch.

The batched engine runs a batch of programs through one execution of the kernel's body. A loop
whose bound depends on the program (causal attention's ``range(0, (start_m + 1) * BLOCK_M, ...)``)
or a ``while`` on loaded data would otherwise split the batch into groups of programs that agree
(see :mod:`tritonkit.check.engine.batched`), one execution per group. Here such a loop runs once
for the batch, for as many iterations as the longest program needs. A ``range`` loop drops the
programs that are done from the batch (:mod:`.compact`: the rewritten body narrows its variables
to the programs that go on, and they are put back together after the loop). A ``while`` loop, a
loop nested in one, and every loop where :data:`COMPACT` is off run as a GPU runs a divergent
loop within a warp, with an *active mask* over the batch's programs; so does each branch of an
``if`` whose condition differs between them (:class:`_If`: the programs that take it active):

* an inactive program's loads, stores and atomics are masked off (:class:`~.batched.BatchedBuilder`
  ANDs the mask in), its ``device_assert`` and ``device_print`` are silent;
* every variable the loop body assigns keeps, for an inactive program, the value it had before
  the iteration (``tl.where(active, new, old)``), so each program ends the loop with the values of
  its own last iteration;
* Python control flow inside the loop needs only the active programs to agree.

The loops are found in the kernel's source: :class:`.rewrite.SimtRewriter` rewrites ``for ... in
range(...)`` / ``tl.range(...)`` and ``while`` loops whose bodies assign only plain names and have
no ``break``/``continue``/``return`` (others keep the group split); a ``for`` gets the statements
that narrow and widen the function's local variables its body uses; an ``if`` under the same
conditions, after early returns were folded into ``else`` branches, becomes :func:`branch`. The
rewritten code behaves exactly like the original when nothing diverges, and is used only by the
batched engine: the sequential engine, the oracle, runs Triton's own rewrite of the kernel (with
``min``/``max``, ``and``/``or`` and ``not`` as Triton's compiler has them: :func:`builtin_minmax`,
:func:`boolean`, :func:`logical_not`, which both rewrites call).
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import triton.language as tl
from triton.runtime import interpreter as _interp

from ..errors import Divergence
from . import batched_ops
from . import taint as _taint
from .recipes import read_data
from .batched import BatchedBuilder
from .compact import UNSET, Compaction, last_index  # UNSET: a variable not bound (yet)

#: whether divergent ``range`` loops drop finished programs from the batch (:mod:`.compact`) rather
#: than mask them off or split the batch by trip count (the tests run both)
COMPACT = True
_MODULE = "_tritonkit_simt"  # the name this module has in rewritten kernels' globals


# --------------------------------------------------------------------------------------------------
# runtime: called by the rewritten loops
# --------------------------------------------------------------------------------------------------
def _builder() -> Optional[BatchedBuilder]:
    b = _interp.interpreter_builder
    return b if isinstance(b, BatchedBuilder) and b.P > 1 else None


def _per_program(v, P: int) -> Optional[np.ndarray]:
    """The value of a scalar loop bound in each program (int64 ``(P,)``), or None if it is not batched."""
    if isinstance(v, tl.constexpr):
        v = v.value
    if isinstance(v, tl.tensor) and v.handle.bat:
        data = np.asarray(v.handle.data).reshape(P, -1)
        if data.shape[1] != 1:
            raise TypeError("a loop bound must be a scalar")
        return data[:, 0].astype(np.int64)
    return None


def _int(v) -> int:
    if isinstance(v, tl.constexpr):
        v = v.value
    return v.__index__() if not isinstance(v, int) else v


class _Loop:
    """What the rewritten loop asks while it runs: whether the running iteration is masked, and
    the merge of a variable's new and old values."""

    def __init__(self) -> None:
        self.builder = _builder()
        self.outer = self.builder.active if self.builder is not None else None
        self.masked = False
        self.act: Optional[np.ndarray] = None
        self.compaction: Optional[Compaction] = None
        self.narrowing = False  # the body narrows its variables before this iteration (compaction)
        self.last: Optional[np.ndarray] = None  # a masked divergent range's last index per program

    @property
    def _ran_compacted(self) -> bool:
        return self.compaction is not None and self.compaction.narrowed

    @property
    def widens(self) -> bool:
        """Whether the statement after the loop is to set its variables or its index (:meth:`widen`):
        the loop ran compacted, or masked with a trip count that differed."""
        return self._ran_compacted or self.last is not None

    def narrow(self, scope: dict, names: tuple, dead: tuple) -> tuple:
        """The values of the rewritten body's variables ``names`` (in ``scope``, the function's
        ``locals()``; ``UNSET`` where not bound) narrowed to the programs of this iteration
        (:meth:`~.compact.Compaction.narrow`)."""
        self.narrowing = False
        return self.compaction.narrow(tuple(scope.get(n, UNSET) for n in names), dead)

    def widen(self, scope: dict, names: tuple, target: Optional[str]) -> tuple:
        """The variables ``names`` for the loop's whole batch after it, and then the loop target's
        (``target``: its name, or None where it is not one name): see
        :meth:`~.compact.Compaction.widen`; after a masked loop, the variables as they are and each
        program's own last index."""
        values = tuple(scope.get(n, UNSET) for n in names)
        index = scope.get(target, UNSET) if target else UNSET
        if self._ran_compacted:
            values, index = self.compaction.widen(values, index)
        else:
            index = last_index(index, self.last)
        return values + ((index,) if target else ())

    def _set(self, act: np.ndarray, counted: str = "masked_loops") -> None:
        """Run the programs ``act`` (bool ``(P,)``, within the enclosing mask); the first time,
        count the construct in the launch record's ``counted``."""
        if self.act is None:
            setattr(self.builder.launch.record, counted, getattr(self.builder.launch.record, counted) + 1)
        self.act = act
        self.masked = not bool(act.all()) or self.outer is not None
        self.builder.active = act if self.outer is None else (act & self.outer)

    def _restore(self) -> None:
        if self.builder is not None:
            self.builder.active = self.outer
        self.masked = False

    def merge(self, new, old):
        """``new`` where the running iteration's programs are active, ``old`` elsewhere."""
        if not self.masked or old is UNSET or new is old:
            return new
        if isinstance(new, (tuple, list)) and isinstance(old, (tuple, list)) and len(new) == len(old):
            return type(new)(self.merge(n, o) for n, o in zip(new, old))
        if isinstance(new, tl.constexpr) or isinstance(old, tl.constexpr):
            new = new.value if isinstance(new, tl.constexpr) else new
            old = old.value if isinstance(old, tl.constexpr) else old
            if new == old:
                return new
        if not isinstance(new, (tl.tensor, int, float, bool)) or not isinstance(old, (tl.tensor, int, float, bool)):
            return new
        act = self.builder.active
        cond = batched_ops.bat_tensor(act, tl.int1)
        return tl.where(cond, new, old)


class _Range(_Loop):
    """``range(start, end, step)`` over a batch: plain integers when every program has the same
    bounds, else the longest trip count with an active mask per iteration."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__()
        step = kwargs.get("step")
        if len(args) == 1:
            start, end = 0, args[0]
        elif len(args) == 2:
            start, end = args
        else:
            start, end, step = args[:3]
        self.bounds = (start, end, 1 if step is None else step)

    def __iter__(self):
        start, end, step = self.bounds
        b = self.builder
        per = [_per_program(v, b.P) for v in self.bounds] if b is not None else [None] * 3
        probing = getattr(b, "probing", False)  # the engine's probe: one iteration (see the engine)
        if all(p is None or (p == p[0]).all() for p in per):  # the same loop in every program
            r = range(_int(start), _int(end), _int(step))
            yield from (r[:1] if probing else r)
            return
        P = b.P
        s, e, st = (p if p is not None else np.full(P, _int(v), dtype=np.int64) for p, v in zip(per, self.bounds))
        if (st == 0).any():
            raise ValueError("range() arg 3 must not be zero")
        trips = np.maximum(0, -((s - e) // st))  # ceil((e - s) / st), for either sign of the step
        if probing:
            trips = np.minimum(trips, 1)
        uniform_start = per[0] is None and per[2] is None
        last = s + np.maximum(trips - 1, 0) * st  # each program's index after the loop (see widen)
        if self.outer is not None:
            trips = np.where(self.outer, trips, 0)  # (the index of a program off in the outer loop is not read)
        elif COMPACT:
            yield from self._compacted(trips, last, s, st, uniform_start)
            return
        else:
            # programs far apart in trip count: the engine runs them as groups of close counts
            groups = split_by_trips(trips, b.max_bytes / max(1, P))
            if groups is not None:
                raise Divergence(groups)
        for k in range(int(trips.max(initial=0))):
            self._set(trips > k)
            if uniform_start:
                yield _int(start) + k * _int(step)
            else:
                yield batched_ops.bat_tensor((s + k * st).astype(np.int32), tl.int32)
        if trips.max(initial=0) > 0:
            self.last = last
        self._restore()

    def _compacted(self, trips: np.ndarray, last: np.ndarray, s: np.ndarray, st: np.ndarray, uniform_start: bool):
        """The iterations of a divergent loop whose finished programs leave the batch (see :mod:`.compact`)."""
        start, _, step = self.bounds
        c = self.compaction = Compaction(self.builder, trips, last)
        self.builder.launch.record.masked_loops += 1
        for k in range(int(trips.max(initial=0))):
            going = trips[c.cur] > k
            if not going.all():
                c.enter(c.cur[going])
                self.narrowing = True
            if uniform_start:
                yield _int(start) + k * _int(step)
            else:
                run = c.cur if c.pending is None else c.pending
                yield batched_ops.bat_tensor((s[run] + k * st[run]).astype(np.int32), tl.int32)
        c.leave()


class _While(_Loop):
    """The condition of a ``while`` over a batch: plain truth while every active program agrees,
    else an active mask that only shrinks (a program that left the loop stays out)."""

    iterated = False  # the condition was tested before

    def test(self, cond) -> bool:
        _taint.observe_tensor(cond, "loop condition")
        b = self.builder
        if b is None:
            return bool(cond)
        if getattr(b, "probing", False) and self.iterated:  # the engine's probe: one iteration
            self._restore()
            self.act = None
            return False
        self.iterated = True
        values = _per_program(cond, b.P) if isinstance(cond, tl.tensor) else None
        if self.act is None:  # not diverged yet
            if values is None:
                go = bool(cond)
                if not go:
                    self._restore()
                return go
            live = values != 0 if self.outer is None else (values != 0) & self.outer
            ref = live if self.outer is None else live[self.outer]
            if ref.shape[0] == 0 or ref.all() or not ref.any():
                go = bool(ref.shape[0]) and bool(ref[0])
                if not go:
                    self._restore()
                return go
            self._set(live)
            return True
        act = self.act & (values != 0) if values is not None else (self.act if bool(cond) else self.act & False)
        if not act.any():
            self._restore()
            self.act = None
            return False
        self._set(act)
        return True


#: bytes: what one iteration of a loop costs in Python (the interpreter's calls, the builder's
#: checks), in terms of the numpy work of programs whose largest value takes that many bytes.
#: Measured on the CPU machine (2 cores, 2026-11-24) with causal attention forward (64x64 blocks, 32
#: KiB a program; grid (seq / 64, 8 heads), 4 MiB batches): 128 KiB (4 programs) ran a warm launch of
#: 8 x 1024 x 64 fp32 in 0.16 s and of 8 x 512 in 0.056-0.060 s, against 0.22 s and 0.066 s when never
#: split; 32 KiB was slower (0.20 s), 512 KiB as fast on 8 x 1024, slower on 8 x 512.
LOOP_OVERHEAD_BYTES = 128 << 10
#: a batch is split by trip count only where that saves at least this part of the loop's work
MIN_SAVING = 0.15
#: distinct trip counts the partition is sought over (more are binned by quantile first): the search
#: is quadratic in them
MAX_CANDIDATES = 64


def split_by_trips(trips: np.ndarray, program_bytes: float) -> Optional[np.ndarray]:
    """Groups of a batch's programs by the trip count of a loop they diverge in (``trips``: int64
    ``(P,)``), or None where running them as one batch is no dearer.

    A batch runs the loop for its longest trip count, every program masked in each iteration; a group
    of programs with close trip counts wastes less. The cost of a group is modelled as ``(R + n) *
    t`` for ``n`` programs of at most ``t`` trips, ``R`` the per-iteration Python cost in programs'
    work (:data:`LOOP_OVERHEAD_BYTES` / ``program_bytes``, the batch's largest value per program).
    The partition of the sorted trip counts with the least cost is found exactly (dynamic
    programming over the distinct counts, or over :data:`MAX_CANDIDATES` quantile bins of them
    where there are more); it is taken where it saves :data:`MIN_SAVING` of the
    whole batch's cost. Returns each program's group number (int64 ``(P,)``, groups in the order of
    their trip counts)."""
    values, counts = np.unique(trips, return_counts=True)
    k = values.shape[0]
    if k < 2 or values[-1] <= 0:
        return None
    r = LOOP_OVERHEAD_BYTES / max(1.0, program_bytes)
    cum = np.concatenate([[0], np.cumsum(counts)])
    if k > MAX_CANDIDATES:  # many distinct counts: the partition is sought among quantile bins of them
        cuts = np.unique(np.searchsorted(cum[1:], np.linspace(cum[-1] / MAX_CANDIDATES, cum[-1], MAX_CANDIDATES)))
        values = values[cuts]
        cum = np.concatenate([[0], cum[1:][cuts]])
        k = values.shape[0]
    best = [0.0] + [float("inf")] * k
    cut = [0] * (k + 1)
    for j in range(1, k + 1):
        t = float(values[j - 1])
        for i in range(j):
            c = best[i] + (r + float(cum[j] - cum[i])) * t
            if c < best[j]:
                best[j], cut[j] = c, i
    if best[k] > (1.0 - MIN_SAVING) * (r + float(cum[k])) * float(values[-1]):
        return None
    tops, j = [], k
    while j > 0:
        tops.append(values[j - 1])
        j = cut[j]
    return np.searchsorted(np.array(sorted(tops)), trips).astype(np.int64)


class _If(_Loop):
    """An ``if`` over a batch (the rewrite's ``branch(test)``): plain truth when every running
    program takes the same branch, else each branch runs once for the batch with the programs that
    take it active, as a GPU runs a branch that diverges within a warp (their stores, loads and
    asserts masked to them, the variables a branch assigns merged as a masked loop's)."""

    def __init__(self, cond, in_loop: bool = False) -> None:
        super().__init__()
        self.take: Optional[np.ndarray] = None  # bool (P,): the programs that take the ``if`` branch
        self.truth = True
        b = self.builder
        if b is None or not isinstance(cond, tl.tensor) or not batched_ops.is_batched(cond.handle):
            self.truth = bool(cond)
            return
        read_data()
        d = np.asarray(cond.handle.data)
        col = d.reshape(d.shape[0], -1)
        if col.shape[1] != 1 or col.shape[0] != b.P:  # a block: its truth as ``tensor_bool`` gives it
            self.truth = bool(cond)
            return
        col = col[:, 0] != 0
        live = col if self.outer is None or self.outer.shape[0] != col.shape[0] else col[self.outer]
        if live.shape[0] == 0 or live.all() or not live.any():
            self.truth = bool(live[0]) if live.shape[0] else bool(col[0])
            return
        self.take = col
        if not in_loop and b.work < MASK_AFTER_BYTES * b.P:  # an early ``if``: a group per branch
            raise self.split()

    def enter(self, taken: bool) -> bool:
        """Whether the ``if`` (``taken``) or ``else`` branch runs: for a divergent batch both do,
        each with its programs active."""
        if self.take is None:
            return self.truth if taken else not self.truth
        self._set(self.take if taken else ~self.take, "masked_branches")
        return True

    def split(self) -> Divergence:
        """The :class:`Divergence` that splits the batch by branch (the programs the enclosing mask
        stopped go along with a running one)."""
        values = self.take.astype(np.int64)
        if self.outer is not None and self.outer.shape == values.shape and self.outer.any():
            values[~self.outer] = values[self.outer][0]
        return Divergence(values)

    def merge(self, new, old):
        """:meth:`_Loop.merge`; values the branches cannot merge (blocks of other shapes, which Triton
        allows only for a name not used after the ``if``) split the batch by branch instead.

        Raises:
            Divergence: the two values do not merge.
        """
        try:
            return super().merge(new, old)
        except (ValueError, TypeError):
            if self.take is None:
                raise
            raise self.split() from None

    def leave(self) -> None:
        """The end of a branch: the programs active before the ``if`` run on."""
        if self.take is not None:
            self._restore()


def if_exp(cond, then, orelse):
    """A kernel's conditional expression ``a if cond else b`` (``then``, ``orelse``: thunks of ``a``
    and ``b``) over a batch, as Triton's compiler runs it: each program evaluates only its own
    operand. Where ``cond`` differs between the batch's programs, each operand is evaluated once for
    the batch with its programs active (loads, stores and asserts masked to them) and the two are
    joined with ``tl.where``; otherwise Python's evaluation of the one taken.

    Raises:
        Divergence: operands that cannot be joined (of other shapes): the batch splits.
    """
    branch = _If(cond, in_loop=True)  # an expression: masked, never a split for its own sake
    if branch.take is None:
        return then() if branch.truth else orelse()
    values = []
    for taken, thunk in ((True, then), (False, orelse)):
        branch.enter(taken)
        try:
            values.append(thunk())
        finally:
            branch.leave()
    try:
        return tl.where(batched_ops.bat_tensor(branch.take, tl.int1), values[0], values[1])
    except (ValueError, TypeError):
        raise branch.split() from None


#: bytes per program: a divergent ``if`` outside loops splits the batch into a group per branch
#: where the batch's execution made fewer bytes of per-program values than this before it, per
#: program (an early ``if pid >= n: return``, cross entropy's ignored rows after a few scalar
#: offsets: each group runs only its own branch, unmasked, and re-runs little), and runs masked
#: where it made more (block work: a split would re-run it, and pay each group's own costs). An
#: ``if`` inside a loop always runs masked (split, each iteration could split the groups again).
#: Measured on the CPU machine (2 cores, 2026-11-27) with ``benchmarks/check_branches.py``: masking
#: the early ``if`` of a data-bound launch was up to 4x slower than splitting it, splitting a late
#: one up to 2.5x slower than masking it.
MASK_AFTER_BYTES = 256


def branch(cond, in_loop: bool = False) -> _If:
    """The rewritten ``if cond:`` statement's state (see :class:`_If`; ``cond``: a Python value, a
    constexpr or a kernel scalar, int1 or any dtype compared with 0, one per program under the
    batched engine; ``in_loop``: the ``if`` is inside a loop of the function).

    Raises:
        Divergence: ``cond`` differs between the running programs of a batch, the ``if`` is outside
            loops and the batch made less than :data:`MASK_AFTER_BYTES` per program before it.
    """
    _taint.observe_tensor(cond, "branch condition")
    return _If(cond, in_loop)


def loop_range(*args, **kwargs) -> _Range:
    """The rewritten ``range(...)``/``tl.range(...)`` of a loop (keyword arguments other than
    ``step``, such as ``num_stages``, are ignored as the interpreter ignores them). Its bounds are
    Python ints, constexprs or scalar kernel values (int32/int64, ``(P,)`` under the batched engine);
    iterating yields Python ints, or an int32 ``(P,)`` kernel value when the start or step differs
    between programs.

    Raises (while iterated):
        ValueError: a step of zero in some program.
        TypeError: a bound that is a block, not a scalar.
    """
    for v in args:
        _taint.observe_tensor(v, "loop bound")
    return _Range(*args, **kwargs)


def loop_while() -> _While:
    """The rewritten ``while`` loop's state (its condition goes through ``test``)."""
    return _While()


def builtin_minmax(fn, *args, **kwargs):
    """A kernel's call of ``min``/``max`` (``fn``: what the name means where it is called), as
    Triton's compiler runs it: with a kernel value among two or more arguments, the builtin is
    ``tl.minimum``/``tl.maximum`` over them in order (Triton's ``builtin_min``/``builtin_max``:
    arguments promoted to one dtype, NaN not propagated). Python's own ``min`` would compare the
    values and return one of them unconverted, and under the batched engine make the batch's
    programs diverge where they compare differently (``row_end = min(row_start + n, n_rows)``).
    Anything else (constexprs, Python values, an iterable, ``key=``, a name the kernel rebinds)
    is ``fn(*args, **kwargs)``."""
    if (fn is min or fn is max) and len(args) >= 2 and not kwargs and any(isinstance(a, _VALUE) for a in args):
        op = tl.minimum if fn is min else tl.maximum  # looked up now: the interpreter patches them
        out = args[0]
        for a in args[1:]:
            out = op(out, a)
        return out
    return fn(*args, **kwargs)


_VALUE = getattr(tl.core, "base_value", tl.tensor)  # a kernel value (not a constexpr, not Python's)


def _dynamic(v) -> bool:
    """Whether ``v`` is a kernel value Triton's compiler does not fold (not a constexpr, not a tuple)."""
    return isinstance(v, _VALUE) and not isinstance(v, (tl.constexpr, getattr(tl.core, "tuple", ())))


def _int1(v):
    return v if v.dtype == tl.int1 else v != 0


def boolean(is_and: bool, *thunks):
    """A kernel's ``a and b ...`` (``is_and``) or ``a or b ...``, each operand a thunk, as Triton's
    compiler evaluates it: operands in order, a constexpr or Python operand short-circuits as in
    Python (``False`` for ``and``, ``True`` for ``or``: returned) or drops out; the kernel values
    left are combined with ``&``/``|`` as int1 (every one evaluated: no short-circuit on a kernel
    value). None left: the last operand. Python's ``and`` would take the truth of a kernel value in
    each program, which splits a batch whose programs disagree."""
    kept = []
    v = None
    for thunk in thunks:
        v = thunk()
        if not _dynamic(v):
            truth = bool(v)
            if truth is not is_and:
                return v
            continue
        kept.append(v)
    if not kept:
        return v
    out = _int1(kept[-1])
    for other in reversed(kept[:-1]):
        out = (_int1(other) & out) if is_and else (_int1(other) | out)
    return out


def logical_not(v):
    """A kernel's ``not v``: for a kernel value, ``v == 0`` (int1), as Triton's compiler has it;
    Python's ``not`` otherwise."""
    if _dynamic(v):
        return v == 0
    return not v
