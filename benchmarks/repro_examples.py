"""Does every reproducer reproduce? ``tritonkit check --repro`` on every buggy example, then each
folder's ``repro.py`` checked again.

For each ``examples/NAME.py --bug BUG``: ``tritonkit check --nan --repro DIR --json orig.json``
(its time, and the time without ``--repro``), then ``tritonkit check --nan --json again.json --
python DIR/FOLDER/repro.py`` for every folder. A case **reproduces** when the findings of its
folders, together, are the original findings: the same (kind, line, argument, reason) set, and, for
a finding the original made in one launch, the same elements and program ids. Printed per case:
folders, their size on disk, the seconds with and without ``--repro``, and whether it reproduces;
the last line the share of cases that do.

Usage::

    python benchmarks/repro_examples.py [--only NAME[:BUG],...] [--json FILE]
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from _machine import cpu_model  # noqa: E402


def cases() -> List[Tuple[str, str]]:
    """(example, bug) for every bug the examples declare (their ``BUGS``, without ``none``)."""
    out = []
    for name in sorted(os.listdir(os.path.join(ROOT, "examples"))):
        if not name.endswith(".py"):
            continue
        spec = importlib.util.spec_from_file_location(f"_ex_{name[:-3]}", os.path.join(ROOT, "examples", name))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        out += [(name[:-3], bug) for bug in getattr(module, "BUGS", ()) if bug != "none"]
    return out


def check(args: List[str], cwd: str) -> Tuple[int, float]:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "tritonkit", "check", *args], cwd=cwd, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL, timeout=1800)
    return proc.returncode, time.perf_counter() - start


def facts(path: str) -> Dict[tuple, dict]:
    with open(path) as fh:
        data = json.load(fh)
    return {(f["kind"], f["line"], f["arg"], f["reason"]): f for f in data["findings"]}


def run_case(name: str, bug: str, work: str) -> dict:
    script = ["python", os.path.join(ROOT, "examples", f"{name}.py"), "--bug", bug]
    repro_dir = os.path.join(work, "repro")
    _, plain_s = check(["--nan", "--", *script], work)
    status, repro_s = check(["--nan", "--repro", repro_dir, "--json", os.path.join(work, "orig.json"), "--", *script],
                            work)
    orig = facts(os.path.join(work, "orig.json"))
    folders = sorted(f for f in os.listdir(repro_dir) if os.path.isdir(os.path.join(repro_dir, f))) \
        if os.path.isdir(repro_dir) else []
    size = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(repro_dir) for f in fs) \
        if folders else 0
    again: Dict[tuple, List[dict]] = {}
    for folder in folders:
        out = os.path.join(repro_dir, folder, "again.json")
        check(["--nan", "--json", out, "--", "python", os.path.join(repro_dir, folder, "repro.py")], work)
        if os.path.exists(out):
            for key, f in facts(out).items():
                again.setdefault(key, []).append(f)
    same = set(again) == set(orig) and bool(orig)
    for key, f in orig.items():
        if same and f.get("launches") == 1:
            got = again[key]
            same = any(g["elements"] == f["elements"] and g["program_ids"] == f["program_ids"] for g in got)
    skipped = ""
    if os.path.exists(os.path.join(repro_dir, "skipped.txt")):
        with open(os.path.join(repro_dir, "skipped.txt")) as fh:
            skipped = fh.read().strip()
    return {"case": f"{name}:{bug}", "status": status, "findings": len(orig), "folders": len(folders),
            "bytes": size, "seconds": round(repro_s, 2), "seconds_without_repro": round(plain_s, 2),
            "reproduces": same, "skipped": skipped,
            "missing": sorted(map(str, set(orig) - set(again))), "extra": sorted(map(str, set(again) - set(orig)))}


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", help="cases to run, comma-separated NAME or NAME:BUG")
    p.add_argument("--json", help="write the results as JSON")
    args = p.parse_args(argv)
    import torch
    import triton
    todo = cases()
    if args.only:
        want = [w.strip() for w in args.only.split(",") if w.strip()]
        todo = [(n, b) for n, b in todo if n in want or f"{n}:{b}" in want]
    machine = {"cpu": f"{cpu_model()} ({os.cpu_count()} threads)", "gpu": torch.cuda.get_device_name()
               if torch.cuda.is_available() else None, "python": platform.python_version(),
               "torch": torch.__version__, "triton": triton.__version__, "date": time.strftime("%Y-%m-%d")}
    print(f"# tritonkit check --repro on every buggy example; {machine}", flush=True)
    print(f"{'case':40} {'findings':>8} {'folders':>7} {'KiB':>8} {'s':>6} {'s w/o':>6}  reproduces", flush=True)
    rows = []
    for name, bug in todo:
        with tempfile.TemporaryDirectory() as work:
            r = run_case(name, bug, work)
        rows.append(r)
        print(f"{r['case']:40} {r['findings']:>8} {r['folders']:>7} {r['bytes'] / 1024:>8.1f} {r['seconds']:>6.1f} "
              f"{r['seconds_without_repro']:>6.1f}  {'yes' if r['reproduces'] else 'NO'}"
              + (f" (missing {r['missing']}, extra {r['extra']}{'; ' + r['skipped'] if r['skipped'] else ''})"
                 if not r["reproduces"] else ""), flush=True)
    ok = sum(r["reproduces"] for r in rows)
    print(f"{ok} of {len(rows)} cases reproduce ({100 * ok / max(1, len(rows)):.0f}%)")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"machine": machine, "cases": rows}, fh, indent=1)
    return 0 if ok == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
