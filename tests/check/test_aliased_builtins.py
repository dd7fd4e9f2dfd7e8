"""Triton builtins reached by a name the language patches never set: a libdevice function imported
under another name, a builtin bound to a module global, a closure's variable. The compiler resolves
them like ``tl.math.exp``; under check (and Triton's plain interpreter) they raised ``ValueError: Did
you forget to add @triton.jit?`` (issue 40). Both engines; Triton's plain state is back after the
launch."""
import pytest
import torch
import triton
import triton.language as tl
from triton.language import where as _where
from triton.language.extra import libdevice as generic_libdevice
from triton.language.extra.cuda import libdevice
from triton.language.extra.cuda.libdevice import finitef as _isfinite
from triton.language.extra.libdevice import pow as _generic_pow

from tritonkit.check import CheckAborted, checking

_pow = libdevice.pow  # a module attribute bound to a module global
_exp = tl.math.exp
_fast_exp = generic_libdevice.exp  # the generic module's stub, bound to a global


@triton.jit
def _finite_square(x):
    return _where(_isfinite(x), _pow(x, 2.0), 0.0)


@triton.jit
def through_helper(x_ptr, out_ptr, n, B: tl.constexpr):
    offs = tl.program_id(0) * B + tl.arange(0, B)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(out_ptr + offs, _finite_square(x), mask=m)


@triton.jit
def directly(x_ptr, out_ptr, n, B: tl.constexpr):
    offs = tl.program_id(0) * B + tl.arange(0, B)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    y = _generic_pow(x, 3.0) + _exp(x) * 0.0 + _fast_exp(x) * 0.0
    tl.store(out_ptr + offs, tl.where(_isfinite(x), y, -1.0), mask=m)


def _closure_kernel():
    square = libdevice.pow  # a closure's variable, as in a kernel factory

    @triton.jit
    def kernel(x_ptr, out_ptr, n, B: tl.constexpr):
        offs = tl.program_id(0) * B + tl.arange(0, B)
        m = offs < n
        tl.store(out_ptr + offs, square(tl.load(x_ptr + offs, mask=m), 2.0), mask=m)
    return kernel


_INF = float("inf")


def _launch(kernel, engine):
    x = torch.tensor([1.0, -2.0, _INF, 3.0, 0.5, 4.0])
    out = torch.zeros(6)
    with checking(engine=engine) as session:
        _SESSIONS.append(session)
        kernel[(2,)](x, out, 6, B=4)
    return x, out, session


_SESSIONS: list = []  # the sessions of the launches, those that raised included


@pytest.mark.parametrize("engine", ["auto", "sequential"])
def test_an_aliased_libdevice_function_runs_in_a_jitted_helper(engine):
    x, out, session = _launch(through_helper, engine)
    assert session.findings == []
    assert out.tolist() == [1.0, 4.0, 0.0, 9.0, 0.25, 16.0]
    assert [r.engine for r in session.launches] == ["batched" if engine == "auto" else "sequential"]


@pytest.mark.parametrize("engine", ["auto", "sequential"])
def test_aliased_builtins_run_when_the_kernel_calls_them(engine):
    x, out, session = _launch(directly, engine)
    assert session.findings == []
    assert out.tolist() == [1.0, -8.0, -1.0, 27.0, 0.125, 64.0]
    assert [r.engine for r in session.launches] == ["batched" if engine == "auto" else "sequential"]


@pytest.mark.parametrize("engine", ["auto", "sequential"])
def test_a_builtin_in_a_kernels_closure_runs(engine):
    x, out, session = _launch(_closure_kernel(), engine)
    assert session.findings == []
    assert out.tolist() == [1.0, 4.0, _INF, 9.0, 0.25, 16.0]


def test_the_builtins_are_tritons_own_again_after_the_launch():
    codes = {fn: fn.__code__ for fn in (_isfinite, _pow, _exp, _where)}
    _launch(through_helper, "auto")
    for fn, code in codes.items():
        assert fn.__code__ is code, fn
        with pytest.raises(ValueError, match="Did you forget to add @triton.jit"):
            fn(1.0)  # outside a kernel, as Triton has it


@triton.jit
def wrong_arguments(x_ptr, out_ptr, n, B: tl.constexpr):
    offs = tl.program_id(0) * B + tl.arange(0, B)
    tl.store(out_ptr + offs, _pow(tl.load(x_ptr + offs)), mask=offs < n)  # LINE: wrong.pow


@triton.jit
def wrong_arguments_by_module(x_ptr, out_ptr, n, B: tl.constexpr):
    offs = tl.program_id(0) * B + tl.arange(0, B)
    tl.store(out_ptr + offs, libdevice.pow(tl.load(x_ptr + offs)), mask=offs < n)  # LINE: wrong.pow


@pytest.mark.parametrize("engine", ["auto", "sequential"])
@pytest.mark.parametrize("kernel", [wrong_arguments, wrong_arguments_by_module])
def test_a_builtin_called_with_wrong_arguments_is_the_kernels_error(engine, kernel, line_of):
    with pytest.raises(CheckAborted):
        _launch(kernel, engine)
    session = _SESSIONS[-1]
    [f] = session.findings
    assert f.kind == "kernel_error" and "TypeError: pow() missing 1 required positional argument" in f.message
    assert f.line == line_of(kernel, "wrong.pow")
