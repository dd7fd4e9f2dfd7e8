"""How much does checking cost? A fixed suite of kernels, run three ways in one process.

Modes:

* ``plain``:   Triton's own interpreter (``TRITON_INTERPRET=1``), no tritonkit session;
* ``checked``: inside ``tritonkit.checking()`` (the default checks: every kind but ``nan_inf``);
* ``all``:     inside ``tritonkit.checking(nan=True)`` (every check, ``nan_inf`` included);
* ``off``:     inside ``tritonkit.checking(checks=[])`` (checked interpreter, checks off, only the
  safety net).

Suite (full sizes): vector add of 2**22 float32 (BLOCK 1024), softmax 4096x1024 float32 (one row
per program), matmul 512x512x512 float32 (64x64x32 tiles), layer norm 4096x1024 float32 (one row
per program). Outputs are compared across modes (and with PyTorch) before any timing is reported.

Targets: ``checked / plain <= 1.3`` for the default checks of part 1 (out-of-bounds) is the
historical one; with every check on, ``all / off <= 2`` (part 3: the cost of all checks over the
same interpreter with none).

Usage::

    python benchmarks/check_speed.py [--quick] [--repeat N] [--json FILE] [--only NAME ...]
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

TARGET_RATIO = 1.3
TARGET_ALL_OFF = 2.0
MODES = ("plain", "checked", "all", "off")


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
                lambda d: d["x"] + d["y"])


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
                lambda d: torch.softmax(d["x"].double(), dim=-1).float())


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
                make, run, lambda d: (d["a"].double() @ d["b"].double()).float(), atol=1e-3, rtol=1e-4)


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

    return Case("layer norm", f"{rows}x{cols} fp32, 1 row/program", rows, make, run, reference,
                atol=1e-4, rtol=1e-4)


def suite(quick: bool) -> List[Case]:
    """The fixed benchmark suite; ``quick`` gives small sizes for a smoke test."""
    if quick:
        return [_add_case(1 << 16), _softmax_case(128, 256), _matmul_case(128, 128, 128), _layer_norm_case(128, 256)]
    return [_add_case(1 << 22), _softmax_case(4096, 1024), _matmul_case(512, 512, 512),
            _layer_norm_case(4096, 1024)]


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
    checks = [] if mode == "off" else None
    start = time.perf_counter()
    with tritonkit.checking(checks=checks, nan=mode == "all") as session:
        out = case.run(inputs)
    seconds = time.perf_counter() - start
    if session.findings:
        raise AssertionError(f"{case.name} ({mode}): unexpected findings: "
                             f"{[f.message for f in session.findings]}")
    return seconds, out, session.summary()


def _warm_up() -> None:
    """Run every kernel once per mode on the quick sizes, so AST rewrites and imports are cached."""
    for case in suite(quick=True):
        inputs = case.make()
        for mode in MODES:
            run_mode(case, inputs, mode)


def machine_info() -> Dict[str, str]:
    """CPU model and cores, Python/torch/triton/numpy/tritonkit versions, date."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return {
        "cpu": cpu,
        "cores": f"{os.cpu_count()} logical" + (f", {affinity} usable" if affinity is not None else ""),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "numpy": np.__version__,
        "tritonkit": tritonkit.__version__,
        "torch_threads": str(torch.get_num_threads()),
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
    }


def benchmark(cases: List[Case], repeat: int, log: Optional[Callable[[str], None]] = None) -> List[dict]:
    """Time every case in every mode ``repeat`` times and check that the outputs agree.

    Returns:
        one dict per case: ``name``, ``size``, ``programs``, ``seconds`` (mode -> best of the
        repeats), ``all_seconds`` (mode -> every repeat), ``ratio_checked``, ``ratio_off``.
    """
    results = []
    for case in cases:
        inputs = case.make()
        times: Dict[str, List[float]] = {m: [] for m in MODES}
        outputs: Dict[str, torch.Tensor] = {}
        summary = None
        for r in range(repeat):
            for mode in MODES:
                seconds, out, summ = run_mode(case, inputs, mode)
                times[mode].append(seconds)
                if r == 0:
                    outputs[mode] = out
                    if mode == "checked":
                        summary = summ
                if log:
                    log(f"{case.name:<11} {mode:<8} run {r + 1}/{repeat}: {seconds:8.3f} s")
        ref = case.reference(inputs)
        torch.testing.assert_close(outputs["plain"], ref, atol=case.atol, rtol=case.rtol)
        for mode in MODES[1:]:  # the checked interpreter must compute exactly what Triton's does
            torch.testing.assert_close(outputs[mode], outputs["plain"], atol=0, rtol=0)
        best = {m: min(v) for m, v in times.items()}
        results.append({
            "name": case.name, "size": case.size, "programs": case.programs,
            "seconds": best, "all_seconds": times,
            "ratio_checked": best["checked"] / best["plain"], "ratio_off": best["off"] / best["plain"],
            "ratio_all_off": best["all"] / best["off"],
            "checked_summary": {k: summary[k] for k in ("launches", "programs", "accesses", "lanes")}
            if summary else None,
        })
    return results


