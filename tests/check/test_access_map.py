"""The AccessMap check: bytes moved, distinct bytes, FLOPs and the binned access maps of a launch."""
import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import tritonkit
from tritonkit.check import CHECK_KINDS
from tritonkit.check.checks import AccessMap, make_checks
from tritonkit.check.checks.access_map import canvas_of


@triton.jit
def _add(x, y, o, n, B: tl.constexpr, OVER: tl.constexpr):
    off = tl.program_id(0) * B + tl.arange(0, B)
    a = tl.load(x + off, mask=off < n + OVER)
    tl.store(o + off, a + tl.load(y + off, mask=off < n), mask=off < n)


@triton.jit
def _mm(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):
        x = tl.load(a + rm[:, None] * K + (k + rk)[None, :])
        y = tl.load(b + (k + rk)[:, None] * N + rn[None, :])
        acc += tl.dot(x, y)
    tl.store(c + rm[:, None] * N + rn[None, :], acc)


@triton.jit
def _row_sum(x, o, stride, N: tl.constexpr):
    r = tl.program_id(0)
    v = tl.load(x + r * stride + tl.arange(0, N))
    tl.store(o + r, tl.sum(v, axis=0))


def _run(fn, grid, *args, engine="auto", kinds=("out_of_bounds",), **kw):
    am = AccessMap()
    with tritonkit.checking(checks=make_checks(list(kinds)) + [am], engine=engine) as s:
        fn[grid](*args, **kw)
    (rec,) = s.launches
    return s, rec, {m["arg"]: m for m in rec.access_maps}


