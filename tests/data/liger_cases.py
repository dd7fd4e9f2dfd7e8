"""Liger-Kernel ops on small CPU float32 inputs, each with an independent float64 PyTorch reference.

A plain module (not collected by pytest): ``tests/test_liger.py`` runs the cases inside
``tritonkit.checking()``, ``benchmarks/liger_coverage.py`` also runs them in Triton's own
interpreter. Import it with ``tests/`` on ``sys.path``.

``CASES`` maps an op name to a factory that returns an :class:`OpCase`: fixed inputs, the Liger
call, a PyTorch reference written here (not taken from Liger), the inputs whose gradients are
compared, and tolerances for the float32 result against float64.

Coverage: every ``torch.autograd.Function`` of Liger-Kernel 0.8.5 that runs Triton kernels
(``liger_kernel/ops/*.py`` and ``ops/experimental``), 35 of them, plus variants that reach other
kernels or code paths (cross entropy with label smoothing and with softcapping, GRPO with
sequence-level importance sampling) and the experimental int8 x int2 matmul. Not covered, because
they run no Triton kernel: ``LigerFusedLinearScaledCrossEntropyFunction`` (a PyTorch fallback, or
CuTe DSL on SM90), ``LigerTiledMLPFunction`` (PyTorch), ``liger_kernel.chunked_loss``
(``torch.compile``); nor the Ascend NPU backend's own kernels.

``NOT_ON_CPU`` lists the cases that cannot run on a CPU for reasons outside Triton (Liger's own
host code asks for a CUDA tensor or a GPU's SM count), with the exception they raise.
"""
from __future__ import annotations

import contextlib
import dataclasses
import importlib.metadata
import math
import os
from typing import Callable, Dict, NamedTuple, Sequence, Tuple
from unittest import mock

import torch
import torch.nn.functional as F

# Fused MoE's grouped GEMMs are autotuned over 32 configs each; Liger's own switch pins one config
# (read when liger_kernel is imported). Both interpreters would otherwise run every config.
os.environ.setdefault("LIGER_FUSED_MOE_AUTOTUNE", "0")


@contextlib.contextmanager
def cpu_only():
    """Make Liger see no accelerator.

    Liger picks code paths from ``infer_device()`` (at import time and while running, e.g. the
    number of SMs in DyT's backward, block sizes, alternative CuTe/cuTile implementations on
    CUDA). The tensors here are on the CPU, so make it take its CPU paths on any machine.
    """
    with contextlib.ExitStack() as stack:
        for backend in ("cuda", "xpu"):
            if hasattr(getattr(torch, backend, None), "is_available"):
                stack.enter_context(mock.patch.object(getattr(torch, backend), "is_available", lambda: False))
        from liger_kernel.utils import infer_device_arch
        infer_device_arch.cache_clear()
        try:
            yield
        finally:
            infer_device_arch.cache_clear()


with cpu_only():
    import liger_kernel
    from liger_kernel.ops.attn_res import LigerAttnResFunction
    from liger_kernel.ops.cross_entropy import LigerCrossEntropyFunction
    from liger_kernel.ops.dyt import LigerDyTFunction
    from liger_kernel.ops.experimental.embedding import LigerEmbeddingFunction
    from liger_kernel.ops.experimental.mm_int8int2 import matmul as liger_matmul_int8int2
    from liger_kernel.ops.fused_add_rms_norm import LigerFusedAddRMSNormFunction
    from liger_kernel.ops.fused_ce_tvd import LigerFusedCETVDFunction
    from liger_kernel.ops.fused_linear_cross_entropy import LigerFusedLinearCrossEntropyFunction
    from liger_kernel.ops.fused_linear_jsd import LigerFusedLinearJSDFunction
    from liger_kernel.ops.fused_linear_kl_div import LigerFusedLinearKLDivFunction
    from liger_kernel.ops.fused_moe import LigerFusedMoEFunction
    from liger_kernel.ops.fused_neighborhood_attention import LigerFusedNeighborhoodAttentionFunction
    from liger_kernel.ops.geglu import LigerGELUMulFunction
    from liger_kernel.ops.group_norm import LigerGroupNormFunction
    from liger_kernel.ops.grpo_loss import GrpoLossFunction
    from liger_kernel.ops.jsd import LigerJSDFunction
    from liger_kernel.ops.kl_div import LigerKLDivLossFunction
    from liger_kernel.ops.layer_norm import LigerLayerNormFunction
    from liger_kernel.ops.llama4_rope import LigerLlama4RopeFunction
    from liger_kernel.ops.mhc import LigerMHCCoeffsFunction, LigerMHCPostResFunction, LigerMHCPreFunction
    from liger_kernel.ops.mlp import LigerMLPFunction
    from liger_kernel.ops.modulated_rms_norm import LigerModulatedRMSNormFunction
    from liger_kernel.ops.multi_token_attention import LigerMultiTokenAttentionFunction
    from liger_kernel.ops.poly_norm import LigerPolyNormFunction
    from liger_kernel.ops.qwen2vl_mrope import LigerQwen2VLMRopeFunction
    from liger_kernel.ops.relu_squared import LigerReLUSquaredFunction
    from liger_kernel.ops.rms_norm import LigerRMSNormFunction
    from liger_kernel.ops.rope import LigerRopeFunction
    from liger_kernel.ops.softmax import LigerSoftmaxFunction
    from liger_kernel.ops.sparsemax import LigerSparsemaxFunction
    from liger_kernel.ops.swiglu import LigerFusedGateUpSiLUMulFunction, LigerSiLUMulFunction
    from liger_kernel.ops.tvd import LigerTVDLossFunction
    from liger_kernel.ops.vocab_parallel_cross_entropy import LigerVocabParallelCEFunction

