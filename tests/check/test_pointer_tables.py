"""Pointer tables: ``t.data_ptr()`` values gathered into an int64 tensor, loaded by the kernel and
cast to pointers (grouped GEMMs, MoE kernels). Each raw address resolves to the live tensor it
points into, is checked against that tensor's bounds and is performed, as on the GPU; only an
address inside no live tensor is an out-of-bounds finding (``no_argument``), and it is not performed.
(Before, every table access was a false ``no_argument`` finding and was dropped: Triton's
grouped-GEMM tutorial never wrote its output under check.)"""
import pytest
import torch
import triton
import triton.language as tl

from tritonkit.check import checking


@triton.jit
def scale_each(table_ptr, sizes_ptr, BLOCK: tl.constexpr, EXTRA: tl.constexpr):
    pid = tl.program_id(0)
    ptr = tl.load(table_ptr + pid).to(tl.pointer_type(tl.float32))
    n = tl.load(sizes_ptr + pid)
    offs = tl.arange(0, BLOCK)
    m = offs < n + EXTRA
    x = tl.load(ptr + offs, mask=m)
    tl.store(ptr + offs, x * 2, mask=m)


@triton.jit
def copy_through_table(table_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    src = tl.load(table_ptr + pid).to(tl.pointer_type(tl.float32))
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + pid * BLOCK + offs, tl.load(src + offs, mask=offs < n, other=-1.0))


def _run(engine, extra):
    ts = [torch.arange(5, dtype=torch.float32), torch.ones(3), torch.full((7,), 3.0)]
    table = torch.tensor([t.data_ptr() for t in ts], dtype=torch.int64)
    sizes = torch.tensor([t.numel() for t in ts], dtype=torch.int32)
    with checking(engine=engine) as session:
        scale_each[(3,)](table, sizes, BLOCK=8, EXTRA=extra)
    return ts, [f.to_dict() for f in session.findings]


@pytest.mark.parametrize("engine", ["auto", "sequential"])
def test_a_table_of_data_ptrs_is_resolved_to_its_tensors_and_performed(engine):
    ts, found = _run(engine, 0)
    assert found == []
    assert [t.tolist() for t in ts] == [[0.0, 2.0, 4.0, 6.0, 8.0], [2.0] * 3, [6.0] * 7]


@pytest.mark.parametrize("engine", ["auto", "sequential"])
def test_an_address_past_a_tables_tensor_is_a_finding_and_the_rest_is_performed(engine):
    """One lane past the end of each tensor: into no live tensor (each has its own allocation); it
    belongs to the nearest tensor its access reached, and is reported past that tensor's end."""
    ts, found = _run(engine, 1)
    assert [t.tolist() for t in ts] == [[0.0, 2.0, 4.0, 6.0, 8.0], [2.0] * 3, [6.0] * 7]
    assert sorted((f["kind"], f["access"], f["reason"], f["count"]) for f in found) == \
        [("out_of_bounds", "load", "past_end", 1)] * 3 + [("out_of_bounds", "store", "past_end", 1)] * 3
    names = {f"tensor at {t.data_ptr():#x}" for t in ts}
    assert {f["arg"] for f in found} == names
    assert sorted(f["element_indices"][0][0] for f in found if f["access"] == "load") == [3, 5, 7]


@triton.jit
def load_from_nowhere(table_ptr, out_ptr, BLOCK: tl.constexpr):
    ptr = tl.load(table_ptr).to(tl.pointer_type(tl.float32))
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(ptr + offs))


def test_an_address_in_no_live_tensor_is_no_argument_and_not_performed():
    """A table entry that points into no tensor (a made-up address): every lane is outside every
    tensor, nothing is read, and the finding says so."""
    table = torch.tensor([0x10_0000_0000], dtype=torch.int64)  # nothing of this process lives there
    out = torch.full((8,), 5.0)
    with checking() as session:
        load_from_nowhere[(1,)](table, out, BLOCK=8)
    (f,) = [f.to_dict() for f in session.findings]
    assert (f["kind"], f["reason"], f["count"], f["arg"]) == ("out_of_bounds", "no_argument", 8, None)
    assert (out == 0.0).all()  # the load yields 0 where it is not performed


def test_rows_of_one_tensor_through_a_table_are_checked_against_the_whole_tensor():
    """A table of row pointers: a row read past its end stays inside the tensor's allocation (the
    next row), as on the GPU, where nothing is out of bounds; reads past the last row are."""
    x = torch.arange(4 * 8, dtype=torch.float32).reshape(4, 8)
    rows = [x[i] for i in range(4)]
    table = torch.tensor([r.data_ptr() for r in rows], dtype=torch.int64)
    out = torch.empty(4 * 16)
    with checking() as session:
        copy_through_table[(4,)](table, out, 12, BLOCK=16)
    found = [f.to_dict() for f in session.findings]
    flat = x.reshape(-1)
    for i in range(4):
        got = out[i * 16:(i + 1) * 16]
        avail = min(12, 32 - i * 8)  # elements of x left from row i on
        assert torch.equal(got[:avail], flat[i * 8:i * 8 + avail])
        assert (got[12:] == -1.0).all()
    oob = [f for f in found if f["kind"] == "out_of_bounds"]
    assert len(oob) == 1 and oob[0]["count"] == 4  # the last row's 4 lanes past the tensor's end
    assert oob[0]["program_ids"] == [[3]]


