"""Pointer blocks resolved from their operands (``base + offsets * size``) without making the
addresses: the same lanes, slots, offsets, extremes and contiguity as resolving the addresses."""
import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

from tritonkit.check.interp import addresses
from tritonkit.check.interp.addresses import make_addresses
from tritonkit.check.memory import AddressSpace, HostStorage


def _space(*tensors):
    space = AddressSpace()
    regions = []
    for i, t in enumerate(tensors):
        stg = t.untyped_storage()
        buf = torch.empty(0, dtype=torch.uint8).set_(stg, 0, (stg.nbytes(),), (1,)).numpy()
        hs = space.storages.setdefault(("cpu", stg.data_ptr()), HostStorage(buf=buf))
        regions.append(space.add(f"a{i}", hs, t.storage_offset() * t.element_size(), t.element_size(),
                                 t.shape, t.stride(), str(t.dtype)))
    return space, regions


def _base(kind: str, vaddr: int, shape, rng) -> np.ndarray:
    P, R, C = shape
    if kind == "one pointer, broadcast":
        return np.broadcast_to(np.array(vaddr, dtype=np.uint64), shape)
    if kind == "one pointer, splat":
        return np.full((R, C), vaddr, dtype=np.uint64)
    if kind == "one per program":
        return np.broadcast_to((vaddr + 4 * R * C * np.arange(P, dtype=np.uint64))[:, None, None], shape)
    if kind == "one per program, shuffled":
        return np.broadcast_to((vaddr + 4 * R * C * rng.permutation(P).astype(np.uint64))[:, None, None], shape)
    if kind == "one per row":
        rows = vaddr + 4 * C * np.arange(P * R, dtype=np.uint64).reshape(P, R, 1)
        return np.broadcast_to(rows, shape)
    return (vaddr + 4 * rng.integers(0, 64, size=shape)).astype(np.uint64)  # every lane its own


def _offsets(kind: str, shape, dtype, rng) -> np.ndarray:
    P, R, C = shape
    if kind == "consecutive":
        return np.arange(P * R * C).reshape(shape).astype(dtype)
    if kind == "a row, repeated":
        return np.broadcast_to(np.arange(C).astype(dtype), shape)
    if kind == "rows of a tile":
        return np.broadcast_to((np.arange(R)[:, None] * C + np.arange(C)[None, :]).astype(dtype), shape)
    if kind == "transposed tile":
        return np.broadcast_to((np.arange(C)[None, :] * R + np.arange(R)[:, None]).astype(dtype), shape)
    if kind == "a column, repeated":
        return np.broadcast_to((np.arange(R)[:, None] * 3).astype(dtype), shape)
    if kind == "negative":
        return (np.arange(P * R * C).reshape(shape) - 5).astype(dtype)
    if kind == "into the next slot":  # 2**38 elements of 4 bytes: a whole slot further
        return (np.arange(P * R * C).reshape(shape) + (1 << 38) * (rng.random(shape) < 0.3)).astype(dtype)
    return rng.integers(-8 if np.issubdtype(dtype, np.signedinteger) else 0, 400, size=shape).astype(dtype)


_BASES = ["one pointer, broadcast", "one pointer, splat", "one per program", "one per program, shuffled",
          "one per row", "every lane"]
_OFFSETS = ["consecutive", "a row, repeated", "rows of a tile", "transposed tile", "a column, repeated",
            "negative", "into the next slot", "random"]


@settings(max_examples=500, deadline=None)
@given(st.sampled_from(_BASES), st.sampled_from(_OFFSETS), st.sampled_from([np.int32, np.int64, np.uint32, np.uint64]),
       st.tuples(st.integers(1, 5), st.integers(1, 10), st.integers(1, 9)),
       st.sampled_from(["none", "all", "some", "none active", "some programs"]), st.sampled_from([1, 2, 4, 8]),
       st.integers(0, 2 ** 32 - 1))
