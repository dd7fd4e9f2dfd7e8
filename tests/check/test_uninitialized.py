"""``uninitialized_read``: reads of elements nothing wrote since ``torch.empty*`` (or ``mark_uninitialized``)."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import tritonkit


@triton.jit
def accumulate(x, out, n, B: tl.constexpr):
    offs = tl.program_id(0) * B + tl.arange(0, B)
    m = offs < n
    acc = tl.load(out + offs, mask=m)  # LINE: acc_load
    tl.store(out + offs, acc + tl.load(x + offs, mask=m), mask=m)


def test_accumulating_into_a_torch_empty_output_reads_it_uninitialized(line_of):
    x = torch.randn(1000)
    with tritonkit.checking() as s:
        out = torch.empty(1000)  # the bug: torch.zeros was meant
        accumulate[(4,)](x, out, 1000, 256)
    (f,) = s.findings
    assert (f.kind, f.line, f.arg, f.access) == ("uninitialized_read", line_of(accumulate, "acc_load"), "out", "load")
    assert f.program_ids == [[0], [1], [2], [3]] and f.elements == "out[0:1000]" and f.count == 1000
    assert "test_uninitialized.py" in f.message  # where the buffer was allocated
    with tritonkit.checking() as s:
        out = torch.zeros(1000)
        accumulate[(4,)](x, out, 1000, 256)
    assert s.findings == []
    torch.testing.assert_close(out, x)


@triton.jit
def copy(src, dst, n, B: tl.constexpr):
    offs = tl.program_id(0) * B + tl.arange(0, B)
    m = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=m), mask=m)  # LINE: copy


def test_a_scratch_buffer_read_past_the_part_a_kernel_wrote(line_of):
    x = torch.randn(100)
    with tritonkit.checking() as s:
        scratch = torch.empty(128)
        copy[(1,)](x, scratch, 100, 128)  # writes scratch[0:100]
        out = torch.empty(128)
        copy[(1,)](scratch, out, 128, 128)  # reads scratch[0:128]
    (f,) = s.findings
    assert (f.kind, f.line, f.arg, f.access) == ("uninitialized_read", line_of(copy, "copy"), "src", "load")
    assert f.elements == "src[100:128]" and f.count == 28 and f.launches == 1


def test_what_pytorch_wrote_counts_as_initialized():
    x = torch.randn(100)
    with tritonkit.checking() as s:
        buf = torch.empty(100)
        buf[:60] = x[:60]  # written by PyTorch, not by a kernel
        out = torch.zeros(100)
        copy[(1,)](buf, out, 100, 128)
    (f,) = s.findings
    assert f.elements == "src[60:100]" and f.count == 40


def test_a_buffer_fully_written_by_one_kernel_is_initialized_for_the_next():
    x = torch.randn(300)
    with tritonkit.checking() as s:
        mid = torch.empty_like(x)
        copy[(3,)](x, mid, 300, 128)
        out = torch.empty_like(x)
        copy[(3,)](mid, out, 300, 128)
    assert s.findings == []
    assert torch.equal(out, x)


@triton.jit
def add_partial(x, out, n, B: tl.constexpr):
    offs = tl.arange(0, B)
    m = offs < n
    tl.atomic_add(out + offs, tl.load(x + offs, mask=m), mask=m)  # LINE: atomic


def test_an_atomic_add_into_torch_empty_reads_garbage(line_of):
    x = torch.randn(50)
    with tritonkit.checking() as s:
        out = torch.empty(50)
        add_partial[(1,)](x, out, 50, 64)
    (f,) = s.findings
    assert (f.kind, f.line, f.access) == ("uninitialized_read", line_of(add_partial, "atomic"), "atomic_add")
    assert f.count == 50


def test_mark_uninitialized_declares_a_slice_of_any_buffer():
    workspace = torch.zeros(256)
    tritonkit.mark_uninitialized(workspace[64:128])  # marked before the session: kept for it
    with tritonkit.checking() as s:
        out = torch.zeros(128)
        copy[(1,)](workspace[32:160], out, 128, 128)
    (f,) = s.findings
    assert f.kind == "uninitialized_read" and f.elements == "src[32:96]" and f.count == 64


def test_small_integer_buffers_written_by_pytorch_are_initialized_even_with_the_sentinel_value():
    with tritonkit.checking() as s:
        buf = torch.empty(100, dtype=torch.int8)
        buf.fill_(-91)  # 0xA5: the sentinel's own byte, written on purpose
        out = torch.zeros(100, dtype=torch.int8)
        copy[(1,)](buf, out, 100, 128)
    assert s.findings == []
    assert torch.equal(out, torch.full((100,), -91, dtype=torch.int8))


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int16])
def test_small_integer_data_written_through_numpy_is_initialized_even_where_it_holds_the_sentinel(dtype):
    """A NumPy view's writes move no PyTorch version counter: written-ness is not taken from the bytes
    alone (elements that hold 0xA5 as data are data)."""
    with tritonkit.checking() as s:
        buf = torch.empty(100, dtype=dtype)
        data = np.arange(100) % 7
        data[::3] = -91 if dtype != torch.uint8 else 0xA5
        if dtype == torch.int16:
            data[::3] = int(np.array(0xA5A5, dtype=np.uint16).view(np.int16))
        buf.numpy()[:] = data  # through NumPy: PyTorch sees no write
        out = torch.zeros(100, dtype=dtype)
        copy[(1,)](buf, out, 100, 128)
    assert s.findings == []
    assert torch.equal(out, buf)


def test_a_small_integer_scratch_buffer_read_past_the_part_a_kernel_wrote_is_still_reported():
    x = torch.arange(100, dtype=torch.uint8)
    with tritonkit.checking() as s:
        scratch = torch.empty(128, dtype=torch.uint8)
        copy[(1,)](x, scratch, 100, 128)  # writes scratch[0:100] (a kernel's writes are tracked exactly)
        copy[(1,)](scratch, torch.zeros(128, dtype=torch.uint8), 128, 128)
    (f,) = s.findings
    assert f.kind == "uninitialized_read" and f.elements == "src[100:128]"


@triton.autotune(configs=[triton.Config({"B": 64}), triton.Config({"B": 128})], key=["n"])
@triton.jit
def tuned_accumulate(x, out, n, B: tl.constexpr):
    offs = tl.program_id(0) * B + tl.arange(0, B)
    m = offs < n
    tl.store(out + offs, tl.load(out + offs, mask=m) + tl.load(x + offs, mask=m), mask=m)


def test_every_autotune_config_starts_from_the_same_uninitialized_state():
    x = torch.randn(200)
    with tritonkit.checking() as s:
        out = torch.empty(200)
        tuned_accumulate[lambda meta: (triton.cdiv(200, meta["B"]),)](x, out, 200)
    (f,) = s.findings
    assert sorted(c.split(",")[0] for c in f.configs) == ["B=128", "B=64"] and f.launches == 2


def test_allocations_are_not_tracked_outside_a_session():
    x = torch.randn(100)
    out = torch.empty(100)  # before the session: its content is unknown, not tracked
    with tritonkit.checking(checks=["uninitialized_read"]) as s:
        copy[(1,)](out, x, 100, 128)
    assert s.findings == []
    assert torch.empty is not None and "allocate" not in getattr(torch.empty, "__name__", "")


def test_tracking_an_allocation_costs_nothing_until_a_kernel_touches_it():
    import tracemalloc

    x = torch.randn(100)
    tracemalloc.start()
    try:
        with tritonkit.checking(checks=["uninitialized_read"]) as s:
            big = torch.empty(2 ** 24)  # 16 Mi elements, never given to a kernel
            out = torch.empty(100)
            copy[(1,)](x, out, 100, 128)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert s.findings == [] and torch.equal(out, x) and big.numel() == 2 ** 24
    assert peak < 4 * 2 ** 20  # a bool per element of `big` would be 16 MiB


@triton.jit
def tile_copy(src, dst, src_stride, dst_stride, R: tl.constexpr, C: tl.constexpr):
    rows = tl.program_id(0) * R + tl.arange(0, R)[:, None]
    cols = tl.arange(0, C)[None, :]
    tl.store(dst + rows * dst_stride + cols, tl.load(src + rows * src_stride + cols))  # LINE: tile_copy


@pytest.mark.parametrize("engine", ["auto", "sequential"])
def test_tile_rows_read_where_only_some_rows_were_written(line_of, engine):
    """Tiles of 16 x 32 (rows of 32 consecutive elements, 48 apart): a first kernel writes rows 0-15
    of a 32 x 48 buffer's first 32 columns, a second reads 32 rows of it: the rows never written,
    and no column past 32 (never touched), are reported."""
    x = torch.randn(32, 48)
    with tritonkit.checking(engine=engine) as s:
        buf = torch.empty(32, 48)
        tile_copy[(1,)](x, buf, 48, 48, 16, 32)  # buf[0:16, 0:32]
        out = torch.empty(32, 48)
        tile_copy[(2,)](buf, out, 48, 48, 16, 32)  # reads buf[0:32, 0:32]
    (f,) = s.findings
    assert (f.kind, f.line, f.arg, f.access) == ("uninitialized_read", line_of(tile_copy, "tile_copy"), "src", "load")
    assert f.program_ids == [[1]] and f.count == 16 * 32
    torch.testing.assert_close(out[:16, :32], x[:16, :32])
