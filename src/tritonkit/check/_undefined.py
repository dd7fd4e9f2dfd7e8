"""``undefined_value``: masked-off lanes of a load without ``other=`` have no defined value on the GPU.

Triton's interpreter gives them 0, which hides bugs that show on the GPU (a sum over a row whose
tail was never loaded, an fp16 max over garbage). Under check such lanes are *poisoned* (NaN for
floats, the type's largest value for integers) and *tracked*: every value handle may carry
``undef``, a bool array of its lanes that derive from an undefined lane, and ``undef_at``, the
kernel line of the load they came from. Elementwise operations, casts, shape operations and
``tl.dot`` (row/column-wise) carry it along; ``tl.where`` keeps only the lanes it selects.

A finding is made where an undefined lane reaches:

* a store or atomic whose mask lets the lane through (the garbage is written to memory);
* a reduction or scan (``tl.sum``, ``tl.max``, ``tl.cumsum``, ...), which mixes it into the
  results of defined lanes;
* the address of a load or store (a pointer computed from an undefined offset).

Then the tracking of that value stops, so one bug gives one finding per line.
"""
from __future__ import annotations

from typing import Optional

import numpy as np
from triton.runtime import interpreter as _interp

from ._numerics import BITS_TYPES, from_float

TensorHandle = _interp.TensorHandle


def install(scope) -> None:
    """Give every TensorHandle a class-level ``undef = None`` (fast to test) for the launch."""
    scope.set_attr(TensorHandle, "undef", None)
    scope.set_attr(TensorHandle, "undef_at", None)


def poison(out: np.ndarray, off: np.ndarray, ty, origin) -> TensorHandle:
    """Poison the lanes ``off`` (bool, True = masked off) of a loaded block and mark them undefined."""
    if out.dtype.kind == "f":
        out[off] = np.nan
    elif ty.name in BITS_TYPES:
        out[off] = from_float(np.array([np.nan], dtype=np.float32), ty)[0]
    elif out.dtype.kind in "iu":
        out[off] = np.iinfo(out.dtype).max
    h = TensorHandle(out, ty)
    h.undef = off
    h.undef_at = origin
    return h


def carry(out: TensorHandle, *ins) -> TensorHandle:
    """``out`` computed elementwise (with broadcasting) from ``ins``: undefined where any input is."""
    u = None
    origin = None
    for h in ins:
        hu = getattr(h, "undef", None)
        if hu is not None:
            origin = origin or h.undef_at
            u = hu if u is None else (u | hu)
    if u is not None:
        shape = np.shape(out.data)
        out.undef = u if u.shape == shape else np.broadcast_to(u, shape)
        out.undef_at = origin
    return out


def carry_shape(out: TensorHandle, src: TensorHandle, fn) -> TensorHandle:
    """``out`` is ``src`` reshaped/transposed/broadcast by ``fn`` (applied to the undef mask too)."""
    if src.undef is not None:
        out.undef = fn(src.undef)
        out.undef_at = src.undef_at
    return out


def select(out: TensorHandle, cond: TensorHandle, lhs: TensorHandle, rhs: TensorHandle) -> TensorHandle:
    """``tl.where(cond, lhs, rhs)``: undefined where the selected side is, or the condition is."""
    if cond.undef is None and lhs.undef is None and rhs.undef is None:
        return out
    shape = np.shape(out.data)
    c = np.broadcast_to(np.asarray(cond.data, dtype=bool), shape)
    lu = np.broadcast_to(lhs.undef, shape) if lhs.undef is not None else False
    ru = np.broadcast_to(rhs.undef, shape) if rhs.undef is not None else False
    u = np.where(c, lu, ru)
    if cond.undef is not None:
        u = u | np.broadcast_to(cond.undef, shape)
    if np.any(u):
        out.undef = np.asarray(u, dtype=bool)
        out.undef_at = cond.undef_at or lhs.undef_at or rhs.undef_at
    return out


def dot(out: TensorHandle, a: TensorHandle, b: TensorHandle, d: TensorHandle) -> TensorHandle:
    """``a @ b + d``: an output lane is undefined when its row of ``a`` or column of ``b`` has one."""
    if a.undef is None and b.undef is None and d.undef is None:
        return out
    shape = np.shape(out.data)
    u = np.zeros(shape, dtype=bool)
    if a.undef is not None:
        u |= np.broadcast_to(np.broadcast_to(a.undef, np.shape(a.data)).any(axis=-1)[..., :, None], shape)
    if b.undef is not None:
        u |= np.broadcast_to(np.broadcast_to(b.undef, np.shape(b.data)).any(axis=-2)[..., None, :], shape)
    if d.undef is not None:
        u |= np.broadcast_to(d.undef, shape)
    out.undef = u
    out.undef_at = a.undef_at or b.undef_at or d.undef_at
    return out


def active(h: TensorHandle, shape, mask: Optional[np.ndarray]) -> Optional[np.ndarray]:
    """The lanes of ``h`` (broadcast to ``shape``) that are undefined and let through by ``mask``."""
    if h.undef is None:
        return None
    u = np.broadcast_to(h.undef, shape)
    if mask is not None:
        u = u & np.broadcast_to(mask, shape)
    return u if u.any() else None
