"""``tritonkit tune`` against ``triton.autotune`` on the GPU (the goals of docs/benchmarks.md's
"Tuning on the H100").

Parts (``--parts``, default all):

* ``cold12``: the 12-config bf16 matmul at 8192^3, cold (fresh Triton and tritonkit caches, one
  process each; the kernel decorated, then its inputs made, as a script does): wall time of the
  first call (compile + tuning + the launch) for Triton and for
  tritonkit, then tritonkit again on its warm cache (trials run must be 0); both winners re-timed
  side by side (interleaved, L2 flushed).
* ``repeat5``: the same tuning five times (fresh tritonkit cache, warm Triton cache); the five
  winners re-timed side by side (their spread).
* ``space384``: the shared landscape's 384-config space at 4096^3: tritonkit exhaustive (the
  landscape, written to ``landscape_4096.json``), then the default strategy with 20% of the space,
  5 seeds, each cold; every winner re-timed next to the exhaustive best.
* ``overhead``: host time per launch of a tiny kernel: plain ``@triton.jit``, ``triton.autotune``
  and ``tritonkit.autotune`` on a cache hit.
* ``distill``: the 12-config matmul tuned at 36 shapes (every config measured), saved as
  ``distill_results.json`` for ``tritonkit distill`` (run on the CPU).

Usage::

    python benchmarks/tune_gpu.py --out DIR [--parts cold12,repeat5,space384,overhead,distill] [--quick]
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


# ---------------------------------------------------------------------------------------------
# children
# ---------------------------------------------------------------------------------------------
def child_tune(shape: List[int], reps: int = 1) -> Dict:
    """Tune in this process (the env says how); print and return wall time, winner, counts."""
    import torch

    import tune_kernels as tk
    M, N, K = shape
    kernel = tk.make_tuned()  # decorated as a script does at import, before its inputs are made
    torch.manual_seed(0)
    a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
    torch.cuda.synchronize()
    prof = None
    if os.environ.get("TK_PROFILE"):
        import cProfile
        prof = cProfile.Profile()
        prof.enable()
    t0 = time.perf_counter()
    c = tk.matmul(kernel, a, b)
    torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    if prof is not None:
        import io
        import pstats
        prof.disable()
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("cumulative").print_stats(45)
        profile_text = buf.getvalue()
    else:
        profile_text = None
    err = float((c.float() - (a.float() @ b.float())).abs().max())
    out = {"wall_s": wall, "winner": str(kernel.best_config), "max_abs_error": err}
    if profile_text:
        out["profile"] = profile_text
    if os.environ.get("TK_TUNER", "tritonkit") == "tritonkit":
        from tritonkit.tune._autotuner import RESULTS
        from tritonkit.tune._space import point_from_config, point_key
        out["winner_key"] = point_key(point_from_config(kernel.best_config))
        if RESULTS:
            r = RESULTS[-1]
            out["trials_run"] = sum(1 for t in r.trials if t.source != "cache" and t.status != "pruned")
            out["cached"] = sum(1 for t in r.trials if t.source == "cache")
            out["counts"] = {s: r.count(s) for s in ("ok", "failed", "wrong", "crashed", "pruned")}
            out["tuning_s"] = r.tuning_s
            out["compile_s"], out["timing_s"] = r.compile_s, r.timing_s
            out["check_s"] = r.check_s
            out["result"] = r.to_dict()
        else:
            out["trials_run"] = 0
    else:
        from tritonkit.tune._space import point_from_config, point_key
        out["winner_key"] = point_key(point_from_config(kernel.best_config))
        out["bench_time_s"] = getattr(kernel, "bench_time", None)
    return out


def child_time(shape: List[int], keys: List[str]) -> Dict:
    """Time the configs ``keys`` side by side (interleaved rounds, L2 flushed); median ms each."""
    import torch

    import tune_kernels as tk
    from tritonkit.tune._bench import Clocks, CudaRoundTimer, TimingOptions, time_interleaved
    from tritonkit.tune._space import parse_point_key
    M, N, K = shape
    a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    calls = []
    for key in keys:
        p = parse_point_key(key)
        meta = {k: v for k, v in p.items() if k not in ("num_warps", "num_stages", "num_ctas", "maxnreg")}
        grid = (((M + meta["BM"] - 1) // meta["BM"]) * ((N + meta["BN"] - 1) // meta["BN"]),)

        def call(meta=meta, p=p, grid=grid):
            tk.matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                                   c.stride(1), num_warps=p.get("num_warps", 4), num_stages=p.get("num_stages", 3),
                                   **meta)
        calls.append(call)
    for call in calls:
        call()
    torch.cuda.synchronize()
    timer = CudaRoundTimer(calls, clocks=Clocks())
    opts = TimingOptions(target_ms=200.0, min_samples=30, max_samples=300, retime_top=0)
    ts = time_interleaved(len(calls), timer, opts)
    return {"ms": {k: t.median_ms for k, t in zip(keys, ts)},
            "ci_ms": {k: t.ci_ms for k, t in zip(keys, ts)},
            "sm_clock_mhz": {k: t.sm_clock_mhz for k, t in zip(keys, ts)}}


def child_overhead() -> Dict:
    """Host microseconds per launch of a tiny kernel, three ways, on a cache hit."""
    import torch
    import triton
    import triton.language as tl

    import tritonkit

    @triton.jit
    def add(x_ptr, y_ptr, o_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(o_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)

    configs = [triton.Config({"BLOCK": 256}, num_warps=4), triton.Config({"BLOCK": 1024}, num_warps=4)]
    tri = triton.autotune(configs=configs, key=["n"])(add)
    tk = tritonkit.autotune(configs=configs, key=["n"], cache=False)(add)
    n = 1024
    x, y, o = (torch.randn(n, device="cuda") for _ in range(3))
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK"]),)  # noqa: E731
    launches = {
        "plain @triton.jit": lambda: add[grid](x, y, o, n, BLOCK=1024),
        "plain @triton.jit, options given": lambda: add[grid](x, y, o, n, BLOCK=1024, num_warps=4, num_stages=3,
                                                              num_ctas=1),
        "triton.autotune (cache hit)": lambda: tri[grid](x, y, o, n),
        "tritonkit.autotune (cache hit)": lambda: tk[grid](x, y, o, n),
    }
    for f in launches.values():  # compile and tune
        f()
    torch.cuda.synchronize()
    out = {}
    for _ in range(3):  # best of 3 rounds, rounds interleaved across the ways
        for name, f in launches.items():
            for _ in range(200):
                f()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(5000):
                f()
            dt = (time.perf_counter() - t0) / 5000 * 1e6
            torch.cuda.synchronize()
            out[name] = min(out.get(name, 1e9), dt)
    return {"us_per_launch": out}


# ---------------------------------------------------------------------------------------------
# the parent
# ---------------------------------------------------------------------------------------------
def run_child(args: List[str], env: Dict[str, str]) -> Dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", *args]
    proc = subprocess.run(cmd, env={**os.environ, **env}, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"child {args} failed ({proc.returncode}): {proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def fresh(tmp: str, name: str) -> str:
    d = tempfile.mkdtemp(prefix=name + "-", dir=tmp)
    return d


def part_cold12(tmp: str, shape: List[int], log) -> Dict:
    sh = ",".join(map(str, shape))
    tri = run_child(["tune", sh], {"TK_TUNER": "triton", "TK_SPACE": "12", "TRITON_CACHE_DIR": fresh(tmp, "tc")})
    log(f"triton.autotune cold: {tri['wall_s']:.2f} s, winner {tri['winner_key']}")
    tkcache = fresh(tmp, "tk")
    tcache = fresh(tmp, "tc")
    cold = run_child(["tune", sh], {"TK_TUNER": "tritonkit", "TK_SPACE": "12", "TRITON_CACHE_DIR": tcache,
                                    "TRITONKIT_CACHE_DIR": tkcache})
    prof = run_child(["tune", sh], {"TK_TUNER": "tritonkit", "TK_SPACE": "12", "TRITON_CACHE_DIR": fresh(tmp, "tc"),
                                    "TRITONKIT_CACHE_DIR": fresh(tmp, "tk"), "TK_PROFILE": "1"})
    log(f"profiled cold run (slower): {prof['wall_s']:.2f} s\n{prof.get('profile', '')}")
    log(f"tritonkit cold: {cold['wall_s']:.2f} s (tuning {cold.get('tuning_s', 0):.2f} s: compile "
        f"{cold.get('compile_s', 0):.2f} s, first runs and checks {cold.get('check_s', 0):.2f} s, timing "
        f"{cold.get('timing_s', 0):.2f} s), winner {cold['winner_key']}")
    warm = run_child(["tune", sh], {"TK_TUNER": "tritonkit", "TK_SPACE": "12", "TRITON_CACHE_DIR": tcache,
                                    "TRITONKIT_CACHE_DIR": tkcache})
    log(f"tritonkit warm: {warm['wall_s']:.2f} s, trials run {warm.get('trials_run')}")
    keys = sorted({tri["winner_key"], cold["winner_key"]})
    timed = run_child(["time", sh, json.dumps(keys)], {"TRITON_CACHE_DIR": tcache})
    flops = 2.0 * shape[0] * shape[1] * shape[2]
    speed = {k: flops / (ms * 1e-3) / 1e12 for k, ms in timed["ms"].items()}
    ratio = timed["ms"][cold["winner_key"]] / timed["ms"][tri["winner_key"]]
    log(f"winners side by side: {json.dumps(timed['ms'])}; tritonkit/triton time {ratio:.4f}")
    for r in (tri, cold, warm):
        r.pop("result", None)
    return {"shape": shape, "triton": tri, "tritonkit_cold": cold, "tritonkit_warm": warm, "winners": timed,
            "tflops": speed, "wall_ratio": cold["wall_s"] / tri["wall_s"], "winner_time_ratio": ratio}


def part_repeat5(tmp: str, shape: List[int], log) -> Dict:
    sh = ",".join(map(str, shape))
    tcache = fresh(tmp, "tc")
    winners = []
    for i in range(5):
        r = run_child(["tune", sh], {"TK_TUNER": "tritonkit", "TK_SPACE": "12", "TRITON_CACHE_DIR": tcache,
                                     "TRITONKIT_CACHE_DIR": fresh(tmp, "tk")})
        winners.append(r["winner_key"])
        log(f"repeat {i + 1}: {r['winner_key']} ({r['wall_s']:.2f} s)")
    keys = sorted(set(winners))
    timed = run_child(["time", sh, json.dumps(keys)], {"TRITON_CACHE_DIR": tcache}) if len(keys) > 1 else \
        {"ms": {keys[0]: None}}
    ms = [timed["ms"][w] for w in winners if timed["ms"][w] is not None]
    spread = (max(ms) / min(ms) - 1) if ms else 0.0
    log(f"repeat5: {len(keys)} distinct winner(s); spread of their times {spread * 100:.2f}%")
    return {"shape": shape, "winners": winners, "timed": timed, "spread": spread}


def part_space384(tmp: str, shape: List[int], seeds: int, log) -> Dict:
    sh = ",".join(map(str, shape))
    ex = run_child(["tune", sh], {"TK_TUNER": "tritonkit", "TK_SPACE": "384", "TK_STRATEGY": "exhaustive",
                                  "TRITON_CACHE_DIR": fresh(tmp, "tc"), "TRITONKIT_CACHE_DIR": fresh(tmp, "tk")})
    log(f"exhaustive 384: {ex['wall_s']:.1f} s, winner {ex['winner_key']}, counts {ex.get('counts')}")
    landscape = {_key(t): (t["ms"] if t["ms"] is not None else float("inf")) for t in ex["result"]["trials"]}
    runs = []
    for seed in range(seeds):
        r = run_child(["tune", sh], {"TK_TUNER": "tritonkit", "TK_SPACE": "384", "TK_BUDGET": "20%",
                                     "TK_SEED": str(seed), "TRITON_CACHE_DIR": fresh(tmp, "tc"),
                                     "TRITONKIT_CACHE_DIR": fresh(tmp, "tk")})
        log(f"default strategy seed {seed}: {r['wall_s']:.1f} s, {r.get('trials_run')} run, winner {r['winner_key']}")
        r.pop("result", None)
        runs.append(r)
    keys = sorted({ex["winner_key"], *[r["winner_key"] for r in runs]})
    timed = run_child(["time", sh, json.dumps(keys)], {})
    best = timed["ms"][ex["winner_key"]]
    for r in runs:
        r["vs_exhaustive"] = timed["ms"][r["winner_key"]] / best
    hits = sum(1 for r in runs if r["vs_exhaustive"] <= 1.02)
    log(f"space384 {shape}: {hits}/{seeds} seeds within 2% of the exhaustive best; walls "
        f"{[round(r['wall_s'], 1) for r in runs]}")
    ex_res = ex.pop("result", None)
    return {"shape": shape, "exhaustive": ex, "landscape_ms": landscape, "runs": runs, "timed": timed,
            "hits_within_2pct": hits, "exhaustive_result": ex_res}


def _key(trial: Dict) -> str:
    from tritonkit.tune._space import point_key
    return point_key(trial["point"])


def part_distill(tmp: str, log, quick: bool) -> Dict:
    import itertools
    import random
    sizes = [256, 512, 1024, 2048, 4096, 8192]
    rng = random.Random(0)
    shapes = rng.sample(list(itertools.product(sizes, sizes, [512, 1024, 2048, 4096])), 6 if quick else 40)
    tcache = fresh(tmp, "tc")
    results = []
    t0 = time.perf_counter()
    for shape in shapes:
        r = run_child(["tune", ",".join(map(str, shape))], {"TK_TUNER": "tritonkit", "TK_SPACE": "12",
                                                            "TK_STRATEGY": "exhaustive", "TRITON_CACHE_DIR": tcache,
                                                            "TRITONKIT_CACHE_DIR": fresh(tmp, "tk")})
        results.append(r["result"])
    log(f"distill data: {len(shapes)} shapes tuned in {time.perf_counter() - t0:.1f} s")
    return {"key_names": ["M", "N", "K"], "results": results}


def machine() -> Dict[str, str]:
    import torch
    import triton
    info = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "triton": triton.__version__,
            "python": sys.version.split()[0], "cpus": str(os.cpu_count()),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    try:
        import pynvml
        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(0)
        info["driver"] = pynvml.nvmlSystemGetDriverVersion()
        info["max_sm_clock_mhz"] = str(pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM))
    except Exception:
        pass
    return info


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=False, default=".", help="directory for the JSON results")
    p.add_argument("--parts", default="cold12,repeat5,space384,overhead,distill")
    p.add_argument("--quick", action="store_true", help="small shapes and 2 seeds (a smoke test)")
    p.add_argument("--space-shape", default="4096,4096,4096", help="M,N,K of the space384 part (default 4096^3)")
    p.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        what = args.child[0]
        if what == "tune":
            res = child_tune([int(x) for x in args.child[1].split(",")])
        elif what == "time":
            res = child_time([int(x) for x in args.child[1].split(",")], json.loads(args.child[2]))
        else:
            res = child_overhead()
        print(json.dumps(res))
        return 0
    os.makedirs(args.out, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="tune-gpu-")
    log = lambda m: print(m, flush=True)  # noqa: E731
    parts = args.parts.split(",")
    results = {"machine": machine()}
    log(json.dumps(results["machine"]))
    big = [2048, 2048, 2048] if args.quick else [8192, 8192, 8192]
    mid = [1024, 1024, 1024] if args.quick else [int(x) for x in args.space_shape.split(",")]
    for part in parts:
        t0 = time.perf_counter()
        if part == "cold12":
            results[part] = part_cold12(tmp, big, log)
        elif part == "repeat5":
            results[part] = part_repeat5(tmp, big, log)
        elif part == "space384":
            results[part] = part_space384(tmp, mid, 2 if args.quick else 5, log)
        elif part == "overhead":
            results[part] = run_child(["overhead"], {})
            log(f"overhead: {json.dumps(results[part])}")
        elif part == "distill":
            results[part] = part_distill(tmp, log, args.quick)
        log(f"[{part}: {time.perf_counter() - t0:.1f} s]")
        with open(os.path.join(args.out, f"tune_gpu_{'_'.join(parts)}.json"), "w") as fh:
            json.dump(results, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
