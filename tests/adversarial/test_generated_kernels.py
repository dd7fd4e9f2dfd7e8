"""Generated kernels (hypothesis): random shapes, strides (transposed and sliced views), block
sizes, masks and offsets, each run by both engines (one program at a time, and batched) and
compared with PyTorch and with each other: outputs bit for bit, findings field for field, and the
out-of-bounds elements a bug makes counted exactly where they can be predicted.

Each example is a whole ``checking()`` session per engine, so the example counts are kept small
enough for the 2-core CI machine."""
import numpy as np
import pytest
import torch
import triton
import triton.language as tl
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from tritonkit.check import checking

_SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@triton.jit
def scale_rows(x_ptr, out_ptr, n_rows, n_cols, sxr, sxc, sor, soc, EXTRA, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = (cols < n_cols + EXTRA) & (row < n_rows)
    x = tl.load(x_ptr + row * sxr + cols * sxc, mask=m, other=0.0)
    tl.store(out_ptr + row * sor + cols * soc, x * 2.0 + 1.0, mask=m)


@triton.jit
def gather(src_ptr, idx_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    i = tl.load(idx_ptr + offs, mask=m, other=0)
    tl.store(out_ptr + offs, tl.load(src_ptr + i, mask=m, other=-1.0), mask=m)


@triton.jit
def store_ranges(out_ptr, start_ptr, len_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    start = tl.load(start_ptr + pid)
    length = tl.load(len_ptr + pid)
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + start + offs, (pid + 1).to(tl.float32) + offs * 0.0, mask=offs < length)


@triton.jit
def row_sums(x_ptr, out_ptr, n_cols, sxr, sxc, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], tl.float32)
    for c0 in range(0, n_cols, BLOCK):
        cols = c0 + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * sxr + cols * sxc, mask=cols < n_cols, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0))


def _both(fn):
    """``fn()`` under each engine: (output, findings as dicts, records) per engine."""
    out = {}
    for engine in ("sequential", "auto"):
        with checking(engine=engine) as session:
            result = fn()
        out[engine] = (result, [f.to_dict() for f in session.findings], session.launches)
    return out["sequential"], out["auto"]


_shapes = st.tuples(st.integers(1, 40), st.integers(1, 300))
_blocks = st.sampled_from([16, 32, 64, 128])


def _view(rows, cols, transpose, step, seed):
    """An fp32 (rows, cols) tensor: contiguous, transposed or a sliced view of a larger one."""
    g = torch.Generator().manual_seed(seed)
    if transpose:
        return torch.randn(cols, rows, generator=g).t()
    if step > 1:
        return torch.randn(rows, cols * step, generator=g)[:, ::step]
    return torch.randn(rows, cols, generator=g)


@_SETTINGS
@given(_shapes, _blocks, st.booleans(), st.integers(1, 3), st.integers(0, 2 ** 16))
def test_strided_views_match_torch_and_the_engines_agree(shape, block, transpose, step, seed):
    rows, cols = shape
    x = _view(rows, cols, transpose, step, seed)

    def go():
        out = torch.empty(rows, cols).t().contiguous().t() if transpose else torch.empty(rows, cols)
        scale_rows[(rows, triton.cdiv(cols, block))](x, out, rows, cols, x.stride(0), x.stride(1),
                                                     out.stride(0), out.stride(1), 0, BLOCK=block)
        return out
    seq, bat = _both(go)
    assert seq[1] == bat[1] == []
    assert torch.equal(seq[0], bat[0])
    assert torch.equal(bat[0], x * 2.0 + 1.0)


@_SETTINGS
@given(_shapes, _blocks, st.integers(1, 200), st.integers(0, 2 ** 16))
def test_reading_past_the_row_end_is_found_by_both_engines_alike(shape, block, extra, seed):
    """``cols < n_cols + EXTRA`` on contiguous tensors: lanes past a row's end read and write the
    next row (in bounds, as on a GPU) until they leave the tensor; the lanes each engine reports are
    the same, and their number is counted exactly."""
    rows, cols = shape
    x = _view(rows, cols, False, 1, seed)
    reach = min(cols + extra, triton.cdiv(cols, block) * block)  # lanes a row's programs keep
    flat = (np.arange(rows)[:, None] * cols + np.arange(reach)[None, :]).reshape(-1)
    past = flat[flat >= rows * cols]
    assume(past.size > 0)

    def go():
        out = torch.zeros(rows, cols)
        scale_rows[(rows, triton.cdiv(cols, block))](x, out, rows, cols, x.stride(0), x.stride(1),
                                                     out.stride(0), out.stride(1), extra, BLOCK=block)
        return out
    seq, bat = _both(go)
    assert seq[1] == bat[1]
    assert torch.equal(seq[0], bat[0])
    oob = {f["arg"]: f for f in bat[1] if f["kind"] == "out_of_bounds"}
    assert set(oob) == {"x_ptr", "out_ptr"}
    for f in oob.values():
        assert f["count"] == past.size and f["reason"] == "past_end"
        assert f["num_elements"] == np.unique(past).size
    # a lane that strays into the next row stores that row's own value: the output is still exact
    assert torch.equal(bat[0], x * 2.0 + 1.0)


