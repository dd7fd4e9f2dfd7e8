"""The checked builder: Triton's interpreter builder with memory operations routed through tritonkit.

Triton's front end (``triton.language`` semantics: type promotion, broadcasting, constexpr
folding) calls a *builder* for every operation. The interpreter's builder computes with numpy
and dereferences raw host pointers in C++. :class:`CheckedBuilder` keeps every computing
operation of the installed Triton's builder but rounds 16- and 8-bit floats like the GPU, and
replaces the memory operations (loads, stores, atomics, descriptor and block-pointer accesses),
which go through the launch's :class:`~tritonkit.check.memory.AddressSpace`.

The checks see the launch through the hooks the builder calls (``launch.hooks``, see
:class:`~tritonkit.check.checks.base.Hooks`): ``result`` for every elementwise result,
``int_arith`` for binary arithmetic with a signed integer result, ``cast`` for integer casts,
``dot``, ``load`` after a load filled its value, ``store`` before a store or atomic writes; the
launch itself calls ``address`` and ``access`` (:meth:`LaunchView.access`). The builder knows no
check by name.

The builder's methods take different extra arguments in different Triton versions (3.6 passes
``cache_modifier, eviction_policy``, 3.9 one ``cache_policy``), so overrides take the leading
arguments they need and pass the rest through.
"""
from __future__ import annotations

import dataclasses
from typing import Any, List, Optional, Protocol

import numpy as np
import triton.language as tl
from triton._C.libtriton import ir as _ir
from triton.runtime import interpreter as _interp

from . import taint as _taint
from .access import Access, BlockShape, labelled
from .addresses import LazyAddresses, make_addresses, shape_of, unmade
from .numerics import BITS_TYPES, dot_operands, float_to_int, from_float, to_float

TensorHandle = _interp.TensorHandle


class LaunchView(Protocol):
    """What the builder uses of the launch it runs for (:class:`tritonkit.check.launch.Launch`)."""

    hooks: Any  # a tritonkit.check.checks.base.Hooks: the checks' hooks, by event
    space: Any  # the launch's tritonkit.check.memory.AddressSpace
    tx: Any  # the batched engine's running transaction, or None
    record: Any  # the launch's LaunchRecord (counters)
    uniform_access: bool
    fp_fusion: bool  # contract a float product and the add/subtract of it into one fma, as Triton does

    def access(self, acc: Access, addrs: Optional[np.ndarray], mask: Optional[np.ndarray], ptrs=None) -> Any:
        """Resolve and check one memory operation (``addrs`` None: ``ptrs`` is an unmade
        :class:`~.addresses.LazyAddresses`); returns the resolved lanes to perform."""

    def count_flops(self, n: int, elem_ty, operands=()) -> None:
        """Count ``n`` floating-point operations on operands of Triton type ``elem_ty``."""

    def device_print(self, prefix: str, hex: bool, handles: List) -> None:
        """``tl.device_print``."""

    def assert_failed(self, cond: np.ndarray, message: str, batched: bool = False) -> None:
        """``tl.device_assert`` false in some lanes."""
_NP_DTYPES: dict = {}
_TRITON_NP_DTYPE = _interp._get_np_dtype  # builds a table of every type per call (40 us)
_U64 = np.dtype(np.uint64)


def np_dtype_of(elem_ty) -> np.dtype:
    """The numpy dtype the interpreter holds a Triton scalar type in (cached)."""
    dt = _NP_DTYPES.get(elem_ty)
    if dt is None:
        dt = _NP_DTYPES[elem_ty] = np.dtype(_TRITON_NP_DTYPE(elem_ty))
    return dt


def interp_np_dtype(tt_dtype) -> np.dtype:
    """Triton's interpreter's ``_get_np_dtype`` (the numpy dtype of a scalar, pointer or block type),
    cached: installed in its place while the language is patched (a matmul's launch called it a few
    hundred times, 10 ms)."""
    if isinstance(tt_dtype, tl.block_type):
        tt_dtype = tt_dtype.element_ty
    if isinstance(tt_dtype, tl.pointer_type):
        return _U64
    return np_dtype_of(tt_dtype)


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


def _bits(h) -> bool:
    """Whether a handle holds bf16/fp8 values as raw bits (arithmetic must decode them)."""
    return h.data.dtype.kind == "u" and h.data.dtype.itemsize <= 2 and h.dtype.scalar.name in BITS_TYPES


