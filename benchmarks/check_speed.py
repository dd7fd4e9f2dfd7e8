"""How fast is ``tritonkit check``? A fixed suite of kernels, run four ways in one process.

Modes:

* ``plain``:      Triton's own interpreter (``TRITON_INTERPRET=1``), no tritonkit session;
* ``sequential``: ``tritonkit.checking(nan=True, engine="sequential")``: every check, one program at
  a time (tritonkit's oracle engine, and the fallback of the batched one);
* ``batched``:    ``tritonkit.checking(nan=True)``: every check, the batched engine (many programs
  per execution of the kernel's body);
* ``off``:        ``tritonkit.checking(checks=[])``: the batched engine with no checks;
* ``triton-viz``: triton-viz's sanitizer (``triton_viz.trace("sanitizer")`` around each kernel),
  where ``import triton_viz`` works (it supports Triton <= 3.6). It runs in a child process per
  case (it patches Triton's interpreter for good), after one untimed run; its outputs are not
  computed, so they are not compared.

Suite: vector add of 2**22 float32 (BLOCK 1024), softmax 4096x1024 float32 (one row per program),
matmul 512x512x512 float32 (64x64x32 tiles), layer norm 4096x1024 float32 (one row per program),
causal attention forward 8 heads x 512 x 64 float32 (64x64 blocks, a per-row loop bound); then the
same kernels at 4x the size. Outputs are compared across modes (bit for bit) and with PyTorch
before any timing is reported; peak memory is that of the arrays the batched run allocates
(``tracemalloc``, a separate untimed run).

``--fresh`` instead runs each kernel in new Python processes, as a user's script meets it: the
plain interpreter's first launch against tritonkit's first launch and best warm launch, the cores
tritonkit used, and both peak RSS (goals: first launch >= 50x the plain one as a geometric mean,
no kernel under 15x, peak RSS within 1.5x).

Goals: plain / batched >= 30x as a geometric mean over the suite, batched within 3x of
triton-viz's sanitizer, peak memory < 4 GiB. A ``PyTorch s`` column times PyTorch computing the
same output in float32 with no check (eager, CPU): the floor for any tool that computes every output.

Usage::

    python benchmarks/check_speed.py [--quick] [--base-only] [--no-sequential] [--repeat N] [--json FILE]
"""
from __future__ import annotations

import os

# Must be set before triton.jit runs: the kernels below become InterpretedFunctions, so a launch
# outside a tritonkit session runs in Triton's plain interpreter.
os.environ["TRITON_INTERPRET"] = "1"

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import datetime  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from typing import Callable, Dict, List, Optional  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

import tritonkit  # noqa: E402

TARGET_SPEEDUP = 30.0  # batched tritonkit check (every check) over plain TRITON_INTERPRET=1, geometric mean
TARGET_PEAK_GB = 4.0
MODES = ("plain", "sequential", "batched", "off")
KERNELS = ("add_kernel", "softmax_kernel", "matmul_kernel", "layer_norm_kernel", "attention_fwd_kernel")


def triton_viz_available() -> bool:
    """Whether triton-viz's sanitizer can run here (it imports only with the Triton it supports).
    Asked in a child process: importing triton-viz patches Triton's interpreter for good."""
    import subprocess
    probe = "import triton_viz; from triton_viz.clients import Sanitizer"
    return subprocess.run([sys.executable, "-c", probe], capture_output=True).returncode == 0


# --------------------------------------------------------------------------------------------------
# kernels
# --------------------------------------------------------------------------------------------------
@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


@triton.jit
def softmax_kernel(x_ptr, out_ptr, n_cols, x_stride, out_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    den = tl.sum(num, axis=0)
    tl.store(out_ptr + row * out_stride + cols, num / den, mask=mask)


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm,
                  stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        kk = k * BLOCK_K + rk
        a = tl.load(a_ptr + rm[:, None] * stride_am + kk[None, :] * stride_ak,
                    mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + kk[:, None] * stride_bk + rn[None, :] * stride_bn,
                    mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b, input_precision="ieee")
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn, acc,
             mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def layer_norm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, n_cols, x_stride, y_stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0)
    mean = tl.sum(x, axis=0) / n_cols
    diff = tl.where(mask, x - mean, 0.0)
    var = tl.sum(diff * diff, axis=0) / n_cols
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + cols, mask=mask)
    b = tl.load(b_ptr + cols, mask=mask)
    tl.store(y_ptr + row * y_stride + cols, diff * rstd * w + b, mask=mask)


