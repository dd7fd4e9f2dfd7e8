"""Fixtures for every test folder: the example scripts in ``examples/`` importable by name
(``import softmax``), and the kernels that compare the checked interpreter's numerics with torch's
(``tests/check/test_numerics.py``) and with a real GPU's (``tests/gpu/test_gpu_faithful.py``)."""
import os
import sys

import pytest
import triton
import triton.language as tl
from triton.language.extra import libdevice

EXAMPLES_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")
if EXAMPLES_DIR not in sys.path:
    sys.path.insert(0, EXAMPLES_DIR)


# --- numerics kernels: each stores several results of one kind of operation ----------------------------
@triton.jit
def binary_kernel(x_ptr, y_ptr, add_ptr, mul_ptr, div_ptr, max_ptr, lt_ptr, neg_ptr, exp_ptr, n,
                  BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    y = tl.load(y_ptr + offs, mask=m)
    tl.store(add_ptr + offs, x + y, mask=m)
    tl.store(mul_ptr + offs, x * y, mask=m)
    tl.store(div_ptr + offs, x / y, mask=m)
    tl.store(max_ptr + offs, tl.maximum(x, y), mask=m)
    tl.store(lt_ptr + offs, x < y, mask=m)
    tl.store(neg_ptr + offs, -x, mask=m)
    tl.store(exp_ptr + offs, tl.exp(x.to(tl.float32)).to(x.dtype), mask=m)


@triton.jit
def cast_kernel(x_ptr, bf_ptr, h_ptr, i_ptr, u8_ptr, e4_ptr, e5_ptr, rtz_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(bf_ptr + offs, x.to(tl.bfloat16), mask=m)
    tl.store(h_ptr + offs, x.to(tl.float16), mask=m)
    tl.store(i_ptr + offs, x.to(tl.int32), mask=m)
    tl.store(u8_ptr + offs, x.to(tl.uint8), mask=m)
    tl.store(e4_ptr + offs, x.to(tl.float8e4nv), mask=m)
    tl.store(e5_ptr + offs, x.to(tl.float8e5), mask=m)
    tl.store(rtz_ptr + offs, x.to(tl.bfloat16, fp_downcast_rounding="rtz"), mask=m)


@triton.jit
def dot_kernel(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
               PRECISION: tl.constexpr):
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    rk = tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    if PRECISION == "default":
        c = tl.dot(a, b)
    else:
        c = tl.dot(a, b, input_precision=PRECISION)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], c)


@triton.jit
def reduce_kernel(x_ptr, sum_ptr, max_ptr, min_ptr, argmax_ptr, cumsum_ptr, N: tl.constexpr):
    row = tl.program_id(0)
    x = tl.load(x_ptr + row * N + tl.arange(0, N))
    tl.store(sum_ptr + row, tl.sum(x, axis=0))
    tl.store(max_ptr + row, tl.max(x, axis=0))
    tl.store(min_ptr + row, tl.min(x, axis=0))
    tl.store(argmax_ptr + row, tl.argmax(x, axis=0))
    tl.store(cumsum_ptr + row * N + tl.arange(0, N), tl.cumsum(x, axis=0))


@triton.jit
def libdevice_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=1.0)
    y = libdevice.tanh(x) + libdevice.rsqrt(tl.abs(x) + 1.0) + libdevice.pow(tl.abs(x), 1.5) + libdevice.erf(x)
    tl.store(out_ptr + offs, y, mask=m)



@pytest.fixture(name="binary_kernel")
def _binary_kernel_fixture():
    """The ``binary_kernel`` kernel (see the module)."""
    return binary_kernel


@pytest.fixture(name="cast_kernel")
def _cast_kernel_fixture():
    """The ``cast_kernel`` kernel (see the module)."""
    return cast_kernel


@pytest.fixture(name="dot_kernel")
def _dot_kernel_fixture():
    """The ``dot_kernel`` kernel (see the module)."""
    return dot_kernel


@pytest.fixture(name="reduce_kernel")
def _reduce_kernel_fixture():
    """The ``reduce_kernel`` kernel (see the module)."""
    return reduce_kernel


@pytest.fixture(name="libdevice_kernel")
def _libdevice_kernel_fixture():
    """The ``libdevice_kernel`` kernel (see the module)."""
    return libdevice_kernel
