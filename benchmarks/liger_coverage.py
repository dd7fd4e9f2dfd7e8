"""Which Liger-Kernel ops run on the CPU: Triton's own interpreter next to tritonkit's checked one.

Every case of ``tests/data/liger_cases.py`` (each Liger-Kernel op that runs Triton kernels, forward and,
where Liger has one, backward, on small float32 CPU tensors) runs two ways:

* ``plain interpreter``: Triton's interpreter, no tritonkit, in a fresh subprocess per op with
  ``TRITON_INTERPRET=1`` in its environment (it must be set before triton is imported);
* ``tritonkit check``: inside ``tritonkit.checking()``, in this process (``TRITON_INTERPRET`` unset,
  as a user would run it).

Each cell says ``pass`` (no finding, and outputs and gradients within the case's tolerances of
its float64 PyTorch reference), ``wrong result: max err X`` (ran, but not within them),
``findings: ...`` (tritonkit's first finding, with where it points) or ``fail: ...`` (the
exception's first line and the innermost line of Liger it was raised from). Ops that Liger itself
cannot run on a CPU (``liger_cases.NOT_ON_CPU``: its host code asks for a CUDA tensor or a GPU's SM
count) are not run; they are listed with the reason and left out of the totals.

Usage::

    python benchmarks/liger_coverage.py [--only OP ...] [--json FILE] [--jobs N] [--timeout S]
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import logging
import math
import os
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from typing import Callable, Dict, List, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTS_DIR = os.path.join(ROOT, "tests")
BENCH_DIR = os.path.join(ROOT, "benchmarks")
RESULT_MARK = "LIGER_COVERAGE_RESULT "  # the line a worker prints its result on
MODES = ("plain", "check")
REASON_WIDTH = 100


# --------------------------------------------------------------------------------------------------
# running one case
# --------------------------------------------------------------------------------------------------
def _quiet() -> None:
    """Silence noise that is no result: numpy's warnings about masked-off lanes (``-inf - -inf``)
    that the kernels discard, and Liger's log lines about backends it cannot import here."""
    for text in ("invalid value encountered", "divide by zero encountered", "overflow encountered"):
        warnings.filterwarnings("ignore", text, RuntimeWarning)
    logging.getLogger("liger_kernel").setLevel(logging.ERROR)