#: float types whose multiply-add the GPU's compiler contracts into one fma (one rounding); measured
#: on an H100 (Triton 3.6): fp32 always contracted. For bf16 and fp16, LLVM contracts some products
#: and not others (``a*b + c`` was a ``fma.rn.f16x2`` in one kernel and two roundings in another where
#: the product had more uses): the interpreter contracts none, at most a product's rounding apart
_CONTRACTED = frozenset(("fp32", "fp64"))
_FUSED_DTYPES = {"fp32": np.dtype(np.float32), "fp64": np.dtype(np.float64)}


def _fused(lhs, rhs, op, shape) -> Optional[np.ndarray]:
    """``lhs op rhs`` (``op`` add or subtract) as the GPU computes it where one side is a product
    that its compiler contracts with it into an fma (Triton compiles with ``enable_fp_fusion``: LLVM
    fuses ``fmul`` + ``fadd``/``fsub`` on NVPTX even when the product has other uses, the left
    product first): ``a*b + c``, ``a*b - c`` as ``fma(a, b, -c)``, ``c - a*b`` as ``fma(-a, b, c)``,
    rounded once to the result's type. None where neither side is a product of the same type."""
    ty = lhs.dtype.scalar
    if rhs.dtype.scalar != ty:
        return None
    if lhs.fmul is not None:
        (a, b), c, neg_ab, neg_c = lhs.fmul, rhs, False, op is np.subtract
    elif rhs.fmul is not None:
        (a, b), c, neg_ab, neg_c = rhs.fmul, lhs, op is np.subtract, False
    else:
        return None
    if any(h.dtype.scalar != ty for h in (a, b)):
        return None
    nd = len(shape)
    # values with a program axis (batched engine) padded as their results were: (P,) -> (P, 1)
    x, y, z = (np.reshape(h.data, np.shape(h.data) + (1,) * (nd - np.ndim(h.data)))
               if h.bat and np.ndim(h.data) < nd else h.data for h in (a, b, c))
    try:
        x, y, z = -x if neg_ab else x, y, -z if neg_c else z
        if np.broadcast_shapes(np.shape(x), np.shape(y), np.shape(z), shape) != tuple(shape):
            return None  # (the result's shape is the add's: operands that would grow it are not its)
        if ty.name == "fp32":
            from .libdevice import fma_f32
            r = fma_f32(x, y, z)
        else:
            from .libdevice import fma_f64
            r = fma_f64(*np.broadcast_arrays(x, y, z))
        if r.shape == tuple(shape):  # a fresh array of the result's shape (no copy)
            return r
        return np.broadcast_to(r, shape).astype(r.dtype, copy=True)
    except ValueError:  # shapes that do not broadcast to the result's: leave the two roundings
        return None


def _rounded(x: np.ndarray, ty) -> TensorHandle:
    """Float results rounded to the Triton float type ``ty`` (bool results of comparisons kept)."""
    if x.dtype == np.bool_:
        return TensorHandle(x, tl.int1)
    return TensorHandle(from_float(x, ty), ty)


def _rmw_fn(op: str, elem_ty, vals: np.ndarray):
    """The update ``new = fn(old, positions)`` of an atomic read-modify-write."""
    if elem_ty.name in BITS_TYPES and op in ("FADD", "MAX", "MIN"):
        f = {"FADD": np.add, "MAX": np.maximum, "MIN": np.minimum}[op]
        return lambda old, pos: from_float(f(to_float(old, elem_ty), to_float(vals[pos], elem_ty)), elem_ty)
    table = {
        "ADD": np.add, "FADD": np.add, "AND": np.bitwise_and, "OR": np.bitwise_or, "XOR": np.bitwise_xor,
        "MAX": np.maximum, "MIN": np.minimum, "UMAX": np.maximum, "UMIN": np.minimum,
    }
    if op == "XCHG":
        return lambda old, pos: vals[pos].astype(old.dtype)
    f = table[op]
    return lambda old, pos: f(old, vals[pos]).astype(old.dtype)


