"""Writes the doctor-report fixtures of this folder (``python tests/data/doctor/make_fixtures.py``).

``report.json``: a realistic ``tritonkit doctor`` report: findings as ``tritonkit check --json``
wrote them for the buggy examples (vector_add missing_mask, matmul k_tail, histogram plain_store,
embedding int32_offsets, grad_accumulate empty_grad, softmax no_max_subtraction), access maps made
by :func:`access_map` from simulated blocked accesses (the shape the checked interpreter records),
tune results in ``TuneResult.to_dict()`` form and profile kernels in ``KernelReport.to_dict()``
form with H100 SXM peaks. ``check_only.json``: the same check, tune and profile skipped (no GPU).
``python tests/data/doctor/make_fixtures.py --screenshot docs/doctor_report.png`` draws the README's
picture from a short version of ``report.json`` (needs chromium).

The fixtures are ``DoctorReport.to_dict()`` documents (``tritonkit.doctor``); the tests read them with
``DoctorReport.from_dict``. The report tests build access maps with the same :func:`access_map`
(``tests/report/conftest.py`` holds a copy as a fixture: tests do not import this script).
"""
from __future__ import annotations

import json
import math
import os
from typing import Iterable, List, Sequence, Tuple

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def access_map(arg: str, shape: Sequence[int], dtype: str, accesses: Iterable[Tuple[int, str, np.ndarray]],
               bins: Tuple[int, int] = (1, 1), programs: int = 1, max_oob: int = 4096) -> dict:
    """An access map as the checked interpreter records it, from simulated accesses.

    Args:
        arg / shape / dtype: the tensor argument.
        accesses: (program id, ``"load"``/``"store"``/``"atomic_add"``, element coordinates on the 2-D
            canvas as an int array ``(n, 2)``; coordinates outside the canvas are out of bounds).
        bins: elements per bin (rows, cols).
        programs: programs in the grid.
        max_oob: the most out-of-bounds entries listed.

    Returns:
        The access-map dict (see :mod:`tritonkit.report.charts.heatmap`).
    """
    rows = 1 if len(shape) == 1 else int(np.prod(shape[:-1]))
    cols = int(shape[-1])
    br, bc = bins
    nbr, nbc = -(-rows // br), -(-cols // bc)
    reads = np.zeros((nbr, nbc), dtype=np.int64)
    writes = np.zeros((nbr, nbc), dtype=np.int64)
    rprog = np.full((nbr, nbc), -1, dtype=np.int64)
    wprog = np.full((nbr, nbc), -1, dtype=np.int64)
    oob = {}
    for pid, access, coords in accesses:
        coords = np.asarray(coords, dtype=np.int64).reshape(-1, 2)
        ok = (coords[:, 0] >= 0) & (coords[:, 0] < rows) & (coords[:, 1] >= 0) & (coords[:, 1] < cols)
        inside = coords[ok]
        bi, bj = inside[:, 0] // br, inside[:, 1] // bc
        if access == "load":
            np.add.at(reads, (bi, bj), 1)
            rprog[bi, bj] = pid
        else:
            np.add.at(writes, (bi, bj), 1)
            wprog[bi, bj] = pid
            if access.startswith("atomic"):
                np.add.at(reads, (bi, bj), 1)
                rprog[bi, bj] = pid
        for r, c in coords[~ok].tolist():
            key = (r, c, access)
            oob[key] = oob.get(key, 0) + 1
    entries = [[r, c, a, n] for (r, c, a), n in sorted(oob.items())]
    return {"arg": arg, "shape": list(shape), "dtype": dtype,
            "strides": [int(np.prod(shape[i + 1:])) for i in range(len(shape))],
            "rows": rows, "cols": cols, "bin_rows": br, "bin_cols": bc,
            "reads": reads.tolist(), "writes": writes.tolist(),
            "read_program": rprog.tolist(), "write_program": wprog.tolist(),
            "oob": entries[:max_oob], "oob_lanes": int(sum(oob.values())), "oob_truncated": len(entries) > max_oob,
            "programs": programs}


def _line(start: int, n: int) -> np.ndarray:
    return np.stack([np.zeros(n, dtype=np.int64), np.arange(start, start + n)], axis=1)


def _tile(r0: int, nr: int, c0: int, nc: int) -> np.ndarray:
    r, c = np.meshgrid(np.arange(r0, r0 + nr), np.arange(c0, c0 + nc), indexing="ij")
    return np.stack([r.ravel(), c.ravel()], axis=1)


def vector_add_maps() -> List[dict]:
    """vector_add --bug missing_mask: n = 1000, BLOCK = 256, 4 programs, no mask on x, y or out."""
    n, block, progs = 1000, 256, 4
    loads = [(p, "load", _line(p * block, block)) for p in range(progs)]
    stores = [(p, "store", _line(p * block, block)) for p in range(progs)]
    return [access_map("x_ptr", [n], "float32", loads, programs=progs),
            access_map("y_ptr", [n], "float32", loads, programs=progs),
            access_map("out_ptr", [n], "float32", stores, programs=progs)]


def matmul_maps() -> List[dict]:
    """matmul --bug k_tail: A [64, 40] @ B [40, 48], 32 x 32 tiles, BLOCK_K = 32 without a K mask."""
    M, N, K, bm, bn, bk = 64, 48, 40, 32, 32, 32
    grid_m, grid_n = math.ceil(M / bm), math.ceil(N / bn)
    a_acc, b_acc, c_acc = [], [], []
    for pid in range(grid_m * grid_n):
        pm, pn = pid // grid_n, pid % grid_n
        for k0 in range(0, K, bk):
            a = _tile(pm * bm, bm, k0, bk)
            a = a[a[:, 0] < M]  # rows masked, K not
            a_acc.append((pid, "load", a))
            b = _tile(k0, bk, pn * bn, bn)
            b = b[b[:, 1] < N]
            b_acc.append((pid, "load", b))
        c = _tile(pm * bm, bm, pn * bn, bn)
        c_acc.append((pid, "store", c[(c[:, 0] < M) & (c[:, 1] < N)]))
    progs = grid_m * grid_n
    return [access_map("a_ptr", [M, K], "float16", a_acc, programs=progs),
            access_map("b_ptr", [K, N], "float16", b_acc, programs=progs),
            access_map("c_ptr", [M, N], "float16", c_acc, programs=progs)]


def layer_norm_maps() -> List[dict]:
    """A 3-D activation [4, 128, 512] read 16 rows per program (downsampled 8 x 16) and its output."""
    B, T, D = 4, 128, 512
    rows = B * T
    progs = rows // 16
    acc, out = [], []
    for p in range(progs):
        t = _tile(p * 16, 16, 0, D)
        acc.append((p, "load", t))
        out.append((p, "store", t))
    return [access_map("x_ptr", [B, T, D], "bfloat16", acc, bins=(8, 16), programs=progs),
            access_map("y_ptr", [B, T, D], "bfloat16", out, bins=(8, 16), programs=progs)]


def histogram_maps() -> List[dict]:
    """histogram --bug plain_store: 20 programs load and store the same 64 counters."""
    acc = []
    for p in range(20):
        acc.append((p, "load", _line(0, 64)))
        acc.append((p, "store", _line(0, 64)))
    return [access_map("counts_ptr", [64], "int32", acc, programs=20)]


def _read(name: str) -> dict:
    with open(os.path.join(HERE, "raw", name)) as fh:
        return json.load(fh)


def _trial(point: dict, status: str = "ok", ms=None, error: str = "", source: str = "gpu") -> dict:
    return {"point": point, "status": status, "ms": ms if status == "ok" else None,
            "ci_ms": [ms * 0.99, ms * 1.01] if status == "ok" else None, "samples": 25 if status == "ok" else 0,
            "error": error, "sm_clock_mhz": 1980.0, "mem_clock_mhz": 2619.0, "compile_s": 0.8, "source": source}


def tune_results() -> List[dict]:
    """A matmul landscape (36 configs: most ok, some failed / wrong / crashed / pruned) and a small softmax one."""
    rng = np.random.default_rng(7)
    trials = []
    for bm in (64, 128, 256):
        for bn in (64, 128, 256):
            for warps in (4, 8):
                for stages in (3, 4):
                    point = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": 64, "GROUP_SIZE_M": 8, "num_warps": warps,
                             "num_stages": stages}
                    if bm == 256 and bn == 256:
                        trials.append(_trial(point, "pruned", error="needs 262144 bytes of shared memory; the "
                                                                    "device has 232448"))
                        continue
                    if bm == 256 and bn == 128 and stages == 4:
                        trials.append(_trial(point, "failed", error="OutOfResources: out of resource: shared "
                                                                    "memory, Required: 294912, Hardware limit: "
                                                                    "232448"))
                        continue
                    if bm == 64 and bn == 256 and warps == 4 and stages == 4:
                        trials.append(_trial(point, "wrong", error="max abs difference 3.1 at (17, 250) "
                                                                   "(tolerance 0.01)"))
                        continue
                    if bm == 128 and bn == 256 and warps == 8 and stages == 4:
                        trials.append(_trial(point, "crashed", error="CUDA error: an illegal memory access "
                                                                     "was encountered"))
                        continue
                    work = 4096 ** 3 * 2
                    eff = 0.35 + 0.45 * (min(bm, bn) / 256) + 0.05 * (warps == 8) + 0.04 * (stages == 4)
                    ms = work / (989.4e12 * eff) * 1e3 * float(rng.uniform(0.95, 1.08))
                    trials.append(_trial(point, ms=round(ms, 5)))
    ok = [t for t in trials if t["status"] == "ok"]
    winner = min(ok, key=lambda t: t["ms"])
    key_of = ",".join(f"{k}={v}" for k, v in sorted((k, v) for k, v in winner["point"].items()
                                                        if k not in ("num_warps", "num_stages")))
    key_of += f",num_stages={winner['point']['num_stages']},num_warps={winner['point']['num_warps']}"
    matmul = {"kernel": "_matmul_kernel", "key": ["4096", "4096", "4096", "torch.float16", "torch.float16",
                                                   "torch.float16"],
              "strategy": "brute_force", "tuning_s": 41.7, "compile_s": 28.2, "check_s": 4.1, "timing_s": 9.4,
              "flops": 2 * 4096 ** 3, "bytes": 3 * 4096 * 4096 * 2, "winner": key_of, "trials": trials}
    soft = []
    for i, block in enumerate((1024, 2048, 4096)):
        for warps in (4, 8, 16):
            point = {"BLOCK_SIZE": block, "num_warps": warps, "num_stages": 3}
            if block == 1024:
                soft.append(_trial(point, "wrong", error="row 3 differs: the block is shorter than the row (4096)"))
                continue
            ms = 0.0121 * (1.0 + 0.15 * abs(warps - 8) / 8 + 0.1 * (block == 2048))
            soft.append(_trial(point, ms=round(ms, 5), source="cache" if warps == 16 else "gpu"))
    ok = [t for t in soft if t["status"] == "ok"]
    w = min(ok, key=lambda t: t["ms"])["point"]
    softmax = {"kernel": "_softmax_fwd_kernel", "key": ["4096", "torch.float32"], "strategy": "brute_force",
               "tuning_s": 3.2, "compile_s": 2.1, "check_s": 0.4, "timing_s": 0.7, "flops": None, "bytes": 2 * 4096 * 4096 * 4,
               "winner": f"BLOCK_SIZE={w['BLOCK_SIZE']},num_stages=3,num_warps={w['num_warps']}", "trials": soft}
    return [matmul, softmax]


