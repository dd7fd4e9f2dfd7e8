"""CPU (numpy) implementations of NVIDIA libdevice functions, for the checked interpreter.

Triton's ``triton.language.extra.cuda.libdevice`` wrappers lower to calls of libdevice symbols
(``__nv_tanhf``, ``__nv_fadd_rz``, ``__nv_popcll``, ...). :func:`call` computes one such symbol
elementwise on numpy arrays, keyed by the symbol name; :func:`supported` lists the symbols it knows.

Covered: every symbol that Triton's CUDA ``libdevice.py`` dispatches to: elementary and special
functions, arithmetic with an explicit rounding mode (``_rn``, ``_rz``, ``_ru``, ``_rd``),
conversions, bit manipulation and predicates.

Accuracy rule
  * float32 functions are computed in float64 and rounded once to float32, which is at least as
    accurate as libdevice's documented ulp bounds. float64 functions use numpy / ``math`` (a few ulp
    at most). ``__nv_fast_*`` use the precise computation, so they are more accurate than the GPU's
    approximate instructions (whose quirks, such as ``__fdividef`` giving 0 for divisors above
    2**126, are not reproduced).
  * Operations with a rounding mode in their name (add, sub, mul, div, rcp, sqrt, fma, ``frsqrt_rn``,
    int/float conversions), and ``__nv_fmaf`` / ``__nv_fma``, are correctly rounded in that mode, for
    float32 and float64 alike. The exact sign of the rounding error is found with error-free
    transformations (TwoSum, Dekker's product, Shewchuk's expansions) and picks the neighbouring float.
    float64 fma rounds to nearest with Boldo and Melquiond's round-to-odd emulation, and falls back to
    exact rational arithmetic (``fractions``) for the rare operands whose partial products would
    underflow or overflow.
  * float -> integer conversions follow CUDA: NaN gives 0 and out-of-range values saturate.
  * Special functions of float64: erf, erfc, lgamma and tgamma come from ``math``; erfcx, erfinv,
    erfcinv, normcdf and normcdfinv are built on them (Halley / Newton iterations); Bessel functions use
    power series, Miller's backward recurrence and Hankel's asymptotic expansion. Their float64 error is
    a few ulp (up to about 15 for cyl_bessel_i0/i1 near |x| = 25), and absolute (about 1e-16) near the
    zeros of lgamma and of the Bessel functions, where libdevice too only bounds the absolute error.
    jn / yn recur over the order, so they take time proportional to |n|.

Approximate: :data:`APPROXIMATE` names the symbols whose GPU result is, by design, not reproduced
exactly: ``__nv_rcp64h`` (a hardware reciprocal estimate; here the reciprocal of the operand's upper
32 bits, truncated to its upper 32 bits).
"""
from __future__ import annotations

import math
from decimal import Decimal, localcontext
from fractions import Fraction
from typing import Callable, Dict, Tuple

import numpy as np

__all__ = ["call", "supported", "APPROXIMATE"]

F32, F64 = np.float32, np.float64
I8, I32, I64, U32, U64 = np.int8, np.int32, np.int64, np.uint32, np.uint64

# Argument type codes used in the registration table (Triton's dtype for each argument).
_CODES = {"f": np.dtype(F32), "d": np.dtype(F64), "i": np.dtype(I32), "I": np.dtype(U32),
          "l": np.dtype(I64), "L": np.dtype(U64)}

# Symbols whose result is, by design, not the GPU's bit for bit (see the module docstring).
APPROXIMATE = frozenset({"__nv_rcp64h"})

_INF = np.inf
_TWO128 = 2.0 ** 128
_MAX32 = float(np.finfo(F32).max)
_PI = math.pi


def _sgn(v) -> np.ndarray:
    """Sign of each element as int8 (-1, 0, 1); NaN gives 0."""
    v = np.asarray(v)
    return ((v > 0).astype(I8) - (v < 0).astype(I8))


# ---------------------------------------------------------------------------------------------
# Error-free transformations (float64)
# ---------------------------------------------------------------------------------------------

