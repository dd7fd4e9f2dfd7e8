"""Divergent ``range`` loops run with only the programs that still iterate (compaction).

A loop whose trip count differs between the programs of a batch (causal attention's key loop, a
ragged row's) runs, under the batched engine, for as many iterations as its longest program needs
(see :mod:`.simt`). Masking the finished programs off keeps every value at the batch's size and
pays every operation for programs that do nothing; splitting the batch into groups of close trip
counts pays the interpreter's per-operation Python cost once per group. Here, instead, a program
that finished its iterations *leaves* the batch: at the first iteration that runs fewer programs,
the loop switches the launch to a sub-batch of the programs that go on (``launch.batch`` and the
builder's program axis), and every local variable the loop body uses is narrowed to their rows
(:meth:`Compaction.narrow`, called by the rewritten loop's body). What a leaving program's
variables hold is kept, by rows, and after the loop the variables are widened back to the whole
batch (:meth:`Compaction.widen`): each program ends the loop with the values of its own last
iteration, as it would one program at a time.

The work of a causal attention of 8 query blocks then runs 8 loop bodies over 64, 56, ... 8
programs (288 program-iterations) instead of 8 bodies over 64 (512, masked) or about 17 bodies over
groups (328); the programs that stay are a contiguous range in the common case (trip counts that
grow with the program id), whose rows are views, not copies.

A value that cannot be narrowed or widened (a value with lane taints, a kernel object the engine
does not know that holds batched values, a Python value that differs between programs and has no
kernel type) raises :class:`CannotCompact`; the loop then asks the engine to run the batch again
as groups of equal trip counts (:class:`~tritonkit.check.errors.Divergence`), where nothing
diverges.
"""
from __future__ import annotations

import dataclasses
from typing import List, Optional, Tuple

import numpy as np
import triton.language as tl
from triton.runtime import interpreter as _interp

from ..errors import Divergence
from .addresses import LazyAddresses
from .batched_ops import bat_tensor

TensorHandle = _interp.TensorHandle
_INERT = (int, float, bool, str, bytes, type(None), tl.constexpr, tl.dtype, type)


class CannotCompact(Exception):
    """A loop variable the compaction cannot narrow or widen (the message says which kind)."""


