"""The checked builder: Triton's interpreter builder with memory operations routed through tritonkit.

Triton's front end (``triton.language`` semantics: type promotion, broadcasting, constexpr
folding) calls a *builder* for every operation. The interpreter's builder computes with numpy
and dereferences raw host pointers in C++. :class:`CheckedBuilder` keeps every computing
operation of the installed Triton's builder and replaces only the memory operations (loads,
stores, atomics, descriptor and block-pointer accesses), which go through the launch's
:class:`~tritonkit.check._memory.AddressSpace` and its checks.

The builder's methods take different extra arguments in different Triton versions (3.6 passes
``cache_modifier, eviction_policy``, 3.9 one ``cache_policy``), so overrides take the leading
arguments they need and pass the rest through.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import triton.language as tl
from triton.runtime import interpreter as _interp

if TYPE_CHECKING:  # pragma: no cover
    from ._launch import Launch

TensorHandle = _interp.TensorHandle
_NP_DTYPES: dict = {}


def np_dtype_of(elem_ty) -> np.dtype:
    """The numpy dtype the interpreter holds a Triton scalar type in (cached)."""
    dt = _NP_DTYPES.get(elem_ty)
    if dt is None:
        dt = _NP_DTYPES[elem_ty] = np.dtype(_interp._get_np_dtype(elem_ty))
    return dt


def _mask_data(mask):
    """A mask's bool array: a TensorHandle's data, or the raw array Triton 3.6 passes for block pointers."""
    if mask is None:
        return None
    return mask.data if isinstance(mask, TensorHandle) else np.asarray(mask)


def _flat(data: np.ndarray, shape, dtype: np.dtype) -> np.ndarray:
    """``data`` broadcast to the block ``shape``, as a contiguous flat array of ``dtype``."""
    if data.shape != shape:
        data = np.broadcast_to(data, shape)
    return np.ascontiguousarray(data, dtype=dtype).reshape(-1)


def _bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)


def _f32_to_bf16(x: np.ndarray) -> np.ndarray:
    """Round float32 to bfloat16 bits, to nearest even (NaN stays NaN)."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounded = (bits + (np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1)))) >> np.uint32(16)
    nan = np.isnan(x)
    return np.where(nan, np.uint32(0x7FC0), rounded).astype(np.uint16)


def _rmw_fn(op: str, elem_ty, vals: np.ndarray):
    """The update ``new = fn(old, positions)`` of an atomic read-modify-write."""
    if elem_ty == tl.bfloat16 and op in ("FADD", "MAX", "MIN"):
        f = {"FADD": np.add, "MAX": np.maximum, "MIN": np.minimum}[op]
        return lambda old, pos: _f32_to_bf16(f(_bf16_to_f32(old), _bf16_to_f32(vals[pos])))
    table = {
        "ADD": np.add, "FADD": np.add, "AND": np.bitwise_and, "OR": np.bitwise_or, "XOR": np.bitwise_xor,
        "MAX": np.maximum, "MIN": np.minimum, "UMAX": np.maximum, "UMIN": np.minimum,
    }
    if op == "XCHG":
        return lambda old, pos: vals[pos].astype(old.dtype)
    f = table[op]
    return lambda old, pos: f(old, vals[pos]).astype(old.dtype)


