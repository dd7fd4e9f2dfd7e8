"""tritonkit.check._libdevice: the CPU implementations of libdevice functions.

Coverage is checked against Triton's own CUDA ``libdevice.py`` table; values against references
that share no code with the implementation: torch's float64 functions, exact rational arithmetic
(``fractions``), Python integers and ``struct``, documented special values, and literal Bessel values
computed offline with mpmath (torch's bessel_j0/j1/y0/y1 are accurate to only about 1e-7).
"""
import ast
import math
import pathlib
import struct
from fractions import Fraction

import numpy as np
import pytest
import torch
import triton.language.extra.cuda.libdevice as triton_libdevice

from tritonkit.check.interp import libdevice as ld

# Symbols of Triton's table that tritonkit deliberately does not implement.
NOT_SUPPORTED: set = set()

_DTYPES = {"fp32": np.float32, "fp64": np.float64, "int32": np.int32, "int64": np.int64,
           "uint32": np.uint32, "uint64": np.uint64}
RNG = np.random.default_rng(20240607)
F32_MAX = float(np.finfo(np.float32).max)
F64_MAX = float(np.finfo(np.float64).max)


def _triton_table():
    """{symbol: (argument dtype names, result dtype name)} read from Triton's libdevice.py."""
    tree = ast.parse(pathlib.Path(triton_libdevice.__file__).read_text())
    table = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Dict):
            continue
        for key, value in zip(node.keys, node.values):
            if (isinstance(key, ast.Tuple) and isinstance(value, ast.Tuple)
                    and isinstance(value.elts[0], ast.Constant)):
                args = tuple(e.args[0].value for e in key.elts)
                table[value.elts[0].value] = (args, value.elts[1].args[0].value)
    return table


TRITON = _triton_table()


def run(symbol, *args, ret=None):
    """call() with the dtypes from Triton's table; checks the result's dtype and shape."""
    arg_types, ret_type = TRITON[symbol]
    arrays = [np.asarray(a, dtype=_DTYPES[t]) for a, t in zip(args, arg_types)]
    out = ld.call(symbol, arrays, np.dtype(_DTYPES[ret_type]))
    assert out.dtype == np.dtype(_DTYPES[ret_type]), symbol
    assert out.shape == np.broadcast_shapes(*(a.shape for a in arrays)), symbol
    return out


def same_bits(a, b):
    """Elementwise: equal values with equal signs of zero, or both NaN."""
    a, b = np.asarray(a), np.asarray(b)
    return (np.isnan(a) & np.isnan(b)) | ((a == b) & (np.signbit(a) == np.signbit(b)))


def ulp_distance32(a, b):
    """Distance in float32 steps; 0 for two NaNs or equal infinities, huge for other mismatches."""
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    ia, ib = a.view(np.int32).astype(np.int64), b.view(np.int32).astype(np.int64)
    ia = np.where(ia < 0, -(ia & 0x7FFFFFFF), ia)
    ib = np.where(ib < 0, -(ib & 0x7FFFFFFF), ib)
    dist = np.abs(ia - ib)
    special = np.isnan(a) | np.isnan(b) | np.isinf(a) | np.isinf(b)
    return np.where(special, np.where(same_bits(a, b), 0, 1 << 40), dist)


def assert_within_ulp32(symbol, x, got, want, ulps=1):
    dist = ulp_distance32(got, want)
    bad = np.flatnonzero(dist > ulps)
    assert bad.size == 0, (symbol, [(x[i] if np.ndim(x) else x, got[i], want[i]) for i in bad[:5]])


def assert_same(symbol, inputs, got, want):
    ok = same_bits(got, want) if np.asarray(want).dtype.kind == "f" else (np.asarray(got) == want)
    bad = np.flatnonzero(~ok)
    assert bad.size == 0, (symbol, [tuple(np.asarray(a)[i] for a in inputs) + (got[i], want[i])
                                    for i in bad[:5]])


# ---------------------------------------------------------------------------------------------
# inputs
# ---------------------------------------------------------------------------------------------

EDGE = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, 1 / 3, 0.1, 1e-45, -1e-45, 7e-39, 1.1754944e-38,
        1e30, -1e30, 3e38, F32_MAX, -F32_MAX, 1e-20]
SPECIAL = [math.inf, -math.inf, math.nan]


