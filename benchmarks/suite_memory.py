"""Does a test suite's memory grow from test to test? Liger-Kernel's own test files (from its sdist,
as :mod:`peer_suites` fetches it) run in one pytest process, plainly (``TRITON_INTERPRET=1``) or under
``pytest --tritonkit``, and after each test a small plugin (``-p``) records the process's resident
memory (``VmRSS``), its peak during that test (``VmHWM``, reset before each test through
``/proc/self/clear_refs``) and glibc's view of its heap (``mallinfo2``: bytes in use, bytes free but
kept); with ``--census`` also the live objects by type that changed since the previous test
(``gc.get_objects``: tritonkit's own types, and the largest changes of any type).

A watchdog polls the resident memory of pytest and its child processes every 0.1 s and kills them
all (SIGKILL to the process group) past ``--limit-gib`` (8 GiB by default): a run that would grow past
it ends early, with the tests it finished printed.

Usage::

    python benchmarks/suite_memory.py [--file test_cross_entropy.py] [--way plain|tritonkit|both]
        [-k EXPR] [--select REGEX] [--first N] [--skip N] [--limit-gib 8] [--census] [--json out.json]
        [--pythonpath DIR] [--src DIR] [-- extra pytest options]

``--select REGEX`` keeps the collected test ids that match it (``re.search``), in file order;
``--skip N``/``--first N`` then take a slice of those. The sdist's tests import ``transformers``:
where it is not installed, ``--pythonpath DIR`` names a directory it was installed in
(``pip install --target DIR --no-deps transformers huggingface_hub tokenizers ...``).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _machine import cpu_model  # noqa: E402
from peer_suites import HERE, _plugin_registered, sdist_root  # noqa: E402

#: the pytest plugin (``-p _suite_memory``): one JSON line per test to ``$SUITE_MEMORY_OUT``
PLUGIN = r'''
import ctypes, gc, json, os, sys, time

_out = open(os.environ["SUITE_MEMORY_OUT"], "a")
_census = os.environ.get("SUITE_MEMORY_CENSUS") == "1"
_before = {}
_t0 = [0.0]


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                "fsmblks", "uordblks", "fordblks", "keepcost")]


try:
    _mallinfo2 = ctypes.CDLL(None).mallinfo2
    _mallinfo2.restype = _Mallinfo2
except (OSError, AttributeError):
    _mallinfo2 = None


def _status():
    out = {}
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(("VmRSS:", "VmHWM:", "RssAnon:", "RssFile:", "RssShmem:")):
                name, value = line.split(":", 1)
                out[name] = int(value.split()[0]) // 1024  # MiB
    return out


def _reset_peak():
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        pass


def _types():
    counts = {}
    for o in gc.get_objects():
        t = type(o)
        key = f"{t.__module__}.{t.__qualname__}"
        counts[key] = counts.get(key, 0) + 1
    return counts


def pytest_runtest_logstart(nodeid, location):
    _reset_peak()
    _t0[0] = time.perf_counter()


def pytest_runtest_logfinish(nodeid, location):
    st = _status()
    row = {"test": nodeid, "seconds": round(time.perf_counter() - _t0[0], 2), "rss_mib": st.get("VmRSS"),
           "peak_mib": st.get("VmHWM"), "anon_mib": st.get("RssAnon"), "shmem_mib": st.get("RssShmem")}
    if _mallinfo2 is not None:
        mi = _mallinfo2()
        row["heap_used_mib"] = mi.uordblks >> 20
        row["heap_free_mib"] = mi.fordblks >> 20
        row["mmapped_mib"] = mi.hblkhd >> 20
    if _census:
        gc.collect()
        now = _types()
        diff = {k: now.get(k, 0) - _before.get(k, 0) for k in set(now) | set(_before)}
        diff = {k: v for k, v in diff.items() if v}
        row["tritonkit_objects"] = sum(v for k, v in now.items() if k.startswith("tritonkit"))
        row["objects"] = sum(now.values())
        row["grew"] = dict(sorted(diff.items(), key=lambda kv: -abs(kv[1]))[:12])
        row["tritonkit_grew"] = {k: v for k, v in diff.items() if k.startswith("tritonkit")}
        _before.clear()
        _before.update(now)
    _out.write(json.dumps(row) + "\n")
    _out.flush()
'''


def tree_rss_kib(pid: int) -> int:
    """Resident KiB of ``pid`` and its descendants (``/proc``): their proportional set sizes (``Pss``
    of ``smaps_rollup``: a page shared by forked workers counts once in all), or where that cannot be
    read their ``VmRSS``."""
    children: Dict[int, List[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(name))
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        todo += children.get(p, [])
        for path, key in ((f"/proc/{p}/smaps_rollup", "Pss:"), (f"/proc/{p}/status", "VmRSS:")):
            try:
                with open(path) as fh:
                    kib = next((int(line.split()[1]) for line in fh if line.startswith(key)), None)
            except OSError:
                kib = None
            if kib is not None:
                total += kib
                break
    return total


def collect(root: str, test_file: str, env: dict, keyword: Optional[str]) -> List[str]:
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--collect-only",
           os.path.join("test", "transformers", test_file)] + (["-k", keyword] if keyword else [])
    out = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True).stdout
    return [line.strip() for line in out.splitlines() if "::" in line]


def run_way(root: str, ids: List[str], way: str, env: dict, limit_kib: int, census: bool, extra: List[str],
            timeout: float) -> dict:
    """One pytest process over ``ids``: per-test rows, the process's peak and whether it was killed."""
    with tempfile.TemporaryDirectory() as work:
        with open(os.path.join(work, "_suite_memory.py"), "w") as fh:
            fh.write(PLUGIN)
        out_path = os.path.join(work, "rows.jsonl")
        ids_path = os.path.join(work, "ids.txt")
        with open(ids_path, "w") as fh:
            fh.write("\n".join(ids) + "\n")
        env = dict(env, SUITE_MEMORY_OUT=out_path, SUITE_MEMORY_CENSUS="1" if census else "0")
        env["PYTHONPATH"] = os.pathsep.join([work] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
        env.pop("TRITON_INTERPRET", None)
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "_suite_memory",
               "-W", "ignore", f"@{ids_path}"]
        if way == "tritonkit":
            cmd += ["--tritonkit"] + ([] if _plugin_registered() else ["-p", "tritonkit.pytest_plugin"])
        else:
            env["TRITON_INTERPRET"] = "1"
        cmd += extra
        start = time.perf_counter()
        peak_tree, killed = 0, None
        with open(os.path.join(work, "log"), "w") as log:
            proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)
            while True:
                pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    break
                rss = tree_rss_kib(proc.pid)
                peak_tree = max(peak_tree, rss)
                elapsed = time.perf_counter() - start
                if rss > limit_kib or elapsed > timeout:
                    killed = (f"killed at {rss / 2 ** 20:.2f} GiB (limit {limit_kib / 2 ** 20:.1f})"
                              if rss > limit_kib else f"killed after {elapsed:.0f} s")
                    os.killpg(proc.pid, signal.SIGKILL)
                    _, status, usage = os.wait4(proc.pid, 0)
                    break
                time.sleep(0.1)
        with open(os.path.join(work, "log")) as fh:
            tail = fh.read()[-3000:]
        rows = []
        if os.path.exists(out_path):
            with open(out_path) as fh:
                rows = [json.loads(line) for line in fh if line.strip()]
    # the peak over the tests' peaks: the plugin's resets of VmHWM reset what wait4 reports too
    peak = max([usage.ru_maxrss // 1024] + [r["peak_mib"] for r in rows if r.get("peak_mib")])
    return {"way": way, "rows": rows, "seconds": round(time.perf_counter() - start, 1), "killed": killed,
            "peak_rss_mib": peak, "peak_tree_mib": peak_tree // 1024, "log_tail": tail}


def short(nodeid: str) -> str:
    return nodeid.split("::", 1)[-1]


def print_way(res: dict, census: bool) -> None:
    rows = res["rows"]
    print(f"\n## {res['way']}: {len(rows)} tests in {res['seconds']} s; process peak {res['peak_rss_mib']} MiB "
          f"(with its children, proportionally, polled: {res['peak_tree_mib']} MiB){'; ' + res['killed'] if res['killed'] else ''}")
    print(f"{'#':>3} {'RSS':>6} {'d':>6} {'peak':>6} {'heap used':>9} {'heap free':>9} {'s':>6}  test")
    prev = None
    for i, r in enumerate(rows):
        d = r["rss_mib"] - prev if prev is not None else 0
        prev = r["rss_mib"]
        print(f"{i:>3} {r['rss_mib']:>6} {d:>+6} {r['peak_mib']:>6} {r.get('heap_used_mib', '-'):>9} "
              f"{r.get('heap_free_mib', '-'):>9} {r['seconds']:>6}  {short(r['test'])[:110]}")
        if census:
            print(f"      objects {r['objects']} (tritonkit {r['tritonkit_objects']}); grew: "
                  + ", ".join(f"{k.rsplit('.', 1)[-1]} {v:+}" for k, v in list(r["grew"].items())[:8])
                  + ("; tritonkit: " + ", ".join(f"{k} {v:+}" for k, v in r["tritonkit_grew"].items())
                     if r["tritonkit_grew"] else ""))
    if len(rows) >= 2:
        n = len(rows) - 1
        print(f"RSS after the first test {rows[0]['rss_mib']} MiB, after the last {rows[-1]['rss_mib']} MiB: "
              f"{(rows[-1]['rss_mib'] - rows[0]['rss_mib']) / n:+.1f} MiB per test over {n}; largest per-test peak "
              f"{max(r['peak_mib'] for r in rows)} MiB")
    if not rows or res["killed"]:
        print(res["log_tail"][-1500:])


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: List[str] = []
    if "--" in argv:
        extra = argv[argv.index("--") + 1:]
        argv = argv[:argv.index("--")]
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--file", default="test_cross_entropy.py", help="a test file of test/transformers")
    p.add_argument("--way", choices=("plain", "tritonkit", "both"), default="both")
    p.add_argument("-k", dest="keyword", help="pytest -k expression")
    p.add_argument("--select", help="keep the test ids matching this regular expression")
    p.add_argument("--skip", type=int, default=0, help="leave out the first N selected tests")
    p.add_argument("--first", type=int, default=0, help="run only the first N selected tests (after --skip)")
    p.add_argument("--repeat", type=int, default=1, help="run the selected tests this many times over")
    p.add_argument("--limit-gib", type=float, default=8.0, help="kill the run past this RSS (default 8)")
    p.add_argument("--timeout", type=float, default=3600, help="kill the run after this many seconds")
    p.add_argument("--census", action="store_true", help="count live objects by type after each test")
    p.add_argument("--cache", default=os.path.join(HERE, ".peer-cache"), help="where the sdist is kept")
    p.add_argument("--sdist", help="the sdist archive, already downloaded")
    p.add_argument("--pythonpath", help="a directory to add to PYTHONPATH (e.g. where transformers is)")
    p.add_argument("--src", default=os.path.join(os.path.dirname(HERE), "src"),
                   help="the tritonkit source to run (default: this checkout's src; another commit's, to compare)")
    p.add_argument("--json", help="write the results as JSON")
    args = p.parse_args(argv)

    root = sdist_root(os.path.abspath(args.cache), args.sdist)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.path.abspath(args.src)] + ([args.pythonpath] if args.pythonpath else [])
                                        + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env.pop("TRITON_INTERPRET", None)
    ids = collect(root, args.file, env, args.keyword)
    if args.select:
        ids = [t for t in ids if re.search(args.select, t)]
    ids = ids[args.skip:]
    if args.first:
        ids = ids[:args.first]
    ids = ids * args.repeat
    if not ids:
        print("no tests selected", file=sys.stderr)
        return 2
    import torch
    import triton
    machine = {"cpu": f"{cpu_model()} ({os.cpu_count()} threads)",
               "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2 ** 30, 1),
               "python": sys.version.split()[0], "torch": torch.__version__, "triton": triton.__version__,
               "date": time.strftime("%Y-%m-%d")}
    print(f"# {args.file}: {len(ids)} tests; {machine}", flush=True)
    results = []
    for way in (("plain", "tritonkit") if args.way == "both" else (args.way,)):
        res = run_way(root, ids, way, env, int(args.limit_gib * 2 ** 20), args.census, extra, args.timeout)
        print_way(res, args.census)
        sys.stdout.flush()
        res.pop("log_tail")
        results.append(res)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"machine": machine, "file": args.file, "tests": ids, "ways": results}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
