"""Tuning on a pool of workers (``tritonkit.tune._workers``): throughput with 1, 2 and 4 workers,
the same winners as one worker, and the fault tests, on any machine: the workers replay recorded
and synthetic timing landscapes and sleep ``--ms`` per measurement, standing in for a GPU's time.

A sweep tunes one kernel exhaustively over ``--keys`` keys (the recorded H100 bf16 matmul at
4096^3 and synthetic roofline/bowl/multimodal landscapes, over a 72-config tile grid). Measured:

* throughput: configs measured per second of the sweep (the pool started beforehand), over one
  worker's;
* winners: every key's winner, against one worker's;
* lost: measurements finished (journaled in the ledger) that the cache does not hold at the end;
* measured twice: (key, config) pairs journaled more than once.

Fault tests: ``--kill-one`` SIGKILLs one worker in the middle of a measurement at a third of the
sweep (its config goes back to the queue, a replacement starts); the driver test runs the sweep
in a child process, SIGKILLs it at 40%, and runs the sweep again on the same cache.

Engines: ``local`` (a worker process per "GPU") and ``ray`` (a Ray actor per "GPU": a local Ray
started once for the benchmark, 2 CPUs and a 256 MB object store, whose custom resource
``tritonkit_gpu`` stands in for GPUs; or the cluster at ``$RAY_ADDRESS``). With ``ray``, the killed
driver is a second driver on the same Ray, whose actors Ray kills with it.

Usage::

    python benchmarks/tune_cluster.py                       # the table: 1, 2, 4 workers, then the faults
    python benchmarks/tune_cluster.py --replay --engine local --workers 4 --kill-one   # the quick check
    python benchmarks/tune_cluster.py --replay --engine ray --workers 4 --kill-one     # the same on Ray actors

The quick check ends with one line, ``ENGINE N workers: X.XXx one worker's throughput; winners same
as one worker: yes; measurements lost: 0; measured twice: 0``, and exits 0 only when the winners
are the same and nothing was lost or measured twice (with ``--kill-one``, also throughput >= 0.75 N).
"""
from __future__ import annotations

import argparse
import datetime
import glob
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [os.path.join(ROOT, "src"), HERE]

from tritonkit.tune._replay import ReplayRunner, matmul_grid, synthetic_landscape  # noqa: E402
from tritonkit.tune._space import point_key  # noqa: E402
from tritonkit.tune._workers import ReplayJob, WorkPool, _ledger  # noqa: E402
from tritonkit.tune._workers._sweep import make_engine, sweep  # noqa: E402

LANDSCAPE_FILE = os.path.join(ROOT, "tests", "data", "matmul_bf16_4096_h100_landscape.json")
GRID = matmul_grid({"BM": [64, 128, 256], "BN": [64, 128, 256], "BK": [32, 64], "GM": [8], "num_warps": [4, 8],
                    "num_stages": [3, 4]})  # 72 configs
KINDS = ("roofline", "bowl", "multimodal")


def landscapes(n_keys: int) -> Dict[int, Dict[str, float]]:
    """M -> landscape over GRID: the H100 recording first, then synthetic ones."""
    real = ReplayRunner.from_file(LANDSCAPE_FILE, shape="4096")
    out = {4096: {point_key(p): real.true_ms(p) for p in GRID}}
    m = 16
    while len(out) < n_keys:
        out[m] = synthetic_landscape(KINDS[len(out) % 3], len(out), GRID)
        m *= 2
    return out


class Jobs:
    """``job(key)`` for the sweep (picklable data only)."""

    def __init__(self, n_keys: int, seconds: float):
        self.lands, self.seconds = landscapes(n_keys), seconds

    def keys(self) -> List[Dict[str, int]]:
        return [{"M": m} for m in self.lands]

    def __call__(self, key) -> ReplayJob:
        return ReplayJob(self.lands[key["M"]], seconds=self.seconds)


def ledger(cache: str) -> List[Tuple[tuple, str, str, float]]:
    """Every journaled measurement: (key, config, status, ms)."""
    out = []
    for path in sorted(glob.glob(os.path.join(cache, "ledger", "*.jsonl*"))):
        out += [(tuple(k), t.key, t.status, t.ms) for kid, k, t, w in _ledger.read(path) if w != "driver"]
    return out