class CheckedBuilder(_interp.InterpreterBuilder):
    """An interpreter builder whose memory operations are checked by a :class:`Launch`."""

    def __init__(self, launch: "Launch") -> None:
        super().__init__()
        self.launch = launch
        self._masked = True
        self._op = None

    # --- plain loads and stores ------------------------------------------------------------------
    def create_load(self, ptr, *rest, **kw):
        self._masked = False
        try:
            return super().create_load(ptr, *rest, **kw)
        finally:
            self._masked = True

    def create_store(self, ptr, val, *rest, **kw):
        self._masked = False
        try:
            return super().create_store(ptr, val, *rest, **kw)
        finally:
            self._masked = True

    def create_masked_load(self, ptrs, mask, other, *rest, **kw):
        elem_ty = ptrs.get_element_ty()
        dtype = np_dtype_of(elem_ty)
        shape = ptrs.data.shape
        if other is None:
            out = np.zeros(shape, dtype=dtype)
        elif other.data.shape == shape:
            out = other.data.astype(dtype, copy=True)
        else:
            out = np.array(np.broadcast_to(other.data, shape), dtype=dtype)
        res = self.launch.access(self._op or "load", "load", ptrs.data, _mask_data(mask),
                                 dtype.itemsize, self._masked)
        self.launch.space.gather(res, dtype, out.reshape(-1))
        return TensorHandle(out, elem_ty)

    def create_masked_store(self, ptrs, value, mask, *rest, **kw):
        elem_ty = ptrs.get_element_ty()
        dtype = np_dtype_of(elem_ty)
        shape = ptrs.data.shape
        res = self.launch.access(self._op or "store", "store", ptrs.data, _mask_data(mask),
                                 dtype.itemsize, self._masked)
        self.launch.space.scatter(res, _flat(value.data, shape, dtype))

    # --- descriptors and block pointers: label the access, reuse the masked paths ------------------
    def _labelled(self, op, fn, *args, **kw):
        prev, self._op = self._op, op
        try:
            return fn(*args, **kw)
        finally:
            self._op = prev

    def create_descriptor_load(self, *args, **kw):
        return self._labelled("descriptor_load", super().create_descriptor_load, *args, **kw)

    def create_descriptor_store(self, *args, **kw):
        return self._labelled("descriptor_store", super().create_descriptor_store, *args, **kw)

    def create_tensor_pointer_load(self, *args, **kw):  # block pointers (Triton < 3.7)
        return self._labelled("block_ptr_load", super().create_tensor_pointer_load, *args, **kw)

    def create_tensor_pointer_store(self, *args, **kw):  # block pointers (Triton < 3.7)
        return self._labelled("block_ptr_store", super().create_tensor_pointer_store, *args, **kw)

    def create_atomic_load(self, *args, **kw):  # Triton >= 3.8
        return self._labelled("atomic_load", super().create_atomic_load, *args, **kw)

    def create_atomic_store(self, *args, **kw):  # Triton >= 3.8
        return self._labelled("atomic_store", super().create_atomic_store, *args, **kw)

    # --- atomics ---------------------------------------------------------------------------------
    def create_atomic_rmw(self, rmwOp, ptr, val, mask, sem, scope, *rest):
        op = rmwOp.name if hasattr(rmwOp, "name") else str(rmwOp).rsplit(".", 1)[-1]
        elem_ty = ptr.get_element_ty()
        dtype = np_dtype_of(elem_ty)
        shape = ptr.data.shape
        res = self.launch.access(f"atomic_{op.lower()}", "atomic", ptr.data,
                                 _mask_data(mask), dtype.itemsize, True)
        vals = _flat(val.data, shape, dtype)[res.lanes]
        olds = self.launch.space.read_modify_write(res, dtype, _rmw_fn(op, elem_ty, vals))
        out = np.zeros(shape, dtype=dtype)
        out.reshape(-1)[res.lanes] = olds
        return TensorHandle(out, val.dtype.scalar)

    def create_atomic_cas(self, ptr, cmp, val, sem, scope, *rest):
        elem_ty = ptr.get_element_ty()
        dtype = np_dtype_of(elem_ty)
        shape = ptr.data.shape
        res = self.launch.access("atomic_cas", "atomic", ptr.data, None, dtype.itemsize, True)
        cmps = _flat(cmp.data, shape, dtype)[res.lanes]
        vals = _flat(val.data, shape, dtype)[res.lanes]
        olds = self.launch.space.read_modify_write(
            res, dtype, lambda old, pos: np.where(old == cmps[pos], vals[pos], old).astype(dtype))
        out = np.zeros(shape, dtype=dtype)
        out.reshape(-1)[res.lanes] = olds
        return TensorHandle(out, cmp.dtype.scalar)

    # --- operations the CPU cannot run -------------------------------------------------------------
    def create_inline_asm(self, *args, **kw):
        raise NotImplementedError("inline assembly (tl.inline_asm_elementwise)")

    def create_extern_elementwise(self, libName, libPath, symbol, *args, **kw):
        raise NotImplementedError(f"the extern elementwise function {symbol} (libdevice / tl.extern_elementwise)")