def _sub(a: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Rows ``idx`` (int64, increasing) of ``a``'s leading axis: a view where they are a contiguous
    range or every row is the same, a broadcast of the compact rows where other axes are broadcast."""
    n = idx.shape[0]
    if a.strides[0] == 0:
        return np.broadcast_to(a[:1], (n,) + a.shape[1:])
    if n and int(idx[-1]) - int(idx[0]) + 1 == n:
        return a[int(idx[0]):int(idx[-1]) + 1]
    if any(s == 0 and d > 1 for s, d in zip(a.strides[1:], a.shape[1:])):
        compact = a[(slice(None),) + tuple(slice(None) if s or d <= 1 else slice(0, 1)
                                           for s, d in zip(a.strides[1:], a.shape[1:]))]
        return np.broadcast_to(compact[idx], (n,) + a.shape[1:])
    return a[idx]


def _operand(a: np.ndarray, nd: int, P: int, idx: np.ndarray) -> np.ndarray:
    """An operand of a :class:`LazyAddresses` (broadcastable to its ``nd``-dimensional block, the
    program axis first) narrowed to programs ``idx``: only where it has that axis."""
    if a.ndim == nd and a.shape[0] == P and P > 1:
        return _sub(a, idx)
    return a


def narrow_handle(h, idx: np.ndarray, P: int):
    """Handle ``h`` of a batch of ``P`` programs narrowed to programs ``idx`` (itself where it has
    no program axis).

    Raises:
        CannotCompact: a handle with lane taints, or of a kind this does not know that is batched.
    """
    if not isinstance(h, TensorHandle):  # a block pointer's or a descriptor's handle
        if _holds_batched(h):
            raise CannotCompact(f"a batched {type(h).__name__}")
        return h
    if not getattr(h, "bat", False):
        return h
    if getattr(h, "tainted", False):
        raise CannotCompact("a value with lane taints")
    if isinstance(h, LazyAddresses) and h._addrs is None:
        nd = len(h.offsets.shape)
        n = LazyAddresses(_operand(np.asarray(h.base), nd, P, idx), _operand(h.offsets, nd, P, idx), h.size, h.dtype)
    else:
        data = h.data
        if data.shape[0] != P:
            raise CannotCompact("a value of another batch")
        n = TensorHandle(_sub(data, idx), h.dtype)
    n.bat = True
    n.attr = h.attr
    if getattr(h, "fmul", None) is not None:  # a product the loop may still contract with an add
        n.fmul = (narrow_handle(h.fmul[0], idx, P), narrow_handle(h.fmul[1], idx, P))
    return n


def _holds_batched(v, depth: int = 3) -> bool:
    """Whether object ``v`` holds a handle with the program axis in its attributes, or theirs, or in
    lists and tuples of them (to ``depth`` levels: a descriptor's handle's base and shape)."""
    if isinstance(v, TensorHandle):
        return bool(getattr(v, "bat", False))
    if isinstance(v, tl.tensor):
        return _holds_batched(v.handle, depth)
    if depth == 0 or isinstance(v, (np.ndarray, str, bytes, int, float, type(None))):
        return False
    if isinstance(v, tl.tuple):  # (its attribute lookup raises ValueError for a name it lacks)
        items = v.values
    elif isinstance(v, (list, tuple)):
        items = v
    else:
        items = getattr(v, "__dict__", {}).values()
    return any(_holds_batched(x, depth - 1) for x in items)


def narrow_value(v, idx: np.ndarray, P: int):
    """A kernel variable's value narrowed to programs ``idx`` of a batch of ``P`` (see
    :func:`narrow_handle`); tuples, lists and ``tl.tuple`` element by element, other values as they are.

    Raises:
        CannotCompact: see :func:`narrow_handle`; an object of another kind that holds batched values.
    """
    if isinstance(v, tl.tensor):
        h = narrow_handle(v.handle, idx, P)
        return v if h is v.handle else tl.tensor(h, v.type)
    if isinstance(v, _INERT) or v is UNSET:
        return v
    if type(v) in (tuple, list):
        out = [narrow_value(x, idx, P) for x in v]
        return v if all(a is b for a, b in zip(out, v)) else type(v)(out)
    if isinstance(v, tl.tuple):
        out = [narrow_value(x, idx, P) for x in v.values]
        return v if all(a is b for a, b in zip(out, v.values)) else tl.tuple(out, v.type)
    if _holds_batched(v):
        raise CannotCompact(f"a batched {type(v).__name__}")
    return v


UNSET = object()  # a variable not bound (yet): simt.UNSET is this object


def _block_of(t: tl.tensor) -> tuple:
    ty = t.type
    return tuple(int(d) for d in ty.shape) if isinstance(ty, tl.block_type) else ()


def build(pieces: List[Tuple[np.ndarray, object]], P: int):
    """One value of a batch of ``P`` programs from ``pieces``: ``(programs, value)`` pairs that
    cover the batch once (``value`` narrowed to ``programs``, int64 indices; :data:`UNSET` for
    programs where the variable was never bound, whose rows are zeros).

    Raises:
        CannotCompact: pieces of different kinds or types, or objects that differ and have no
            kernel type to hold them.
    """
    vals = [v for _, v in pieces if v is not UNSET]
    if not vals:
        return UNSET
    first = vals[0]
    if all(v is first for v in vals) and not (isinstance(first, tl.tensor) and getattr(first.handle, "bat", False)):
        return first  # one uniform value
    tensor = next((v for v in vals if isinstance(v, tl.tensor)), None)
    if tensor is not None:  # (a Python number before the loop, a kernel value after an iteration: 0.0 + x)
        return _build_tensor(pieces, tensor, P)
    if isinstance(first, (tl.constexpr, int, float)):
        return _build_scalar(pieces, vals, P)
    if isinstance(first, (tuple, list, tl.tuple)):
        items = [v.values if isinstance(v, tl.tuple) else v for v in vals]
        n = len(items[0])
        if any(type(v) is not type(first) or len(it) != n for v, it in zip(vals, items)):
            raise CannotCompact("tuples of different lengths")
        parts = [build([(idx, UNSET if v is UNSET else (v.values if isinstance(v, tl.tuple) else v)[i])
                        for idx, v in pieces], P) for i in range(n)]
        return tl.tuple(parts) if isinstance(first, tl.tuple) else type(first)(parts)
    if all(v is first or v == first for v in vals):
        return first
    raise CannotCompact(f"{type(first).__name__} values that differ between programs")


def _build_tensor(pieces, first: tl.tensor, P: int) -> tl.tensor:
    block = _block_of(first)
    dtype = None
    numbers = False
    for _, v in pieces:
        if v is UNSET:
            continue
        if isinstance(_number(v), (int, float)):
            numbers = True
            continue
        if not isinstance(v, tl.tensor) or v.type != first.type or v.handle.dtype != first.handle.dtype:
            raise CannotCompact("a variable whose type changes in the loop")
        if getattr(v.handle, "tainted", False):
            raise CannotCompact("a value with lane taints")
        if not isinstance(v.handle, TensorHandle):
            raise CannotCompact(f"a {type(v.handle).__name__} assigned in the loop")
        d = v.handle.data.dtype
        if dtype is None:
            dtype = d
        elif d != dtype:
            raise CannotCompact("a variable whose type changes in the loop")
    if numbers and (dtype.kind == "u" and first.type.scalar.is_floating() or first.type.scalar.is_ptr()):
        raise CannotCompact("a Python number and a kernel value held as bits")  # (bf16, fp8; pointers)
    out = np.zeros((P,) + block, dtype=dtype)
    for idx, v in pieces:
        if v is UNSET or idx.shape[0] == 0:
            continue
        if not isinstance(v, tl.tensor):
            out[idx] = _number(v)
            continue
        d = v.handle.data
        n = idx.shape[0]
        if getattr(v.handle, "bat", False):
            out[idx] = d.reshape((n,) + block)
        else:
            out[idx] = np.broadcast_to(d.reshape(block), (n,) + block)
    return bat_tensor(out, first.type.scalar if block else first.type)


def _number(v):
    """A Python number, or a constexpr's; anything else as it is."""
    return v.value if isinstance(v, tl.constexpr) else v