def audit(cache: str) -> Tuple[int, int]:
    """(lost, measured twice) of a sweep on ``cache``: journaled measurements the cache does not
    hold (with the same status and time), and (key, config) pairs journaled more than once."""
    from tritonkit.tune import TuneCache
    entries = ledger(cache)
    pairs = [(k, c) for k, c, _, _ in entries]
    twice = len(pairs) - len(set(pairs))
    held = {}
    for e in TuneCache(cache).show("mm"):
        for t in e.trials:
            held[(tuple(e.key), t.key)] = (t.status, t.ms)
    lost = sum(1 for k, c, s, ms in entries if held.get((k, c)) != (s, ms))
    return lost, twice


def run(engine: str, workers: int, jobs: Jobs, cache: str, kill_one: bool = False, log=print) -> Dict:
    """One sweep on a started pool; returns throughput, winners, lost, twice, deaths."""
    with WorkPool(make_engine(engine, workers)) as pool:
        pool.wait_ready()
        killed: List[int] = []
        total = len(jobs.keys()) * len(GRID)

        def killer():
            while not killed:
                if sum(w.measured for w in pool.summary()) >= total // 3:
                    for pid, busy in pool.worker_pids().items():
                        if busy is not None and 0.2 * jobs.seconds < busy[1] < 0.6 * jobs.seconds:
                            os.kill(pid, signal.SIGKILL)
                            killed.append(pid)
                            return
                time.sleep(0.0005)

        t = threading.Thread(target=killer, daemon=True) if kill_one else None
        if t:
            t.start()
        t0 = time.perf_counter()
        res = sweep("mm", jobs.keys(), jobs, GRID, source_hash="replay", pool=pool, cache=cache, progress=False,
                    keep_ledger=True)
        wall = time.perf_counter() - t0
        summary = pool.summary()
    lost, twice = audit(cache)
    return {"workers": workers, "wall_s": wall, "measured": res.measured(), "rate": res.measured() / wall,
            "winners": {k[0]: point_key(v) for k, v in res.winners().items()}, "lost": lost, "twice": twice,
            "deaths": sum(w.deaths for w in summary), "requeued": sum(w.requeued for w in summary),
            "killed": len(killed), "per_worker": [w.measured for w in summary]}


def driver_kill(engine: str, workers: int, jobs: Jobs, cache: str, n_keys: int, ms: float) -> Dict:
    """Run the sweep in a child, SIGKILL it at 40% of the measurements, run it again here."""
    cmd = [sys.executable, os.path.abspath(__file__), "--child", cache, "--engine", engine, "--workers",
           str(workers), "--keys", str(n_keys), "--ms", str(ms)]
    env = dict(os.environ)
    if engine == "ray":  # the child is a second driver of this Ray
        import ray
        env["RAY_ADDRESS"] = ray.get_runtime_context().gcs_address
    proc = subprocess.Popen(cmd, env=env)
    total = len(jobs.keys()) * len(GRID)
    while len(ledger(cache)) < 0.4 * total and proc.poll() is None:
        time.sleep(0.005)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 10
    while not all(_ledger.writer_gone(f) for f in glob.glob(os.path.join(cache, "ledger", "*.jsonl"))):
        if time.monotonic() > deadline:
            break
        time.sleep(0.01)
    before = len(ledger(cache))
    after = run(engine, workers, jobs, cache)
    after["before_kill"] = before
    return after


def machine() -> str:
    from _machine import cpu_model
    import numpy
    ray = ""
    if "ray" in sys.modules:
        ray = f", Ray {sys.modules['ray'].__version__}"
    return (f"{cpu_model()}, {os.cpu_count()} logical CPUs; Python {platform.python_version()}, numpy "
            f"{numpy.__version__}{ray}; {datetime.datetime.now().isoformat(timespec='seconds')}")