H100_PEAKS = {"name": "NVIDIA H100 SXM5 80GB", "bandwidth_gbps": 3350.0,
              "tflops": {"fp64": 67.0, "fp32": 67.0, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1978.9,
                         "int8": 1978.9},
              "source": "NVIDIA H100 datasheet (2023)", "sms": 132, "sm_clock_mhz": 1980.0, "max_warps_per_sm": 64,
              "regs_per_sm": 65536, "shared_per_sm": 233472, "max_blocks_per_sm": 32}


def _kernel(name, launches, share, bytes_=None, flops=None, dtype=None, host_us=None, bound="unknown", reason="",
            resources=None, work="launch_metadata", mean_us=None):
    """A KernelReport dict whose GPU time gives ``share`` of the bandwidth peak (memory-bound) or of the
    dtype's peak (compute-bound); ``mean_us`` where neither is known."""
    peak = H100_PEAKS["tflops"].get(dtype) if dtype else None
    if bound == "compute":
        mean_us = flops / (share * peak * 1e12) * 1e6
    elif bytes_:
        mean_us = bytes_ / (share * 3350e9) * 1e6
    total_ms = mean_us * launches / 1e3
    secs = mean_us / 1e6
    gbps = bytes_ / secs / 1e9 if bytes_ else None
    tflops = flops / secs / 1e12 if flops else None
    return {"name": name, "scope": [], "launches": launches, "total_ms": round(total_ms, 5), "mean_us": round(mean_us, 4),
            "host_us": host_us, "bytes": bytes_, "flops": flops, "flops_dtype": dtype,
            "work_source": work if (bytes_ or flops) else None, "gbps": gbps, "tflops": tflops,
            "intensity": flops / bytes_ if bytes_ and flops else None,
            "pct_peak_bw": 100 * gbps / 3350.0 if gbps else None,
            "pct_peak_flops": 100 * tflops / peak if tflops and peak else None,
            "pct_ceiling_bw": 100 * gbps / 3010.0 if gbps else None,
            "pct_ceiling_flops": 100 * tflops / 755.0 if tflops and dtype in ("bf16", "fp16") else None,
            "bound": bound, "bound_reason": reason, "resources": resources or {}}


