"""Milliseconds per checked launch of ``benchmarks/check_speed.py``'s kernels, to compare two versions
of tritonkit on the same machine.

Each kernel of the suite runs in ``tritonkit.checking(nan=True)`` (every check) under one engine;
one untimed launch first, then the best of ``--repeat`` launches. Unlike ``check_speed.py`` it runs
nothing else (no plain interpreter, no PyTorch), so a round takes seconds and rounds of two source
trees can alternate, which is what makes a comparison on a noisy machine fair::

    for i in 1 2 3; do
        PYTHONPATH=/path/to/old/src python benchmarks/check_launch_ms.py --json old$i.json
        python benchmarks/check_launch_ms.py --json new$i.json
    done

Usage::

    python benchmarks/check_launch_ms.py [--engine auto|sequential] [--quick] [--repeat N] [--batch-memory MB]
        [--json FILE]

``--quick`` uses the suite's small sizes (the sequential engine at the base sizes takes minutes).
Prints one line: kernel=ms ..., then the machine and the tritonkit it imported.
"""
from __future__ import annotations

import os

os.environ["TRITON_INTERPRET"] = "1"  # as check_speed.py: its kernels become Triton's interpreted functions

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from typing import Dict, List, Optional  # noqa: E402

import tritonkit  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_speed  # noqa: E402


def launch_ms(engine: str, quick: bool, repeat: int, batch_memory: Optional[int] = None) -> Dict[str, float]:
    """Kernel name -> best milliseconds of one checked launch (``repeat`` timed launches after one
    untimed; ``batch_memory`` in bytes, None: tritonkit's default)."""
    out = {}
    for case in check_speed.suite(quick, large=False):
        inputs = case.make()

        def once():
            with tritonkit.checking(nan=True, engine=engine, batch_memory=batch_memory):
                case.run(inputs)
        once()
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            once()
            times.append(time.perf_counter() - t0)
        out[case.name] = 1e3 * min(times)
    return out


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--engine", choices=("auto", "sequential"), default="auto")
    p.add_argument("--quick", action="store_true", help="the suite's small sizes")
    p.add_argument("--repeat", type=int, default=12, help="timed launches per kernel (default 12)")
    p.add_argument("--batch-memory", type=int, metavar="MB", help="the batch memory (default: tritonkit's)")
    p.add_argument("--json", metavar="FILE", help="write the figures and the machine as JSON")
    args = p.parse_args(argv)
    ms = launch_ms(args.engine, args.quick, args.repeat, args.batch_memory and args.batch_memory * 2 ** 20)
    info = check_speed.machine_info()
    info["tritonkit_path"] = os.path.dirname(tritonkit.__file__)
    print(" ".join(f"{name}={v:.1f}" for name, v in ms.items()))
    print("machine: " + ", ".join(f"{k} {v}" for k, v in info.items()))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"engine": args.engine, "batch_memory_mb": args.batch_memory, "quick": args.quick, "repeat": args.repeat, "ms": ms, "machine": info},
                      fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
