"""The batched engine: one execution of a kernel's body for a whole batch of programs.

Triton's interpreter (and tritonkit's sequential engine) calls a kernel's Python body once per
program, so a launch of 4,096 programs pays the interpreter's per-operation overhead 4,096 times.
Here the body runs once for a batch of ``P`` programs: every value that depends on the program id
carries a leading program axis (a block of shape ``(B0, B1)`` is held as ``(P, B0, B1)``, a scalar
as ``(P,)``; the handle's ``bat`` flag says so) and values that do not (``tl.arange``, constants,
pointers to arguments) stay as they are and broadcast. Triton's own front end still does type
promotion and broadcasting on the *block* types, which never see the program axis; only the
builder underneath changes:

* ``tl.program_id`` yields the batch's ids; ops that name an axis (reductions, scans,
  ``expand_dims``, ``broadcast``, ``reshape``, ``trans``, ``cat``, ``gather``, ...) shift it by one;
  ``tl.dot`` is a batched matmul;
* loads, stores and atomics become gathers and scatters over the whole batch, checked by the same
  checks as one program at a time (each check splits its findings per program);
* Python control flow (``if``, ``while``, ``range``) on a value that differs between the batch's
  programs raises :class:`~tritonkit.check.errors.Divergence` (see :mod:`.batched_ops`): the engine
  undoes what the batch did and runs each group of programs that agree as its own batch (see
  :mod:`tritonkit.check.engine.batched`).

What this builder cannot do raises :class:`~tritonkit.check.errors.Unbatchable`, and the launch falls
back to one program at a time.
"""
from __future__ import annotations

import math
from typing import Optional

import numpy as np
import triton.language as tl
from triton.runtime import interpreter as _interp

from ..errors import Unbatchable
from . import taint as _taint
from .batched_ops import is_batched
from .addresses import LazyAddresses, broadcast, shape_of, unmade
from .access import BlockShape, labelled
from .builder import CheckedBuilder, np_dtype_of

TensorHandle = _interp.TensorHandle


def _mark(h: TensorHandle) -> TensorHandle:
    h.bat = True
    return h


def _any_batched(args) -> bool:
    """Whether any argument (a handle, or a list/tuple of them) has the program axis."""
    return any(is_batched(a) or (isinstance(a, (list, tuple)) and any(is_batched(x) for x in a)) for a in args)


def _flag(out, args):
    """Set ``out.bat`` (a handle, or a tuple of handles) when any argument is batched."""
    if _any_batched(args):
        if isinstance(out, TensorHandle):
            out.bat = True
        elif isinstance(out, tuple):
            for o in out:
                if isinstance(o, TensorHandle):
                    o.bat = True
    return out


# methods the batched builder handles itself (they know about the program axis)
_SHAPED = {"create_get_program_id", "create_splat", "create_expand_dims", "create_broadcast", "create_reshape",
           "create_trans", "create_cat", "create_join", "create_split", "create_gather", "create_histogram",
           "create_unsplat", "create_masked_load", "create_masked_store", "create_atomic_rmw", "create_atomic_cas",
           "create_descriptor_load", "create_descriptor_store", "create_descriptor_gather",
           "create_descriptor_scatter", "create_make_tensor_descriptor", "create_tensor_pointer_load",
           "create_tensor_pointer_store", "create_make_block_ptr", "create_advance", "create_dot_scaled",
           "create_atomic_poll", "binary_op", "ternary_op"}


def _mask_handle(mask):
    """A load's or store's mask as a handle: Triton 3.6's descriptor loads and stores pass a bool
    numpy array of the block's shape (no program axis)."""
    return TensorHandle(mask, tl.int1) if isinstance(mask, np.ndarray) else mask


def _with_product(h, product):
    """``h`` marked as the product ``product`` (a ``(lhs, rhs)`` pair) where it is one."""
    if product is not None and h.fmul is None:
        h.fmul = product
    return h