# builder methods that compute elementwise and are not overridden (or call no hook themselves):
# wrapped to carry lane taints and to look for NaN/Inf origins
_ELEMENTWISE = ("cast_impl", "create_fp_to_fp", "create_bitcast", "create_fma", "create_idiv", "create_ashr",
                "create_umulhi", "create_fabs", "create_erf", "create_rsqrt", "create_addptr", "create_splat",
                "create_extern_elementwise", "create_clampf")


#: blocks of fewer lanes get their addresses at once: resolving from the operands saves passes over
#: large blocks, and costs a few Python steps more on small ones
_LAZY_LANES = 256

_RMW_API = {"FADD": "add", "UMAX": "max", "UMIN": "min"}  # RMW op -> the tl.atomic_* name that makes it
_SEMS = {"ACQUIRE_RELEASE": "acq_rel", "ACQUIRE": "acquire", "RELEASE": "release", "RELAXED": "relaxed"}


def _sem(sem) -> str:
    """An atomic's memory semantics as Triton spells them (``"acq_rel"``, ``"relaxed"``, ...)."""
    name = getattr(sem, "name", None) or str(sem).rsplit(".", 1)[-1]
    return _SEMS.get(name, name.lower())


# the binary operations that count as FLOPs (with float operands), as Nsight Compute's FADD/FMUL counts
_FLOP_OPS = frozenset((np.add, np.subtract, np.multiply, np.divide, np.true_divide))


