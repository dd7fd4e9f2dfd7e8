"""Histogram of int32 values: ``counts[b] = number of i with x[i] == b`` for ``b < num_bins``.

One 1-D block of ``BLOCK_SIZE`` values per program (the tail of the last block is masked). Each
program adds 1 to the bin of each of its values with ``tl.atomic_add(counts + bins, 1)``: many
programs (and many lanes of one program) hit the same bins, and the atomics make every increment
count. Values outside ``[0, num_bins)`` are skipped. ``counts`` is int32, allocated with
``torch.zeros``.

Buggy variant (``--bug``):

* ``plain_store``: the increment is a read-modify-write without atomics: load the counts of the
  block's bins, add 1, store them back. Two programs that do this for the same bin both read the
  old count, and one increment is lost; on a GPU which ones varies from run to run. (Lanes of one
  program with the same value lose their increments the same way, so here the counts come out
  wrong even in Triton's interpreter, where programs run one after another.)

Run::

    python examples/histogram.py --n 5000 --bins 64
    tritonkit check -- python examples/histogram.py
    tritonkit check -- python examples/histogram.py --bug plain_store
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

BUGS = ("none", "plain_store")


@triton.jit
def _histogram_kernel(x_ptr, counts_ptr, n_elements, num_bins, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    bins = tl.load(x_ptr + offsets, mask=offsets < n_elements, other=-1)
    mask = (bins >= 0) & (bins < num_bins)
    tl.atomic_add(counts_ptr + bins, 1, mask=mask)


@triton.jit
def _histogram_kernel_plain_store(x_ptr, counts_ptr, n_elements, num_bins, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    bins = tl.load(x_ptr + offsets, mask=offsets < n_elements, other=-1)
    mask = (bins >= 0) & (bins < num_bins)
    counts = tl.load(counts_ptr + bins, mask=mask)  # REPORTED: plain_store
    tl.store(counts_ptr + bins, counts + 1, mask=mask)  # REPORTED: plain_store


def histogram(x: torch.Tensor, num_bins: int, block_size: int = 256, bug: str = "none") -> torch.Tensor:
    """Count the values of ``x`` in each of the bins ``0, 1, ..., num_bins - 1``.

    Args:
        x: 1-D contiguous int32 tensor; values outside ``[0, num_bins)`` are not counted.
        num_bins: number of bins (positive).
        block_size: values per program (a power of two).
        bug: ``"none"`` for the correct kernel, or one of the buggy variants in :data:`BUGS`.

    Returns:
        a new int32 tensor of shape ``(num_bins,)`` on ``x``'s device.

    Raises:
        ValueError: if ``x`` is not a 1-D contiguous int32 tensor, ``num_bins`` is not positive, or
            ``bug`` is unknown.
    """
    if bug not in BUGS:
        raise ValueError(f"unknown bug {bug!r}; choose one of {BUGS}")
    if x.dtype != torch.int32 or x.dim() != 1 or not x.is_contiguous():
        raise ValueError(f"x must be a 1-D contiguous int32 tensor, got {x.dtype} of shape {tuple(x.shape)}")
    if num_bins < 1:
        raise ValueError(f"num_bins must be positive, got {num_bins}")
    counts = torch.zeros(num_bins, dtype=torch.int32, device=x.device)
    n = x.numel()
    kernel = _histogram_kernel_plain_store if bug == "plain_store" else _histogram_kernel
    kernel[(triton.cdiv(n, block_size),)](x, counts, n, num_bins, BLOCK_SIZE=block_size)
    return counts


def main(argv=None) -> float:
    """Run :func:`histogram` on random values, compare with ``torch.bincount`` and print the max error.

    The values are drawn from ``[-3, bins + 3)``, so a few fall outside the bins.

    Args:
        argv: command-line arguments (None: ``sys.argv[1:]``).

    Returns:
        the max absolute difference of the counts.

    Raises:
        AssertionError: if the correct kernel (``--bug none``) does not count exactly (the buggy
            variant only prints its error: finding it is tritonkit's job).
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bug", choices=BUGS, default="none")
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument("--bins", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    gen = torch.Generator().manual_seed(args.seed)
    x = torch.randint(-3, args.bins + 3, (args.n,), generator=gen, dtype=torch.int32).to(device)
    counts = histogram(x, args.bins, bug=args.bug)
    inside = x[(x >= 0) & (x < args.bins)].long()
    ref = torch.bincount(inside, minlength=args.bins).to(torch.int32)
    err = float((counts - ref).abs().max().item())
    print(f"histogram n={args.n} bins={args.bins} bug={args.bug}: max abs error {err:.3g}")
    if args.bug == "none":
        torch.testing.assert_close(counts, ref, rtol=0, atol=0)
    return err


if __name__ == "__main__":
    main()
