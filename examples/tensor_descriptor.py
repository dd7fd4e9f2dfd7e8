"""Bias + ReLU over a matrix, ``y = relu(x + bias[None, :])``, through host-side tensor descriptors.

The launcher describes ``x`` and ``y`` with :class:`triton.tools.tensor_descriptor.TensorDescriptor`
(shape, strides and the block each program moves) and the kernel moves whole
``BLOCK_M x BLOCK_N`` tiles with ``desc.load([off_m, off_n])`` / ``desc.store(...)``. The
descriptor does the bounds handling: lanes outside its *shape* are read as zero and not written.
So the kernel is only as safe as the shape and strides the host put in the descriptor.

Descriptor constraints (checked by ``TensorDescriptor`` and by the interpreter): the base
address and every stride but the last must be 16-byte aligned, the last stride must be 1, and the
block's column offset must be 16-byte aligned: for float32, ``x.stride(0) % 4 == 0`` and
``BLOCK_N % 4 == 0``; for bfloat16/float16 (``--dtype``), multiples of 8. The kernel adds and
clamps in the input's dtype, as PyTorch does, so the result matches ``torch.relu(x + bias)``.

Buggy variants (``--bug``), both on the host:

* ``padded_shape``: the descriptors are built with the shape rounded up to whole blocks ("so
  every tile is full"); the descriptor then lets through lanes past the last row and column.
  Lanes past the last column of a row wrap to the next row (silently read and overwritten); the
  ones past the end of the tensor are out of bounds.
* ``contiguous_strides``: the input is a column slice of a wider buffer, but its descriptor is
  built with the strides of a contiguous tensor (``[n_cols, 1]``), so rows after the first are
  read from the wrong place, partly outside the view.

Run::

    python examples/tensor_descriptor.py --m 70 --n 100
    tritonkit check -- python examples/tensor_descriptor.py --dtype bfloat16
    tritonkit check -- python examples/tensor_descriptor.py --bug padded_shape

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
from triton.tools.tensor_descriptor import TensorDescriptor  # noqa: E402

BUGS = ("none", "padded_shape", "contiguous_strides")
DTYPES = ("float32", "bfloat16", "float16")


@triton.jit
def _bias_relu_kernel(x_desc, y_desc, bias_ptr, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    off_m = pid_m * BLOCK_M
    off_n = pid_n * BLOCK_N
    x = x_desc.load([off_m, off_n])  # REPORTED: padded_shape, contiguous_strides
    cols = off_n + tl.arange(0, BLOCK_N)
    bias = tl.load(bias_ptr + cols, mask=cols < N, other=0.0)
    y = tl.maximum(x + bias[None, :], 0.0)
    y_desc.store([off_m, off_n], y.to(y_desc.dtype))  # REPORTED: padded_shape


def bias_relu(x: torch.Tensor, bias: torch.Tensor, block_m: int = 32, block_n: int = 32,
              bug: str = "none") -> torch.Tensor:
    """``relu(x + bias)`` with ``bias`` broadcast over the rows, by a descriptor-based kernel.

    Args:
        x: ``(M, N)`` float32, bfloat16 or float16 tensor with a contiguous last dimension and a
            16-byte aligned row stride (float32: ``x.stride(0) % 4 == 0``, 16-bit: ``% 8``) and
            data pointer; may be a column slice of a wider one.
        bias: ``(N,)`` tensor of ``x``'s dtype and device.
        block_m, block_n: the tile each program moves (powers of two, ``block_n`` elements at
            least 16 bytes: ``>= 4`` for float32, ``>= 8`` for 16-bit types).
        bug: ``"none"`` for the correct launcher, or one of the buggy variants in :data:`BUGS`.

    Returns:
        a new contiguous ``(M, N)`` tensor of ``x``'s dtype.

    Raises:
        ValueError: if the shapes, dtypes, strides or blocks break the descriptor constraints
            above, or ``bug`` is unknown.
    """
    if bug not in BUGS:
        raise ValueError(f"unknown bug {bug!r}; choose one of {BUGS}")
    if x.dim() != 2 or bias.shape != (x.shape[1],):
        raise ValueError(f"x must be (M, N) and bias (N,), got {tuple(x.shape)} and {tuple(bias.shape)}")
    if x.dtype != bias.dtype or x.dtype not in (torch.float32, torch.bfloat16, torch.float16):
        raise ValueError(f"x and bias must both be float32, bfloat16 or float16, got {x.dtype} and {bias.dtype}")
    align = 16 // x.element_size()  # elements per 16 bytes
    if x.stride(1) != 1 or x.stride(0) % align or x.data_ptr() % 16:
        raise ValueError(f"x needs a contiguous last dimension and 16-byte aligned rows, got strides {x.stride()}")
    if block_n < align or block_n & (block_n - 1) or block_m & (block_m - 1):
        raise ValueError(f"blocks must be powers of two with block_n >= {align}, got {block_m}x{block_n}")
    M, N = x.shape
    bias = bias.contiguous()
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    block = [block_m, block_n]
    if bug == "padded_shape":
        padded = [triton.cdiv(M, block_m) * block_m, triton.cdiv(N, block_n) * block_n]
        x_desc = TensorDescriptor(x, padded, list(x.stride()), block)  # BUG: padded_shape
        y_desc = TensorDescriptor(y, padded, list(y.stride()), block)  # BUG: padded_shape
    elif bug == "contiguous_strides":
        x_desc = TensorDescriptor(x, [M, N], [N, 1], block)  # BUG: contiguous_strides
        y_desc = TensorDescriptor.from_tensor(y, block)
    else:
        x_desc = TensorDescriptor.from_tensor(x, block)
        y_desc = TensorDescriptor.from_tensor(y, block)
    grid = (triton.cdiv(M, block_m), triton.cdiv(N, block_n))
    _bias_relu_kernel[grid](x_desc, y_desc, bias, N, BLOCK_M=block_m, BLOCK_N=block_n)
    return y


def main(argv=None) -> float:
    """Run :func:`bias_relu` on random data, compare with PyTorch and print the max error.

    The input is the first ``--n`` columns of an ``(m, n + --pad)`` buffer of ``--dtype``.

    Args:
        argv: command-line arguments (None: ``sys.argv[1:]``).

    Returns:
        the max absolute error against ``torch.relu(x + bias)``.

    Raises:
        AssertionError: if the correct launcher (``--bug none``) misses the reference by more than
            the dtype's tolerance (the buggy variants only print their error: finding them is
            tritonkit's job).
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bug", choices=BUGS, default="none")
    parser.add_argument("--dtype", choices=DTYPES, default="float32")
    parser.add_argument("--m", type=int, default=70)
    parser.add_argument("--n", type=int, default=None,
                        help="columns, a multiple of 4 for float32 and of 8 for 16-bit dtypes "
                             "(default: 100 for float32, 96 for 16-bit dtypes)")
    parser.add_argument("--pad", type=int, default=None,
                        help="extra columns of the input's buffer, a multiple of 4 (float32) or 8 (16-bit) "
                             "(default: 28 (float32) or 24 (16-bit) for contiguous_strides, else 0)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    dtype = getattr(torch, args.dtype)
    align = 16 // dtype.itemsize  # elements per 16 bytes: rows must be whole 16-byte units
    n = args.n if args.n is not None else 100 // align * align
    pad = args.pad if args.pad is not None else (28 // align * align if args.bug == "contiguous_strides" else 0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    gen = torch.Generator().manual_seed(args.seed)
    buf = torch.randn(args.m, n + pad, generator=gen).to(device, dtype)
    x = buf[:, :n]
    bias = torch.randn(n, generator=gen).to(device, dtype)
    y = bias_relu(x, bias, bug=args.bug)
    ref = torch.relu(x + bias)
    err = (y.float() - ref.float()).abs().max().item()
    print(f"tensor_descriptor M={args.m} N={n} pad={pad} dtype={args.dtype} bug={args.bug}: "
          f"max abs error {err:.3g}")
    if args.bug == "none":
        torch.testing.assert_close(y, ref)
    return err


if __name__ == "__main__":
    main()
