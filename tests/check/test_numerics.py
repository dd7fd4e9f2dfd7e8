"""GPU-faithful numerics: bf16/fp16/fp8 rounding, casts, tl.dot input precision, reductions,
integer wrapping, and scalar arguments typed like the compiler types them."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice

import tritonkit
from tritonkit.check.interp import numerics as _numerics

torch.manual_seed(0)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_16bit_elementwise_matches_torch_rounding(binary_kernel, dtype):
    """Each operation rounds to nearest even in the 16-bit type, as torch's CPU kernels do."""
    n = 1000
    x = torch.randn(n, dtype=dtype) * 10
    y = torch.randn(n, dtype=dtype)
    outs = {k: torch.empty(n, dtype=dtype) for k in ("add", "mul", "div", "max", "neg", "exp")}
    lt = torch.empty(n, dtype=torch.bool)
    with tritonkit.checking() as s:
        binary_kernel[(4,)](x, y, outs["add"], outs["mul"], outs["div"], outs["max"], lt, outs["neg"],
                            outs["exp"], n, BLOCK=256)
    assert not s.findings
    want = {"add": x + y, "mul": x * y, "div": x / y, "max": torch.maximum(x, y), "neg": -x}
    for k, ref in want.items():
        torch.testing.assert_close(outs[k], ref, atol=0, rtol=0, msg=lambda m, k=k: f"{k}: {m}")
    # exp is computed in fp32 by numpy here and by torch there: they may differ by an fp32 ulp, which
    # can move the 16-bit rounding by one ulp of the 16-bit type
    torch.testing.assert_close(outs["exp"], torch.exp(x.float()).to(dtype), atol=0, rtol=torch.finfo(dtype).eps)
    assert torch.equal(lt, x < y)


def test_casts_round_and_saturate_like_the_gpu(cast_kernel):
    special = torch.tensor([float("nan"), float("inf"), -float("inf"), 3e9, -3e9, 300.0, -1.0, 2.5, 3.5, -2.5,
                            1000.0, -1000.0, 1.00390625, 1.01171875])
    x = torch.cat([special, torch.randn(114) * 100]).float()
    n = x.numel()
    bf = torch.empty(n, dtype=torch.bfloat16)
    h = torch.empty(n, dtype=torch.float16)
    i = torch.empty(n, dtype=torch.int32)
    u8 = torch.empty(n, dtype=torch.uint8)
    e4 = torch.empty(n, dtype=torch.float8_e4m3fn)
    e5 = torch.empty(n, dtype=torch.float8_e5m2)
    rtz = torch.empty(n, dtype=torch.bfloat16)
    with tritonkit.checking() as s:
        cast_kernel[(1,)](x, bf, h, i, u8, e4, e5, rtz, n, BLOCK=128)
    assert not s.findings
    assert torch.isnan(bf[0])
    assert torch.equal(bf[1:].view(torch.int16), x[1:].to(torch.bfloat16).view(torch.int16))  # nearest even
    torch.testing.assert_close(h, x.to(torch.float16), equal_nan=True, atol=0, rtol=0)
    # float -> int: truncate, saturate, NaN -> 0 (cvt.rzi), not numpy's undefined values
    want_i = [0, 2**31 - 1, -2**31, 2**31 - 1, -2**31, 300, -1, 2, 3, -2, 1000, -1000, 1, 1]
    assert i[:14].tolist() == want_i
    # to 8 bits: saturate to 16 bits, keep the low byte (as measured on an H100)
    assert u8[:14].tolist() == [0, 255, 0, 255, 0, 44, 0, 2, 3, 0, 232, 0, 1, 1]
    # fp8: nearest even inside the range, saturated to the largest finite value outside it
    inside = x.abs() < 400
    assert torch.equal(e4.float()[inside], x[inside].to(torch.float8_e4m3fn).float())
    assert e4.float()[10].item() == 448.0 and e4.float()[11].item() == -448.0 and e4.float()[1].item() == 448.0
    assert torch.isnan(e4.float()[0])
    assert e5.float()[1].item() == 57344.0  # satfinite: inf -> largest finite
    # rtz: 1.01171875 is 1 + 3/256: to nearest gives 1.015625, toward zero 1.0078125
    assert bf[13].item() == 1.015625 and rtz[13].item() == 1.0078125
    assert rtz[12].item() == 1.0  # 1 + 1/256 truncates to 1
    # the check can fail: truncation everywhere would differ from round-to-nearest on random data
    assert not torch.equal(rtz, bf)


