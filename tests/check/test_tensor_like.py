"""Pointer arguments that are not ``torch.Tensor``: objects with ``data_ptr()`` and a torch ``dtype``
(and maybe ``shape``/``stride()``), which Triton's launcher takes as pointers and kernel libraries
pass for strided buffers. Under check they raised ``AttributeError: ... has no attribute 'type'``
(issue 40); they are mapped onto the storage their address points into, with their own view."""
import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from tritonkit.check import UsageError, checking


class StridedBuffer:
    """A view of a tensor's storage described by itself: address, dtype, shape, strides (in
    elements), as kernel libraries make them."""

    def __init__(self, base: torch.Tensor, shape, strides, offset: int = 0):
        self._base = base
        self.dtype = base.dtype
        self.shape = tuple(shape)
        self._strides = tuple(strides)
        self._ptr = base.data_ptr() + offset * base.element_size()

    def data_ptr(self) -> int:
        return self._ptr

    def stride(self):
        return self._strides


class Address:
    """Only ``data_ptr()`` and ``dtype``: no shape, no reference to the tensor."""

    def __init__(self, t: torch.Tensor):
        self._ptr = t.data_ptr()
        self.dtype = t.dtype

    def data_ptr(self) -> int:
        return self._ptr


@triton.jit
def gather_scaled(x_ptr, out_ptr, n, stride, B: tl.constexpr):
    offs = tl.program_id(0) * B + tl.arange(0, B)
    m = offs < n
    x = tl.load(x_ptr + offs * stride, mask=m)  # LINE: gather.load
    tl.store(out_ptr + offs, x * 2, mask=m)


def _run(engine, x, n=8, stride=2):
    out = torch.zeros(8)
    with checking(engine=engine) as session:
        gather_scaled[(2,)](x, out, n, stride, B=4)
    return out, session


@pytest.mark.parametrize("engine", ["auto", "sequential"])
def test_a_strided_buffer_runs_with_no_finding(engine):
    base = torch.arange(16, dtype=torch.float32)
    out, session = _run(engine, StridedBuffer(base, (8,), (2,), offset=1))
    assert session.findings == []
    assert out.tolist() == [2.0 * v for v in range(1, 16, 2)]


@pytest.mark.parametrize("engine", ["auto", "sequential"])
def test_an_access_outside_a_strided_buffers_own_view_is_reported_with_its_name(engine, line_of):
    base = torch.arange(16, dtype=torch.float32)
    out, session = _run(engine, StridedBuffer(base, (7,), (2,)))  # the 8th element is outside its view
    [f] = session.findings
    assert f.kind == "out_of_bounds" and f.arg == "x_ptr" and f.count == 1
    assert f.line == line_of(gather_scaled, "gather.load")
    assert out.tolist()[:7] == [2.0 * v for v in range(0, 14, 2)] and out[7] == 0


@pytest.mark.parametrize("engine", ["auto", "sequential"])
def test_an_object_with_only_data_ptr_and_dtype_is_bounded_by_its_storage(engine):
    base = torch.arange(16, dtype=torch.float32)
    out, session = _run(engine, Address(base))
    assert session.findings == []
    assert out.tolist() == [2.0 * v for v in range(0, 16, 2)]
    out, session = _run(engine, Address(base[4:]))  # 4 + 2 * 7 = 18: past the storage's 16 elements
    [f] = session.findings
    assert f.kind == "out_of_bounds" and f.arg == "x_ptr" and f.reason == "past_end" and f.count == 2
    assert out.tolist() == [8.0, 12.0, 16.0, 20.0, 24.0, 28.0, 0.0, 0.0]


def test_a_store_through_a_strided_buffer_writes_the_tensor():
    base = torch.zeros(16)
    src = torch.arange(8, dtype=torch.float32)

    @triton.jit
    def copy(src_ptr, dst_ptr, B: tl.constexpr):
        offs = tl.arange(0, B)
        tl.store(dst_ptr + offs * 2, tl.load(src_ptr + offs))

    with checking() as session:
        copy[(1,)](src, StridedBuffer(base, (8,), (2,), offset=1), B=8)
    assert session.findings == []
    assert base[1::2].tolist() == src.tolist() and base[0::2].abs().sum() == 0


def test_memory_no_tensor_holds_is_read_as_the_object_describes_it():
    class HostArray:
        def __init__(self, a):
            self.a, self.dtype, self.shape, self.device = a, torch.float32, a.shape, "cpu"

        def data_ptr(self):
            return self.a.ctypes.data

        def stride(self):
            return tuple(s // self.a.itemsize for s in self.a.strides)

    a = np.arange(16, dtype=np.float32)
    out, session = _run("auto", HostArray(a))
    assert session.findings == [] and out.tolist() == [2.0 * v for v in range(0, 16, 2)]
    out, session = _run("auto", HostArray(a[:8]))
    [f] = session.findings
    assert f.kind == "out_of_bounds" and f.arg == "x_ptr" and f.count == 4


def test_a_view_that_reaches_past_its_storage_is_a_usage_error():
    with pytest.raises(UsageError, match="reaches past its storage"):
        _run("auto", StridedBuffer(torch.arange(16, dtype=torch.float32), (9,), (2,)))


@triton.autotune(configs=[triton.Config({"B": 4}), triton.Config({"B": 8})], key=["n"])
@triton.jit
def add_one(x_ptr, n, B: tl.constexpr):
    offs = tl.program_id(0) * B + tl.arange(0, B)
    m = offs < n
    tl.store(x_ptr + offs * 2, tl.load(x_ptr + offs * 2, mask=m) + 1, mask=m)


@pytest.mark.parametrize("workers", [1, None])
def test_an_autotuned_kernel_writes_a_strided_buffer_once(workers):
    base = torch.zeros(16)
    with checking(workers=workers) as session:  # 1: each config in this process, undone after
        add_one[lambda meta: (triton.cdiv(8, meta["B"]),)](StridedBuffer(base, (8,), (2,)), 8)
    assert session.findings == [] and len(session.launches) == 2
    assert base[0::2].tolist() == [1.0] * 8 and base[1::2].abs().sum() == 0