def f32_values(n=60, scale=10.0):
    rand = np.concatenate([RNG.standard_normal(n) * scale,
                           RNG.standard_normal(n // 2) * np.exp(RNG.uniform(-40, 40, n // 2))])
    return np.concatenate([EDGE, SPECIAL, rand]).astype(np.float32)


def f64_values(n=60):
    bits = RNG.integers(-2 ** 63, 2 ** 63 - 1, n, dtype=np.int64).view(np.float64)
    bits = bits[np.isfinite(bits)]
    edge = [0.0, -0.0, 1.0, -1.0, 0.1, 1 / 3, 5e-324, -1e-310, 2.2250738585072014e-308, 1e300,
            -1e300, F64_MAX, -F64_MAX, 2.0 ** 1000, 2.0 ** -1000, 1.0 + 2 ** -52]
    return np.concatenate([edge, bits, RNG.standard_normal(n) * 100]).astype(np.float64)


X32 = f32_values()
INT32 = np.concatenate([[0, 1, -1, 2, 2 ** 31 - 1, -2 ** 31, 0x800000, 0xFFFFFF, 1 << 30, 255],
                        RNG.integers(-2 ** 31, 2 ** 31, 40)]).astype(np.int64)
INT64 = np.concatenate([[0, 1, -1, 2 ** 63 - 1, -2 ** 63, 2 ** 32, 2 ** 32 - 1, 2 ** 53 + 1,
                         -(2 ** 53 + 1), 1 << 62], RNG.integers(-2 ** 63, 2 ** 63 - 1, 40, dtype=np.int64)])


def wrap(v: int, bits: int, signed: bool) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if signed and v >= 1 << (bits - 1) else v


# ---------------------------------------------------------------------------------------------
# coverage and interface
# ---------------------------------------------------------------------------------------------

def test_every_triton_symbol_is_supported():
    assert len(TRITON) > 300
    assert set(TRITON) - ld.supported() == NOT_SUPPORTED
    assert ld.APPROXIMATE <= ld.supported()


def test_argument_types_match_triton():
    codes = {"fp32": "f", "fp64": "d", "int32": "i", "uint32": "I", "int64": "l", "uint64": "L"}
    for symbol, (arg_types, _) in TRITON.items():
        if symbol not in NOT_SUPPORTED:
            assert ld._TABLE[symbol][0] == "".join(codes[t] for t in arg_types), symbol


def test_every_symbol_runs_with_tritons_dtypes():
    samples = {"fp32": np.array(EDGE[:10] + SPECIAL + [2.5, 40.0], np.float32).reshape(3, 5),
               "fp64": np.array(EDGE[:10] + SPECIAL + [2.5, 40.0], np.float64).reshape(3, 5)}
    ints = [0, 1, -1, 2, 3, 7, 100, 2 ** 31 - 1, -2 ** 31, 5, 12, 31, 64, 6, 9]
    for name in ("int32", "int64", "uint32", "uint64"):
        samples[name] = np.array([wrap(v, np.dtype(_DTYPES[name]).itemsize * 8, name[0] == "i")
                                  for v in ints], _DTYPES[name]).reshape(3, 5)
    for symbol, (arg_types, _) in TRITON.items():
        if symbol in NOT_SUPPORTED:
            continue
        args = [samples[t] for t in arg_types]
        before = [a.copy() for a in args]
        out = run(symbol, *args)
        assert all(np.array_equal(a, b, equal_nan=True) for a, b in zip(args, before)), symbol
        assert not any(np.shares_memory(out, a) for a in args), symbol
        assert run(symbol, *[a[:0] for a in args]).shape == (0, 5), symbol


def test_unknown_symbol():
    with pytest.raises(NotImplementedError) as err:
        ld.call("__nv_nosuchf", [np.zeros(2, np.float32)], np.dtype(np.float32))
    assert str(err.value) == "libdevice function __nv_nosuchf has no CPU implementation in tritonkit"


def test_zero_dimensional_and_broadcast_arguments():
    out = ld.call("__nv_fmaf", [np.float32(2.0), np.ones((2, 3), np.float32), np.float32(0.5)],
                  np.dtype(np.float32))
    assert out.shape == (2, 3) and np.all(out == 2.5)
    assert ld.call("__nv_tanh", [np.array(0.5)], np.dtype(np.float64)).shape == ()


# ---------------------------------------------------------------------------------------------
# float32 functions against torch in float64, rounded once (within 1 ulp)
# ---------------------------------------------------------------------------------------------

def _t(fn):
    """A torch function applied in float64 to numpy arrays."""
    return lambda *xs: fn(*[torch.from_numpy(np.asarray(x, np.float64)) for x in xs]).numpy()


def to32(x):
    with np.errstate(over="ignore"):
        return np.asarray(x).astype(np.float32)


BESSEL_X = np.concatenate([[0.0, 1e-30, 2.0, 2.5, 24.9, 25.1], RNG.uniform(-60, 60, 50),
                           RNG.uniform(0, 3, 10)]).astype(np.float32)
UNIT = np.concatenate([[0.0, -0.0, 0.5, -0.5, 0.999, -0.9999999, 1e-30], RNG.uniform(-1, 1, 40),
                       1 - np.exp(RNG.uniform(-16, -1, 10))]).astype(np.float32)
PROB = np.concatenate([[0.5, 1e-30, 1e-38, 0.999], RNG.uniform(0, 1, 30),
                       np.exp(RNG.uniform(-80, -1, 10))]).astype(np.float32)

UNARY_F32 = [
    ("__nv_tanhf", torch.tanh, X32), ("__nv_expf", torch.exp, X32), ("__nv_fast_expf", torch.exp, X32),
    ("__nv_exp2f", torch.exp2, X32), ("__nv_expm1f", torch.expm1, X32), ("__nv_logf", torch.log, X32),
    ("__nv_log2f", torch.log2, X32), ("__nv_log10f", torch.log10, X32), ("__nv_log1pf", torch.log1p, X32),
    ("__nv_sinf", torch.sin, X32), ("__nv_cosf", torch.cos, X32), ("__nv_tanf", torch.tan, X32),
    ("__nv_fast_sinf", torch.sin, X32), ("__nv_asinf", torch.asin, UNIT), ("__nv_acosf", torch.acos, UNIT),
    ("__nv_atanf", torch.atan, X32), ("__nv_sinhf", torch.sinh, X32), ("__nv_coshf", torch.cosh, X32),
    ("__nv_asinhf", torch.asinh, X32), ("__nv_acoshf", torch.acosh, X32), ("__nv_atanhf", torch.atanh, UNIT),
    ("__nv_sqrtf", torch.sqrt, X32), ("__nv_rsqrtf", torch.rsqrt, X32),
    ("__nv_cbrtf", lambda t: torch.sign(t) * torch.abs(t) ** (1 / 3), X32[np.abs(X32) > 1e-30]),
    ("__nv_erff", torch.erf, X32), ("__nv_erfcf", torch.erfc, X32),
    ("__nv_erfcxf", torch.special.erfcx, X32), ("__nv_erfinvf", torch.special.erfinv, UNIT),
    ("__nv_erfcinvf", lambda t: -torch.special.ndtri(t / 2) / math.sqrt(2), 2 * PROB),
    ("__nv_normcdff", lambda t: 0.5 * torch.erfc(-t / math.sqrt(2)), X32),  # torch's ndtr: 0 in the tail
    ("__nv_normcdfinvf", torch.special.ndtri, PROB),
    ("__nv_lgammaf", torch.lgamma, X32[np.abs(X32) < 1e30]),
    ("__nv_cyl_bessel_i0f", torch.special.i0, BESSEL_X), ("__nv_cyl_bessel_i1f", torch.special.i1, BESSEL_X),
    ("__nv_floorf", torch.floor, X32), ("__nv_truncf", torch.trunc, X32), ("__nv_rintf", torch.round, X32),
    ("__nv_fabsf", torch.abs, X32),
]


@pytest.mark.parametrize("symbol,ref,x", UNARY_F32, ids=[u[0] for u in UNARY_F32])
def test_unary_float32_against_torch(symbol, ref, x):
    got = run(symbol, x)
    want = to32(_t(ref)(x))
    assert_within_ulp32(symbol, x, got, want)


A32, B32 = RNG.permutation(X32), RNG.permutation(X32)
BINARY_F32 = [
    ("__nv_atan2f", torch.atan2), ("__nv_powf", torch.pow), ("__nv_fast_powf", torch.pow),
    ("__nv_hypotf", torch.hypot), ("__nv_fmodf", torch.fmod), ("__nv_copysignf", torch.copysign),
    ("__nv_fdimf", lambda a, b: torch.where(torch.isnan(a) | torch.isnan(b), a + b, torch.clamp(a - b, min=0))),
]


@pytest.mark.parametrize("symbol,ref", BINARY_F32, ids=[b[0] for b in BINARY_F32])
def test_binary_float32_against_torch(symbol, ref):
    a = np.concatenate([A32, [0.0, -0.0, 2.0, -8.0, 1.0, math.nan]]).astype(np.float32)
    b = np.concatenate([B32, [-1.0, -1.0, math.nan, 1 / 3, math.nan, 0.0]]).astype(np.float32)
    got = run(symbol, a, b)
    assert_within_ulp32(symbol, a, got, to32(_t(ref)(a, b)))


def test_float32_functions_with_integer_arguments():
    x = X32
    n = RNG.integers(-6, 7, x.size).astype(np.int32)
    assert_within_ulp32("powi", x, run("__nv_powif", x, n), to32(_t(torch.pow)(x, n)))
    k = RNG.integers(-300, 300, x.size).astype(np.int32)
    want = torch.ldexp(torch.from_numpy(x.astype(np.float64)), torch.from_numpy(k.astype(np.float64)))
    assert_same("ldexp", [x, k], run("__nv_ldexpf", x, k), to32(want.numpy()))
    assert_same("scalbn", [x, k], run("__nv_scalbnf", x, k), to32(want.numpy()))
    nt = torch.from_numpy(x.astype(np.float32))
    want_next = torch.nextafter(nt, torch.from_numpy(np.roll(x, 1))).numpy()
    assert_same("nextafter", [x], run("__nv_nextafterf", x, np.roll(x, 1)), want_next)


def test_remainder_is_ieee():
    a, b = np.concatenate([A32, [5.0, 7.0, 5.5, -4.0]]), np.concatenate([B32, [2.0, 2.0, 1.0, 2.0]])
    want = []
    for x, y in zip(a.astype(np.float64), b.astype(np.float64)):
        try:
            want.append(math.remainder(x, y))
        except ValueError:
            want.append(math.nan)
    assert_same("remainderf", [a, b], run("__nv_remainderf", a, b), np.array(want, np.float32))
    assert list(run("__nv_remainderf", [5.0, 7.0, 5.5, -4.0], [2.0, 2.0, 1.0, 2.0])) == [1.0, -1.0, -0.5, -0.0]


# ---------------------------------------------------------------------------------------------
# float64 functions against torch (a few ulp; absolute error near zeros of Bessel functions)
# ---------------------------------------------------------------------------------------------

DOUBLE_CASES = [
    ("__nv_tanh", torch.tanh, RNG.standard_normal(50) * 5, 4e-16, 0),
    ("__nv_expm1", torch.expm1, RNG.standard_normal(50) * 5, 4e-16, 0),
    ("__nv_erfinv", torch.special.erfinv,
     np.concatenate([RNG.uniform(-1, 1, 40), 1 - np.exp(-RNG.uniform(1, 30, 10))]), 1e-15, 0),
    ("__nv_normcdfinv", torch.special.ndtri,
     np.concatenate([RNG.uniform(0, 1, 40), np.exp(-RNG.uniform(1, 600, 10))]), 1e-15, 0),
    ("__nv_erfcx", torch.special.erfcx, np.concatenate([RNG.uniform(-5, 30, 40), [1e5, 1e10]]), 1e-15, 0),
    ("__nv_lgamma", torch.lgamma, RNG.uniform(-20, 60, 50), 1e-14, 1e-14),
    ("__nv_cyl_bessel_i0", torch.special.i0, RNG.uniform(-60, 60, 50), 1e-14, 0),
    ("__nv_cyl_bessel_i1", torch.special.i1, RNG.uniform(-60, 60, 50), 1e-14, 0),
]


@pytest.mark.parametrize("symbol,ref,x,rtol,atol", DOUBLE_CASES, ids=[c[0] for c in DOUBLE_CASES])
def test_float64_functions_against_torch(symbol, ref, x, rtol, atol):
    got = run(symbol, x)
    np.testing.assert_allclose(got, _t(ref)(x), rtol=rtol, atol=atol, err_msg=symbol)


# J0, J1, Y0, Y1 at float32-exact points: mpmath at 40 digits, rounded to float64. (torch's
# bessel_j0/j1/y0/y1 are only accurate to about 1e-7, so they are no reference here.)
BESSEL_TABLE = np.array([
    (0.5, 0.9384698072408129, 0.2422684576748739, -0.44451873350670656, -1.471472392670243),
    (1.0, 0.7651976865579666, 0.4400505857449335, 0.08825696421567696, -0.7812128213002887),
    (2.0, 0.22389077914123567, 0.5767248077568734, 0.5103756726497451, -0.10703243154093754),
    (2.5, -0.048383776468198, 0.49709410246427405, 0.4980703596152319, 0.1459181379667858),
    (3.0, -0.26005195490193345, 0.3390589585259365, 0.3768500100127904, 0.3246744247918),
    (4.5, -0.32054250898512143, -0.23106043192337064, -0.19470500862950454, 0.3009973230696546),
    (5.5, -0.006843869417819197, -0.34143821542904335, -0.339480592881911, -0.023758238956389618),
    (6.5, 0.2600946055816064, -0.15384130140997185, -0.17324243491898234, -0.27409127395927546),
    (8.625, 0.007810156366994676, 0.272244191042149, 0.271345910573329, 0.007856413259717381),
    (10.0, -0.24593576445134835, 0.04347274616886144, 0.055671167283599395, 0.24901542420695388),
    (20.0, 0.16702466434058316, 0.06683312417585005, 0.06264059680938383, -0.1655116143625213),
    (24.875, 0.07984721189456569, -0.13703104257921303, -0.13860743587950666, -0.08264826114351011),
    (25.125, 0.11110599329381678, -0.11177965867721437, -0.11396734018559553, -0.11339505307446685),
    (30.0, -0.08636798358104021, -0.11875106261662294, -0.11729573168666403, 0.08442557066174723),
    (50.0, 0.055812327669251816, -0.09751182812517514, -0.09806499547007708, -0.05679566856201477),
    (100.0, 0.019985850304223122, -0.07714535201411216, -0.07724431336508315, -0.020372312002759792),
    (1000.0, 0.024786686152420176, 0.004728311907089524, 0.0047159179776228135, -0.024784331292351778),
])
JN_TABLE = [  # n, x, J_n(x), Y_n(x), same source
    (2, 0.5, 0.03060402345868264, -5.441370837174266),
    (5, 3.0, 0.043028434877047585, -1.9059459538286738),
    (10, 2.0, 2.515386282716737e-07, -129184.54220803929),
    (30, 10.0, 1.551096078257467e-12, -7256142316.10033),
    (3, 40.0, -0.1261448155058208, -0.006829103413384208),
    (50, 60.0, -0.13798273148535212, 0.008641769962674491),
    (-3, 2.5, -0.21660039103911352, 0.756055496753671),
    (100, 30.0, 4.5788015281752443e-42, -7.287528470824471e+38),
]


@pytest.mark.parametrize("column,name", [(1, "j0"), (2, "j1"), (3, "y0"), (4, "y1")])
def test_bessel_against_reference_values(column, name):
    x, want = BESSEL_TABLE[:, 0], BESSEL_TABLE[:, column]
    got = run(f"__nv_{name}", x)
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=2e-16, err_msg=name)
    assert_within_ulp32(name, x, run(f"__nv_{name}f", x), want.astype(np.float32))
    odd = name.endswith("1")
    if name.startswith("j"):  # J0 even, J1 odd
        assert_same(name, [x], run(f"__nv_{name}", -x), -got if odd else got)


def test_bessel_integer_orders_against_reference_values():
    n = np.array([t[0] for t in JN_TABLE], np.int32)
    x = np.array([t[1] for t in JN_TABLE])
    np.testing.assert_allclose(run("__nv_jn", n, x), [t[2] for t in JN_TABLE], rtol=1e-13)
    np.testing.assert_allclose(run("__nv_yn", n, x), [t[3] for t in JN_TABLE], rtol=1e-13)
    assert_within_ulp32("jnf", x, run("__nv_jnf", n, x), np.array([t[2] for t in JN_TABLE], np.float32))


def test_bessel_wronskian():
    # J1(x) Y0(x) - J0(x) Y1(x) = 2 / (pi x), on random points across all evaluation regions
    x = np.concatenate([RNG.uniform(0.01, 2, 20), RNG.uniform(2, 25, 40), RNG.uniform(25, 500, 20)])
    j0, j1, y0, y1 = (run(f"__nv_{n}", x) for n in ("j0", "j1", "y0", "y1"))
    scale = np.abs(j1 * y0) + np.abs(j0 * y1)
    assert np.all(np.abs(j1 * y0 - j0 * y1 - 2 / (np.pi * x)) <= 4e-15 * scale)


def test_bessel_orders_by_recurrence_identity():
    # J_{n-1} + J_{n+1} = (2n/x) J_n, and Y likewise, from independent evaluations of each order
    x = RNG.uniform(0.5, 60, 40)
    n = RNG.integers(1, 30, 40).astype(np.int32)
    for sym in ("__nv_jn", "__nv_yn"):
        lo, mid, hi = run(sym, n - 1, x), run(sym, n, x), run(sym, n + 1, x)
        scale = np.abs(lo) + np.abs(hi) + np.abs(2 * n / x * mid)
        assert np.all(np.abs(lo + hi - 2 * n / x * mid) <= 1e-12 * scale + 1e-300), sym
    assert_same("jn0", [x], run("__nv_jn", np.zeros(40, np.int32), x), run("__nv_j0", x))
    assert_same("yn1", [x], run("__nv_yn", np.ones(40, np.int32), x), run("__nv_y1", x))
    three = np.full(40, 3, np.int32)
    assert_same("jn-3", [x], run("__nv_jn", -three, x), -run("__nv_jn", three, x))


# ---------------------------------------------------------------------------------------------
# documented special values (CUDA math API / libdevice users guide)
# ---------------------------------------------------------------------------------------------

INF, NAN = math.inf, math.nan
SPECIAL_VALUES = [
    ("__nv_rsqrtf", [0.0, -0.0, INF, -1.0], [INF, -INF, 0.0, NAN]),
    ("__nv_rsqrt", [0.0, INF], [INF, 0.0]),
    ("__nv_logf", [-1.0, 0.0, -0.0, 1.0, INF], [NAN, -INF, -INF, 0.0, INF]),
    ("__nv_log", [-1.0, 0.0], [NAN, -INF]),
    ("__nv_erfinvf", [1.0, -1.0, 2.0, -0.0], [INF, -INF, NAN, -0.0]),
    ("__nv_erfcinvf", [0.0, 2.0, 1.0, -1.0], [INF, -INF, 0.0, NAN]),
    ("__nv_normcdfinvf", [0.0, 1.0, 0.5, 2.0], [-INF, INF, 0.0, NAN]),
    ("__nv_normcdf", [-INF, INF, 0.0], [0.0, 1.0, 0.5]),
    ("__nv_lgammaf", [0.0, -2.0, 1.0, 2.0, -INF], [INF, INF, 0.0, 0.0, INF]),
    ("__nv_tgammaf", [-0.0, 0.0, -2.0, -INF, 5.0, 40.0], [-INF, INF, NAN, NAN, 24.0, INF]),
    ("__nv_tgamma", [6.0, 0.5], [120.0, math.sqrt(math.pi)]),
    ("__nv_j0f", [INF, -INF, 0.0], [0.0, 0.0, 1.0]),
    ("__nv_j1f", [-0.0, 0.0, INF, -INF], [-0.0, 0.0, 0.0, -0.0]),
    ("__nv_y0f", [0.0, -1.0, INF], [-INF, NAN, 0.0]),
    ("__nv_y1", [0.0, -0.5], [-INF, NAN]),
    ("__nv_cyl_bessel_i0f", [INF, -INF, 0.0], [INF, INF, 1.0]),
    ("__nv_cyl_bessel_i1", [-INF, 0.0], [-INF, 0.0]),
    ("__nv_saturatef", [NAN, 2.0, -1.0, 0.25, -0.0], [0.0, 1.0, 0.0, 0.25, 0.0]),
    ("__nv_roundf", [2.5, -2.5, 0.49999997, -0.5], [3.0, -3.0, 0.0, -1.0]),
    ("__nv_round", [0.49999999999999994, 4503599627370497.0], [0.0, 4503599627370497.0]),
    ("__nv_rintf", [2.5, 3.5, -0.5], [2.0, 4.0, -0.0]),
    ("__nv_nearbyint", [2.5, -1.5], [2.0, -2.0]),
    ("__nv_logbf", [0.0, INF, -8.0, 1e-45], [-INF, INF, 3.0, -149.0]),
    ("__nv_sinpif", [1.0, -1.0, 0.5, 1.5, 2.5, 1e30, -0.0], [0.0, -0.0, 1.0, -1.0, 1.0, 0.0, -0.0]),
    ("__nv_cospif", [0.5, 1.0, -1.5, 0.0, 1e30, INF], [0.0, -1.0, 0.0, 1.0, 1.0, NAN]),
    ("__nv_exp10f", [2.0, -1.0], [100.0, 0.1]),
    ("__nv_rcbrtf", [8.0, -0.0, INF], [0.5, -INF, 0.0]),
    ("__nv_erfcxf", [-INF, INF, 0.0], [INF, 0.0, 1.0]),
]


@pytest.mark.parametrize("symbol,x,want", SPECIAL_VALUES, ids=[s[0] for s in SPECIAL_VALUES])
def test_documented_special_values(symbol, x, want):
    got = run(symbol, x)
    assert_same(symbol, [np.array(x)], got, np.array(want, got.dtype))


I32_MIN, I32_MAX = int(np.iinfo(np.int32).min), int(np.iinfo(np.int32).max)
SPECIAL_VALUES_N = [  # symbol, arguments, expected
    ("__nv_powf", ([0.0, -0.0, NAN, 1.0, -1.0, 2.0], [-1.0, -1.0, 0.0, NAN, INF, -INF]),
     [INF, -INF, 1.0, 1.0, 1.0, 0.0]),
    ("__nv_hypot", ([INF, NAN, 3.0], [NAN, -INF, 4.0]), [INF, INF, 5.0]),
    ("__nv_norm4d", ([1e300, NAN], [1e300, 1.0], [1e300, INF], [1e300, 0.0]), [2e300, INF]),
    ("__nv_rnorm3df", ([0.0, 2.0], [0.0, 3.0], [0.0, 6.0]), [INF, np.float32(1 / 7)]),
    ("__nv_fdimf", ([NAN, 1.0, 5.0], [1.0, 5.0, 1.0]), [NAN, 0.0, 4.0]),
    ("__nv_remainder", ([1.0, INF, 3.0], [0.0, 1.0, INF]), [NAN, NAN, 3.0]),
    ("__nv_ilogbf", ([0.0, NAN, -INF, 8.0, 1e-45],), [I32_MIN, I32_MIN, I32_MAX, 3, -149]),
    ("__nv_ilogb", ([5e-324, 1.0],), [-1074, 0]),
    ("__nv_ynf", ([2, 0, -1], [0.0, 0.0, 0.0]), [-INF, -INF, INF]),
]


@pytest.mark.parametrize("symbol,args,want", SPECIAL_VALUES_N, ids=[s[0] for s in SPECIAL_VALUES_N])
def test_special_values_of_functions_of_several_arguments(symbol, args, want):
    got = run(symbol, *args)
    assert_same(symbol, args, got, np.array(want, got.dtype))


# ---------------------------------------------------------------------------------------------
# rounding modes: exact against rational arithmetic
# ---------------------------------------------------------------------------------------------

def round_exact(value: Fraction, mode: str, precision: int, emin: int, emax: int) -> float:
    """value rounded to a binary float with `precision` bits (IEEE subnormals and overflow)."""
    if value == 0:
        return 0.0
    sign = -1 if value < 0 else 1
    mag = abs(value)
    exp = mag.numerator.bit_length() - mag.denominator.bit_length()
    if Fraction(2) ** exp > mag:
        exp -= 1
    quantum = Fraction(2) ** (max(exp, emin) - precision + 1)
    scaled = mag / quantum
    whole = scaled.numerator // scaled.denominator
    rest = scaled - whole
    up = {"rn": rest > Fraction(1, 2) or (rest == Fraction(1, 2) and whole % 2 == 1),
          "rz": False, "ru": rest > 0 and sign > 0, "rd": rest > 0 and sign < 0}[mode]
    result = (whole + up) * quantum
    largest = (2 - Fraction(2) ** (1 - precision)) * Fraction(2) ** emax
    if result > largest:
        to_inf = mode == "rn" or (mode == "ru" and sign > 0) or (mode == "rd" and sign < 0)
        return sign * (math.inf if to_inf else float(largest))
    return math.copysign(float(result), sign)


def round32(v, mode):
    return round_exact(v, mode, 24, -126, 127)


def round64(v, mode):
    return round_exact(v, mode, 53, -1022, 1023)


def exact_sqrt(v: Fraction) -> Fraction:
    """sqrt(v) to 1300 fractional bits, with a sticky half unit when inexact."""
    k = 1300
    t = v.numerator * v.denominator * 4 ** k
    root = math.isqrt(t)
    out = Fraction(root, v.denominator * 2 ** k)
    return out + Fraction(1, v.denominator * 2 ** (k + 1)) if root * root != t else out


def _operands(values, arity, dtype):
    """Random tuples from `values`, plus cancelling and near-tie combinations."""
    picks = [RNG.choice(values, 80) for _ in range(arity)]
    with np.errstate(over="ignore"):  # operands that overflow are skipped by the caller
        if arity >= 2:  # b close to -a
            eps = np.finfo(dtype).eps
            picks[1][:20] = -picks[0][:20] * (1 + RNG.integers(-2, 3, 20) * eps)
        if arity == 3:  # c close to -(a*b)
            picks[2][20:40] = -(picks[0][20:40].astype(np.float64) * picks[1][20:40])
        return [np.asarray(p, dtype) for p in picks]


F32_FINITE = X32[np.isfinite(X32)]
F64_FINITE = f64_values()

ROUNDED_OPS = {  # symbol stem -> (arity, exact function or None where undefined)
    "add": (2, lambda a, b: a + b), "sub": (2, lambda a, b: a - b), "mul": (2, lambda a, b: a * b),
    "div": (2, lambda a, b: a / b if b else None), "rcp": (1, lambda b: 1 / b if b else None),
    "sqrt": (1, lambda a: exact_sqrt(a) if a >= 0 else None),
}


@pytest.mark.parametrize("mode", ["rn", "rz", "ru", "rd"])
def test_rounded_arithmetic_is_exact(mode):
    cases = []
    for stem, (arity, fn) in ROUNDED_OPS.items():
        cases.append((f"__nv_f{stem}_{mode}", arity, fn, np.float32, round32))
        cases.append((f"__nv_d{stem}_{mode}", arity, fn, np.float64, round64))
    cases.append((f"__nv_fmaf_{mode}", 3, lambda a, b, c: a * b + c, np.float32, round32))
    cases.append((f"__nv_fma_{mode}", 3, lambda a, b, c: a * b + c, np.float64, round64))
    for symbol, arity, fn, dtype, rounder in cases:
        values = F32_FINITE if dtype is np.float32 else F64_FINITE
        if symbol.startswith(("__nv_fsqrt", "__nv_dsqrt")):
            values = np.abs(values)
        args = _operands(values, arity, dtype)
        got = run(symbol, *args)
        want = np.empty_like(got)
        keep = np.ones(got.shape, bool)
        for i in range(got.size):
            operands = [float(a[i]) for a in args]
            exact = fn(*map(Fraction, operands)) if all(map(math.isfinite, operands)) else None
            keep[i] = exact is not None and exact != 0  # signs of exact zeros: tested below
            want[i] = rounder(exact, mode) if keep[i] else 0.0
        assert_same(symbol, args, got[keep], want[keep])


def test_contracted_fp32_fma_rounds_once_where_float64_would_round_twice():
    """``fma_f32`` (the interpreter's contracted ``a*b + c``) against exact rationals, with
    operands built so that the float64 sum lands exactly halfway between two float32 values: from
    below and above (double rounding would be wrong), exactly (``acc * 1.0 + x``: correct as it is),
    in float32's subnormal range, and signed zeros."""
    ulp, tiny = 2.0 ** -23, 2.0 ** -70
    a = [2.0 ** -24 * (1 + ulp), 2.0 ** -24 * (1 + ulp), 1.0, 3.0, 2.0 ** -100, -0.0, 2.0, 1.5]
    b = [1 - ulp, 1 + ulp, 1.0 + ulp, 2.0 ** -26, 2.0 ** -40, 1.0, 3.0, 1.0]
    c = [1 + ulp, 1 + ulp, 2.0 ** -24, 1 + ulp, -2.0 ** -139, -0.0, -6.0, 2.0 ** -24 + 2.0 ** -48]
    assert abs(float(Fraction(a[0]) * Fraction(b[0])) - 2.0 ** -24) == tiny  # the trap is armed
    args = [np.array(v, np.float32) for v in (a, b, c)]
    args = [np.concatenate([v, x]) for v, x in zip(args, _operands(F32_FINITE, 3, np.float32))]
    with np.errstate(all="ignore"):
        got = ld.fma_f32(*args)
    assert got.dtype == np.float32 and got.shape == args[0].shape
    for i in range(got.size):
        ops = [float(v[i]) for v in args]
        if not all(map(math.isfinite, ops)):
            continue
        exact = Fraction(ops[0]) * Fraction(ops[1]) + Fraction(ops[2])
        want = round32(exact, "rn") if exact != 0 else float(np.float32(ops[0]) * np.float32(ops[1]) + np.float32(ops[2]))
        assert np.float32(want).tobytes() == got[i].tobytes(), (ops, want, got[i])
    # the same operands broadcast, as the batched engine passes them ((P, 1) against (P, N)): the
    # lanes looked at again are found in the broadcast operands too
    cols = 3
    with np.errstate(all="ignore"):
        wide = ld.fma_f32(args[0][:, None], np.repeat(args[1][:, None], cols, 1), np.repeat(args[2][:, None], cols, 1))
    assert wide.shape == (got.size, cols)
    assert all(wide[:, j].tobytes() == got.tobytes() for j in range(cols))
    x = RNG.standard_normal((4, 1)).astype(np.float32)
    y = RNG.standard_normal((4, 5)).astype(np.float32)
    z = RNG.standard_normal((1, 5)).astype(np.float32)
    assert ld.fma_f32(x, y, z).shape == (4, 5)


M32 = np.float32(F32_MAX)
BIG = 2.0 ** 600
ROUNDED_SPECIAL_CASES = [  # symbol, arguments, expected: overflow, NaN, signed zeros, exactness
    ("__nv_fadd_rz", ([M32, INF, 1.0], [M32, -INF, -1.0]), [M32, NAN, 0.0]),
    ("__nv_fadd_ru", ([M32, 1.0], [M32, -1.0]), [INF, 0.0]),
    ("__nv_fadd_rd", ([1.0, -0.0, 0.0], [-1.0, -0.0, 0.0]), [-0.0, -0.0, 0.0]),
    ("__nv_fsub_rd", ([2.0, 2.0], [2.0, -1e-45]), [-0.0, 2.0]),
    ("__nv_fmul_rd", ([-M32, 1e-45], [2.0, 0.5]), [-INF, 0.0]),
    ("__nv_fmul_ru", ([-M32, 1e-45], [2.0, 0.5]), [-M32, 1e-45]),
    ("__nv_fdiv_ru", ([1.0, 0.0, -1.0], [0.0, 0.0, INF]), [INF, NAN, -0.0]),
    ("__nv_fsqrt_rd", ([-1.0, -0.0, INF],), [NAN, -0.0, INF]),
    ("__nv_frcp_rz", ([-0.0, 3.0],), [-INF, np.nextafter(np.float32(1 / 3), np.float32(0))]),
    ("__nv_fmaf_rd", ([2.0, INF, 1.0], [3.0, 0.0, 1.0], [-6.0, 1.0, -0.0]), [-0.0, NAN, 1.0]),
    ("__nv_fmaf", ([2.0, -0.0], [3.0, 1.0], [-6.0, -0.0]), [0.0, -0.0]),
    # fma rounds once: the product 1.5 * 2**1020 does not overflow on its own
    ("__nv_fma", ([1.5 * BIG, 1e200], [2.0 ** 420, 1e200], [-F64_MAX, -INF]),
     [float(Fraction(1.5 * BIG) * 2 ** 420 - Fraction(F64_MAX)), -INF]),
    ("__nv_dsub_rd", ([5.0], [5.0]), [-0.0]),
    ("__nv_dadd_rz", ([F64_MAX], [F64_MAX]), [F64_MAX]),
    ("__nv_ddiv_rd", ([1.0, -1.0], [3.0, 0.0]), [round64(Fraction(1, 3), "rd"), -INF]),
    ("__nv_dsqrt_ru", ([2.0, 5e-324],), [round64(exact_sqrt(Fraction(2)), "ru"), 2.0 ** -537]),
    ("__nv_frsqrt_rn", ([4.0, 0.0, -1.0, INF],), [0.5, INF, NAN, 0.0]),
]


@pytest.mark.parametrize("symbol,args,want", ROUNDED_SPECIAL_CASES, ids=[c[0] for c in ROUNDED_SPECIAL_CASES])
def test_rounded_arithmetic_special_cases(symbol, args, want):
    got = run(symbol, *args)
    assert_same(symbol, args, got, np.array(want, got.dtype))


def test_frsqrt_rn_is_correctly_rounded():
    x = np.abs(F32_FINITE[F32_FINITE != 0])
    want = [round32(1 / exact_sqrt(Fraction(float(v))), "rn") for v in x]
    assert_same("frsqrt_rn", [x], run("__nv_frsqrt_rn", x), np.array(want, np.float32))


@pytest.mark.parametrize("mode", ["rn", "rz", "ru", "rd"])
def test_conversions_to_float_are_exact(mode):
    f64 = F64_FINITE
    assert_same("double2float", [f64], run(f"__nv_double2float_{mode}", f64),
                np.array([round32(Fraction(v), mode) if v else v for v in f64], np.float32))
    i32, u32 = INT32.astype(np.int32), INT32.astype(np.int32).view(np.uint32)
    i64, u64 = INT64, INT64.view(np.uint64)
    for symbol, values, rounder, dtype in ((f"__nv_int2float_{mode}", i32, round32, np.float32),
                                           (f"__nv_uint2float_{mode}", u32, round32, np.float32),
                                           (f"__nv_ll2float_{mode}", i64, round32, np.float32),
                                           (f"__nv_ull2float_{mode}", u64, round32, np.float32),
                                           (f"__nv_ll2double_{mode}", i64, round64, np.float64),
                                           (f"__nv_ull2double_{mode}", u64, round64, np.float64)):
        want = np.array([rounder(Fraction(int(v)), mode) for v in values], dtype)
        assert_same(symbol, [values], run(symbol, values), want)


# ---------------------------------------------------------------------------------------------
# float -> integer conversions: CUDA semantics, exact
# ---------------------------------------------------------------------------------------------

CONV_INPUTS = np.array([0.0, -0.0, 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999999999999994, NAN, INF, -INF,
                        2.0 ** 31, 2.0 ** 31 - 1, -2.0 ** 31, -2.0 ** 31 - 1, 2.0 ** 32, 2.0 ** 32 - 0.5,
                        2.0 ** 63, -2.0 ** 63, 2.0 ** 64, 2.0 ** 62 + 2048, 1e30, -1e30, 123456.789, -7.75])
LIMITS = {"int": (-2 ** 31, 2 ** 31 - 1, 32, True), "uint": (0, 2 ** 32 - 1, 32, True),
          "ll": (-2 ** 63, 2 ** 63 - 1, 64, True), "ull": (0, 2 ** 64 - 1, 64, True)}


def convert(v: float, mode: str, target: str) -> int:
    lo, hi, bits, signed_result = LIMITS[target]
    if math.isnan(v):
        return 0
    if math.isinf(v):
        r = hi if v > 0 else lo
    else:
        f = Fraction(v)
        r = {"rn": round(f), "rz": math.trunc(f), "ru": math.ceil(f), "rd": math.floor(f),
             "away": math.floor(abs(f) + Fraction(1, 2)) * (1 if f >= 0 else -1)}[mode]
        r = min(max(r, lo), hi)
    return wrap(r, bits, signed_result)  # Triton declares the unsigned results as signed ints


@pytest.mark.parametrize("mode", ["rn", "rz", "ru", "rd"])
def test_float_to_integer_conversions(mode):
    for src, dtype in (("float", np.float32), ("double", np.float64)):
        x = CONV_INPUTS.astype(dtype)
        for target in ("int", "uint", "ll", "ull"):
            symbol = f"__nv_{src}2{target}_{mode}"
            want = np.array([convert(float(v), mode, target) for v in x])
            assert_same(symbol, [x], run(symbol, x), want)


def test_llrint_and_llround():
    x = CONV_INPUTS
    for symbol, mode in (("__nv_llrint", "rn"), ("__nv_llround", "away")):
        want = np.array([convert(float(v), mode, "ll") for v in x])
        assert_same(symbol, [x], run(symbol, x), want)
        want32 = np.array([convert(float(v), mode, "ll") for v in x.astype(np.float32)])
        assert_same(symbol + "f", [x], run(symbol + "f", x.astype(np.float32)), want32)


# ---------------------------------------------------------------------------------------------
# integer and bit functions, predicates, reinterpretation: exact
# ---------------------------------------------------------------------------------------------

def u(v, bits):
    return v & ((1 << bits) - 1)


def byte_perm(x, y, s):
    src = (u(y, 32) << 32) | u(x, 32)
    out = 0
    for n in range(4):
        out |= ((src >> (8 * ((s >> (4 * n)) & 7))) & 0xFF) << (8 * n)
    return wrap(out, 32, True)


def s24(v):
    v = u(v, 24)
    return v - (1 << 24) if v >= 1 << 23 else v


J32, K32, J64 = RNG.permutation(INT32), RNG.permutation(INT32), RNG.permutation(INT64)
INTEGER_CASES = [  # symbol, arguments (Python ints), reference on Python ints
    ("__nv_clz", [INT32], lambda x: 32 - u(x, 32).bit_length()),
    ("__nv_clzll", [INT64], lambda x: 64 - u(x, 64).bit_length()),
    ("__nv_popc", [INT32], lambda x: bin(u(x, 32)).count("1")),
    ("__nv_popcll", [INT64], lambda x: bin(u(x, 64)).count("1")),
    ("__nv_brev", [INT32], lambda x: wrap(int(f"{u(x, 32):032b}"[::-1], 2), 32, True)),
    ("__nv_brevll", [INT64], lambda x: wrap(int(f"{u(x, 64):064b}"[::-1], 2), 64, True)),
    ("__nv_ffs", [INT32], lambda x: (u(x, 32) & -u(x, 32)).bit_length()),
    ("__nv_ffsll", [INT64], lambda x: (u(x, 64) & -u(x, 64)).bit_length()),
    ("__nv_byte_perm", [INT32, J32, K32], byte_perm),
    ("__nv_mulhi", [INT32, J32], lambda x, y: (x * y) >> 32),
    ("__nv_umulhi", [u(INT32, 32), u(J32, 32)], lambda x, y: (x * y) >> 32),
    ("__nv_mul64hi", [INT64, J64], lambda x, y: (x * y) >> 64),
    ("__nv_umul64hi", [INT64.view(np.uint64), J64.view(np.uint64)], lambda x, y: (x * y) >> 64),
    ("__nv_mul24", [INT32, J32], lambda x, y: wrap(s24(x) * s24(y), 32, True)),
    ("__nv_umul24", [u(INT32, 32), u(J32, 32)], lambda x, y: u(u(x, 24) * u(y, 24), 32)),
    ("__nv_sad", [INT32, J32, u(K32, 32)], lambda x, y, z: wrap(abs(x - y) + z, 32, True)),
    ("__nv_usad", [u(INT32, 32), u(J32, 32), u(K32, 32)], lambda x, y, z: u(abs(x - y) + z, 32)),
    ("__nv_hadd", [INT32, J32], lambda x, y: (x + y) >> 1),
    ("__nv_rhadd", [INT32, J32], lambda x, y: (x + y + 1) >> 1),
    ("__nv_uhadd", [u(INT32, 32), u(J32, 32)], lambda x, y: (x + y) >> 1),
    ("__nv_urhadd", [u(INT32, 32), u(J32, 32)], lambda x, y: (x + y + 1) >> 1),
    ("__nv_abs", [INT32], lambda x: wrap(abs(x), 32, True)),
    ("__nv_llabs", [INT64], lambda x: wrap(abs(x), 64, True)),
]


@pytest.mark.parametrize("symbol,args,ref", INTEGER_CASES, ids=[c[0] for c in INTEGER_CASES])
def test_integer_functions(symbol, args, ref):
    arg_types, _ = TRITON[symbol]
    arrays = [np.array([wrap(int(v), np.dtype(_DTYPES[t]).itemsize * 8, t[0] == "i") for v in a], _DTYPES[t])
              for a, t in zip(args, arg_types)]
    got = run(symbol, *arrays)
    want = [ref(*[int(a[i]) for a in arrays]) for i in range(got.size)]
    assert_same(symbol, arrays, got, np.array(want, got.dtype))


def test_integer_edge_values():
    assert list(run("__nv_clz", [0, -1, 1])) == [32, 0, 31]
    assert list(run("__nv_clzll", [0, -1, 1])) == [64, 0, 63]
    assert list(run("__nv_ffs", [0, -2 ** 31, 12])) == [0, 32, 3]
    assert list(run("__nv_ffsll", [0, -2 ** 63])) == [0, 64]
    assert list(run("__nv_abs", [-2 ** 31])) == [-2 ** 31]
    assert list(run("__nv_byte_perm", [0x03020100], [0x07060504], [0x7531])) == [0x07050301]


def test_predicates():
    x64 = np.array(EDGE + SPECIAL + [5e-324, -NAN], np.float64)
    x32 = x64.astype(np.float32)
    for symbol, x, ref in (("__nv_isnanf", x32, math.isnan), ("__nv_isnand", x64, math.isnan),
                           ("__nv_isinff", x32, math.isinf), ("__nv_isinfd", x64, math.isinf),
                           ("__nv_finitef", x32, math.isfinite), ("__nv_isfinited", x64, math.isfinite),
                           ("__nv_signbitf", x32, lambda v: math.copysign(1, v) < 0),
                           ("__nv_signbitd", x64, lambda v: math.copysign(1, v) < 0)):
        assert_same(symbol, [x], run(symbol, x), np.array([int(ref(float(v))) for v in x]))


def test_bit_reinterpretation():
    x32 = np.array(EDGE + [INF, -INF], np.float32)
    bits32 = [struct.unpack("<i", struct.pack("<f", float(v)))[0] for v in x32]
    assert list(run("__nv_float_as_int", x32)) == bits32
    assert list(run("__nv_float_as_uint", x32)) == bits32  # Triton's result type is int32
    assert_same("int_as_float", [], run("__nv_int_as_float", bits32), x32)
    assert_same("uint_as_float", [], run("__nv_uint_as_float", [u(b, 32) for b in bits32]), x32)
    x64 = F64_FINITE
    bits64 = [struct.unpack("<q", struct.pack("<d", float(v)))[0] for v in x64]
    assert list(run("__nv_double_as_longlong", x64)) == bits64
    assert_same("longlong_as_double", [], run("__nv_longlong_as_double", bits64), x64)
    hi = [wrap(b >> 32, 32, True) for b in bits64]
    lo = [wrap(b, 32, True) for b in bits64]
    assert list(run("__nv_double2hiint", x64)) == hi
    assert list(run("__nv_double2loint", x64)) == lo
    assert_same("hiloint2double", [], run("__nv_hiloint2double", hi, lo), x64)
    assert list(run("__nv_int2double_rn", [-2 ** 31, 7])) == [-2.0 ** 31, 7.0]
    assert list(run("__nv_uint2double_rn", [2 ** 32 - 1])) == [2.0 ** 32 - 1]


def test_contracted_fp32_fma_in_slices_equals_it_whole(monkeypatch):
    """A large ``fma_f32`` works in slices along its first axis (bounded float64 temporaries): the
    same bits as one piece, with operands broadcast as the batched engine passes them."""
    x = RNG.standard_normal((37, 1)).astype(np.float32)
    y = RNG.standard_normal((37, 29)).astype(np.float32)
    z = RNG.standard_normal((1, 29)).astype(np.float32)
    y[::5] = 1.0  # exact halfway sums (acc * 1.0 + x) among the others
    whole = ld._fma_f32(x, y, z)
    monkeypatch.setattr(ld, "_FMA_CHUNK", 64)
    sliced = ld.fma_f32(x, y, z)
    assert sliced.shape == whole.shape == (37, 29)
    assert sliced.tobytes() == whole.tobytes()