def _build_scalar(pieces, vals, P: int):
    raw = [_number(v) for v in vals]
    if all(r == raw[0] and type(r) is type(raw[0]) for r in raw):
        return vals[0]
    if any(not isinstance(r, (int, float, bool)) for r in raw):
        raise CannotCompact("constexpr values that differ between programs")
    if all(isinstance(r, bool) for r in raw):
        np_dtype, ty = np.bool_, tl.int1
    elif all(isinstance(r, int) for r in raw):
        wide = any(not -2**31 <= r < 2**31 for r in raw)
        np_dtype, ty = (np.int64, tl.int64) if wide else (np.int32, tl.int32)
    else:
        np_dtype, ty = np.float32, tl.float32
    out = np.zeros(P, dtype=np_dtype)
    for idx, v in pieces:
        if v is not UNSET:
            out[idx] = _number(v)
    return bat_tensor(out, ty)


class _Slot:
    """One variable of a compacted loop: its value before the loop, the value handed out at the last
    narrowing, and, once the body assigned it, the rows of the programs that left."""

    __slots__ = ("orig", "last", "pieces")

    def __init__(self, orig) -> None:
        self.orig = orig
        self.last = orig
        self.pieces: Optional[list] = None  # None while the variable still holds (a narrowing of) orig

    def step(self, v, cur: np.ndarray, rel: np.ndarray, dropped: np.ndarray, P: int, dead: bool):
        """The variable's value ``v`` (for programs ``cur``) at a narrowing to ``cur[rel]``: the
        rows of ``cur[dropped]`` kept where the body assigned it; its value for the programs that stay."""
        n = cur.shape[0]
        if v is not self.last and self.pieces is None:  # assigned since: the earlier leavers had orig
            self._begin(cur, P)
        if self.pieces is not None and dropped.shape[0]:
            self.pieces.append((cur[dropped], narrow_value(v, dropped, n)))
        self.last = v if dead or v is UNSET else narrow_value(v, rel, n)
        return self.last

    def _begin(self, cur: np.ndarray, P: int) -> None:
        self.pieces = []
        if self.orig is not UNSET:
            gone = np.setdiff1d(np.arange(P, dtype=np.int64), cur, assume_unique=True)
            if gone.shape[0]:
                self.pieces.append((gone, narrow_value(self.orig, gone, P)))

    def finish(self, v, cur: np.ndarray, P: int):
        """The variable's value for the whole batch after the loop (``v``: its value for ``cur``)."""
        if v is self.last and self.pieces is None:
            return self.orig
        if self.pieces is None:
            self._begin(cur, P)
        self.pieces.append((cur, v))
        return build(self.pieces, P)


