"""Accesses outside a block pointer's or tensor descriptor's declared shape.

A block pointer (``tl.make_block_ptr``, Triton < 3.7) masks only the dimensions named in
``boundary_check``: on another dimension a block that runs past the declared ``shape`` is performed
whole by the GPU. In the fla-style ``x + i_bh * T * K`` with ``shape=(T, K)`` and ``T`` not a multiple
of ``BT``, the last row block of head ``h`` reads head ``h + 1``'s first rows: inside the tensor, so
no address check sees it. The check reports such lanes (reason ``outside_block_shape``) and performs
them, as the GPU does; a lane that also leaves the tensor keeps its address's reason (``past_end``)
and is dropped. Both engines, and the batched engine's launches shared out between processes, give
the same findings.

A tensor descriptor is always bounds-checked by the hardware: lanes outside its declared shape are
not performed (a load gives the padding, zero or NaN; a store drops them), and only a declared shape
that reaches past the base tensor is reported (by its address: ``past_end``).
"""
import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import tritonkit
from tritonkit.check.interp.access import BlockShape
from tritonkit.check.checks.bounds import BoundsCheck

from test_shares import always_share  # noqa: F401  (a fixture)

HAS_BLOCK_PTR = hasattr(tl, "make_block_ptr") and "removed" not in (tl.make_block_ptr.__doc__ or "")
needs_block_ptr = pytest.mark.skipif(not HAS_BLOCK_PTR, reason="tl.make_block_ptr was removed in this Triton")
ENGINES = ["sequential", "auto"]

BH, T, K, BT = 3, 20, 16, 8  # 3 heads of 20 rows; blocks of 8 rows: the last block of a head has 4 rows past T
NT = triton.cdiv(T, BT)


@triton.jit
def chunk_scale(x, y, sums, T, K: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr, SHIFT: tl.constexpr,
                LOAD_CHECK: tl.constexpr, STORE_CHECK: tl.constexpr):
    """fla-style: program (i_t, i_bh) scales rows ``[i_t * BT - SHIFT, +BT)`` of head ``i_bh`` of
    ``x[BH, T, K]`` into ``y`` and writes their sum to ``sums[i_bh, i_t]``."""
    i_t, i_bh = tl.program_id(0), tl.program_id(1)
    p_x = tl.make_block_ptr(x + i_bh * T * K, (T, K), (K, 1), (i_t * BT - SHIFT, 0), (BT, BK), (1, 0))
    p_y = tl.make_block_ptr(y + i_bh * T * K, (T, K), (K, 1), (i_t * BT - SHIFT, 0), (BT, BK), (1, 0))
    if LOAD_CHECK == 2:
        b = tl.load(p_x, boundary_check=(0, 1), padding_option="zero")
    elif LOAD_CHECK == 1:
        b = tl.load(p_x, boundary_check=(1,))
    else:
        b = tl.load(p_x)  # LINE: chunk_scale.load
    tl.store(sums + i_bh * tl.num_programs(0) + i_t, tl.sum(b))
    if STORE_CHECK:
        tl.store(p_y, b * 2, boundary_check=(0, 1))
    else:
        tl.store(p_y, b * 2)  # LINE: chunk_scale.store


@triton.jit
def chunk_scale_advance(x, y, T, K: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr):
    """Program ``i_bh`` walks head ``i_bh``'s row blocks with ``tl.advance`` (no boundary check)."""
    i_bh = tl.program_id(0)
    p_x = tl.make_block_ptr(x + i_bh * T * K, (T, K), (K, 1), (0, 0), (BT, BK), (1, 0))
    p_y = tl.make_block_ptr(y + i_bh * T * K, (T, K), (K, 1), (0, 0), (BT, BK), (1, 0))
    for _ in range(0, tl.cdiv(T, BT)):
        b = tl.load(p_x)  # LINE: chunk_scale_advance.load
        tl.store(p_y, b * 2, boundary_check=(0, 1))
        p_x = tl.advance(p_x, (BT, 0))
        p_y = tl.advance(p_y, (BT, 0))


