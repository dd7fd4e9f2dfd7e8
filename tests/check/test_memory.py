"""The virtual address space: which bytes belong to a view, and coordinates of offsets."""
import numpy as np
import pytest
import torch

from tritonkit.check.memory import AddressSpace, HostStorage, Layout, slot_base


def _layout(t: torch.Tensor) -> Layout:
    return Layout(t.storage_offset() * t.element_size(), t.element_size(), t.shape, t.stride())


def _all_offsets(t: torch.Tensor) -> set:
    """Byte offsets of every element of view ``t`` from its storage's start (the oracle)."""
    idx = torch.arange(t.untyped_storage().nbytes() // t.element_size()).as_strided(
        t.shape, t.stride(), t.storage_offset())
    return set((idx.reshape(-1) * t.element_size()).tolist())


@pytest.mark.parametrize("make", [
    lambda: torch.zeros(7, 5),
    lambda: torch.zeros(8, 20)[:, :13],
    lambda: torch.zeros(8, 20)[2:5, 3:17],
    lambda: torch.zeros(6, 4).t(),
    lambda: torch.zeros(4, 6, 5)[:, ::2, 1:4],
    lambda: torch.zeros(3, 1).expand(3, 4),
    lambda: torch.zeros(10)[3:],
    lambda: torch.zeros(2, 3, dtype=torch.float16)[:, 1:],
], ids=["dense", "cols", "block", "transposed", "3d-strided", "expanded", "offset", "fp16"])
def test_layout_valid_matches_every_element(make):
    t = make()
    layout = _layout(t)
    nbytes = t.untyped_storage().nbytes()
    size = t.element_size()
    offs = np.arange(-4 * size, nbytes + 4 * size, size, dtype=np.int64)  # aligned accesses: alignment is BoundsCheck's
    got = layout.valid(offs, t.element_size())
    want = np.array([o in _all_offsets(t) for o in offs.tolist()])
    np.testing.assert_array_equal(got, want)


def test_layout_coords_past_end_and_before_start():
    t = torch.zeros(4, 10)[:, :6]  # strides (10, 1)
    layout = _layout(t)
    offs = np.array([0, 4 * (1 * 10 + 5), 4 * (3 * 10 + 8), 4 * (5 * 10 + 2), -4], dtype=np.int64)
    np.testing.assert_array_equal(layout.coords(offs), [[0, 0], [1, 5], [3, 8], [5, 2], [-1, 9]])


def test_empty_view_has_no_valid_bytes():
    t = torch.zeros(0, 5)
    assert not _layout(t).valid(np.arange(0, 64, dtype=np.int64), 4).any()


def _space_with(*tensors):
    space = AddressSpace()
    regions = []
    for i, t in enumerate(tensors):
        st = t.untyped_storage()
        buf = torch.empty(0, dtype=torch.uint8).set_(st, 0, (st.nbytes(),), (1,)).numpy()
        key = ("cpu", st.data_ptr())
        hs = space.storages.setdefault(key, HostStorage(buf=buf))
        regions.append(space.add(f"a{i}", hs, t.storage_offset() * t.element_size(), t.element_size(),
                                 t.shape, t.stride(), str(t.dtype)))
    return space, regions


def test_resolve_gives_each_address_its_argument():
    a, b = torch.zeros(10), torch.zeros(3)
    space, (ra, rb) = _space_with(a, b)
    addrs = np.array([ra.vaddr, ra.vaddr + 36, ra.vaddr + 40, rb.vaddr - 4, rb.vaddr + 8], dtype=np.uint64)
    res = space.resolve(addrs, None)
    np.testing.assert_array_equal(res.slot, [1, 1, 1, 2, 2])
    np.testing.assert_array_equal(res.off, [0, 36, 40, -4, 8])
    np.testing.assert_array_equal(space.in_view(res, 4), [True, True, False, False, True])


@pytest.mark.parametrize("pattern", ["consecutive", "every other", "consecutive rows of a tile", "backwards",
                                     "one lane", "unaligned start"])
def test_resolve_finds_the_ends_and_contiguity_of_evenly_spaced_lanes(pattern):
    """Evenly spaced lanes take their ends from the first and last lane (no pass for min and max) and
    know they are contiguous: both as the definition says, whatever the pattern."""
    a = torch.zeros(1 << 13)
    space, (ra,) = _space_with(a)
    elems = {"consecutive": np.arange(3000), "every other": np.arange(0, 6000, 2),
             "consecutive rows of a tile": (np.arange(40)[:, None] * 128 + np.arange(64)[None, :]).reshape(-1),
             "backwards": np.arange(3000)[::-1], "one lane": np.array([7]), "unaligned start": np.arange(3000)}[pattern]
    off = elems.astype(np.int64) * 4 + (2 if pattern == "unaligned start" else 0)
    res = space.resolve((ra.vaddr + off).astype(np.uint64), None)
    np.testing.assert_array_equal(res.off, off)
    assert (res.lo, res.hi) == (int(off.min()), int(off.max()))
    for size in (2, 4, 8):
        want = bool(off[0] % size == 0 and (off.shape[0] < 2 or (np.diff(off) == size).all()))
        assert res.contiguous(size) == want, size


def test_aliasing_views_share_bytes_and_validity():
    base = torch.arange(12, dtype=torch.float32)
    whole, tail = base, base[6:]
    space, (rw, rt) = _space_with(whole, tail)
    # an address derived from `tail` that reaches before its start lands in `whole`: allowed
    res = space.resolve(np.array([rt.vaddr - 8], dtype=np.uint64), None)
    assert space.in_view(res, 4).all()
    # a store through `tail` is seen through `whole`
    res = space.resolve(np.array([rt.vaddr], dtype=np.uint64), None)
    space.scatter(res, np.array([42.0], dtype=np.float32))
    assert base[6].item() == 42.0


def test_masked_lanes_are_not_resolved():
    a = torch.zeros(4)
    space, (ra,) = _space_with(a)
    addrs = np.array([ra.vaddr, 0, 12345], dtype=np.uint64)
    res = space.resolve(addrs, np.array([True, False, False]))
    np.testing.assert_array_equal(res.lanes, [0])


def test_read_modify_write_applies_duplicates_in_lane_order():
    cnt = torch.zeros(3, dtype=torch.int32)
    space, (r,) = _space_with(cnt)
    addrs = np.array([r.vaddr + 4, r.vaddr + 4, r.vaddr, r.vaddr + 4], dtype=np.uint64)
    res = space.resolve(addrs, None)
    vals = np.array([1, 2, 3, 4], dtype=np.int32)
    olds = space.read_modify_write(res, np.dtype(np.int32), lambda old, pos: old + vals[pos])
    assert cnt.tolist() == [3, 7, 0]
    np.testing.assert_array_equal(olds, [0, 1, 0, 3])


def test_slot_base_leaves_room_on_both_sides():
    assert slot_base(2) - slot_base(1) == 1 << 40
    assert slot_base(1) - (1 << 40) == 1 << 39