def last_index(target, last: Optional[np.ndarray]):
    """A divergent loop's index after it: ``last`` (each program's last value, int64 ``(P,)``) as an
    int32 kernel value (int64 where a value does not fit), where the index is a kernel value or a
    Python int; ``target`` as it is otherwise (``last`` None, a tuple target)."""
    if last is None or not isinstance(target, (tl.tensor, int)) or isinstance(target, bool):
        return target
    wide = last.size and not (-2**31 <= int(last.min()) and int(last.max()) < 2**31)
    return bat_tensor(last.astype(np.int64 if wide else np.int32), tl.int64 if wide else tl.int32)


class Compaction:
    """The state of one compacted loop over a batch (see the module).

    Args:
        builder: the running :class:`~.batched.BatchedBuilder`; its launch's batch is the loop's.
        trips: each program's trip count (int64 ``(P,)``).
        last: each program's last value of the loop index (int64 ``(P,)``; a program with no
            iteration: the start).
    """

    def __init__(self, builder, trips: np.ndarray, last: np.ndarray) -> None:
        self.builder = builder
        self.last = last
        self.launch = builder.launch
        self.batch = self.launch.batch  # the loop's batch, restored after it
        self.trips = trips
        self.P = int(trips.shape[0])
        self.cur = np.arange(self.P, dtype=np.int64)  # the programs that run now (into the loop's batch)
        self.pending: Optional[np.ndarray] = None  # the programs of the next iteration, to narrow to
        self.slots: Optional[List[_Slot]] = None
        self.narrowed = False  # whether the body narrowed its variables at least once

    def enter(self, idx: np.ndarray) -> None:
        """Run the programs ``idx`` (int64, increasing, a subset of the running ones) from now on:
        the launch's batch and the builder's program axis become theirs; the loop body narrows
        its variables next (:meth:`narrow`)."""
        b = self.batch
        self.launch.batch = dataclasses.replace(b, order=b.order[idx], pids=b.pids[idx],
                                                coords=tuple(c[idx] for c in b.coords))
        self.builder.set_batch(self.launch.batch.pids, self.launch.batch.coords)
        self.pending = idx

    def leave(self) -> None:
        """The loop's own batch again (after its last iteration, or to give up)."""
        b = self.batch
        self.launch.batch = b
        self.builder.set_batch(b.pids, b.coords)

    def narrow(self, values: tuple, dead: tuple) -> tuple:
        """The loop variables' ``values`` (for the programs that ran the last iteration) for the
        programs that run the next one; ``dead[i]``: variable ``i`` is assigned before it is read in
        the body (its rows are kept, not narrowed).

        Raises:
            Divergence: a variable that cannot be narrowed (:class:`CannotCompact`): the engine runs
                the batch again as groups of equal trip counts.
        """
        cur, idx = self.cur, self.pending
        rel = np.searchsorted(cur, idx)
        keep = np.ones(cur.shape[0], dtype=bool)
        keep[rel] = False
        dropped = np.flatnonzero(keep)
        try:
            if self.slots is None:
                self.slots = [_Slot(v) for v in values]
            out = tuple(s.step(v, cur, rel, dropped, self.P, d) for s, v, d in zip(self.slots, values, dead))
        except CannotCompact:
            self._give_up()
        self.cur, self.pending, self.narrowed = idx, None, True
        return out

    def widen(self, values: tuple, target) -> Tuple[tuple, object]:
        """The loop variables for the whole loop batch after the loop (``values``: for the programs
        of the last iteration), and the loop target's: each program's own last value (an int32
        kernel value, int64 where one does not fit; a program that ran no iteration gets the
        start), where one program at a time it would differ between programs.

        Raises:
            Divergence: see :meth:`narrow`.
        """
        target = last_index(target, self.last)
        try:
            return tuple(s.finish(v, self.cur, self.P) for s, v in zip(self.slots, values)), target
        except CannotCompact:
            self._give_up()

    def _give_up(self):
        self.leave()
        raise Divergence(self.trips.copy())