@pytest.fixture
def heads():
    x = torch.randn(BH, T, K, generator=torch.Generator().manual_seed(0))
    return x, torch.zeros(BH, T, K), torch.zeros(BH, NT)


def _launch(engine, grid, x, y, sums, shift=0, load_check=0, store_check=1, batched=True, **kw):
    with tritonkit.checking(engine=engine, **kw) as s:
        chunk_scale[grid](x, y, sums, T, K, BT, K, SHIFT=shift, LOAD_CHECK=load_check, STORE_CHECK=store_check)
    if engine == "auto" and batched:
        assert [(r.engine, r.fallback) for r in s.launches] == [("batched", None)]
    return s


def _oob(s):
    return [f for f in s.findings if f.kind == "out_of_bounds"]


def _dicts(s):
    out = []
    for f in s.findings:
        d = f.to_dict()
        d.pop("launches")
        out.append(d)
    return out


# --- block pointers: the unchecked dimension runs into the next head ---------------------------------------
@needs_block_ptr
@pytest.mark.parametrize("engine", ENGINES)
def test_a_middle_heads_overrun_inside_the_tensor_is_reported_and_performed(engine, heads, line_of):
    x, y, sums = heads
    s = _launch(engine, (NT, BH - 1), x, y, sums)  # heads 0 and 1: their overruns read heads 1 and 2
    [f] = s.findings
    assert (f.kind, f.reason, f.reasons, f.arg, f.access) == (
        "out_of_bounds", "outside_block_shape", {"outside_block_shape": 2 * 4 * K}, "x", "block_ptr_load")
    assert f.line == line_of(chunk_scale, "chunk_scale.load")
    assert f.elements == "x[1:3, 0:4, 0:16]" and f.num_elements == 2 * 4 * K  # heads 1 and 2's first 4 rows
    assert f.program_ids == [[2, 0], [2, 1]] and f.count == 2 * 4 * K
    assert f.examples[0] == {"program_id": [2, 0], "shape": [T, K], "offsets": [16, 0], "block_shape": [BT, K],
                             "boundary_check": [], "dims": [0]}
    assert "outside its block pointer's declared shape" in f.message
    assert "boundary_check=(0,)" in f.hint and "padding_option" in f.hint
    assert ["block", "declared shape (20, 16), block (8, 16) at offsets (16, 0) in program (2, 0), "
                     "boundary_check=()"] in f.facts
    # performed as on the GPU: the last block's sum has the next head's first 4 rows in it
    for h in range(BH - 1):
        torch.testing.assert_close(sums[h, 2], x[h, 16:].sum() + x[h + 1, :4].sum())
    torch.testing.assert_close(y[: BH - 1], 2 * x[: BH - 1])  # the store is boundary-checked


@needs_block_ptr
@pytest.mark.parametrize("engine", ENGINES)
def test_boundary_check_on_both_dimensions_gives_no_finding(engine, heads):
    x, y, sums = heads
    s = _launch(engine, (NT, BH), x, y, sums, load_check=2)
    assert s.findings == []
    torch.testing.assert_close(y, 2 * x)
    torch.testing.assert_close(sums[:, 2], x[:, 16:].sum(dim=(1, 2)))  # the padding is zero


@needs_block_ptr
@pytest.mark.parametrize("engine", ENGINES)
def test_boundary_check_on_another_dimension_still_reports_the_unchecked_one(engine, heads):
    x, y, sums = heads
    [f] = _launch(engine, (NT, BH - 1), x, y, sums, load_check=1).findings
    assert (f.reason, f.elements, f.program_ids) == ("outside_block_shape", "x[1:3, 0:4, 0:16]", [[2, 0], [2, 1]])
    assert (f.examples[0]["boundary_check"], f.examples[0]["dims"]) == ([1], [0])


