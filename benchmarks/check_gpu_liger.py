"""How much longer does a whole training script take under ``tritonkit check --gpu``? A Liger-Kernel
training step at Llama-3-8B sizes, run natively and under tritonkit, each in fresh processes.

This file is both the workload and its driver.

**The workload** (``--workload``): a Llama-3-8B-shaped decoder in bf16 on one CUDA GPU, made of
Liger-Kernel's ops (the autograd functions of ``liger_kernel.ops.rms_norm``, ``.rope``, ``.swiglu``,
``.fused_linear_cross_entropy``, ``.cross_entropy``: Liger's Triton kernels) and torch matmuls,
trained for ``--steps`` steps (forward, backward, a plain SGD update). Sizes: hidden 4096,
intermediate 14336, vocabulary 128256, 32 query heads and 8 key/value heads of dimension 128,
``--layers`` decoder layers (default 32, the model's depth), ``--batch`` x ``--seq`` tokens
(default 1 x 2048). Tensors, with ``T = batch * seq`` tokens:

* input: hidden states ``x`` of shape (batch, seq, 4096) bf16 (random, standing for the embedding
  output), targets (T,) int64 in ``[0, 128256)``;
* per layer: ``LigerRMSNormFunction`` (weight (4096,), eps 1e-5, Llama casting) -> q/k/v
  projections (weights (4096, 4096), (1024, 4096), (1024, 4096)) -> ``LigerRopeFunction`` on q
  (batch, 32, seq, 128) and k (batch, 8, seq, 128), cos/sin (1, seq, 128), theta 500000 -> k, v
  repeated to 32 heads -> ``torch.nn.functional.scaled_dot_product_attention(is_causal=True)`` ->
  output projection (4096, 4096) + residual -> ``LigerRMSNormFunction`` -> gate and up projections
  (14336, 4096) -> ``LigerSiLUMulFunction`` (SwiGLU) -> down projection (4096, 14336) + residual;
* head: ``LigerRMSNormFunction`` -> ``LigerFusedLinearCrossEntropyFunction`` (hidden (T, 4096),
  lm_head weight (128256, 4096), mean over tokens; the logits are never materialized), or with
  ``--loss ce`` the logits (T, 128256) bf16 from a torch matmul -> ``LigerCrossEntropyFunction``;
* update: ``p -= 1e-4 * grad`` on every parameter (no optimizer state), gradients dropped.

Memory, bf16 (GB = 1e9 bytes): 15.0 GB of parameters at 32 layers (0.44 GB a layer + 1.05 GB
lm_head; no embedding table), as much again for their gradients, and about 172 KB of saved
activations per token and layer (11.3 GB at 2048 tokens and 32 layers): at most about 42 GB with
the defaults (:func:`estimate_gb`; the workload prints its estimate, and the measured peak,
``torch.cuda.max_memory_allocated``, goes into its result). Each further 2048 tokens add about
11.3 GB at 32 layers.

Each step is timed between two ``torch.cuda.synchronize()`` (milliseconds); the workload prints one
line per step and a last line ``CHECK_GPU_LIGER_RESULT {json}``: step times (ms), losses, peak
memory (GB), seconds spent importing and building the model, the device and versions.

**The driver** (default) runs the workload ``--runs`` times each way, alternating, each in a new
process, and times each process from start to exit (wall seconds):

* native: ``python benchmarks/check_gpu_liger.py --workload ...``;
* checked: ``python -m tritonkit check --gpu --json F -- python benchmarks/check_gpu_liger.py
  --workload ...`` (``src/`` is put on the children's ``PYTHONPATH``).

It reports for each run the whole-process wall time, the workload's import seconds (torch, triton,
Liger), the steady-state step time (the median step after the first, from the workload's output)
and the first step's, the peak memory, and for the checked runs the
findings (expected 0: the workload's shapes are right), the launches checked and
``summary.gpu.unchecked`` from tritonkit's JSON. The ratios checked/native are taken on the first
run of each (``cold``: whatever the Triton cache held; with ``--fresh-cache`` every run compiles its
kernels, in an empty ``TRITON_CACHE_DIR``) and on the best of the later runs (``warm``). Goal: the
whole script under ``--gpu`` takes at most 2x its native time. The table gives the machine
(``torch.cuda.get_device_name()``, torch, triton, liger_kernel versions, date); ``--json FILE``
writes everything.

Exit status: 0 every run ended normally without findings; 1 a run failed or tritonkit made findings;
2 no CUDA GPU (the message says so) or no liger_kernel.

Usage::

    python benchmarks/check_gpu_liger.py [--batch 1] [--seq 2048] [--layers 32] [--steps 3] [--loss flce|ce]
        [--runs 2] [--fresh-cache] [--timeout S] [--verbose] [--json FILE]
    python benchmarks/check_gpu_liger.py --workload [--batch 1] [--seq 2048] [--layers 32] [--steps 3] [--loss flce|ce]

A smoke test of the workload's code path on a CPU (a tiny model of the same structure, float32, in
tritonkit's checked interpreter; Triton's own interpreter cannot run Liger's RMSNorm kernel)::

    tritonkit check -- python benchmarks/check_gpu_liger.py --workload --device cpu --dtype float32 --tiny --seq 16
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Dict, List, Optional

T_START = time.perf_counter()
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RESULT_MARK = "CHECK_GPU_LIGER_RESULT "  # the workload's last line: this, then its results as JSON

#: Llama-3-8B: hidden, intermediate (MLP), vocabulary, query heads, key/value heads, head dim,
#: RMSNorm eps, RoPE theta, layers
LLAMA3_8B = {"hidden": 4096, "intermediate": 14336, "vocab": 128256, "heads": 32, "kv_heads": 8, "head_dim": 128,
             "eps": 1e-5, "rope_theta": 500000.0, "layers": 32}
#: a tiny model of the same shape for a smoke test of the code path (``--tiny``: on the CPU under
#: ``tritonkit check`` with ``--device cpu --dtype float32``)
TINY = {"hidden": 64, "intermediate": 160, "vocab": 1000, "heads": 4, "kv_heads": 2, "head_dim": 16, "eps": 1e-5,
        "rope_theta": 500000.0, "layers": 2}
LR = 1e-4


# --------------------------------------------------------------------------------------------------
# the workload
# --------------------------------------------------------------------------------------------------
def estimate_gb(cfg: dict, layers: int, tokens: int, itemsize: int = 2, loss: str = "flce") -> Dict[str, float]:
    """An upper bound of the workload's memory in GB (1e9 bytes): parameters, their gradients, the
    activations autograd saves (all layers at once), and the head: the fused linear cross entropy's
    lm_head gradient (made in the forward), with ``loss="ce"`` also the logits (tokens, vocab) and
    their gradient. ``itemsize``: bytes per element of the model's dtype."""
    h, i, kvd = cfg["hidden"], cfg["intermediate"], cfg["kv_heads"] * cfg["head_dim"]
    per_layer = 2 * h * h + 2 * h * kvd + 3 * h * i + 2 * h
    params = layers * per_layer + h + cfg["vocab"] * h
    # saved per token and layer: norm inputs and outputs (4h), q, k, v (h + 2 kvd), repeated k, v (2h),
    # attention output and its reshape (2h), residual (h), gate, up and their product (3i)
    act = layers * tokens * (10 * h + 2 * kvd + 3 * i)
    out = {"parameters": params * itemsize / 1e9, "gradients": params * itemsize / 1e9,
           "activations": act * itemsize / 1e9,
           "head": (cfg["vocab"] * h + (2 * tokens * cfg["vocab"] if loss == "ce" else 0)) * itemsize / 1e9}
    out["total"] = sum(out.values())
    return out