def test_a_pointer_table_is_resolved_under_the_command_line_too(tmp_path):
    import subprocess
    import sys
    import textwrap
    script = tmp_path / "table.py"
    script.write_text(textwrap.dedent('''
        import torch, triton, triton.language as tl

        @triton.jit
        def scale_each(table_ptr, n, BLOCK: tl.constexpr):
            ptr = tl.load(table_ptr + tl.program_id(0)).to(tl.pointer_type(tl.float32))
            offs = tl.arange(0, BLOCK)
            tl.store(ptr + offs, tl.load(ptr + offs, mask=offs < n) * 2, mask=offs < n)

        ts = [torch.ones(4), torch.full((4,), 2.0)]
        table = torch.tensor([t.data_ptr() for t in ts], dtype=torch.int64)
        scale_each[(2,)](table, 4, BLOCK=4)
        print("RESULT", [t.tolist() for t in ts])
    '''))
    proc = subprocess.run([sys.executable, "-m", "tritonkit", "check", "--", sys.executable, str(script)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "RESULT [[2.0, 2.0, 2.0, 2.0], [4.0, 4.0, 4.0, 4.0]]" in proc.stdout
    assert "no findings" in proc.stdout


@triton.autotune(configs=[triton.Config({"BM": bm, "BN": bn, "BK": 16, "PROGS": p})
                          for bm, bn in ((32, 32), (16, 16), (16, 32)) for p in (3, 5)], key=["groups"])
@triton.jit
def grouped_mm(a_table, b_table, c_table, dims, groups, PROGS: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
               BK: tl.constexpr):
    """A grouped GEMM scheduled on a fixed number of programs, each walking the tiles of every
    problem; the matrices come from pointer tables (as in Triton's grouped-GEMM tutorial)."""
    tile = tl.program_id(0)
    start = 0
    for g in range(groups):
        m = tl.load(dims + 3 * g)
        n = tl.load(dims + 3 * g + 1)
        k = tl.load(dims + 3 * g + 2)
        tiles = tl.cdiv(m, BM) * tl.cdiv(n, BN)
        while tile >= start and tile < start + tiles:
            a = tl.load(a_table + g).to(tl.pointer_type(tl.float16))
            b = tl.load(b_table + g).to(tl.pointer_type(tl.float16))
            c = tl.load(c_table + g).to(tl.pointer_type(tl.float16))
            t = tile - start
            rm = (t // tl.cdiv(n, BN)) * BM + tl.arange(0, BM)
            rn = (t % tl.cdiv(n, BN)) * BN + tl.arange(0, BN)
            rk = tl.arange(0, BK)
            acc = tl.zeros((BM, BN), tl.float32)
            for k0 in range(0, k, BK):
                x = tl.load(a + rm[:, None] * k + (k0 + rk)[None, :])
                y = tl.load(b + (k0 + rk)[:, None] * n + rn[None, :])
                acc += tl.dot(x, y)
            tl.store(c + rm[:, None] * n + rn[None, :], acc.to(tl.float16))
            tile += PROGS
        start += tiles


@pytest.mark.parametrize("ragged", [False, True])
def test_a_grouped_gemm_through_pointer_tables_is_computed_under_every_config(ragged):
    """Whole tiles (every size a multiple of every config's tiles): no finding under any of the 6
    configs and the kept config's outputs are the matrix products. A ragged problem (n = 40, not a
    multiple of 32) read and written as whole tiles: the overrun of B and C is found, past their
    ends, under the configs whose tile does not divide it."""
    sizes = [(64, 64, 32), (32, 96 if not ragged else 40, 16), (32, 32, 48)]
    g = torch.Generator().manual_seed(0)
    A = [torch.rand(m, k, generator=g).half() for m, n, k in sizes]
    B = [torch.rand(k, n, generator=g).half() for m, n, k in sizes]
    C = [torch.empty(m, n, dtype=torch.float16) for m, n, k in sizes]
    dims = torch.tensor([d for s in sizes for d in s], dtype=torch.int32)

    def table(ts):
        return torch.tensor([t.data_ptr() for t in ts], dtype=torch.int64)
    with checking() as session:
        grouped_mm[lambda meta: (meta["PROGS"],)](table(A), table(B), table(C), dims, len(sizes))
    found = [f.to_dict() for f in session.findings]
    if not ragged:
        assert found == []
        for a, b, c in zip(A, B, C):
            torch.testing.assert_close(c.float(), a.float() @ b.float(), atol=2e-2, rtol=1e-2)
        return
    oob = [f for f in found if f["kind"] == "out_of_bounds"]
    assert oob and {f["reason"] for f in oob} == {"past_end"}
    assert {f["arg"] for f in oob} <= {f"tensor at {t.data_ptr():#x}" for t in (B[1], C[1])}
    assert all(any("BN=32" in c for c in f["configs"]) for f in oob)


def test_a_table_tensor_that_is_also_an_argument_is_named_with_its_own_dtype():
    """The table points into a tensor that is also passed as an argument: tritonkit's own byte view
    of that storage (uint8) is never taken for the table's tensor; an overrun is counted in the
    tensor's own elements (float32)."""
    x = torch.arange(6, dtype=torch.float32)
    table = torch.tensor([x.data_ptr()], dtype=torch.int64)
    out = torch.empty(8)
    with checking() as session:
        copy_with_arg[(1,)](table, x, out, BLOCK=8)
    (f,) = [f.to_dict() for f in session.findings if f.kind == "out_of_bounds"]
    assert f["tensor"]["dtype"] == "float32" and f["tensor"]["shape"] == [6]
    assert f["count"] == 2 and f["reason"] == "past_end"


@triton.jit
def copy_with_arg(table_ptr, x_ptr, out_ptr, BLOCK: tl.constexpr):
    src = tl.load(table_ptr).to(tl.pointer_type(tl.float32))
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(src + offs) + tl.load(x_ptr))