@needs_block_ptr
@pytest.mark.parametrize("engine", ENGINES)
def test_a_store_past_the_declared_shape_is_reported(engine, heads, line_of):
    x, y, sums = heads
    y.fill_(-1.0)
    # (two programs store the same elements: the batched engine gives the launch to the sequential one)
    s = _launch(engine, (NT, BH - 1), x, y, sums, load_check=2, store_check=0, batched=False)
    [f] = _oob(s)
    assert (f.reason, f.arg, f.access, f.elements, f.program_ids, f.count) == (
        "outside_block_shape", "y", "block_ptr_store", "y[1:3, 0:4, 0:16]", [[2, 0], [2, 1]], 2 * 4 * K)
    assert f.line == line_of(chunk_scale, "chunk_scale.store")
    assert "boundary_check=(0,) to the store" in f.hint and "padding_option" not in f.hint
    # performed: head 2 (not launched) got the zeros of head 1's padded rows written over its first rows
    assert (y[2, :4] == 0).all() and (y[2, 4:] == -1).all()
    # and head 1's own program wrote the same rows: a race between the two programs, as on the GPU
    assert any(f.kind == "data_race" for f in s.findings)


@needs_block_ptr
@pytest.mark.parametrize("engine", ENGINES)
def test_the_last_heads_overrun_past_the_tensor_stays_past_end(engine, heads):
    """The last head's rows past ``T`` are past the tensor's end: those lanes keep ``past_end`` (and
    are not performed); the other heads' are ``outside_block_shape``. One finding (one line, one
    argument) counts both; its reason is the one with the most lanes."""
    x, y, sums = heads
    [f] = _launch(engine, (NT, BH), x, y, sums).findings
    assert (f.reason, f.reasons) == ("outside_block_shape", {"outside_block_shape": 2 * 4 * K, "past_end": 4 * K})
    assert f.program_ids == [[2, 0], [2, 1], [2, 2]] and f.count == 3 * 4 * K
    torch.testing.assert_close(sums[BH - 1, 2], x[BH - 1, 16:].sum())  # the dropped lanes read 0
    [f] = _launch(engine, (NT, 1), x[BH - 1:], y[BH - 1:], sums).findings  # one head: only past the end
    assert (f.reason, f.reasons, f.elements) == ("past_end", {"past_end": 4 * K}, "x[0, 20:24, 0:16]")


@needs_block_ptr
@pytest.mark.parametrize("engine", ENGINES)
def test_a_negative_offset_reads_the_previous_heads_rows(engine, heads):
    x, y, sums = heads
    [f] = _launch(engine, (1, BH), x, y, sums, shift=4).findings  # rows -4..3: the previous head's last 4 rows
    assert f.reasons == {"outside_block_shape": 2 * 4 * K, "before_start": 4 * K}
    assert (f.program_ids, f.examples[0]["offsets"], f.examples[0]["dims"]) == ([[0, 0], [0, 1], [0, 2]], [-4, 0], [0])
    assert f.elements == "x[-1:2, 16:20, 0:16]"


@needs_block_ptr
def test_advance_in_a_loop_gives_the_same_finding_both_ways(heads):
    x, y, _ = heads
    found = []
    for engine in ENGINES:
        y.zero_()
        with tritonkit.checking(engine=engine) as s:
            chunk_scale_advance[(BH - 1,)](x, y, T, K, BT, K)
        found.append(_dicts(s))
        torch.testing.assert_close(y[: BH - 1], 2 * x[: BH - 1])
    assert found[0] == found[1]
    [f] = found[0]
    assert (f["reason"], f["elements"], f["program_ids"]) == ("outside_block_shape", "x[1:3, 0:4, 0:16]", [[0], [1]])


