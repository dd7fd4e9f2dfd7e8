"""Layer norm forward: ``y = (x - mean) / sqrt(var + eps) * weight + bias`` over the last dim.

One program per row; the row fits one block of ``next_power_of_2(n_cols)`` lanes. The kernel
also saves each row's mean and reciprocal standard deviation (``rstd``), as a backward pass
would need them. Statistics are computed in float32 whatever the input dtype: ``--dtype
bfloat16``/``float16`` inputs are upcast after the load, and ``y`` is rounded once to the output's
dtype when stored.

Buggy variant (``--bug``):

* ``weight_mask``: the weight and bias are loaded without the column mask ("they are only
  ``n_cols`` long and every program needs all of them"); every program reads
  ``weight[n_cols:BLOCK_SIZE]`` and ``bias[n_cols:BLOCK_SIZE]``, past their ends.

Run::

    python examples/layer_norm.py --rows 33 --cols 300
    tritonkit check -- python examples/layer_norm.py --dtype bfloat16
    tritonkit check -- python examples/layer_norm.py --bug weight_mask

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

BUGS = ("none", "weight_mask")
DTYPES = ("float32", "bfloat16", "float16")


@triton.jit
def _layer_norm_fwd_kernel(
    Y_ptr, Y_row_stride, X_ptr, X_row_stride, W_ptr, B_ptr, Mean_ptr, RSTD_ptr,
    n_cols, eps, BLOCK_SIZE: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(X_ptr + row * X_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(W_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(B_ptr + cols, mask=mask, other=0.0).to(tl.float32)

    mean = tl.sum(x, axis=0) / n_cols
    xc = tl.where(mask, x - mean, 0.0)
    var = tl.sum(xc * xc, axis=0) / n_cols
    rstd = tl.rsqrt(var + eps)
    tl.store(Mean_ptr + row, mean)
    tl.store(RSTD_ptr + row, rstd)

    y = xc * rstd * w + b
    tl.store(Y_ptr + row * Y_row_stride + cols, y.to(Y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _layer_norm_fwd_kernel_weight_unmasked(
    Y_ptr, Y_row_stride, X_ptr, X_row_stride, W_ptr, B_ptr, Mean_ptr, RSTD_ptr,
    n_cols, eps, BLOCK_SIZE: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(X_ptr + row * X_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(W_ptr + cols).to(tl.float32)  # BUG: weight_mask
    b = tl.load(B_ptr + cols).to(tl.float32)  # BUG: weight_mask

    mean = tl.sum(x, axis=0) / n_cols
    xc = tl.where(mask, x - mean, 0.0)
    var = tl.sum(xc * xc, axis=0) / n_cols
    rstd = tl.rsqrt(var + eps)
    tl.store(Mean_ptr + row, mean)
    tl.store(RSTD_ptr + row, rstd)

    y = xc * rstd * w + b
    tl.store(Y_ptr + row * Y_row_stride + cols, y.to(Y_ptr.dtype.element_ty), mask=mask)


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5,
               bug: str = "none"):
    """Layer norm over the last dimension of ``x``.

    Args:
        x: ``(..., n_cols)`` float16/bfloat16/float32 tensor; it is viewed as ``(n_rows, n_cols)``
            (copied first if its last dimension is not contiguous or it cannot be viewed so).
        weight, bias: ``(n_cols,)`` contiguous tensors on ``x``'s device.
        eps: added to the variance.
        bug: ``"none"`` for the correct kernel, or one of the buggy variants in :data:`BUGS`.

    Returns:
        ``(y, mean, rstd)``: ``y`` of ``x``'s shape and dtype (contiguous); ``mean`` and ``rstd``
        float32 of shape ``(n_rows,)``.

    Raises:
        ValueError: if ``weight``/``bias`` do not have shape ``(n_cols,)`` or ``bug`` is unknown.
    """
    if bug not in BUGS:
        raise ValueError(f"unknown bug {bug!r}; choose one of {BUGS}")
    n_cols = x.shape[-1]
    if weight.shape != (n_cols,) or bias.shape != (n_cols,):
        raise ValueError(f"weight and bias must have shape ({n_cols},), got {tuple(weight.shape)} "
                         f"and {tuple(bias.shape)}")
    weight, bias = weight.contiguous(), bias.contiguous()
    shape = x.shape
    x2 = x.reshape(-1, n_cols)
    if x2.stride(-1) != 1:
        x2 = x2.contiguous()
    n_rows = x2.shape[0]
    y = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    mean = torch.empty(n_rows, dtype=torch.float32, device=x.device)
    rstd = torch.empty(n_rows, dtype=torch.float32, device=x.device)
    BLOCK_SIZE = triton.next_power_of_2(n_cols)
    kernel = _layer_norm_fwd_kernel_weight_unmasked if bug == "weight_mask" else _layer_norm_fwd_kernel
    kernel[(n_rows,)](y, y.stride(0), x2, x2.stride(0), weight, bias, mean, rstd, n_cols, eps,
                      BLOCK_SIZE=BLOCK_SIZE, num_warps=4)
    return y.reshape(shape), mean, rstd


def main(argv=None) -> float:
    """Run :func:`layer_norm` on random data, compare with ``torch.nn.functional.layer_norm``.

    Args:
        argv: command-line arguments (None: ``sys.argv[1:]``).

    Returns:
        the max absolute error of ``y`` against PyTorch's layer norm computed in float32 and
        rounded to the input's dtype.

    Raises:
        AssertionError: if the correct kernel (``--bug none``) misses the reference by more than the
            dtype's tolerance (the buggy variant only prints its error: finding it is tritonkit's job).
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bug", choices=BUGS, default="none")
    parser.add_argument("--dtype", choices=DTYPES, default="float32")
    parser.add_argument("--rows", type=int, default=33)
    parser.add_argument("--cols", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = getattr(torch, args.dtype)
    gen = torch.Generator().manual_seed(args.seed)
    x = torch.randn(args.rows, args.cols, generator=gen).to(device, dtype)
    w = torch.randn(args.cols, generator=gen).to(device, dtype)
    b = torch.randn(args.cols, generator=gen).to(device, dtype)
    y, _, _ = layer_norm(x, w, b, bug=args.bug)
    ref = torch.nn.functional.layer_norm(x.float(), (args.cols,), w.float(), b.float(), eps=1e-5).to(dtype)
    err = (y.float() - ref.float()).abs().max().item()
    print(f"layer_norm rows={args.rows} cols={args.cols} dtype={args.dtype} bug={args.bug}: max abs error {err:.3g}")
    if args.bug == "none":
        torch.testing.assert_close(y, ref)
    return err


if __name__ == "__main__":
    main()