class CheckedBuilder(_interp.InterpreterBuilder):
    """An interpreter builder whose memory operations go through a launch (a :class:`LaunchView`)
    and whose results are shown to the launch's checks (see the module)."""

    _ELEMENTWISE = _ELEMENTWISE
    #: what a program suspended inside an operation keeps here (see ``Launch.program_state``)
    PROGRAM_STATE = ("grid_idx", "_masked", "_op", "_block")

    def __init__(self, launch: LaunchView) -> None:
        super().__init__()
        # device_assert always on (Triton's front end drops it unless options.debug); integer ops wrap
        # like the GPU's instead of being checked through int64 shadows (sanitize_overflow)
        self.options = dataclasses.replace(self.options, debug=True, sanitize_overflow=False)
        self.launch = launch
        self._masked = True
        self._op = None
        self._block = None  # a block pointer's declared shape (see .access), during its load or store
        for name in self._ELEMENTWISE:
            fn = getattr(self, name, None)
            if fn is not None:
                setattr(self, name, self._tracking(fn, name.replace("create_", "").replace("_impl", "")))
        _taint.wrap_shape_ops(self)

    def _tracking(self, fn, label):
        launch = self.launch
        hooks = launch.hooks.result

        def tracking(*args):
            out = fn(*args)
            if isinstance(out, TensorHandle):
                if any(getattr(a, "tainted", False) for a in args):
                    _taint.carry(out, *(a for a in args if isinstance(a, TensorHandle)))
                for hook in hooks:
                    hook(launch, label, out, [a for a in args if isinstance(a, TensorHandle)])
            return out
        tracking.__name__ = fn.__name__
        return tracking

    def create_addptr(self, ptr, offset):
        """``ptr + offset`` elements as Triton's interpreter computes it (wrapping uint64 byte
        addresses); where the offsets have the result's shape, a :class:`~.addresses.LazyAddresses`
        that makes them only when something other than a load or store reads them. An int64
        offset whose byte offset (``offset * element size``) does not fit in 64 bits wraps on the
        GPU too: the ``int_overflow`` hooks see that multiply, and the lanes it marks travel with
        the address."""
        o = offset.data
        size = max(1, ptr.get_element_ty().primitive_bitwidth // 8)
        p = ptr.data
        if o.dtype.kind not in "iu":
            return super().create_addptr(ptr, offset)
        full = o.shape if o.shape == np.shape(p) else np.broadcast_shapes(np.shape(p), o.shape)
        if full != o.shape:
            o = np.broadcast_to(o, full)  # a view: the offsets repeat over the pointers' axes
        if o.size >= _LAZY_LANES:  # made when read (see .addresses): a load or store resolves the operands
            out = LazyAddresses(p, o, size, ptr.dtype)
        else:
            out = TensorHandle(make_addresses(p, o, size), ptr.dtype)
        if size != 1 and o.dtype.itemsize == 8 and o.size and self.launch.hooks.int_arith:
            self._byte_offset_overflow(out, offset, size)
        return out

    def _byte_offset_overflow(self, out, offset, size: int) -> None:
        """Mark the lanes of the address ``out`` whose int64 element offset times ``size`` bytes
        does not fit in 64 bits (a wrapped address: ``idx * 4`` with ``idx`` near 2**62)."""
        o = offset.data
        limit = np.iinfo(np.int64).max // size
        if o.dtype.kind == "u":
            if int(o.max()) <= limit:
                return
        elif -limit <= int(o.min()) and int(o.max()) <= limit:
            return
        launch = self.launch
        wide = o.astype(np.int64, copy=False)
        with np.errstate(over="ignore"):
            product = TensorHandle(wide * np.int64(size), tl.int64)
        lhs = TensorHandle(wide, tl.int64)
        scale = TensorHandle(np.full(np.shape(wide), size, dtype=np.int64), tl.int64)
        for h in (product, lhs, scale):  # a batch's values carry the program axis first
            h.bat = getattr(offset, "bat", False)
        for hook in launch.hooks.int_arith:
            hook(launch, np.multiply, product, lhs, scale)
        if getattr(product, "tainted", False):
            _taint.carry(out, product)

    # --- shape operations carry lane taints ------------------------------------------------------------
    def create_broadcast(self, arg, shape):
        return _taint.carry_shape(super().create_broadcast(arg, shape), arg, lambda u: np.broadcast_to(u, shape))

    def create_expand_dims(self, arg, axis):
        return _taint.carry_shape(super().create_expand_dims(arg, axis), arg, lambda u: np.expand_dims(u, axis))

    def create_reshape(self, arg, shape, *rest):
        out = super().create_reshape(arg, shape, *rest)
        return _taint.carry_shape(out, arg, lambda u: np.broadcast_to(u, np.shape(arg.data)).reshape(shape))

    def create_trans(self, arg, perm):
        return _taint.carry_shape(super().create_trans(arg, perm), arg, lambda u: np.transpose(u, perm))

    # --- numerics like the GPU: bf16/fp8 decoded to fp32, rounded back after every operation ----------
    # tl.minimum/maximum without propagate_nan (and the builtin min/max): the GPU's min.f32/max.f32 give
    # the operand that is not NaN; Triton 3.6's interpreter gave NaN (np.minimum)
    def create_minnumf(self, lhs, rhs):
        return self.binary_op(lhs, rhs, np.fmin)

    def create_maxnumf(self, lhs, rhs):
        return self.binary_op(lhs, rhs, np.fmax)

    def binary_op(self, lhs, rhs, op):
        ty = lhs.dtype.scalar
        contracted = ty.name in _CONTRACTED
        out = None
        if (contracted and (lhs.fmul is not None or rhs.fmul is not None) and (op is np.add or op is np.subtract)
                and self.launch.fp_fusion):  # one fma, computed instead of the add (not after it)
            fused = _fused(lhs, rhs, op, np.broadcast_shapes(np.shape(lhs.data), np.shape(rhs.data)))
            if fused is not None and fused.dtype == _FUSED_DTYPES[ty.name]:
                out = TensorHandle(fused, ty)
        if out is None:
            if _bits(lhs) or _bits(rhs):
                out = _rounded(op(to_float(lhs.data, ty), to_float(rhs.data, rhs.dtype.scalar)), ty)
            else:
                out = super().binary_op(lhs, rhs, op)
                if contracted and op is np.multiply and out.dtype.scalar == ty:
                    out.fmul = (lhs, rhs)  # a product the next add or subtract may contract with
        if lhs.tainted or rhs.tainted:
            _taint.carry(out, lhs, rhs)
        launch = self.launch
        if op in _FLOP_OPS and lhs.dtype.scalar.is_floating():
            launch.count_flops(out.data.size, lhs.dtype.scalar, (lhs, rhs))
        hooks = launch.hooks
        if hooks.int_arith and out.data.dtype.kind == "i":
            for hook in hooks.int_arith:
                hook(launch, op, out, lhs, rhs)
        for hook in hooks.result:
            hook(launch, op, out, (lhs, rhs))
        return out

    def unary_op(self, arg, op):
        if _bits(arg):
            out = _rounded(op(to_float(arg.data, arg.dtype.scalar)), arg.dtype.scalar)
        else:
            out = super().unary_op(arg, op)
        if arg.tainted:
            _taint.carry(out, arg)
        for hook in self.launch.hooks.result:
            hook(self.launch, op, out, (arg,))
        return out

    def ternary_op(self, lhs, rhs, other, op):
        if op is not np.where and (_bits(lhs) or _bits(rhs) or _bits(other)):
            ty = other.dtype.scalar
            out = _rounded(op(*(to_float(h.data, h.dtype.scalar) for h in (lhs, rhs, other))), ty)
        else:
            out = super().ternary_op(lhs, rhs, other, op)
        if op is np.where:
            return _taint.select(out, lhs, rhs, other)
        if lhs.tainted or rhs.tainted or other.tainted:
            _taint.carry(out, lhs, rhs, other)
        for hook in self.launch.hooks.result:
            hook(self.launch, op, out, (lhs, rhs, other))
        return out

    def get_bf16(self, value):
        """A bf16 scalar constant (Triton < 3.7's interpreter has none): ``value`` rounded once to
        nearest even, as the compiler folds a Python float into a bf16 constant."""
        return TensorHandle(from_float(np.array([value], dtype=np.float64), tl.bfloat16), tl.bfloat16)

    def create_fma(self, x, y, z):
        if _bits(z):
            ty = z.dtype.scalar
            a, b, c = (to_float(h.data, h.dtype.scalar).astype(np.float64) for h in (x, y, z))
            out = TensorHandle(from_float(a * b + c, ty), ty)  # exact product, one rounding
        else:
            out = super().create_fma(x, y, z)
        self.launch.count_flops(2 * np.size(out.data), z.dtype.scalar, (x, y, z))
        return out

    def create_erf(self, arg):
        ty = arg.dtype.scalar
        if ty.name in ("fp16", "bf16"):
            return _rounded(_interp.np_erf_fp32(to_float(arg.data, ty)), ty)
        return super().create_erf(arg)

    def create_rsqrt(self, arg):
        if _bits(arg):
            return self.unary_op(arg, lambda x: 1 / np.sqrt(x))
        return super().create_rsqrt(arg)

    def cast_impl(self, src, dst_type):
        s, d = src.dtype.scalar, dst_type.scalar
        if s.is_floating() and src.data.dtype != np.bool_:  # comparisons' handles keep their operands' type
            x = to_float(src.data, s)
            if d.is_floating():
                data = from_float(x, d)
            elif d.is_int1():
                data = x != 0
            else:  # truncate and saturate like cvt.rzi; NaN -> 0
                data = float_to_int(x, np_dtype_of(d))
            return TensorHandle(data, d)
        if d.is_floating():
            return TensorHandle(from_float(src.data.astype(np.float64), d), d)
        out = super().cast_impl(src, dst_type)
        for hook in self.launch.hooks.cast:
            hook(self.launch, src, out)
        return out

    def create_fp_to_fp(self, src, dst_type, rounding_mode):
        s, d = src.dtype.scalar, dst_type.scalar
        rtz = rounding_mode is not None and rounding_mode == _ir.ROUNDING_MODE.RTZ
        return TensorHandle(from_float(to_float(src.data, s), d, rtz=rtz), d)

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        out = self._dot(a, b, d, input_precision, max_num_imprecise_acc)
        # the result has every program's block (an operand may be one block shared by a batch)
        self.launch.count_flops(2 * np.size(out.data) * int(np.shape(a.data)[-1]), a.dtype.scalar, (a, b, d))
        return out

    def _dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        at, bt, dt = a.dtype.scalar, b.dtype.scalar, d.dtype.scalar
        if at.is_int():  # integer MMA: exact products, accumulator wraps at its width
            acc = np.matmul(a.data.astype(np.int64), b.data.astype(np.int64)) + d.data.astype(np.int64)
            return _taint.dot(TensorHandle(acc.astype(np_dtype_of(dt)), dt), a, b, d)
        x, y = to_float(a.data, at), to_float(b.data, bt)
        if at.name == "fp64":
            pairs = [(x, y)]
        elif at.name == "fp32" and bt.name == "fp32":
            name = getattr(input_precision, "name", None) or (str(input_precision) if input_precision else "tf32")
            pairs = dot_operands(x, y, name)
        else:  # 16- and 8-bit inputs are exact in fp32: products are exact, summed in fp32
            pairs = [(x.astype(np.float32, copy=False), y.astype(np.float32, copy=False))]
        out = None
        for p, q in pairs:
            part = np.matmul(p, q)
            out = part if out is None else out + part
        acc = to_float(d.data, dt)
        if np.result_type(out, acc) == out.dtype and np.broadcast_shapes(out.shape, np.shape(acc)) == out.shape:
            np.add(out, acc, out=out)  # out is this call's own array
        else:
            out = out + acc
        if not (dt.name == "fp32" and out.dtype == np.float32):  # else already the accumulator's storage
            out = from_float(out, dt)
        res = _taint.dot(TensorHandle(out, dt), a, b, d)
        for hook in self.launch.hooks.dot:
            hook(self.launch, res, a, b, d)
        return res

    # --- plain loads and stores ------------------------------------------------------------------
    def create_load(self, ptr, *rest, **kw):
        self._masked = False
        try:  # no mask: every lane (Triton's interpreter makes one of the pointers' shape)
            return self.create_masked_load(ptr, None, None, *rest, **kw)
        finally:
            self._masked = True

    def create_store(self, ptr, val, *rest, **kw):
        self._masked = False
        try:
            return self.create_masked_store(ptr, val, None, *rest, **kw)
        finally:
            self._masked = True

    def create_masked_load(self, ptrs, mask, other, *rest, **kw):
        elem_ty = ptrs.get_element_ty()
        dtype = np_dtype_of(elem_ty)
        shape = shape_of(ptrs)
        mask_data = _mask_data(mask)
        launch = self.launch
        acc = Access(self._op or "load", "load", dtype.itemsize, self._masked, shape, "", self._block,
                     bool(kw.get("is_volatile", rest[-1] if rest else False)))  # is_volatile comes last
        if mask is not None and getattr(mask, "tainted", False):
            _taint.observe(launch, mask, f"{acc.op} mask")
        res = launch.access(acc, None if unmade(ptrs) else ptrs.data, mask_data, ptrs)
        if res.all_lanes and res._ok is None and res.single_slot >= 0 and launch.space.region(res.single_slot):
            out = np.empty(shape, dtype=dtype)  # the gather writes every lane
        elif other is None:
            out = np.zeros(shape, dtype=dtype)
        else:  # a fresh C-contiguous array: the gather writes through its flat view
            out = np.array(np.broadcast_to(other.data, shape), dtype=dtype, order="C")
        launch.space.gather(res, dtype, out.reshape(-1))
        h = TensorHandle(out, elem_ty)
        if other is not None and other.tainted:
            _taint.carry(h, other)
        h.bat = getattr(ptrs, "bat", False)  # the batched engine's program axis (see .batched)
        for hook in launch.hooks.load:
            hook(launch, acc, res, h, mask_data, other)
        return h

    def create_masked_store(self, ptrs, value, mask, *rest, **kw):
        elem_ty = ptrs.get_element_ty()
        dtype = np_dtype_of(elem_ty)
        shape = shape_of(ptrs)
        launch = self.launch
        acc = Access(self._op or "store", "store", dtype.itemsize, self._masked, shape, "", self._block)
        if mask is not None and getattr(mask, "tainted", False):
            _taint.observe(launch, mask, f"{acc.op} mask")
        res = launch.access(acc, None if unmade(ptrs) else ptrs.data, _mask_data(mask), ptrs)
        flat = _flat(value.data, shape, dtype)
        for hook in launch.hooks.store:
            hook(launch, acc, res, value, flat)
        launch.space.scatter(res, flat)

    # --- descriptors and block pointers: label the access, reuse the masked paths ------------------
    def _labelled(self, op, fn, *args, **kw):
        with labelled(self, op):
            return fn(*args, **kw)

    def create_descriptor_load(self, *args, **kw):
        return self._labelled("descriptor_load", super().create_descriptor_load, *args, **kw)

    def create_descriptor_store(self, *args, **kw):
        return self._labelled("descriptor_store", super().create_descriptor_store, *args, **kw)

    def create_tensor_pointer_load(self, ptr, boundary_check, *rest, **kw):  # block pointers (Triton < 3.7)
        with labelled(self, "block_ptr_load", BlockShape.of(ptr, boundary_check)):
            return super().create_tensor_pointer_load(ptr, boundary_check, *rest, **kw)

    def create_tensor_pointer_store(self, ptr, value, boundary_check, *rest, **kw):  # block pointers (Triton < 3.7)
        with labelled(self, "block_ptr_store", BlockShape.of(ptr, boundary_check)):
            return super().create_tensor_pointer_store(ptr, value, boundary_check, *rest, **kw)

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
        acc = Access(f"atomic_{_RMW_API.get(op, op.lower())}", "atomic", dtype.itemsize, True, shape, _sem(sem))
        res, flat = self._atomic(acc, ptr, mask if isinstance(mask, TensorHandle) else _mask_data(mask), val, dtype)
        vals = flat[res.lanes]
        olds = self.launch.space.read_modify_write(res, dtype, _rmw_fn(op, elem_ty, vals))
        out = np.zeros(shape, dtype=dtype)
        out.reshape(-1)[res.lanes] = olds
        return TensorHandle(out, val.dtype.scalar)

    def create_atomic_cas(self, ptr, cmp, val, sem, scope, *rest):
        elem_ty = ptr.get_element_ty()
        dtype = np_dtype_of(elem_ty)
        shape = ptr.data.shape
        acc = Access("atomic_cas", "atomic", dtype.itemsize, True, shape, _sem(sem))
        if cmp.tainted:
            _taint.observe(self.launch, cmp, "atomic_cas compare value")
        res, flat = self._atomic(acc, ptr, None, val, dtype)
        cmps = _flat(cmp.data, shape, dtype)[res.lanes]
        vals = flat[res.lanes]
        olds = self.launch.space.read_modify_write(
            res, dtype, lambda old, pos: np.where(old == cmps[pos], vals[pos], old).astype(dtype))
        out = np.zeros(shape, dtype=dtype)
        out.reshape(-1)[res.lanes] = olds
        return TensorHandle(out, cmp.dtype.scalar)

    def _atomic(self, acc: Access, ptr, mask_data, val, dtype: np.dtype):
        """Resolve an atomic's lanes and show the values it writes to the store hooks; returns
        ``(resolved lanes, the values as a flat array of dtype over the block)``."""
        launch = self.launch
        if isinstance(mask_data, TensorHandle):
            if mask_data.tainted:
                _taint.observe(launch, mask_data, f"{acc.op} mask")
            mask_data = mask_data.data
        res = launch.access(acc, ptr.data, mask_data, ptr)
        flat = _flat(val.data, acc.shape, dtype)
        for hook in launch.hooks.store:
            hook(launch, acc, res, val, flat)
        return res, flat

    # --- operations the CPU cannot run -------------------------------------------------------------
    def create_inline_asm(self, *args, **kw):
        raise NotImplementedError("inline assembly (tl.inline_asm_elementwise)")

    def create_extern_elementwise(self, libName, libPath, symbol, argList, retType, isPure, *rest):
        from . import libdevice
        ret_ty = getattr(retType, "scalar", retType)
        args = [a.data if isinstance(a, TensorHandle) else np.asarray(a) for a in argList]
        if len(args) > 1:
            args = list(np.broadcast_arrays(*args))
        data = libdevice.call(symbol, args, np_dtype_of(ret_ty))  # warnings: off for the whole launch
        out = TensorHandle(np.asarray(data), ret_ty)
        tainted = [a for a in argList if getattr(a, "tainted", False)]
        return _taint.carry(out, *tainted) if tainted else out

    # --- debug operations ----------------------------------------------------------------------------
    def create_print(self, prefix, hex, values, isSigned=None, *rest):
        for h in values:
            if getattr(h, "tainted", False):
                _taint.observe(self.launch, h, "device_print", _taint.running_lanes(self.launch, h))
        self.launch.device_print(prefix, hex, values)

    def create_assert(self, condition, message, *rest):
        if getattr(condition, "tainted", False):
            _taint.observe(self.launch, condition, "device_assert", _taint.running_lanes(self.launch, condition))
        cond = np.asarray(condition.data if isinstance(condition, TensorHandle) else condition)
        if not cond.all():
            self.launch.assert_failed(cond, message, batched=getattr(condition, "bat", False))