def profile_part() -> dict:
    kernels = [
        _kernel("_matmul_kernel", 20, 0.68, bytes_=3 * 4096 * 4096 * 2, flops=2 * 4096 ** 3, dtype="fp16",
                bound="compute", reason="68% of the fp16 tensor-core peak (989 TFLOP/s); intensity 1365 FLOP/byte is "
                                        "past the ridge (295 FLOP/byte)",
                resources={"registers": 168, "spills": 0, "shared": 131072, "num_warps": 8, "num_stages": 4,
                           "occupancy": 0.125}),
        _kernel("_softmax_fwd_kernel", 50, 0.81, bytes_=2 * 4096 * 4096 * 4, bound="memory",
                reason="81% of the bandwidth peak (3350 GB/s)",
                resources={"registers": 40, "spills": 0, "shared": 0, "num_warps": 8, "num_stages": 3,
                           "occupancy": 1.0}),
        _kernel("_add_kernel", 200, 0.74, bytes_=3 * 4 * 1048576 * 4, bound="memory",
                reason="74% of the bandwidth peak (3350 GB/s)",
                resources={"registers": 26, "spills": 0, "shared": 0, "num_warps": 4, "num_stages": 3,
                           "occupancy": 1.0}),
        _kernel("_layer_norm_fwd_fused", 10, 0.21, bytes_=2 * 8 * 1024 * 4096 * 2, flops=8 * 8 * 1024 * 4096,
                dtype="fp32", bound="latency", reason="below 30% of both roofs: 21% of the bandwidth peak, 2% of the "
                                                      "fp32 peak: too few programs in flight (64 programs on 132 SMs)",
                resources={"registers": 56, "spills": 0, "shared": 4096, "num_warps": 4, "num_stages": 3,
                           "occupancy": 0.5}),
        _kernel("_histogram_kernel", 400, 0.0, host_us=18.0, bound="host", mean_us=2.4,
                reason="18.0 us of host time per launch > 2.4 us on the GPU, and the kernel's work is unknown"),
    ]
    return {"peaks": H100_PEAKS, "ceiling": {"bandwidth_gbps": 3010.0, "tflops": {"fp16": 755.0},
                                             "source": "tritonkit calibrate, 2026-11-20"},
            "kernels": kernels, "charts": ["doctor-out/profile_roofline.png", "doctor-out/profile_roofline.svg"]}