def _rope_tables(seq: int, head_dim: int, theta: float, device, dtype):
    """cos, sin of shape (1, seq, head_dim) (Llama/HF layout: the frequencies twice)."""
    import torch
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32, device=device) / head_dim))
    freqs = torch.arange(seq, dtype=torch.float32, device=device)[:, None] * inv[None, :]
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos()[None].to(dtype), emb.sin()[None].to(dtype)


def build_model(cfg: dict, layers: int, device, dtype, seed: int = 0) -> Dict[str, object]:
    """The parameters (leaf tensors requiring grad, ``dtype`` on ``device``): ``layers`` dicts of
    ``attn_norm`` (h,), ``wq`` (h, h), ``wk`` (kvd, h), ``wv`` (kvd, h), ``wo`` (h, h), ``mlp_norm``
    (h,), ``w_gate`` (i, h), ``w_up`` (i, h), ``w_down`` (h, i) ([out, in], used as ``x @ w.T``),
    then ``final_norm`` (h,) and ``lm_head`` (vocab, h). Matrices ~ N(0, 0.02^2), norms 1."""
    import torch
    gen = torch.Generator(device=device).manual_seed(seed)
    h, i, kvd = cfg["hidden"], cfg["intermediate"], cfg["kv_heads"] * cfg["head_dim"]

    def mat(rows, cols):
        return (torch.randn(rows, cols, device=device, dtype=dtype, generator=gen) * 0.02).requires_grad_()

    def ones(n):
        return torch.ones(n, device=device, dtype=dtype, requires_grad=True)
    blocks = [{"attn_norm": ones(h), "wq": mat(h, h), "wk": mat(kvd, h), "wv": mat(kvd, h), "wo": mat(h, h),
               "mlp_norm": ones(h), "w_gate": mat(i, h), "w_up": mat(i, h), "w_down": mat(h, i)}
              for _ in range(layers)]
    return {"layers": blocks, "final_norm": ones(h), "lm_head": mat(cfg["vocab"], h)}