@_SETTINGS
@given(st.integers(1, 400), st.integers(1, 500), _blocks, st.lists(st.integers(-50, 600), min_size=1, max_size=400),
       st.integers(0, 2 ** 16))
def test_gathers_with_random_indices_report_exactly_the_indices_outside(n_src, n, block, picks, seed):
    g = torch.Generator().manual_seed(seed)
    src = torch.randn(n_src, generator=g)
    idx = torch.tensor((picks * (n // len(picks) + 1))[:n], dtype=torch.int64)
    bad = (idx < 0) | (idx >= n_src)

    def go():
        out = torch.empty(n)
        gather[(triton.cdiv(n, block),)](src, idx, out, n, BLOCK=block)
        return out
    seq, bat = _both(go)
    assert seq[1] == bat[1]
    assert torch.equal(seq[0], bat[0])
    good = ~bad
    assert torch.equal(bat[0][good], src[idx[good]])
    assert torch.equal(bat[0][bad], torch.full((int(bad.sum()),), -1.0))  # an offending load yields `other`
    found = [f for f in bat[1] if f["kind"] == "out_of_bounds"]
    if bad.any():
        (f,) = found
        assert f["arg"] == "src_ptr" and f["count"] == int(bad.sum())
        assert f["num_elements"] == len(set(idx[bad].tolist()))
    else:
        assert found == []


@_SETTINGS
@given(st.lists(st.tuples(st.integers(0, 300), st.integers(0, 64)), min_size=1, max_size=24))
def test_programs_storing_ranges_race_exactly_when_the_ranges_overlap(ranges):
    """Each program stores its own range of one output (a table of starts and lengths): the batched
    engine keeps such stores as runs; it must fall back and report the race exactly when two
    programs' ranges overlap, and otherwise run batched with the same output."""
    starts = torch.tensor([s for s, _ in ranges], dtype=torch.int32)
    lengths = torch.tensor([n for _, n in ranges], dtype=torch.int32)
    owner = {}
    overlap = False
    for p, (s, n) in enumerate(ranges):
        for c in range(s, s + n):
            overlap |= owner.setdefault(c, p) != p

    def go():
        out = torch.zeros(400)
        store_ranges[(len(ranges),)](out, starts, lengths, BLOCK=64)
        return out
    seq, bat = _both(go)
    assert seq[1] == bat[1]
    assert torch.equal(seq[0], bat[0])
    races = [f for f in bat[1] if f["kind"] == "data_race"]
    assert bool(races) == overlap
    if not overlap:
        assert bat[2][0].engine == "batched"
        expect = torch.zeros(400)
        for p, (s, n) in enumerate(ranges):
            expect[s:s + n] = p + 1
        assert torch.equal(bat[0], expect)


@_SETTINGS
@given(_shapes, _blocks, st.booleans(), st.integers(1, 3), st.integers(0, 2 ** 16))
def test_row_sums_over_strided_views_match_torch_and_the_engines_agree(shape, block, transpose, step, seed):
    rows, cols = shape
    x = _view(rows, cols, transpose, step, seed)

    def go():
        out = torch.empty(rows)
        row_sums[(rows,)](x, out, cols, x.stride(0), x.stride(1), BLOCK=block)
        return out
    seq, bat = _both(go)
    assert seq[1] == bat[1] == []
    assert torch.equal(seq[0], bat[0])
    np.testing.assert_allclose(bat[0].numpy(), x.sum(1).numpy(), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.int32, torch.int64])
@pytest.mark.parametrize("n", [1, 17, 1000])
def test_every_dtype_and_odd_size_is_copied_exactly(dtype, n):
    """Fixed cases beside the generated ones: each dtype through ``scale_rows``-like copying."""
    x = (torch.arange(n) % 97 - 40).to(dtype)

    def go():
        out = torch.empty(n, dtype=dtype)
        copy_any[(triton.cdiv(n, 64),)](x, out, n, BLOCK=64)
        return out
    seq, bat = _both(go)
    assert seq[1] == bat[1] == []
    assert torch.equal(seq[0], bat[0]) and torch.equal(bat[0], x)


@triton.jit
def copy_any(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m), mask=m)