def render(results: List[dict], info: Dict[str, str], repeat: int, quick: bool) -> None:
    """Print the results table and the machine description with ``rich``."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    if console.width < 140:  # a pipe or a narrow terminal: keep the rows on one line each
        console = Console(width=140)
    table = Table(title=f"tritonkit check speed ({'quick' if quick else 'full'} sizes, best of {repeat})")
    table.add_column("kernel")
    table.add_column("size")
    table.add_column("programs", justify="right")
    table.add_column("plain s", justify="right")
    table.add_column("checked s", justify="right")
    table.add_column("all s", justify="right")
    table.add_column("off s", justify="right")
    table.add_column("checked/plain", justify="right")
    table.add_column("off/plain", justify="right")
    table.add_column("all/off", justify="right")
    for r in results:
        s = r["seconds"]
        rc, ra = r["ratio_checked"], r["ratio_all_off"]
        style = "green" if rc <= TARGET_RATIO else "red"
        style_all = "green" if ra <= TARGET_ALL_OFF else "red"
        table.add_row(r["name"], r["size"], str(r["programs"]), f"{s['plain']:.3f}", f"{s['checked']:.3f}",
                      f"{s['all']:.3f}", f"{s['off']:.3f}", f"[{style}]{rc:.2f}x[/{style}]", f"{r['ratio_off']:.2f}x",
                      f"[{style_all}]{ra:.2f}x[/{style_all}]")
    total = {m: sum(r["seconds"][m] for r in results) for m in MODES}
    table.add_section()
    table.add_row("total", "", "", f"{total['plain']:.3f}", f"{total['checked']:.3f}", f"{total['all']:.3f}",
                  f"{total['off']:.3f}", f"{total['checked'] / total['plain']:.2f}x",
                  f"{total['off'] / total['plain']:.2f}x", f"{total['all'] / total['off']:.2f}x")
    console.print(table)
    console.print(f"targets: all/off <= {TARGET_ALL_OFF}x (every check, nan_inf included, over none); "
                  f"checked/plain <= {TARGET_RATIO}x (part 1's); outputs equal across modes (and close to PyTorch)")
    console.print(", ".join(f"{k}: {v}" for k, v in info.items()))


def main(argv: Optional[List[str]] = None) -> int:
    """Command line entry point; returns 0, or 1 when all/off exceeds its target somewhere."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="small sizes (a smoke test, seconds)")
    p.add_argument("--repeat", type=int, default=1, help="runs per kernel and mode; the best is reported")
    p.add_argument("--json", metavar="FILE", help="also write the results as JSON to FILE")
    p.add_argument("--only", nargs="+", metavar="NAME", help="run only these kernels (e.g. matmul 'vector add')")
    p.add_argument("-v", "--verbose", action="store_true", help="print every run as it finishes")
    args = p.parse_args(argv)
    if args.repeat < 1:
        p.error("--repeat must be at least 1")
    cases = suite(args.quick)
    if args.only:
        wanted = {n.lower() for n in args.only}
        cases = [c for c in cases if c.name.lower() in wanted or c.name.split()[-1].lower() in wanted]
        if not cases:
            p.error(f"no kernel named {args.only}")
    _warm_up()
    log = (lambda s: print(s, file=sys.stderr, flush=True)) if args.verbose else None
    info = machine_info()
    results = benchmark(cases, args.repeat, log)
    render(results, info, args.repeat, args.quick)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"machine": info, "quick": args.quick, "repeat": args.repeat, "target_ratio": TARGET_RATIO,
                       "target_all_off": TARGET_ALL_OFF, "results": results}, fh, indent=2)
            fh.write("\n")
    return 0 if all(r["ratio_all_off"] <= TARGET_ALL_OFF for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
