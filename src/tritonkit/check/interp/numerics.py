"""Floating-point formats held and rounded the way the GPU holds and rounds them.

Triton's interpreter stores bfloat16 and the fp8 formats as raw unsigned integers (numpy has no
such types), so any arithmetic on them must decode to float32 first and round back after every
operation, as compiled code does. This module is that arithmetic:

* :func:`to_float` decodes a Triton float type's storage to float32 (float64 stays float64),
  exactly: every bf16, fp16 and fp8 value is a float32 value.
* :func:`from_float` rounds float32/float64 values to a Triton float type's storage, to nearest
  even (or toward zero, ``rtz=True``), like ``cvt.rn``/``cvt.rz`` on NVIDIA GPUs. Conversions to
  the fp8 formats saturate (``cvt.rn.satfinite``, what Triton emits on sm_89+): values beyond the
  largest finite value, infinities included, become that value with their sign.
* :func:`tf32_truncate`, :func:`tf32_round` give the tf32 inputs of a tensor-core ``tl.dot``.

fp8 formats (bit layouts from Triton's ``tl.float8*`` types and the OCP / AMD definitions):

=============== ======= ======== ====== =============================== ==================
Triton type     exp bits mantissa bias  special values                  largest finite
=============== ======= ======== ====== =============================== ==================
float8e5        5       2        15     IEEE: inf and NaN               57344
float8e4nv      4       3        7      no inf; NaN = S.1111.111        448
float8e4b15     4       3        15     no inf; NaN = S.1111.111 [1]_   1.875
float8e5b16     5       2        16     no inf, no -0; NaN = 0x80       57344
float8e4b8      4       3        8      no inf, no -0; NaN = 0x80       240
=============== ======= ======== ====== =============================== ==================

.. [1] Triton's own pre-Hopper format; its NaN encoding is assumed to follow float8e4nv.
"""
from __future__ import annotations

from typing import Dict, Optional, Tuple

import numpy as np

_U32 = np.uint32

# Triton type name -> (exponent bits, mantissa bits, bias, special-value scheme)
_FP8: Dict[str, Tuple[int, int, int, str]] = {
    "fp8e5": (5, 2, 15, "ieee"),
    "fp8e4nv": (4, 3, 7, "fn"),
    "fp8e4b15": (4, 3, 15, "fn"),
    "fp8e5b16": (5, 2, 16, "fnuz"),
    "fp8e4b8": (4, 3, 8, "fnuz"),
}
#: names of the Triton float types the interpreter holds as raw bits
BITS_TYPES = frozenset(("bf16",) + tuple(_FP8))


def is_bits_type(ty) -> bool:
    """Whether values of the Triton scalar type ``ty`` are held as raw bits (bf16, fp8)."""
    return getattr(ty, "name", None) in BITS_TYPES


# --- bfloat16 ----------------------------------------------------------------------------------------

def bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    """bfloat16 bits (uint16) -> float32, exactly."""
    return (np.asarray(bits).astype(_U32) << _U32(16)).view(np.float32)


