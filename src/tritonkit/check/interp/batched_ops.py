"""Reductions, scans and Python control flow over a batch of programs (the batched engine).

Values with a program axis (``handle.bat``) hold ``(P,) + block`` numpy arrays. ``tl.reduce`` and
``tl.associative_scan`` apply per program along the block axis + 1 (:class:`BatchedReduce`,
:class:`BatchedScan`); ``if``/``while``/``range`` on a batched scalar need one value for the whole
batch (:func:`tensor_bool`, :func:`tensor_index`), or raise :class:`~tritonkit.check.errors.Divergence`.
"""
from __future__ import annotations

import threading

import numpy as np
import triton.language as tl
from triton.runtime import interpreter as _interp

from ..errors import Divergence
from . import taint as _taint
from .builder import np_dtype_of
from .recipes import read_data

TensorHandle = _interp.TensorHandle


def is_batched(h) -> bool:
    """Whether the handle ``h`` holds a value with the batched engine's program axis first."""
    return getattr(h, "bat", False)


# --- reductions and scans over a batch --------------------------------------------------------------
def bat_tensor(data: np.ndarray, dtype) -> tl.tensor:
    """A ``tl.tensor`` of Triton type ``dtype`` (its scalar type is taken) with the program axis:
    ``data`` is ``(P,) + block`` (``(P,)`` for a scalar)."""
    h = TensorHandle(data, dtype.scalar)
    h.bat = True
    block = tuple(data.shape[1:])
    return tl.tensor(h, tl.block_type(dtype.scalar, list(block)) if block else dtype.scalar)


def _batch_size(items) -> int:
    return next(t.handle.data.shape[0] for t in items if is_batched(t.handle))


def _data(t: tl.tensor, P: int) -> np.ndarray:
    """``t``'s data with the program axis (broadcast when uniform)."""
    d = t.handle.data
    if is_batched(t.handle):
        block = tuple(t.type.shape) if t.type.is_block() else ()
        return d.reshape((P,) + block) if d.shape[1:] != block else d
    block = tuple(t.type.shape) if t.type.is_block() else ()
    return np.broadcast_to(d.reshape(block), (P,) + block)


class _BatchedOps:
    """What ``tl.reduce`` and ``tl.associative_scan`` share under the batched engine: a single
    tensor made a tuple, inputs without a program axis left to Triton's interpreter, and the
    batch's size found for :meth:`_apply_batched` (``(P,) + block`` arrays)."""

    def apply(self, input):
        if not isinstance(input, tuple):
            return self.apply((input,))[0]
        if not any(is_batched(t.handle) for t in input if isinstance(t, tl.tensor)):
            return super().apply(input)
        self.check_tensor(input)
        return self._apply_batched(input, _batch_size(input))


class BatchedReduce(_BatchedOps, _interp.ReduceOps):
    """``tl.reduce`` over tensors with a program axis: per program, along the block axis + 1."""

    def _apply_batched(self, input, P: int):
        first = input[0]
        shape = tuple(first.type.shape) if first.type.is_block() else ()
        datas = [_data(t, P) for t in input]
        axis = self.axis
        if axis is None:
            datas = [d.reshape(P, -1) for d in datas]
            ax = 1
        else:
            ax = (axis if axis >= 0 else axis + len(shape)) + 1
        fn = self.combine_fn
        std = tl.standard
        if fn in (getattr(std, "_argmin_combine_tie_break_left", None), getattr(std, "_argmin_combine_tie_break_fast", None)):
            outs = [(np.nanmin(datas[0], axis=ax), first.dtype), (np.nanargmin(datas[0], axis=ax), tl.int32)]
        elif fn in (getattr(std, "_argmax_combine_tie_break_left", None), getattr(std, "_argmax_combine_tie_break_fast", None)):
            outs = [(np.nanmax(datas[0], axis=ax), first.dtype), (np.nanargmax(datas[0], axis=ax), tl.int32)]
        elif fn is std._elementwise_max:
            outs = [(np.nanmax(datas[0], axis=ax), first.dtype)]
        elif fn is std._elementwise_min:
            outs = [(np.nanmin(datas[0], axis=ax), first.dtype)]
        elif fn is std._sum_combine:
            outs = [(np.sum(datas[0], axis=ax), first.dtype)]
        else:
            outs = self._generic(input, datas, ax)
        ret = []
        for data, dtype in outs:
            if self.keep_dims:
                if axis is not None:
                    data = np.expand_dims(data, ax)
                else:
                    data = data.reshape((P,) + (1,) * len(shape))
            data = np.asarray(data).astype(np_dtype_of(dtype.scalar))
            ret.append(bat_tensor(data, dtype))
        return tuple(ret)

    def _generic(self, input, datas, ax):
        """A user combine function, applied along the axis in order (like the interpreter), to all
        programs and all other lanes at once."""
        acc = _combine_along(self.combine_fn, input, datas, ax)
        return [(a.handle.data, t.dtype) for a, t in zip(acc, input)]