def check_part() -> dict:
    findings, records, kernels = [], [], []
    for name in ("vector_add.json", "matmul.json", "histogram.json", "embedding.json", "grad_accumulate.json",
                 "softmax.json"):
        d = _read(name)
        findings += d["findings"]
        records += d["launch_records"][:1]
        kernels += d["kernels"]
    maps = {"_add_kernel_missing_mask": vector_add_maps(), "_matmul_kernel_k_tail": matmul_maps(),
            "_histogram_kernel_plain_store": histogram_maps()}
    for r in records:
        r["access_maps"] = maps.get(r["kernel"], [])
        r.setdefault("bytes_read", sum(sum(map(sum, m["reads"])) for m in r["access_maps"]) * 4)
        r.setdefault("bytes_written", sum(sum(map(sum, m["writes"])) for m in r["access_maps"]) * 4)
    ln = {"kernel": "_layer_norm_fwd_fused", "grid": [32, 1, 1], "programs": 32, "config": "BLOCK_SIZE=512",
          "seconds": 0.84, "status": "ok", "engine": "batched", "bytes_read": 4 * 128 * 512 * 2,
          "bytes_written": 4 * 128 * 512 * 2, "unique_bytes_read": 4 * 128 * 512 * 2,
          "unique_bytes_written": 4 * 128 * 512 * 2, "flops": 8 * 4 * 128 * 512, "access_maps": layer_norm_maps()}
    records.append(ln)
    by_kind = {}
    for f in findings:
        by_kind[f["kind"]] = by_kind.get(f["kind"], 0) + 1
    summary = {"launches": len(records), "programs": sum(r["programs"] for r in records),
               "seconds": round(sum(r["seconds"] for r in records), 3), "findings_by_kind": by_kind,
               "checks": ["out_of_bounds", "undefined_value", "data_race", "uninitialized_read", "int_overflow",
                          "nan_inf"], "engine": "auto", "aborted": None}
    return {"findings": findings, "launches": len(records), "kernels": kernels, "launch_records": records,
            "summary": summary}


