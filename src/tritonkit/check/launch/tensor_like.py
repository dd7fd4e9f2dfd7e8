"""Pointer arguments that are not ``torch.Tensor``: objects with ``data_ptr()`` and a torch ``dtype``.

Triton's launcher passes any object with a ``data_ptr()`` method and a ``dtype`` as a pointer, and
kernel libraries use that for strided buffers (a base tensor with another shape, strides or start,
FlagGems' ``StridedBuffer`` for one). The checked interpreter maps such an argument like a tensor
(:meth:`~tritonkit.check.launch.arguments.ArgMapper.tensor_like`):

* its bytes are those of the storage its address points into: a ``torch.Tensor`` among the
  object's attributes (:func:`owner_in_attributes`), else a live tensor of the program
  (:func:`owner_among`, a walk of the garbage collector's objects), else, where the object gives its
  shape and its device is known, the memory it describes itself (:func:`foreign_tensor`);
* its view is the object's own ``shape`` and ``stride()`` (``strides``), in elements of its dtype,
  starting at its ``data_ptr()``: out-of-bounds accesses are reported against them, with the
  argument's name; an object without ``shape`` is bounded by the whole storage found.
"""
from __future__ import annotations

import dataclasses
import gc
from typing import Iterable, Optional, Tuple

import numpy as np
import torch

from ..errors import UsageError


def is_tensor_like(arg) -> bool:
    """Whether ``arg`` is a pointer argument that is not a tensor: an object with ``data_ptr()`` and
    a torch ``dtype`` (not a ``torch.Tensor``, not a type)."""
    return not isinstance(arg, (torch.Tensor, type)) and callable(getattr(arg, "data_ptr", None)) \
        and isinstance(getattr(arg, "dtype", None), torch.dtype)


@dataclasses.dataclass
class TensorLike:
    """What a tensor-like argument says of itself.

    Attributes:
        ptr: its ``data_ptr()``; dtype: its torch dtype; itemsize: bytes an element;
        shape, strides: its view in elements (None: it gives no shape); device: its ``device``
        (None: it gives none); kind: its class's name.
    """

    ptr: int
    dtype: torch.dtype
    itemsize: int
    shape: Optional[Tuple[int, ...]]
    strides: Optional[Tuple[int, ...]]
    device: Optional[torch.device]
    kind: str = ""

    @property
    def span(self) -> int:
        """Bytes from its first element's to one past its last (0 without a shape or elements)."""
        if self.shape is None or any(s == 0 for s in self.shape):
            return 0
        return (1 + sum((n - 1) * s for n, s in zip(self.shape, self.strides))) * self.itemsize


def _ints(value, what: str, name: str) -> Tuple[int, ...]:
    try:
        return tuple(int(v) for v in value)
    except (TypeError, ValueError):
        raise UsageError(f"argument '{name}' ({type(value).__name__}) has a {what} that is not a sequence of "
                         f"integers: {value!r}") from None


def describe(name: str, arg) -> TensorLike:
    """Read a tensor-like argument ``name`` (see :func:`is_tensor_like`): its address, dtype,
    ``shape``, ``stride()`` (or ``strides``; contiguous where it gives a shape and no strides) and
    ``device``.

    Raises:
        UsageError: its ``data_ptr()`` is not an integer, its shape or strides not integers, as many
            strides as dimensions missing, or a stride negative.
    """
    what = type(arg).__name__
    try:
        ptr = int(arg.data_ptr())
    except (TypeError, ValueError) as e:
        raise UsageError(f"argument '{name}' ({what}): data_ptr() did not give an address: {e}") from None
    dtype = arg.dtype
    shape = getattr(arg, "shape", None)
    shape = None if shape is None else _ints(shape, "shape", name)
    strides = None
    if shape is not None:
        got = getattr(arg, "stride", None)
        got = got() if callable(got) else got
        got = getattr(arg, "strides", None) if got is None else got
        if got is None:
            strides, acc = [], 1
            for n in reversed(shape):
                strides.insert(0, acc)
                acc *= max(n, 1)
            strides = tuple(strides)
        else:
            strides = _ints(got, "stride", name)
        if len(strides) != len(shape):
            raise UsageError(f"argument '{name}' ({what}) has {len(shape)} dimensions but {len(strides)} strides")
        if any(s < 0 for s in strides):
            raise UsageError(f"argument '{name}' ({what}) has a negative stride {strides}: torch tensors have none, "
                             "and tritonkit checks views with non-negative strides only")
    device = getattr(arg, "device", None)
    try:
        device = None if device is None else torch.device(device)
    except (TypeError, RuntimeError):
        device = None
    itemsize = torch.empty((), dtype=dtype).element_size()
    return TensorLike(ptr, dtype, itemsize, shape, strides, device, what)


def _storage_range(t: torch.Tensor) -> Optional[Tuple[int, int]]:
    try:
        if t.layout != torch.strided:
            return None
        st = t.untyped_storage()
        return st.data_ptr(), st.nbytes()
    except (RuntimeError, NotImplementedError):  # fake, functional, ... tensors: no storage
        return None


