"""A launch's arguments as the compiled kernel receives them: bound to the kernel's parameters
like Triton's JIT binds them, scalars typed like the compiler types them, tensors mapped into the
launch's address space (tensors on a GPU copied to the host, and back after the launch)."""
from __future__ import annotations

import inspect
import weakref
from typing import Dict, Tuple

import numpy as np
import torch
import triton
import triton.language as tl
from triton.runtime import interpreter as _interp

from ..errors import UsageError
from ..interp.builder import np_dtype_of
from ..interp.numerics import from_float
from ..memory import AddressSpace, HostStorage
from ..memory.host import HostCopy, copy_to_host
from .tensor_like import describe, foreign_tensor, is_tensor_like, owner_of, tracked_objects


def _is_constexpr(param: inspect.Parameter) -> bool:
    ann = param.annotation
    if ann is inspect.Parameter.empty:
        return False
    if ann is tl.constexpr or isinstance(ann, tl.constexpr):
        return True
    return isinstance(ann, str) and ann.split(".")[-1].strip() == "constexpr"


def _dtype_name(t: torch.Tensor) -> str:
    return str(t.dtype).replace("torch.", "")


def type_name(value, specialize: bool = False) -> str:
    """The type Triton's JIT gives an argument, as ``triton.runtime.jit.mangle_type`` names it:
    ``"u1"`` for a bool, ``"i32"``/``"i64"``/``"u64"`` for an int by its range (``"constexpr"``
    for 1 when ``specialize``), ``"fp32"`` for a float, ``"*fp32"`` and so on for a tensor (or a
    ``TensorWrapper``). Computed here rather than by ``mangle_type``, whose first call imports
    Triton's whole compiler front end (about 0.045 s in a fresh process); anything else is left
    to ``mangle_type``.

    Raises:
        OverflowError: an int outside [-2**63, 2**64).
    """
    if isinstance(value, bool):
        return "u1"
    if isinstance(value, int):
        if specialize and value == 1:
            return "constexpr"
        if -2 ** 31 <= value < 2 ** 31:
            return "i32"
        if -2 ** 63 <= value < 2 ** 63:
            return "i64"
        if 0 <= value < 2 ** 64:
            return "u64"
        raise OverflowError(f"integer {value} does not fit in 64 bits")
    if isinstance(value, float):
        return "fp32"
    dtype = getattr(value, "dtype", None)
    if isinstance(value, (torch.Tensor, triton.runtime.jit.TensorWrapper)) and isinstance(dtype, torch.dtype):
        from triton._utils import type_canonicalisation_dict
        name = type_canonicalisation_dict.get(str(dtype).split(".")[-1])
        if name is not None:
            return "*" + name
    return triton.runtime.jit.mangle_type(value, specialize)


def scalar_argument(value, annotation_type: str = "", specialize: bool = True):
    """A scalar kernel argument as the compiled kernel receives it.

    Triton's JIT types a scalar by its value: ``bool`` -> int1, ``int`` -> int32 when it fits, else
    int64 (uint64 above 2**63), ``float`` -> fp32; the int ``1`` is specialized to the constexpr
    ``1`` unless the parameter is in ``do_not_specialize``; an annotated parameter (``n: tl.int64``)
    takes its annotation's type. Returns a ``tl.tensor`` of that type, or the plain value for
    constexpr specializations and values that are not numbers.

    Raises:
        UsageError: an integer that does not fit in 64 bits.
    """
    if isinstance(value, np.generic):
        value = value.item()
    if not isinstance(value, (bool, int, float)):
        return value
    try:
        name = annotation_type.lstrip("*") if annotation_type else type_name(value, specialize)
    except Exception as e:  # e.g. an int over 64 bits
        raise UsageError(f"scalar argument {value!r} cannot be passed to a kernel: {e}") from None
    if name == "constexpr":
        return value
    ty = tl.str_to_ty(name, None)
    if ty.is_floating() and ty.name not in ("fp32", "fp64", "fp16"):
        data = from_float(np.array([float(value)], dtype=np.float64), ty)
    else:
        data = np.array([value]).astype(np_dtype_of(ty))
    return tl.tensor(_interp.TensorHandle(data, ty), ty)


