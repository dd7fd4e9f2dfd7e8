"""Weight-gradient accumulation over micro-batches: ``dw += x^T @ dy`` for each micro-batch.

The backward pass of a linear layer ``y = x @ w`` gives ``dw = x^T @ dy``. With gradient
accumulation the step's batch is split into micro-batches, and each one's ``x^T @ dy`` is added
to ``dw``: one launch per micro-batch, one program per ``BLOCK_K x BLOCK_N`` tile of ``dw``. A
program multiplies its slices of ``x`` and ``dy`` over the micro-batch's rows (float32
accumulation, ``tl.dot`` with ``input_precision="ieee"``), then loads its tile of ``dw``, adds
and stores it back, rounded to ``dw``'s dtype (that of ``w``: ``--dtype`` float32, bfloat16 or
float16). Each tile belongs to one program, so the read-modify-write needs no atomics; ``dw``
must start as zeros.

Buggy variant (``--bug``):

* ``empty_grad``: ``dw`` is allocated with ``torch.empty_like(w)`` instead of
  ``torch.zeros_like(w)``; the first micro-batch adds its product to whatever the allocator left
  in that memory (often zeros for a fresh allocation, so tests pass, then garbage once memory is
  reused). Only the first launch reads uninitialized memory: later ones read what it stored.

Run::

    python examples/grad_accumulate.py --micro-batches 3 --rows 32
    tritonkit check -- python examples/grad_accumulate.py --dtype bfloat16
    tritonkit check -- python examples/grad_accumulate.py --bug empty_grad
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

BUGS = ("none", "empty_grad")
DTYPES = ("float32", "bfloat16", "float16")


@triton.jit
def _dw_accumulate_kernel(
    x_ptr, dy_ptr, dw_ptr, B, K, N, stride_xb, stride_xk, stride_dyb, stride_dyn, stride_dwk, stride_dwn,
    BLOCK_B: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_N: tl.constexpr,
):
    offs_k = tl.program_id(0) * BLOCK_K + tl.arange(0, BLOCK_K)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_K, BLOCK_N), dtype=tl.float32)
    for b0 in range(0, B, BLOCK_B):
        offs_b = b0 + tl.arange(0, BLOCK_B)
        # x^T: element (k, b) of the tile is x[b, k]
        xt = tl.load(x_ptr + offs_k[:, None] * stride_xk + offs_b[None, :] * stride_xb,
                     mask=(offs_k[:, None] < K) & (offs_b[None, :] < B), other=0.0)
        dy = tl.load(dy_ptr + offs_b[:, None] * stride_dyb + offs_n[None, :] * stride_dyn,
                     mask=(offs_b[:, None] < B) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(xt, dy, acc, input_precision="ieee")
    dw_ptrs = dw_ptr + offs_k[:, None] * stride_dwk + offs_n[None, :] * stride_dwn
    dw_mask = (offs_k[:, None] < K) & (offs_n[None, :] < N)
    dw = tl.load(dw_ptrs, mask=dw_mask, other=0.0)  # REPORTED: empty_grad
    tl.store(dw_ptrs, (dw.to(tl.float32) + acc).to(dw_ptr.dtype.element_ty), mask=dw_mask)


def accumulate_dw(dw: torch.Tensor, x: torch.Tensor, dy: torch.Tensor, block_b: int = 16, block_k: int = 32,
                  block_n: int = 32) -> torch.Tensor:
    """Add ``x^T @ dy`` to ``dw`` in place.

    Args:
        dw: ``(K, N)`` gradient buffer (float32/bfloat16/float16, any strides), updated in place.
        x: ``(B, K)`` layer inputs of one micro-batch (any strides, float dtype).
        dy: ``(B, N)`` gradients of the layer's outputs (any strides, ``x``'s dtype).
        block_b, block_k, block_n: tile sizes (powers of two, at least 16).

    Returns:
        ``dw``.

    Raises:
        ValueError: if the shapes do not match or the tensors are on different devices.
    """
    if x.dim() != 2 or dy.dim() != 2 or x.shape[0] != dy.shape[0] or dw.shape != (x.shape[1], dy.shape[1]):
        raise ValueError(f"need dw (K, N), x (B, K), dy (B, N); got {tuple(dw.shape)}, {tuple(x.shape)}, "
                         f"{tuple(dy.shape)}")
    if not (dw.device == x.device == dy.device):
        raise ValueError(f"dw, x and dy must be on one device, got {dw.device}, {x.device}, {dy.device}")
    (B, K), N = x.shape, dy.shape[1]
    grid = (triton.cdiv(K, block_k), triton.cdiv(N, block_n))
    _dw_accumulate_kernel[grid](x, dy, dw, B, K, N, x.stride(0), x.stride(1), dy.stride(0), dy.stride(1),
                                dw.stride(0), dw.stride(1), BLOCK_B=block_b, BLOCK_K=block_k, BLOCK_N=block_n)
    return dw


def weight_grad(w: torch.Tensor, micro_batches, bug: str = "none") -> torch.Tensor:
    """The weight gradient of ``y = x @ w`` summed over micro-batches.

    Args:
        w: ``(K, N)`` weight (its shape, dtype and device are those of the gradient).
        micro_batches: iterable of ``(x, dy)`` pairs, ``x`` of shape ``(B_i, K)`` and ``dy`` of
            shape ``(B_i, N)``, on ``w``'s device.
        bug: ``"none"`` for the correct version, or one of the buggy variants in :data:`BUGS`.

    Returns:
        a new tensor like ``w``: the sum of ``x^T @ dy`` over the micro-batches.

    Raises:
        ValueError: if ``bug`` is unknown, or as :func:`accumulate_dw`.
    """
    if bug not in BUGS:
        raise ValueError(f"unknown bug {bug!r}; choose one of {BUGS}")
    if bug == "empty_grad":
        dw = torch.empty_like(w)  # BUG: empty_grad
    else:
        dw = torch.zeros_like(w)
    for x, dy in micro_batches:
        accumulate_dw(dw, x, dy)
    return dw


def main(argv=None) -> float:
    """Run :func:`weight_grad` on random micro-batches, compare with PyTorch and print the max error.

    The reference accumulates ``x.float().T @ dy.float()`` in float32 and rounds to ``w``'s dtype
    after each micro-batch, as the kernel does. The kernel sums in another order, so each rounding
    may go to the neighbouring value: the tolerance is one unit in the last place of the largest
    intermediate ``dw`` per micro-batch, plus one.

    Args:
        argv: command-line arguments (None: ``sys.argv[1:]``).

    Returns:
        the max absolute error of ``dw`` against that reference.

    Raises:
        AssertionError: if the correct version (``--bug none``) misses the reference by more than
            the dtype's tolerance (the buggy variant only prints its error: finding it is
            tritonkit's job).
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bug", choices=BUGS, default="none")
    parser.add_argument("--dtype", choices=DTYPES, default="float32")
    parser.add_argument("--in-features", type=int, default=64)
    parser.add_argument("--out-features", type=int, default=48)
    parser.add_argument("--micro-batches", type=int, default=3)
    parser.add_argument("--rows", type=int, default=32, help="rows per micro-batch")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = getattr(torch, args.dtype)
    gen = torch.Generator().manual_seed(args.seed)
    w = torch.randn(args.in_features, args.out_features, generator=gen).to(device, dtype)
    batches = [(torch.randn(args.rows, args.in_features, generator=gen).to(device, dtype),
                torch.randn(args.rows, args.out_features, generator=gen).to(device, dtype))
               for _ in range(args.micro_batches)]
    dw = weight_grad(w, batches, bug=args.bug)
    ref, largest = torch.zeros_like(w), 0.0
    for x, dy in batches:
        ref = (ref.float() + x.float().T @ dy.float()).to(dtype)
        largest = max(largest, ref.abs().max().item())
    err = (dw.float() - ref.float()).abs().max().item()
    print(f"grad_accumulate w={args.in_features}x{args.out_features} micro_batches={args.micro_batches} "
          f"rows={args.rows} dtype={args.dtype} bug={args.bug}: max abs error {err:.3g}")
    if args.bug == "none":
        ulp = torch.finfo(dtype).eps * largest
        torch.testing.assert_close(dw, ref, rtol=0, atol=(args.micro_batches + 1) * ulp)
    return err


if __name__ == "__main__":
    main()