def test_resolve_sum_matches_resolving_the_addresses(base_kind, off_kind, dtype, shape, mask_kind, size, seed):
    rng = np.random.default_rng(seed)
    if off_kind in ("negative", "into the next slot") and dtype in (np.uint32, np.uint64):
        dtype = np.int64
    a, b = torch.zeros(4096), torch.zeros(64)
    space, (ra, rb) = _space(a, b)
    base = _base(base_kind, ra.vaddr + 64, shape, rng)
    offsets = _offsets(off_kind, shape, dtype, rng)
    mask = {"none": None, "all": np.ones(shape, dtype=bool), "some": rng.random(shape) < 0.6,
            "none active": np.zeros(shape[1:], dtype=bool),  # a divergent loop's active programs:
            "some programs": np.broadcast_to((rng.random(shape[0]) < 0.5)[:, None, None], shape)}[mask_kind]
    full = np.broadcast_shapes(base.shape, offsets.shape)
    offsets = np.broadcast_to(offsets, full)

    want = space.resolve(make_addresses(base, offsets, size), mask)
    got = space.resolve_sum(base, offsets, size, mask)
    if got is None:  # allowed only where lanes may leave the base's slot (the caller then makes the addresses)
        assert off_kind == "into the next slot"
        return
    assert got.n == want.n
    if got.aligned:  # known from the bases: every lane's offset is a multiple of the element size
        assert not (want.off % size).any()
    idx = got.element_index(size)
    if idx is not None:  # made from the operands, without the byte offsets
        np.testing.assert_array_equal(idx, want.off // size)
    rows = got.rows(size)
    if rows is not None:  # rows of consecutive elements, by their first
        starts, length = rows
        np.testing.assert_array_equal((starts[:, None] + np.arange(length)).reshape(-1), want.off // size)
    cols = got.cols(size)
    if cols is not None:  # columns of consecutive elements (a tile loaded transposed), by their first
        starts, length, width = cols
        assert rows is None and length == full[-2] and width == full[-1]
        lanes = starts.reshape(-1, 1, width) + np.arange(length)[None, :, None]
        np.testing.assert_array_equal(lanes.reshape(-1), want.off // size)
    np.testing.assert_array_equal(got.lanes, want.lanes)
    if got.programs is not None:  # every lane of some programs (a divergent loop's active ones)
        programs, per = got.programs
        np.testing.assert_array_equal((programs[:, None] * per + np.arange(per)).reshape(-1), want.lanes)
    assert got.single_slot == want.single_slot
    np.testing.assert_array_equal(got.off, want.off)
    if got.n:
        assert (got.lo, got.hi) == (int(want.off.min()), int(want.off.max()))
    for s in (1, 2, 4, 8):
        assert got.contiguous(s) == want.contiguous(s), s


def test_a_consecutive_block_is_resolved_without_its_offsets():
    """Consecutive lanes from one pointer: ends and contiguity from the operands; the per-lane
    offsets are made only when asked for."""
    a = torch.zeros(1 << 12)
    space, (ra,) = _space(a)
    offsets = np.arange(8 * 256, dtype=np.int32).reshape(8, 256)
    res = space.resolve_sum(np.full(256, ra.vaddr, dtype=np.uint64), offsets, 4, None)
    assert res._off is not None and not isinstance(res._off, np.ndarray)  # not made yet
    assert (res.lo, res.hi, res.contiguous(4)) == (0, 4 * (8 * 256 - 1), True)
    assert not isinstance(res._off, np.ndarray)
    np.testing.assert_array_equal(res.off, offsets.reshape(-1).astype(np.int64) * 4)


def test_a_checked_vector_add_makes_no_addresses(monkeypatch):
    """A kernel's loads and stores of ``ptr + offs`` resolve their operands: the uint64 addresses of
    its blocks are never made, and its result and findings are as before."""
    import triton
    import triton.language as tl

    import tritonkit

    @triton.jit
    def add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.load(x_ptr + offs) + tl.load(y_ptr + offs, mask=offs < n), mask=offs < n)

    made = []
    real = addresses.make_addresses
    monkeypatch.setattr(addresses, "make_addresses", lambda *a: made.append(a[1].shape) or real(*a))
    x, y = torch.randn(16000), torch.randn(16000)
    out = torch.empty_like(x)
    with tritonkit.checking() as session:  # batches of more than 1024 lanes (smaller ones are watched for polls)
        add[(16,)](x, y, out, 16000, BLOCK=1024)
    torch.testing.assert_close(out, x + y)
    assert made == []
    # the unmasked load of x runs past its end in the last program: reported, as before
    (f,) = [f for f in session.findings if f.kind == "out_of_bounds"]
    assert f.arg == "x_ptr" and f.count == 384


@pytest.mark.parametrize("engine", ["auto", "sequential"])
def test_pointer_blocks_read_as_data_are_made(engine):
    """A pointer block something else reads (``tl.where`` over pointers) gets the addresses Triton's
    interpreter makes."""
    import triton
    import triton.language as tl

    import tritonkit

    @triton.jit
    def pick(x_ptr, y_ptr, out_ptr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        p = tl.where(offs % 2 == 0, x_ptr + offs, y_ptr + offs)
        tl.store(out_ptr + offs, tl.load(p))

    x, y = torch.randn(1024), torch.randn(1024)
    out = torch.empty_like(x)
    with tritonkit.checking(engine=engine) as session:
        pick[(4,)](x, y, out, BLOCK=256)
    assert not session.findings
    want = torch.where(torch.arange(1024) % 2 == 0, x, y)
    torch.testing.assert_close(out, want)


@pytest.mark.parametrize("stride", [16, 40, 8])  # rows as wide as the tensor's, apart, overlapping
def test_a_tile_store_writes_and_undoes_whole_rows(stride):
    """A store of tile rows (``base + rows[:, None] * stride + cols[None, :]``) is written row by row
    through a view of the storage: the storage then holds what a store lane by lane leaves (later
    lanes win where rows overlap), and the transaction's journal puts the old values back."""
    a = torch.arange(4096, dtype=torch.float32)
    space, (ra,) = _space(a)
    P, R, C = 3, 4, 16
    offsets = np.broadcast_to((np.arange(R)[:, None] * stride + np.arange(C)[None, :]).astype(np.int32), (P, R, C))
    base = np.broadcast_to((ra.vaddr + 4 * 200 * np.arange(P, dtype=np.uint64))[:, None, None], (P, R, C))
    res = space.resolve_sum(base, offsets, 4, None)
    assert res.rows(4) is not None
    values = np.random.default_rng(0).standard_normal(P * R * C).astype(np.float32)
    want = a.numpy().copy()
    for off, v in zip(make_addresses(base, offsets, 4).reshape(-1) - np.uint64(ra.vaddr), values):
        want[int(off) // 4] = v
    before = a.numpy().copy()
    space.journal = undo = []
    space.scatter(res, values)
    np.testing.assert_array_equal(a.numpy(), want)
    assert [w.length for w in undo] == [C]  # one journal entry, by rows
    copy = a.numpy().copy().view(np.uint8)  # (a settling batch puts the old values into a copy)
    undo[0].undo_into(copy)
    np.testing.assert_array_equal(copy.view(np.float32), before)
    undo.pop()()
    np.testing.assert_array_equal(a.numpy(), before)


@pytest.mark.parametrize("engine", ["auto", "sequential"])
def test_a_tile_loaded_transposed_is_gathered_by_its_columns(engine):
    """``x + cols[None, :] * R + rows[:, None]`` (a K^T tile: each column is R consecutive elements)
    loads the transposed tile, as Triton's interpreter does, and reports a column past the end."""
    import triton
    import triton.language as tl

    import tritonkit

    @triton.jit
    def load_t(x_ptr, out_ptr, R: tl.constexpr, C: tl.constexpr):
        rows = tl.arange(0, R)[:, None]
        cols = tl.program_id(0) * C + tl.arange(0, C)[None, :]
        tl.store(out_ptr + tl.program_id(0) * R * C + rows * C + tl.arange(0, C)[None, :],
                 tl.load(x_ptr + cols * R + rows))

    x = torch.randn(3 * 16, 32)  # 48 columns of 32 of x^T; 4 programs of 16 columns read 64: one past
    out = torch.zeros(4, 32, 16)
    with tritonkit.checking(engine=engine) as session:
        load_t[(4,)](x, out, 32, 16)
    torch.testing.assert_close(out[:3], x.reshape(3, 16, 32).transpose(1, 2))
    (f,) = [f for f in session.findings if f.kind == "out_of_bounds"]
    assert f.arg == "x_ptr" and f.program_ids == [[3]] and f.count == 16 * 32


@pytest.mark.parametrize("engine", ["auto", "sequential"])
def test_tiles_loaded_in_a_loop_whose_trip_count_differs_between_programs(engine):
    """Program i sums tiles 0..i of x (rows) and of x transposed (columns): in the batched engine the
    later iterations run with some programs inactive, whose lanes are left out by program."""
    import triton
    import triton.language as tl

    import tritonkit

    @triton.jit
    def prefix_tiles(x_ptr, out_ptr, R: tl.constexpr, C: tl.constexpr):
        pid = tl.program_id(0)
        rows = tl.arange(0, R)[:, None]
        cols = tl.arange(0, C)[None, :]
        acc = tl.zeros((R, C), dtype=tl.float32)
        for t in range(0, pid + 1):
            acc += tl.load(x_ptr + t * R * C + rows * C + cols)  # rows of C consecutive elements
            acc += tl.load(x_ptr + t * R * C + cols * R + rows)  # columns of R consecutive elements
        tl.store(out_ptr + pid * R * C + rows * C + cols, acc)

    R, C, P = 16, 16, 6
    x = torch.randn(P, R * C)
    out = torch.zeros(P, R, C)
    with tritonkit.checking(engine=engine) as session:
        prefix_tiles[(P,)](x, out, R, C)
    assert session.findings == []
    tiles = x.reshape(P, R, C) + x.reshape(P, C, R).transpose(1, 2)
    torch.testing.assert_close(out, torch.cumsum(tiles, dim=0), rtol=1e-5, atol=1e-5)