def _holds(t: torch.Tensor, desc: TensorLike) -> bool:
    """Whether ``t``'s storage holds the object's first element (and its whole view, if it has one),
    on the object's device where it names one."""
    if desc.device is not None and not _same_device(t.device, desc.device):
        return False
    got = _storage_range(t)
    if got is None or got[0] == 0:
        return False
    start, nbytes = got
    return start <= desc.ptr < start + nbytes or (desc.ptr == start + nbytes and desc.span == 0)


def _same_device(a: torch.device, b: torch.device) -> bool:
    return a.type == b.type and (a.index is None or b.index is None or a.index == b.index)


def owner_in_attributes(arg, desc: TensorLike) -> Optional[torch.Tensor]:
    """A ``torch.Tensor`` among ``arg``'s attributes (its ``__dict__`` and ``__slots__``, a tuple or
    list of them one level down) whose storage holds the object's address, or None."""
    values = list(getattr(arg, "__dict__", {}).values())
    for cls in type(arg).__mro__:
        slots = cls.__dict__.get("__slots__", ())
        for slot in (slots,) if isinstance(slots, str) else slots:
            values.append(getattr(arg, slot, None))
    for value in values:
        for item in value if isinstance(value, (tuple, list)) else (value,):
            if isinstance(item, torch.Tensor) and _holds(item, desc):
                return item
    return None


def owner_among(objects: Iterable, desc: TensorLike) -> Optional[torch.Tensor]:
    """Of ``objects`` (every object the garbage collector tracks), a ``torch.Tensor`` whose storage
    holds the object's address, or None."""
    import warnings
    with warnings.catch_warnings():  # isinstance() on some objects (deprecated torch aliases) warns
        warnings.simplefilter("ignore")
        for obj in objects:
            if isinstance(obj, torch.Tensor) and not getattr(obj, "_tritonkit_host", False) and _holds(obj, desc):
                return obj
    return None


def tracked_objects() -> list:
    """Every object the garbage collector tracks, those ``gc.freeze`` set aside included (a check
    session freezes what it finds, :class:`~tritonkit.check.memory.allocator.frozen_heap`, and
    ``gc.get_objects`` leaves frozen objects out): they are handed back for the look and frozen
    again, with what was made since."""
    frozen = gc.get_freeze_count()
    if frozen:
        gc.unfreeze()
    try:
        return gc.get_objects()
    finally:
        if frozen:
            gc.freeze()


def owner_of(arg, desc: TensorLike) -> Optional[torch.Tensor]:
    """The torch tensor whose storage holds a tensor-like argument's address: one of its attributes
    (:func:`owner_in_attributes`), else a live tensor of the program (:func:`owner_among`), else None."""
    found = owner_in_attributes(arg, desc)
    return found if found is not None else owner_among(tracked_objects(), desc)


class _Interface:
    """The bytes of a view as NumPy's array interface (or CUDA's) describes them, for a tensor over them."""

    def __init__(self, ptr: int, nbytes: int, cuda: bool) -> None:
        face = {"shape": (nbytes,), "typestr": "|u1", "data": (ptr, False), "version": 3}
        setattr(self, "__cuda_array_interface__" if cuda else "__array_interface__", face)


def foreign_tensor(name: str, desc: TensorLike) -> torch.Tensor:
    """A uint8 tensor over the bytes the object's view spans, where no torch tensor holds its address:
    the memory it describes itself, read and written in place (on its device: a CUDA view is
    copied to the host and back like a tensor's storage). An object with no elements gets an empty
    tensor.

    Raises:
        UsageError: the object gives no shape (its bytes cannot be told), or no ``device`` while
            CUDA is in use (its address could be the GPU's), or torch cannot wrap its memory.
    """
    what = f"argument '{name}' ({desc.kind})"
    if desc.shape is not None and desc.span == 0:
        return torch.empty(0, dtype=torch.uint8, device=desc.device or "cpu")
    if desc.shape is None:
        raise UsageError(f"{what} points at {desc.ptr:#x}, which no live torch tensor holds, and it has no shape: "
                         "tritonkit cannot tell its bytes; give it a shape and stride(), or pass a tensor")
    device = desc.device
    if device is None and torch.cuda.is_initialized():
        raise UsageError(f"{what} points at {desc.ptr:#x}, which no live torch tensor holds, and it has no device "
                         "while CUDA is in use: give it a device attribute, or pass a tensor")
    try:
        if device is None or device.type == "cpu":
            return torch.from_numpy(np.asarray(_Interface(desc.ptr, desc.span, cuda=False)))
        if device.type == "cuda":
            return torch.as_tensor(_Interface(desc.ptr, desc.span, cuda=True), device=device)
    except (TypeError, ValueError, RuntimeError) as e:
        raise UsageError(f"{what} points at {desc.ptr:#x}, which no live torch tensor holds, and torch cannot wrap "
                         f"its memory: {e}") from None
    raise UsageError(f"{what} points at {desc.ptr:#x} on {device}, which no live torch tensor holds: pass a tensor")