LIGER_DIR = os.path.dirname(os.path.abspath(liger_kernel.__file__))
try:  # liger_kernel has no __version__
    LIGER_VERSION = importlib.metadata.version("liger-kernel")
except importlib.metadata.PackageNotFoundError:  # imported from a copy without its metadata
    LIGER_VERSION = "unknown"


# --------------------------------------------------------------------------------------------------
# running an op forward and backward
# --------------------------------------------------------------------------------------------------
def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _run_autograd(fn: Callable, inputs: Dict[str, torch.Tensor], dtype: torch.dtype,
                  grads: Sequence[str] = (), backward: bool = True) -> Dict[str, torch.Tensor]:
    """Run ``fn(**inputs)`` in ``dtype`` and, if ``backward``, back-propagate fixed random weights.

    Floating inputs are cast to ``dtype`` (fresh copies: Liger overwrites some inputs in place);
    those named in ``grads`` require gradients. The loss is ``sum_i (out_i * w_i).sum()`` over the
    floating outputs that require gradients, with weights drawn from a fixed seed, so every such
    output's gradient is exercised. Integer outputs are returned too (compared exactly).

    Returns:
        ``{"out0": ..., "out1": ..., "grad_<name>": ...}``, all detached.
    """
    ts = {}
    for name, t in inputs.items():
        if isinstance(t, torch.Tensor) and t.is_floating_point():
            t = t.to(dtype).clone().requires_grad_(name in grads and backward)
        elif isinstance(t, torch.Tensor):
            t = t.clone()
        ts[name] = t
    out = fn(**ts)
    outs = [o for o in (out if isinstance(out, (tuple, list)) else (out,)) if isinstance(o, torch.Tensor)]
    result = {f"out{i}": o.detach().clone() for i, o in enumerate(outs)}
    if backward and grads:
        loss = 0
        for i, o in enumerate(outs):
            if o.is_floating_point() and o.requires_grad:
                w = torch.randn(o.shape, generator=_gen(1000 + i), dtype=torch.float64).to(o.device, o.dtype)
                loss = loss + (o * w).sum()
        loss.backward()
        for name in grads:
            result[f"grad_{name}"] = ts[name].grad.detach().clone()
    return result


@dataclasses.dataclass
class OpCase:
    """One Liger op on fixed inputs: ``liger`` is the Liger call, ``reference`` the PyTorch one.

    Both take the inputs as keyword arguments; ``grads`` names the inputs whose gradients are
    compared (empty: forward only). Tolerances apply to the float32 result against float64.
    """

    inputs: Dict[str, torch.Tensor]
    liger: Callable
    reference: Callable
    grads: Sequence[str] = ()
    atol: float = 1e-5
    rtol: float = 1e-4

    def run_liger(self, backward: bool = True) -> Dict[str, torch.Tensor]:
        """Forward (and backward) through Liger in float32."""
        return _run_autograd(self.liger, self.inputs, torch.float32, self.grads, backward)

    def run_reference(self) -> Dict[str, torch.Tensor]:
        """Forward and backward through the PyTorch reference in float64."""
        return _run_autograd(self.reference, self.inputs, torch.float64, self.grads)


def compare(got: Dict[str, torch.Tensor], want: Dict[str, torch.Tensor],
            case: OpCase) -> Tuple[bool, Dict[str, float]]:
    """Compare a Liger result with the reference's, key by key, within the case's tolerances.

    Returns:
        ``(all close, {key: max abs error})``; the error is ``inf`` for a key that only one side
        has or whose shapes differ, and NaN where one side has a NaN the other has not.
    """
    ok, errors = True, {}
    for key in sorted(set(got) | set(want)):
        g, w = got.get(key), want.get(key)
        if g is None or w is None or g.shape != w.shape:
            ok, errors[key] = False, math.inf
            continue
        w = w.to(g.dtype)
        diff = (g.double() - w.double()).abs()
        diff = diff[~(g.double().isnan() & w.double().isnan())]
        errors[key] = float(diff.max()) if diff.numel() else 0.0
        ok = ok and bool(torch.isclose(g, w, atol=case.atol, rtol=case.rtol, equal_nan=True).all())
    return ok, errors


# Tolerances for kernels whose float32 ``tl.dot`` runs in TF32, Triton's default on tensor cores
# (operands keep 10 mantissa bits): the checked interpreter computes those dots as the GPU does, so
# their results are ~1e-3 relative off float64 (Triton's plain interpreter computes them in fp32).
TF32 = {"atol": 5e-3, "rtol": 1e-2}


