"""Pointer blocks whose addresses are made only when something reads them.

``ptr + offsets`` in a kernel (``tl.load(x_ptr + offs)``) makes a block of uint64 addresses, which
the load then resolves back to (argument, byte offset) and checks: for a vector add of 2**22
elements, three blocks of 32 MiB of addresses made and read again several times (measured on the
CPU machine, 2026-11-27: pointer arithmetic and resolving took half of a warm checked launch).

:class:`LazyAddresses` keeps the two operands instead: the pointer block (``base``: uint64, often a
broadcast view of one pointer or of one pointer per program) and the element offsets (an integer
array) with the element size. A load or store hands them to
:meth:`~tritonkit.check.memory.AddressSpace.resolve_sum`, which takes the lanes' extremes and
whether they are consecutive from the operands' compact forms, without the addresses (and without
the byte offsets, while nothing asks for them). Anything else that reads the block (``.data``: a
``tl.where`` over pointers, a reshape, a loop-carried pointer) gets the addresses Triton's
interpreter would have made, once, and from then on the handle is an ordinary one.
"""
from __future__ import annotations

import numpy as np
from triton.runtime import interpreter as _interp

TensorHandle = _interp.TensorHandle


class LazyAddresses(TensorHandle):
    """A pointer block ``base + offsets * size`` (wrapping uint64 byte addresses, as Triton's
    interpreter computes them) whose addresses are made on the first read of :attr:`data`.

    Args:
        base: uint64 addresses broadcastable to ``offsets.shape`` (a view is fine: it is not written).
        offsets: the element offsets, a signed or unsigned integer array of the block's shape.
        size: bytes an element (the pointee's size; 1 for ``int1``).
        dtype: the handle's Triton pointer type.
    """

    def __init__(self, base: np.ndarray, offsets: np.ndarray, size: int, dtype) -> None:
        # not the dataclass's __init__: it would assign (and so make) ``data``
        self._addrs = None
        self.base, self.offsets, self.size = base, offsets, int(size)
        self.dtype = dtype
        self.attr = {}

    @property
    def data(self) -> np.ndarray:
        """The uint64 addresses (made on first use, then kept)."""
        addrs = self._addrs
        if addrs is None:
            addrs = self._addrs = make_addresses(self.base, self.offsets, self.size)
        return addrs

    @data.setter
    def data(self, value) -> None:
        self._addrs = value

    @property
    def shape(self):
        """The block's shape (made or not)."""
        return self.offsets.shape if self._addrs is None else self._addrs.shape

    @property
    def nbytes(self) -> int:
        """Bytes the addresses take, or would take once made (8 a lane)."""
        return 8 * int(self.offsets.size)


def make_addresses(base: np.ndarray, offsets: np.ndarray, size: int) -> np.ndarray:
    """``base + offsets * size`` as wrapping uint64 addresses of ``offsets``' shape: the cast and the
    multiply in one pass (int64 -1 becomes 2**64 - 1, as ``astype`` makes it), the add in place."""
    if size != 1:
        addr = np.multiply(offsets, np.uint64(size), dtype=np.uint64, casting="unsafe")
    else:
        addr = offsets.astype(np.uint64)
    addr += base
    return addr


def shape_of(h) -> tuple:
    """A handle's block shape, without making a :class:`LazyAddresses`' addresses."""
    return h.shape if isinstance(h, LazyAddresses) else h.data.shape


def unmade(h) -> bool:
    """Whether ``h`` is a pointer block whose addresses are not made yet."""
    return isinstance(h, LazyAddresses) and h._addrs is None


def broadcast(h: "LazyAddresses", shape) -> "LazyAddresses":
    """``h`` broadcast to ``shape``, still unmade (views of its operands)."""
    out = LazyAddresses(np.broadcast_to(h.base, shape), np.broadcast_to(h.offsets, shape), h.size, h.dtype)
    out.attr = h.attr
    return out
