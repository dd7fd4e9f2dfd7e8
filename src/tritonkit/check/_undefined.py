"""``undefined_value``: masked-off lanes of a load without ``other=`` have no defined value on the GPU.

Triton's interpreter gives them 0, which hides bugs that show on the GPU (a sum over a row whose
tail was never loaded, an fp16 max over garbage). Under check such lanes are *poisoned* (NaN for
floats, the type's largest value for integers) and *tracked* as the ``undef`` lane taint
(``_taint``), whose origin is the kernel line of the load.

A finding is made where an undefined lane reaches:

* a store or atomic whose mask lets the lane through (the garbage is written to memory);
* a reduction or scan (``tl.sum``, ``tl.max``, ``tl.cumsum``, ...), which mixes it into the
  results of defined lanes;
* the address of a load or store (a pointer computed from an undefined offset).

Then the tracking of that value stops, so one bug gives one finding per line.
"""
from __future__ import annotations

import numpy as np
from triton.runtime import interpreter as _interp

from . import _taint
from ._numerics import BITS_TYPES, from_float

TensorHandle = _interp.TensorHandle


def poison(out: np.ndarray, off: np.ndarray, ty, origin) -> TensorHandle:
    """Poison the lanes ``off`` (bool, True = masked off) of a loaded block and mark them undefined."""
    if out.dtype.kind == "f":
        out[off] = np.nan
    elif ty.name in BITS_TYPES:
        out[off] = from_float(np.array([np.nan], dtype=np.float32), ty)[0]
    elif out.dtype.kind in "iu":
        out[off] = np.iinfo(out.dtype).max
    return _taint.mark(TensorHandle(out, ty), "undef", off, origin)
