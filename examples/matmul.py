"""Blocked matmul ``c = a @ b`` with grouped program ordering, autotuned over a few configs.

Each program computes one ``BLOCK_M x BLOCK_N`` tile of ``c``, looping over ``K`` in steps of
``BLOCK_K`` and masking the tails of ``M``, ``N`` and ``K``. Programs are numbered in groups of
``GROUP_SIZE_M`` tile rows so that programs running together share tiles of ``b`` in the L2 cache.
``@triton.autotune`` picks a config per ``(M, N, K)``.

The accumulation is float32 and ``tl.dot`` uses ``input_precision="ieee"`` so that results match
``torch.matmul`` in float32 (and the CPU interpreter, which computes dots in float32). With
``--dtype bfloat16``/``float16`` the tiles are loaded in that dtype, ``tl.dot`` still accumulates
in float32, and ``c`` is rounded once to the inputs' dtype when stored.

Buggy variant (``--bug``):

* ``k_tail``: the ``K`` mask is written ``offs_k <= k_remaining``, one element too many. When
  ``K`` is a multiple of ``BLOCK_K`` the extra lane never exists, so the bug shows only under the
  configs whose ``BLOCK_K`` does not divide ``K`` (with the default ``K = 48``: ``BLOCK_K = 32``
  and ``64``, not ``16``). The extra row of ``b`` is past its end; the extra column of ``a`` is
  the next row's first element, which is past the end only for the last row.

Run::

    python examples/matmul.py --m 70 --n 70 --k 48
    tritonkit check -- python examples/matmul.py --dtype bfloat16
    tritonkit check -- python examples/matmul.py --bug k_tail

(Without a GPU, run bfloat16 under ``tritonkit check``: Triton's own CPU interpreter does bfloat16
arithmetic on the raw bit patterns.)
"""
from __future__ import annotations

import argparse
import os
import time

import torch

if __name__ == "__main__" and not torch.cuda.is_available():
    # No GPU: run in Triton's CPU interpreter (must be set before the kernels are decorated).
    os.environ.setdefault("TRITON_INTERPRET", "1")

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

BUGS = ("none", "k_tail")
DTYPES = ("float32", "bfloat16", "float16")