def scalar_specs(jit, pyfn) -> Dict[str, Tuple[str, bool]]:
    """Per parameter of a kernel: (annotated type or "", whether ints are value-specialized). Made
    once per kernel function and ``do_not_specialize`` list (0.09 ms a launch of a 21-parameter
    kernel on the CPU machine); the dict returned is shared: not to be changed."""
    dns = list(getattr(jit, "do_not_specialize", None) or getattr(jit, "kwargs", {}).get("do_not_specialize")
               or [])
    try:
        key = tuple(dns)
        cached = _SPECS.get(pyfn)
    except TypeError:  # an unhashable entry, a function that takes no weak reference
        key, cached = None, None
    if cached is not None and cached[0] == key:
        return cached[1]
    out = _scalar_specs(pyfn, dns)
    if key is not None:
        _SPECS[pyfn] = (key, out)
    return out


def _scalar_specs(pyfn, dns) -> Dict[str, Tuple[str, bool]]:
    out = {}
    for i, (name, p) in enumerate(inspect.signature(pyfn).parameters.items()):
        off = i in dns or name in dns
        try:
            ann = triton.runtime.jit.KernelParam(i, p, off, False).annotation_type
        except Exception:  # pragma: no cover - an annotation Triton itself cannot read
            ann = ""
        out[name] = (ann if isinstance(ann, str) else "", not off)
    return out