def _two_sum(a, b):
    """s, e with s = fl(a + b) and a + b = s + e exactly (Knuth), when s is finite."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


_SPLITTER = 134217729.0  # 2**27 + 1


def _split(a):
    t = _SPLITTER * a
    hi = t - (t - a)
    return hi, a - hi


def _two_prod(a, b):
    """p, e with p = fl(a * b) and a * b = p + e exactly (Dekker); needs |a|, |b| < 2**995 and a
    product whose error does not underflow (|a * b| > 2**-969) or is zero."""
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def _sign_of_sum(*terms) -> np.ndarray:
    """Exact sign (int8) of the sum of float64 arrays, by growing a nonoverlapping expansion
    (Shewchuk) whose largest nonzero component has the sign of the sum. No term or partial sum may
    overflow."""
    expansion = [np.asarray(terms[0], F64)]
    for t in terms[1:]:
        q = np.asarray(t, F64)
        grown = []
        for comp in expansion:
            q, h = _two_sum(q, comp)
            grown.append(h)
        grown.append(q)
        expansion = grown
    sign = np.zeros(np.broadcast(*expansion).shape, I8)
    for comp in expansion:  # increasing magnitude: the last nonzero component decides
        sign = np.where(comp != 0, _sgn(comp), sign)
    return sign


# ---------------------------------------------------------------------------------------------
# Correct rounding to float32 in any mode
# ---------------------------------------------------------------------------------------------
# Work on float64 values of the float32 grid with an unbounded exponent (2**128 stands for inf).

def _ulp32(ax):
    """Spacing of the float32 grid in the binade of ax >= 0 (float64)."""
    _, e = np.frexp(ax)
    e = np.where(ax == 0, -1000, e)
    return np.ldexp(1.0, np.maximum(e - 24, -149))


def _bracket32(x):
    """Neighbouring float32 grid values lo <= x <= hi (equal when x is on the grid)."""
    u = _ulp32(np.abs(x))
    lo = np.floor(x / u) * u
    return lo, np.where(lo == x, lo, lo + u)


def _succ32(y):
    """Next float32 grid value above grid value y."""
    ay = np.abs(y)
    away, toward = _ulp32(ay), _ulp32(np.nextafter(ay, 0.0))
    return np.where(y >= 0, y + away, y + toward)


def _pred32(y):
    return -_succ32(-y)


def _round_f32(approx, sign_vs, mode, special, zero_neg=None):
    """Round an exact value X to float32 in `mode` ('rn', 'rz', 'ru', 'rd').

    approx: float64 within one float32 step of X (X rounded to float64, typically); where `special`
    it is the final answer (NaN, inf, ...) and is only converted. sign_vs(y) gives sign(X - y)
    exactly for float64 y on the float32 grid or halfway between two grid points. zero_neg: sign bit
    to give a result when X is exactly zero (default: approx's)."""
    x = np.where(special, 0.0, approx)
    big = np.abs(x) >= _TWO128
    x = np.where(big, 0.0, x)
    lo, hi = _bracket32(x)
    s_lo, s_hi = sign_vs(lo), sign_vs(hi)
    exact = ((s_lo == 0) | (s_hi == 0)) & ~big
    value = np.where(s_lo == 0, lo, hi)
    below = s_lo < 0  # approx was one step too high
    above = (s_hi > 0) & ~below  # or too low
    lo, hi = (np.where(below, _pred32(lo), np.where(above, hi, lo)),
              np.where(below, lo, np.where(above, _succ32(hi), hi)))
    pos = approx > 0
    lo = np.where(big, np.where(pos, _MAX32, -_TWO128), lo)
    hi = np.where(big, np.where(pos, _TWO128, -_MAX32), hi)
    if mode == "rn":
        s_mid = sign_vs(0.5 * (lo + hi))
        step = hi - lo
        lo_even = np.fmod(lo / np.where(step == 0, 1.0, step), 2.0) == 0
        res = np.where(s_mid > 0, hi, np.where(s_mid < 0, lo, np.where(lo_even, lo, hi)))
    elif mode == "rz":
        res = np.where(lo >= 0, lo, hi)
    elif mode == "ru":
        res = hi
    else:
        res = lo
    res = np.where(exact, value, res)
    out = res.astype(F32)  # 2**128 becomes inf
    neg = np.signbit(approx)
    if zero_neg is not None:
        neg = np.where(exact & (value == 0), zero_neg, neg)
    out = np.where(out == 0, np.where(neg, F32(-0.0), F32(0.0)), out)
    return np.where(special, approx.astype(F32), out)


def _finish64(r, d, mode, zero_neg=None):
    """Directed rounding of a float64 result: r is X rounded to nearest, d = sign(X - r) exactly.
    zero_neg: sign bit of an exactly-zero X."""
    if mode == "ru":
        res = np.where(d > 0, np.nextafter(r, _INF), r)
    elif mode == "rd":
        res = np.where(d < 0, np.nextafter(r, -_INF), r)
    elif mode == "rz":
        res = np.where(((d < 0) & (r > 0)) | ((d > 0) & (r < 0)), np.nextafter(r, 0.0), r)
    else:
        res = r
    res = np.where((res == 0) & (r != 0), np.copysign(0.0, r), res)  # stepped to zero: keep sign
    if zero_neg is not None:
        res = np.where((r == 0) & (d == 0), np.where(zero_neg, -0.0, 0.0), res)
    return res


def _sum_zero_neg(sa, sb, mode):
    """IEEE sign of an exactly-zero sum of addends with sign bits sa, sb."""
    return (sa | sb) if mode == "rd" else (sa & sb)


# ---------------------------------------------------------------------------------------------
# Arithmetic with a rounding mode
# ---------------------------------------------------------------------------------------------

def _finite(*xs):
    ok = np.isfinite(xs[0])
    for x in xs[1:]:
        ok = ok & np.isfinite(x)
    return ok


def _fadd(mode, negate_b=False):
    def fn(a, b):
        x, y = a.astype(F64), b.astype(F64)
        if negate_b:
            y = -y
        zneg = _sum_zero_neg(np.signbit(x), np.signbit(y), mode)
        return _round_f32(x + y, lambda t: _sign_of_sum(x, y, -t), mode, ~_finite(x, y), zneg)
    return fn


def _fmul(mode):
    def fn(a, b):
        p = a.astype(F64) * b.astype(F64)  # exact
        return _round_f32(p, lambda t: _sgn(p - t), mode, ~np.isfinite(p))
    return fn


def _fdiv(mode):
    def fn(a, b):
        x, y = a.astype(F64), b.astype(F64)
        special = ~_finite(x, y) | (y == 0)
        sy = _sgn(y)
        # sign(x/y - t) = sign(x - t*y) * sign(y); t*y is exact (at most 25 x 24 bits)
        return _round_f32(x / y, lambda t: _sgn(x - t * y) * sy, mode, special)
    return fn


def _frcp(mode):
    div = _fdiv(mode)
    return lambda b: div(np.ones_like(b), b)


def _fsqrt(mode):
    def fn(a):
        x = a.astype(F64)
        special = ~np.isfinite(x) | (x < 0)
        return _round_f32(np.sqrt(x), lambda t: _sgn(x - t * t), mode, special)
    return fn


def _frsqrt(mode):
    def fn(a):
        x = a.astype(F64)
        special = ~np.isfinite(x) | (x <= 0)

        def sign_vs(t):  # sign(1/sqrt(x) - t) = sign(1 - t*t*x) for t >= 0
            p, e = _two_prod(t * t, x)
            return _sign_of_sum(1.0, -p, -e)
        return _round_f32(1.0 / np.sqrt(x), sign_vs, mode, special)
    return fn


def _ffma(mode):
    def fn(a, b, c):
        x, y, z = a.astype(F64), b.astype(F64), c.astype(F64)
        p = x * y  # exact
        zneg = _sum_zero_neg(np.signbit(x) ^ np.signbit(y), np.signbit(z), mode)
        return _round_f32(p + z, lambda t: _sign_of_sum(p, z, -t), mode, ~_finite(x, y, z), zneg)
    return fn


def fma_f32(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``a*b + c`` rounded once to float32, to nearest even (float32 arrays that broadcast together;
    the result has their broadcast shape).

    The product is exact in float64 and the sum is rounded to float64 then to float32. That double
    rounding can differ from one rounding only where the float64 sum lands exactly halfway between
    two float32 values without being exact itself: there the sum's rounding error (Knuth's two-sum)
    says on which side of the halfway point the exact value lies, and the sum is moved one float64
    step that way before its conversion. A halfway sum that is exact (``acc * 1.0 + x``, common in
    online softmax) is converted as it is. Sums in float32's subnormal range (nonzero, below
    2**-125) are redone exactly."""
    shape = np.broadcast_shapes(np.shape(a), np.shape(b), np.shape(c))
    size = math.prod(shape)
    if len(shape) >= 1 and shape[0] > 1 and size > _FMA_CHUNK:
        # in slices along the first axis: the float64 temporaries stay a few MiB, not 5x the value
        a, b, c = (np.reshape(v, (1,) * (len(shape) - np.ndim(v)) + np.shape(v)) for v in (a, b, c))
        out = np.empty(shape, np.float32)
        step = max(1, _FMA_CHUNK // max(1, size // shape[0]))
        for i in range(0, shape[0], step):
            part = [v if v.shape[0] == 1 else v[i:i + step] for v in (a, b, c)]
            out[i:i + step] = _fma_f32(*part)
        return out
    return _fma_f32(a, b, c)


#: elements of the slices ``fma_f32`` works in (its float64 temporaries: 8 bytes each, five of them)
_FMA_CHUNK = 1 << 18


def _fma_f32(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    shape = np.broadcast_shapes(np.shape(a), np.shape(b), np.shape(c))
    p = np.multiply(a, b, dtype=F64)  # exact: 24 x 24 bits; kept for the halfway lanes' two-sum
    s = np.add(p, c, dtype=F64)  # of the broadcast shape
    flat_s = s.reshape(-1)
    out = flat_s.astype(np.float32)
    # the lanes to look at again: a halfway sum (the float64 sum's low 29 bits 1 followed by zeros:
    # the float32 rounding tie; on 32-bit words: 1.3x the time, measured), or a float32 result under
    # 2**-125 or zero (its exponent field under 2: the bits shifted past the sign, on the float32
    # result, half the bytes of the float64 sum; zero results are kept out below)
    scratch = np.bitwise_and(flat_s.view(np.uint64), np.uint64((1 << 29) - 1))
    mark = scratch == np.uint64(1 << 28)
    del scratch
    small = np.left_shift(out.view(np.uint32), np.uint32(1))
    mark |= small < np.uint32(2 << 24)
    del small
    idx = np.flatnonzero(mark)
    if idx.size == 0:
        return out.reshape(shape)
    sm = flat_s[idx]
    half_here = (sm.view(np.uint64) & np.uint64((1 << 29) - 1)) == np.uint64(1 << 28)
    half = idx[half_here]
    if half.size:
        ph = _at(p, shape, half)
        ch = _at(c, shape, half).astype(F64)
        sh = sm[half_here]
        bb = sh - ph
        err = (ph - (sh - bb)) + (ch - bb)  # exact value = sh + err
        inexact = err != 0
        if inexact.any():
            moved = np.nextafter(sh[inexact], np.where(err[inexact] > 0, _INF, -_INF))
            out[half[inexact]] = moved.astype(np.float32)
    tiny_here = (np.abs(sm) < 2.0 ** -125) & (sm != 0)  # an exactly zero sum is exact, its sign IEEE's
    tiny = idx[tiny_here]
    if tiny.size:
        out[tiny] = _ffma("rn")(*(_at(v, shape, tiny) for v in (a, b, c)))
    return out.reshape(shape)


def _at(v: np.ndarray, shape, flat: np.ndarray) -> np.ndarray:
    """The elements of ``v`` broadcast to ``shape`` at flat indices ``flat`` (no broadcast copy: a
    broadcast view, which ``reshape(-1)`` would copy whole, is indexed by coordinates)."""
    v = np.asarray(v)
    if v.shape == tuple(shape) and v.flags.c_contiguous:
        return v.reshape(-1)[flat]
    return np.broadcast_to(v, shape)[np.unravel_index(flat, shape)]


def fma_f64(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``a*b + c`` rounded once to float64, to nearest even (float64 arrays of one shape)."""
    return np.asarray(_dfma("rn")(np.ascontiguousarray(a, dtype=F64).reshape(-1),
                                  np.ascontiguousarray(b, dtype=F64).reshape(-1),
                                  np.ascontiguousarray(c, dtype=F64).reshape(-1))).reshape(np.shape(a))