CONFIGS = [
    triton.Config({"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 16, "GROUP_SIZE_M": 8}, num_warps=4, num_stages=3),
    triton.Config({"BLOCK_M": 64, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_SIZE_M": 8}, num_warps=4, num_stages=3),
    triton.Config({"BLOCK_M": 32, "BLOCK_N": 64, "BLOCK_K": 64, "GROUP_SIZE_M": 4}, num_warps=4, num_stages=4),
]
if torch.cuda.is_available():  # on a GPU, also the large tiles of Triton's matmul tutorial
    CONFIGS += [
        triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_SIZE_M": 8}, num_warps=w, num_stages=s)
        for bm, bn, bk, s, w in ((128, 256, 64, 3, 8), (64, 256, 32, 4, 4), (128, 128, 32, 4, 4), (128, 64, 32, 4, 4),
                                 (64, 128, 32, 4, 4), (256, 128, 64, 3, 8), (128, 128, 64, 3, 8))]



def _cpu_bench(kernel_call, quantiles):
    """Time one config in Triton's CPU interpreter (Triton's own benchmarker needs a GPU driver)."""
    start = time.perf_counter()
    kernel_call()
    ms = (time.perf_counter() - start) * 1e3
    return [ms for _ in quantiles]


# On a machine without a GPU the kernels run in Triton's interpreter, where configs are timed on the CPU.
_DO_BENCH = None if torch.cuda.is_available() else _cpu_bench


@triton.jit
def _grouped_tile(pid, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_SIZE_M: tl.constexpr):
    """The (tile row, tile column) of program ``pid`` in grouped ordering."""
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    return pid_m, pid_n


@triton.autotune(configs=CONFIGS, key=["M", "N", "K"], do_bench=_DO_BENCH)
@triton.jit
def _matmul_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr,
):
    pid = tl.program_id(0)
    pid_m, pid_n = _grouped_tile(pid, M, N, BLOCK_M, BLOCK_N, GROUP_SIZE_M)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_remaining = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < k_remaining), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_remaining) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    c = acc.to(c_ptr.dtype.element_ty)
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, c, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@triton.autotune(configs=CONFIGS, key=["M", "N", "K"], do_bench=_DO_BENCH)
@triton.jit
def _matmul_kernel_k_tail(
    a_ptr, b_ptr, c_ptr, M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr,
):
    pid = tl.program_id(0)
    pid_m, pid_n = _grouped_tile(pid, M, N, BLOCK_M, BLOCK_N, GROUP_SIZE_M)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_remaining = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] <= k_remaining), other=0.0)  # BUG: k_tail
        b = tl.load(b_ptrs, mask=(offs_k[:, None] <= k_remaining) & (offs_n[None, :] < N), other=0.0)  # BUG: k_tail
        acc = tl.dot(a, b, acc, input_precision="ieee")
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    c = acc.to(c_ptr.dtype.element_ty)
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, c, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def matmul(a: torch.Tensor, b: torch.Tensor, bug: str = "none") -> torch.Tensor:
    """``a @ b`` by an autotuned Triton kernel.

    Args:
        a: ``(M, K)`` float32, bfloat16 or float16 tensor (any strides).
        b: ``(K, N)`` tensor of ``a``'s dtype and device (any strides).
        bug: ``"none"`` for the correct kernel, or one of the buggy variants in :data:`BUGS`.

    Returns:
        a new contiguous ``(M, N)`` tensor of ``a``'s dtype (accumulated in float32).

    Raises:
        ValueError: if the shapes do not chain, the dtypes differ or are not one of
            float32/bfloat16/float16, or ``bug`` is unknown.
    """
    if bug not in BUGS:
        raise ValueError(f"unknown bug {bug!r}; choose one of {BUGS}")
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"cannot multiply shapes {tuple(a.shape)} and {tuple(b.shape)}")
    if a.dtype != b.dtype or a.dtype not in (torch.float32, torch.bfloat16, torch.float16):
        raise ValueError(f"a and b must both be float32, bfloat16 or float16, got {a.dtype} and {b.dtype}")
    M, K = a.shape
    _, N = b.shape
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    kernel = _matmul_kernel_k_tail if bug == "k_tail" else _matmul_kernel
    grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)  # noqa: E731
    kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
    return c


def main(argv=None) -> float:
    """Run :func:`matmul` on random data, compare with ``torch.matmul``, print the max error.

    The reference is the float32 product of the same (possibly 16-bit) inputs, rounded to their
    dtype: what a kernel accumulating in float32 should produce.

    Args:
        argv: command-line arguments (None: ``sys.argv[1:]``).

    Returns:
        the max absolute error against that reference.

    Raises:
        AssertionError: if the correct kernel (``--bug none``) misses the reference by more than the
            tolerance (the buggy variant only prints its error: finding it is tritonkit's job).
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bug", choices=BUGS, default="none")
    parser.add_argument("--dtype", choices=DTYPES, default="float32")
    parser.add_argument("--m", type=int, default=70)
    parser.add_argument("--n", type=int, default=70)
    parser.add_argument("--k", type=int, default=48)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = getattr(torch, args.dtype)
    gen = torch.Generator().manual_seed(args.seed)
    a = torch.randn(args.m, args.k, generator=gen).to(device, dtype)
    b = torch.randn(args.k, args.n, generator=gen).to(device, dtype)
    c = matmul(a, b, bug=args.bug)
    ref = (a.float() @ b.float()).to(dtype)
    err = (c.float() - ref.float()).abs().max().item()
    print(f"matmul M={args.m} N={args.n} K={args.k} dtype={args.dtype} bug={args.bug}: max abs error {err:.3g}")
    if args.bug == "none":
        # c rounds a float32 sum of K products, whose entries grow like sqrt(K): scale atol with it
        tol = {"float32": 1e-4, "bfloat16": 1.6e-2, "float16": 1e-3}[args.dtype]
        torch.testing.assert_close(c, ref, atol=tol * args.k ** 0.5, rtol=tol)
    return err


if __name__ == "__main__":
    main()