class ArgMapper:
    """Maps a launch's arguments into the address space (:meth:`convert`), and copies the storages of
    tensors on another device back after the launch (:meth:`copy_back`).

    Args:
        space: the launch's address space.
        threads: threads that may make a large host copy's pages resident (see :mod:`..memory.host`).
    """

    #: for tests: CPU tensors' storages get host copies too, as GPU tensors' do (the CPU tensor
    #: standing for the device's bytes), so that the GPU machine's path runs on a CPU-only machine
    COPY_CPU_TENSORS = False

    def __init__(self, space: AddressSpace, threads: int = 1):
        self.space = space
        self.threads = threads  # that may populate a host copy (see ..memory.host)

    def storage(self, t: torch.Tensor) -> HostStorage:
        """The host bytes of ``t``'s storage, mapped once per launch (a host copy for a tensor on
        another device).

        Raises:
            UsageError: ``t`` is on the ``meta`` device.
        """
        st = t.untyped_storage()
        key = (str(t.device), st.data_ptr())
        hs = self.space.storages.get(key)
        if hs is None:
            if t.device.type == "cpu" and not self.COPY_CPU_TENSORS:
                host, dev, shared, fill = st, None, False, False
            elif t.device.type == "meta":
                raise UsageError("a tensor on the 'meta' device has no data to check: pass real tensors")
            else:
                from .parallel import WORKER_HOST_STORAGES, _fresh_host
                # in a config's worker process the GPU is out of reach: the bytes copied before the fork
                host = _fresh_host(key) if WORKER_HOST_STORAGES is not None else None
                copy = copy_to_host(st, self.threads) if host is None else HostCopy(host, False, False)
                host, dev, shared, fill = copy.storage, st, copy.shared, copy.fill
            nbytes = host.nbytes()
            buf_t = torch.empty(0, dtype=torch.uint8).set_(host, 0, (nbytes,), (1,))
            buf_t._tritonkit_host = True  # tritonkit's own view of the bytes: never a pointer table's tensor
            hs = HostStorage(buf=buf_t.numpy(), device_storage=dev, host_storage=host, key=key + (st.nbytes(),),
                             shared=shared, fill=fill)
            self.space.storages[key] = hs
        return hs

    def pointer(self, name: str, arg) -> tl.tensor:
        """The pointer argument ``name`` for a tensor (or a ``TensorWrapper``; a tensor-like object:
        :meth:`tensor_like`): a region of the address space for its view; the kernel gets the
        region's virtual address.

        Raises:
            UsageError: the tensor is not strided (sparse, ...); see :meth:`tensor_like`.
        """
        if is_tensor_like(arg):
            return self.tensor_like(name, arg)
        t = arg.base if isinstance(arg, triton.runtime.jit.TensorWrapper) else arg
        if t.layout != torch.strided:
            raise UsageError(f"argument '{name}' is a {t.layout} tensor: Triton kernels take dense (strided) "
                             "tensors; pass .to_dense()")
        hs = self.storage(t)
        itemsize = t.element_size()
        region = self.space.add(name, hs, t.storage_offset() * itemsize, itemsize, tuple(t.shape), tuple(t.stride()),
                                _dtype_name(t))
        ty = tl.str_to_ty(type_name(arg), None)
        return tl.tensor(_interp.TensorHandle(np.array([region.vaddr], dtype=np.uint64), ty), ty)

    def tensor_like(self, name: str, arg) -> tl.tensor:
        """The pointer argument ``name`` for an object with ``data_ptr()`` and a torch ``dtype`` that
        is not a tensor (see :mod:`.tensor_like`): its view (its own ``shape`` and strides from its
        address, or without a shape the whole storage) mapped onto the storage of the torch tensor
        its address points into (one of its attributes, else a live tensor of the program), else onto
        the memory it describes.

        Raises:
            UsageError: its address, shape or strides cannot be read (:func:`.tensor_like.describe`),
                no storage holds it and its memory cannot be wrapped (:func:`.tensor_like.foreign_tensor`),
                its view reaches past the storage found, its address is not a multiple of its
                element size from the storage's start, or its dtype is not one Triton takes.
        """
        desc = describe(name, arg)
        from triton._utils import type_canonicalisation_dict
        dtype = str(desc.dtype).replace("torch.", "")
        ty_name = type_canonicalisation_dict.get(dtype)
        if ty_name is None:
            raise UsageError(f"argument '{name}' ({desc.kind}) has dtype {desc.dtype}, which Triton does not take")
        owner = owner_of(arg, desc)
        if owner is None:
            owner = foreign_tensor(name, desc)
        st = owner.untyped_storage()
        start = desc.ptr - st.data_ptr() if st.data_ptr() else 0
        if start % desc.itemsize:
            raise UsageError(f"argument '{name}' ({desc.kind}) points {start} bytes into its storage, not a multiple "
                             f"of its element size ({desc.itemsize} bytes for {desc.dtype})")
        if desc.shape is not None and start + desc.span > st.nbytes():
            raise UsageError(f"argument '{name}' ({desc.kind}) describes a view of shape {list(desc.shape)} and strides "
                             f"{list(desc.strides)} ({desc.span} bytes from byte {start}) that reaches past its storage "
                             f"({st.nbytes()} bytes): its shape or strides are wrong")
        hs = self.storage(owner)
        if desc.shape is None:  # bounded by the whole storage; the kernel gets the object's address in it
            region = self.space.add(name, hs, 0, desc.itemsize, (st.nbytes() // desc.itemsize,), (1,), dtype)
            vaddr = region.vaddr + start
        else:
            region = self.space.add(name, hs, start, desc.itemsize, desc.shape, desc.strides, dtype)
            vaddr = region.vaddr
        ty = tl.str_to_ty("*" + ty_name, None)
        return tl.tensor(_interp.TensorHandle(np.array([vaddr], dtype=np.uint64), ty), ty)

    def convert(self, name: str, arg, spec: Tuple[str, bool] = ("", True)):
        """The argument ``name`` as the kernel receives it: a tensor (or an object with ``data_ptr()``
        and a torch ``dtype``, :meth:`tensor_like`) as a pointer, a tuple item by
        item, a ``TensorDescriptor`` as the interpreter's descriptor, a scalar typed by
        :func:`scalar_argument` (``spec``: its annotation and whether it is value-specialized).

        Raises:
            UsageError: a NumPy scalar (Triton refuses one natively); see :meth:`pointer`,
                :meth:`tensor_like`, :meth:`storage` and :func:`scalar_argument`.
        """
        if hasattr(arg, "data_ptr") and hasattr(arg, "untyped_storage") or \
                isinstance(arg, triton.runtime.jit.TensorWrapper) or is_tensor_like(arg):
            return self.pointer(name, arg)
        if isinstance(arg, tuple):
            items = [self.convert(f"{name}[{i}]", a, spec) for i, a in enumerate(arg)]
            return type(arg)(*items) if hasattr(arg, "_fields") else type(arg)(items)
        from triton.tools.tensor_descriptor import TensorDescriptor
        if isinstance(arg, TensorDescriptor):
            base = self.pointer(f"{name}.base", arg.base)
            strides = [_interp._implicit_cvt(s) for s in arg.strides]
            strides[-1] = tl.constexpr(1)
            kw = {}
            if "padding_option" in inspect.signature(_interp.interpreter_semantic.make_tensor_descriptor).parameters:
                kw["padding_option"] = arg.padding
            desc = _interp.interpreter_semantic.make_tensor_descriptor(
                base=base, shape=[_interp._implicit_cvt(s) for s in arg.shape], strides=strides,
                block_shape=[tl.constexpr(b) for b in arg.block_shape], **kw)
            if hasattr(desc.handle, "round_f32_to_tf32"):
                desc.handle.round_f32_to_tf32 = getattr(arg, "round_f32_to_tf32", False)
            return desc
        if isinstance(arg, np.generic):
            raise UsageError(
                f"argument {name} is a NumPy scalar ({type(arg).__name__} {arg!r}): Triton's launcher refuses it "
                f"natively ('failed to specialize argument of type: {type(arg).__name__}'), and so does its "
                f"interpreter; pass a Python number: {'float' if isinstance(arg, np.floating) else 'int'}({name})")
        return scalar_argument(arg, *spec)

    def copy_back(self) -> None:
        """Copy the host copies of device storages that a lane wrote back to the device (not in a
        config's worker process, whose writes are undone anyway)."""
        from .parallel import WORKER_HOST_STORAGES
        if WORKER_HOST_STORAGES is not None:
            return
        for hs in self.space.storages.values():
            if hs.device_storage is not None and hs.written:
                hs.device_storage.copy_(hs.host_storage)


def _own_bytes(t: torch.Tensor, own: set) -> bool:
    """Whether ``t`` is a uint8 tensor over exactly the bytes of one of tritonkit's host buffers."""
    return t.dtype == torch.uint8 and t.dim() == 1 and (t.data_ptr(), t.numel()) in own


class RawPointers:
    """Raw addresses a kernel loads as integers and uses as pointers (a pointer table of
    ``t.data_ptr()`` values, as grouped GEMMs and MoE kernels build) resolved to the live tensors
    they point into: each such tensor is mapped into the launch's address space as one more
    region (named ``tensor at 0x...``), so its accesses are checked against its bounds and
    performed, as on the GPU. An address inside no live tensor, made by an access whose other
    addresses are inside tables' tensors, belongs to the nearest of those (reported past its end or
    before its start); one made by an access with no such address stays unmapped (reason
    ``no_argument``). Neither is performed.

    Live tensors are found once per launch, when the first raw address is seen, by walking the
    objects Python's garbage collector tracks (every ``torch.Tensor`` is one); only tensors on the
    launch's devices (those of its tensor arguments, the CPU when it has none) are candidates, so
    a CPU address never resolves into a GPU tensor. Of several views of one storage, the one that
    spans the most bytes is taken (the base tensor, as a rule): a table of row views is then checked
    against the whole storage, which never reports a finding the GPU would not show.

    Args:
        mapper: the launch's :class:`ArgMapper` (maps storages, copies device ones to the host).
    """

    def __init__(self, mapper: ArgMapper) -> None:
        self.mapper = mapper
        self._index = None  # (starts uint64, ends uint64, tensors) sorted by start
        self._slots: Dict[int, int] = {}  # position in the index -> slot mapped

    def _build(self) -> None:
        import warnings
        devices = {("cpu" if hs.device_storage is None else hs.key[0].split(":")[0])
                   for hs in self.mapper.space.storages.values()} or {"cpu"}
        best: Dict[tuple, tuple] = {}
        # tritonkit's own byte views of mapped storages (a view's flag is lost where torch makes a
        # new Python object for it): a tie with them goes to the other view
        own = {(int(hs.buf.ctypes.data), int(hs.buf.nbytes)) for hs in self.mapper.space.storages.values()}
        with warnings.catch_warnings():  # isinstance() on some objects (deprecated torch aliases) warns
            warnings.simplefilter("ignore")
            objects = [o for o in tracked_objects() if isinstance(o, torch.Tensor)]
        for obj in objects:
            try:
                if obj.device.type not in devices or obj.layout != torch.strided or obj.numel() == 0 or \
                        getattr(obj, "_tritonkit_host", False):
                    continue
                st = obj.untyped_storage()
                key = (str(obj.device), st.data_ptr(), st.nbytes())
            except (RuntimeError, NotImplementedError):  # fake, functional, ... tensors: no storage
                continue
            if key[1] == 0 or key[2] == 0:
                continue
            rank = (obj.numel() * obj.element_size(), not _own_bytes(obj, own))
            have = best.get(key)
            if have is None or rank > have[0]:
                best[key] = (rank, obj)
        keys = sorted(best, key=lambda k: k[1])
        self._index = (np.array([k[1] for k in keys], dtype=np.uint64),
                       np.array([k[1] + k[2] for k in keys], dtype=np.uint64), [best[k][1] for k in keys])

    def __call__(self, addrs: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """Per raw address (uint64): the slot of the tensor it points into (0: none) and the address
        of that tensor's storage's first byte."""
        if self._index is None:
            self._build()
        starts, ends, tensors = self._index
        slots = np.zeros(addrs.shape[0], dtype=np.int64)
        bases = np.zeros(addrs.shape[0], dtype=np.int64)
        if not tensors:
            return slots, bases
        at = np.searchsorted(starts, addrs, side="right").astype(np.int64) - 1
        inside = (at >= 0) & (addrs < ends[np.maximum(at, 0)])
        for i in np.unique(at[inside]).tolist():
            slot = self._slots.get(i)
            if slot is None:
                t = tensors[i]
                hs = self.mapper.storage(t)
                size = t.element_size()
                region = self.mapper.space.add(f"tensor at {t.data_ptr():#x}", hs, t.storage_offset() * size, size,
                                               tuple(t.shape), tuple(t.stride()), _dtype_name(t))
                slot = self._slots[i] = region.slot
            sel = inside & (at == i)
            slots[sel] = slot
            bases[sel] = int(starts[i])
        stray = np.flatnonzero(~inside)
        hit = np.unique(at[inside])
        if stray.shape[0] and hit.shape[0]:
            # an address in no live tensor, made by the same access as addresses inside tables'
            # tensors (a tile past a matrix's last row): it belongs to the nearest of those tensors,
            # as an argument's overrun belongs to the argument, and is reported past its end (or
            # before its start) instead of outside every tensor; it is not performed either way
            a = addrs[stray].astype(np.float64)[:, None]
            lo, hi = starts[hit].astype(np.float64)[None, :], ends[hit].astype(np.float64)[None, :]
            nearest = hit[np.argmin(np.maximum(lo - a, a - hi), axis=1)]
            slots[stray] = [self._slots[i] for i in nearest.tolist()]
            bases[stray] = starts[nearest].astype(np.int64)
        return slots, bases


def normalize_grid(grid, kernel: str) -> Tuple[Tuple[int, int, int], int]:
    """``grid`` as ``((x, y, z) program counts, how many dims were given)``.

    Raises:
        UsageError: not 1 to 3 non-negative integers, or more programs along a dimension than a
            GPU launches (:data:`GRID_LIMITS`).
    """
    if not isinstance(grid, (tuple, list)):
        grid = (grid,)
    try:
        dims = tuple(int(g) for g in grid)
    except (TypeError, ValueError) as e:
        raise UsageError(f"kernel {kernel}: the grid must be a tuple of 1 to 3 integers, got {grid!r}") from e
    if not 1 <= len(dims) <= 3:
        raise UsageError(f"kernel {kernel}: the grid must have 1 to 3 dimensions, got {len(dims)}: {dims}")
    if any(d < 0 for d in dims):
        raise UsageError(f"kernel {kernel}: the grid has a negative dimension: {dims}")
    over = [f"{'xyz'[i]} = {d}" for i, d in enumerate(dims) if d > GRID_LIMITS[i]]
    if over:
        raise UsageError(f"kernel {kernel}: the grid {dims} is larger than a GPU launches ({', '.join(over)}; the "
                         f"limits are x <= {GRID_LIMITS[0]}, y and z <= {GRID_LIMITS[1]}): the launch fails on a "
                         "GPU. Fold the extra programs into x, or loop over them inside the kernel")
    return dims + (1,) * (3 - len(dims)), len(dims)


#: the most programs a grid may have along x, y and z: CUDA's grid dimension limits for every
#: compute capability since 3.0 (CUDA C++ Programming Guide, "Features and Technical Specifications")
GRID_LIMITS = (2 ** 31 - 1, 65535, 65535)


def bind_arguments(pyfn, args, kwargs):
    """Bind a launch's arguments to the kernel's parameters like Triton's JIT does.

    Returns:
        (bound arguments in signature order, names of constexpr parameters: a set shared between
        launches, not to be changed).
    Raises:
        UsageError: a parameter has no value, or too many positional arguments were given.
    """
    try:
        sig, constexprs = _SIGNATURES[pyfn]
    except (KeyError, TypeError):
        sig = inspect.signature(pyfn)
        constexprs = frozenset(n for n, p in sig.parameters.items() if _is_constexpr(p))
        try:
            _SIGNATURES[pyfn] = (sig, constexprs)
        except TypeError:  # a callable that takes no weak reference: made again next time
            pass
    params = sig.parameters
    kw = {k: v for k, v in kwargs.items() if k in params}
    try:
        bound = sig.bind(*args, **kw)
    except TypeError as e:
        raise UsageError(f"kernel {pyfn.__name__}: {e} (parameters: {', '.join(params)})") from None
    bound.apply_defaults()
    return dict(bound.arguments), constexprs


#: per kernel function (weakly held): its signature and constexpr parameters, its scalar specs
_SIGNATURES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_SPECS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def spec_item(v):
    """What a compiled kernel is specialized on for one argument: its type, or a constexpr's value."""
    if isinstance(v, tl.tensor):
        return str(v.type)
    if isinstance(v, tl.tensor_descriptor_base if hasattr(tl, "tensor_descriptor_base") else ()):
        return "desc"
    try:
        hash(v)
        return ("constexpr", v)
    except TypeError:
        return ("constexpr", repr(v))