# --------------------------------------------------------------------------------------------------
# references
# --------------------------------------------------------------------------------------------------
def _rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def _rms(x, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def _sparsemax_ref(x, dim=-1):
    z = x.transpose(dim, -1)
    zs, _ = torch.sort(z, dim=-1, descending=True)
    k = torch.arange(1, z.shape[-1] + 1, dtype=z.dtype)
    cssv = zs.cumsum(-1) - 1
    support = zs * k > cssv
    k_z = support.sum(-1, keepdim=True)
    tau = cssv.gather(-1, k_z - 1) / k_z.to(z.dtype)
    return torch.clamp(z - tau, min=0).transpose(dim, -1)


def _jsd_ref(x, y, beta):
    """Liger's generalized JSD of log-probabilities ``x`` (student) and ``y`` (teacher), summed / rows."""
    q, p = x.exp(), y.exp()
    m = beta * p + (1 - beta) * q
    return (beta * (p * (y - m.log())).sum() + (1 - beta) * (q * (x - m.log())).sum()) / x.shape[0]


def _token_logp(logits, ids, temperature):
    """log p(ids) under ``softmax(logits[:, :-1] / temperature)``: ``(B, L+1, V), (B, L) -> (B, L)``."""
    logp = torch.log_softmax(logits[:, :-1] / temperature, dim=-1)
    return logp.gather(-1, ids.unsqueeze(-1)).squeeze(-1)


def _grpo_ref(logits, old_logp, ref_logp, ids, advantages, mask, temperature, beta, eps_low, eps_high,
              sequence_level):
    """GRPO loss (PPO clipping + k3 KL, per-sequence mean then batch mean) and its two metrics.

    ``sequence_level``: one importance ratio per sequence, ``exp(mean over its tokens of
    (logp - old_logp))`` (GSPO), instead of one per token.
    """
    logp = _token_logp(logits, ids, temperature)
    m = mask.to(logp.dtype)
    if sequence_level:
        seq_lens = m.sum(-1).clamp(min=1.0)
        coef_1 = torch.exp(((logp - old_logp) * m).sum(-1) / seq_lens)[:, None].expand_as(logp)
    else:
        coef_1 = torch.exp(logp - old_logp)
    coef_2 = torch.clamp(coef_1, 1 - eps_low, 1 + eps_high)
    a = advantages[:, None]
    per_token = -torch.minimum(coef_1 * a, coef_2 * a)
    kl = torch.exp(ref_logp - logp) - (ref_logp - logp) - 1
    per_token = per_token + beta * kl
    loss = ((per_token * m).sum(-1) / m.sum(-1).clamp(min=1.0)).mean()
    clipped = ((coef_1 < 1 - eps_low) & (a < 0)) | ((coef_1 > 1 + eps_high) & (a > 0))
    n = m.sum().clamp(min=1.0)
    return loss, ((kl * m).sum() / n).detach(), ((clipped.to(m.dtype) * m).sum() / n).detach()


# --------------------------------------------------------------------------------------------------
# the ops
# --------------------------------------------------------------------------------------------------
def _softmax():
    x = torch.randn(6, 40, generator=_gen(1))
    return OpCase({"x": x}, lambda x: LigerSoftmaxFunction.apply(x), lambda x: torch.softmax(x, -1), grads=("x",))


def _swiglu():
    g = _gen(2)
    a, b = torch.randn(4, 48, generator=g), torch.randn(4, 48, generator=g)
    return OpCase({"a": a, "b": b}, lambda a, b: LigerSiLUMulFunction.apply(a, b),
                  lambda a, b: F.silu(a) * b, grads=("a", "b"))


def _swiglu_fused_gate_up():
    y = torch.randn(4, 2 * 24, generator=_gen(3))
    return OpCase({"y": y}, lambda y: LigerFusedGateUpSiLUMulFunction.apply(y),
                  lambda y: F.silu(y[:, :24]) * y[:, 24:], grads=("y",))


def _geglu():
    g = _gen(4)
    a, b = torch.randn(4, 48, generator=g), torch.randn(4, 48, generator=g)
    return OpCase({"a": a, "b": b}, lambda a, b: LigerGELUMulFunction.apply(a, b),
                  lambda a, b: F.gelu(a, approximate="tanh") * b, grads=("a", "b"))


def _relu_squared():
    x = torch.randn(4, 40, generator=_gen(5))
    return OpCase({"x": x}, lambda x: LigerReLUSquaredFunction.apply(x), lambda x: F.relu(x) ** 2, grads=("x",))


def _rms_norm():
    g = _gen(6)
    x, w = torch.randn(5, 48, generator=g), torch.randn(48, generator=g)
    return OpCase({"x": x, "w": w}, lambda x, w: LigerRMSNormFunction.apply(x, w, 1e-6),
                  lambda x, w: _rms(x, 1e-6) * w, grads=("x", "w"))


def _fused_add_rms_norm():
    g = _gen(7)
    x, r, w = torch.randn(5, 48, generator=g), torch.randn(5, 48, generator=g), torch.randn(48, generator=g)
    return OpCase({"x": x, "r": r, "w": w}, lambda x, r, w: LigerFusedAddRMSNormFunction.apply(x, r, w, 1e-6),
                  lambda x, r, w: (_rms(x + r, 1e-6) * w, x + r), grads=("x", "r", "w"))


def _modulated_rms_norm():
    # scale/shift per sequence, shared by its 3 tokens: the backward accumulates their gradients
    # with atomic adds
    g = _gen(36)
    x, w = torch.randn(2, 3, 48, generator=g), torch.randn(48, generator=g)
    scale, shift = 0.5 * torch.randn(2, 48, generator=g), torch.randn(2, 48, generator=g)

    def ref(x, w, scale, shift):
        return _rms(x, 1e-6) * w * (1 + scale[:, None, :]) + shift[:, None, :]

    return OpCase({"x": x, "w": w, "scale": scale, "shift": shift},
                  lambda x, w, scale, shift: LigerModulatedRMSNormFunction.apply(x, w, scale, shift, 1e-6), ref,
                  grads=("x", "w", "scale", "shift"))


def _layer_norm():
    g = _gen(8)
    x, w, b = torch.randn(5, 48, generator=g), torch.randn(48, generator=g), torch.randn(48, generator=g)
    return OpCase({"x": x, "w": w, "b": b}, lambda x, w, b: LigerLayerNormFunction.apply(x, w, b, 1e-6),
                  lambda x, w, b: F.layer_norm(x, (48,), w, b, 1e-6), grads=("x", "w", "b"))


def _poly_norm():
    g = _gen(9)
    # the bias is a 0-d tensor, as in liger_kernel.transformers.LigerPolyNorm (its backward
    # returns a 0-d gradient for it)
    x, w, b = torch.randn(5, 48, generator=g), torch.randn(3, generator=g), torch.randn((), generator=g)

    def ref(x, w, b):
        return w[0] * _rms(x ** 3, 1e-6) + w[1] * _rms(x ** 2, 1e-6) + w[2] * _rms(x, 1e-6) + b

    return OpCase({"x": x, "w": w, "b": b}, lambda x, w, b: LigerPolyNormFunction.apply(x, w, b, 1e-6), ref,
                  grads=("x", "w", "b"))


def _group_norm():
    g = _gen(10)
    x, w, b = torch.randn(2, 8, 12, generator=g), torch.randn(8, generator=g), torch.randn(8, generator=g)
    return OpCase({"x": x, "w": w, "b": b}, lambda x, w, b: LigerGroupNormFunction.apply(x, w, b, 8, 4, 1e-6),
                  lambda x, w, b: F.group_norm(x, 4, w, b, 1e-6), grads=("x", "w", "b"))


def _dyt_inputs():
    g = _gen(11)
    x, alpha = torch.randn(4, 40, generator=g), torch.tensor([0.7])
    gamma, beta = torch.randn(40, generator=g), torch.randn(40, generator=g)
    return {"x": x, "alpha": alpha, "gamma": gamma, "beta": beta}


def _dyt_ref(x, alpha, gamma, beta):
    return gamma * torch.tanh(alpha * x) + beta


def _dyt():
    return OpCase(_dyt_inputs(), lambda x, alpha, gamma, beta: LigerDyTFunction.apply(x, alpha, gamma, beta),
                  _dyt_ref, grads=("x", "alpha", "gamma", "beta"))


def _dyt_forward():
    return OpCase(_dyt_inputs(), lambda x, alpha, gamma, beta: LigerDyTFunction.apply(x, alpha, gamma, beta),
                  _dyt_ref)


def _cross_entropy():
    logits = torch.randn(6, 40, generator=_gen(12))
    target = torch.randint(0, 40, (6,), generator=_gen(13))
    target[2] = -100  # one ignored row
    return OpCase({"logits": logits, "target": target},
                  lambda logits, target: LigerCrossEntropyFunction.apply(logits, target, None)[0],
                  lambda logits, target: F.cross_entropy(logits, target, ignore_index=-100), grads=("logits",))


def _cross_entropy_smoothed():
    logits = torch.randn(6, 40, generator=_gen(26))
    target = torch.randint(0, 40, (6,), generator=_gen(27))

    def ref(logits, target):
        return F.cross_entropy(logits, target, label_smoothing=0.1)

    return OpCase({"logits": logits, "target": target},
                  lambda logits, target: LigerCrossEntropyFunction.apply(logits, target, None, -100, 0.0, 0.1)[0],
                  ref, grads=("logits",))


def _cross_entropy_softcap():
    logits = 4 * torch.randn(6, 40, generator=_gen(28))
    target = torch.randint(0, 40, (6,), generator=_gen(29))
    return OpCase({"logits": logits, "target": target},
                  lambda logits, target: LigerCrossEntropyFunction.apply(logits, target, None, -100, 0.0, 0.0, "mean",
                                                                         5.0)[0],
                  lambda logits, target: F.cross_entropy(5.0 * torch.tanh(logits / 5.0), target), grads=("logits",))


def _vocab_parallel_cross_entropy():
    # tensor parallelism of 1 (no process group): per-token losses, label smoothing, one ignored token
    logits = torch.randn(3, 2, 40, generator=_gen(37))  # [seq, batch, vocab]
    target = torch.randint(0, 40, (3, 2), generator=_gen(38))
    target[1, 0] = -100

    def ref(logits, target):
        loss = F.cross_entropy(logits.reshape(-1, 40), target.reshape(-1), ignore_index=-100, reduction="none",
                               label_smoothing=0.1)
        return loss.reshape(3, 2)

    return OpCase({"logits": logits, "target": target},
                  lambda logits, target: LigerVocabParallelCEFunction.apply(logits, target, None, -100, 0.1, "pytorch",
                                                                            "global"),
                  ref, grads=("logits",))


def _fused_linear_cross_entropy():
    g = _gen(14)
    x, w = torch.randn(6, 16, generator=g), torch.randn(40, 16, generator=g)
    target = torch.randint(0, 40, (6,), generator=_gen(15))
    return OpCase({"x": x, "w": w, "target": target},
                  lambda x, w, target: LigerFusedLinearCrossEntropyFunction.apply(x, w, target)[0],
                  lambda x, w, target: F.cross_entropy(x @ w.T, target), grads=("x", "w"), atol=1e-4)


def _kl_div():
    g = _gen(16)
    y_pred = torch.log_softmax(torch.randn(6, 40, generator=g), -1)
    y_true = torch.softmax(torch.randn(6, 40, generator=g), -1)
    return OpCase({"y_pred": y_pred, "y_true": y_true},
                  lambda y_pred, y_true: LigerKLDivLossFunction.apply(y_pred, y_true, "batchmean"),
                  lambda y_pred, y_true: F.kl_div(y_pred, y_true, reduction="batchmean"), grads=("y_pred",))


def _jsd():
    g = _gen(17)
    x = torch.log_softmax(torch.randn(6, 40, generator=g), -1)
    y = torch.log_softmax(torch.randn(6, 40, generator=g), -1)
    return OpCase({"x": x, "y": y}, lambda x, y: LigerJSDFunction.apply(x, y, None, 0.5),
                  lambda x, y: _jsd_ref(x, y, 0.5), grads=("x",))


def _fused_linear_jsd():
    g = _gen(18)
    xs, ws = torch.randn(6, 16, generator=g), torch.randn(40, 16, generator=g)
    xt, wt = torch.randn(6, 16, generator=g), torch.randn(40, 16, generator=g)

    def ref(xs, ws, xt, wt):
        return _jsd_ref(torch.log_softmax(xs @ ws.T, -1), torch.log_softmax(xt @ wt.T, -1), 0.5)

    return OpCase({"xs": xs, "ws": ws, "xt": xt, "wt": wt},
                  lambda xs, ws, xt, wt: LigerFusedLinearJSDFunction.apply(xs, ws, xt, wt), ref, grads=("xs", "ws"),
                  atol=1e-4)


def _fused_linear_kl_div():
    g = _gen(30)
    x, w = torch.randn(6, 16, generator=g), torch.randn(40, 16, generator=g)
    target = torch.softmax(torch.randn(6, 40, generator=g), -1)

    def ref(x, w, target):
        return F.kl_div(torch.log_softmax(x @ w.T, -1), target, reduction="batchmean")

    return OpCase({"x": x, "w": w, "target": target},
                  lambda x, w, target: LigerFusedLinearKLDivFunction.apply(x, w, target), ref, grads=("x", "w"),
                  atol=1e-4)


def _tvd():
    g = _gen(19)
    p = torch.softmax(torch.randn(6, 40, generator=g), -1)
    q = torch.softmax(torch.randn(6, 40, generator=g), -1)
    return OpCase({"p": p, "q": q}, lambda p, q: LigerTVDLossFunction.apply(p, q),
                  lambda p, q: 0.5 * (p - q).abs().sum() / p.shape[0], grads=("p",))


def _fused_ce_tvd():
    g = _gen(20)
    s, t = torch.randn(6, 40, generator=g), torch.randn(6, 40, generator=g)
    target = torch.randint(0, 40, (6,), generator=_gen(21))

    def ref(s, t, target):  # both terms unreduced, one per row
        tvd = 0.5 * (torch.softmax(s, -1) - torch.softmax(t, -1)).abs().sum(-1)
        return F.cross_entropy(s, target, reduction="none"), tvd

    return OpCase({"s": s, "t": t, "target": target}, lambda s, t, target: LigerFusedCETVDFunction.apply(s, t, target),
                  ref, grads=("s",))


def _grpo_case(seed: int, sequence_level: bool) -> OpCase:
    g = _gen(seed)
    b, length, vocab, temperature = 2, 4, 40, 0.9
    logits = torch.randn(b, length + 1, vocab, generator=g)
    ids = torch.randint(0, vocab, (b, length), generator=g)
    mask = torch.ones(b, length, dtype=torch.int64)
    mask[1, -1] = 0  # a padded completion token
    logp = _token_logp(logits.double(), ids, temperature).float()
    old_logp = logp + 0.3 * torch.randn(b, length, generator=g)  # ratios around 1: some clipped, some not
    ref_logp = logp + 0.5 * torch.randn(b, length, generator=g)
    advantages = torch.tensor([0.8, -1.3])
    level = "sequence" if sequence_level else "token"
    beta, eps_low, eps_high = 0.04, 0.2, 0.28

    def liger(logits, old_logp, ref_logp, ids, advantages, mask):
        loss, kl_mean, clip_ratio = GrpoLossFunction.apply(
            logits, old_logp, ref_logp, ids, advantages, mask, temperature, beta, eps_low, eps_high, False, "grpo",
            None, True, level)
        return loss, kl_mean.detach(), clip_ratio.detach()  # the metrics carry no gradient in Liger

    def ref(logits, old_logp, ref_logp, ids, advantages, mask):
        return _grpo_ref(logits, old_logp, ref_logp, ids, advantages, mask, temperature, beta, eps_low, eps_high,
                         sequence_level)

    return OpCase({"logits": logits, "old_logp": old_logp, "ref_logp": ref_logp, "ids": ids,
                   "advantages": advantages, "mask": mask}, liger, ref, grads=("logits",))


def _grpo_loss():
    return _grpo_case(39, sequence_level=False)


def _grpo_loss_sequence():
    return _grpo_case(40, sequence_level=True)


def _rope():
    g = _gen(22)
    q, k = torch.randn(2, 4, 6, 16, generator=g), torch.randn(2, 2, 6, 16, generator=g)
    ang = torch.randn(1, 6, 8, generator=g)
    cos, sin = torch.cat([ang.cos()] * 2, -1), torch.cat([ang.sin()] * 2, -1)

    def ref(q, k, cos, sin):
        c, s = cos.unsqueeze(1), sin.unsqueeze(1)
        return q * c + _rotate_half(q) * s, k * c + _rotate_half(k) * s

    return OpCase({"q": q, "k": k, "cos": cos, "sin": sin},
                  lambda q, k, cos, sin: LigerRopeFunction.apply(q, k, cos, sin), ref, grads=("q", "k"))


def _qwen2vl_mrope():
    g = _gen(23)
    q, k = torch.randn(1, 4, 6, 16, generator=g), torch.randn(1, 2, 6, 16, generator=g)
    ang = torch.randn(3, 1, 6, 8, generator=g)
    cos, sin = torch.cat([ang.cos()] * 2, -1), torch.cat([ang.sin()] * 2, -1)
    section = [2, 3, 3]

    def ref(q, k, cos, sin):
        sec = section * 2
        c = torch.cat([m[i % 3] for i, m in enumerate(cos.split(sec, dim=-1))], dim=-1).unsqueeze(1)
        s = torch.cat([m[i % 3] for i, m in enumerate(sin.split(sec, dim=-1))], dim=-1).unsqueeze(1)
        return q * c + _rotate_half(q) * s, k * c + _rotate_half(k) * s

    return OpCase({"q": q, "k": k, "cos": cos, "sin": sin},
                  lambda q, k, cos, sin: LigerQwen2VLMRopeFunction.apply(q, k, cos, sin, section), ref,
                  grads=("q", "k"))


def _llama4_rope():
    g = _gen(31)
    q, k = torch.randn(2, 6, 4, 16, generator=g), torch.randn(2, 6, 2, 16, generator=g)
    freqs = torch.polar(torch.ones(6, 8), torch.randn(6, 8, generator=g))  # complex64 (seq, head_dim / 2)

    def ref(q, k, freqs):
        f = freqs.to(torch.complex128 if q.dtype == torch.float64 else torch.complex64)[None, :, None, :]

        def rot(x):
            return torch.view_as_real(torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2)) * f).flatten(-2)

        return rot(q), rot(k)

    return OpCase({"q": q, "k": k, "freqs": freqs}, lambda q, k, freqs: LigerLlama4RopeFunction.apply(q, k, freqs),
                  ref, grads=("q", "k"))


