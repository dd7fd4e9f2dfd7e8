"""The example kernels in ``examples/``: the correct versions check clean and match PyTorch; every
buggy variant is reported exactly (kind, line, argument, programs, elements, masked, configs).

Expected lines are found from marker comments in the example sources: ``# BUG: name`` marks the
line that is wrong, ``# REPORTED: name[, name]`` a kernel line where tritonkit reports a bug whose
cause is elsewhere (on the host, in the data, or in a mask computed on an earlier line).
Expected programs and elements are computed from the sizes, by modelling the kernel's addressing.
"""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
import triton

import tritonkit
from tritonkit import cli

import embedding as em
import grad_accumulate as ga
import histogram as hg
import layer_norm as ln
import matmul as mm
import row_sum as rs
import softmax as sm
import split_k_matmul as sk
import tensor_descriptor as td
import vector_add as va

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# --- helpers --------------------------------------------------------------------------------------
def checked(fn, *args, **kwargs):
    """Call ``fn`` inside a check session; return (its result, the session)."""
    with tritonkit.checking() as session:
        result = fn(*args, **kwargs)
    return result, session


def cdiv(a, b):
    return -(-a // b)


def _span(values):
    lo, hi = min(values), max(values) + 1
    return str(lo) if hi == lo + 1 else f"{lo}:{hi}"


def box(name, coords):
    """``name[r0:r1, c0:c1]``: the bounding box of 2-D element coordinates, as findings describe them."""
    rows, cols = zip(*coords)
    return f"{name}[{_span(rows)}, {_span(cols)}]"


def tensor_info(shape, strides, dtype="float32"):
    return {"shape": list(shape), "dtype": dtype, "strides": list(strides)}


def assert_placed(f, module, line, kernel):
    assert f.kind == "out_of_bounds", f.message
    assert os.path.samefile(f.file, module.__file__)
    assert f.line == line, (f.line, f.source)
    assert f.kernel == kernel


def assert_programs(f, expected):
    """``f.program_ids`` are the first (up to 8) of ``expected`` (a set of tuples), ``num_programs`` all."""
    assert f.num_programs == len(expected)
    got = [tuple(p) for p in f.program_ids]
    assert len(got) == min(8, len(expected)) and len(set(got)) == len(got)
    assert set(got) <= expected


# --- vector_add: heuristics-chosen block, missing masks, a stale EVEN_N heuristic ----------------
def _block(n):
    return 256 if n < 8192 else 1024


@pytest.mark.parametrize("n", [1, 1000, 2048, 8448, 16384])
def test_vector_add_correct(randn, n):
    x, y = randn(n, seed=1), randn(n, seed=2)
    out, s = checked(va.add, x, y)
    assert s.findings == []
    torch.testing.assert_close(out, x + y)
    # the heuristics chose BLOCK_SIZE from n: one program per block
    assert [r.grid for r in s.launches] == [(cdiv(n, _block(n)), 1, 1)]


@pytest.mark.parametrize("n", [1000, 777, 1])
def test_vector_add_missing_mask(marked_lines, randn, n):
    x, y = randn(n, seed=1), randn(n, seed=2)
    out, s = checked(va.add, x, y, bug="missing_mask")
    last = cdiv(n, 256) - 1
    end = (last + 1) * 256
    lines = marked_lines(va, "BUG", "missing_mask")
    assert [(f.line, f.arg, f.access) for f in s.findings] == list(
        zip(lines, ["x_ptr", "y_ptr", "out_ptr"], ["load", "load", "store"]))
    for f, line in zip(s.findings, lines):
        assert_placed(f, va, line, "_add_kernel_missing_mask")
        assert (f.reason, f.masked) == ("past_end", False)
        assert f.program_ids == [[last]] and f.num_programs == 1
        assert f.elements == f"{f.arg}[{n}:{end}]"
        assert f.count == end - n
        assert f.tensor == tensor_info([n], [1])
        assert f.configs == []
    # lanes past the end were not performed; the rest was computed
    torch.testing.assert_close(out, x + y)


def test_vector_add_missing_mask_is_latent_on_whole_blocks(randn):
    x, y = randn(1024, seed=1), randn(1024, seed=2)
    out, s = checked(va.add, x, y, bug="missing_mask")
    assert s.findings == []
    torch.testing.assert_close(out, x + y)


@pytest.mark.parametrize("n", [8448, 9984])
def test_vector_add_stale_even_heuristic(marked_lines, randn, n):
    assert n % 256 == 0 and n % 1024 != 0 and n >= 8192
    x, y = randn(n, seed=1), randn(n, seed=2)
    out, s = checked(va.add, x, y, bug="stale_even")
    last = cdiv(n, 1024) - 1
    end = (last + 1) * 1024
    lines = marked_lines(va, "REPORTED", "stale_even")
    assert [(f.line, f.arg, f.access) for f in s.findings] == list(
        zip(lines, ["x_ptr", "y_ptr", "out_ptr"], ["load", "load", "store"]))
    for f, line in zip(s.findings, lines):
        assert_placed(f, va, line, "_add_kernel_body")
        assert (f.reason, f.masked) == ("past_end", False)
        assert f.program_ids == [[last]] and f.num_programs == 1
        assert f.elements == f"{f.arg}[{n}:{end}]"
        assert f.count == end - n
    torch.testing.assert_close(out, x + y)


@pytest.mark.parametrize("n", [1000, 16384])
def test_vector_add_stale_even_is_latent_elsewhere(randn, n):
    # below 8192 the block is 256 (the heuristic is right); 16384 is a multiple of 1024
    x, y = randn(n, seed=1), randn(n, seed=2)
    out, s = checked(va.add, x, y, bug="stale_even")
    assert s.findings == []
    torch.testing.assert_close(out, x + y)


# --- softmax: strided rows, a wrong row stride, an off-by-one mask ------------------------------
@pytest.mark.parametrize("rows,cols,pad,dtype", [
    (37, 100, 28, torch.float32), (5, 33, 0, torch.float32), (3, 1, 7, torch.float32),
    (8, 256, 0, torch.float32), (2, 1000, 24, torch.float32), (6, 70, 10, torch.float16),
])
def test_softmax_correct(randn, rows, cols, pad, dtype):
    x = randn(rows, cols + pad, dtype=dtype)[:, :cols]
    y, s = checked(sm.softmax, x)
    assert s.findings == []
    ref = torch.softmax(x.float(), dim=-1).to(dtype)
    torch.testing.assert_close(y, ref, **({} if dtype == torch.float32 else {"atol": 1e-3, "rtol": 1e-2}))


def _row_stride_model(rows, cols, width):
    """Row r reads storage elements r*cols + [0, cols); those past column ``cols`` of a row of
    ``width`` are outside the view. Returns (programs with such lanes, their coordinates)."""
    programs, coords = [], []
    for r in range(rows):
        addr = r * cols + np.arange(cols)
        bad = addr % width >= cols
        assert (addr < (rows - 1) * width + cols).all()  # all inside the view's span: outside_view
        if bad.any():
            programs.append(r)
            coords += [(int(a) // width, int(a) % width) for a in addr[bad]]
    return programs, coords


@pytest.mark.parametrize("rows,cols,pad", [(37, 100, 28), (9, 33, 15)])
def test_softmax_row_stride(marked_lines, randn, rows, cols, pad):
    width = cols + pad
    x = randn(rows, width)[:, :cols]
    _, s = checked(sm.softmax, x, bug="row_stride")
    programs, coords = _row_stride_model(rows, cols, width)
    (line,) = marked_lines(sm, "REPORTED", "row_stride")
    assert len(s.findings) == 1, [f.message for f in s.findings]
    f = s.findings[0]
    assert_placed(f, sm, line, "_softmax_fwd_kernel")
    assert (f.arg, f.access, f.masked, f.reason) == ("X_ptr", "load", True, "outside_view")
    assert f.tensor == tensor_info([rows, cols], [width, 1])
    assert f.program_ids == [[r] for r in programs[:8]] and f.num_programs == len(programs)
    assert f.count == len(coords)
    assert f.elements == box("X_ptr", coords)


def test_softmax_row_stride_is_latent_on_contiguous_input(randn):
    x = randn(9, 33)
    y, s = checked(sm.softmax, x, bug="row_stride")
    assert s.findings == []
    torch.testing.assert_close(y, torch.softmax(x, dim=-1))


@pytest.mark.parametrize("rows,cols", [(37, 100), (4, 33)])
def test_softmax_mask_off_by_one(marked_lines, randn, rows, cols):
    x = randn(rows, cols)
    _, s = checked(sm.softmax, x, bug="mask_off_by_one")
    lines = marked_lines(sm, "REPORTED", "mask_off_by_one")
    # every row touches one element too many; for rows before the last it is the next row's
    # first element (inside the tensor), for the last row it is past the end
    oob = [f for f in s.findings if f.kind == "out_of_bounds"]
    assert [(f.line, f.arg, f.access) for f in oob] == list(zip(lines, ["X_ptr", "Y_ptr"], ["load", "store"]))
    # and the extra element a row stores is the next row's first, which that row's program stores too
    (race,) = [f for f in s.findings if f.kind == "data_race"]
    assert (race.line, race.arg, race.reason, race.other["line"]) == (lines[1], "Y_ptr", "write_write", lines[1])
    assert race.program_ids[0] == [1] and race.other["program_ids"][0] == [0]
    assert race.elements == f"Y_ptr[1:{rows}, 0]" and race.num_programs == rows - 1
    assert len(s.findings) == 3
    for f, line in zip(oob, lines):
        assert_placed(f, sm, line, "_softmax_fwd_kernel_off_by_one")
        assert (f.masked, f.reason, f.count) == (True, "past_end", 1)
        assert f.program_ids == [[rows - 1]] and f.num_programs == 1
        assert f.elements == f"{f.arg}[{rows}, 0]"
        assert f.tensor == tensor_info([rows, cols], [cols, 1])


def test_softmax_mask_off_by_one_is_latent_on_power_of_two_rows(randn):
    x = randn(5, 64)
    y, s = checked(sm.softmax, x, bug="mask_off_by_one")
    assert s.findings == []
    torch.testing.assert_close(y, torch.softmax(x, dim=-1))


# --- layer_norm ----------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(33, 300), (7, 64), (5, 1000), (2, 5, 77)])
def test_layer_norm_correct(randn, shape):
    cols = shape[-1]
    x, w, b = randn(*shape, seed=1), randn(cols, seed=2), randn(cols, seed=3)
    (y, mean, rstd), s = checked(ln.layer_norm, x, w, b)
    assert s.findings == []
    torch.testing.assert_close(y, torch.nn.functional.layer_norm(x, (cols,), w, b, eps=1e-5))
    x2 = x.reshape(-1, cols)
    torch.testing.assert_close(mean, x2.mean(dim=-1))
    torch.testing.assert_close(rstd, torch.rsqrt(x2.var(dim=-1, unbiased=False) + 1e-5))


@pytest.mark.parametrize("rows,cols", [(33, 300), (7, 100)])
def test_layer_norm_weight_mask(marked_lines, randn, rows, cols):
    x, w, b = randn(rows, cols, seed=1), randn(cols, seed=2), randn(cols, seed=3)
    (y, _, _), s = checked(ln.layer_norm, x, w, b, bug="weight_mask")
    block = triton.next_power_of_2(cols)
    lines = marked_lines(ln, "BUG", "weight_mask")
    assert [(f.line, f.arg, f.access) for f in s.findings] == list(zip(lines, ["W_ptr", "B_ptr"], ["load", "load"]))
    for f, line in zip(s.findings, lines):
        assert_placed(f, ln, line, "_layer_norm_fwd_kernel_weight_unmasked")
        assert (f.masked, f.reason) == (False, "past_end")
        # every program (one per row) reads the same tail of the weight and the bias
        assert f.program_ids == [[r] for r in range(min(rows, 8))] and f.num_programs == rows
        assert f.elements == f"{f.arg}[{cols}:{block}]"
        assert f.count == rows * (block - cols)
        assert f.tensor == tensor_info([cols], [1])
    # the dropped lanes read as 0 and are masked out of the result
    torch.testing.assert_close(y, torch.nn.functional.layer_norm(x, (cols,), w, b, eps=1e-5))


def test_layer_norm_weight_mask_is_latent_on_power_of_two_rows(randn):
    x, w, b = randn(7, 64, seed=1), randn(64, seed=2), randn(64, seed=3)
    _, s = checked(ln.layer_norm, x, w, b, bug="weight_mask")
    assert s.findings == []


# --- matmul: autotuned, grouped ordering, a K-tail off by one under some configs -----------------
def _label(cfg):
    kw = cfg.kwargs
    return (f"BLOCK_M={kw['BLOCK_M']}, BLOCK_N={kw['BLOCK_N']}, BLOCK_K={kw['BLOCK_K']}, "
            f"GROUP_SIZE_M={kw['GROUP_SIZE_M']}, num_warps={cfg.num_warps}, num_stages={cfg.num_stages}")


def _tile_of(pid, M, N, bm, bn, group):
    """(pid_m, pid_n) of program ``pid`` in grouped ordering (a model of ``_grouped_tile``)."""
    num_pid_m, num_pid_n = cdiv(M, bm), cdiv(N, bn)
    in_group = group * num_pid_n
    first = (pid // in_group) * group
    size = min(num_pid_m - first, group)
    return first + (pid % in_group) % size, (pid % in_group) // size


def test_matmul_grouped_ordering_model_covers_every_tile():
    for M, N, bm, bn, g in [(70, 70, 32, 32, 8), (300, 70, 32, 32, 4), (70, 300, 16, 32, 2)]:
        tiles = [_tile_of(p, M, N, bm, bn, g) for p in range(cdiv(M, bm) * cdiv(N, bn))]
        assert sorted(tiles) == [(i, j) for i in range(cdiv(M, bm)) for j in range(cdiv(N, bn))]


@pytest.mark.parametrize("M,N,K,transpose_b", [(64, 70, 48, False), (70, 70, 50, False), (33, 17, 100, False),
                                               (5, 3, 7, False), (40, 72, 33, True)])
def test_matmul_correct_under_every_config(randn, M, N, K, transpose_b):
    a = randn(M, K, seed=1)
    b = randn(N, K, seed=2).t() if transpose_b else randn(K, N, seed=2)
    c, s = checked(mm.matmul, a, b)
    assert s.findings == []
    torch.testing.assert_close(c, a @ b, atol=1e-4, rtol=1e-4)
    (kernel,) = s.kernels
    assert kernel.name == "_matmul_kernel"
    assert sorted(kernel.configs) == sorted(_label(cfg) for cfg in mm.CONFIGS)


@pytest.mark.parametrize("M,N,K", [(70, 70, 48), (70, 70, 50), (70, 70, 96), (33, 17, 40)])
def test_matmul_k_tail_under_some_configs(marked_lines, randn, M, N, K):
    a, b = randn(M, K, seed=1), randn(K, N, seed=2)
    c, s = checked(mm.matmul, a, b, bug="k_tail")
    buggy = [cfg for cfg in mm.CONFIGS if K % cfg.kwargs["BLOCK_K"] != 0]
    assert buggy and len(buggy) <= len(mm.CONFIGS)
    a_programs, b_programs, a_count, b_count = set(), set(), 0, 0
    for cfg in buggy:
        bm, bn, g = cfg.kwargs["BLOCK_M"], cfg.kwargs["BLOCK_N"], cfg.kwargs["GROUP_SIZE_M"]
        for pid in range(cdiv(M, bm) * cdiv(N, bn)):
            pid_m, pid_n = _tile_of(pid, M, N, bm, bn, g)
            b_programs.add((pid,))  # every program reads row K of b in its last K step
            b_count += min(bn, N - pid_n * bn)
            if pid_m == cdiv(M, bm) - 1:  # only a[M-1, K] is past the end of a (a[m, K] is a[m+1, 0])
                a_programs.add((pid,))
                a_count += 1

    a_line, b_line = marked_lines(mm, "BUG", "k_tail")
    fa, fb = sorted(s.findings, key=lambda f: f.line)
    assert [(fa.arg, fb.arg)] == [("a_ptr", "b_ptr")]
    for f, line, elements, programs, count, info in [
        (fa, a_line, f"a_ptr[{M}, 0]", a_programs, a_count, tensor_info([M, K], [K, 1])),
        (fb, b_line, f"b_ptr[{K}, 0:{N}]", b_programs, b_count, tensor_info([K, N], [N, 1])),
    ]:
        assert_placed(f, mm, line, "_matmul_kernel_k_tail")
        assert (f.access, f.masked, f.reason) == ("load", True, "past_end")
        assert sorted(f.configs) == sorted(_label(cfg) for cfg in buggy)
        assert f.elements == elements
        assert f.count == count
        assert f.tensor == info
        assert_programs(f, programs)
    # the lanes past the ends were dropped (read as 0), so the result is still right
    torch.testing.assert_close(c, a @ b, atol=1e-4, rtol=1e-4)


def test_matmul_k_tail_is_latent_when_every_block_k_divides_k(randn):
    a, b = randn(20, 128, seed=1), randn(128, 24, seed=2)
    c, s = checked(mm.matmul, a, b, bug="k_tail")
    assert s.findings == []
    torch.testing.assert_close(c, a @ b, atol=1e-4, rtol=1e-4)


def test_matmul_k_tail_is_found_again_in_a_new_session(randn):
    # regression: the autotune keys already checked used to outlive the session, so a second
    # session with the same key ran only the chosen config (BLOCK_K=16 here: no finding)
    a, b = randn(40, 48, seed=1), randn(48, 24, seed=2)
    first = checked(mm.matmul, a, b, bug="k_tail")[1].findings
    second = checked(mm.matmul, a, b, bug="k_tail")[1].findings
    assert first
    assert [(f.line, f.arg, sorted(f.configs)) for f in second] == [(f.line, f.arg, sorted(f.configs)) for f in first]


# --- embedding: an indirect load trusting its ids -------------------------------------------------
@pytest.mark.parametrize("batch,seq,vocab,dim,dtype", [(4, 37, 500, 96, torch.int64), (1, 1, 7, 3, torch.int64),
                                                       (3, 70, 1000, 64, torch.int32)])
def test_embedding_correct(randn, batch, seq, vocab, dim, dtype):
    ids = em.make_ids(batch, seq, vocab).to(dtype)
    weight = randn(vocab, dim, seed=5)
    out, s = checked(em.embedding, ids, weight)
    assert s.findings == []
    torch.testing.assert_close(out, torch.nn.functional.embedding(ids.long(), weight))


@pytest.mark.parametrize("bug,batch,seq,vocab,dim", [
    ("bad_index", 4, 37, 500, 96), ("bad_index", 2, 6, 10, 130),
    ("negative_index", 4, 37, 500, 96), ("negative_index", 3, 33, 50, 40),
])
def test_embedding_bad_ids(marked_lines, randn, bug, batch, seq, vocab, dim):
    ids = em.make_ids(batch, seq, vocab, bug=bug)
    weight = randn(vocab, dim, seed=5)
    out, s = checked(em.embedding, ids, weight)
    if bug == "bad_index":
        tokens, row, reason = [1 * seq + 5], vocab, "past_end"
    else:
        tokens, row, reason = list(range(2 * seq + seq - 7, 3 * seq)), -100, "before_start"
    programs = {(t // 32, d) for t in tokens for d in range(cdiv(dim, 64))}
    (line,) = marked_lines(em, "REPORTED", bug)
    assert len(s.findings) == 1, [f.message for f in s.findings]
    f = s.findings[0]
    assert_placed(f, em, line, "_embedding_fwd_kernel")
    assert (f.arg, f.access, f.masked, f.reason) == ("weight_ptr", "load", True, reason)
    assert f.tensor == tensor_info([vocab, dim], [dim, 1])
    assert sorted(map(tuple, f.program_ids)) == sorted(programs) and f.num_programs == len(programs)
    assert f.elements == f"weight_ptr[{row}, 0:{dim}]"
    assert f.count == len(tokens) * dim
    # the valid tokens were looked up; the bad ones read as 0
    flat = ids.reshape(-1)
    valid = (flat >= 0) & (flat < vocab)
    torch.testing.assert_close(out.reshape(-1, dim)[valid], weight[flat[valid]])
    assert (out.reshape(-1, dim)[~valid] == 0).all()


# --- tensor descriptors: host-side descriptors with a wrong shape or wrong strides ----------------
@pytest.mark.parametrize("M,N,pad,block", [(70, 100, 0, (32, 32)), (70, 100, 28, (32, 32)), (45, 36, 4, (32, 32)),
                                           (1, 4, 0, (32, 32)), (45, 36, 4, (16, 8))])
def test_tensor_descriptor_correct(randn, M, N, pad, block):
    x = randn(M, N + pad, seed=1)[:, :N]
    bias = randn(N, seed=2)
    y, s = checked(td.bias_relu, x, bias, *block)
    assert s.findings == []
    torch.testing.assert_close(y, torch.relu(x + bias))


def _descriptor_model(M, N, shape, desc_strides, view_stride, bm, bn):
    """Lanes a descriptor lets through that are outside the (M, N) view with row stride
    ``view_stride``. Returns {program: bad lane count}, coordinates, and whether all lie past the
    end of the view (else all inside its span)."""
    end = (M - 1) * view_stride + N
    per_program, coords, past = {}, [], []
    for pm in range(cdiv(M, bm)):
        for pn in range(cdiv(N, bn)):
            r = pm * bm + np.arange(bm)[:, None]
            c = pn * bn + np.arange(bn)[None, :]
            inside_desc = (r < shape[0]) & (c < shape[1])
            addr = (r * desc_strides[0] + c)[inside_desc]
            bad = (addr % view_stride >= N) | (addr >= end)
            if bad.any():
                per_program[(pm, pn)] = int(bad.sum())
                coords += [(int(a) // view_stride, int(a) % view_stride) for a in addr[bad]]
                past += (addr[bad] >= end).tolist()
    assert all(past) or not any(past)
    return per_program, coords, all(past)


@pytest.mark.parametrize("M,N", [(70, 100), (45, 36)])
def test_tensor_descriptor_padded_shape(marked_lines, randn, M, N):
    bm, bn = 32, 32
    x, bias = randn(M, N, seed=1), randn(N, seed=2)
    _, s = checked(td.bias_relu, x, bias, bm, bn, bug="padded_shape")
    padded = (cdiv(M, bm) * bm, cdiv(N, bn) * bn)
    per_program, coords, past_end = _descriptor_model(M, N, padded, (N, 1), N, bm, bn)
    assert past_end
    lines = marked_lines(td, "REPORTED", "padded_shape")
    oob = [f for f in s.findings if f.kind == "out_of_bounds"]
    assert [(f.line, f.arg, f.access) for f in oob] == list(
        zip(lines, ["x_desc.base", "y_desc.base"], ["descriptor_load", "descriptor_store"]))
    # the padded columns of a row's last tile are the next row's first ones, which another tile stores
    races = [f for f in s.findings if f.kind == "data_race"]
    assert [(f.line, f.arg, f.reason) for f in races] == [(lines[1], "y_desc.base", "write_write")]
    assert len(s.findings) == 3
    for f, line in zip(oob, lines):
        assert_placed(f, td, line, "_bias_relu_kernel")
        assert (f.masked, f.reason) == (True, "past_end")
        assert f.tensor == tensor_info([M, N], [N, 1])
        assert_programs(f, set(per_program))
        assert f.count == sum(per_program.values())
        assert f.elements == box(f.arg, coords)


@pytest.mark.parametrize("M,N,pad", [(70, 100, 28), (45, 36, 4)])
def test_tensor_descriptor_contiguous_strides(marked_lines, randn, M, N, pad):
    bm, bn = 32, 32
    width = N + pad
    x, bias = randn(M, width, seed=1)[:, :N], randn(N, seed=2)
    _, s = checked(td.bias_relu, x, bias, bm, bn, bug="contiguous_strides")
    per_program, coords, past_end = _descriptor_model(M, N, (M, N), (N, 1), width, bm, bn)
    assert not past_end
    (line,) = marked_lines(td, "REPORTED", "contiguous_strides")
    assert len(s.findings) == 1, [f.message for f in s.findings]
    f = s.findings[0]
    assert_placed(f, td, line, "_bias_relu_kernel")
    assert (f.arg, f.access, f.masked, f.reason) == ("x_desc.base", "descriptor_load", True, "outside_view")
    assert f.tensor == tensor_info([M, N], [width, 1])
    assert_programs(f, set(per_program))
    assert f.count == sum(per_program.values())
    assert f.elements == box("x_desc.base", coords)


# --- the scripts: main(), `tritonkit check -- python examples/X.py --bug ...` ---------------------
MODULES = {"vector_add": va, "softmax": sm, "layer_norm": ln, "matmul": mm, "embedding": em,
           "tensor_descriptor": td, "row_sum": rs, "split_k_matmul": sk, "histogram": hg, "grad_accumulate": ga}

# (script, bug) -> (marker tag of the lines where the findings are, the finding kinds)
OOB = {"out_of_bounds"}
SCRIPT_BUGS = {
    ("vector_add", "missing_mask"): ("BUG", OOB),
    ("vector_add", "stale_even"): ("REPORTED", OOB),
    ("softmax", "row_stride"): ("REPORTED", OOB),
    # a row's one-too-many element is the next row's first: that row's program stores it too
    ("softmax", "mask_off_by_one"): ("REPORTED", OOB | {"data_race"}),
    ("softmax", "no_max_subtraction"): ("REPORTED", {"nan_inf"}),
    ("layer_norm", "weight_mask"): ("BUG", OOB),
    ("matmul", "k_tail"): ("BUG", OOB),
    ("embedding", "bad_index"): ("REPORTED", OOB),
    ("embedding", "negative_index"): ("REPORTED", OOB),
    ("embedding", "int32_offsets"): ("REPORTED", OOB | {"int_overflow"}),
    ("tensor_descriptor", "padded_shape"): ("REPORTED", OOB | {"data_race"}),
    ("tensor_descriptor", "contiguous_strides"): ("REPORTED", OOB),
    ("row_sum", "grid_too_large"): ("REPORTED", {"data_race"}),
    ("split_k_matmul", "no_atomics"): ("REPORTED", {"data_race"}),
    ("split_k_matmul", "empty_output"): ("REPORTED", {"uninitialized_read"}),
    ("histogram", "plain_store"): ("REPORTED", {"data_race"}),
    ("grad_accumulate", "empty_grad"): ("REPORTED", {"uninitialized_read"}),
}


def test_every_bug_is_covered():
    for name, module in MODULES.items():
        assert {bug for (script, bug) in SCRIPT_BUGS if script == name} == set(module.BUGS) - {"none"}


@pytest.mark.parametrize("name", sorted(MODULES))
def test_main_correct_version_is_clean(name, capsys):
    err, s = checked(MODULES[name].main, [])
    assert s.findings == []
    assert err < 1e-4
    assert "max abs error" in capsys.readouterr().out


@pytest.mark.parametrize("name", sorted(MODULES))
def test_launchers_reject_unknown_bugs(name):
    launch = {
        "embedding": lambda: em.make_ids(2, 8, 10, bug="nope"),
        "layer_norm": lambda: ln.layer_norm(torch.ones(2, 4), torch.ones(4), torch.ones(4), bug="nope"),
        "matmul": lambda: mm.matmul(torch.ones(2, 4), torch.ones(4, 2), bug="nope"),
        "tensor_descriptor": lambda: td.bias_relu(torch.ones(2, 4), torch.ones(4), bug="nope"),
        "vector_add": lambda: va.add(torch.ones(4), torch.ones(4), bug="nope"),
        "softmax": lambda: sm.softmax(torch.ones(2, 4), bug="nope"),
        "row_sum": lambda: rs.row_sum(torch.ones(2, 4), bug="nope"),
        "split_k_matmul": lambda: sk.split_k_matmul(torch.ones(2, 4), torch.ones(4, 2), bug="nope"),
        "histogram": lambda: hg.histogram(torch.zeros(4, dtype=torch.int32), 4, bug="nope"),
        "grad_accumulate": lambda: ga.weight_grad(torch.ones(4, 2), [], bug="nope"),
    }[name]
    with pytest.raises(ValueError, match="unknown bug"):
        launch()


@pytest.mark.parametrize("name,bug", sorted(SCRIPT_BUGS) + [(n, "none") for n in sorted(MODULES)])
def test_script_under_tritonkit_check(marked_lines, name, bug, tmp_path, capfd):
    script = os.path.join(ROOT, "examples", f"{name}.py")
    report = tmp_path / "findings.json"
    status = cli.main(["check", "--nan", "--json", str(report), "--", "python", script, "--bug", bug])
    out = capfd.readouterr().out  # the script runs in a child process: its output is the fd's
    assert f"bug={bug}: max abs error" in out
    data = json.loads(report.read_text())
    assert data["script"]["failed"] is False
    if bug == "none":
        assert status == 0 and data["findings"] == []
        return
    assert status == 1
    module = MODULES[name]
    tag, kinds = SCRIPT_BUGS[(name, bug)]
    expected = marked_lines(module, tag, bug)
    assert sorted({f["line"] for f in data["findings"]}) == expected
    assert all(os.path.samefile(f["file"], script) for f in data["findings"])
    assert {f["kind"] for f in data["findings"]} == kinds

def test_script_in_a_subprocess():
    """The command exactly as a user types it, in a fresh process."""
    proc = subprocess.run(
        [sys.executable, "-m", "tritonkit", "check", "--", "python", "examples/matmul.py", "--bug", "k_tail"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={**os.environ, "COLUMNS": "100"})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "bug=k_tail: max abs error" in proc.stdout
    assert "BLOCK_K=32" in proc.stdout and "b_ptr[48, 0:70]" in proc.stdout
