"""The checked interpreter's memory: where a tensor argument's elements are.

Every tensor argument of a launch gets its own 1 TiB slot of a *virtual* address space (see
:mod:`.space`): :func:`slot_base` is where a slot starts, :class:`HostStorage` the host bytes of one
torch storage, :class:`Layout` which of those bytes belong to one view (and the element coordinates
of a byte offset), :class:`Region` one argument as the interpreter sees it.
"""
from __future__ import annotations

import dataclasses
from typing import Dict, Optional, Sequence, Tuple

import numpy as np

SLOT_SHIFT = 40  # 1 TiB of virtual address space per argument
SLOT_HALF = 1 << (SLOT_SHIFT - 1)
_MAX_MASK_ELEMENTS = 1 << 26  # element masks for odd (overlapping) views up to 64 Mi elements


def slot_base(slot: int) -> int:
    """Virtual address of byte 0 of the storage mapped in ``slot`` (slots start at 1)."""
    return (slot << SLOT_SHIFT) + SLOT_HALF


@dataclasses.dataclass
class HostStorage:
    """Host bytes of one torch storage used by a launch.

    ``buf`` is a writable ``uint8`` numpy array over the storage: the storage's own memory for a
    CPU tensor, a host copy for a tensor on another device (copied back after the launch if any
    lane wrote to it). ``shared``: that copy lives in a shared mapping, which workers of a launch
    shared out write in place (see :mod:`.host`); ``fill``: the one value its bytes held when copied
    (as :class:`~.host.HostCopy` gives it: None for more than one, ``False`` where not looked for, or
    once a committed transaction or a write outside one changed the bytes).
    """

    buf: np.ndarray
    device_storage: Optional[object] = None  # torch.UntypedStorage on the device, None for CPU
    host_storage: Optional[object] = None
    written: bool = False
    key: tuple = ()  # (device, data pointer, bytes) of the torch storage
    shared: bool = False
    fill: object = False
    _typed: Dict[np.dtype, np.ndarray] = dataclasses.field(default_factory=dict)

    @property
    def nbytes(self) -> int:
        """The storage's size in bytes."""
        return self.buf.shape[0]

    def typed(self, dtype: np.dtype) -> np.ndarray:
        """The storage viewed as ``dtype`` elements (trailing bytes that do not fill one dropped)."""
        view = self._typed.get(dtype)
        if view is None:
            size = np.dtype(dtype).itemsize
            view = self.buf[: self.nbytes - self.nbytes % size].view(dtype)
            self._typed[dtype] = view
        return view


class Layout:
    """Which bytes of a storage belong to one tensor view, and element coordinates of offsets.

    Args:
        start: byte offset of the view's first element in the storage.
        itemsize: bytes per element.
        shape, strides: the view's sizes and strides in elements (as torch reports them).
    """

    def __init__(self, start: int, itemsize: int, shape: Sequence[int], strides: Sequence[int]):
        self.start = int(start)
        self.itemsize = int(itemsize)
        self.shape = tuple(int(s) for s in shape)
        self.strides = tuple(int(s) for s in strides)
        self.numel = int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1
        # dims that move through memory, biggest stride first (stride-0 and size-1 dims add nothing)
        moving = [(st, sz, d) for d, (sz, st) in enumerate(zip(self.shape, self.strides)) if sz > 1 and st != 0]
        moving.sort(key=lambda t: -t[0])
        self._order = moving
        span = 1 + sum((sz - 1) * st for st, sz, _ in moving)
        self.dense = self.numel > 0 and span == self._distinct_elements()
        nested = all(moving[i][0] >= moving[i + 1][0] * moving[i + 1][1] for i in range(len(moving) - 1))
        self.nested = nested and all(st > 0 for st, _, _ in moving)
        self.span_elems = span if self.numel > 0 else 0
        self._mask: Optional[np.ndarray] = None

    def _distinct_elements(self) -> int:
        n = 1
        for _, sz, _ in self._order:
            n *= sz
        return n

    @property
    def end(self) -> int:
        """One past the last byte of the view's span."""
        return self.start + self.span_elems * self.itemsize

    def valid(self, off: np.ndarray, size: int) -> np.ndarray:
        """Whether each access of ``size`` bytes at storage byte offset ``off`` lies inside the view.

        Accesses are taken to be aligned to the access size (the bounds check reports misaligned
        ones separately); an access must not straddle two elements of a strided view.

        Args:
            off: int64 array of byte offsets from the storage's first byte.
            size: bytes per access.
        Returns:
            bool array of ``off``'s shape.
        """
        if self.numel == 0:
            return np.zeros(off.shape, dtype=bool)
        rel = off - self.start
        in_span = (rel >= 0) & (rel + size <= self.span_elems * self.itemsize)
        if self.dense:
            return in_span
        elem, within = np.divmod(rel, self.itemsize)
        ok = in_span & (within + size <= self.itemsize)
        if not ok.any():
            return ok
        if self.nested:
            rem = elem.copy()
            for st, sz, _ in self._order:
                q, rem = np.divmod(rem, st)
                ok &= q < sz
            ok &= rem == 0
            return ok
        mask = self._element_mask()
        if mask is None:  # very large overlapping view: accept its span (documented approximation)
            return ok
        idx = np.where(ok, elem, 0)
        return ok & mask[idx]

    def _element_mask(self) -> Optional[np.ndarray]:
        if self._mask is None and self.span_elems <= _MAX_MASK_ELEMENTS:
            offs = np.zeros(1, dtype=np.int64)
            for st, sz, _ in self._order:
                offs = (offs[:, None] + np.arange(sz, dtype=np.int64)[None, :] * st).ravel()
            mask = np.zeros(self.span_elems, dtype=bool)
            mask[offs] = True
            self._mask = mask
        return self._mask

    def coords(self, off: np.ndarray) -> np.ndarray:
        """Element coordinates in the view of byte offsets ``off`` (int64, shape ``(n, ndim)``).

        The leading moving dim is unbounded, so offsets past the end map to rows past the last
        (``x[1000]`` of a 1000-element tensor) and offsets before the start to negative ones.
        """
        rel = np.asarray(off, dtype=np.int64) - self.start
        elem = np.floor_divide(rel, self.itemsize)
        out = np.zeros((elem.shape[0], max(1, len(self.shape))), dtype=np.int64)
        if not self._order:
            out[:, 0] = elem
            return out
        rem = elem
        for st, _, d in self._order:
            q = np.floor_divide(rem, st)
            rem = rem - q * st
            out[:, d] = q
        return out


@dataclasses.dataclass
class Region:
    """One tensor argument of a launch as the checked interpreter sees it.

    Attributes:
        slot: its slot in the virtual address space (1-based).
        name: the argument's name in the kernel's signature (``desc.base`` for a tensor
            descriptor's tensor, ``ptrs[1]`` for an element of a tuple argument).
        shape, strides: the view's sizes and strides in elements.
        dtype: the torch dtype's name, e.g. ``"float32"``.
        storage: the host bytes it is mapped onto.
        layout: which of those bytes belong to the view.
    """

    slot: int
    name: str
    shape: Tuple[int, ...]
    strides: Tuple[int, ...]
    dtype: str
    storage: HostStorage
    layout: Layout

    @property
    def vaddr(self) -> int:
        """The virtual address handed to the kernel for this argument (its ``data_ptr``)."""
        return slot_base(self.slot) + self.layout.start

    def describe(self) -> dict:
        """The argument as findings name it: ``{"name", "shape", "dtype", "strides"}`` (strides in elements)."""
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype, "strides": list(self.strides)}