def f32_to_bf16(x: np.ndarray, rtz: bool = False) -> np.ndarray:
    """float32 -> bfloat16 bits (uint16), to nearest even (``rtz``: toward zero); NaN stays a quiet NaN."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    bits = x.view(_U32)
    if rtz:
        rounded = bits >> _U32(16)
    else:
        rounded = (bits + (_U32(0x7FFF) + ((bits >> _U32(16)) & _U32(1)))) >> _U32(16)
    out = rounded.astype(np.uint16)
    nan = np.isnan(x)
    if nan.any():
        out = np.where(nan, ((bits >> _U32(16)) | _U32(0x40)).astype(np.uint16), out)
    return out


def f64_to_f32_odd(x: np.ndarray) -> np.ndarray:
    """float64 -> float32 rounded to odd: a float32 that rounds to any narrower format exactly as
    ``x`` would (avoids double rounding when narrowing float64 to bf16 or fp8)."""
    x = np.asarray(x, dtype=np.float64)
    y = x.astype(np.float32)
    over = np.abs(y.astype(np.float64)) > np.abs(x)
    y = np.where(over, np.nextafter(y, np.float32(0)), y)  # now rounded toward zero
    inexact = (y.astype(np.float64) != x) & np.isfinite(x)
    if inexact.any():
        y = np.where(inexact, (y.view(_U32) | _U32(1)).view(np.float32), y)
    return y


# --- fp8 -------------------------------------------------------------------------------------------

class _Fp8:
    """Decode table and encoder of one fp8 format."""

    def __init__(self, name: str):
        ebits, mbits, bias, scheme = _FP8[name]
        self.scheme = scheme
        codes = np.arange(256, dtype=np.int64)
        sign = np.where(codes >> 7, -1.0, 1.0)
        e = (codes >> mbits) & ((1 << ebits) - 1)
        f = codes & ((1 << mbits) - 1)
        emax = (1 << ebits) - 1
        val = np.where(e == 0, f * 2.0 ** (1 - bias - mbits), (1 + f / 2.0 ** mbits) * 2.0 ** (e - bias)) * sign
        if scheme == "ieee":
            val = np.where(e == emax, np.where(f == 0, sign * np.inf, np.nan), val)
            self.max_code, self.nan_code = ((emax - 1) << mbits) | ((1 << mbits) - 1), 0x7F
        elif scheme == "fn":
            val = np.where((e == emax) & (f == (1 << mbits) - 1), np.nan, val)
            self.max_code, self.nan_code = 0x7E, 0x7F
        else:  # fnuz
            val = np.where(codes == 0x80, np.nan, val)
            self.max_code, self.nan_code = 0x7F, 0x80
        self.table = val.astype(np.float32)
        self.positive = val[: self.max_code + 1].astype(np.float64)  # ascending in code order

    def decode(self, bits: np.ndarray) -> np.ndarray:
        return self.table[np.asarray(bits, dtype=np.uint8)]

    def encode(self, x: np.ndarray, rtz: bool) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        a = np.abs(x)
        pos = self.positive
        hi = np.clip(np.searchsorted(pos, a, side="left"), 0, len(pos) - 1)
        lo = np.maximum(hi - 1, 0)
        d_lo, d_hi = a - pos[lo], pos[hi] - a
        if rtz:
            code = np.where(pos[hi] <= a, hi, lo)
        else:
            tie_to_hi = (d_hi == d_lo) & (hi % 2 == 0)
            code = np.where((d_hi < d_lo) | tie_to_hi, hi, lo)
        code = np.where(a >= pos[-1], self.max_code, code)  # saturate (satfinite), inf included
        negative = np.signbit(x)
        if self.scheme == "fnuz":
            negative &= code != 0
        code = code | np.where(negative, 0x80, 0)
        code = np.where(np.isnan(x), self.nan_code, code)
        return code.astype(np.uint8)


_FP8_CODECS: Dict[str, _Fp8] = {}


def _fp8(name: str) -> _Fp8:
    codec = _FP8_CODECS.get(name)
    if codec is None:
        codec = _FP8_CODECS[name] = _Fp8(name)
    return codec


# --- any Triton float type ---------------------------------------------------------------------------

def to_float(data: np.ndarray, ty) -> np.ndarray:
    """The values of ``data`` (storage of Triton scalar type ``ty``) as float32, or float64 for fp64;
    integer and bool data are returned unchanged."""
    name = ty.name
    if name == "bf16":
        return bf16_to_f32(data)
    if name in _FP8:
        return _fp8(name).decode(data)
    if name == "fp16":
        return np.asarray(data).astype(np.float32)
    return data


def values(data: np.ndarray, ty) -> np.ndarray:
    """The values of ``data`` as numpy numbers: bf16/fp8 bits decoded to float32, any other type's
    storage (fp16 included) returned as it is."""
    return to_float(data, ty) if ty.name in BITS_TYPES else np.asarray(data)


def from_float(x: np.ndarray, ty, rtz: bool = False) -> np.ndarray:
    """Round float values ``x`` (any numpy float or integer dtype, any shape) to the storage of Triton
    float type ``ty`` (same shape): to nearest even, or toward zero with ``rtz``.

    Raises:
        KeyError: ``ty`` is not a float type (fp8 formats, bf16, fp16, fp32, fp64).
    """
    name = ty.name
    x = np.asarray(x)
    if name == "bf16":
        if x.dtype != np.float32:
            x = f64_to_f32_odd(x) if not rtz else _rtz(x.astype(np.float64), np.float32)
        return f32_to_bf16(x, rtz)
    if name in _FP8:
        return _fp8(name).encode(x, rtz)
    target = {"fp16": np.float16, "fp32": np.float32, "fp64": np.float64}[name]
    if rtz and x.dtype != target:
        return _rtz(x.astype(np.float64), target)
    return x.astype(target)


def _rtz(x: np.ndarray, target) -> np.ndarray:
    y = x.astype(target)
    over = np.abs(y.astype(np.float64)) > np.abs(x)
    return np.where(over, np.nextafter(y, target(0)), y).astype(target)


def float_to_int(x: np.ndarray, np_dtype) -> np.ndarray:
    """Float -> integer conversion like NVIDIA's ``cvt.rzi``: truncate toward zero, saturate, NaN -> 0
    (numpy gives arbitrary values for NaN and out-of-range inputs). There is no 8-bit ``cvt``: to 8
    bits the GPU saturates to the 16-bit type of the same signedness and keeps the low byte (measured
    on an H100: 300.0 -> uint8 44, 3e9 -> 255, -1.0 -> 0)."""
    target = np.dtype(np_dtype)
    sat = target
    if target.itemsize == 1:
        sat = np.dtype(np.int16 if target.kind == "i" else np.uint16)
    info = np.iinfo(sat)
    with np.errstate(invalid="ignore"):
        t = np.trunc(np.asarray(x, dtype=np.float64))
        lo, hi_excl = float(info.min), float(info.max) + 1.0  # 2**k: exact in float64
        res = np.zeros(t.shape, dtype=sat)
        inside = (t >= lo) & (t < hi_excl)
        res[inside] = t[inside].astype(sat)
        res[t >= hi_excl] = info.max
        res[t < lo] = info.min
    return res if sat == target else res.astype(target)


# --- tf32 --------------------------------------------------------------------------------------------

def tf32_truncate(x: np.ndarray) -> np.ndarray:
    """float32 -> tf32 (10 mantissa bits) by dropping the low 13 bits: how tensor cores read fp32
    operands of a tf32 MMA (PTX ISA, ``mma`` with ``.tf32``); NaN and infinities are kept."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(_U32)
    special = (bits & _U32(0x7F800000)) == _U32(0x7F800000)
    return np.where(special, bits, bits & _U32(0xFFFFE000)).view(np.float32)