def _import_cases():
    """The Liger-Kernel cases the tests use (``tests/data/liger_cases.py``), loaded from its file."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("liger_cases", os.path.join(TESTS_DIR, "data", "liger_cases.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up while it runs
    spec.loader.exec_module(mod)
    return mod


def _short(text: str, width: int = REASON_WIDTH) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[:width - 3] + "..."


def _liger_line(exc: BaseException, liger_dir: str) -> Optional[str]:
    """``file.py:line`` of the innermost frame in Liger's source, over the exception's chain."""
    where, seen = None, set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        for frame in traceback.extract_tb(exc.__traceback__):
            if os.path.abspath(frame.filename).startswith(liger_dir + os.sep):
                where = f"{os.path.basename(frame.filename)}:{frame.lineno}"
        exc = exc.__cause__ or exc.__context__
    return where


def _failure(exc: BaseException, liger_dir: str) -> str:
    """``"fail: Type: first line of the message (file.py:line)"``; for the exception Triton's
    interpreter wraps a kernel's error in (``InterpreterError``), the kernel's error."""
    if type(exc).__name__ == "InterpreterError" and exc.__cause__ is not None:
        exc = exc.__cause__
    lines = str(exc).strip().splitlines()
    text = f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
    where = _liger_line(exc, liger_dir)
    if where:
        text = f"{_short(text, REASON_WIDTH - len(where) - 3)} ({where})"
    return "fail: " + _short(text)


def _worst(errors: Dict[str, float]) -> str:
    key = max(errors, key=lambda k: -1.0 if math.isnan(errors[k]) else errors[k])
    return f"max err {errors[key]:.2g} ({key})"


def run_case(op: str, checked: bool, timeout: Optional[float] = None, nan: bool = False) -> dict:
    """Run case ``op`` forward and backward, in the checked interpreter if ``checked`` (every default
    check, and ``nan_inf`` too if ``nan``), else plainly (Triton's interpreter when
    ``TRITON_INTERPRET=1`` was set before triton was imported).

    Returns:
        ``{"status": "pass" | "wrong" | "findings" | "fail", "text": the cell's text,
        "seconds", "max_errors": {key: max abs error} or None, "findings": [finding dicts],
        "launches": checked launches or None}``.
    """
    lc = _import_cases()
    out = {"status": "fail", "text": "", "seconds": 0.0, "max_errors": None, "findings": [], "launches": None}
    start = time.perf_counter()
    session, got = None, None
    try:
        case = lc.CASES[op]()
        with lc.cpu_only():
            if checked:
                import tritonkit
                try:
                    with tritonkit.checking(timeout=timeout, nan=nan) as session:
                        got = case.run_liger()
                except tritonkit.CheckAborted as e:
                    if not session.findings:
                        raise RuntimeError(f"check aborted: {e}") from e
            else:
                got = case.run_liger()
    except Exception as e:  # the op could not run: the cell says why
        out["text"] = _failure(e, lc.LIGER_DIR)
    out["seconds"] = time.perf_counter() - start
    if session is not None:
        out["findings"] = [f.to_dict() for f in session.findings]
        out["launches"] = session.summary()["launches"]
    if session is not None and session.findings:
        f = session.findings[0]
        more = f" (+{len(session.findings) - 1} more)" if len(session.findings) > 1 else ""
        where = f" ({os.path.basename(f.file)}:{f.line})" if f.file else ""
        out["status"] = "findings"
        out["text"] = "findings: " + _short(f"{f.kind}: {f.message}", REASON_WIDTH - len(where) - len(more)) \
            + where + more
    if got is not None:
        ok, errors = lc.compare(got, case.run_reference(), case)
        out["max_errors"] = errors
        if out["status"] != "findings":
            out["status"], out["text"] = ("pass", "pass") if ok else ("wrong", f"wrong result: {_worst(errors)}")
    return out


def _worker(op: str) -> int:
    """Subprocess entry: run ``op`` plainly and print the result on one ``RESULT_MARK`` line."""
    _quiet()
    try:
        result = run_case(op, checked=False)
    except BaseException as e:  # noqa: BLE001 - report anything, the parent shows it
        result = {"status": "fail", "text": "fail: " + _short(f"{type(e).__name__}: {e}"), "seconds": 0.0,
                  "max_errors": None, "findings": [], "launches": None}
    print(RESULT_MARK + json.dumps(result), flush=True)
    return 0


def run_plain(op: str, timeout: float) -> dict:
    """Run case ``op`` in Triton's plain interpreter, in a fresh subprocess (``TRITON_INTERPRET=1``)."""
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONUNBUFFERED="1")
    start = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", op], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"status": "fail", "text": f"fail: timed out after {timeout:g} s", "seconds": timeout,
                "max_errors": None, "findings": [], "launches": None}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(RESULT_MARK):
            return json.loads(line[len(RESULT_MARK):])
    last = (proc.stderr.strip().splitlines() or [""])[-1]
    return {"status": "fail", "text": "fail: " + _short(f"worker exited with {proc.returncode}: {last}"),
            "seconds": time.perf_counter() - start, "max_errors": None, "findings": [], "launches": None}


# --------------------------------------------------------------------------------------------------
# the report
# --------------------------------------------------------------------------------------------------
def machine_line_info() -> Dict[str, str]:
    """The machine and versions: ``benchmarks/check_speed.py``'s description plus liger-kernel's."""
    if BENCH_DIR not in sys.path:
        sys.path.insert(0, BENCH_DIR)
    saved = os.environ.get("TRITON_INTERPRET")
    try:
        from check_speed import machine_info  # sets TRITON_INTERPRET=1 for its own kernels
    finally:
        if saved is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = saved
    info = machine_info()
    date = info.pop("date")
    info["liger-kernel"] = _import_cases().LIGER_VERSION
    info["date"] = date
    return info


def totals(results: List[dict]) -> Dict[str, dict]:
    """Per mode: ``{"passed", "run", "percent"}`` over the ops that were run."""
    out = {}
    for mode in MODES:
        run = [r for r in results if r.get(mode)]
        passed = sum(r[mode]["status"] == "pass" for r in run)
        out[mode] = {"passed": passed, "run": len(run), "percent": 100.0 * passed / len(run) if run else 0.0}
    return out


