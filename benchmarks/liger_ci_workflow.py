"""The CI workflow of ``pytest --tritonkit`` on a real suite: a baseline of the known findings, then a
new bug that fails its tests, with SARIF and reproducers.

On a copy of Liger-Kernel 0.8.5's sdist (as :mod:`peer_suites` fetches it), whose tests import the
package from the sdist's own ``src`` (its ``pytest.ini`` options put it first on the path):

1. a **known** bug is planted (``layer_norm.py``: the weight load loses its mask; the tests with a
   hidden size that is not a power of two read past the weight), and ``pytest --tritonkit
   --tritonkit-update-baseline base.json`` accepts it;
2. a **new** bug is planted (``geglu.py``: the forward store loses its mask), and ``pytest --tritonkit
   --tritonkit-baseline base.json --tritonkit-sarif out.sarif --tritonkit-repro repro
   --tritonkit-json tk.json`` runs again: the known bug's tests should pass (known), the new bug's
   fail, the SARIF mark each result ``unchanged`` or ``new``;
3. every reproducer folder is checked again (``tritonkit check -- python repro.py``): its findings
   should be among the run's, with the same kind, line and argument.

Prints each step's outcome and a last line ``workflow: ok`` or what went wrong (exit status 1).

Usage::

    python benchmarks/liger_ci_workflow.py [--files test_layer_norm.py,test_geglu.py] [--workers 2]
        [--pythonpath DIR] [--keep DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from peer_suites import sdist_root  # noqa: E402

KNOWN = ("ops/layer_norm.py", "W_row = tl.load(W_ptr + col_offsets, mask=mask, other=0.0)",
         "W_row = tl.load(W_ptr + col_offsets)")
NEW = ("ops/geglu.py", "tl.store(c + col_offsets, c_row, mask=mask)", "tl.store(c + col_offsets, c_row)")


def plant(pkg: str, bug) -> int:
    """Plant ``bug`` (file, old line text, new text) in the package copy; returns its line number."""
    path = os.path.join(pkg, bug[0])
    with open(path) as fh:
        text = fh.read()
    if bug[1] not in text:
        raise SystemExit(f"{path}: {bug[1]!r} not found: this Liger-Kernel version differs; the bug cannot be planted")
    line = text[:text.index(bug[1])].count("\n") + 1
    with open(path, "w") as fh:
        fh.write(text.replace(bug[1], bug[2], 1))
    return line


def pytest_run(root: str, files: List[str], env: dict, extra: List[str], workers: int) -> dict:
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--tritonkit", *extra,
           *[os.path.join("test", "transformers", f) for f in files]] + (["-n", str(workers)] if workers else [])
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=3600)
    out = proc.stdout + proc.stderr
    summary = next((line for line in reversed(out.splitlines()) if " passed" in line or " failed" in line), "")
    failed = sorted({line.split()[1] for line in out.splitlines() if line.startswith("FAILED ")})
    return {"status": proc.returncode, "summary": summary.strip("= "), "failed": failed,
            "seconds": round(time.perf_counter() - start, 1)}


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--files", default="test_layer_norm.py,test_geglu.py")
    p.add_argument("--workers", type=int, default=2, help="pytest-xdist workers (0: one process)")
    p.add_argument("--pythonpath", help="a directory with transformers, for the sdist's tests")
    p.add_argument("--cache", default=os.path.join(HERE, ".peer-cache"))
    p.add_argument("--keep", help="work in DIR and keep it (default: a temporary directory)")
    args = p.parse_args(argv)
    files = [f.strip() for f in args.files.split(",") if f.strip()]
    work = args.keep or tempfile.mkdtemp(prefix="tritonkit-liger-ci-")
    os.makedirs(work, exist_ok=True)
    try:
        root = os.path.join(work, "suite")
        if not os.path.isdir(root):
            shutil.copytree(sdist_root(args.cache, None), root)
        pkg = os.path.join(root, "src", "liger_kernel")
        pristine = os.path.join(sdist_root(args.cache, None), "src", "liger_kernel")
        shutil.rmtree(pkg, ignore_errors=True)
        shutil.copytree(pristine, pkg)  # no bug planted yet, also where --keep kept an earlier run
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (args.pythonpath, env.get("PYTHONPATH")) if p)
        env.pop("TRITON_INTERPRET", None)
        problems = []
        known_line = plant(pkg, KNOWN)
        base = os.path.join(work, "base.json")
        r1 = pytest_run(root, files, env, ["--tritonkit-update-baseline", base], args.workers)
        with open(base) as fh:
            accepted = json.load(fh)["findings"]
        print(f"1. known bug planted at layer_norm.py:{known_line}; baseline written: {r1['summary']} (failed: "
              f"{r1['failed']}) in "
              f"{r1['seconds']} s; {len(accepted)} findings accepted: "
              + ", ".join(f"{f['kind']} {f['kernel']} {os.path.basename(f['file'])}:{f['line']} {f['arg']}"
                          for f in accepted), flush=True)
        if not any(f["line"] == known_line for f in accepted):
            problems.append("the baseline missed the known bug")
        new_line = plant(pkg, NEW)
        sarif, repro, tk = (os.path.join(work, n) for n in ("out.sarif", "repro", "tk.json"))
        shutil.rmtree(repro, ignore_errors=True)
        r2 = pytest_run(root, files, env, ["--tritonkit-baseline", base, "--tritonkit-sarif", sarif,
                                           "--tritonkit-repro", repro, "--tritonkit-json", tk], args.workers)
        newly = sorted(set(r2["failed"]) - set(r1["failed"]))  # the CPU run fails some tests on numerics already
        print(f"2. new bug planted at geglu.py:{new_line}: {r2['summary']} in {r2['seconds']} s; failing now and not "
              f"before: {len(newly)} tests, of files {sorted({t.split('::')[0].split('/')[-1] for t in newly})}; "
              f"failing before too (not findings): {len(set(r2['failed']) & set(r1['failed']))}", flush=True)
        if not newly or any("test_geglu" not in t for t in newly):
            problems.append("the new bug's tests did not fail, or others did")
        with open(sarif) as fh:
            results = json.load(fh)["runs"][0]["results"]
        states = sorted({(r["properties"]["kernel"], r["locations"][0]["physicalLocation"]["region"]["startLine"],
                          r["baselineState"]) for r in results})
        print(f"   SARIF: {len(results)} results: {states}", flush=True)
        if {s[2] for s in states if s[1] == known_line} != {"unchanged"} or \
                {s[2] for s in states if s[1] == new_line} != {"new"}:
            problems.append("the SARIF states are not unchanged (known) and new (new bug)")
        with open(tk) as fh:
            run_keys = {(f["kind"], f["line"], f["arg"]) for t in json.load(fh)["tests"].values() for f in t["findings"]}
        folders = sorted(os.listdir(repro)) if os.path.isdir(repro) else []
        folders = [f for f in folders if os.path.isdir(os.path.join(repro, f))]
        same = 0
        for folder in folders:
            out = os.path.join(repro, folder, "again.json")
            start = time.perf_counter()
            subprocess.run([sys.executable, "-m", "tritonkit", "check", "--json", out, "--", "python",
                            os.path.join(repro, folder, "repro.py")], cwd=work, env=env, capture_output=True,
                           timeout=1800)
            seconds = time.perf_counter() - start
            got = set()
            if os.path.exists(out):
                with open(out) as fh:
                    got = {(f["kind"], f["line"], f["arg"]) for f in json.load(fh)["findings"]}
            size = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(os.path.join(repro, folder))
                       for f in fs)
            ok = bool(got) and got <= run_keys
            same += ok
            print(f"   repro {folder}: {size / 2**20:.1f} MiB, checked again in {seconds:.1f} s: "
                  f"{sorted(got)} {'(in the run)' if ok else '(NOT the run findings)'}", flush=True)
        print(f"3. {same} of {len(folders)} reproducers show the run's findings", flush=True)
        if not folders or same != len(folders):
            problems.append("a reproducer is missing or does not reproduce")
        print("workflow: ok" if not problems else "workflow: " + "; ".join(problems))
        return 0 if not problems else 1
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
