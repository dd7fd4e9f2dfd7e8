"""A kernel using a construct the installed Triton does not have (an attribute of
``triton.language`` from another Triton version): the kernel_error finding names the construct and
the installed Triton version (issue 40), instead of a bare ``AttributeError``."""
import pytest
import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import libdevice

from tritonkit.check import CheckAborted, checking


@triton.jit
def uses_a_newer_language(x_ptr, B: tl.constexpr):
    offs = tl.arange(0, B)
    x = tl.load(x_ptr + offs)
    tl.store(x_ptr + offs, tl.not_in_this_triton(x))  # LINE: missing.language


@triton.jit
def uses_a_newer_libdevice(x_ptr, B: tl.constexpr):
    offs = tl.arange(0, B)
    x = tl.load(x_ptr + offs)
    tl.store(x_ptr + offs, libdevice.not_in_this_triton(x))  # LINE: missing.libdevice


@triton.jit
def uses_a_newer_tensor_method(x_ptr, B: tl.constexpr):
    offs = tl.arange(0, B)
    x = tl.load(x_ptr + offs)
    tl.store(x_ptr + offs, x.not_in_this_triton())  # LINE: missing.method


@pytest.mark.parametrize("kernel, marker, construct", [
    (uses_a_newer_language, "missing.language", "triton.language.not_in_this_triton"),
    (uses_a_newer_libdevice, "missing.libdevice", "triton.language.extra.cuda.libdevice.not_in_this_triton"),
    (uses_a_newer_tensor_method, "missing.method", "triton.language.core.tensor.not_in_this_triton"),
])
def test_a_construct_the_installed_triton_lacks_is_named_with_its_version(kernel, marker, construct, line_of):
    with pytest.raises(CheckAborted):
        with checking() as session:
            kernel[(1,)](torch.zeros(4), B=4)
    [f] = session.findings
    assert f.kind == "kernel_error" and f.line == line_of(kernel, marker)
    assert f"`{construct}` does not exist in the installed Triton ({triton.__version__})" in f.message