def tf32_round(x: np.ndarray) -> np.ndarray:
    """float32 -> tf32 rounded to nearest, ties away from zero (``cvt.rna.tf32.f32``, used by the
    3xTF32 split of ``input_precision="tf32x3"``)."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(_U32)
    special = (bits & _U32(0x7F800000)) == _U32(0x7F800000)
    return np.where(special, bits, (bits + _U32(0x1000)) & _U32(0xFFFFE000)).view(np.float32)


def bf16_round_f32(x: np.ndarray) -> np.ndarray:
    """float32 rounded to the nearest bfloat16 value, as float32."""
    return bf16_to_f32(f32_to_bf16(x))


def dot_operands(a: np.ndarray, b: np.ndarray, precision: Optional[str]):
    """The float32 operand pairs whose products a tensor-core ``tl.dot`` of float32 ``a`` and ``b``
    sums for ``input_precision`` (``"tf32"``, ``"tf32x3"``, ``"ieee"``, ``"bf16x3"``, ``"bf16x6"``).

    Args:
        a, b: float32 arrays of shape (..., M, K) and (..., K, N).
    Returns:
        a list of float32 ``(a_part, b_part)`` pairs of the same shapes; the dot is the sum of
        ``a_part @ b_part``, smallest terms first.
    Raises:
        ValueError: an ``input_precision`` Triton does not define.
    """
    p = (precision or "tf32").lower()
    if p == "ieee":
        return [(a, b)]
    if p == "tf32":
        return [(tf32_truncate(a), tf32_truncate(b))]
    if p == "tf32x3":
        a_hi, b_hi = tf32_round(a), tf32_round(b)
        a_lo, b_lo = tf32_round(a - a_hi), tf32_round(b - b_hi)
        return [(a_lo, b_hi), (a_hi, b_lo), (a_hi, b_hi)]
    if p in ("bf16x3", "bf16x6"):
        a1, b1 = bf16_round_f32(a), bf16_round_f32(b)
        a2, b2 = bf16_round_f32(a - a1), bf16_round_f32(b - b1)
        if p == "bf16x3":
            return [(a2, b1), (a1, b2), (a1, b1)]
        a3, b3 = bf16_round_f32(a - a1 - a2), bf16_round_f32(b - b1 - b2)
        return [(a1, b3), (a3, b1), (a2, b2), (a2, b1), (a1, b2), (a1, b1)]
    raise ValueError(f"unknown dot input_precision {precision!r}")


def np_storage_dtype(ty) -> np.dtype:
    """The numpy dtype a Triton scalar type's values are stored in by the interpreter."""
    from triton.runtime.interpreter import _get_np_dtype
    return np.dtype(_get_np_dtype(ty))


__all__ = ["BITS_TYPES", "is_bits_type", "to_float", "values", "from_float", "float_to_int", "tf32_truncate",
           "tf32_round", "dot_operands", "bf16_to_f32", "f32_to_bf16", "np_storage_dtype"]
