"""The kernels of ``benchmarks/tune_gpu.py``: a bf16 matmul with grouped program ordering (the
kernel of the shared H100 landscape: BM, BN, BK, GM meta-parameters), autotuned by Triton or by
tritonkit as ``TK_TUNER`` says (``triton`` | ``tritonkit``), over ``TK_SPACE`` (``12``: twelve
configs; ``384``: the landscape's space), with ``TK_STRATEGY``/``TK_BUDGET``/``TK_SEED`` for
tritonkit."""
from __future__ import annotations

import itertools
import os

import triton
import triton.language as tl


def configs_12():
    """Triton's matmul tutorial's eight fp16 configs and four more around its 8192^3 winner."""
    rows = [(128, 256, 64, 3, 8), (64, 256, 32, 4, 4), (128, 128, 32, 4, 4), (128, 64, 32, 4, 4),
            (64, 128, 32, 4, 4), (128, 32, 32, 4, 4), (64, 32, 32, 5, 2), (32, 64, 32, 5, 2),
            (256, 128, 64, 3, 8), (128, 128, 64, 4, 4), (128, 128, 64, 3, 8), (64, 256, 64, 4, 4)]
    return [triton.Config({"BM": bm, "BN": bn, "BK": bk, "GM": 8}, num_stages=s, num_warps=w)
            for bm, bn, bk, s, w in rows]


def configs_384():
    """The shared landscape's space: BM, BN in {32..256}, BK in {32, 64, 128}, 4 or 8 warps, 2-5 stages."""
    return [triton.Config({"BM": bm, "BN": bn, "BK": bk, "GM": 8}, num_warps=w, num_stages=s)
            for bm, bn, bk, w, s in itertools.product((32, 64, 128, 256), (32, 64, 128, 256), (32, 64, 128),
                                                      (4, 8), (2, 3, 4, 5))]


def _autotune(configs):
    tuner = os.environ.get("TK_TUNER", "tritonkit")
    if tuner == "triton":
        return triton.autotune(configs=configs, key=["M", "N", "K"])
    import tritonkit
    budget = os.environ.get("TK_BUDGET") or None
    strategy = os.environ.get("TK_STRATEGY") or None
    seed = int(os.environ.get("TK_SEED", "0"))
    return tritonkit.autotune(configs=configs, key=["M", "N", "K"], strategy=strategy, budget=budget, seed=seed)


def _flops(grid, kernel, args):
    return {"flops": 2.0 * args["M"] * args["N"] * args["K"],
            "bytes": 2.0 * (args["M"] * args["K"] + args["K"] * args["N"] + args["M"] * args["N"])}


@triton.jit(launch_metadata=_flops)
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GM: tl.constexpr):
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BM)
    num_n = tl.cdiv(N, BN)
    group = GM * num_n
    first_m = (pid // group) * GM
    size_m = min(num_m - first_m, GM)
    pid_m = first_m + ((pid % group) % size_m)
    pid_n = (pid % group) // size_m
    offs_m = (pid_m * BM + tl.arange(0, BM)) % M
    offs_n = (pid_n * BN + tl.arange(0, BN)) % N
    offs_k = tl.arange(0, BK)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BK, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BK, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BK * stride_ak
        b_ptrs += BK * stride_bk
    c = acc.to(c_ptr.dtype.element_ty)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn, c, mask=(rm[:, None] < M) & (rn[None, :] < N))


def make_tuned(space: str = None):
    """The autotuned matmul over ``space`` (``12`` or ``384``; default ``$TK_SPACE`` or 12)."""
    space = space or os.environ.get("TK_SPACE", "12")
    return _autotune(configs_12() if space == "12" else configs_384())(matmul_kernel)


def matmul(kernel, a, b, c=None):
    """``c = a @ b`` through ``kernel`` (autotuned or with a config given by the caller)."""
    import torch
    M, K = a.shape
    _, N = b.shape
    c = torch.empty((M, N), device=a.device, dtype=a.dtype) if c is None else c
    grid = lambda meta: (triton.cdiv(M, meta["BM"]) * triton.cdiv(N, meta["BN"]),)  # noqa: E731
    kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
    return c