def test_a_vector_add_moves_three_arrays_once_and_does_one_add_per_lane():
    n = 1000
    x, y, o = torch.randn(n), torch.randn(n), torch.empty(n)
    _, rec, maps = _run(_add, (4,), x, y, o, n, B=256, OVER=0)
    assert (rec.bytes_read, rec.bytes_written) == (2 * n * 4, n * 4)
    assert (rec.unique_bytes_read, rec.unique_bytes_written) == (2 * n * 4, n * 4)
    assert rec.flops == 4 * 256 and rec.flops_by_width == {"flops32": 4 * 256}  # every lane of the block adds
    assert set(maps) == {"x", "y", "o"}
    x_map, o_map = maps["x"], maps["o"]
    assert (x_map["rows"], x_map["cols"], x_map["bin_cols"]) == (1, n, 1)
    assert sum(x_map["reads"][0]) == n and sum(x_map["writes"][0]) == 0
    assert sum(o_map["writes"][0]) == n and sum(o_map["reads"][0]) == 0
    # element i was written by program i // 256
    assert o_map["write_program"][0] == [i // 256 for i in range(n)]
    assert x_map["write_program"][0] == [-1] * n and x_map["oob"] == [] and x_map["oob_lanes"] == 0


def test_out_of_bounds_lanes_are_kept_apart_with_their_coordinates_and_not_counted_as_bytes():
    n = 1000
    x, y, o = torch.randn(n), torch.randn(n), torch.empty(n)
    s, rec, maps = _run(_add, (4,), x, y, o, n, B=256, OVER=5)
    assert [f.kind for f in s.findings] == ["out_of_bounds"]
    assert rec.bytes_read == 2 * n * 4  # the 5 lanes past the end moved nothing
    oob = maps["x"]["oob"]
    assert sorted(c for _, c, _, _ in oob) == list(range(n, n + 5))
    assert all(r == 0 and kind == "load" and lanes == 1 for r, _, kind, lanes in oob)
    assert maps["x"]["oob_lanes"] == 5 and maps["y"]["oob_lanes"] == 0


@pytest.mark.parametrize("engine", ["auto", "sequential"])
def test_a_matmul_reads_its_operands_once_per_tile_and_counts_2mnk_flops(engine):
    M = N = K = 64
    a, b, c = torch.randn(M, K), torch.randn(K, N), torch.empty(M, N)
    _, rec, maps = _run(_mm, (2, 2), a, b, c, M, N, K, BM=32, BN=32, BK=16, engine=engine)
    # each of the 2x2 tiles reads a 32-row panel of A and a 32-column panel of B
    assert rec.bytes_read == 2 * (M * K * 4) * 2 and rec.unique_bytes_read == (M * K + K * N) * 4
    assert rec.bytes_written == rec.unique_bytes_written == M * N * 4
    dots, adds = 2 * M * N * K, 4 * (K // 16) * 32 * 32  # tl.dot, and `acc +=` per tile per step
    assert rec.flops == dots + adds
    am = maps["a"]
    assert (am["rows"], am["cols"], am["bin_rows"], am["bin_cols"]) == (M, K, 1, 1)
    assert np.array(am["reads"]).sum() == 2 * M * K  # two column tiles read each row panel
    # rows 0-31 of C were last written by programs (0, *) = linear ids 0 and 1; rows 32-63 by 2 and 3
    wp = np.array(maps["c"]["write_program"])
    assert set(wp[:32, :32].ravel()) == {0} and set(wp[32:, 32:].ravel()) == {3}


def test_bf16_dot_flops_count_as_16_bit_and_the_fp32_accumulate_as_32_bit():
    M = N = K = 32
    a, b = torch.randn(M, K).bfloat16(), torch.randn(K, N).bfloat16()
    c = torch.empty(M, N)
    _, rec, _ = _run(_mm, (1, 1), a, b, c, M, N, K, BM=32, BN=32, BK=16)
    assert rec.flops_by_width == {"flops16": 2 * M * N * K, "flops32": 2 * 32 * 32}


def test_a_float_sum_counts_one_add_per_element():
    x, o = torch.randn(8, 64), torch.empty(8)
    _, rec, _ = _run(_row_sum, (8,), x, o, x.stride(0), N=64)
    assert rec.flops == 8 * 64


def test_a_large_tensor_is_downsampled_into_bins_that_keep_every_lane():
    rows, cols = 300, 1000
    x = torch.randn(rows, cols)
    o = torch.empty(rows)

    @triton.jit
    def row_max(x, o, stride, n, B: tl.constexpr):
        r = tl.program_id(0)
        c = tl.arange(0, B)
        tl.store(o + r, tl.max(tl.load(x + r * stride + c, mask=c < n, other=-1e30), axis=0))
    _, rec, maps = _run(row_max, (rows,), x, o, cols, cols, B=1024)
    m = maps["x"]
    assert (m["bin_rows"], m["bin_cols"]) == (5, 4)  # 64 x 256 bins at most
    reads = np.array(m["reads"])
    assert reads.shape == (60, 250) and reads.sum() == rows * cols and (reads == 20).all()
    # bin row i holds rows 5i..5i+4: the highest program to read it is 5i+4
    assert np.array(m["read_program"])[:, 0].tolist() == [5 * i + 4 for i in range(60)]


def test_canvas_of_merges_leading_dims_into_rows():
    assert canvas_of(()) == (1, 1) and canvas_of((7,)) == (1, 7) and canvas_of((2, 3, 5)) == (6, 5)


def test_counts_are_the_same_when_the_batched_engine_rolls_back_and_falls_back(shifted_copy):
    recs = []
    for engine in ("auto", "sequential"):
        x = torch.arange(600, dtype=torch.float32)
        s, rec, maps = _run(shifted_copy, (5,), x, x, 600, SHIFT=-1, B=128, engine=engine, kinds=CHECK_KINDS[:-1])
        recs.append((rec, maps))
    (bat, bmaps), (seq, smaps) = recs
    assert bat.fallback is not None  # the race made the batched engine undo its batch
    for f in ("bytes_read", "bytes_written", "unique_bytes_read", "unique_bytes_written", "flops"):
        assert getattr(bat, f) == getattr(seq, f), f
    assert bmaps["x_ptr"]["reads"] == smaps["x_ptr"]["reads"]
    assert bmaps["x_ptr"]["read_program"] == smaps["x_ptr"]["read_program"]


def test_only_the_first_launches_of_a_kernel_keep_maps_but_all_are_counted():
    n = 256
    x, y, o = torch.randn(n), torch.randn(n), torch.empty(n)
    am = AccessMap(maps_per_kernel=1)
    with tritonkit.checking(checks=[am]) as s:
        for _ in range(3):
            _add[(1,)](x, y, o, n, B=256, OVER=0)
    assert [len(r.access_maps) for r in s.launches] == [3, 0, 0]
    assert [r.bytes_read for r in s.launches] == [2 * n * 4] * 3


def test_check_cli_writes_access_maps_to_json(tmp_path):
    import json
    import os
    import subprocess
    import sys
    out = tmp_path / "c.json"
    example = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "vector_add.py")
    subprocess.run([sys.executable, "-m", "tritonkit", "check", "--json", str(out), "--access-maps", "1", "--",
                    "python", example, "--bug", "missing_mask"], capture_output=True, timeout=300)
    data = json.loads(out.read_text())
    (rec,) = data["launch_records"]
    assert rec["bytes_read"] == 2 * 1000 * 4 and rec["bytes_written"] == 1000 * 4
    assert {m["arg"]: m["oob_lanes"] for m in rec["access_maps"]} == {"x_ptr": 24, "y_ptr": 24, "out_ptr": 24}


@triton.jit
def _add_bias(x, b, o, B: tl.constexpr):
    r = tl.program_id(0)
    c = tl.arange(0, B)
    bias = tl.load(b + c) * 2.0  # the same block in every program: made once for a batch, counted for each
    tl.store(o + r * B + c, tl.load(x + r * B + c) + bias)


def test_a_load_and_op_shared_by_every_program_count_once_per_program_in_both_engines():
    got = []
    for engine in ("auto", "sequential"):
        x, b, o = torch.randn(8, 32), torch.randn(32), torch.empty(8, 32)
        _, rec, maps = _run(_add_bias, (8,), x, b, o, B=32, engine=engine, kinds=())
        got.append((rec.engine, rec.bytes_read, rec.unique_bytes_read, maps["b"]["reads"], maps["b"]["read_program"],
                    rec.flops))
    (e1, *bat), (e2, *seq) = got
    assert e1 == "batched" and e2 == "sequential"
    assert bat == seq
    assert seq[0] == 2 * 8 * 32 * 4 and seq[1] == (8 * 32 + 32) * 4  # b read by all 8 programs, distinct once
    assert seq[2] == [[8] * 32] and seq[3] == [[7] * 32]
    assert seq[4] == 2 * 8 * 32  # a multiply and an add per lane, in each of the 8 programs
