"""How large should the batched engine's batches be? Time and peak memory of ``tritonkit check``
per batch-memory budget (``checking(batch_memory=...)``, ``--batch-memory``), on the kernels of
``check_speed.py`` and a softmax of 8192x8192 fp32, each run in a fresh process.

Usage::

    python benchmarks/batch_memory.py [--mib 8,16,32,64,128] [--quick] [--json FILE]

Prints per kernel and budget: the first launch's seconds, the best of the next two (warm), and the
process's peak RSS (GiB); the plain interpreter's peak RSS (``TRITON_INTERPRET=1``) for the
softmax. The default budget (``tritonkit.check.engine.batched.DEFAULT_BATCH_MEMORY``) is chosen
from this table: the fastest budget on most kernels whose softmax peak stays within 1.5x of the
plain interpreter's.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def run_one(name: str, mib, quick: bool) -> dict:
    """One kernel at one budget (``mib``: MiB, or "plain") in a fresh process (see
    :func:`check_speed.fresh_process`); the 8192x8192 softmax runs once, the others three times."""
    import check_speed
    runs = 1 if "8192x8192" in name else 3
    if mib == "plain":
        return check_speed.fresh_process(name, "plain", quick=quick, large=not quick, runs=1)
    return check_speed.fresh_process(name, "tritonkit", quick=quick, large=not quick, mib=int(mib), runs=runs)


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mib", default="8,16,32,64,128", help="budgets to measure, MiB, comma-separated")
    ap.add_argument("--quick", action="store_true", help="small sizes (a smoke test)")
    ap.add_argument("--json", help="write the results as JSON")
    args = ap.parse_args(argv)
    import check_speed
    budgets = [int(m) for m in args.mib.split(",")]
    names = [f"{c.name} {c.size}" for c in check_speed.suite(quick=args.quick, large=not args.quick)]
    names.append("softmax 8192x8192")
    info = check_speed.machine_info()
    print(f"# batch memory: {info}")
    print(f"{'kernel':58} " + " ".join(f"{str(b) + ' MiB':>22}" for b in budgets))
    results: Dict[str, dict] = {}
    for name in names:
        row = {b: run_one(name, b, args.quick) for b in budgets}
        if name == "softmax 8192x8192":
            row["plain"] = run_one(name, "plain", args.quick)
        results[name] = row
        cells = []
        for b in budgets:
            t = row[b]["times"]
            warm = min(t[1:]) if len(t) > 1 else t[0]
            cells.append(f"{t[0]:6.2f}/{warm:6.2f}s {row[b]['peak_gib']:5.2f}G")
        extra = f"  plain peak {row['plain']['peak_gib']:.2f}G" if "plain" in row else ""
        print(f"{name[:58]:58} " + " ".join(f"{c:>22}" for c in cells) + extra, flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": info, "results": {n: {str(k): v for k, v in r.items()}
                                                         for n, r in results.items()}}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
