"""A small GPU workload for recording profiles (Proton, Nsight Compute) that ``tritonkit profile``'s
parser and analysis are tested against: a vector add with ``launch_metadata`` (bytes), one
without, a row softmax, a bf16 matmul with ``launch_metadata`` (FLOPs) next to ``torch.matmul``,
each in a Proton scope when Proton is running.

Usage: ``python benchmarks/profile_workload.py [--size N]`` (any profiler around it).
"""
from __future__ import annotations

import argparse
import contextlib

import torch
import triton
import triton.language as tl


def _add_meta(grid, kernel, args):
    n = args["n"]
    return {"name": f"add_kernel n={n}", "bytes": 3 * n * args["x_ptr"].element_size()}


@triton.jit(launch_metadata=_add_meta)
def add_kernel(x_ptr, y_ptr, o_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(o_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


@triton.jit
def add_kernel_plain(x_ptr, y_ptr, o_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(o_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


@triton.jit
def softmax_kernel(x_ptr, o_ptr, cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    m = offs < cols
    x = tl.load(x_ptr + row * stride + offs, mask=m, other=-float("inf"))
    e = tl.exp(x - tl.max(x, 0))
    tl.store(o_ptr + row * stride + offs, e / tl.sum(e, 0), mask=m)


def _mm_meta(grid, kernel, args):
    M, N, K = args["M"], args["N"], args["K"]
    return {"name": f"matmul_kernel M={M} N={N} K={K}", "flops16": 2.0 * M * N * K,
            "bytes": 2 * (M * K + K * N + M * N)}


@triton.jit(launch_metadata=_mm_meta)
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid = tl.program_id(0)
    pid_m = pid // tl.cdiv(N, BN)
    pid_n = pid % tl.cdiv(N, BN)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :])
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.bfloat16))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size", type=int, default=1 << 24, help="vector length (default 2^24)")
    p.add_argument("--mm", type=int, default=4096, help="matmul M=N=K (default 4096)")
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args(argv)
    try:
        import triton.profiler as proton
        scope = proton.scope
    except ImportError:  # pragma: no cover
        def scope(name, metrics=None):
            return contextlib.nullcontext()
    n = args.size
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    o = torch.empty_like(x)
    s = torch.randn(4096, 1024, device="cuda")
    so = torch.empty_like(s)
    M = args.mm
    a = torch.randn(M, M, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(M, M, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(M, M, device="cuda", dtype=torch.bfloat16)
    for _ in range(args.repeat):
        with scope("vector_add"):
            add_kernel[(triton.cdiv(n, 1024),)](x, y, o, n, BLOCK=1024)
            add_kernel_plain[(triton.cdiv(n, 1024),)](x, y, o, n, BLOCK=1024)
        with scope("softmax"):
            softmax_kernel[(4096,)](s, so, 1024, 1024, BLOCK=1024)
        with scope("triton_matmul"):
            matmul_kernel[(triton.cdiv(M, 128) * triton.cdiv(M, 128),)](a, b, c, M, M, M, BM=128, BN=128, BK=64,
                                                                         num_warps=8, num_stages=3)
        with scope("torch_matmul", {"flops16": 2.0 * M * M * M}):
            torch.matmul(a, b)
    torch.cuda.synchronize()
    torch.testing.assert_close(o, x + y)
    torch.testing.assert_close(c.float(), (a.float() @ b.float()), atol=1.0, rtol=0.05)
    print("workload done")


if __name__ == "__main__":
    main()