def _dadd(mode, negate_b=False):
    def fn(a, b):
        if negate_b:
            b = -b
        r, err = _two_sum(a, b)
        fin = _finite(a, b)
        d = np.where(fin, np.where(np.isinf(r), -_sgn(r), _sgn(err)), 0)
        return _finish64(r, d, mode, _sum_zero_neg(np.signbit(a), np.signbit(b), mode))
    return fn


def _dmul(mode):
    def fn(a, b):
        r = a * b
        ok = _finite(a, b) & (a != 0) & (b != 0)
        ma, ea = np.frexp(np.where(ok, a, 0.5))
        mb, eb = np.frexp(np.where(ok, b, 0.5))
        p, e = _two_prod(ma, mb)  # a*b = (p + e) * 2**(ea+eb)
        rs = np.ldexp(np.where(np.isfinite(r), r, 0.0), -(ea + eb))
        d = np.where(ok, np.where(np.isinf(r), -_sgn(r), _sign_of_sum(p, e, -rs)), 0)
        return _finish64(r, d, mode)
    return fn


def _ddiv(mode):
    def fn(a, b):
        q = a / b
        ok = _finite(a, b) & (a != 0) & (b != 0)
        ma, ea = np.frexp(np.where(ok, a, 0.5))
        mb, eb = np.frexp(np.where(ok, b, 0.5))
        qs = np.ldexp(np.where(np.isfinite(q), q, 0.0), eb - ea)  # q = qs * 2**(ea-eb), exactly
        p, e = _two_prod(qs, mb)
        # sign(a/b - q) = sign(a - q*b) * sign(b) = sign(ma - qs*mb) * sign(mb)
        d = _sign_of_sum(ma, -p, -e) * _sgn(mb)
        d = np.where(ok, np.where(np.isinf(q), -_sgn(q), d), 0)
        return _finish64(q, d, mode)
    return fn


def _drcp(mode):
    div = _ddiv(mode)
    return lambda b: div(np.ones_like(b), b)


