"""Fused row softmax: one program per row, the whole row in one block.

``BLOCK_SIZE`` is ``next_power_of_2(n_cols)``, so the lanes past ``n_cols`` are masked off and
loaded as ``-inf`` (they then contribute ``exp(-inf) = 0`` to the sum). The input may be a
strided view (e.g. the first ``n_cols`` columns of a wider buffer): rows are addressed with the
input's own row stride. The row is loaded in the input's dtype and computed in float32 (``--dtype
bfloat16``/``float16`` inputs are upcast after the load), and the result is rounded once to the
output's dtype when stored.

Buggy variants (``--bug``):

* ``row_stride``: the launcher passes ``n_cols`` as the input's row stride, as if the input were
  contiguous. On a column slice of a wider tensor, rows after the first read columns outside the
  view (the wider tensor's padding, or the next row).
* ``mask_off_by_one``: a kernel whose mask is ``cols <= n_cols``; every row reads and writes one
  element too many, which on a contiguous input is the next row's first element, and for the last
  row lies past the end of the input and of the output.
* ``no_max_subtraction``: a kernel that computes ``exp(x)`` instead of ``exp(x - max(x))``. The
  two are equal after normalization, and on ``randn`` inputs the results match; but float32
  ``exp`` overflows to ``inf`` for ``x > 88.7``, and a row with one such logit becomes ``inf /
  inf = nan``. The script scales the logits (``--scale``, default 30 for this bug, so a few reach
  ~100, as large unnormalized logits do); ``tritonkit check --nan`` points at the ``tl.exp``
  that made the ``inf``. The correct kernel gives the same inputs no trouble.

Run::

    python examples/softmax.py --rows 37 --cols 100
    tritonkit check -- python examples/softmax.py --dtype bfloat16
    tritonkit check -- python examples/softmax.py --bug row_stride
    tritonkit check --nan -- python examples/softmax.py --bug no_max_subtraction

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

BUGS = ("none", "row_stride", "mask_off_by_one", "no_max_subtraction")
DTYPES = ("float32", "bfloat16", "float16")


@triton.jit
def _softmax_fwd_kernel(Y_ptr, Y_row_stride, X_ptr, X_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(X_ptr + row * X_row_stride + cols, mask=mask, other=-float("inf"))  # REPORTED: row_stride
    x = x.to(tl.float32)
    x_max = tl.max(x, axis=0)
    num = tl.exp(x - x_max)
    den = tl.sum(num, axis=0)
    y = num / den
    tl.store(Y_ptr + row * Y_row_stride + cols, y.to(Y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _softmax_fwd_kernel_off_by_one(Y_ptr, Y_row_stride, X_ptr, X_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols <= n_cols  # BUG: mask_off_by_one
    x = tl.load(X_ptr + row * X_row_stride + cols, mask=mask, other=-float("inf"))  # REPORTED: mask_off_by_one
    x = x.to(tl.float32)
    x_max = tl.max(x, axis=0)
    num = tl.exp(x - x_max)
    den = tl.sum(num, axis=0)
    y = num / den
    tl.store(Y_ptr + row * Y_row_stride + cols, y.to(Y_ptr.dtype.element_ty), mask=mask)  # REPORTED: mask_off_by_one


@triton.jit
def _softmax_fwd_kernel_no_max(Y_ptr, Y_row_stride, X_ptr, X_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(X_ptr + row * X_row_stride + cols, mask=mask, other=-float("inf"))
    x = x.to(tl.float32)
    num = tl.exp(x)  # REPORTED: no_max_subtraction
    den = tl.sum(num, axis=0)
    y = num / den
    tl.store(Y_ptr + row * Y_row_stride + cols, y.to(Y_ptr.dtype.element_ty), mask=mask)


def softmax(x: torch.Tensor, bug: str = "none") -> torch.Tensor:
    """Softmax over the last dimension of a 2-D tensor.

    Args:
        x: ``(n_rows, n_cols)`` float16/bfloat16/float32 tensor whose last dimension has stride 1
            (rows may be strided, e.g. ``wide[:, :n_cols]``).
        bug: ``"none"`` for the correct kernel, or one of the buggy variants in :data:`BUGS`.

    Returns:
        a new contiguous ``(n_rows, n_cols)`` tensor of ``x``'s dtype.

    Raises:
        ValueError: if ``x`` is not 2-D, its last dimension is not contiguous, or ``bug`` is unknown.
    """
    if bug not in BUGS:
        raise ValueError(f"unknown bug {bug!r}; choose one of {BUGS}")
    if x.dim() != 2 or x.stride(1) != 1:
        raise ValueError(f"x must be 2-D with a contiguous last dimension, got shape {tuple(x.shape)} "
                         f"strides {x.stride()}")
    n_rows, n_cols = x.shape
    y = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    BLOCK_SIZE = triton.next_power_of_2(n_cols)
    x_row_stride = x.stride(0)
    if bug == "row_stride":
        x_row_stride = n_cols  # BUG: row_stride
    kernel = {"mask_off_by_one": _softmax_fwd_kernel_off_by_one,
              "no_max_subtraction": _softmax_fwd_kernel_no_max}.get(bug, _softmax_fwd_kernel)
    num_warps = 4 if BLOCK_SIZE <= 2048 else 8
    kernel[(n_rows,)](y, y.stride(0), x, x_row_stride, n_cols, BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps)
    return y


def main(argv=None) -> float:
    """Run :func:`softmax` on random data, compare with ``torch.softmax`` and print the max error.

    The input is the first ``--cols`` columns of a ``(rows, cols + --pad)`` tensor, so it is
    contiguous only with ``--pad 0``. Its values are ``randn`` times ``--scale``.

    Args:
        argv: command-line arguments (None: ``sys.argv[1:]``).

    Returns:
        the max absolute error against ``torch.softmax`` computed in float32 and rounded to the
        input's dtype.

    Raises:
        AssertionError: if the correct kernel (``--bug none``) misses the reference by more than the
            dtype's tolerance (the buggy variants only print their error: finding them is
            tritonkit's job).
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bug", choices=BUGS, default="none")
    parser.add_argument("--dtype", choices=DTYPES, default="float32")
    parser.add_argument("--rows", type=int, default=37)
    parser.add_argument("--cols", type=int, default=100)
    parser.add_argument("--pad", type=int, default=None,
                        help="extra columns of the underlying buffer (default: 28, or 0 for mask_off_by_one)")
    parser.add_argument("--scale", type=float, default=None,
                        help="factor of the random logits (default: 1, or 30 for no_max_subtraction)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    pad = args.pad if args.pad is not None else (0 if args.bug == "mask_off_by_one" else 28)
    scale = args.scale if args.scale is not None else (30.0 if args.bug == "no_max_subtraction" else 1.0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = getattr(torch, args.dtype)
    gen = torch.Generator().manual_seed(args.seed)
    wide = (torch.randn(args.rows, args.cols + pad, generator=gen) * scale).to(device, dtype)
    x = wide[:, : args.cols]
    y = softmax(x, bug=args.bug)
    ref = torch.softmax(x.float(), dim=-1).to(dtype)
    err = (y.float() - ref.float()).abs().max().item()
    print(f"softmax rows={args.rows} cols={args.cols} pad={pad} scale={scale:g} dtype={args.dtype} bug={args.bug}: "
          f"max abs error {err:.3g}")
    if args.bug == "none":
        torch.testing.assert_close(y, ref)
    return err


if __name__ == "__main__":
    main()