@needs_block_ptr
def test_shared_out_between_processes_gives_the_sequential_findings(always_share):  # noqa: F811
    bh, t = 16, 20
    x = torch.randn(bh, t, K, generator=torch.Generator().manual_seed(1))
    runs = []
    for engine, kw in (("sequential", {}), ("auto", {"batch_memory": 1 << 12, "workers": 2})):
        y, sums = torch.zeros(bh, t, K), torch.zeros(bh, NT)
        with tritonkit.checking(engine=engine, **kw) as s:
            chunk_scale[(NT, bh)](x, y, sums, t, K, BT, K, SHIFT=0, LOAD_CHECK=0, STORE_CHECK=1)
        runs.append((_dicts(s), y, sums, s.launches))
    (seq, y0, s0, _), (par, y1, s1, records) = runs
    assert par == seq and torch.equal(y0, y1) and torch.equal(s0, s1)
    assert records[0].processes > 1
    assert seq[0]["reasons"] == {"outside_block_shape": (bh - 1) * 4 * K, "past_end": 4 * K}


# --- BlockShape itself (any Triton) ------------------------------------------------------------------------
def test_block_shape_marks_the_lanes_outside_the_declared_shape_on_unchecked_dims():
    one = BlockShape([np.array([5]), np.array([4])], [np.array([4]), np.array([2])], (2, 4), checked=[])
    assert one.outside((2, 4)).reshape(2, 4).tolist() == [[False, False, True, True], [True, True, True, True]]
    assert BlockShape(one.shape, one.offsets, (2, 4), checked=[0]).outside((2, 4)).reshape(2, 4).tolist() == [
        [False, False, True, True], [False, False, True, True]]
    assert BlockShape(one.shape, [np.array([0]), np.array([0])], (2, 4), checked=[]).outside((2, 4)) is None
    # a batch of 3 programs (the program axis first), offsets per program; a uniform one broadcast
    many = BlockShape([np.array([4]), np.array([4])], [np.array([0, 3, -1]), np.array([0])], (2, 4), checked=[1])
    got = many.outside((3, 2, 4)).reshape(3, 2, 4)
    assert got[:, :, 0].tolist() == [[False, False], [False, True], [True, False]] and (got == got[..., :1]).all()
    assert many.outside((2, 4)) is not None  # a uniform access of the batch: the first program's offsets
    assert many.example([7], 8 * 2 + 3, (3, 2, 4)) == {"program_id": [7], "shape": [4, 4], "offsets": [-1, 0],
                                                        "block_shape": [2, 4], "boundary_check": [1], "dims": [0]}


def test_every_dimension_boundary_checked_needs_no_block_shape():
    class Ptr:
        shape, offsets, block_shape = [np.array([4])] * 2, [np.array([3])] * 2, [2, 2]
    assert BlockShape.of(Ptr(), [0, 1]) is None
    assert BlockShape.of(Ptr(), [1]).checked == (1,)


def test_the_reason_reads_in_messages_and_hints():
    f = tritonkit.check.Finding(kind="out_of_bounds", kernel="k", file="f.py", line=1, arg="x", access="block_ptr_load",
                                count=80, num_programs=2, reason="outside_block_shape",
                                reasons={"outside_block_shape": 64, "past_end": 16},
                                examples=[{"program_id": [2, 0], "shape": [20, 16], "offsets": [16, 0],
                                           "block_shape": [8, 16], "boundary_check": [], "dims": [0]}])
    assert BoundsCheck.message(f) == ("block_ptr_load outside its block pointer's declared shape (not "
                                      "boundary-checked), into `x`: 80 lanes in 2 programs (64 outside the "
                                      "declared shape, 16 past the end)")
    assert "add boundary_check=(0,) and padding_option='zero' to the load" in BoundsCheck.hint(f)