def render(results: List[dict], info: Dict[str, str], liger_version: str) -> None:
    """Print the table (one row per op, then the totals) and the machine line with ``rich``."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console()
    if console.width < 160:  # a pipe or a narrow terminal: keep the rows readable
        console = Console(width=160)

    def cell(res: Optional[dict]) -> str:
        if res is None:
            return "[yellow]n/a: not on CPU[/yellow]"
        style = {"pass": "green", "wrong": "red", "findings": "magenta", "fail": "red"}[res["status"]]
        return f"[{style}]{escape(res['text'])}[/{style}]"

    table = Table(title=f"Liger-Kernel {liger_version} ops on the CPU: Triton's interpreter and tritonkit check")
    table.add_column("op", no_wrap=True)
    table.add_column("plain interpreter (TRITON_INTERPRET=1)")
    table.add_column("tritonkit check")
    for r in results:
        table.add_row(r["op"], cell(r["plain"]), cell(r["check"]))
    t = totals(results)
    table.add_section()
    table.add_row("total", *(f"{t[m]['passed']} of {t[m]['run']} pass ({t[m]['percent']:.0f}%)" for m in MODES))
    console.print(table)
    skipped = [r for r in results if r["not_on_cpu"]]
    if skipped:
        console.print("not run (Liger's host code needs a GPU), not counted: " +
                      "; ".join(f"{r['op']}: {escape(r['not_on_cpu'])}" for r in skipped))
    console.print("pass: no finding, and outputs and gradients within the case's tolerances of a float64 PyTorch "
                  "reference (tests/data/liger_cases.py)")
    console.print(", ".join(f"{k}: {v}" for k, v in info.items()))


def write_json(path: str, payload: dict) -> None:
    """Write ``payload`` as JSON to ``path`` atomically: a temporary file beside it, then a rename."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".liger_coverage.", suffix=".json.tmp", dir=directory)
    umask = os.umask(0)
    os.umask(umask)
    try:
        os.fchmod(fd, 0o666 & ~umask)  # mkstemp makes it private; give it a new file's mode
        with os.fdopen(fd, "w") as fh:
            json.dump(payload, fh, indent=2)
            fh.write("\n")
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def coverage(ops: List[str], jobs: int, timeout: float, log: Optional[Callable[[str], None]] = None,
             nan: bool = False) -> List[dict]:
    """Run every op in both modes: plain subprocesses in a pool of ``jobs``, checks in this process.

    Returns:
        one dict per op, in ``ops`` order: ``op``, ``plain`` and ``check`` (:func:`run_case`'s
        results, None when not run) and ``not_on_cpu`` (the reason, or None).
    """
    lc = _import_cases()
    results = {op: {"op": op, "plain": None, "check": None,
                    "not_on_cpu": lc.NOT_ON_CPU[op].reason if op in lc.NOT_ON_CPU else None} for op in ops}
    runnable = [op for op in ops if op not in lc.NOT_ON_CPU]
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        plain = {pool.submit(run_plain, op, timeout): op for op in runnable}
        for op in runnable:
            results[op]["check"] = run_case(op, checked=True, timeout=timeout, nan=nan)
            if log:
                log(f"{op:<32} tritonkit check: {results[op]['check']['text']}")
        for fut in concurrent.futures.as_completed(plain):
            op = plain[fut]
            results[op]["plain"] = fut.result()
            if log:
                log(f"{op:<32} plain interpreter: {results[op]['plain']['text']}")
    return [results[op] for op in ops]


def main(argv: Optional[List[str]] = None) -> int:
    """Command line entry point; returns 0 (the table is the result)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", nargs="+", metavar="OP", help="run only these ops (names as in the table)")
    p.add_argument("--json", metavar="FILE", help="also write the results as JSON to FILE (atomically)")
    p.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                   else (os.cpu_count() or 1), help="plain-interpreter subprocesses at a time (default: CPUs)")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds one op may run in each mode")
    p.add_argument("-v", "--verbose", action="store_true", help="print every result as it comes")
    p.add_argument("--nan", action="store_true", help="also run the nan_inf check under tritonkit check")
    p.add_argument("--worker", metavar="OP", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        return _worker(args.worker)
    os.environ.pop("TRITON_INTERPRET", None)  # the checked runs in this process: triton as users import it
    _quiet()
    lc = _import_cases()
    ops = list(lc.CASES)
    if args.only:
        unknown = [op for op in args.only if op not in lc.CASES]
        if unknown:
            p.error(f"unknown op(s) {', '.join(unknown)}; known: {', '.join(lc.CASES)}")
        ops = [op for op in ops if op in args.only]
    log = (lambda s: print(s, file=sys.stderr, flush=True)) if args.verbose else None
    start = time.perf_counter()
    results = coverage(ops, args.jobs, args.timeout, log, nan=args.nan)
    info = machine_line_info()
    render(results, info, lc.LIGER_VERSION)
    if args.json:
        write_json(args.json, {"machine": info, "liger_kernel": lc.LIGER_VERSION, "totals": totals(results),
                               "seconds": time.perf_counter() - start, "results": results})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