def parameters(model: dict) -> list:
    """Every parameter tensor of :func:`build_model`'s model."""
    return [p for b in model["layers"] for p in b.values()] + [model["final_norm"], model["lm_head"]]


def forward_loss(model: dict, x, targets, cos, sin, cfg: dict, loss_kind: str = "flce"):
    """The mean cross-entropy loss (a 0-d fp32 tensor) of the decoder on hidden states ``x``
    (batch, seq, h) for ``targets`` (batch * seq,) int64, with the RoPE tables ``cos``, ``sin``
    (1, seq, head_dim). Liger ops: RMSNorm, RoPE, SwiGLU, (fused linear) cross entropy."""
    import torch.nn.functional as F
    from liger_kernel.ops.rms_norm import LigerRMSNormFunction
    from liger_kernel.ops.rope import LigerRopeFunction
    from liger_kernel.ops.swiglu import LigerSiLUMulFunction
    b, s, h = x.shape
    nh, nkv, d, eps = cfg["heads"], cfg["kv_heads"], cfg["head_dim"], cfg["eps"]
    rep = nh // nkv
    for p in model["layers"]:
        # attention: RMSNorm (X (b, s, h), W (h,), eps, offset 0, casting "llama", dX written over dY)
        a = LigerRMSNormFunction.apply(x, p["attn_norm"], eps, 0.0, "llama", True)
        q = (a @ p["wq"].t()).view(b, s, nh, d).transpose(1, 2)  # (b, nh, s, d), storage (b, s, nh, d)
        k = (a @ p["wk"].t()).view(b, s, nkv, d).transpose(1, 2)  # (b, nkv, s, d)
        v = (a @ p["wv"].t()).view(b, s, nkv, d).transpose(1, 2)
        q, k = LigerRopeFunction.apply(q, k, cos, sin)  # rotates q, k in place; same shapes
        k = k[:, :, None].expand(b, nkv, rep, s, d).reshape(b, nh, s, d)  # grouped-query: kv heads repeated
        v = v[:, :, None].expand(b, nkv, rep, s, d).reshape(b, nh, s, d)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (b, nh, s, d)
        x = x + o.transpose(1, 2).reshape(b, s, h) @ p["wo"].t()
        # MLP: RMSNorm -> SwiGLU(gate (b, s, i), up (b, s, i)) -> down (b, s, h)
        a = LigerRMSNormFunction.apply(x, p["mlp_norm"], eps, 0.0, "llama", True)
        x = x + LigerSiLUMulFunction.apply(a @ p["w_gate"].t(), a @ p["w_up"].t()) @ p["w_down"].t()
    a = LigerRMSNormFunction.apply(x, model["final_norm"], eps, 0.0, "llama", True).view(b * s, h)
    if loss_kind == "flce":
        from liger_kernel.ops.fused_linear_cross_entropy import LigerFusedLinearCrossEntropyFunction
        # (input (T, h), weight (V, h), target (T,)) -> (loss, z_loss, token_accuracy, predicted_tokens)
        return LigerFusedLinearCrossEntropyFunction.apply(a, model["lm_head"], targets)[0]
    from liger_kernel.ops.cross_entropy import LigerCrossEntropyFunction
    logits = a @ model["lm_head"].t()  # (T, V)
    # (input (T, V), target (T,), weight None) -> (loss, z_loss, token_accuracy, predicted_tokens)
    return LigerCrossEntropyFunction.apply(logits, targets, None)[0]