class BatchedScan(_BatchedOps, _interp.ScanOps):
    """``tl.associative_scan`` over tensors with a program axis."""

    def _apply_batched(self, input, P: int):
        shape = tuple(input[0].type.shape)
        ax = (self.axis if self.axis >= 0 else self.axis + len(shape)) + 1
        datas = [_data(t, P) for t in input]
        if self.reverse:
            datas = [np.flip(d, axis=ax) for d in datas]
        fn = self.combine_fn
        if fn == tl.standard._sum_combine:
            outs = [np.cumsum(datas[0], axis=ax)]
        elif fn == tl.standard._prod_combine:
            outs = [np.cumprod(datas[0], axis=ax)]
        else:
            outs = self._generic(input, datas, ax)
        ret = []
        for data, t in zip(outs, input):
            if self.reverse:
                data = np.flip(data, axis=ax)
            ret.append(bat_tensor(np.ascontiguousarray(data).astype(np_dtype_of(t.dtype.scalar)), t.dtype))
        return tuple(ret)

    def _generic(self, input, datas, ax):
        outs = [np.empty(d.shape, dtype=d.dtype) for d in datas]

        def keep(i, acc):
            for o, a in zip(outs, acc):
                _put(o, ax, i, a.handle.data)
        _combine_along(self.combine_fn, input, datas, ax, keep)
        return outs


def _combine_along(combine_fn, input, datas, ax: int, each=None):
    """Fold ``combine_fn`` along axis ``ax`` of ``datas`` (one array per operand, program axis first)
    in order, for all programs and other lanes at once; ``each(i, acc)`` sees every partial result.
    Returns the final accumulators (batched tensors)."""
    acc = [bat_tensor(np.take(d, 0, axis=ax), t.dtype) for d, t in zip(datas, input)]
    if each is not None:
        each(0, acc)
    for i in range(1, datas[0].shape[ax]):
        cur = [bat_tensor(np.take(d, i, axis=ax), t.dtype) for d, t in zip(datas, input)]
        res = combine_fn.fn(*acc, *cur)
        res = res if isinstance(res, tuple) else (res,)
        acc = [_as_batch(r, a) for r, a in zip(res, acc)]
        if each is not None:
            each(i, acc)
    return acc


def _put(out: np.ndarray, ax: int, i: int, val: np.ndarray) -> None:
    idx = [slice(None)] * out.ndim
    idx[ax] = i
    out[tuple(idx)] = val


def _as_batch(r, like: tl.tensor) -> tl.tensor:
    """A combine function's result as a batched tensor of ``like``'s shape (constants broadcast)."""
    if not isinstance(r, tl.tensor):
        r = tl.tensor(TensorHandle(np.array([r]), like.dtype.scalar), like.dtype)
    d = r.handle.data
    want = like.handle.data.shape
    if d.shape != want:
        d = np.broadcast_to(d.reshape(d.shape + (1,) * (len(want) - d.ndim)) if is_batched(r.handle) else d, want)
    return bat_tensor(np.asarray(d, dtype=like.handle.data.dtype) if d.dtype != like.handle.data.dtype and
                       like.dtype.scalar.is_floating() and d.dtype.kind == "f" else d, r.dtype)