def _batching(fn):
    """``fn`` (a builder method that knows nothing of the program axis) with its result flagged as
    batched where an argument is, and its size seen by the memory budget."""
    def batching(self, *args, **kw):
        out = fn(self, *args, **kw)
        if isinstance(out, (TensorHandle, tuple)):
            _flag(out, args)
            if isinstance(out, TensorHandle) and out.bat:
                nbytes = out.nbytes if isinstance(out, LazyAddresses) else out.data.nbytes
                self.work += nbytes
                self._seen(nbytes)
        return out
    batching.__name__ = fn.__name__
    batching.__doc__ = fn.__doc__
    return batching


def _wrap_operations(cls) -> None:
    """Give ``cls`` each operation it inherits or defines (``create_*``, ``unary_op``, ``cast_impl``)
    that is not one of the operations that know the program axis (``_SHAPED``) as :func:`_batching`
    of it: once, at import (wrapping per builder took 0.3 ms of every launch)."""
    for name in dir(cls):
        if (name.startswith("create_") or name in ("unary_op", "cast_impl")) and name not in _SHAPED:
            fn = getattr(cls, name)
            if callable(fn):
                setattr(cls, name, _batching(fn))


class BatchedBuilder(CheckedBuilder):
    """A :class:`CheckedBuilder` that runs a batch of programs at once (see the module).

    ``set_batch(pids, coords)`` makes a batch current: ``pids`` the linear program ids (int64,
    ``(P,)``), ``coords`` their (x, y, z) ids (three int32 arrays of shape ``(P,)``). Batched
    handles hold ``(P,) + block shape`` numpy arrays (``(P,)`` for a scalar).

    Its operations raise :class:`Unbatchable` for what needs one program at a time (spin polls,
    tensor descriptors made with a base/shape/strides that differ between programs, ``tl.dot_scaled``).
    """

    _ELEMENTWISE = tuple(n for n in CheckedBuilder._ELEMENTWISE if n != "create_splat")
    #: builtins' front end is replayed from recipes (see :mod:`.recipes`)
    replays = True

    def __init__(self, launch) -> None:
        super().__init__(launch)
        self.P = 0
        self.coords = None
        self.max_bytes = 0  # the largest batched value made so far, in bytes (for the memory budget)
        self.work = 0  # bytes of the batched results the running execution of the body made (see simt._If)
        self.active: Optional[np.ndarray] = None  # bool (P,): programs a divergent loop still runs (_simt)
        self.probing = False  # the engine's probe runs: every loop stops after its first iteration

    def _seen(self, nbytes: int) -> None:
        """A batched value of ``nbytes`` bytes was made (the memory budget sizes batches by the largest)."""
        if nbytes > self.max_bytes:
            self.max_bytes = nbytes

    def set_batch(self, pids: np.ndarray, coords) -> None:
        """Make a batch current: ``pids`` its linear program ids (int64 ``(P,)``), ``coords`` their
        (x, y, z) ids (three int32 ``(P,)`` arrays)."""
        self.P = int(pids.shape[0])
        self.active = None
        self.coords = coords
        self.grid_idx = (int(coords[0][0]), int(coords[1][0]), int(coords[2][0]))

    # --- helpers -------------------------------------------------------------------------------------
    def _new(self, data, ty) -> TensorHandle:
        """A batched handle of ``data`` (program axis first) and Triton scalar type ``ty``."""
        h = TensorHandle(data, ty)
        h.bat = True
        self._seen(data.nbytes)
        return h

    def _to_batch(self, h: TensorHandle) -> TensorHandle:
        """A block operand ``h`` with the program axis: a batched handle as is, a uniform one
        broadcast (a view of shape ``(P,) + h.data.shape``)."""
        if h.bat:
            return h
        d = h.data
        shape = (self.P,) + d.shape
        out = TensorHandle(np.broadcast_to(d, shape), h.dtype)
        out.bat = True
        out.attr = h.attr
        return _taint.carry_shape(out, h, lambda u: np.broadcast_to(u, shape))

    def _full(self, *hs):
        """The operands of a memory op with the program axis, broadcast to one shape (views)."""
        shapes = [shape_of(h) for h in hs if h is not None and h.bat]
        if shapes:
            full = np.broadcast_shapes(*shapes, *(shape_of(h) for h in hs if h is not None and not h.bat))
        else:
            d = shape_of(hs[0])
            full = (self.P,) + (() if math.prod(d) == 1 and len(d) <= 1 else d)
        out = []
        for h in hs:
            if h is None:
                out.append(None)
                continue
            if h.bat and shape_of(h) == full:
                out.append(h)
                continue
            if unmade(h) and not h.tainted:  # still unmade: views of its operands
                n = broadcast(h, full)
                n.bat = True
                out.append(n)
                continue
            n = TensorHandle(np.broadcast_to(h.data, full), h.dtype)
            n.attr = h.attr
            n.bat = True
            out.append(_taint.carry_shape(n, h, lambda u: np.broadcast_to(u, full)))
        return out

    @staticmethod
    def _aligned(*hs):
        """Batched operands whose data ranks differ ((P,) vs (P, 1): a 1-element block taken for a
        scalar) reshaped to the larger rank, so that numpy does not broadcast programs against lanes."""
        bat = [h for h in hs if h is not None and h.bat]
        if len(bat) < 2:
            return hs
        nd = max(h.data.ndim for h in bat)
        out = []
        for h in hs:
            if h is not None and h.bat and h.data.ndim < nd:
                shape = h.data.shape + (1,) * (nd - h.data.ndim)
                n = TensorHandle(h.data.reshape(shape), h.dtype)
                n.bat = True
                h = _taint.carry_shape(n, h, lambda u: np.broadcast_to(u, h.data.shape).reshape(shape))
            out.append(h)
        return out

    # --- the program id ----------------------------------------------------------------------------
    def create_get_program_id(self, axis):
        ids = self.coords[axis]
        if ids[0] == ids[-1] and (ids == ids[0]).all():  # the same in every program of the batch: uniform
            return TensorHandle(np.array([ids[0]], dtype=np.int32), tl.int32)
        return self._new(ids.astype(np.int32), tl.int32)

    # --- elementwise ops with operands of different ranks ------------------------------------------
    def binary_op(self, lhs, rhs, op):
        if lhs.bat or rhs.bat:
            products = (lhs.fmul, rhs.fmul)
            lhs, rhs = self._aligned(lhs, rhs)
            if products != (lhs.fmul, rhs.fmul):  # aligned copies of products stay products
                lhs, rhs = _with_product(lhs, products[0]), _with_product(rhs, products[1])
            return _mark(super().binary_op(lhs, rhs, op))
        return super().binary_op(lhs, rhs, op)

    def ternary_op(self, lhs, rhs, other, op):
        if lhs.bat or rhs.bat or other.bat:
            lhs, rhs, other = self._aligned(lhs, rhs, other)
            return _mark(super().ternary_op(lhs, rhs, other, op))
        return super().ternary_op(lhs, rhs, other, op)

    # --- shape operations: the program axis comes first --------------------------------------------
    def create_splat(self, ret_ty, arg):
        if not arg.bat:
            out = super().create_splat(ret_ty, arg)
            return _taint.carry(out, arg) if arg.tainted else out
        shape = tuple(ret_ty.shape)
        lead = (self.P,) + (1,) * len(shape)
        full = (self.P,) + shape
        out = self._new(np.broadcast_to(arg.data.reshape(lead), full), arg.dtype.scalar)
        return _taint.carry_shape(out, arg, lambda u: np.broadcast_to(np.broadcast_to(u, arg.data.shape)
                                                                      .reshape(lead), full))

    def create_expand_dims(self, arg, axis):
        if arg.bat and axis >= 0:
            return _mark(super().create_expand_dims(arg, axis + 1))
        return _flag(super().create_expand_dims(arg, axis), (arg,))

    def create_broadcast(self, arg, shape):
        if arg.bat:
            return _mark(super().create_broadcast(arg, (arg.data.shape[0],) + tuple(shape)))
        return super().create_broadcast(arg, shape)

    def create_reshape(self, arg, shape, *rest):
        if arg.bat:
            return _mark(super().create_reshape(arg, (arg.data.shape[0],) + tuple(shape), *rest))
        return super().create_reshape(arg, shape, *rest)

    def create_trans(self, arg, perm):
        if arg.bat:
            return _mark(super().create_trans(arg, (0,) + tuple(int(p) + 1 for p in perm)))
        return super().create_trans(arg, perm)

    def create_cat(self, lhs, rhs):
        if not (lhs.bat or rhs.bat):
            return super().create_cat(lhs, rhs)
        a, b = self._to_batch(lhs), self._to_batch(rhs)
        return self._new(np.concatenate([a.data, b.data], axis=1), lhs.dtype.scalar)

    def create_join(self, lhs, rhs):
        if not (lhs.bat or rhs.bat):
            return super().create_join(lhs, rhs)
        a, b = self._full(lhs, rhs)
        return self._new(np.stack([a.data, b.data], axis=-1), lhs.dtype.scalar)

    def create_split(self, val):
        out = super().create_split(val)
        return _flag(out, (val,))

    def create_gather(self, src, indices, axis):
        if not (src.bat or indices.bat):
            return super().create_gather(src, indices, axis)
        s, i = self._to_batch(src), self._to_batch(indices)
        return self._new(np.take_along_axis(s.data, i.data, axis=axis + 1), src.dtype.scalar)

    def create_unsplat(self, arg):
        if arg.bat:
            return self._new(np.ascontiguousarray(arg.data.reshape(arg.data.shape[0], -1)[:, 0]), arg.dtype.scalar)
        return super().create_unsplat(arg)

    def create_histogram(self, data, bins, mask):
        if not (data.bat or (mask is not None and mask.bat)):
            return super().create_histogram(data, bins, mask)
        d, m = self._full(data, mask) if mask is not None else (data, None)  # no mask: data is batched
        x = d.data.reshape(self.P, -1).astype(np.int64)
        valid = (x >= 0) & (x < bins)
        if m is not None:
            valid &= m.data.reshape(self.P, -1).astype(bool)
        idx = (np.arange(self.P, dtype=np.int64)[:, None] * bins + x)[valid]
        counts = np.bincount(idx, minlength=self.P * bins).reshape(self.P, bins).astype(np.int32)
        return self._new(counts, tl.int32)

    # --- memory: every program's lanes, gathered and scattered at once ------------------------------
    def _active_mask(self, mask, full):
        """``mask`` (a handle of shape ``full``, or None) ANDed with the running divergent loop's
        active programs (see :mod:`._simt`); ``mask`` itself outside such a loop."""
        if self.active is None:
            return mask
        act = np.broadcast_to(self.active.reshape((self.P,) + (1,) * (len(full) - 1)), full)
        h = TensorHandle(act if mask is None else (np.asarray(mask.data, dtype=bool) & act), tl.int1)
        h.bat = True
        if mask is not None and mask.tainted:
            _taint.carry(h, mask)
        return h

    def create_masked_load(self, ptrs, mask, other, *rest, **kw):
        mask = _mask_handle(mask)
        if self.active is None and not any(h is not None and (h.bat or h.tainted) for h in (ptrs, mask, other)):
            out = self._uniform_load(ptrs, mask, other, *rest, **kw)
            if out is not None:
                return out
        ptrs, mask, other = self._full(ptrs, mask, other)
        mask = self._active_mask(mask, shape_of(ptrs))
        return _mark(super().create_masked_load(ptrs, mask, other, *rest, **kw))

    def _uniform_load(self, ptrs, mask, other, *rest, **kw) -> Optional[TensorHandle]:
        """A load whose addresses, mask and ``other`` are the same in every program of the batch
        (a weight vector, a bias, a shared table): made once, for the batch's first program, and its
        value stays uniform (no program axis). The engine's guard counts it as made by every program,
        so a program of the batch that writes those elements undoes the launch. When the access
        makes a finding (which each program would make), it is undone here and made per program;
        returns None then."""
        launch = self.launch
        tx = launch.tx
        if tx is None or self.P < 2:
            return None
        mark = tx.mark()
        launch.uniform_access = True
        try:
            out = CheckedBuilder.create_masked_load(self, ptrs, mask, other, *rest, **kw)
        finally:
            launch.uniform_access = False
        if not tx.reported_since(mark):
            return out
        tx.rollback_to(mark)
        return None

    def create_masked_store(self, ptrs, value, mask, *rest, **kw):
        ptrs, value, mask = self._full(ptrs, value, _mask_handle(mask))
        mask = self._active_mask(mask, shape_of(ptrs))
        return super().create_masked_store(ptrs, value, mask, *rest, **kw)

    def create_atomic_rmw(self, rmwOp, ptr, val, mask, sem, scope, *rest):
        ptr, val, mask = self._full(ptr, val, mask)
        mask = self._active_mask(mask, ptr.data.shape)
        return _mark(super().create_atomic_rmw(rmwOp, ptr, val, mask, sem, scope, *rest))

    def create_atomic_cas(self, ptr, cmp, val, sem, scope, *rest):
        if self.active is not None:
            raise Unbatchable("tl.atomic_cas in a loop whose trip count differs between programs")
        ptr, cmp, val = self._full(ptr, cmp, val)
        return _mark(super().create_atomic_cas(ptr, cmp, val, sem, scope, *rest))

    def create_atomic_poll(self, *args, **kw):
        raise Unbatchable("tl.atomic_poll (a spin on memory) needs one program at a time")

    # --- tensor descriptors and block pointers: offsets may differ per program ----------------------
    def _materialize(self, base, shape, strides, offsets, block_shape, checked, aligned16: bool):
        """Addresses (uint64, ``(P,) + block_shape``) and the in-bounds mask of a descriptor/block-pointer
        access whose base, shape, strides and offsets (scalar handles) may be batched."""
        itemsize = max(1, base.get_element_ty().primitive_bitwidth // 8)
        nd = len(block_shape)
        P = self.P
        lead = [P] + [1] * nd

        def per_program(data, dtype):  # a scalar's value, or each program's as (P, 1, ..., 1)
            a = np.asarray(data).astype(dtype).reshape(-1)
            return a.reshape(lead) if a.shape[0] > 1 else a.reshape(())
        if aligned16 and ((np.asarray(offsets[-1].data) * itemsize) % 16 != 0).any():
            raise AssertionError("block offset start must be 16-byte aligned")
        ptrs = np.broadcast_to(per_program(base.data, np.uint64), (P,) + tuple(block_shape))
        mask = np.ones((P,) + tuple(block_shape), dtype=bool)
        for dim in range(nd):
            ar = [1] * (nd + 1)
            ar[dim + 1] = block_shape[dim]
            off = per_program(offsets[dim].data, np.int64) + np.arange(block_shape[dim], dtype=np.int64).reshape(ar)
            stride = per_program(strides[dim].data, np.int64)
            ptrs = ptrs + (itemsize * off * stride).astype(np.uint64)
            if dim in checked:
                mask = mask & (off >= 0) & (off < per_program(shape[dim].data, np.int64))
        out = TensorHandle(np.ascontiguousarray(ptrs), base.dtype.scalar)
        out.bat = True
        m = TensorHandle(mask, tl.int1)
        m.bat = True
        return out, m

    def _padding(self, ptrs, padding):
        from triton._C.libtriton import ir
        ty = ptrs.get_element_ty()
        if padding is None:
            return None
        if padding == ir.PADDING_OPTION.PAD_ZERO:
            return TensorHandle(np.zeros(ptrs.data.shape, dtype=np_dtype_of(ty)), ty)
        if padding == ir.PADDING_OPTION.PAD_NAN:
            return TensorHandle(np.full(ptrs.data.shape, np.nan, dtype=np_dtype_of(ty)), ty)
        raise ValueError(f"unsupported padding {padding}")

    def create_descriptor_load(self, desc, indices, *rest, **kw):
        if not any(is_batched(i) for i in indices):
            return super().create_descriptor_load(desc, indices, *rest, **kw)
        ptrs, mask = self._materialize(desc.base, desc.shape, desc.strides, indices, desc.block_shape,
                                       range(len(desc.block_shape)), True)
        from triton._C.libtriton import ir
        other = self._padding(ptrs, getattr(desc, "padding", ir.PADDING_OPTION.PAD_ZERO))
        out = self._labelled("descriptor_load", self.create_masked_load, ptrs, mask, other)
        if getattr(desc, "round_f32_to_tf32", False) and ptrs.get_element_ty() == tl.float32:
            out = self._new(_interp._round_f32_to_tf32(out.data), tl.float32)
        return out

    def create_descriptor_store(self, desc, value, indices, *rest, **kw):
        if not any(is_batched(i) for i in indices):
            return super().create_descriptor_store(desc, value, indices, *rest, **kw)
        ptrs, mask = self._materialize(desc.base, desc.shape, desc.strides, indices, desc.block_shape,
                                       range(len(desc.block_shape)), True)
        return self._labelled("descriptor_store", self.create_masked_store, ptrs, value, mask)

    def create_descriptor_gather(self, *args, **kw):
        if any(is_batched(a) for a in args):
            raise Unbatchable("tensor descriptor gather with offsets that differ between programs")
        return super().create_descriptor_gather(*args, **kw)

    def create_descriptor_scatter(self, *args, **kw):
        if any(is_batched(a) for a in args):
            raise Unbatchable("tensor descriptor scatter with offsets that differ between programs")
        return super().create_descriptor_scatter(*args, **kw)

    def create_make_tensor_descriptor(self, base, shape, strides, *rest, **kw):
        if base.bat or any(is_batched(h) for h in list(shape) + list(strides)):
            raise Unbatchable("a tensor descriptor made with a base, shape or strides that differ between programs")
        return super().create_make_tensor_descriptor(base, shape, strides, *rest, **kw)

    def create_make_block_ptr(self, base, shape, strides, offsets, block_shape, order):  # Triton < 3.7
        out = super().create_make_block_ptr(base, shape, strides, offsets, block_shape, order)
        for new, old in zip(out.offsets, offsets):
            new.bat = old.bat
        return out

    def create_advance(self, ptr, offsets):  # Triton < 3.7
        if not (any(o.bat for o in ptr.offsets) or any(o.bat for o in offsets)):
            return super().create_advance(ptr, offsets)
        out = super().create_advance(ptr, [TensorHandle(np.zeros(1, dtype=np.asarray(o.data).dtype), o.dtype)
                                           for o in offsets])
        for i, (old, inc) in enumerate(zip(ptr.offsets, offsets)):
            h = TensorHandle(np.asarray(old.data) + np.asarray(inc.data), old.dtype)
            h.bat = old.bat or inc.bat
            out.offsets[i] = h
        return out

    @staticmethod
    def _batched_block(ptr) -> bool:
        """Whether a block pointer's base, shape, strides or offsets differ between the batch's programs."""
        return any(is_batched(h) for h in [ptr.base, *ptr.shape, *ptr.strides, *ptr.offsets])

    def create_tensor_pointer_load(self, ptr, boundary_check, padding_option, *rest, **kw):  # Triton < 3.7
        if not self._batched_block(ptr):
            return super().create_tensor_pointer_load(ptr, boundary_check, padding_option, *rest, **kw)
        ptrs, mask = self._materialize(ptr.base, ptr.shape, ptr.strides, ptr.offsets, ptr.block_shape,
                                       tuple(boundary_check), False)
        with labelled(self, "block_ptr_load", BlockShape.of(ptr, boundary_check)):
            return self.create_masked_load(ptrs, mask, self._padding(ptrs, padding_option))

    def create_tensor_pointer_store(self, ptr, value, boundary_check, *rest, **kw):  # Triton < 3.7
        if not self._batched_block(ptr):
            return super().create_tensor_pointer_store(ptr, value, boundary_check, *rest, **kw)
        ptrs, mask = self._materialize(ptr.base, ptr.shape, ptr.strides, ptr.offsets, ptr.block_shape,
                                       tuple(boundary_check), False)
        with labelled(self, "block_ptr_store", BlockShape.of(ptr, boundary_check)):
            return self.create_masked_store(ptrs, value, mask)

    def create_assert(self, condition, message, *rest):
        if self.active is None:
            return super().create_assert(condition, message, *rest)
        cond = np.asarray(condition.data if isinstance(condition, TensorHandle) else condition, dtype=bool)
        if not getattr(condition, "bat", False):
            cond = np.broadcast_to(cond, (self.P,) + cond.shape)
        cond = cond | ~self.active.reshape((self.P,) + (1,) * (cond.ndim - 1))  # inactive programs pass
        if not cond.all():
            self.launch.assert_failed(cond, message, batched=True)

    def create_dot_scaled(self, *args, **kw):
        if any(is_batched(a) for a in args):
            raise Unbatchable("tl.dot_scaled")
        return super().create_dot_scaled(*args, **kw)


_wrap_operations(BatchedBuilder)