def main() -> None:
    check = check_part()
    full = {"command": "(test fixture: real findings of the examples, made-up profile and tuning figures)",
            "created": "2026-11-22T10:00:00",
            "versions": {"tritonkit": "0.4.0", "triton": "3.6.0", "torch": "2.13.0", "python": "3.12.7"},
            "device": "NVIDIA H100 80GB HBM3",
            "steps": [{"name": "check", "status": "ran", "why": "CPU interpreter, 9 launches", "json": "doctor-out/check.json",
                       "seconds": 21.4},
                      {"name": "tune", "status": "ran", "why": "2 autotuned kernels", "json": "doctor-out/tune.json",
                       "seconds": 45.3},
                      {"name": "profile", "status": "ran", "why": "Proton, 5 kernels", "json": "doctor-out/profile.json",
                       "seconds": 12.8}],
            "check": check, "tune": {"results": tune_results()}, "profile": profile_part()}
    only = {"command": "python examples/vector_add.py --bug missing_mask", "created": "2026-11-22T10:05:00",
            "versions": {"tritonkit": "0.4.0", "triton": "3.6.0", "torch": "2.13.0"}, "device": None,
            "steps": [{"name": "check", "status": "ran", "why": "", "json": "doctor-out/check.json", "seconds": 2.1},
                      {"name": "tune", "status": "skipped", "why": "no GPU here (torch.cuda.is_available() is False)",
                       "json": None, "seconds": 0.0},
                      {"name": "profile", "status": "skipped", "why": "no GPU here (torch.cuda.is_available() is False)",
                       "json": None, "seconds": 0.0}],
            "check": {**check, "findings": [f for f in check["findings"] if f["kernel"] == "_add_kernel_missing_mask"],
                      "launch_records": [r for r in check["launch_records"]
                                         if r["kernel"] == "_add_kernel_missing_mask"]},
            "tune": None, "profile": None}
    for name, data in (("report.json", full), ("check_only.json", only)):
        with open(os.path.join(HERE, name), "w") as fh:
            json.dump(data, fh, separators=(",", ":"))
            fh.write("\n")


def screenshot(path: str, height: int = 2400) -> None:
    """Render a short version of ``report.json`` (three findings, three launches, profile and tuning)
    and take a 1400 x ``height`` screenshot of it with headless Chromium (the README's picture)."""
    import subprocess
    import tempfile

    from tritonkit.doctor import DoctorReport
    from tritonkit.report.html import write_report

    with open(os.path.join(HERE, "report.json")) as fh:
        report = json.load(fh)
    check = report["check"]
    kinds_wanted = ["out_of_bounds", "data_race", "uninitialized_read"]
    picked = []
    for kind in kinds_wanted:
        picked.append(next(f for f in check["findings"] if f["kind"] == kind and f not in picked))
    check["findings"] = picked
    check["launch_records"] = [r for r in check["launch_records"] if r.get("access_maps")][:3]
    with tempfile.TemporaryDirectory() as tmp:
        page = os.path.join(tmp, "report.html")
        write_report(DoctorReport.from_dict(report), page)
        subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                        "--disable-background-networking", "--disable-component-update", "--disable-sync",
                        "--hide-scrollbars", f"--user-data-dir={os.path.join(tmp, 'profile')}",
                        f"--screenshot={os.path.abspath(path)}", f"--window-size=1400,{height}", "file://" + page],
                       check=True, capture_output=True, timeout=60)


if __name__ == "__main__":
    import sys

    if len(sys.argv) >= 3 and sys.argv[1] == "--screenshot":
        screenshot(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 2400)
    else:
        main()