# --- Python control flow on batched values -----------------------------------------------------------
def _uniform(self):
    """The one value a batched scalar has in every program, or :class:`Divergence`."""
    d = self.handle.data
    col = d.reshape(d.shape[0], -1)
    if col.shape[1] != 1:
        return None  # a block: Triton allows no Python truth value of it (the interpreter says True)
    col = col[:, 0]
    act = getattr(_interp.interpreter_builder, "active", None)
    if act is not None and act.shape[0] == col.shape[0]:  # in a divergent loop: only running programs count
        live = col[act]
        if live.shape[0] == 0 or (live == live[0]).all():
            return live[0] if live.shape[0] else col[0]
        values = col.copy()
        values[~act] = live[0]  # the stopped programs go along with the first running one
        raise Divergence(values)
    if col.shape[0] and (col == col[0]).all():
        return col[0]
    raise Divergence(col.copy())


class _Depth(threading.local):
    """How deep the running thread is in Triton's front end for a load or store
    (:func:`front_end_call`). Per thread: a program that gives way inside a load (a poll) lets
    another program run in a thread of its own, whose own ``if`` must not read as the front end's."""
    n = 0


_IN_FRONT_END = _Depth()


def front_end_call(sem, name: str):
    """The method ``name`` (``load`` or ``store``) of ``sem`` (the interpreter's semantic), looked
    up on its class at each call, made to run with every kernel tensor true, as Triton's compiler has it: its ``if other`` and ``if mask`` test a value's
    presence, and a compiled ``tl.tensor`` has no ``__bool__``. Triton's interpreter gives a tensor
    of one element the truth of its value, so ``tl.load(p, mask=m, other=0)`` of a scalar (or of a
    one-element block) lost its ``other=0`` there and loaded undefined lanes the GPU fills with 0,
    and a scalar mask that differs between a batch's programs split the batch."""
    def call(*args, **kwargs):
        _IN_FRONT_END.n += 1
        try:
            return getattr(type(sem), name)(sem, *args, **kwargs)
        finally:
            _IN_FRONT_END.n -= 1
    call.__name__ = name
    return call


def tensor_bool(self) -> bool:
    """``tl.tensor.__bool__`` under the batched engine (``if``/``while`` on a kernel value); true
    inside Triton's front end for a load or store (:func:`front_end_call`).

    Raises:
        Divergence: a batched scalar whose value differs between the batch's programs.
    """
    if _IN_FRONT_END.n:
        return True
    read_data(self.handle)
    if self.handle.tainted:
        _taint.observe_tensor(self, "branch condition")
    if is_batched(self.handle):
        v = _uniform(self)
        return True if v is None else bool(v)
    data = self.handle.data
    return bool(data) if data.size == 1 else True


def tensor_index(self) -> int:
    """``tl.tensor.__index__`` under the batched engine (``range(n)`` with a kernel value).

    Raises:
        Divergence: a batched scalar whose value differs between the batch's programs.
        TypeError: a block (only a scalar can be an index).
    """
    read_data(self.handle)
    if self.handle.tainted:
        _taint.observe_tensor(self, "loop bound")
    if is_batched(self.handle):
        v = _uniform(self)
        if v is None:
            raise TypeError("only a scalar can be used as an index, not a block")
        return int(v)
    data = np.asarray(self.handle.data)
    if data.size != 1:
        raise TypeError(f"only a scalar can be used as an index, not a block of shape {data.shape}")
    return int(data.reshape(-1)[0])


def tensor_transpose(self) -> tl.tensor:
    """``x.T``: the last two block axes swapped (the program axis stays first)."""
    h = TensorHandle(np.swapaxes(self.handle.data, -1, -2), self.handle.dtype)
    h.bat = is_batched(self.handle)
    shape = list(self.type.shape)
    shape[-1], shape[-2] = shape[-2], shape[-1]
    return tl.tensor(h, tl.block_type(self.dtype, shape))