def workload(args) -> int:
    """Run the training steps; print one line per step and the :data:`RESULT_MARK` line."""
    import torch
    if args.device == "cuda" and not torch.cuda.is_available():
        print("check_gpu_liger.py --workload needs a CUDA GPU (torch.cuda.is_available() is False); a smoke test "
              "on the CPU: tritonkit check -- python benchmarks/check_gpu_liger.py --workload --device cpu --tiny "
              "--dtype float32", file=sys.stderr)
        return 2
    if args.device == "cpu" and os.environ.get("TRITON_INTERPRET") != "1" and not os.environ.get("TRITONKIT_RUN_DIR"):
        print("check_gpu_liger.py --workload --device cpu runs the kernels in an interpreter: under tritonkit check "
              "(its checked interpreter) or with TRITON_INTERPRET=1 (Triton's own, which cannot run Liger's RMSNorm: "
              "it calls .to() on a float argument)", file=sys.stderr)
        return 2
    import logging
    logging.getLogger("liger_kernel").setLevel(logging.ERROR)
    import triton
    import liger_kernel.ops.cross_entropy  # noqa: F401  (all of Liger's ops are imported here)
    import liger_kernel.ops.fused_linear_cross_entropy  # noqa: F401
    import liger_kernel.ops.rms_norm  # noqa: F401
    import liger_kernel.ops.rope  # noqa: F401
    import liger_kernel.ops.swiglu  # noqa: F401
    t_imported = time.perf_counter()
    cfg = dict(TINY if args.tiny else LLAMA3_8B)
    layers = args.layers if args.layers is not None else cfg["layers"]
    dtype = getattr(torch, args.dtype)
    device = torch.device(args.device)
    tokens = args.batch * args.seq
    est = estimate_gb(cfg, layers, tokens, torch.empty((), dtype=dtype).element_size(), args.loss)
    print(f"workload: {layers} layers, hidden {cfg['hidden']}, intermediate {cfg['intermediate']}, vocab "
          f"{cfg['vocab']}, heads {cfg['heads']}/{cfg['kv_heads']}x{cfg['head_dim']}, {args.batch}x{args.seq} "
          f"tokens, {args.dtype} on {args.device}, loss {args.loss}; memory at most ~{est['total']:.1f} GB "
          f"(parameters {est['parameters']:.1f}, gradients {est['gradients']:.1f}, activations "
          f"{est['activations']:.1f}, head {est['head']:.1f})", flush=True)
    model = build_model(cfg, layers, device, dtype, args.seed)
    params = parameters(model)
    gen = torch.Generator(device=device).manual_seed(args.seed + 1)
    x = torch.randn(args.batch, args.seq, cfg["hidden"], device=device, dtype=dtype, generator=gen)
    targets = torch.randint(0, cfg["vocab"], (tokens,), device=device, generator=gen)
    cos, sin = _rope_tables(args.seq, cfg["head_dim"], cfg["rope_theta"], device, dtype)
    cuda = device.type == "cuda"

    def sync():
        if cuda:
            torch.cuda.synchronize()
    sync()
    t_built = time.perf_counter()
    step_ms, losses = [], []
    for step in range(args.steps):
        sync()
        t0 = time.perf_counter()
        loss = forward_loss(model, x, targets, cos, sin, cfg, args.loss)
        loss.backward()
        with torch.no_grad():
            grads = [p.grad for p in params]
            if any(g is None for g in grads):
                raise RuntimeError("a parameter got no gradient")
            torch._foreach_add_(params, grads, alpha=-LR)
        for p in params:
            p.grad = None
        sync()
        step_ms.append((time.perf_counter() - t0) * 1e3)
        losses.append(float(loss.detach().float()))
        print(f"step {step}: {step_ms[-1]:.1f} ms, loss {losses[-1]:.6f}", flush=True)
    try:
        from importlib.metadata import version
        liger_version = version("liger_kernel")
    except Exception:  # metadata missing (a copied tree): what the package says, if anything
        import liger_kernel
        liger_version = getattr(liger_kernel, "__version__", "?")
    result = {"step_ms": step_ms, "losses": losses, "steady_step_ms": steady(step_ms),
              "import_s": t_imported - T_START, "build_s": t_built - t_imported,
              "steps_s": time.perf_counter() - t_built,
              "peak_gb": torch.cuda.max_memory_allocated() / 1e9 if cuda else None, "estimate_gb": est,
              "layers": layers, "batch": args.batch, "seq": args.seq, "loss": args.loss, "dtype": args.dtype,
              "device": torch.cuda.get_device_name() if cuda else "cpu (Triton interpreter)",
              "torch": torch.__version__, "triton": triton.__version__, "liger_kernel": liger_version,
              "python": sys.version.split()[0]}
    print(RESULT_MARK + json.dumps(result), flush=True)
    if not all(math.isfinite(v) for v in losses):
        print("workload: a loss is not finite", file=sys.stderr)
        return 1
    return 0