def _multi_token_attention():
    g = _gen(32)
    scores, weight = torch.randn(1, 2, 8, 8, generator=g), torch.randn(2, 2, 3, 3, generator=g)

    def ref(scores, weight):
        future = torch.ones(8, 8, dtype=torch.bool).triu(1)
        probs = torch.softmax(scores.masked_fill(future, -1e9), -1)
        return F.conv2d(probs, weight, padding=1).masked_fill(future, 0.0)

    return OpCase({"scores": scores, "weight": weight},
                  lambda scores, weight: LigerMultiTokenAttentionFunction.apply(scores, weight, None, 1, 1), ref,
                  grads=("scores", "weight"))


def _fused_neighborhood_attention():
    # 12 positions, each attends to the positions i - 2, i, i + 2 (window 3, dilation 2) that exist
    g = _gen(41)
    q, k, v = (torch.randn(1, 2, 12, 16, generator=g) for _ in range(3))
    window, dilation = 3, 2

    def ref(q, k, v):
        i = torch.arange(12)
        rel = i[None, :] - i[:, None]
        near = (rel.abs() <= (window // 2) * dilation) & (rel % dilation == 0)
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(16)
        return torch.softmax(scores.masked_fill(~near, -math.inf), -1) @ v

    return OpCase({"q": q, "k": k, "v": v},
                  lambda q, k, v: LigerFusedNeighborhoodAttentionFunction.apply(q, k, v, window, dilation), ref,
                  grads=("q", "k", "v"), **TF32)


def _mhc_coeffs():
    g = _gen(42)
    hc, c = 4, 8  # HC streams of C channels; M = HC * HC + 2 * HC mixing coefficients
    m = hc * hc + 2 * hc
    x = torch.randn(2, 3, hc, c, generator=g)
    phi, b = 0.3 * torch.randn(hc * c, m, generator=g), 0.5 * torch.randn(m, generator=g)
    alphas = {name: torch.tensor(v) for name, v in (("a_pre", 0.8), ("a_post", 1.1), ("a_res", 0.9))}
    tmax, rms_eps, pre_eps, sinkhorn_eps, post_mult = 4, 1e-6, 1e-2, 1e-6, 2.0

    def liger(x, phi, b, a_pre, a_post, a_res):
        return LigerMHCCoeffsFunction.apply(x, phi, b, a_pre, a_post, a_res, True, tmax, rms_eps, pre_eps,
                                            sinkhorn_eps, post_mult)

    def ref(x, phi, b, a_pre, a_post, a_res):
        outer = x.shape[:-2]
        xm = x.reshape(-1, hc * c)
        mix = (xm @ phi) * torch.rsqrt(xm.pow(2).mean(-1, keepdim=True) + rms_eps)
        pre = torch.sigmoid(mix[:, :hc] * a_pre + b[:hc]) + pre_eps
        post = torch.sigmoid(mix[:, hc:2 * hc] * a_post + b[hc:2 * hc]) * post_mult
        res = (mix[:, 2 * hc:] * a_res + b[2 * hc:]).view(-1, hc, hc)
        mat = torch.softmax(res, -1) + sinkhorn_eps  # Sinkhorn: row softmax, then column / row sums
        mat = mat / (mat.sum(-2, keepdim=True) + sinkhorn_eps)
        for _ in range(tmax - 1):
            mat = mat / (mat.sum(-1, keepdim=True) + sinkhorn_eps)
            mat = mat / (mat.sum(-2, keepdim=True) + sinkhorn_eps)
        return pre.view(*outer, hc), post.view(*outer, hc), mat.view(*outer, hc, hc)

    return OpCase({"x": x, "phi": phi, "b": b, **alphas}, liger, ref,
                  grads=("x", "phi", "b", "a_pre", "a_post", "a_res"), **TF32)


def _mhc_pre():
    g = _gen(33)
    x, h_pre = torch.randn(6, 4, 24, generator=g), torch.randn(6, 4, generator=g)
    return OpCase({"x": x, "h_pre": h_pre}, lambda x, h_pre: LigerMHCPreFunction.apply(x, h_pre),
                  lambda x, h_pre: torch.einsum("nh,nhc->nc", h_pre, x), grads=("x", "h_pre"))


def _mhc_post_res():
    g = _gen(34)
    x, f = torch.randn(6, 4, 24, generator=g), torch.randn(6, 24, generator=g)
    h_post, h_res = torch.randn(6, 4, generator=g), torch.randn(6, 4, 4, generator=g)

    def ref(x, f, h_post, h_res):
        return h_post[:, :, None] * f[:, None, :] + torch.einsum("noi,nic->noc", h_res, x)

    return OpCase({"x": x, "f": f, "h_post": h_post, "h_res": h_res},
                  lambda x, f, h_post, h_res: LigerMHCPostResFunction.apply(x, f, h_post, h_res), ref,
                  grads=("x", "f", "h_post", "h_res"))


def _attn_res():
    g = _gen(35)
    v = torch.randn(3, 2, 4, 32, generator=g)  # [N blocks, B, T, D]
    w_query, w_norm = torch.randn(32, generator=g), torch.randn(32, generator=g)

    def ref(v, w_query, w_norm):
        alpha = torch.softmax((_rms(v, 1e-6) * w_norm * w_query).sum(-1), dim=0)
        return (alpha[..., None] * v).sum(0)

    return OpCase({"v": v, "w_query": w_query, "w_norm": w_norm},
                  lambda v, w_query, w_norm: LigerAttnResFunction.apply(v, w_query, w_norm, 1e-6), ref,
                  grads=("v", "w_query", "w_norm"))


def _fused_moe():
    # 8 tokens, each routed to 2 of 4 experts (SwiGLU experts: hidden 16, intermediate 12); most of
    # the time goes to the routing scatter kernel, whose block is 1024 lanes whatever the sizes
    g = _gen(43)
    t, h, i, e, k = 8, 16, 12, 4, 2
    x = torch.randn(t, h, generator=g)
    gate_up = 0.3 * torch.randn(e, 2 * i, h, generator=g)  # rows [0, i): gate, [i, 2i): up
    down = 0.3 * torch.randn(e, h, i, generator=g)
    idx = torch.stack([torch.randperm(e, generator=g)[:k] for _ in range(t)]).to(torch.int32)
    weights = torch.softmax(torch.randn(t, k, generator=g), -1)

    def ref(x, gate_up, down, idx, weights):
        w1 = gate_up[idx.long()]  # (T, K, 2I, H)
        pre = torch.einsum("th,tknh->tkn", x, w1)
        act = F.silu(pre[..., :i]) * pre[..., i:]
        y = torch.einsum("tki,tkhi->tkh", act, down[idx.long()])
        return torch.einsum("tk,tkh->th", weights, y)

    return OpCase({"x": x, "gate_up": gate_up, "down": down, "idx": idx, "weights": weights},
                  lambda x, gate_up, down, idx, weights: LigerFusedMoEFunction.apply(x, gate_up, down, idx, weights),
                  ref, grads=("x", "gate_up", "down", "weights"), **TF32)


def _mlp():
    g = _gen(44)
    x = torch.randn(1, 4, 16, generator=g)
    wg, wu, wd = (0.3 * torch.randn(*s, generator=g) for s in ((32, 16), (32, 16), (16, 32)))
    return OpCase({"x": x, "wg": wg, "wu": wu, "wd": wd},
                  lambda x, wg, wu, wd: LigerMLPFunction.apply(x, wg, wu, wd),
                  lambda x, wg, wu, wd: (F.silu(x @ wg.T) * (x @ wu.T)) @ wd.T, grads=("x", "wg", "wu", "wd"),
                  **TF32)


def _sparsemax():
    x = torch.randn(5, 24, generator=_gen(24))
    return OpCase({"x": x}, lambda x: LigerSparsemaxFunction.apply(x, -1), lambda x: _sparsemax_ref(x, -1),
                  grads=("x",))


def _embedding():
    emb = torch.randn(20, 16, generator=_gen(25))
    idx = torch.tensor([[0, 3, 3, 19], [7, 0, 12, 5]])
    return OpCase({"emb": emb, "idx": idx}, lambda emb, idx: LigerEmbeddingFunction.apply(emb, idx),
                  lambda emb, idx: F.embedding(idx, emb), grads=("emb",))


def _mm_int8int2():
    # int8 activations times ternary weights {-1, 0, 1} packed four to a byte: row r of the packed
    # matrix holds weight rows r, r + K/4, r + K/2, r + 3K/4 in bits 0-1, 2-3, 4-5, 6-7, each + 1
    g = _gen(45)
    m, kdim, n = 4, 256, 16  # K a multiple of 4 * BLOCK_SIZE_K for every config
    a = torch.randint(-128, 128, (m, kdim), generator=g, dtype=torch.int8)
    w = torch.randint(-1, 2, (kdim, n), generator=g)
    quarters = (w + 1).to(torch.uint8).view(4, kdim // 4, n)
    packed = quarters[0] | (quarters[1] << 2) | (quarters[2] << 4) | (quarters[3] << 6)

    def ref(a, packed):
        return (a.long() @ w).to(torch.int32)

    return OpCase({"a": a, "packed": packed}, lambda a, packed: liger_matmul_int8int2(a, packed), ref, atol=0,
                  rtol=0)


CASES: Dict[str, Callable[[], OpCase]] = {
    "softmax": _softmax,
    "swiglu": _swiglu,
    "swiglu_fused_gate_up": _swiglu_fused_gate_up,
    "geglu": _geglu,
    "relu_squared": _relu_squared,
    "rms_norm": _rms_norm,
    "fused_add_rms_norm": _fused_add_rms_norm,
    "modulated_rms_norm": _modulated_rms_norm,
    "layer_norm": _layer_norm,
    "poly_norm": _poly_norm,
    "group_norm": _group_norm,
    "dyt": _dyt,
    "dyt_forward": _dyt_forward,
    "cross_entropy": _cross_entropy,
    "cross_entropy_label_smoothing": _cross_entropy_smoothed,
    "cross_entropy_softcap": _cross_entropy_softcap,
    "vocab_parallel_cross_entropy": _vocab_parallel_cross_entropy,
    "fused_linear_cross_entropy": _fused_linear_cross_entropy,
    "kl_div": _kl_div,
    "jsd": _jsd,
    "fused_linear_jsd": _fused_linear_jsd,
    "fused_linear_kl_div": _fused_linear_kl_div,
    "tvd": _tvd,
    "fused_ce_tvd": _fused_ce_tvd,
    "grpo_loss": _grpo_loss,
    "grpo_loss_sequence": _grpo_loss_sequence,
    "rope": _rope,
    "qwen2vl_mrope": _qwen2vl_mrope,
    "llama4_rope": _llama4_rope,
    "multi_token_attention": _multi_token_attention,
    "fused_neighborhood_attention": _fused_neighborhood_attention,
    "mhc_coeffs": _mhc_coeffs,
    "mhc_pre": _mhc_pre,
    "mhc_post_res": _mhc_post_res,
    "attn_res": _attn_res,
    "fused_moe": _fused_moe,
    "mlp": _mlp,
    "sparsemax": _sparsemax,
    "embedding": _embedding,
    "mm_int8int2": _mm_int8int2,
}


class NotOnCpu(NamedTuple):
    """Why a case cannot run on a CPU: the exception Liger's host code raises (``error``, a
    substring of its message in ``message``) and the cause, in words (``reason``)."""

    error: type
    message: str
    reason: str


# Cases that cannot run on a CPU for reasons outside Triton: Liger's host code stops before (or
# between) its kernel launches. With CUDA tensors (every case's inputs moved to the GPU) both run
# and match their references on an H100.
NOT_ON_CPU: Dict[str, NotOnCpu] = {
    "dyt": NotOnCpu(UnboundLocalError, "NUM_SMS",
                    "backward: liger_dyt_bwd (dyt.py:131-137) sets NUM_SMS only on cuda/xpu/npu devices "
                    "(the forward runs: see dyt_forward)"),
    "mlp": NotOnCpu(AssertionError, "",
                    "LigerMLPFunction.forward asserts input.is_cuda (mlp.py:652); its kernels use "
                    "TMA tensor descriptors"),
}


# The kernels the interpreter can run: forward and backward make no finding, and the outputs and
# gradients are close to float64 PyTorch.
RUNNABLE = [
    "mm_int8int2",
    "softmax",
    "swiglu",
    "swiglu_fused_gate_up",
    "geglu",
    "relu_squared",
    "rms_norm",
    "fused_add_rms_norm",
    "modulated_rms_norm",
    "layer_norm",
    "poly_norm",
    "group_norm",
    "dyt_forward",
    "cross_entropy",
    "cross_entropy_label_smoothing",
    "cross_entropy_softcap",
    "vocab_parallel_cross_entropy",
    "fused_linear_cross_entropy",
    "kl_div",
    "jsd",
    "fused_linear_jsd",
    "fused_linear_kl_div",
    "tvd",
    "fused_ce_tvd",
    "grpo_loss",
    "grpo_loss_sequence",
    "rope",
    "qwen2vl_mrope",
    "llama4_rope",
    "multi_token_attention",
    "fused_neighborhood_attention",
    "mhc_coeffs",
    "mhc_pre",
    "mhc_post_res",
    "attn_res",
    "fused_moe",
    "sparsemax",
    "embedding",
]


class Stop(NamedTuple):
    """How an op that cannot run yet stops: the finding's ``kind`` and a substring of its message."""

    kind: str
    message: str


# Ops that cannot run yet, with how they stop (none today). mm_int8int2 was the last: its
# autotuned configs with BLOCK_SIZE_K=128 fail a tl.static_assert for K = 256, and tritonkit now
# skips such configs as Triton's Autotuner does (it times them as infinite).
EXPECTED_FAILURES: Dict[str, Stop] = {}
