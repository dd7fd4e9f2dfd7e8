"""Split-K matmul ``c = a @ b``: the ``K`` loop is split over ``SPLIT_K`` programs per tile.

When ``M`` and ``N`` are small and ``K`` large, one program per ``BLOCK_M x BLOCK_N`` tile of
``c`` leaves most of a GPU idle. Split-K launches a 3-D grid ``(cdiv(M, BLOCK_M), cdiv(N,
BLOCK_N), SPLIT_K)``: program ``(i, j, s)`` computes the partial product of tile ``(i, j)`` over
the ``s``-th slice of ``K`` (masked loads, ``other=0``, for the tails of ``M``, ``N`` and ``K``)
and adds it into ``c`` with ``tl.atomic_add``, so ``c`` must start as zeros. The partial
products are accumulated in float32 (``tl.dot`` with ``input_precision="ieee"``), and ``c`` is
float32 whatever the inputs' dtype (``--dtype`` float32, bfloat16 or float16).

Buggy variants (``--bug``):

* ``no_atomics``: the partial tile is written with ``tl.store`` instead of ``tl.atomic_add``; the
  ``SPLIT_K`` programs of a tile race to write it, and ``c`` ends up holding one slice's partial
  product (whichever program wrote last).
* ``empty_output``: ``c`` is allocated with ``torch.empty`` instead of ``torch.zeros``; the
  atomic adds read (and add to) whatever the allocator left in that memory.

Run::

    python examples/split_k_matmul.py --m 40 --n 24 --k 300
    tritonkit check -- python examples/split_k_matmul.py --dtype bfloat16
    tritonkit check -- python examples/split_k_matmul.py --bug no_atomics
"""
from __future__ import annotations

import argparse
import os

import torch

if __name__ == "__main__" and not torch.cuda.is_available():
    # No GPU: run in Triton's CPU interpreter (must be set before the kernels are decorated).
    os.environ.setdefault("TRITON_INTERPRET", "1")

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

BUGS = ("none", "no_atomics", "empty_output")
DTYPES = ("float32", "bfloat16", "float16")


@triton.jit
def _split_k_matmul_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT_K: tl.constexpr,
    USE_ATOMICS: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    pid_k = tl.program_id(2)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    # program pid_k takes the K blocks pid_k, pid_k + SPLIT_K, pid_k + 2 * SPLIT_K, ...
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(pid_k * BLOCK_K, K, BLOCK_K * SPLIT_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        a = tl.load(a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak,
                    mask=(offs_m[:, None] < M) & (offs_k[None, :] < K), other=0.0)
        b = tl.load(b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                    mask=(offs_k[:, None] < K) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    c_mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    if USE_ATOMICS:
        tl.atomic_add(c_ptrs, acc, mask=c_mask)  # REPORTED: empty_output
    else:
        tl.store(c_ptrs, acc, mask=c_mask)  # REPORTED: no_atomics


def split_k_matmul(a: torch.Tensor, b: torch.Tensor, split_k: int = 4, block_m: int = 32, block_n: int = 32,
                   block_k: int = 32, bug: str = "none") -> torch.Tensor:
    """``a @ b`` computed by a split-K Triton kernel.

    Args:
        a: ``(M, K)`` float32/bfloat16/float16 tensor (any strides).
        b: ``(K, N)`` tensor of ``a``'s dtype and device (any strides).
        split_k: programs per tile of ``c``, each summing an interleaved share of the ``K`` blocks.
        block_m, block_n, block_k: tile sizes (powers of two, at least 16).
        bug: ``"none"`` for the correct kernel, or one of the buggy variants in :data:`BUGS`.

    Returns:
        a new contiguous float32 tensor of shape ``(M, N)``.

    Raises:
        ValueError: if the shapes do not match, the dtypes or devices differ, or ``bug`` is unknown.
    """
    if bug not in BUGS:
        raise ValueError(f"unknown bug {bug!r}; choose one of {BUGS}")
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"cannot multiply shapes {tuple(a.shape)} and {tuple(b.shape)}")
    if a.dtype != b.dtype or a.device != b.device:
        raise ValueError(f"a and b must share dtype and device, got {a.dtype}/{a.device} and {b.dtype}/{b.device}")
    (M, K), N = a.shape, b.shape[1]
    if bug == "empty_output":
        c = torch.empty((M, N), dtype=torch.float32, device=a.device)  # BUG: empty_output
    else:
        c = torch.zeros((M, N), dtype=torch.float32, device=a.device)
    grid = (triton.cdiv(M, block_m), triton.cdiv(N, block_n), split_k)
    _split_k_matmul_kernel[grid](
        a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, SPLIT_K=split_k, USE_ATOMICS=bug != "no_atomics")
    return c


def main(argv=None) -> float:
    """Run :func:`split_k_matmul` on random data, compare with ``a.float() @ b.float()``.

    Args:
        argv: command-line arguments (None: ``sys.argv[1:]``).

    Returns:
        the max absolute error against the float32 product of the inputs.

    Raises:
        AssertionError: if the correct kernel (``--bug none``) misses the reference by more than
            ``1e-4`` (absolute and relative; the buggy variants only print their error: finding
            them is tritonkit's job).
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bug", choices=BUGS, default="none")
    parser.add_argument("--dtype", choices=DTYPES, default="float32")
    parser.add_argument("--m", type=int, default=40)
    parser.add_argument("--n", type=int, default=24)
    parser.add_argument("--k", type=int, default=300)
    parser.add_argument("--split-k", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = getattr(torch, args.dtype)
    gen = torch.Generator().manual_seed(args.seed)
    a = torch.randn(args.m, args.k, generator=gen).to(device, dtype)
    b = torch.randn(args.k, args.n, generator=gen).to(device, dtype)
    c = split_k_matmul(a, b, split_k=args.split_k, bug=args.bug)
    ref = a.float() @ b.float()
    err = (c - ref).abs().max().item()
    print(f"split_k_matmul m={args.m} n={args.n} k={args.k} split_k={args.split_k} dtype={args.dtype} "
          f"bug={args.bug}: max abs error {err:.3g}")
    if args.bug == "none":
        torch.testing.assert_close(c, ref, atol=1e-4, rtol=1e-4)
    return err


if __name__ == "__main__":
    main()