# --- tensor descriptors: the hardware masks the declared shape; a shape past the tensor is reported ---------
@triton.jit
def device_desc_copy(x, y, sums, M, N, M_DECLARED, BM: tl.constexpr, BN: tl.constexpr, NAN: tl.constexpr):
    pm = tl.program_id(0)
    if NAN:
        src = tl.make_tensor_descriptor(x, shape=[M_DECLARED, N], strides=[N, 1], block_shape=[BM, BN],
                                        padding_option="nan")
    else:
        src = tl.make_tensor_descriptor(x, shape=[M_DECLARED, N], strides=[N, 1], block_shape=[BM, BN])
    dst = tl.make_tensor_descriptor(y, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    t = src.load([pm * BM, 0])  # LINE: device_desc_copy.load
    tl.store(sums + pm * BM + tl.arange(0, BM), tl.sum(t, axis=1))
    dst.store([pm * BM, 0], t + 1)


@triton.jit
def host_desc_rows(x_desc, out, BM: tl.constexpr, BN: tl.constexpr):
    pm = tl.program_id(0)
    t = x_desc.load([pm * BM, 0])
    tl.store(out + (pm * BM + tl.arange(0, BM))[:, None] * BN + tl.arange(0, BN)[None, :], t)


@pytest.fixture
def allocator():
    """Device-side descriptors ask Triton's allocator for scratch memory (on a GPU)."""
    if hasattr(triton, "set_allocator"):
        triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8))


@pytest.mark.skipif(not hasattr(tl, "make_tensor_descriptor"), reason="no device-side tensor descriptors")
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("nan", [False, True], ids=["zero", "nan"])
def test_a_device_descriptors_lanes_past_its_shape_are_padding_and_not_stored(engine, nan, allocator):
    M, N, BM, BN = 20, 16, 8, 16
    base = torch.randn(M + 8, N, generator=torch.Generator().manual_seed(2))
    x, out = base[:M], torch.full((M + 8, N), -1.0)  # rows past M: the next rows of the storage
    sums = torch.zeros(24)
    with tritonkit.checking(engine=engine) as s:
        device_desc_copy[(3,)](x, out[:M], sums, M, N, M, BM, BN, NAN=nan)
    assert s.findings == []
    torch.testing.assert_close(out[:M], x + 1)
    assert (out[M:] == -1).all()  # the block's rows past M were not stored (into the rest of the storage)
    torch.testing.assert_close(sums[:M], x.sum(dim=1))
    # the rows past the declared shape read the padding, not base[M:]
    assert (sums[M:].isnan().all() if nan else (sums[M:] == 0).all())


@pytest.mark.skipif(not hasattr(tl, "make_tensor_descriptor"), reason="no device-side tensor descriptors")
def test_a_device_descriptor_declared_past_its_tensor_is_reported_both_ways(allocator, line_of):
    M, N, BM, BN = 20, 16, 8, 16
    found = []
    for engine in ENGINES:
        base = torch.randn(M + 4, N, generator=torch.Generator().manual_seed(3))
        out = torch.zeros(M + 8, N)
        with tritonkit.checking(engine=engine) as s:
            device_desc_copy[(4,)](base[:M], out, torch.zeros(32), M + 8, N, M + 8, BM, BN, NAN=False)
        found.append(_dicts(s))
        if engine == "auto":
            assert [(r.engine, r.fallback) for r in s.launches] == [("batched", None)]
    assert found[0] == found[1]
    [f] = found[0]
    assert (f["arg"], f["reason"], f["elements"], f["program_ids"]) == ("x", "past_end", "x[20:28, 0:16]", [[2], [3]])
    assert f["line"] == line_of(device_desc_copy, "device_desc_copy.load")


@pytest.mark.parametrize("engine", ENGINES)
def test_a_host_descriptors_columns_past_its_shape_are_zero_not_the_next_columns(engine):
    from triton.tools.tensor_descriptor import TensorDescriptor
    M, N, W = 20, 16, 24
    wide = torch.randn(M, W, generator=torch.Generator().manual_seed(4))
    out = torch.full((24, 32), -1.0)
    desc = TensorDescriptor(wide[:, :N], [M, N], [W, 1], [8, 32])  # blocks of 32 columns over 16
    with tritonkit.checking(engine=engine) as s:
        host_desc_rows[(3,)](desc, out, 8, 32)
    assert s.findings == []
    assert torch.equal(out[:M, :N], wide[:, :N]) and (out[:M, N:] == 0).all() and (out[M:] == 0).all()