@triton.jit
def attention_fwd_kernel(q_ptr, k_ptr, v_ptr, o_ptr, seq, scale, D: tl.constexpr, BLOCK_M: tl.constexpr,
                         BLOCK_N: tl.constexpr):
    """Causal attention forward, one (query block, batch*head) per program; the key loop's bound
    depends on the query block (programs diverge)."""
    start_m = tl.program_id(0)
    bh = tl.program_id(1)
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, D)
    base = bh * seq * D
    q = tl.load(q_ptr + base + offs_m[:, None] * D + offs_d[None, :])
    m_i = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, D), dtype=tl.float32)
    for start_n in range(0, (start_m + 1) * BLOCK_M, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        k = tl.load(k_ptr + base + offs_n[None, :] * D + offs_d[:, None])
        s = tl.dot(q, k, input_precision="ieee") * scale
        s = tl.where(offs_m[:, None] >= offs_n[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        p = tl.exp(s - m_new[:, None])
        alpha = tl.exp(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_ptr + base + offs_n[:, None] * D + offs_d[None, :])
        acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")
        m_i = m_new
    tl.store(o_ptr + base + offs_m[:, None] * D + offs_d[None, :], acc / l_i[:, None])


# --------------------------------------------------------------------------------------------------
# the suite
# --------------------------------------------------------------------------------------------------
@dataclasses.dataclass
class Case:
    """One benchmark: ``make()`` builds the inputs, ``run(inputs)`` launches and returns the output."""

    name: str
    size: str
    programs: int
    make: Callable[[], dict]
    run: Callable[[dict], torch.Tensor]
    reference: Callable[[dict], torch.Tensor]
    native: Callable[[dict], torch.Tensor]
    atol: float = 1e-5
    rtol: float = 1e-5


def _add_case(n: int) -> Case:
    block = 1024

    def make():
        g = torch.Generator().manual_seed(0)
        return {"x": torch.randn(n, generator=g), "y": torch.randn(n, generator=g)}

    def run(d):
        out = torch.empty_like(d["x"])
        add_kernel[(triton.cdiv(n, block),)](d["x"], d["y"], out, n, BLOCK=block)
        return out

    return Case("vector add", f"{n:,} fp32, BLOCK {block}", triton.cdiv(n, block), make, run,
                lambda d: d["x"] + d["y"], lambda d: d["x"] + d["y"])


def _softmax_case(rows: int, cols: int) -> Case:
    block = triton.next_power_of_2(cols)

    def make():
        return {"x": torch.randn(rows, cols, generator=torch.Generator().manual_seed(1))}

    def run(d):
        x = d["x"]
        out = torch.empty_like(x)
        softmax_kernel[(rows,)](x, out, cols, x.stride(0), out.stride(0), BLOCK=block)
        return out

    return Case("softmax", f"{rows}x{cols} fp32, 1 row/program", rows, make, run,
                lambda d: torch.softmax(d["x"].double(), dim=-1).float(), lambda d: torch.softmax(d["x"], dim=-1))


def _matmul_case(m: int, n: int, k: int) -> Case:
    bm, bn, bk = 64, 64, 32

    def make():
        g = torch.Generator().manual_seed(2)
        return {"a": torch.randn(m, k, generator=g), "b": torch.randn(k, n, generator=g)}

    def run(d):
        a, b = d["a"], d["b"]
        c = torch.empty(m, n)
        grid = (triton.cdiv(m, bm), triton.cdiv(n, bn))
        matmul_kernel[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                            c.stride(1), BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk)
        return c

    return Case("matmul", f"{m}x{n}x{k} fp32, {bm}x{bn}x{bk} tiles", triton.cdiv(m, bm) * triton.cdiv(n, bn),
                make, run, lambda d: (d["a"].double() @ d["b"].double()).float(), lambda d: d["a"] @ d["b"],
                atol=1e-3, rtol=1e-4)


def _layer_norm_case(rows: int, cols: int) -> Case:
    block = triton.next_power_of_2(cols)
    eps = 1e-5

    def make():
        g = torch.Generator().manual_seed(3)
        return {"x": torch.randn(rows, cols, generator=g), "w": torch.randn(cols, generator=g),
                "b": torch.randn(cols, generator=g)}

    def run(d):
        x = d["x"]
        y = torch.empty_like(x)
        layer_norm_kernel[(rows,)](x, d["w"], d["b"], y, cols, x.stride(0), y.stride(0), eps, BLOCK=block)
        return y

    def reference(d):
        return torch.nn.functional.layer_norm(d["x"].double(), (cols,), d["w"].double(), d["b"].double(),
                                              eps).float()

    def native(d):
        return torch.nn.functional.layer_norm(d["x"], (cols,), d["w"], d["b"], eps)

    return Case("layer norm", f"{rows}x{cols} fp32, 1 row/program", rows, make, run, reference, native,
                atol=1e-4, rtol=1e-4)


def _attention_case(bh: int, seq: int, d: int = 64) -> Case:
    bm = bn = 64
    scale = d ** -0.5

    def make():
        g = torch.Generator().manual_seed(4)
        return {k: torch.randn(bh, seq, d, generator=g) for k in ("q", "k", "v")}

    def run(t):
        o = torch.empty_like(t["q"])
        attention_fwd_kernel[(seq // bm, bh)](t["q"], t["k"], t["v"], o, seq, scale, D=d, BLOCK_M=bm, BLOCK_N=bn)
        return o

    def reference(t):
        q, k, v = (t[n].double() for n in ("q", "k", "v"))
        mask = torch.ones(seq, seq, dtype=torch.bool).tril()
        s = (q @ k.transpose(1, 2) * scale).masked_fill(~mask, float("-inf"))
        return (torch.softmax(s, dim=-1) @ v).float()

    def native(t):
        return torch.nn.functional.scaled_dot_product_attention(t["q"], t["k"], t["v"], is_causal=True, scale=scale)

    return Case("causal attention", f"{bh} heads x {seq} x {d} fp32, {bm}x{bn} blocks", (seq // bm) * bh, make, run,
                reference, native, atol=1e-4, rtol=1e-4)


def suite(quick: bool, large: bool = True) -> List[Case]:
    """The fixed benchmark suite: each kernel at its base size and (``large``) at 4x the size;
    ``quick`` gives small sizes for a smoke test."""
    if quick:
        return [_add_case(1 << 16), _softmax_case(128, 256), _matmul_case(128, 128, 128), _layer_norm_case(128, 256),
                _attention_case(2, 128)]
    cases = [_add_case(1 << 22), _softmax_case(4096, 1024), _matmul_case(512, 512, 512),
             _layer_norm_case(4096, 1024), _attention_case(8, 512)]
    if large:
        cases += [_add_case(1 << 24), _softmax_case(16384, 1024), _matmul_case(1024, 1024, 512),
                  _layer_norm_case(16384, 1024), _attention_case(8, 1024)]
    return cases


# --------------------------------------------------------------------------------------------------
# running
# --------------------------------------------------------------------------------------------------
def run_mode(case: Case, inputs: dict, mode: str):
    """Run ``case`` once in ``mode``; returns (seconds, output, session summary or None).

    Raises:
        AssertionError: a checked run made findings (the suite's kernels are correct).
    """
    if mode == "plain":
        start = time.perf_counter()
        out = case.run(inputs)
        return time.perf_counter() - start, out, None
    if mode == "triton-viz":
        import triton_viz
        module = sys.modules[__name__]
        plain = {k: getattr(module, k) for k in KERNELS}
        traced = {k: triton_viz.trace("sanitizer")(v) for k, v in plain.items()}
        try:
            for k, v in traced.items():
                setattr(module, k, v)
            start = time.perf_counter()
            out = case.run(inputs)
            return time.perf_counter() - start, out, None
        finally:
            for k, v in plain.items():
                setattr(module, k, v)
    checks = [] if mode == "off" else None
    start = time.perf_counter()
    with tritonkit.checking(checks=checks, nan=mode != "off",
                            engine="sequential" if mode == "sequential" else "auto") as session:
        out = case.run(inputs)
    seconds = time.perf_counter() - start
    if session.findings:
        raise AssertionError(f"{case.name} ({mode}): unexpected findings: "
                             f"{[f.message for f in session.findings]}")
    return seconds, out, session.summary()


def _warm_up(modes=MODES) -> None:
    """Run every kernel once per mode on the quick sizes, so AST rewrites and imports are cached."""
    for case in suite(quick=True):
        inputs = case.make()
        for mode in modes:
            run_mode(case, inputs, mode)


def _version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version(dist)
    except PackageNotFoundError:
        return "unknown"


def machine_info(viz: bool = False) -> Dict[str, str]:
    """CPU model and cores, Python/torch/triton/numpy/tritonkit versions, date."""
    from _machine import cpu_model
    cpu = cpu_model()
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return {
        "cpu": cpu,
        "cores": f"{os.cpu_count()} logical" + (f", {affinity} usable" if affinity is not None else ""),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "numpy": np.__version__,
        "tritonkit": tritonkit.__version__,
        "triton-viz": _version("triton-viz") if viz else "not importable",
        "torch_threads": str(torch.get_num_threads()),
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
    }


def peak_memory(case: Case, inputs: dict) -> float:
    """Peak memory (MiB) of the arrays a batched ``tritonkit.checking(nan=True)`` run of ``case``
    allocates beyond its inputs, measured with ``tracemalloc`` (numpy reports its buffers to it; the
    torch input and output tensors are not counted). A separate, untimed run."""
    import tracemalloc
    tracemalloc.start()
    tracemalloc.reset_peak()
    try:
        run_mode(case, inputs, "batched")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak / 2**20


def viz_seconds(index: int, repeat: int, quick: bool, large: bool) -> List[float]:
    """Seconds of ``repeat`` timed triton-viz sanitizer runs of suite case ``index``, in a child process.

    Raises:
        RuntimeError: the child failed (its stderr's end is in the message).
    """
    import subprocess
    cmd = [sys.executable, os.path.abspath(__file__), "--triton-viz-child", str(index), "--repeat", str(repeat)]
    cmd += ["--quick"] if quick else []
    cmd += [] if large else ["--base-only"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"triton-viz run of case {index} failed: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _viz_child(index: int, repeat: int, quick: bool, large: bool) -> None:
    case = suite(quick, large)[index]
    inputs = case.make()
    run_mode(case, inputs, "triton-viz")  # untimed: imports, z3's first solves
    print(json.dumps([run_mode(case, inputs, "triton-viz")[0] for _ in range(repeat)]))


def benchmark(cases: List[Case], repeat: int, log: Optional[Callable[[str], None]] = None,
              modes=MODES, viz: Optional[Callable[[Case], List[float]]] = None) -> List[dict]:
    """Time every case in every mode ``repeat`` times and check that the outputs agree.

    Returns:
        one dict per case: ``name``, ``size``, ``programs``, ``seconds`` (mode -> best of the
        repeats, in s), ``all_seconds`` (mode -> every repeat), ``speedup`` (plain / batched),
        ``peak_mib`` (batched run's peak array memory, MiB), ``batched_summary``.
    """
    results = []
    for case in cases:
        inputs = case.make()
        times: Dict[str, List[float]] = {m: [] for m in modes}
        if viz is not None:
            times["triton-viz"] = viz(case)
            if log:
                log(f"{case.name:<16} {case.size:<40} triton-viz: {min(times['triton-viz']):8.3f} s")
        outputs: Dict[str, torch.Tensor] = {}
        summary = None
        for r in range(repeat):
            for mode in modes:
                if mode in ("plain", "sequential") and r > 0:
                    continue  # the slow modes run once: their spread is small next to the ratios
                seconds, out, summ = run_mode(case, inputs, mode)
                times[mode].append(seconds)
                if r == 0:
                    outputs[mode] = out
                    if mode == "batched":
                        summary = summ
                if log:
                    log(f"{case.name:<16} {case.size:<40} {mode:<10} run {r + 1}/{repeat}: {seconds:8.3f} s")
        ref = case.reference(inputs)
        torch.testing.assert_close(outputs["plain"], ref, atol=case.atol, rtol=case.rtol)
        times["pytorch"] = native_seconds(case, inputs, repeat)
        for mode in modes[1:]:  # both engines must compute exactly what Triton's interpreter does
            torch.testing.assert_close(outputs[mode], outputs["plain"], atol=0, rtol=0)
        best = {m: min(v) for m, v in times.items()}
        results.append({
            "name": case.name, "size": case.size, "programs": case.programs,
            "seconds": best, "all_seconds": times,
            "speedup": best["plain"] / best["batched"],
            "vs_triton_viz": best["batched"] / best["triton-viz"] if "triton-viz" in best else None,
            "pytorch_vs_triton_viz": best["pytorch"] / best["triton-viz"] if "triton-viz" in best else None,
            "speedup_sequential": best["sequential"] / best["batched"] if "sequential" in best else None,
            "peak_mib": peak_memory(case, inputs),
            "batched_summary": {k: summary[k] for k in ("launches", "programs", "accesses", "lanes",
                                                        "batched_launches", "fallbacks")} if summary else None,
        })
    return results


# --------------------------------------------------------------------------------------------------
# fresh processes: the first launch, as a user's script meets it
# --------------------------------------------------------------------------------------------------
_FRESH_CHILD = r'''
import json, os, resource, sys, time
sys.path.insert(0, {here!r})
import torch, triton
import check_speed
label, mode, quick, large, mib, runs = {label!r}, {mode!r}, {quick!r}, {large!r}, {mib!r}, {runs!r}
workers = {workers!r}
if label == "softmax 8192x8192":
    case = check_speed._softmax_case(1024, 1024) if quick else check_speed._softmax_case(8192, 8192)
else:
    case = [c for c in check_speed.suite(quick=quick, large=large) if f"{{c.name}} {{c.size}}" == label][0]
inputs = case.make()
times, cpu, starts = [], [], []
for _ in range(runs):
    session = None
    if mode != "plain":  # the session starts before the script, as under `tritonkit check`: timed apart
        s0 = time.perf_counter()
        import tritonkit
        scope = tritonkit.checking(batch_memory=None if mib is None else int(mib) << 20, workers=workers)
        session = scope.__enter__()
        starts.append(time.perf_counter() - s0)
    r0, c0 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    case.run(inputs)
    t1 = time.perf_counter()
    r1, c1 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    if session is not None:
        scope.__exit__(None, None, None)
        assert not session.findings, session.findings
    times.append(t1 - t0)
    # forked share workers' CPU time too (they are waited for before the launch returns)
    cpu.append(sum(getattr(b, f) - getattr(a, f) for a, b in ((r0, r1), (c0, c1)) for f in ("ru_utime", "ru_stime")))
peak = max(resource.getrusage(w).ru_maxrss for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
print(json.dumps({{"times": times, "cpu": cpu, "starts": starts, "peak_gib": peak / 2**20}}))
'''


def fresh_process(label: str, mode: str, quick: bool = False, large: bool = True, mib: Optional[int] = None,
                  runs: int = 3, cache: Optional[str] = None, workers: Optional[int] = None) -> dict:
    """Run the case named ``label`` (``f"{name} {size}"``, or ``"softmax 8192x8192"``) ``runs`` times
    in a new Python process: ``mode`` "plain" (``TRITON_INTERPRET=1``) or "tritonkit"
    (``checking(batch_memory=mib MiB)``, default budget when None), with tritonkit's caches under
    the directory ``cache`` (None: a new empty one, so the check's disk cache starts cold).

    The session of each tritonkit run starts before its launch is timed, as ``tritonkit check``
    starts it before the script runs; its start is timed apart (``starts``; the first includes
    importing tritonkit's checker). The process writes bytecode (``.pyc``) as an installed package
    has it, whatever ``PYTHONDONTWRITEBYTECODE`` says.

    Returns:
        ``{"times": [s per run], "cpu": [CPU s per run, user + system], "starts": [s per session
        start], "peak_gib": peak RSS}``: the first run is the first launch of every kernel in
        that process.
    Raises:
        RuntimeError: the child failed (its stderr's end in the message).
    """
    import subprocess
    import tempfile
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    env.pop("TRITONKIT_CHECK_CACHE", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if mode == "plain":
        env["TRITON_INTERPRET"] = "1"
    here = os.path.dirname(os.path.abspath(__file__))
    code = _FRESH_CHILD.format(here=here, label=label, mode=mode, quick=quick, large=large, mib=mib, runs=runs,
                               workers=workers)
    with tempfile.TemporaryDirectory(prefix="tritonkit-bench-") as empty:
        env["TRITONKIT_CACHE_DIR"] = os.path.join(cache or empty, "tune")  # the check cache: its sibling
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=3600)
    if proc.returncode != 0:
        raise RuntimeError(f"{label} ({mode}): {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def fresh_benchmark(cases: List[Case], quick: bool, large: bool,
                    log: Optional[Callable[[str], None]] = None, workers: Optional[int] = None,
                    rounds: int = 1) -> List[dict]:
    """Per case, in fresh processes: the plain interpreter's first launch and peak RSS; tritonkit's
    first launch with an empty disk cache (a kernel never checked on this machine), its best warm
    launch (of the next two in that process), the cores it used over the first launch (CPU seconds
    / wall seconds) and its peak RSS; then tritonkit's first launch in another new process that
    finds what the first one left in the disk cache (a script run again). The session's start in
    the first process (importing tritonkit's checker, installing its hooks) is timed apart.
    tritonkit's bytecode is compiled first, as an installed package has it. ``workers``: the
    session's (None: its default, every usable core).

    ``rounds`` > 1 runs those processes that many times, one round after the other (plain, tritonkit,
    tritonkit again, then the next round), and keeps each figure's best (the least time, and the
    cores used in the round of the best first launch): a machine whose speed drifts between calls
    (a VM's shared cores) then shows in every figure alike instead of in one of a ratio's two terms.
    Each round's own figures are kept under ``"rounds"``."""
    import compileall
    import tempfile
    compileall.compile_dir(os.path.dirname(tritonkit.__file__), quiet=1)
    out = []
    for case in cases:
        label = f"{case.name} {case.size}"
        runs = []
        for _ in range(max(1, rounds)):
            plain = fresh_process(label, "plain", quick=quick, large=large, runs=1)
            with tempfile.TemporaryDirectory(prefix="tritonkit-bench-") as cache:
                tk = fresh_process(label, "tritonkit", quick=quick, large=large, runs=3, cache=cache, workers=workers)
                again = fresh_process(label, "tritonkit", quick=quick, large=large, runs=1, cache=cache,
                                      workers=workers)
            runs.append({"plain_first_s": plain["times"][0], "first_s": tk["times"][0],
                         "first_cached_s": again["times"][0], "warm_s": min(tk["times"][1:]),
                         "cores_used": tk["cpu"][0] / tk["times"][0], "plain_peak_gib": plain["peak_gib"],
                         "peak_gib": max(tk["peak_gib"], again["peak_gib"]), "session_start_s": tk["starts"][0]})
        best_first = min(runs, key=lambda r: r["first_s"])
        row = {"name": case.name, "size": case.size, "cores_used": best_first["cores_used"],
               "plain_peak_gib": max(r["plain_peak_gib"] for r in runs), "peak_gib": max(r["peak_gib"] for r in runs)}
        for key in ("plain_first_s", "first_s", "first_cached_s", "warm_s", "session_start_s"):
            row[key] = min(r[key] for r in runs)
        row["first_speedup"] = row["plain_first_s"] / row["first_s"]
        row["with_start_speedup"] = row["plain_first_s"] / (row["first_s"] + row["session_start_s"])
        row["cached_speedup"] = row["plain_first_s"] / row["first_cached_s"]
        row["peak_ratio"] = row["peak_gib"] / row["plain_peak_gib"]
        if rounds > 1:
            row["rounds"] = runs
        out.append(row)
        if log:
            log(f"{label:<64} plain {row['plain_first_s']:7.2f} s  first {row['first_s']:6.3f} s  cached "
                f"{row['first_cached_s']:6.3f} s  warm {row['warm_s']:6.3f} s  {row['first_speedup']:6.1f}x "
                f"{row['cached_speedup']:6.1f}x  cores {row['cores_used']:.2f}  peak "
                f"{row['peak_gib']:.2f} / {row['plain_peak_gib']:.2f} GiB")
    return out


def render_fresh(rows: List[dict], info: Dict[str, str]) -> None:
    """Print the fresh-process table and its goals (issue: first-launch geometric mean >= 50x the
    plain interpreter, no kernel under 15x, peak RSS within 1.5x), for a cold and a filled disk cache."""
    from rich.console import Console
    from rich.table import Table
    console = Console(width=220)
    table = Table(title="tritonkit check, each kernel's first launch in a fresh process (every check on)")
    for col in ("kernel", "size", "plain first s", "session start s", "first s (cold cache)", "first s (cache filled)",
                "warm s", "plain/first cold", "plain/first filled", "plain/(start + first cold)", "cores used",
                "peak GiB", "plain peak GiB", "peak ratio"):
        table.add_column(col, justify="left" if col in ("kernel", "size") else "right")
    for r in rows:
        table.add_row(r["name"], r["size"], f"{r['plain_first_s']:.2f}", f"{r['session_start_s']:.3f}",
                      f"{r['first_s']:.3f}", f"{r['first_cached_s']:.3f}", f"{r['warm_s']:.3f}",
                      f"{r['first_speedup']:.1f}x", f"{r['cached_speedup']:.1f}x", f"{r['with_start_speedup']:.1f}x",
                      f"{r['cores_used']:.2f}", f"{r['peak_gib']:.2f}",
                      f"{r['plain_peak_gib']:.2f}", f"{r['peak_ratio']:.2f}x")
    console.print(table)
    for key, what in (("first_speedup", "cold disk cache"), ("cached_speedup", "disk cache filled by an earlier run"),
                      ("with_start_speedup", "cold disk cache, the session's start counted in")):
        gm = geomean([r[key] for r in rows])
        worst = min(rows, key=lambda r: r[key])
        console.print(f"first launch, {what}: geometric mean plain/tritonkit {gm:.1f}x (goal >= 50x), lowest "
                      f"{worst[key]:.1f}x ({worst['name']} {worst['size']}; goal >= 15x)")
    console.print(f"peak RSS at most {max(r['peak_ratio'] for r in rows):.2f}x the plain interpreter's (goal <= 1.5x)")
    console.print("machine: " + ", ".join(f"{k} {v}" for k, v in info.items()))


def shares_cases(quick: bool) -> List[Case]:
    """Launches of 0.5-2 s checked serially on the CPU machine (``--shares``), and the 4x suite."""
    if quick:
        return [_matmul_case(256, 256, 256), _softmax_case(512, 1024)]
    return [_add_case(1 << 26), _softmax_case(16384, 4096), _matmul_case(2048, 1024, 512),
            _layer_norm_case(16384, 4096), _attention_case(16, 1024)] + suite(False)[5:]


def shares_benchmark(cases: List[Case], repeat: int, log: Optional[Callable[[str], None]] = None) -> List[dict]:
    """Per case, in this process: the best of ``repeat`` launches under ``checking(nan=True)`` with one
    process (``workers=1``) and with the default (every usable core: launches worth it are shared
    out between forked workers), after one untimed launch each; outputs compared bit for bit. The
    disk cache is off: whether a launch is shared out rests on this process's own measures."""
    import resource
    rows = []
    for case in cases:
        inputs = case.make()
        got = {}
        for workers in (1, None):
            with tritonkit.checking(nan=True, workers=workers) as session:
                out = case.run(inputs)
                times, cpu, procs = [], [], []
                for _ in range(repeat):
                    r0 = [resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
                    t0 = time.perf_counter()
                    case.run(inputs)
                    times.append(time.perf_counter() - t0)
                    r1 = [resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
                    cpu.append(sum(b.ru_utime - a.ru_utime + b.ru_stime - a.ru_stime for a, b in zip(r0, r1)))
                    procs.append(session.launches[-1].processes)
            best = int(np.argmin(times))
            got[workers] = (out, times[best], cpu[best] / times[best], procs[best])
        if not torch.equal(got[1][0], got[None][0]):
            raise AssertionError(f"{case.name} {case.size}: outputs differ between one process and shares")
        row = {"name": case.name, "size": case.size, "programs": case.programs, "serial_s": got[1][1],
               "shared_s": got[None][1], "processes": got[None][3], "cores_used": got[None][2]}
        row["speedup"] = row["serial_s"] / row["shared_s"]
        rows.append(row)
        if log:
            log(f"{case.name} {case.size:<40} one process {row['serial_s']:7.3f} s  shared {row['shared_s']:7.3f} s "
                f"({row['processes']} processes, {row['cores_used']:.2f} cores)  {row['speedup']:.2f}x")
    return rows


def native_seconds(case: Case, inputs: dict, repeat: int) -> List[float]:
    """Seconds of PyTorch computing the case's output in float32 on the CPU, eagerly, with no check:
    the floor for any tool that computes every output (one untimed run first)."""
    case.native(inputs)
    out = []
    for _ in range(max(repeat, 3)):
        start = time.perf_counter()
        case.native(inputs)
        out.append(time.perf_counter() - start)
    return out


def geomean(values: List[float]) -> float:
    return float(np.exp(np.mean(np.log(values))))


def render(results: List[dict], info: Dict[str, str], repeat: int, quick: bool) -> None:
    """Print the results table and the machine description with ``rich``."""
    from rich.console import Console
    from rich.table import Table

    console = Console(width=200)
    table = Table(title="tritonkit check: seconds per launch (best of the repeats), every check on")
    for col, just in (("kernel", "left"), ("size", "left"), ("programs", "right"), ("plain s", "right"),
                      ("PyTorch s", "right"), ("triton-viz s", "right"), ("one-at-a-time s", "right"), ("batched s", "right"),
                      ("checks off s", "right"), ("plain/batched", "right"), ("batched/triton-viz", "right"),
                      ("peak MiB", "right")):
        table.add_column(col, justify=just)
    for r in results:
        s = r["seconds"]
        sp = r["speedup"]
        style = "green" if sp >= TARGET_SPEEDUP else "red"
        fb = r["batched_summary"]["fallbacks"] if r.get("batched_summary") else []
        vs = r.get("vs_triton_viz")
        table.add_row(r["name"], r["size"], str(r["programs"]), f"{s['plain']:.2f}", f"{s['pytorch']:.4f}",
                      f"{s['triton-viz']:.3f}" if "triton-viz" in s else "n/a",
                      f"{s['sequential']:.2f}" if "sequential" in s else "-", f"{s['batched']:.3f}",
                      f"{s['off']:.3f}", f"[{style}]{sp:.1f}x[/{style}]" + (" (fallback)" if fb else ""),
                      f"{vs:.2f}x" if vs is not None else "n/a", f"{r['peak_mib']:.0f}")
    gm = geomean([r["speedup"] for r in results])
    peak = max(r["peak_mib"] for r in results)
    console.print(table)
    vs = [r["vs_triton_viz"] for r in results if r.get("vs_triton_viz") is not None]
    floor = [r["pytorch_vs_triton_viz"] for r in results if r.get("pytorch_vs_triton_viz") is not None]
    viz = (f"batched / triton-viz: geometric mean {geomean(vs):.2f}x, worst {max(vs):.2f}x (goal <= 3x); "
           f"PyTorch alone (output only, no check) / triton-viz: worst {max(floor):.2f}x" if vs
           else "triton-viz's sanitizer: not importable here (it supports Triton <= 3.6): n/a")
    console.print(f"geometric mean plain/batched: {gm:.1f}x (goal >= {TARGET_SPEEDUP:.0f}x); largest peak: "
                  f"{peak:.0f} MiB (goal < {TARGET_PEAK_GB * 1024:.0f} MiB); {viz}")
    console.print("machine: " + ", ".join(f"{k} {v}" for k, v in info.items()))
    console.print(f"repeats: {repeat}{' (quick sizes)' if quick else ''}; plain and one-at-a-time run once")


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="small sizes (a smoke test, seconds)")
    p.add_argument("--base-only", action="store_true", help="only the base sizes, not the 4x ones")
    p.add_argument("--repeat", type=int, default=3, help="timed runs of the fast modes per case (default 3)")
    p.add_argument("--no-sequential", action="store_true", help="skip tritonkit one-at-a-time (slow at 4x sizes)")
    p.add_argument("--json", metavar="FILE", help="write the results as JSON")
    p.add_argument("--only", nargs="*", help="run only cases whose name contains one of these")
    p.add_argument("--fresh", action="store_true",
                   help="each kernel's first launch in a fresh process: plain interpreter against tritonkit's "
                        "first and warm launches, cores used, peak RSS")
    p.add_argument("--workers", type=int, help="--fresh: tritonkit's processes per launch (default: every usable core)")
    p.add_argument("--rounds", type=int, default=1,
                   help="--fresh: run each case's processes this many times, one round after the other, and keep "
                        "each figure's best (a machine whose speed drifts; default 1)")
    p.add_argument("--shares", action="store_true",
                   help="launches of 0.5-2 s and the 4x suite checked in one process against shared out between "
                        "forked workers (every usable core)")
    p.add_argument("--triton-viz-child", type=int, metavar="CASE", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.triton_viz_child is not None:
        _viz_child(args.triton_viz_child, args.repeat, args.quick, not args.base_only)
        return 0
    all_cases = suite(args.quick, large=not args.base_only)
    cases = all_cases
    if args.only:
        cases = [c for c in cases if any(o in c.name for o in args.only)]
    modes = tuple(m for m in MODES if not (args.no_sequential and m == "sequential"))
    viz = None
    if triton_viz_available():
        def viz(case):
            return viz_seconds(all_cases.index(case), args.repeat, args.quick, not args.base_only)
    if args.shares:
        os.environ["TRITONKIT_CHECK_CACHE"] = "0"  # decided by this process's own measures, not a disk cache's
        info = machine_info(False)
        rows = shares_benchmark(shares_cases(args.quick), args.repeat, log=lambda m: print(m, flush=True))
        print(f"geometric mean one process / shared: {geomean([r['speedup'] for r in rows]):.2f}x; machine: "
              + ", ".join(f"{k} {v}" for k, v in info.items()))
        if args.json:
            with open(args.json, "w") as fh:
                json.dump({"machine": info, "shares": True, "results": rows}, fh, indent=2)
        return 0
    if args.fresh:
        info = machine_info(False)
        rows = fresh_benchmark(cases, args.quick, not args.base_only,
                               log=lambda m: print(m, file=sys.stderr, flush=True), workers=args.workers,
                               rounds=args.rounds)
        render_fresh(rows, info)
        if args.json:
            with open(args.json, "w") as fh:
                json.dump({"machine": info, "fresh": True, "workers": args.workers, "rounds": args.rounds,
                           "results": rows}, fh, indent=2)
        return 0
    _warm_up(modes)
    info = machine_info(viz is not None)
    results = benchmark(cases, args.repeat, log=lambda m: print(m, file=sys.stderr, flush=True), modes=modes,
                        viz=viz)
    render(results, info, args.repeat, args.quick)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"machine": info, "quick": args.quick, "repeat": args.repeat, "target_speedup": TARGET_SPEEDUP,
                       "geomean_speedup": geomean([r["speedup"] for r in results]), "results": results}, fh, indent=2)
    return 0 if geomean([r["speedup"] for r in results]) >= TARGET_SPEEDUP else 1


if __name__ == "__main__":
    sys.exit(main())
