"""tritonkit types kernel arguments itself (``arguments.type_name``) instead of calling Triton's
``mangle_type``, whose first call imports Triton's whole compiler front end: the two must agree on
every argument Triton's JIT specializes on."""
import pytest
import torch
from hypothesis import given, settings, strategies as st
from triton.runtime.jit import mangle_type

from tritonkit.check.launch.arguments import type_name

_DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int8, torch.int16, torch.int32,
           torch.int64, torch.uint8, torch.bool, torch.float8_e4m3fn, torch.float8_e5m2]


@pytest.mark.parametrize("specialize", [False, True])
@pytest.mark.parametrize("value", [True, False, 0, 1, -1, 16, 2 ** 31 - 1, 2 ** 31, -2 ** 31, -2 ** 31 - 1, 2 ** 63 - 1,
                                   2 ** 63, 2 ** 64 - 1, -2 ** 63, 0.0, -2.5, float("inf"), float("nan")])
def test_scalars_are_typed_as_triton_types_them(value, specialize):
    assert type_name(value, specialize) == mangle_type(value, specialize)


@settings(max_examples=300, deadline=None)
@given(st.integers(-2 ** 63, 2 ** 64 - 1), st.booleans())
def test_every_64_bit_integer_is_typed_as_triton_types_it(value, specialize):
    assert type_name(value, specialize) == mangle_type(value, specialize)


@pytest.mark.parametrize("value", [2 ** 64, -2 ** 63 - 1])
def test_an_integer_over_64_bits_is_refused_like_triton_refuses_it(value):
    with pytest.raises(OverflowError):
        mangle_type(value)
    with pytest.raises(OverflowError):
        type_name(value)


@pytest.mark.parametrize("dtype", _DTYPES, ids=str)
def test_tensors_are_typed_as_pointers_to_their_dtype(dtype):
    t = torch.zeros(3, dtype=dtype)
    assert type_name(t) == mangle_type(t)
    assert type_name(t[1:]) == mangle_type(t[1:])