def start_ray(workers: int) -> None:
    """The benchmark's Ray: the cluster at $RAY_ADDRESS, else a small local one with ``workers``
    stand-in GPUs (2 CPUs, a 256 MB object store, no dashboard, actors' logs not forwarded)."""
    from tritonkit.tune._workers._ray import FAKE_GPU, import_ray, start_local_ray
    ray = import_ray()
    if os.environ.get("RAY_ADDRESS"):
        ray.init(address=os.environ["RAY_ADDRESS"], log_to_driver=False)
    else:
        start_local_ray(num_cpus=2, object_store_memory=256 * 1024 * 1024, log_to_driver=False,
                        resources={FAKE_GPU: workers})


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--replay", action="store_true", help="the quick check: one configuration, one line")
    ap.add_argument("--engine", default="local", help="local (default) or ray")
    ap.add_argument("--workers", type=int, default=None, help="workers of the quick check (default 4)")
    ap.add_argument("--kill-one", action="store_true", help="SIGKILL one worker mid-measurement at 1/3")
    ap.add_argument("--keys", type=int, default=6, help="keys of the sweep (default 6; 72 configs each)")
    ap.add_argument("--ms", type=float, default=20.0, help="milliseconds per measurement (default 20)")
    ap.add_argument("--json", default=None, help="also write the results here")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    jobs = Jobs(args.keys, args.ms / 1000)
    if args.child:  # the driver that the driver-kill test kills
        sweep("mm", jobs.keys(), jobs, GRID, source_hash="replay", engine=args.engine, workers=args.workers,
              cache=args.child, progress=False, keep_ledger=True)
        return 0
    work = tempfile.mkdtemp(prefix="tritonkit-tune-cluster-")
    if args.engine == "ray":
        start_ray(max(4, args.workers or 4))
    line = None
    try:
        base = run(args.engine, 1, jobs, os.path.join(work, "one"))
        if not args.replay:
            return table(args, jobs, base, work)
        n = args.workers or 4
        r = run(args.engine, n, jobs, os.path.join(work, "n"), kill_one=args.kill_one)
        ratio = r["rate"] / base["rate"]
        same = r["winners"] == base["winners"]
        ok = same and r["lost"] == 0 and r["twice"] == 0 and (not args.kill_one or
                                                             (r["killed"] == 1 and ratio >= 0.75 * n))
        line = (f"{args.engine} {n} workers: {ratio:.2f}x one worker's throughput; winners same as one worker: "
                f"{'yes' if same else 'no'}; measurements lost: {r['lost']}; measured twice: {r['twice']}")
        return 0 if ok else 1
    finally:
        if "ray" in sys.modules and sys.modules["ray"].is_initialized():
            sys.modules["ray"].shutdown()
        shutil.rmtree(work, ignore_errors=True)
        if line is not None:  # last, after Ray's own messages
            print(line, flush=True)


def table(args, jobs: Jobs, base: Dict, work: str) -> int:
    """The full benchmark: 1, 2, 4 workers, a killed worker, a killed driver."""
    from rich.console import Console
    from rich.table import Table
    console = Console(width=None if sys.stdout.isatty() else 150)
    console.print(f"[bold]tritonkit tune on a pool[/]: engine {args.engine}, {len(jobs.keys())} keys x {len(GRID)} "
                  f"configs, {args.ms:g} ms per measurement (replay)")
    console.print(f"machine: {machine()}")
    rows = [("1 worker", base)]
    for n in (2, 4):
        rows.append((f"{n} workers", run(args.engine, n, jobs, os.path.join(work, f"w{n}"))))
    rows.append(("4 workers, one SIGKILLed", run(args.engine, 4, jobs, os.path.join(work, "k"), kill_one=True)))
    rows.append(("4 workers, driver SIGKILLed, run again",
                 driver_kill(args.engine, 4, jobs, os.path.join(work, "d"), args.keys, args.ms)))
    t = Table()
    for c in ("run", "wall s", "configs/s", "x one worker", "per worker", "winners same", "lost", "twice",
              "deaths"):
        t.add_column(c, justify="left" if c == "run" else "right")
    ok = True
    for name, r in rows:
        same = r["winners"] == base["winners"]
        ok &= same and r["lost"] == 0 and r["twice"] == 0
        note = f" (+{r['before_kill']} before the kill)" if "before_kill" in r else ""
        t.add_row(name, f"{r['wall_s']:.2f}", f"{r['rate']:.1f}", f"{r['rate'] / base['rate']:.2f}",
                  "/".join(map(str, r["per_worker"])) + note, "yes" if same else "NO", str(r["lost"]),
                  str(r["twice"]), str(r["deaths"]))
    console.print(t)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": machine(), "ms": args.ms, "keys": args.keys,
                       "rows": {n: {k: v for k, v in r.items() if k != "winners"} for n, r in rows}}, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
