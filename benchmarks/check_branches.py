"""A divergent ``if`` under the batched engine: run masked (each branch once over the whole batch)
or split into a group per branch, at sizes from a test suite's to a data-bound launch's.

Two kernels of cross entropy's shape, half their rows ignored (in alternation): ``early`` decides
first (a row whose label is the ignore index zeroes its gradient in a loop over the columns and
returns; the others loop over the columns twice: max, then exponentials), ``late`` computes every
row's exponentials first and then zeroes the ignored rows. Each size runs three ways in one
process, every check on: ``masked`` (``simt.MASK_AFTER_BYTES`` 0), ``split``
(``MASK_AFTER_BYTES`` infinite) and ``auto`` (tritonkit's threshold); best of ``--repeat`` warm
launches after one untimed launch. The batch's largest value is ``rows x BLOCK x 4`` bytes (fp32),
under the engine's 4 MiB batch budget.

Usage::

    python benchmarks/check_branches.py [--repeat N] [--json FILE]

Prints one line per kernel and size (ms per launch each way) and the machine.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from typing import List, Optional

import torch
import triton
import triton.language as tl

import tritonkit
from tritonkit.check.interp import simt

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _machine import cpu_model  # noqa: E402

#: (rows, columns, BLOCK): a test suite's small launches up to a data-bound one
SIZES = [(8, 64, 64), (64, 256, 128), (128, 512, 512), (256, 1024, 1024), (512, 4096, 2048), (256, 16384, 4096)]


@triton.jit
def _row_exps(x, grad, row, n_cols, BLOCK: tl.constexpr):
    """``grad[row] = exp(x[row] - max(x[row]))``: two loops over the row's columns."""
    m = float("-inf")
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        m = tl.maximum(m, tl.max(tl.load(x + row * n_cols + cols, mask=cols < n_cols, other=float("-inf"))))
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        v = tl.load(x + row * n_cols + cols, mask=cols < n_cols, other=float("-inf"))
        tl.store(grad + row * n_cols + cols, tl.exp(v - m), mask=cols < n_cols)


@triton.jit
def ignored_rows_grad(x, y, grad, n_cols, ignore_index, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    label = tl.load(y + row)
    if label == ignore_index:
        for start in range(0, n_cols, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            tl.store(grad + row * n_cols + cols, tl.zeros((BLOCK,), dtype=tl.float32), mask=cols < n_cols)
        return
    _row_exps(x, grad, row, n_cols, BLOCK)


@triton.jit
def late_ignored_rows_grad(x, y, grad, n_cols, ignore_index, BLOCK: tl.constexpr):
    _row_exps(x, grad, tl.program_id(0).to(tl.int64), n_cols, BLOCK)
    if tl.load(y + tl.program_id(0)) == ignore_index:
        tl.store(grad + tl.program_id(0).to(tl.int64) * n_cols, 0.0)


KERNELS = {"early": ignored_rows_grad, "late": late_ignored_rows_grad}


def launch_ms(kernel, rows: int, cols: int, block: int, limit: float, repeat: int) -> float:
    """Best milliseconds of one checked launch with ``simt.MASK_AFTER_BYTES = limit``."""
    torch.manual_seed(0)
    x = torch.randn(rows, cols)
    y = torch.where(torch.arange(rows) % 2 == 0, torch.tensor(-100), torch.tensor(3))
    grad = torch.empty(rows, cols)
    old, simt.MASK_AFTER_BYTES = simt.MASK_AFTER_BYTES, limit
    try:
        best = float("inf")
        for i in range(repeat + 1):
            t0 = time.perf_counter()
            with tritonkit.checking() as s:
                kernel[(rows,)](x, y, grad, cols, -100, BLOCK=block)
            if i:
                best = min(best, time.perf_counter() - t0)
        assert not s.findings and s.launches[0].engine == "batched"
    finally:
        simt.MASK_AFTER_BYTES = old
    return 1e3 * best


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    rows_out = []
    for kname, kernel in KERNELS.items():
        for rows, cols, block in SIZES:
            r = {"kernel": kname, "rows": rows, "cols": cols, "block": block, "batch_value_bytes": rows * block * 4}
            for name, limit in (("masked", 0.0), ("split", float("inf")), ("auto", simt.MASK_AFTER_BYTES)):
                r[name + "_ms"] = round(launch_ms(kernel, rows, cols, block, limit, args.repeat), 2)
            rows_out.append(r)
            print(f"{kname} rows={rows} cols={cols} BLOCK={block} value={r['batch_value_bytes'] >> 10} KiB: "
                  f"masked {r['masked_ms']} ms, split {r['split_ms']} ms, auto {r['auto_ms']} ms", flush=True)
    machine = {"cpu": cpu_model(), "cores": len(os.sched_getaffinity(0)), "python": platform.python_version(),
               "torch": torch.__version__, "triton": triton.__version__, "tritonkit": tritonkit.__version__,
               "date": time.strftime("%Y-%m-%d"), "mask_after_bytes": simt.MASK_AFTER_BYTES}
    print("machine:", machine)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"machine": machine, "sizes": rows_out}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
