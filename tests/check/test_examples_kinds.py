"""The examples of the value and ordering checks: data races, uninitialized reads, integer overflow and NaN/Inf origins are
reported on the marked lines with the programs and elements the kernels' addressing implies; the
correct versions give nothing, with every check on (``nan=True``), in every dtype."""
import os

import pytest
import torch

import tritonkit

import embedding as em
import grad_accumulate as ga
import histogram as hg
import row_sum as rs
import softmax as sm
import split_k_matmul as sk


def checked(fn, *args, **kwargs):
    with tritonkit.checking(nan=True) as session:
        result = fn(*args, **kwargs)
    return result, session


def only(session, kind):
    found = [f for f in session.findings if f.kind == kind]
    assert len(found) == len(session.findings), [(f.kind, f.message) for f in session.findings]
    return found


@pytest.fixture
def placed(marked_lines):
    """``placed(f, module, bug)``: ``f`` is in ``module``'s file on a line marked ``# REPORTED: bug``."""
    def on_marked_line(f, module, bug):
        assert os.path.samefile(f.file, module.__file__)
        return f.line in marked_lines(module, "REPORTED", bug)
    return on_marked_line


# --- data races -------------------------------------------------------------------------------------
def test_row_sum_on_a_grid_larger_than_the_data_races_on_every_row(placed, randn):
    x = randn(5, 300)
    out, s = checked(rs.row_sum, x, bug="grid_too_large")  # grid (5, cdiv(300, 128)) = (5, 3)
    (f,) = only(s, "data_race")
    assert placed(f, rs, "grid_too_large") and f.reason == "write_write" and f.arg == "Out_ptr"
    # program (r, 1) and (r, 2) store out[r] after (r, 0) and (r, 1) did
    assert f.num_programs == 5 * 2 and f.program_ids[:2] == [[0, 1], [0, 2]]
    assert f.other["program_ids"][:2] == [[0, 0], [0, 1]] and f.other["line"] == f.line
    assert f.elements == "Out_ptr[0:5]"
    torch.testing.assert_close(out, x.sum(-1))  # right by luck: every racing program stores the same sum


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_row_sum_correct_launch_is_clean(randn, dtype):
    x = randn(5, 300, dtype=getattr(torch, dtype))
    out, s = checked(rs.row_sum, x)
    assert s.findings == []
    torch.testing.assert_close(out, x.float().sum(-1).to(x.dtype))


def test_split_k_without_atomics_races_between_the_k_slices_of_a_tile(placed, randn):
    a, b = randn(40, 96, seed=1), randn(96, 24, seed=2)
    c, s = checked(sk.split_k_matmul, a, b, split_k=4, bug="no_atomics")  # grid (2, 1, 4)
    (f,) = only(s, "data_race")
    assert placed(f, sk, "no_atomics") and (f.reason, f.arg, f.access) == ("write_write", "c_ptr", "store")
    assert sorted(f.program_ids) == sorted([m, 0, k] for m in range(2) for k in range(1, 4))
    assert [0, 0, 0] in f.other["program_ids"] and [1, 0, 0] in f.other["program_ids"]
    assert f.elements == "c_ptr[0:40, 0:24]" and f.num_elements == 40 * 24
    assert not torch.allclose(c, a @ b, atol=1e-3)  # the last slice's partial product wins


def test_split_k_into_torch_empty_reads_garbage_in_the_first_atomic_of_each_element(placed, randn):
    a, b = randn(40, 96, seed=1), randn(96, 24, seed=2)
    _, s = checked(sk.split_k_matmul, a, b, split_k=4, bug="empty_output")
    (f,) = only(s, "uninitialized_read")
    assert placed(f, sk, "empty_output") and (f.access, f.arg) == ("atomic_add", "c_ptr")
    # the pid_k = 0 programs add first: the other slices find their partial sums there
    assert f.program_ids == [[0, 0, 0], [1, 0, 0]] and f.count == 40 * 24
    assert "split_k_matmul.py" in f.message  # names the torch.empty that allocated it


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_split_k_with_atomics_into_zeros_is_clean(randn, dtype):
    a, b = randn(40, 96, seed=1, dtype=getattr(torch, dtype)), randn(96, 24, seed=2, dtype=getattr(torch, dtype))
    c, s = checked(sk.split_k_matmul, a, b, split_k=4)
    assert s.findings == []
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-4, atol=1e-4)


