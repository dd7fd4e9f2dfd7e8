"""What the checks are told of one memory operation before it is performed: :class:`Access`, and,
for a block-pointer load or store, the block pointer's declared shape (:class:`BlockShape`).

A block pointer (``tl.make_block_ptr``, Triton < 3.7) declares a ``shape``; ``tl.load`` and
``tl.store`` mask only the dimensions named in ``boundary_check``. On a dimension left out, the GPU
performs every lane of the block, also those past the declared shape: a block of rows that runs
past ``T`` in ``x + i_bh * T * K`` reads (or writes) the next head's rows, inside the tensor, so no
address check sees it. :class:`BlockShape` tells those lanes apart for the ``out_of_bounds`` check
(reason ``outside_block_shape``, see :mod:`tritonkit.check.checks.bounds`).
"""
from __future__ import annotations

import contextlib
import dataclasses
from typing import Iterator, List, Optional, Sequence

import numpy as np


@dataclasses.dataclass(slots=True)
class Access:
    """One memory operation, before it is performed (what the checks' access hooks are told).

    Attributes:
        op: what the kernel did: ``"load"``, ``"store"``, ``"atomic_add"``, ``"atomic_cas"``,
            ``"descriptor_load"``, ...
        kind: ``"load"``, ``"store"`` or ``"atomic"``.
        size: bytes per lane.
        masked: whether the kernel gave a mask (explicit, or the bounds of a descriptor/block pointer).
        shape: the block's shape (the program axis first under the batched engine).
        sem: for atomics, the memory semantics (``"acq_rel"``, ``"acquire"``, ``"release"``,
            ``"relaxed"``); ``""`` for loads and stores.
        block: for a block-pointer load or store with a dimension not in ``boundary_check``, the
            block pointer's declared shape and offsets (:class:`BlockShape`); else None.
        volatile: a volatile load (``tl.load(..., volatile=True)``, ``tl.atomic_load``): like an
            atomic, what a program polls while it waits for another.
    """

    op: str
    kind: str
    size: int
    masked: bool
    shape: tuple
    sem: str
    block: Optional["BlockShape"] = None
    volatile: bool = False


def _ints(handles) -> List[np.ndarray]:
    """Scalar handles (or ints) as int64 arrays of shape ``(1,)``, or ``(P,)`` for a value of each
    program of a batch."""
    return [np.asarray(getattr(h, "data", h)).astype(np.int64).reshape(-1) for h in handles]


class BlockShape:
    """A block pointer's declared shape, the block's offsets and the dimensions ``boundary_check``
    masks, at one load or store.

    Attributes:
        shape, offsets: per dimension, int64 arrays of shape ``(1,)`` or, under the batched engine,
            ``(P,)`` (a value per program of the batch).
        block_shape: the block's shape (ints).
        checked: the dimensions in ``boundary_check`` (sorted ints).
    """

    __slots__ = ("shape", "offsets", "block_shape", "checked")

    def __init__(self, shape: Sequence[np.ndarray], offsets: Sequence[np.ndarray], block_shape: Sequence[int],
                 checked: Sequence[int]) -> None:
        self.shape = list(shape)
        self.offsets = list(offsets)
        self.block_shape = tuple(int(b) for b in block_shape)
        self.checked = tuple(sorted(int(d) for d in checked))

    @classmethod
    def of(cls, ptr, boundary_check) -> Optional["BlockShape"]:
        """The block shape of a block pointer handle ``ptr`` (Triton's interpreter's
        ``BlockPointerHandle``: ``shape``, ``offsets``, ``block_shape``) loaded or stored with
        ``boundary_check`` (dimensions); None where every dimension is checked (no lane can run past
        the shape unmasked)."""
        checked = [int(getattr(d, "value", d)) for d in (boundary_check or ())]
        block_shape = [int(getattr(b, "value", b)) for b in ptr.block_shape]
        if all(d in checked for d in range(len(block_shape))):
            return None
        return cls(_ints(ptr.shape), _ints(ptr.offsets), block_shape, checked)

    def _outside_dim(self, dim: int) -> Optional[np.ndarray]:
        """Per program (rows) and index of the block along ``dim`` (columns), whether the index is
        outside the declared shape (bool ``(1 or P, block_shape[dim])``); None where none is."""
        off, bound = self.offsets[dim], self.shape[dim]
        n = self.block_shape[dim]
        if off.min() >= 0 and (off + n <= bound).all():
            return None
        idx = off[:, None] + np.arange(n, dtype=np.int64)[None, :]
        out = (idx < 0) | (idx >= bound[:, None])
        return out if out.any() else None

    def outside(self, access_shape: tuple) -> Optional[np.ndarray]:
        """Whether each lane of the access (flat, over ``access_shape``: the block, with the program
        axis first under the batched engine) is outside the declared shape on a dimension not in
        ``boundary_check``; None where no lane is."""
        nd = len(self.block_shape)
        lead = len(access_shape) - nd  # 1: the batched engine's program axis
        out = None
        for dim in range(nd):
            if dim in self.checked:
                continue
            part = self._outside_dim(dim)
            if part is None:
                continue
            shape = [1] * len(access_shape)
            shape[dim + lead] = self.block_shape[dim]
            if lead:
                shape[0] = part.shape[0]
                part = part.reshape(shape)
            else:
                part = part[0].reshape(shape)
            out = part if out is None else out | part
        if out is None:
            return None
        return np.broadcast_to(out, access_shape).reshape(-1)

    def example(self, program_id: Sequence[int], lane: int, access_shape: tuple) -> dict:
        """What a finding shows of the block of the program that made flat lane ``lane`` of the
        access: ``{"program_id", "shape" (declared), "offsets", "block_shape", "boundary_check",
        "dims"}``, ``dims`` the unchecked dimensions its block runs outside the shape on."""
        nd = len(self.block_shape)
        p = lane // int(np.prod(self.block_shape)) if len(access_shape) > nd else 0

        def at(a: np.ndarray) -> int:
            return int(a[min(p, a.shape[0] - 1)])
        shape = [at(s) for s in self.shape]
        offsets = [at(o) for o in self.offsets]
        dims = [d for d in range(nd) if d not in self.checked
                and (offsets[d] < 0 or offsets[d] + self.block_shape[d] > shape[d])]
        return {"program_id": list(program_id), "shape": shape, "offsets": offsets,
                "block_shape": list(self.block_shape), "boundary_check": list(self.checked), "dims": dims}


@contextlib.contextmanager
def labelled(builder, op: str, block: Optional[BlockShape] = None) -> Iterator[None]:
    """Inside the block, the memory operations ``builder`` (a checked builder) makes are labelled
    ``op`` (e.g. ``"block_ptr_load"``) and carry ``block``."""
    prev = builder._op, builder._block
    builder._op, builder._block = op, block
    try:
        yield
    finally:
        builder._op, builder._block = prev