def _tf32_trunc(t):
    return (t.view(torch.int32) & ~0x1FFF).view(torch.float32)


@pytest.mark.parametrize("precision", ["default", "tf32", "ieee", "tf32x3"])
def test_fp32_dot_input_precision(dot_kernel, precision):
    """fp32 tl.dot uses tf32 inputs by default (as on the GPU); ieee is exact fp32; tf32x3 is close
    to exact."""
    M = N = K = 32
    a = torch.randn(M, K)
    b = torch.randn(K, N)
    c = torch.empty(M, N)
    with tritonkit.checking() as s:
        dot_kernel[(1,)](a, b, c, M, N, K, PRECISION=precision)
    assert not s.findings
    exact = (a.double() @ b.double()).float()
    tf32 = (_tf32_trunc(a).double() @ _tf32_trunc(b).double()).float()
    if precision in ("default", "tf32"):
        torch.testing.assert_close(c, tf32, atol=1e-5, rtol=1e-5)
        assert (c - exact).abs().max() > 1e-4  # tf32 loses bits: the result is not the exact one
    else:
        torch.testing.assert_close(c, exact, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_16bit_dot_accumulates_in_fp32(dot_kernel, dtype):
    M = N = K = 32
    a = torch.randn(M, K, dtype=dtype)
    b = torch.randn(K, N, dtype=dtype)
    c = torch.empty(M, N, dtype=torch.float32)
    with tritonkit.checking() as s:
        dot_kernel[(1,)](a, b, c, M, N, K, PRECISION="default")
    assert not s.findings
    torch.testing.assert_close(c, a.float() @ b.float(), atol=1e-4, rtol=1e-5)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_16bit_reductions(reduce_kernel, dtype):
    """Sums accumulate in fp32 and round once; max/min/argmax compare values, not raw bits."""
    rows, N = 4, 64
    x = torch.randn(rows, N, dtype=dtype) - 0.5  # negative values: raw-bit comparison would be wrong
    out = {k: torch.empty(rows, dtype=dtype) for k in ("sum", "max", "min")}
    am = torch.empty(rows, dtype=torch.int32)
    cs = torch.empty(rows, N, dtype=dtype)
    with tritonkit.checking() as s:
        reduce_kernel[(rows,)](x, out["sum"], out["max"], out["min"], am, cs, N=N)
    assert not s.findings
    assert torch.equal(out["sum"], x.float().sum(1).to(dtype))
    assert torch.equal(out["max"], x.max(1).values)
    assert torch.equal(out["min"], x.min(1).values)
    assert torch.equal(am.long(), x.argmax(1))
    assert torch.equal(cs, x.float().cumsum(1).to(dtype))


@triton.jit
def wrap_kernel(out_ptr, a, b):
    tl.store(out_ptr, a * b)
    tl.store(out_ptr + 1, a + b)


@pytest.mark.filterwarnings("error")
def test_int32_arithmetic_wraps_without_warnings():
    out = torch.zeros(2, dtype=torch.int32)
    with tritonkit.checking() as s:
        wrap_kernel[(1,)](out, 2**30, 4)
    assert out.tolist() == [0, 2**30 + 4]  # 2**30 * 4 wraps to 0 in int32
    with tritonkit.checking() as s:
        wrap_kernel[(1,)](out, 2**31 - 1, 2**31 - 1)
    assert not s.findings
    assert out.tolist() == [1, -2]


@triton.jit
def scalar_kernel(out_ptr, f, i, big, flag, one, one_nospec, typed: tl.int64, small: tl.int64):
    tl.static_assert(f.dtype == tl.float32)
    tl.static_assert(i.dtype == tl.int32)
    tl.static_assert(big.dtype == tl.int64)
    tl.static_assert(flag.dtype == tl.int1)
    tl.static_assert(one_nospec.dtype == tl.int32)
    tl.static_assert(typed.dtype == tl.int64)
    tl.static_assert(small.dtype == tl.int64)
    tl.store(out_ptr + 0, f.to(tl.float32))
    tl.store(out_ptr + 1, one * 2.0)
    tl.store(out_ptr + 2, (small * 2**31 // 2**31).to(tl.float32))  # no int32 wrap: small is int64


def test_scalar_arguments_typed_like_the_compiler():
    out = torch.zeros(3)
    kernel = triton.jit(scalar_kernel.fn, do_not_specialize=["one_nospec"])
    with tritonkit.checking() as s:
        kernel[(1,)](out, 0.1, 7, 2**40, True, 1, 1, 5, 3)
    assert not s.findings, [f.to_dict() for f in s.findings]
    assert out[0].item() == np.float32(0.1)  # rounded to fp32 like the launcher does
    assert out[1:].tolist() == [2.0, 3.0]
    # and a type assertion that does not hold is reported: the check can fail
    with pytest.raises(tritonkit.CheckAborted):
        with tritonkit.checking() as s:
            kernel[(1,)](out, 0.1, 2**33, 2**40, True, 1, 1, 5, 3)
    assert [(f.kind, f.access) for f in s.findings] == [("assert_failed", "static_assert")]


def test_one_function_under_two_do_not_specialize_lists_types_each_its_own_way():
    """The scalar specs are made once per kernel function and ``do_not_specialize`` list: the same
    function jitted with and without the list, launched in turn, keeps ``1`` a constexpr in one
    (``one_nospec.dtype`` is then not int32: the static_assert fails) and an int32 in the other."""
    out = torch.zeros(3)
    nospec = triton.jit(scalar_kernel.fn, do_not_specialize=["one_nospec"])
    spec = triton.jit(scalar_kernel.fn)
    for kernel, fails in ((nospec, False), (spec, True), (nospec, False), (spec, True)):
        try:
            with tritonkit.checking() as s:
                kernel[(1,)](out, 0.1, 7, 2**40, True, 1, 1, 5, 3)
        except tritonkit.CheckAborted:
            pass
        assert bool(s.findings) == fails, [f.to_dict() for f in s.findings]


@triton.jit
def one_to_kernel(out_ptr, stride):
    tl.store(out_ptr, stride.to(tl.int64))


def test_int_one_is_a_constexpr_like_on_the_gpu():
    """Triton specializes an int argument equal to 1 as a constexpr: ``.to`` then fails to compile.
    The checker shows it (a real GPU-only bug when a stride happens to be 1)."""
    out = torch.zeros(1, dtype=torch.int64)
    with tritonkit.checking() as s:
        one_to_kernel[(1,)](out, 2)
    assert not s.findings and out.item() == 2
    with pytest.raises(tritonkit.CheckAborted):
        with tritonkit.checking() as s:
            one_to_kernel[(1,)](out, 1)
    assert [f.kind for f in s.findings] == ["kernel_error"]
    assert "'int' object has no attribute 'to'" in s.findings[0].message


def test_libdevice_functions_compute_like_the_gpu(libdevice_kernel):
    x = torch.randn(100)
    out = torch.empty(100)
    with tritonkit.checking() as s:
        libdevice_kernel[(1,)](x, out, 100, BLOCK=128)
    assert not s.findings
    xd = x.double()
    ref = torch.tanh(xd) + torch.rsqrt(xd.abs() + 1) + xd.abs() ** 1.5 + torch.erf(xd)
    torch.testing.assert_close(out, ref.float(), atol=2e-6, rtol=2e-6)


@triton.jit
def libdevice_fp16_kernel(x_ptr, out_ptr):
    x = tl.load(x_ptr + tl.arange(0, 16))
    tl.store(out_ptr + tl.arange(0, 16), libdevice.tanh(x))


def test_libdevice_rejects_types_the_compiler_rejects():
    """libdevice.tanh has fp32/fp64 versions only: an fp16 argument fails to compile on the GPU too."""
    x = torch.randn(16, dtype=torch.float16)
    with pytest.raises(tritonkit.CheckAborted):
        with tritonkit.checking() as s:
            libdevice_fp16_kernel[(1,)](x, torch.empty_like(x))
    assert [f.kind for f in s.findings] == ["kernel_error"]
    assert "float16" in s.findings[0].message


@triton.jit
def asm_kernel(x_ptr):
    x = tl.load(x_ptr + tl.arange(0, 16))
    y = tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], dtype=tl.float32, is_pure=True, pack=1)  # LINE
    tl.store(x_ptr + tl.arange(0, 16), y)


def test_inline_asm_is_an_unsupported_finding_at_its_line():
    import inspect
    x = torch.randn(16)
    with pytest.raises(tritonkit.CheckAborted):
        with tritonkit.checking() as s:
            asm_kernel[(1,)](x)
    (f,) = s.findings
    src, start = inspect.getsourcelines(asm_kernel.fn)
    line = start + next(i for i, t in enumerate(src) if "# LINE" in t)
    assert f.kind == "unsupported" and f.line == line
    assert "cannot run on the CPU: inline assembly" in f.message


def test_fp8_codecs_round_trip_every_code():
    """Every finite fp8 code decodes and encodes back to itself (no code is lost or merged)."""
    for name in ("fp8e5", "fp8e4nv", "fp8e4b15", "fp8e5b16", "fp8e4b8"):
        ty = getattr(tl, {"fp8e5": "float8e5", "fp8e4nv": "float8e4nv", "fp8e4b15": "float8e4b15",
                          "fp8e5b16": "float8e5b16", "fp8e4b8": "float8e4b8"}[name])
        codes = np.arange(256, dtype=np.uint8)
        vals = _numerics.to_float(codes, ty)
        finite = np.isfinite(vals)
        back = _numerics.from_float(vals[finite], ty)
        same = (back == codes[finite]) | ((vals[finite] == 0) & (_numerics.to_float(back, ty) == 0))
        assert same.all(), (name, codes[finite][~same])


@triton.jit
def mul_add_kernel(a_ptr, b_ptr, c_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    a = tl.load(a_ptr + offs, mask=m)
    b = tl.load(b_ptr + offs, mask=m)
    c = tl.load(c_ptr + offs, mask=m)
    tl.store(out_ptr + offs, a * b + c, mask=m)
    tl.store(out_ptr + n + offs, c - a * b, mask=m)


@pytest.mark.parametrize("engine", ["auto", "sequential"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fp32_multiply_add_is_one_fma_unless_fusion_is_off(dtype, engine):
    """Triton compiles with ``enable_fp_fusion``: an fp32 ``a*b + c`` is one fma on the GPU, rounded
    once (bit for bit against an H100 in tests/gpu); 16-bit products are rounded first, and
    ``enable_fp_fusion=False`` rounds both."""
    torch.manual_seed(5)
    n = 20000
    a, b, c = (torch.randn(n, dtype=dtype) * s for s in (3, 2, 5))
    A, B, C = (t.double() for t in (a, b, c))
    once = [(A * B + C).to(dtype), (C - A * B).to(dtype)]  # a product of fp32s is exact in fp64
    twice = [(a * b) + c, c - (a * b)]
    for fusion in (True, False):
        out = torch.zeros(2 * n, dtype=dtype)
        with tritonkit.checking(engine=engine):
            mul_add_kernel[(triton.cdiv(n, 512),)](a, b, c, out, n, BLOCK=512, enable_fp_fusion=fusion)
        expect = once if fusion and dtype == torch.float32 else twice
        assert torch.equal(out[:n], expect[0]) and torch.equal(out[n:], expect[1])
    assert not torch.equal(once[0], twice[0])  # the inputs tell the two apart


@pytest.mark.parametrize("requested", [True, None], ids=["enable_fp_fusion", "default"])
def test_fusion_forced_off_by_tritons_setting_rounds_the_product_first(monkeypatch, requested):
    """``TRITON_FORCE_DISABLE_FP_FUSION=1`` makes Triton compile without fma contraction even where
    the launch asks for it: the interpreter rounds the product first as well."""
    torch.manual_seed(5)
    n = 4096
    a, b, c = (torch.randn(n) * s for s in (3, 2, 5))
    twice = torch.cat([(a * b) + c, c - (a * b)])
    kwargs = {} if requested is None else {"enable_fp_fusion": requested}
    for forced in ("0", "1"):
        monkeypatch.setenv("TRITON_FORCE_DISABLE_FP_FUSION", forced)
        monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "1")
        out = torch.zeros(2 * n)
        with tritonkit.checking():
            mul_add_kernel[(triton.cdiv(n, 512),)](a, b, c, out, n, BLOCK=512, **kwargs)
        assert torch.equal(out, twice) == (forced == "1")


@triton.jit
def _add_n(x_ptr, n, B: tl.constexpr):
    offs = tl.arange(0, B)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)


@pytest.mark.parametrize("value", [np.int64(10), np.int32(3), np.float32(2.0)])
def test_a_numpy_scalar_argument_is_refused_as_triton_refuses_it_natively(value):
    from tritonkit.check.errors import UsageError
    x = torch.zeros(16)
    with tritonkit.checking():
        with pytest.raises(UsageError, match=r"argument n is a NumPy scalar .*pass a Python number"):
            _add_n[(1,)](x, value, B=16)
    assert x.eq(0).all()