def steady(step_ms: List[float]) -> Optional[float]:
    """The steady-state step time: the median of the steps after the first (the first compiles and
    warms up), or the only step; None without steps."""
    if not step_ms:
        return None
    return statistics.median(step_ms[1:] if len(step_ms) > 1 else step_ms)


# --------------------------------------------------------------------------------------------------
# the driver
# --------------------------------------------------------------------------------------------------
def _workload_args(args) -> List[str]:
    out = ["--workload", "--batch", str(args.batch), "--seq", str(args.seq), "--steps", str(args.steps),
           "--loss", args.loss, "--seed", str(args.seed)]
    if args.layers is not None:
        out += ["--layers", str(args.layers)]
    return out


def _child_env(cache: Optional[str]) -> dict:
    env = dict(os.environ)
    src = os.path.join(ROOT, "src")
    env["PYTHONPATH"] = os.pathsep.join([src] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.pop("TRITON_INTERPRET", None)
    if cache:
        env["TRITON_CACHE_DIR"] = cache
    return env


def parse_result(output: str) -> Optional[dict]:
    """The workload's :data:`RESULT_MARK` line (the last one) as a dict, None where there is none."""
    found = None
    for line in output.splitlines():
        if line.startswith(RESULT_MARK):
            try:
                found = json.loads(line[len(RESULT_MARK):])
            except ValueError:
                pass
    return found


def read_report(path: str) -> dict:
    """What the driver keeps of ``tritonkit check --json``: findings (count and first lines),
    launches, kernels (name: launches) and ``summary.gpu.unchecked``; ``{"error": ...}`` where the
    file cannot be read."""
    try:
        with open(path, encoding="utf-8") as fh:
            rep = json.load(fh)
    except (OSError, ValueError) as e:
        return {"error": f"{type(e).__name__}: {e}"}
    summary = rep.get("summary") or {}
    return {"findings": len(rep.get("findings") or []),
            "finding_messages": [f"{f.get('kernel')} {os.path.basename(str(f.get('file')))}:{f.get('line')}: "
                                 f"{f.get('message')}" for f in (rep.get("findings") or [])[:10]],
            "launches": rep.get("launches"),
            "kernels": {k.get("name"): k.get("launches") for k in rep.get("kernels") or []},
            "unchecked": list((summary.get("gpu") or {}).get("unchecked") or [])}


def run_once(mode: str, index: int, args, work: str) -> dict:
    """One process of the workload, ``native`` or ``checked``; its wall seconds, exit status, the
    workload's result and (checked) tritonkit's report."""
    script = os.path.abspath(__file__)
    cmd = [sys.executable, script, *_workload_args(args)]
    json_path = None
    if mode == "checked":
        json_path = os.path.join(work, f"tritonkit-{index}.json")
        cmd = [sys.executable, "-m", "tritonkit", "check", "--gpu", "--json", json_path, "--", "python", script,
               *_workload_args(args)]
    cache = tempfile.mkdtemp(prefix=f"triton-cache-{mode}-{index}-", dir=work) if args.fresh_cache else None
    lines: List[str] = []
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
                            env=_child_env(cache), errors="replace")

    def pump():  # the output, kept (and echoed with --verbose) while the process runs
        for line in proc.stdout:  # type: ignore[union-attr]
            lines.append(line)
            if args.verbose:
                print(f"  [{mode} {index}] {line}", end="", flush=True)
    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        code: Optional[int] = proc.wait(timeout=args.timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        code = None
    except KeyboardInterrupt:
        proc.kill()
        proc.wait()
        raise
    wall = time.perf_counter() - t0
    reader.join(timeout=30)
    output = "".join(lines)
    row = {"mode": mode, "run": index, "command": cmd, "wall_s": wall, "exit": code,
           "timed_out": code is None, "result": parse_result(output)}
    if json_path:
        row["tritonkit"] = read_report(json_path)
    ok_codes = (0,) if mode == "native" else (0, 1)  # tritonkit: 1 = findings (reported apart)
    if code not in ok_codes or row["result"] is None:
        row["output_tail"] = "".join(lines[-40:])
    return row


def _fmt(v, spec: str, missing: str = "-") -> str:
    return missing if v is None else format(v, spec)


def summarize(rows: List[dict]) -> dict:
    """Ratios checked/native: whole-process wall time and steady-state step time, on the first run
    of each mode (cold) and on the best of the later ones (warm; the first runs where there is
    only one)."""
    out: Dict[str, object] = {}
    for label, pick in (("cold", lambda rs: rs[:1]), ("warm", lambda rs: rs[1:] or rs[:1])):
        best = {}
        for mode in ("native", "checked"):
            rs = pick([r for r in rows if r["mode"] == mode and r["exit"] in ((0,) if mode == "native" else (0, 1))
                       and r["result"]])
            walls = [r["wall_s"] for r in rs]
            steps = [r["result"]["steady_step_ms"] for r in rs if r["result"].get("steady_step_ms") is not None]
            best[mode] = (min(walls) if walls else None, min(steps) if steps else None)
        (nw, ns), (cw, cs) = best["native"], best["checked"]
        out[label] = {"native_wall_s": nw, "checked_wall_s": cw, "wall_ratio": cw / nw if nw and cw else None,
                      "native_step_ms": ns, "checked_step_ms": cs, "step_ratio": cs / ns if ns and cs else None}
    firsts = {m: next((r["result"]["losses"][0] for r in rows if r["mode"] == m and r["result"]
                       and r["result"].get("losses")), None) for m in ("native", "checked")}
    out["first_loss"] = firsts
    out["first_loss_equal"] = None if None in firsts.values() else firsts["native"] == firsts["checked"]
    checked = [r.get("tritonkit") or {} for r in rows if r["mode"] == "checked"]
    out["findings"] = max((c.get("findings") or 0 for c in checked), default=None)
    out["unchecked"] = sorted({u for c in checked for u in c.get("unchecked") or []})
    return out


def machine(rows: List[dict]) -> dict:
    """The machine as a workload saw it (device, torch, triton, liger_kernel, python), and the date."""
    res = next((r["result"] for r in rows if r.get("result")), None) or {}
    info = {k: res.get(k) for k in ("device", "torch", "triton", "liger_kernel", "python")}
    if info["device"] is None:  # no workload got that far: ask here
        try:
            import torch
            import triton
            info.update(device=torch.cuda.get_device_name(), torch=torch.__version__, triton=triton.__version__)
        except Exception as e:  # pragma: no cover - reported, not fatal
            info["device"] = f"? ({type(e).__name__}: {e})"
    info["date"] = time.strftime("%Y-%m-%d")
    return info


def driver(args) -> int:
    """Run the workload natively and under ``tritonkit check --gpu``; print the table; write the JSON."""
    import importlib.util
    try:
        import torch
    except ImportError:
        print("check_gpu_liger.py needs torch", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("check_gpu_liger.py needs a CUDA GPU (torch.cuda.is_available() is False): run it on a GPU machine",
              file=sys.stderr)
        return 2
    if importlib.util.find_spec("liger_kernel") is None:
        print("check_gpu_liger.py needs liger_kernel (pip install liger-kernel==0.8.5, or put its wheel's "
              "directory on PYTHONPATH)", file=sys.stderr)
        return 2
    rows: List[dict] = []
    with tempfile.TemporaryDirectory(prefix="check-gpu-liger-") as work:
        for index in range(1, args.runs + 1):
            for mode in ("native", "checked"):
                row = run_once(mode, index, args, work)
                rows.append(row)
                res = row["result"] or {}
                print(f"[{mode} run {index}: {row['wall_s']:.1f} s, exit {row['exit']}, steady step "
                      f"{_fmt(res.get('steady_step_ms'), '.1f')} ms]", flush=True)
                if "output_tail" in row:
                    print(f"--- the last lines of {mode} run {index} ---\n{row['output_tail']}---", flush=True)
    info = machine(rows)
    summ = summarize(rows)
    first = next((r["result"] for r in rows if r["result"]), {}) or {}
    print(f"\n# a Liger-Kernel training step (Llama-3-8B sizes: {first.get('layers', args.layers)} layers, "
          f"{args.batch}x{args.seq} tokens, {first.get('dtype', 'bfloat16')}, loss {args.loss}, {args.steps} steps) "
          f"natively and under tritonkit check --gpu")
    print(f"# machine: {info['device']}; torch {info['torch']}, triton {info['triton']}, liger_kernel "
          f"{info['liger_kernel']}, python {info['python']}; {info['date']}")
    print(f"{'mode':8} {'run':>3} {'wall s':>8} {'import s':>9} {'steady step ms':>15} {'first step ms':>14} "
          f"{'peak GB':>8} {'exit':>7} {'findings':>9} {'launches':>9}")
    for r in rows:
        res, tk = r["result"] or {}, r.get("tritonkit") or {}
        steps = res.get("step_ms") or [None]
        exit_ = "timeout" if r["timed_out"] else str(r["exit"])
        print(f"{r['mode']:8} {r['run']:3d} {r['wall_s']:8.1f} {_fmt(res.get('import_s'), '.1f'):>9} "
              f"{_fmt(res.get('steady_step_ms'), '.1f'):>15} {_fmt(steps[0], '.1f'):>14} "
              f"{_fmt(res.get('peak_gb'), '.1f'):>8} {exit_:>7} {_fmt(tk.get('findings'), 'd'):>9} "
              f"{_fmt(tk.get('launches'), 'd'):>9}")
    for label in ("cold", "warm"):
        s = summ[label]
        print(f"{label}: whole script checked/native {_fmt(s['wall_ratio'], '.2f')}x "
              f"({_fmt(s['checked_wall_s'], '.1f')} s / {_fmt(s['native_wall_s'], '.1f')} s; goal <= 2x), "
              f"steady step {_fmt(s['step_ratio'], '.2f')}x ({_fmt(s['checked_step_ms'], '.1f')} ms / "
              f"{_fmt(s['native_step_ms'], '.1f')} ms)")
    print(f"first step's loss natively and checked: {summ['first_loss']['native']} / {summ['first_loss']['checked']}"
          f" ({'equal' if summ['first_loss_equal'] else 'DIFFERENT' if summ['first_loss_equal'] is False else '-'})")
    print(f"findings: {_fmt(summ['findings'], 'd')}; unchecked ({len(summ['unchecked'])}):")
    for u in summ["unchecked"]:
        print(f"  {u}")
    for r in rows:
        for m in (r.get("tritonkit") or {}).get("finding_messages") or []:
            print(f"  finding ({r['mode']} run {r['run']}): {m}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"machine": info, "config": {**LLAMA3_8B, "layers": first.get("layers", args.layers),
                                                   "batch": args.batch, "seq": args.seq, "steps": args.steps,
                                                   "loss": args.loss, "runs": args.runs,
                                                   "fresh_cache": args.fresh_cache},
                       "runs": rows, "summary": summ}, fh, indent=1)
    failed = any(r["exit"] not in ((0,) if r["mode"] == "native" else (0, 1)) or r["result"] is None for r in rows)
    return 1 if failed or summ["findings"] else 0


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="Without --workload: the driver (runs the workload natively and under "
                                        "tritonkit check --gpu). See the module docstring for shapes and units.")
    ap.add_argument("--workload", action="store_true",
                    help="be the workload: run the training steps in this process")
    ap.add_argument("--batch", type=int, default=1, help="sequences per step (default 1)")
    ap.add_argument("--seq", type=int, default=2048, help="tokens per sequence (default 2048)")
    ap.add_argument("--layers", type=int, default=None, help="decoder layers (default 32, Llama-3-8B's depth)")
    ap.add_argument("--steps", type=int, default=3, help="training steps (default 3; the first is warm-up)")
    ap.add_argument("--loss", choices=("flce", "ce"), default="flce",
                    help="flce: LigerFusedLinearCrossEntropyFunction (default); ce: torch logits, then "
                         "LigerCrossEntropyFunction")
    ap.add_argument("--seed", type=int, default=0, help="random seed of the weights and inputs")
    ap.add_argument("--runs", type=int, default=2, help="driver: processes each way, alternating (default 2: the "
                                                        "first cold, the second warm)")
    ap.add_argument("--fresh-cache", action="store_true",
                    help="driver: give every run an empty TRITON_CACHE_DIR (every run compiles its kernels)")
    ap.add_argument("--timeout", type=float, default=1800.0, help="driver: seconds one run may take (default 1800)")
    ap.add_argument("--verbose", action="store_true", help="driver: echo the runs' output")
    ap.add_argument("--json", metavar="FILE", help="driver: write the runs and ratios as JSON")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                    help="workload: cpu runs the kernels in an interpreter (under tritonkit check, or "
                         "TRITON_INTERPRET=1): a smoke test, with --tiny --dtype float32")
    ap.add_argument("--dtype", choices=("bfloat16", "float32"), default="bfloat16", help="workload: the model's dtype")
    ap.add_argument("--tiny", action="store_true",
                    help="workload: a tiny model (hidden 64, 2 layers, vocab 1000) for a smoke test of the code path")
    args = ap.parse_args(argv)
    for name in ("batch", "seq", "steps", "runs"):
        if getattr(args, name) < 1:
            ap.error(f"--{name}: 1 or more")
    if args.layers is not None and args.layers < 1:
        ap.error("--layers: 1 or more")
    if not args.workload and (args.device != "cuda" or args.dtype != "bfloat16" or args.tiny):
        ap.error("--device, --dtype and --tiny are workload options (with --workload)")
    return workload(args) if args.workload else driver(args)


if __name__ == "__main__":
    sys.exit(main())