def _dsqrt(mode):
    def fn(a):
        r = np.sqrt(a)
        ok = np.isfinite(a) & (a > 0)
        m, e = np.frexp(np.where(ok, a, 1.0))
        odd = (e & 1) == 1
        m, e = np.where(odd, 0.5 * m, m), np.where(odd, e + 1, e)  # a = m * 2**e, e even
        rs = np.ldexp(np.where(ok, r, 0.0), -(e // 2))
        p, err = _two_prod(rs, rs)
        d = np.where(ok, _sign_of_sum(m, -p, -err), 0)
        return _finish64(r, d, mode)
    return fn


def _in_range(v, lo, hi):
    av = np.abs(v)
    return (v == 0) | ((av >= lo) & (av <= hi))


def _fraction_round(exact: Fraction) -> Tuple[float, int]:
    """exact rounded to the nearest float64, and the sign of (exact - that)."""
    try:
        r = float(exact)  # int / int: correctly rounded
    except OverflowError:
        return (math.inf, -1) if exact > 0 else (-math.inf, 1)
    diff = exact - Fraction(r)
    return r, (diff > 0) - (diff < 0)


def _dfma(mode):
    def fn(a, b, c):
        fin = _finite(a, b, c)
        safe = (fin & _in_range(a, 2.0 ** -450, 2.0 ** 450) & _in_range(b, 2.0 ** -450, 2.0 ** 450)
                & _in_range(c, 2.0 ** -900, 2.0 ** 1000))
        x, y, z = np.where(safe, a, 0.0), np.where(safe, b, 0.0), np.where(safe, c, 0.0)
        uh, ul = _two_prod(x, y)
        th, tl = _two_sum(z, uh)
        v, w = _two_sum(tl, ul)
        even = (v.view(I64) & 1) == 0
        v = np.where((w != 0) & even, np.nextafter(v, np.where(w > 0, _INF, -_INF)), v)  # round to odd
        r = th + v
        d = _sign_of_sum(uh, ul, z, -r)
        # operands that are not all finite: the product is exact, so a finite product plus an
        # infinite c is c, and otherwise numpy's a*b + c has the IEEE special-value rules
        r = np.where(fin, r, np.where(_finite(a, b), c, a * b + c))
        d = np.where(fin, d, 0)
        for i in np.flatnonzero(fin & ~safe):
            exact = Fraction(float(a[i])) * Fraction(float(b[i])) + Fraction(float(c[i]))
            r[i], d[i] = _fraction_round(exact)
        zneg = _sum_zero_neg(np.signbit(a) ^ np.signbit(b), np.signbit(c), mode)
        return _finish64(r, d, mode, zneg)
    return fn


# ---------------------------------------------------------------------------------------------
# Conversions
# ---------------------------------------------------------------------------------------------

def _round_half_away(x):
    t = np.trunc(x)
    return np.where(np.abs(x - t) >= 0.5, t + np.copysign(1.0, x), t)


_ROUND = {"rn": np.rint, "rz": np.trunc, "ru": np.ceil, "rd": np.floor, "away": _round_half_away}


def _to_int(kind: str, mode: str):
    """float -> integer with CUDA semantics: NaN -> 0, saturation at the type's limits."""
    def fn(x):
        v = _ROUND[mode](x.astype(F64))
        v = np.where(np.isnan(v), 0.0, v)
        if kind == "i32":
            return np.clip(v, -2.0 ** 31, 2.0 ** 31 - 1).astype(I32)
        if kind == "u32":
            return np.clip(v, 0.0, 2.0 ** 32 - 1).astype(U32)
        if kind == "i64":
            inside = (v >= -2.0 ** 63) & (v < 2.0 ** 63)
            out = np.where(inside, v, 0.0).astype(I64)
            out = np.where(v >= 2.0 ** 63, np.iinfo(I64).max, out)
            return np.where(v < -2.0 ** 63, np.iinfo(I64).min, out)
        # u64: avoid casting values >= 2**63 through int64
        v = np.clip(v, 0.0, 2.0 ** 64)
        high = v >= 2.0 ** 63
        low_part = np.where(high, v - 2.0 ** 63, v)
        low_part = np.where(v >= 2.0 ** 64, 0.0, low_part)
        out = low_part.astype(I64).view(U64) + np.where(high, U64(2 ** 63), U64(0))
        return np.where(v >= 2.0 ** 64, np.iinfo(U64).max, out).astype(U64)
    return fn


def _int_parts(x, unsigned: bool):
    """float64 hi, lo with x == hi + lo exactly, for int64 / uint64 x."""
    if unsigned:
        u = x.astype(U64)
        return ((u >> U64(32)) << U64(32)).astype(F64), (u & U64(0xFFFFFFFF)).astype(F64)
    s = x.astype(I64)
    lo = s & I64(0xFFFFFFFF)
    return (s - lo).astype(F64), lo.astype(F64)


def _int_to_f32(mode):
    def fn(x):  # int32 / uint32: exact in float64
        v = x.astype(F64)
        return _round_f32(v, lambda t: _sgn(v - t), mode, np.zeros(v.shape, bool))
    return fn


def _ll_to_f32(mode, unsigned):
    def fn(x):
        hi, lo = _int_parts(x, unsigned)
        return _round_f32(hi + lo, lambda t: _sign_of_sum(hi, lo, -t), mode, np.zeros(hi.shape, bool))
    return fn


def _ll_to_f64(mode, unsigned):
    def fn(x):
        hi, lo = _int_parts(x, unsigned)
        r, err = _two_sum(hi, lo)
        return _finish64(r, _sgn(err), mode)
    return fn


def _d_to_f32(mode):
    def fn(x):
        return _round_f32(x, lambda t: _sgn(x - t), mode, ~np.isfinite(x))
    return fn


# ---------------------------------------------------------------------------------------------
# Elementary functions not in numpy
# ---------------------------------------------------------------------------------------------

def _sinpi_cospi(x, want_sin: bool):
    """sin(pi x) or cos(pi x) with exact argument reduction: x = n/2 + t, |t| <= 1/4."""
    fin = np.isfinite(x)
    xf = np.fmod(np.where(fin, x, 0.0), 2.0)  # exact; period 2, sign of x kept
    n = np.rint(2.0 * xf)
    t = xf - 0.5 * n  # exact
    q = np.fmod(n, 4.0)
    q = np.where(q < 0, q + 4.0, q)
    s, c = np.sin(_PI * t), np.cos(_PI * t)
    if not want_sin:
        q = np.fmod(q + 1.0, 4.0)  # cos(pi x) = sin(pi (x + 1/2))
    res = np.where(q == 0, s, np.where(q == 1, c, np.where(q == 2, -s, -c)))
    if want_sin:
        res = np.where(res == 0, np.copysign(0.0, xf), res)  # sinpi(+-n) = +-0
    else:
        res = np.where(res == 0, 0.0, res)  # cospi(n + 1/2) = +0
    return np.where(fin, res, np.nan)


def _sinpi(x):
    return _sinpi_cospi(x, True)


def _cospi(x):
    return _sinpi_cospi(x, False)


def _exp10(x):
    return np.power(10.0, x)


def _rsqrt(x):
    return 1.0 / np.sqrt(x)


def _rcbrt(x):
    return 1.0 / np.cbrt(x)


def _round(x):
    return _round_half_away(x)


def _logb(x):
    _, e = np.frexp(x)
    return np.where(x == 0, -_INF, np.where(np.isfinite(x), (e - 1).astype(F64), np.abs(x)))


def _ilogb(x):
    _, e = np.frexp(x.astype(F64))
    out = np.where(np.isinf(x), np.iinfo(I32).max, e - 1)
    return np.where((x == 0) | np.isnan(x), np.iinfo(I32).min, out).astype(I32)


def _saturate(x):
    return np.where(x > 0, np.minimum(x, 1.0), 0.0)  # NaN -> 0


def _fdim(x, y):
    return np.where(np.isnan(x) | np.isnan(y), np.nan, np.where(x > y, x - y, 0.0))


def _remainder(x, y):
    """IEEE remainder x - n*y, n = x/y rounded half to even; exact."""
    ax, ay = np.abs(x), np.abs(y)
    two_ay = 2.0 * ay
    r = np.where(np.isfinite(two_ay), np.fmod(ax, two_ay), ax)  # r in [0, 2|y|), same parity
    # quotient 0 -> r, 1 -> r - ay, 2 -> r - 2ay; halfway cases go to the even quotient
    s = r - ay  # exact whenever it is used
    res = np.where(r <= ay - r, r, np.where(s < ay - s, s, s - ay))
    res = np.where(np.isinf(ay) & np.isfinite(ax), ax, res)
    res = np.where(np.signbit(x), -res, res)  # remainder(-x, y) = -remainder(x, y)
    return np.where(np.isnan(res) | np.isnan(y) | (y == 0) | np.isinf(x), np.nan, res)


def _norm(*xs):
    """sqrt of the sum of squares without overflow; inf if any argument is infinite."""
    a = [np.abs(x) for x in xs]
    m = a[0]
    for v in a[1:]:
        m = np.maximum(m, v)  # NaN propagates
    scale = np.where((m == 0) | ~np.isfinite(m), 1.0, m)
    ssq = sum((v / scale) ** 2 for v in a)
    res = np.sqrt(ssq) * scale
    any_inf = np.zeros(m.shape, bool)
    for v in a:
        any_inf |= np.isinf(v)
    return np.where(any_inf, _INF, np.where(m == 0, 0.0, res))


def _rnorm(*xs):
    return 1.0 / _norm(*xs)


def _powi(x, n):
    return np.power(x, n.astype(F64))


def _ldexp(x, n):
    return np.ldexp(x, n.astype(I32))


def _rcp64h(x):
    """rcp.approx.ftz.f64: the reciprocal of x's upper 32 bits, kept to its upper 32 bits."""
    mask = U64(0xFFFFFFFF00000000)
    hi = (x.view(U64) & mask).view(F64)
    hi = np.where(np.abs(hi) < np.finfo(F64).tiny, np.copysign(0.0, hi), hi)  # flush subnormals
    r = 1.0 / hi
    r = np.where(np.abs(r) < np.finfo(F64).tiny, np.copysign(0.0, r), r)
    return (r.view(U64) & mask).view(F64)


# ---------------------------------------------------------------------------------------------
# Special functions (float64)
# ---------------------------------------------------------------------------------------------

def _elementwise(fn):
    """Vectorise a float -> float Python function."""
    ufunc = np.frompyfunc(fn, 1, 1)
    return lambda x: np.asarray(ufunc(x), dtype=F64)


def _lgamma_scalar(v: float) -> float:
    try:
        return math.lgamma(v)
    except ValueError:  # poles: 0 and the negative integers
        return math.inf


def _tgamma_scalar(v: float) -> float:
    if v == 0:
        return math.copysign(math.inf, v)
    if v == -math.inf or (v < 0 and v == math.floor(v)):
        return math.nan
    try:
        return math.gamma(v)
    except OverflowError:
        return math.inf


_erf = _elementwise(math.erf)
_erfc = _elementwise(math.erfc)
_lgamma = _elementwise(_lgamma_scalar)
_tgamma = _elementwise(_tgamma_scalar)

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_SQRT2 = math.sqrt(2.0)
with localcontext() as _ctx:  # 1/sqrt(2) as a float64 pair
    _ctx.prec = 40
    _INV_SQRT2 = float(1 / Decimal(2).sqrt())
    _INV_SQRT2_LO = float(1 / Decimal(2).sqrt() - Decimal(_INV_SQRT2))


def _erfcx(x):
    """exp(x*x) * erfc(x), without overflow for large x."""
    xs = np.where(np.isfinite(x) & (x <= 26.0), np.maximum(x, -27.0), 0.0)  # erfcx(-27) overflows
    sq, sq_err = _two_prod(xs, xs)
    mid = _erfc(xs) * np.exp(sq) * np.exp(sq_err)
    # asymptotic series for x > 26: 1/(x sqrt(pi)) * sum (-1)^k (2k-1)!! / (2x^2)^k
    xl = np.where(x > 26.0, x, 27.0)
    inv = 1.0 / (2.0 * xl * xl)
    term, acc = np.ones_like(xl), np.ones_like(xl)
    for k in range(1, 12):
        term = -term * (2 * k - 1) * inv
        acc = acc + term
    large = acc / (xl * math.sqrt(math.pi))
    res = np.where(x > 26.0, large, mid)
    res = np.where(x == _INF, 0.0, np.where(x == -_INF, _INF, res))
    return np.where(np.isnan(x), np.nan, res)


def _erfinv_core(t):
    """erfinv for t in [0, 0.5]: series start, then Halley steps on erf(x) - t."""
    x = (math.sqrt(math.pi) / 2.0) * (t + (math.pi / 12.0) * t ** 3)
    for _ in range(4):
        f = _erf(x) - t
        fp = _TWO_OVER_SQRT_PI * np.exp(-x * x)
        x = x - f / (fp + x * f)
    return x


def _erfcinv_tail(b):
    """erfcinv for b in (0, 0.5]: Winitzki's estimate, then Newton steps on
    log(erfcx(x)) - x^2 - log(b), which stays well scaled down to subnormal b."""
    log_b = np.log(b)
    lg = np.log(b) + np.log(2.0 - b)  # log(1 - a^2) with a = 1 - b
    k = 0.147
    w = 2.0 / (math.pi * k) + 0.5 * lg
    x = np.sqrt(np.sqrt(w * w - lg / k) - w)
    for _ in range(5):
        sq, sq_err = _two_prod(x, x)
        ex = _erfcx(x)
        h = (np.log(ex) - sq - sq_err) - log_b
        x = x + h * ex / _TWO_OVER_SQRT_PI  # h' = -(2/sqrt(pi)) / erfcx(x)
    return x


def _on(mask, fn, x, out):
    """out[mask] = fn(x[mask]), evaluating fn on the selected elements only."""
    if mask.any():
        out[mask] = fn(x[mask])


def _erfinv(a):
    t = np.abs(a)
    res = np.where(t == 1, _INF, np.nan)
    _on(t <= 0.5, _erfinv_core, t, res)
    _on((t > 0.5) & (t < 1), lambda v: _erfcinv_tail(1.0 - v), t, res)  # 1 - t exact
    return np.copysign(res, a)


def _erfcinv(b):
    # b in (0, 0.5]: tail; (0.5, 1.5): erfinv(1 - b); [1.5, 2): -tail(2 - b); all differences exact
    res = np.where(b == 0, _INF, np.where(b == 2, -_INF, np.nan))
    _on((b > 0) & (b <= 0.5), _erfcinv_tail, b, res)
    _on((b > 0.5) & (b < 1.5), lambda v: _erfinv(1.0 - v), b, res)
    _on((b >= 1.5) & (b < 2), lambda v: -_erfcinv_tail(2.0 - v), b, res)
    return res


def _normcdf(x):
    """0.5 * erfc(-x / sqrt(2)), with the rounding error of x / sqrt(2) corrected to first order."""
    xs = np.clip(np.where(np.isnan(x), 0.0, x), -40.0, 40.0)
    u, u_err = _two_prod(xs, _INV_SQRT2)
    delta = u_err + xs * _INV_SQRT2_LO  # x / sqrt(2) = u + delta
    res = 0.5 * (_erfc(-u) + _TWO_OVER_SQRT_PI * np.exp(-u * u) * delta)
    res = np.where(x > 40.0, 1.0, np.where(x < -40.0, 0.0, res))
    return np.where(np.isnan(x), np.nan, res)


def _normcdfinv(p):
    return -_SQRT2 * _erfcinv(2.0 * p) + 0.0  # +0 at p = 1/2


# --- Bessel functions ---

_EULER_GAMMA = 0.57721566490153286061


def _hankel(nu: int, x):
    """J_nu, Y_nu for nu in {0, 1} and x > 25 by Hankel's asymptotic expansion."""
    mu = 4.0 * nu * nu
    p, q, term = np.ones_like(x), np.zeros_like(x), np.ones_like(x)
    for k in range(1, 25):
        term = term * (mu - (2 * k - 1) ** 2) / (8.0 * k * x)
        if k % 2:
            q = q + (term if (k // 2) % 2 == 0 else -term)
        else:
            p = p + (term if (k // 2) % 2 == 0 else -term)
    # omega = x - (nu/2 + 1/4) pi; cos/sin(omega) from cos/sin(x) to keep x's reduction exact
    h = math.sqrt(0.5)
    cphi, sphi = (h, h) if nu == 0 else (-h, h)
    cx, sx = np.cos(x), np.sin(x)
    cw, sw = cx * cphi + sx * sphi, sx * cphi - cx * sphi
    amp = np.sqrt(2.0 / (_PI * x))
    return amp * (p * cw - q * sw), amp * (p * sw + q * cw)


_FACTORIALS = np.array([float(math.factorial(i)) for i in range(171)], F64)


def _j_series(n, x):
    """J_n(x) by its power series, for n >= 0 and (x/2)^2 <= n + 1 (no cancellation)."""
    h = 0.5 * x
    nf = n.astype(F64)
    # (x/2)^n / n!: directly while h^n stays normal, through logarithms otherwise
    power = np.power(h, nf) / _FACTORIALS[np.minimum(n, 170)]
    direct = (n <= 170) & np.isfinite(power) & ((power > 1e-290) | (h == 0))
    pref = np.where(direct, power,
                    np.exp(nf * np.log(np.where(h > 0, h, 1.0)) - _lgamma(nf + 1.0)))
    pref = np.where((h == 0) & (n > 0), 0.0, pref)
    q = -h * h
    term, acc = np.ones_like(x), np.ones_like(x)
    for k in range(1, 40):
        term = term * q / (k * (nf + k))
        acc = acc + term
    return pref * acc


def _y01_series(x):
    """Y_0, Y_1 for 0 < x <= 2 by their power series."""
    h = 0.5 * x
    q = -h * h
    log_h = np.log(h)
    # Y0 = (2/pi) [(log h + gamma) J0 - sum_{k>=1} H_k q^k / (k!)^2]
    # Y1 = (2/pi) log(h) J1 - 1/(pi h) - (h/pi) sum_{k>=0} (psi(k+1) + psi(k+2)) q^k / (k! (k+1)!)
    j0 = _j_series(np.zeros(x.shape, I64), x)
    j1 = _j_series(np.ones(x.shape, I64), x)
    s0 = np.zeros_like(x)
    t0 = np.ones_like(x)  # q^k / (k!)^2
    t1 = np.ones_like(x)  # q^k / (k! (k+1)!)
    harmonic = 0.0
    psi1 = -_EULER_GAMMA  # psi(1)
    s1 = (psi1 + psi1 + 1.0) * t1
    for k in range(1, 30):
        harmonic += 1.0 / k
        t0 = t0 * q / (k * k)
        s0 = s0 + harmonic * t0
        t1 = t1 * q / (k * (k + 1))
        psi_k1 = -_EULER_GAMMA + harmonic  # psi(k+1)
        s1 = s1 + (psi_k1 + psi_k1 + 1.0 / (k + 1)) * t1
    y0 = (2.0 / _PI) * ((log_h + _EULER_GAMMA) * j0 - s0)
    y1 = (2.0 / _PI) * log_h * j1 - 1.0 / (_PI * h) - (h / _PI) * s1
    return y0, y1


def _miller(n, x):
    """J_n(x) by Miller's backward recurrence normalised with J0 + 2 sum J_2k = 1, plus Y0, Y1 by
    Neumann series over the same sequence. n >= 0, x >= 2 (bounded per-step growth)."""
    top = np.maximum(n.astype(F64), np.ceil(x))
    start = (top + 40.0 + np.ceil(8.0 * np.cbrt(top))).astype(I64)
    start = start + (start & 1)
    kmax = int(start.max()) if start.size else 0
    j_next, j_cur = np.zeros_like(x), np.zeros_like(x)
    norm, s0, s1, target = (np.zeros_like(x) for _ in range(4))
    for k in range(kmax, -1, -1):
        j_cur = np.where(start == k, 1e-30, j_cur)
        target = np.where(n == k, j_cur, target)
        if k == 0:
            norm = norm + j_cur
        elif k % 2 == 0:
            norm = norm + 2.0 * j_cur
            half = k // 2
            s0 = s0 + ((-1.0) ** half / half) * j_cur  # sum (-1)^m J_2m / m
        else:
            k1, k2 = (k + 1) // 2, (k - 1) // 2  # sum (-1)^m (J_{2m-1} - J_{2m+1}) / m
            c = (-1.0) ** k1 / k1 - ((-1.0) ** k2 / k2 if k2 >= 1 else 0.0)
            s1 = s1 + c * j_cur
        big = np.abs(j_cur) > 1e250
        if big.any():
            f = np.where(big, 1e-250, 1.0)
            j_cur, j_next, norm, s0, s1, target = (v * f for v in (j_cur, j_next, norm, s0, s1, target))
        if k > 0:
            j_cur, j_next = (2.0 * k / x) * j_cur - j_next, j_cur
    j0 = j_cur / norm
    log_term = np.log(0.5 * x) + _EULER_GAMMA
    y0 = (2.0 / _PI) * (log_term * j0 - 2.0 * s0 / norm)
    return target / norm, y0, s1 / norm, j0, log_term


def _j01_y01(x):
    """J0, J1, Y0, Y1 for finite x > 0."""
    out = [np.empty_like(x) for _ in range(4)]
    small, large = x <= 2.0, x > 25.0
    mid = ~small & ~large
    if small.any():
        xs = x[small]
        y0, y1 = _y01_series(xs)
        vals = (_j_series(np.zeros(xs.shape, I64), xs), _j_series(np.ones(xs.shape, I64), xs), y0, y1)
        for o, v in zip(out, vals):
            o[small] = v
    if mid.any():
        xm = x[mid]
        j1, y0, s1, j0, log_term = _miller(np.ones(xm.shape, I64), xm)
        y1 = (2.0 / _PI) * (-j0 / xm + log_term * j1 + s1)
        for o, v in zip(out, (j0, j1, y0, y1)):
            o[mid] = v
    if large.any():
        xl = x[large]
        j0, y0 = _hankel(0, xl)
        j1, y1 = _hankel(1, xl)
        for o, v in zip(out, (j0, j1, y0, y1)):
            o[large] = v
    return out


def _forward(n, x, f0, f1):
    """f_n from f_0, f_1 by f_{k+1} = (2k/x) f_k - f_{k-1} (stable for Y, and for J while k < x).
    Infinite values stay infinite."""
    res = np.where(n == 0, f0, f1)
    prev, cur = f0, f1
    for k in range(1, int(n.max()) if n.size else 0):
        nxt = np.where(np.isinf(cur), cur, (2.0 * k / x) * cur - prev)
        prev, cur = cur, nxt
        res = np.where(n == k + 1, cur, res)
    return res


def _jn_pos(n, x):
    """J_n(x) for n >= 0, finite x >= 0."""
    out = np.zeros_like(x)
    h2 = (0.5 * x) ** 2
    tiny = (n > 2000) & (x <= 0.5 * n)  # |J_n| < (e/4)^n: underflows
    series = ~tiny & (h2 <= n + 1.0)
    fwd = ~tiny & ~series & (x > 25.0) & (n < x)
    miller = ~tiny & ~series & ~fwd
    if series.any():
        out[series] = _j_series(n[series], x[series])
    if fwd.any():
        xf = x[fwd]
        j0, y0 = _hankel(0, xf)
        j1, y1 = _hankel(1, xf)
        out[fwd] = _forward(n[fwd], xf, j0, j1)
    if miller.any():
        out[miller] = _miller(n[miller], x[miller])[0]
    return out


def _yn_pos(n, x):
    """Y_n(x) for n >= 0, finite x > 0."""
    out = np.full_like(x, -_INF)
    ok = ~((n > 2000) & (x <= 0.5 * n))  # |Y_n| > (4/e)^n: overflows
    if ok.any():
        _, _, y0, y1 = _j01_y01(x[ok])
        out[ok] = _forward(n[ok], x[ok], y0, y1)
    return out


def _odd_sign(n):
    return np.where((n & 1) == 1, -1.0, 1.0)


def _jn(n, x):
    n = n.astype(I64)
    sign = np.where(n < 0, _odd_sign(n), 1.0) * np.where(np.signbit(x), _odd_sign(n), 1.0)
    n, ax = np.abs(n), np.abs(x)
    fin = np.isfinite(ax)
    res = _jn_pos(np.where(fin, n, 0), np.where(fin, ax, 0.0)) * sign
    return np.where(np.isnan(x), np.nan, np.where(np.isinf(x), 0.0 * sign, res))


def _yn(n, x):
    n = n.astype(I64)
    sign = np.where(n < 0, _odd_sign(n), 1.0)
    n = np.abs(n)
    ok = np.isfinite(x) & (x > 0)
    res = _yn_pos(np.where(ok, n, 0), np.where(ok, x, 1.0)) * sign
    res = np.where(x == 0, -_INF * sign, res)
    res = np.where(x == _INF, 0.0, res)
    return np.where(np.isnan(x) | (x < 0), np.nan, res)


def _j0(x):
    return _jn(np.zeros(x.shape, I64), x)


def _j1(x):
    return _jn(np.ones(x.shape, I64), x)


def _y0(x):
    return _yn(np.zeros(x.shape, I64), x)


def _y1(x):
    return _yn(np.ones(x.shape, I64), x)


def _bessel_i(nu: int, x):
    """Modified Bessel I_0 / I_1: power series up to |x| = 30, asymptotic expansion above."""
    ax = np.abs(x)
    xs = np.where(ax <= 30.0, ax, 0.0)
    q = 0.25 * xs * xs
    term = np.ones_like(xs) if nu == 0 else 0.5 * xs
    acc = term.copy()
    for k in range(1, 80):
        term = term * q / (k * (k + nu))
        acc = acc + term
    xl = np.where(ax > 30.0, ax, 31.0)
    mu = 4.0 * nu * nu
    t, s = np.ones_like(xl), np.ones_like(xl)
    for k in range(1, 30):
        t = -t * (mu - (2 * k - 1) ** 2) / (8.0 * k * xl)
        s = s + t
    half = np.exp(0.5 * xl)  # e^x / sqrt(2 pi x) without overflowing early
    large = half * (half * s / np.sqrt(2.0 * _PI * xl))
    res = np.where(ax <= 30.0, acc, large)
    res = np.where(np.isinf(ax), _INF, res)
    if nu == 1:
        res = np.copysign(res, x)
    return np.where(np.isnan(x), np.nan, res)


def _i0(x):
    return _bessel_i(0, x)


def _i1(x):
    return _bessel_i(1, x)


# ---------------------------------------------------------------------------------------------
# Integer and bit functions
# ---------------------------------------------------------------------------------------------

def _bitlen(u):
    """Number of significant bits of uint32 values (exact through float64)."""
    _, e = np.frexp(u.astype(F64))
    return e.astype(I32)


def _clz(x):
    return (32 - _bitlen(x.view(U32))).astype(I32)


def _clzll(x):
    u = x.view(U64)
    hi, lo = (u >> U64(32)).astype(U32), (u & U64(0xFFFFFFFF)).astype(U32)
    return np.where(hi != 0, 32 - _bitlen(hi), 64 - _bitlen(lo)).astype(I32)


def _popcount64(u):
    u = u.astype(U64)
    u = u - ((u >> U64(1)) & U64(0x5555555555555555))
    u = (u & U64(0x3333333333333333)) + ((u >> U64(2)) & U64(0x3333333333333333))
    u = (u + (u >> U64(4))) & U64(0x0F0F0F0F0F0F0F0F)
    return ((u * U64(0x0101010101010101)) >> U64(56)).astype(I32)


def _popc(x):
    return _popcount64(x.view(U32))


def _popcll(x):
    return _popcount64(x.view(U64))


def _reverse_bits(u, width: int):
    u = u.astype(U64)
    masks = [(1, 0x5555555555555555), (2, 0x3333333333333333), (4, 0x0F0F0F0F0F0F0F0F),
             (8, 0x00FF00FF00FF00FF), (16, 0x0000FFFF0000FFFF), (32, 0x00000000FFFFFFFF)]
    for shift, mask in masks:
        if shift >= width:
            break
        m, s = U64(mask), U64(shift)
        u = ((u >> s) & m) | ((u & m) << s)
    return u


def _brev(x):
    return _reverse_bits(x.view(U32), 32).astype(U32).view(I32)


def _brevll(x):
    return _reverse_bits(x.view(U64), 64).view(I64)


def _ffs_bits(u):
    low = u & (~u + U64(1))  # lowest set bit
    _, e = np.frexp(low.astype(F64))  # a power of two: exact
    return e.astype(I32)  # 0 for 0


def _ffs(x):
    return _ffs_bits(x.view(U32).astype(U64))


def _ffsll(x):
    return _ffs_bits(x.view(U64))


def _byte_perm(x, y, s):
    src = (y.view(U32).astype(U64) << U64(32)) | x.view(U32).astype(U64)
    sel = s.view(U32).astype(U64)
    out = np.zeros(src.shape, U64)
    for i in range(4):
        idx = (sel >> U64(4 * i)) & U64(7)
        out |= ((src >> (idx * U64(8))) & U64(0xFF)) << U64(8 * i)
    return out.astype(U32).view(I32)


def _mulhi(x, y):
    return ((x.astype(I64) * y.astype(I64)) >> I64(32)).astype(I32)


def _umulhi(x, y):
    return ((x.astype(U64) * y.astype(U64)) >> U64(32)).astype(U32)


def _umul64hi_bits(a, b):
    m = U64(0xFFFFFFFF)
    a0, a1, b0, b1 = a & m, a >> U64(32), b & m, b >> U64(32)
    p00, p01, p10, p11 = a0 * b0, a0 * b1, a1 * b0, a1 * b1
    mid = (p00 >> U64(32)) + (p01 & m) + (p10 & m)
    return p11 + (p01 >> U64(32)) + (p10 >> U64(32)) + (mid >> U64(32))


def _umul64hi(x, y):
    return _umul64hi_bits(x.view(U64), y.view(U64))


def _mul64hi(x, y):
    a, b = x.view(U64), y.view(U64)
    hi = _umul64hi_bits(a, b)
    hi = hi - np.where(x < 0, b, U64(0)) - np.where(y < 0, a, U64(0))  # signed correction, mod 2**64
    return hi.view(I64)


def _mul24(x, y):
    a = ((x.view(U32).astype(I64) & 0xFFFFFF) ^ 0x800000) - 0x800000  # sign-extend bit 23
    b = ((y.view(U32).astype(I64) & 0xFFFFFF) ^ 0x800000) - 0x800000
    return (a * b).astype(I32)


def _umul24(x, y):
    a, b = x.astype(U64) & U64(0xFFFFFF), y.astype(U64) & U64(0xFFFFFF)
    return (a * b).astype(U32)


def _sad(x, y, z):
    return (np.abs(x.astype(I64) - y.astype(I64)) + z.astype(I64)).astype(U32).view(I32)


def _usad(x, y, z):
    return (np.abs(x.astype(I64) - y.astype(I64)) + z.astype(I64)).astype(U32)


def _hadd(x, y):
    return ((x.astype(I64) + y.astype(I64)) >> 1).astype(x.dtype)


def _rhadd(x, y):
    return ((x.astype(I64) + y.astype(I64) + 1) >> 1).astype(x.dtype)


def _hiloint2double(hi, lo):
    return ((hi.view(U32).astype(U64) << U64(32)) | lo.view(U32).astype(U64)).view(F64)


def _double2hiint(x):
    return (x.view(U64) >> U64(32)).astype(U32).view(I32)


def _double2loint(x):
    return (x.view(U64) & U64(0xFFFFFFFF)).astype(U32).view(I32)


def _view(dtype):
    return lambda x: x.view(dtype)


def _pred(fn):
    return lambda x: fn(x).astype(I32)


# ---------------------------------------------------------------------------------------------
# The table: symbol -> (argument type codes, implementation)
# ---------------------------------------------------------------------------------------------

_TABLE: Dict[str, Tuple[str, Callable]] = {}


def _reg(symbol: str, codes: str, fn: Callable) -> None:
    _TABLE[symbol] = (codes, fn)


def _via64(fn: Callable) -> Callable:
    """A float32 function computed in float64 and rounded once."""
    def wrapped(*args):
        out = np.asarray(fn(*[a.astype(F64) if a.dtype == F32 else a for a in args]))
        return out.astype(F32) if out.dtype == F64 else out
    return wrapped


def _pair(f32_name: str, f64_name: str, codes64: str, fn64: Callable) -> None:
    """Register a float64 implementation for a double symbol and, computed through float64, for its
    float32 sibling (type codes 'd' become 'f')."""
    if f64_name:
        _reg(f64_name, codes64, fn64)
    if f32_name:
        _reg(f32_name, codes64.replace("d", "f"), _via64(fn64))


# unary float functions: base name -> float64 implementation; symbols __nv_<base>f and __nv_<base>
_UNARY = {
    "fabs": np.abs, "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "rint": np.rint,
    "nearbyint": np.rint, "round": _round, "sqrt": np.sqrt, "rsqrt": _rsqrt, "cbrt": np.cbrt,
    "rcbrt": _rcbrt, "exp": np.exp, "exp2": np.exp2, "exp10": _exp10, "expm1": np.expm1,
    "log": np.log, "log2": np.log2, "log10": np.log10, "log1p": np.log1p, "logb": _logb,
    "sin": np.sin, "cos": np.cos, "tan": np.tan, "sinpi": _sinpi, "cospi": _cospi,
    "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh,
    "tanh": np.tanh, "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh,
    "erf": _erf, "erfc": _erfc, "erfcx": _erfcx, "erfinv": _erfinv, "erfcinv": _erfcinv,
    "normcdf": _normcdf, "normcdfinv": _normcdfinv, "lgamma": _lgamma, "tgamma": _tgamma,
    "j0": _j0, "j1": _j1, "y0": _y0, "y1": _y1, "cyl_bessel_i0": _i0, "cyl_bessel_i1": _i1,
}
for _base, _fn in _UNARY.items():
    _pair(f"__nv_{_base}f", f"__nv_{_base}", "d", _fn)

# binary float functions
_BINARY = {
    "atan2": np.arctan2, "hypot": np.hypot, "rhypot": _rnorm, "pow": np.power, "fmod": np.fmod,
    "remainder": _remainder, "fdim": _fdim,
}
for _base, _fn in _BINARY.items():
    _pair(f"__nv_{_base}f", f"__nv_{_base}", "dd", _fn)
_pair("__nv_norm3df", "__nv_norm3d", "ddd", _norm)
_pair("__nv_rnorm3df", "__nv_rnorm3d", "ddd", _rnorm)
_pair("__nv_norm4df", "__nv_norm4d", "dddd", _norm)
_pair("__nv_rnorm4df", "__nv_rnorm4d", "dddd", _rnorm)
_pair("__nv_powif", "__nv_powi", "di", _powi)
_pair("__nv_ldexpf", "__nv_ldexp", "di", _ldexp)
_pair("__nv_scalbnf", "__nv_scalbn", "di", _ldexp)
_pair("__nv_jnf", "__nv_jn", "id", _jn)
_pair("__nv_ynf", "__nv_yn", "id", _yn)
_pair("__nv_ilogbf", "__nv_ilogb", "d", _ilogb)
_pair("__nv_saturatef", "", "d", _saturate)
_reg("__nv_rcp64h", "d", _rcp64h)

# computed in the argument's own type (exact)
_reg("__nv_copysignf", "ff", np.copysign)
_reg("__nv_copysign", "dd", np.copysign)
_reg("__nv_nextafterf", "ff", np.nextafter)
_reg("__nv_nextafter", "dd", np.nextafter)

# fast variants: the precise computation
for _base in ("sin", "cos", "tan", "exp", "exp10", "log", "log2", "log10"):
    _reg(f"__nv_fast_{_base}f", "f", _via64(_UNARY[_base]))
_reg("__nv_fast_powf", "ff", _via64(np.power))
_reg("__nv_fast_fdividef", "ff", np.divide)

# predicates (0 / 1 as int32)
for _suffix, _code in (("f", "f"), ("d", "d")):
    _reg(f"__nv_isnan{_suffix}", _code, _pred(np.isnan))
    _reg(f"__nv_isinf{_suffix}", _code, _pred(np.isinf))
    _reg(f"__nv_signbit{_suffix}", _code, _pred(np.signbit))
_reg("__nv_finitef", "f", _pred(np.isfinite))
_reg("__nv_isfinited", "d", _pred(np.isfinite))

# arithmetic with a rounding mode
for _m in ("rn", "rz", "ru", "rd"):
    _reg(f"__nv_fadd_{_m}", "ff", _fadd(_m))
    _reg(f"__nv_fsub_{_m}", "ff", _fadd(_m, negate_b=True))
    _reg(f"__nv_fmul_{_m}", "ff", _fmul(_m))
    _reg(f"__nv_fdiv_{_m}", "ff", _fdiv(_m))
    _reg(f"__nv_frcp_{_m}", "f", _frcp(_m))
    _reg(f"__nv_fsqrt_{_m}", "f", _fsqrt(_m))
    _reg(f"__nv_fmaf_{_m}", "fff", _ffma(_m))
    _reg(f"__nv_dadd_{_m}", "dd", _dadd(_m))
    _reg(f"__nv_dsub_{_m}", "dd", _dadd(_m, negate_b=True))
    _reg(f"__nv_dmul_{_m}", "dd", _dmul(_m))
    _reg(f"__nv_ddiv_{_m}", "dd", _ddiv(_m))
    _reg(f"__nv_drcp_{_m}", "d", _drcp(_m))
    _reg(f"__nv_dsqrt_{_m}", "d", _dsqrt(_m))
    _reg(f"__nv_fma_{_m}", "ddd", _dfma(_m))
_reg("__nv_fmaf", "fff", _ffma("rn"))
_reg("__nv_fma", "ddd", _dfma("rn"))
_reg("__nv_frsqrt_rn", "f", _frsqrt("rn"))

# conversions
for _m in ("rn", "rz", "ru", "rd"):
    for _src, _code in (("float", "f"), ("double", "d")):
        _reg(f"__nv_{_src}2int_{_m}", _code, _to_int("i32", _m))
        _reg(f"__nv_{_src}2uint_{_m}", _code, _to_int("u32", _m))
        _reg(f"__nv_{_src}2ll_{_m}", _code, _to_int("i64", _m))
        _reg(f"__nv_{_src}2ull_{_m}", _code, _to_int("u64", _m))
    _reg(f"__nv_double2float_{_m}", "d", _d_to_f32(_m))
    _reg(f"__nv_int2float_{_m}", "i", _int_to_f32(_m))
    _reg(f"__nv_uint2float_{_m}", "I", _int_to_f32(_m))
    _reg(f"__nv_ll2float_{_m}", "l", _ll_to_f32(_m, unsigned=False))
    _reg(f"__nv_ull2float_{_m}", "L", _ll_to_f32(_m, unsigned=True))
    _reg(f"__nv_ll2double_{_m}", "l", _ll_to_f64(_m, unsigned=False))
    _reg(f"__nv_ull2double_{_m}", "L", _ll_to_f64(_m, unsigned=True))
_reg("__nv_int2double_rn", "i", lambda x: x.astype(F64))
_reg("__nv_uint2double_rn", "I", lambda x: x.astype(F64))
_reg("__nv_llrintf", "f", _to_int("i64", "rn"))
_reg("__nv_llrint", "d", _to_int("i64", "rn"))
_reg("__nv_llroundf", "f", _to_int("i64", "away"))
_reg("__nv_llround", "d", _to_int("i64", "away"))
_reg("__nv_float_as_int", "f", _view(I32))
_reg("__nv_float_as_uint", "f", _view(U32))
_reg("__nv_int_as_float", "i", _view(F32))
_reg("__nv_uint_as_float", "I", _view(F32))
_reg("__nv_double_as_longlong", "d", _view(I64))
_reg("__nv_longlong_as_double", "l", _view(F64))
_reg("__nv_hiloint2double", "ii", _hiloint2double)
_reg("__nv_double2hiint", "d", _double2hiint)
_reg("__nv_double2loint", "d", _double2loint)

# integer and bit functions
_reg("__nv_abs", "i", np.abs)
_reg("__nv_llabs", "l", np.abs)
_reg("__nv_clz", "i", _clz)
_reg("__nv_clzll", "l", _clzll)
_reg("__nv_popc", "i", _popc)
_reg("__nv_popcll", "l", _popcll)
_reg("__nv_brev", "i", _brev)
_reg("__nv_brevll", "l", _brevll)
_reg("__nv_ffs", "i", _ffs)
_reg("__nv_ffsll", "l", _ffsll)
_reg("__nv_byte_perm", "iii", _byte_perm)
_reg("__nv_mulhi", "ii", _mulhi)
_reg("__nv_umulhi", "II", _umulhi)
_reg("__nv_mul64hi", "ll", _mul64hi)
_reg("__nv_umul64hi", "LL", _umul64hi)
_reg("__nv_mul24", "ii", _mul24)
_reg("__nv_umul24", "II", _umul24)
_reg("__nv_sad", "iiI", _sad)
_reg("__nv_usad", "III", _usad)
_reg("__nv_hadd", "ii", _hadd)
_reg("__nv_uhadd", "II", _hadd)
_reg("__nv_rhadd", "ii", _rhadd)
_reg("__nv_urhadd", "II", _rhadd)


# ---------------------------------------------------------------------------------------------
# Public interface
# ---------------------------------------------------------------------------------------------

def _coerce(a: np.ndarray, dtype: np.dtype) -> np.ndarray:
    if a.dtype == dtype:
        return a
    if a.dtype.kind in "iub" and dtype.kind in "iu" and a.dtype.itemsize == dtype.itemsize:
        return a.view(dtype)
    return a.astype(dtype)


def call(symbol: str, args: list, ret_dtype: np.dtype) -> np.ndarray:
    """Compute libdevice function `symbol` elementwise on numpy arrays.

    args: numpy arrays, already broadcast to one shape by Triton's front end, in the exact dtypes
    the symbol takes (float32 for the ``f`` versions, float64 for the double ones,
    int32 / int64 / uint32 / uint64 for the integer ones; other dtypes are converted, integers of
    the same width reinterpreted). Returns a new array of that shape in `ret_dtype` (integer
    results wrap into it, as the GPU's bits do: ``__nv_float2uint_rn`` declared int32 in Triton
    gives the uint32 bits as int32).

    Raises NotImplementedError for a symbol this module does not implement."""
    entry = _TABLE.get(symbol)
    if entry is None:
        raise NotImplementedError(f"libdevice function {symbol} has no CPU implementation in tritonkit")
    codes, fn = entry
    if len(args) != len(codes):
        raise TypeError(f"libdevice function {symbol} takes {len(codes)} arguments, got {len(args)}")
    arrays = [_coerce(np.asarray(a), _CODES[c]) for a, c in zip(args, codes)]
    shape = np.broadcast_shapes(*(a.shape for a in arrays))
    flat = [np.ascontiguousarray(np.broadcast_to(a, shape)).reshape(-1) for a in arrays]
    with np.errstate(all="ignore"):
        out = np.asarray(fn(*flat))
        ret = np.dtype(ret_dtype)
        if out.dtype != ret:
            out = _coerce(out, ret)
    return np.array(out.reshape(shape), dtype=ret, copy=True)


def supported() -> frozenset:
    """The libdevice symbols (``"__nv_..."`` strings) that :func:`call` implements."""
    return frozenset(_TABLE)
