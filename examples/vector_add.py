"""Element-wise ``out = x + y`` with a ``@triton.heuristics``-chosen block size.

The kernel is written the way most element-wise Triton kernels are: one 1-D block of
``BLOCK_SIZE`` elements per program, and a mask for the tail of the last block. Two
heuristics pick the meta-parameters at launch time: ``BLOCK_SIZE`` from the problem size, and
``EVEN_N`` (the size is a multiple of the block, so the mask can be skipped).

Buggy variants (``--bug``):

* ``missing_mask``: a kernel written without masks; when ``n`` is not a multiple of
  ``BLOCK_SIZE`` the last program reads ``x``/``y`` and writes ``out`` past their ends.
* ``stale_even``: the right kernel, but an ``EVEN_N`` heuristic that still tests divisibility by
  the old fixed block (256) after ``BLOCK_SIZE`` became 1024 for large inputs; for ``n = 256 * k``
  with ``k`` not a multiple of 4 the unmasked branch runs on a partial last block.

``--dtype`` picks the element type (float32, bfloat16 or float16). The kernel adds in that type,
as compiled code does (a 16-bit sum is rounded to nearest even), so it matches PyTorch's own
``x + y`` exactly; the result is checked with the dtype's default tolerance.

Run::

    python examples/vector_add.py --n 1000
    tritonkit check -- python examples/vector_add.py --dtype bfloat16
    tritonkit check -- python examples/vector_add.py --bug missing_mask

(Without a GPU, run bfloat16 under ``tritonkit check``: Triton's own CPU interpreter does bfloat16
arithmetic on the raw bit patterns.)
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

BUGS = ("none", "missing_mask", "stale_even")
DTYPES = ("float32", "bfloat16", "float16")


@triton.jit
def _add_kernel_body(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr, EVEN_N: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    if EVEN_N:
        x = tl.load(x_ptr + offsets)  # REPORTED: stale_even
        y = tl.load(y_ptr + offsets)  # REPORTED: stale_even
        tl.store(out_ptr + offsets, x + y)  # REPORTED: stale_even
    else:
        mask = offsets < n_elements
        x = tl.load(x_ptr + offsets, mask=mask)
        y = tl.load(y_ptr + offsets, mask=mask)
        tl.store(out_ptr + offsets, x + y, mask=mask)


def _block_size(args) -> int:
    return 256 if args["n_elements"] < 8192 else 1024


_add_kernel = triton.heuristics({
    "BLOCK_SIZE": _block_size,
    "EVEN_N": lambda args: args["n_elements"] % args["BLOCK_SIZE"] == 0,
})(_add_kernel_body)

# EVEN_N was written when BLOCK_SIZE was always 256, and not updated when it changed.
_add_kernel_stale_even = triton.heuristics({
    "BLOCK_SIZE": _block_size,
    "EVEN_N": lambda args: args["n_elements"] % 256 == 0,  # BUG: stale_even
})(_add_kernel_body)


@triton.heuristics({"BLOCK_SIZE": _block_size})
@triton.jit
def _add_kernel_missing_mask(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + offsets)  # BUG: missing_mask
    y = tl.load(y_ptr + offsets)  # BUG: missing_mask
    tl.store(out_ptr + offsets, x + y)  # BUG: missing_mask


def add(x: torch.Tensor, y: torch.Tensor, bug: str = "none") -> torch.Tensor:
    """``x + y`` computed by a Triton kernel.

    Args:
        x, y: 1-D contiguous tensors of the same length ``n`` and floating dtype, on one device.
        bug: ``"none"`` for the correct kernel, or one of the buggy variants in :data:`BUGS`.

    Returns:
        a new tensor of shape ``(n,)`` and ``x``'s dtype.

    Raises:
        ValueError: if the shapes differ, a tensor is not 1-D and contiguous, or ``bug`` is unknown.
    """
    if bug not in BUGS:
        raise ValueError(f"unknown bug {bug!r}; choose one of {BUGS}")
    if x.shape != y.shape or x.dim() != 1:
        raise ValueError(f"x and y must be 1-D of one shape, got {tuple(x.shape)} and {tuple(y.shape)}")
    if not (x.is_contiguous() and y.is_contiguous()):
        raise ValueError("x and y must be contiguous")
    out = torch.empty_like(x)
    n = x.numel()
    kernel = {"none": _add_kernel, "missing_mask": _add_kernel_missing_mask,
              "stale_even": _add_kernel_stale_even}[bug]
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)  # noqa: E731
    kernel[grid](x, y, out, n)
    return out


def main(argv=None) -> float:
    """Run :func:`add` on random data, compare with PyTorch and print the max error.

    Args:
        argv: command-line arguments (None: ``sys.argv[1:]``).

    Returns:
        the max absolute error against ``x + y``.

    Raises:
        AssertionError: if the correct kernel (``--bug none``) misses ``x + y`` by more than the
            dtype's tolerance (the buggy variants only print their error: finding them is
            tritonkit's job).
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bug", choices=BUGS, default="none")
    parser.add_argument("--dtype", choices=DTYPES, default="float32")
    parser.add_argument("--n", type=int, default=None,
                        help="number of elements (default: 1000, or 8448 for --bug stale_even)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    n = args.n if args.n is not None else (8448 if args.bug == "stale_even" else 1000)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = getattr(torch, args.dtype)
    gen = torch.Generator().manual_seed(args.seed)
    x = torch.randn(n, generator=gen).to(device, dtype)
    y = torch.randn(n, generator=gen).to(device, dtype)
    out = add(x, y, bug=args.bug)
    ref = x + y
    err = (out.float() - ref.float()).abs().max().item()
    print(f"vector_add n={n} dtype={args.dtype} bug={args.bug}: max abs error {err:.3g}")
    if args.bug == "none":
        torch.testing.assert_close(out, ref)
    return err


if __name__ == "__main__":
    main()
