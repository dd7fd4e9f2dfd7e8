"""Real projects' own test suites, plainly and under ``pytest --tritonkit``: is tritonkit faithful on a
real project's tests, and what does it find there? Two suites (``--suite``): Liger-Kernel's (the
default) and flash-linear-attention's (``--suite fla``).

Liger-Kernel 0.8.5's tests come from its source distribution on the package index (downloaded once
with ``pip download --no-binary :all: --no-deps liger-kernel==0.8.5`` into the cache directory,
``benchmarks/.peer-cache`` by default; ``--sdist FILE`` takes one already downloaded). Each test
file given runs twice, each time in a pytest process of its own from the sdist's root:

* **plain**: on a machine with a CUDA GPU, natively; elsewhere in Triton's own interpreter
  (``TRITON_INTERPRET=1``), which is how such a suite runs without a GPU;
* **tritonkit**: ``pytest --tritonkit`` (every launch checked; CUDA tensors stay on the GPU
  between launches).

Per file it prints passed/failed/skipped (xfailed counted as skipped) each way, the tests that pass
plainly but not under tritonkit (there should be none), the findings by kind, seconds, and the peak
RSS of each pytest process (``wait4``'s ``ru_maxrss``); then every finding with its test and line.
The JSON results also hold each test's seconds each way (``test_seconds``: setup, call and teardown).
Natively with a GPU, most of a small test's time is Triton compiling its kernels, and under
``pytest --tritonkit`` each checked launch also runs natively (``--tritonkit-outputs gpu``): a way
run second in the same Triton cache finds the first way's kernels compiled. ``--compile-caches DIR``
gives each way a Triton cache and a tritonkit cache of its own under ``DIR/plain`` and
``DIR/tritonkit`` (empty the first time: a first run is cold both ways, a second warm both ways).

flash-linear-attention's tests are not in its sdist: ``--suite fla --src DIR`` runs them from a
checkout of https://github.com/fla-org/flash-linear-attention (``DIR/tests``; the checkout's ``fla``
package is imported from ``DIR``, which pytest puts first on the path from its ``pyproject.toml``).
Its kernels build ``tl.make_block_ptr``, which Triton removed after 3.6: run it under Triton <= 3.6.
Its test files are named from ``DIR/tests`` (``--files ops/utils/test_cumsum.py,...``); it needs
``einops`` (and ``transformers`` for its module and model tests, which the default files avoid).

The Liger suite needs Liger-Kernel itself (``tritonkit[test]`` installs 0.8.5) and ``transformers`` (its
tests compare against Hugging Face's modules).

Usage::

    python benchmarks/peer_suites.py [--suite liger|fla] [--src DIR] [--files test_geglu.py,test_swiglu.py] [--timeout S]
        [--sdist liger_kernel-0.8.5.tar.gz] [--cache DIR] [--json results.json] [-k EXPR] [--workers N]
        [--plain-workers N] [--only plain|tritonkit] [--compile-caches DIR] [--tritonkit-args=ARGS]

``--tritonkit-args=ARGS`` adds pytest options to the tritonkit run (written with ``=``, as in
``--tritonkit-args="--tritonkit-gpu-above off"``, to measure what checking the largest launches on the
GPU saves).
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from typing import Dict, List, Optional, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _machine import cpu_model  # noqa: E402

PACKAGE, VERSION = "liger-kernel", "0.8.5"
SDIST = f"liger_kernel-{VERSION}"
#: the test files run by default: the ones the tritonkit issue measured, and the cross-entropy file
#: whose 2x4096x32000 float32 tests show whether memory grows from test to test
DEFAULT_FILES = ("test_geglu.py", "test_swiglu.py", "test_layer_norm.py", "test_rms_norm.py",
                 "test_cross_entropy.py")
#: flash-linear-attention's default test files (under its checkout's ``tests``): kernels over block
#: pointers (cumulative sums, triangular solves, pooling, chunked linear attention) and a row norm,
#: at the sizes its tests give
FLA_DEFAULT_FILES = ("ops/utils/test_cumsum.py", "ops/utils/test_pooling.py", "modules/test_l2norm.py",
                     "ops/test_solve_tril.py", "ops/test_simple_gla.py", "ops/test_delta.py", "ops/test_gla.py")
#: per suite: the test directory under its root, and its default files
SUITES = {"liger": ("test/transformers", DEFAULT_FILES), "fla": ("tests", FLA_DEFAULT_FILES)}
HERE = os.path.dirname(os.path.abspath(__file__))


def sdist_root(cache: str, sdist: Optional[str]) -> str:
    """The unpacked sdist's directory in ``cache`` (downloaded and unpacked the first time).

    Raises:
        SystemExit: the download fails (no network: pass ``--sdist FILE``).
    """
    root = os.path.join(cache, SDIST)
    if os.path.isdir(os.path.join(root, "test")):
        return root
    os.makedirs(cache, exist_ok=True)
    archive = sdist or os.path.join(cache, f"{SDIST}.tar.gz")
    if not os.path.exists(archive):
        cmd = [sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps",
               f"{PACKAGE}=={VERSION}", "-d", cache]
        if subprocess.run(cmd).returncode != 0 or not os.path.exists(archive):
            raise SystemExit(f"could not download {PACKAGE}=={VERSION}'s sdist ({' '.join(cmd)}); "
                             "download it elsewhere and pass --sdist FILE")
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        with tarfile.open(archive) as tar:
            tar.extractall(tmp, filter="data") if sys.version_info >= (3, 12) else tar.extractall(tmp)
        shutil.move(os.path.join(tmp, SDIST), root)  # whole, or not at all
    return root


#: a pytest plugin (``-p``) that appends each test's outcome to ``$PEER_OUTCOMES`` as it is known, so
#: that a run stopped at its timeout still gives the outcomes of the tests it finished
OUTCOMES_PLUGIN = '''
import json, os
_out = open(os.environ["PEER_OUTCOMES"], "a")
def pytest_runtest_logreport(report):
    outcome = None
    if report.when == "call" or report.outcome != "passed":
        outcome = ("skipped" if report.skipped else "failed" if report.failed else "passed")
    _out.write(json.dumps({"test": report.nodeid, "when": report.when, "outcome": outcome,
                           "seconds": report.duration}) + "\\n")
    _out.flush()
'''


def log_seconds(path: str) -> Dict[str, float]:
    """Test node id -> seconds of its setup, call and teardown together (pytest's durations), from
    :data:`OUTCOMES_PLUGIN`'s lines. Under pytest-xdist each report comes twice (from the worker,
    and from the controller it was sent to): a phase counts once."""
    phases: Dict[Tuple[str, str], float] = {}
    try:
        with open(path) as fh:
            lines = [json.loads(line) for line in fh if line.strip()]
    except (OSError, ValueError):
        return {}
    for row in lines:
        key = (row["test"], str(row.get("when")))
        phases[key] = max(phases.get(key, 0.0), float(row.get("seconds") or 0.0))
    out: Dict[str, float] = {}
    for (test, _), seconds in phases.items():
        out[test] = round(out.get(test, 0.0) + seconds, 3)
    return out


def log_outcomes(path: str) -> Dict[str, str]:
    """Test node id -> ``passed``/``failed``/``skipped`` from :data:`OUTCOMES_PLUGIN`'s lines
    (a test that failed in any phase: failed; xfailed: skipped)."""
    out: Dict[str, str] = {}
    try:
        with open(path) as fh:
            lines = [json.loads(line) for line in fh if line.strip()]
    except (OSError, ValueError):
        return out
    for row in lines:
        if row.get("outcome") and out.get(row["test"]) != "failed":
            out[row["test"]] = row["outcome"]
    return out


def run_pytest(root: str, test_file: str, tritonkit: bool, gpu: bool, timeout: float, keyword: Optional[str],
               work: str, workers: int = 0, caches: Optional[str] = None, extra: Optional[List[str]] = None,
               test_dir: str = SUITES["liger"][0]) -> dict:
    """One pytest process on ``test_file``: its outcomes, seconds, peak RSS and (with ``tritonkit``)
    the ``--tritonkit-json`` data; ``caches``: a directory under which this way keeps its own Triton
    and tritonkit caches (None: the environment's); ``extra``: more pytest options for the tritonkit run."""
    tag = "tritonkit" if tritonkit else "plain"
    tk_json = os.path.join(work, "tritonkit.json")
    outcomes = os.path.join(work, f"{tag}.outcomes")
    with open(os.path.join(work, "_peer_outcomes.py"), "w") as fh:
        fh.write(OUTCOMES_PLUGIN)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "_peer_outcomes",
           os.path.join(test_dir, test_file)]
    if keyword:
        cmd += ["-k", keyword]
    if workers:
        cmd += ["-n", str(workers)]
    env = dict(os.environ, PEER_OUTCOMES=outcomes)
    env["PYTHONPATH"] = os.pathsep.join([work] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env.pop("TRITON_INTERPRET", None)
    if caches:
        env["TRITON_CACHE_DIR"] = os.path.join(caches, tag, "triton")
        env["TRITONKIT_CACHE_DIR"] = os.path.join(caches, tag, "tritonkit", "tune")  # the check cache: its sibling
    if tritonkit:
        cmd += ["--tritonkit", "--tritonkit-json", tk_json] + ([] if _plugin_registered() else
                                                                ["-p", "tritonkit.pytest_plugin"]) + list(extra or ())
    elif not gpu:
        env["TRITON_INTERPRET"] = "1"
    start = time.perf_counter()
    with open(os.path.join(work, f"{tag}.log"), "w") as log:
        proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        status, peak_kib, timed_out = _wait(proc, timeout)
    out = {"seconds": round(time.perf_counter() - start, 1), "status": status, "timed_out": timed_out,
           "peak_rss_gib": round(peak_kib / 2 ** 20, 2), "outcomes": log_outcomes(outcomes),
           "test_seconds": log_seconds(outcomes)}
    print(f"  {test_file} {tag}: {counts(out['outcomes'])} passed/failed/skipped in {out['seconds']:.0f} s"
          f"{' (timed out)' if timed_out else ''}", flush=True)
    if tritonkit:
        try:
            with open(tk_json) as fh:
                out["tritonkit"] = json.load(fh)
        except (OSError, ValueError):
            out["tritonkit"] = None
    return out


def _plugin_registered() -> bool:
    """Whether tritonkit's pytest plugin is installed (its ``pytest11`` entry point): not where
    tritonkit is only on ``PYTHONPATH``, where ``-p tritonkit.pytest_plugin`` loads it."""
    from importlib.metadata import entry_points
    return any(ep.value.startswith("tritonkit") for ep in entry_points(group="pytest11"))


def _wait(proc, timeout: float) -> Tuple[int, int, bool]:
    """Wait for ``proc`` (killed with its process group after ``timeout`` s): ``(status, peak RSS in
    KiB of it and the children it waited for, whether it timed out)``."""
    import signal
    deadline = time.monotonic() + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return proc.returncode, usage.ru_maxrss, False
        if time.monotonic() > deadline:
            # Ctrl-C first: pytest ends the session (tritonkit writes its JSON, marked interrupted)
            os.killpg(proc.pid, signal.SIGINT)
            for _ in range(300):
                pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    break
                time.sleep(0.1)
            else:
                os.killpg(proc.pid, signal.SIGKILL)
                _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
            return proc.returncode, usage.ru_maxrss, True
        time.sleep(0.2)


def counts(outcomes: Dict[str, str]) -> str:
    n = {k: sum(v == k for v in outcomes.values()) for k in ("passed", "failed", "skipped")}
    return f"{n['passed']}/{n['failed']}/{n['skipped']}"


def machine() -> dict:
    import platform

    import torch
    import triton
    gpu = torch.cuda.is_available()
    return {"device": torch.cuda.get_device_name() if gpu else f"CPU: {cpu_model()} ({os.cpu_count()} threads)",
            "gpu": gpu, "python": platform.python_version(), "torch": torch.__version__, "triton": triton.__version__,
            "liger_kernel": _version("liger_kernel"), "transformers": _version("transformers"),
            "einops": _version("einops"),
            "tritonkit": _version("tritonkit"), "date": time.strftime("%Y-%m-%d")}


def _version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version(dist.replace("_", "-"))
    except PackageNotFoundError:
        return "-"


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--suite", choices=sorted(SUITES), default="liger",
                   help="Liger-Kernel's tests (from its sdist) or flash-linear-attention's (from --src)")
    p.add_argument("--src", metavar="DIR",
                   help="the suite's source tree (for fla: a checkout of flash-linear-attention, required)")
    p.add_argument("--files",
                   help="test files under the suite's test directory, comma-separated, or 'all' (default: "
                        f"liger {','.join(DEFAULT_FILES)}; fla {','.join(FLA_DEFAULT_FILES)})")
    p.add_argument("-k", dest="keyword", help="pytest -k expression for every file")
    p.add_argument("--timeout", type=float, default=3600, help="seconds per pytest run (default 3600)")
    p.add_argument("--cache", default=os.path.join(HERE, ".peer-cache"), help="where the sdist is kept")
    p.add_argument("--sdist", help="the sdist archive, already downloaded")
    p.add_argument("--only", choices=("plain", "tritonkit"), help="run one way only")
    p.add_argument("--workers", type=int, default=0,
                   help="pytest-xdist workers for the tritonkit run (-n N; default 0: one process). Peak RSS is "
                        "then the largest worker's")
    p.add_argument("--plain-workers", type=int, default=0,
                   help="pytest-xdist workers for the plain run (default 0: one process; natively on one GPU, "
                        "workers only contend for it)")
    p.add_argument("--compile-caches", metavar="DIR",
                   help="give each way its own Triton and tritonkit caches under DIR/plain and DIR/tritonkit "
                        "(default: both ways share the environment's, and the second finds the first's kernels)")
    p.add_argument("--tritonkit-args", default="", metavar="ARGS",
                   help="more pytest options for the tritonkit run, space-separated, given with '=' "
                        "(e.g. --tritonkit-args='--tritonkit-gpu-above off')")
    p.add_argument("--json", help="write the results as JSON")
    args = p.parse_args(argv)
    caches = os.path.abspath(args.compile_caches) if args.compile_caches else None

    test_dir, default_files = SUITES[args.suite]
    if args.src:
        root = os.path.abspath(args.src)
    elif args.suite == "fla":
        p.error("--suite fla needs --src DIR, a checkout of https://github.com/fla-org/flash-linear-attention "
                "(its tests are not in its sdist)")
    else:
        root = sdist_root(os.path.abspath(args.cache), args.sdist)
    if not os.path.isdir(os.path.join(root, test_dir)):
        p.error(f"{root} has no {test_dir} directory: give --src the root of the suite's source tree")
    tests = os.path.join(root, test_dir)
    files = sorted(os.path.relpath(f, tests) for f in glob.glob(os.path.join(tests, "**", "test_*.py"), recursive=True)) \
        if args.files == "all" else [f.strip() for f in (args.files or ",".join(default_files)).split(",") if f.strip()]
    import torch
    gpu = torch.cuda.is_available()
    info = machine()
    suite = f"{PACKAGE} {VERSION}" if args.suite == "liger" else f"flash-linear-attention ({root})"
    print(f"# {suite} tests, plain ({'native' if gpu else 'TRITON_INTERPRET=1'}) and under "
          f"pytest --tritonkit; {info}", flush=True)
    results: Dict[str, dict] = {}
    head = f"{'file':28} {'plain p/f/s':>12} {'s':>7} {'GiB':>5}  {'tritonkit p/f/s':>15} {'s':>7} {'GiB':>5}  " \
           f"{'findings':>8}  regressions"
    print(head, flush=True)
    for name in files:
        with tempfile.TemporaryDirectory() as work:
            res = {way: run_pytest(root, name, way == "tritonkit", gpu, args.timeout, args.keyword, work,
                                   args.workers if way == "tritonkit" else args.plain_workers, caches,
                                   args.tritonkit_args.split(), test_dir)
                   for way in ("plain", "tritonkit") if args.only in (None, way)}
        plain, tk = res.get("plain"), res.get("tritonkit")
        found = []
        if tk and tk.get("tritonkit"):
            for test, data in tk["tritonkit"]["tests"].items():
                found += [{"test": test, **{k: f.get(k) for k in ("kind", "kernel", "file", "line", "arg", "message")}}
                          for f in data["findings"]]
        regressions = sorted(t for t, o in (plain or {}).get("outcomes", {}).items()
                             if o == "passed" and tk and tk["outcomes"].get(t) not in ("passed", None)) if tk else []
        results[name] = {**res, "findings": found, "regressions": regressions}
        for r in (plain, tk):
            if r:
                r.pop("tritonkit", None)

        def cols(r):
            if r is None:
                return f"{'-':>12} {'-':>7} {'-':>5}"
            note = " (timed out)" if r["timed_out"] else ""
            return f"{counts(r['outcomes']):>12} {r['seconds']:>7.0f} {r['peak_rss_gib']:>5.1f}{note}"
        print(f"{name:28} {cols(plain)}  {cols(tk):>29}  {len(found):>8}  {len(regressions)}", flush=True)
        for t in regressions:
            print(f"    passes plainly, not under tritonkit: {t}", flush=True)
        if args.json:
            with open(args.json, "w") as fh:
                json.dump({"machine": info, "suite": args.suite, "compile_caches": caches, "tritonkit_args": args.tritonkit_args,
                           "files": results}, fh, indent=1)
    print("\n# findings")
    for name, r in results.items():
        for f in r["findings"]:
            print(f"{name}: {f['test'].split('::')[-1]}: {f['kind']} in {f['kernel']} at "
                  f"{os.path.basename(str(f['file']))}:{f['line']} ({f['arg']}): {f['message']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