def test_histogram_read_modify_write_without_atomics_races(placed):
    x = torch.randint(0, 16, (1000,), dtype=torch.int32, generator=torch.Generator().manual_seed(0))
    counts, s = checked(hg.histogram, x, 16, block_size=128, bug="plain_store")  # 8 programs
    found = only(s, "data_race")
    assert all(placed(f, hg, "plain_store") for f in found)
    assert {f.reason for f in found} == {"write_read", "write_write"}
    for f in found:
        assert [0] not in f.program_ids and [0] in f.other["program_ids"]  # program 0 runs first
        assert f.arg == "counts_ptr" and f.num_programs == 7
    assert not torch.equal(counts, torch.bincount(x, minlength=16).to(torch.int32))


def test_histogram_with_atomic_add_is_clean():
    x = torch.randint(-2, 20, (1000,), dtype=torch.int32, generator=torch.Generator().manual_seed(0))
    counts, s = checked(hg.histogram, x, 16, block_size=128)
    assert s.findings == []
    inside = x[(x >= 0) & (x < 16)]
    assert torch.equal(counts, torch.bincount(inside, minlength=16).to(torch.int32))


# --- uninitialized reads -----------------------------------------------------------------------------
def micro_batches(randn, dtype=torch.float32):
    return [(randn(32, 64, seed=2 * i, dtype=dtype), randn(32, 48, seed=2 * i + 1, dtype=dtype)) for i in range(3)]


def test_gradient_accumulated_into_empty_like_is_read_uninitialized_in_the_first_launch_only(placed, randn):
    w = randn(64, 48)
    dw, s = checked(ga.weight_grad, w, micro_batches(randn), bug="empty_grad")
    (f,) = only(s, "uninitialized_read")
    assert placed(f, ga, "empty_grad") and (f.access, f.arg) == ("load", "dw_ptr")
    assert f.launches == 1 and sorted(f.program_ids) == [[0, 0], [0, 1], [1, 0], [1, 1]]
    assert f.elements == "dw_ptr[0:64, 0:48]" and f.count == 64 * 48


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_gradient_accumulated_into_zeros_is_clean(randn, dtype):
    w = randn(64, 48, dtype=getattr(torch, dtype))
    _, s = checked(ga.weight_grad, w, micro_batches(randn, getattr(torch, dtype)))
    assert s.findings == []


# --- NaN/Inf origin ------------------------------------------------------------------------------------
def test_softmax_without_max_subtraction_reports_the_exp_that_overflowed(placed, randn):
    x = randn(12, 100, seed=3) * 30
    rows_over = sorted(int(r) for r in torch.nonzero((x > 88.72).any(dim=1)).flatten())  # log(FLT_MAX)
    assert rows_over
    y, s = checked(sm.softmax, x, bug="no_max_subtraction")
    (f,) = only(s, "nan_inf")
    assert placed(f, sm, "no_max_subtraction") and f.reason == "produced"
    assert sorted(p[0] for p in f.program_ids) == rows_over
    first = f.examples[0]
    assert first["inputs"][0] == float(x[rows_over[0], first["lane"][0]]) and first["result"] == float("inf")
    assert torch.isnan(y[rows_over[0]]).any()
    _, s = checked(sm.softmax, x)  # the correct kernel: other=-inf and the max subtracted
    assert s.findings == []


# --- integer overflow ------------------------------------------------------------------------------------
def test_embedding_ids_times_row_stride_in_int32_overflows(placed, randn):
    weight = randn(256, 16384)
    ids = torch.arange(32, dtype=torch.int32).reshape(2, 16)
    ids[1, 3] = 140_000  # an id of a 150k vocabulary: 140000 * 16384 > 2**31
    _, s = checked(em.embedding, ids, weight, block_t=32, block_d=64, bug="int32_offsets")
    (ovf,) = [f for f in s.findings if f.kind == "int_overflow"]
    assert placed(ovf, em, "int32_offsets") and ovf.reason == "mul"
    # one token tile, 16384 / 64 column tiles: every program computes the product for token 19
    assert ovf.num_programs == 256 and ovf.program_ids[0] == [0, 0]
    (v,) = ovf.examples[0]["values"]
    assert (v["lane"], v["lhs"], v["rhs"], v["exact"]) == ([19, 0], 140_000, 16384, 140_000 * 16384)
    assert v["wrapped"] == 140_000 * 16384 - 2 ** 32
    oob = [f for f in s.findings if f.kind == "out_of_bounds"]
    assert len(oob) == 1 and placed(oob[0], em, "int32_offsets") and oob[0].reason == "before_start"
    _, s = checked(em.embedding, ids.to(torch.int64) % 256, weight)
    assert s.findings == []
