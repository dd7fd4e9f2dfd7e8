"""Tuning on a pool of workers (tritonkit.tune._workers) on this CPU machine, with each engine:
local worker processes (CUDA_VISIBLE_DEVICES set per worker, as on a GPU host) and Ray actors
(one per "GPU": the tritonkit_gpu resource stands in for GPUs; skipped where Ray is not
installed). Workers run the replay runner and sleep milliseconds per config. Same winners with 1
and N workers; a killed worker (SIGKILL, or ray.kill for an actor) loses nothing and nothing is
measured twice; a config that kills two workers is `crashed`; a killed driver's finished work is
kept and not measured again; a restart skips finished work; the vLLM table loads as vLLM reads it.
The Ray engine's own tests (arguments put once per key, placement by GPU type, idle deaths,
journaling by the driver) are in test_workers_ray.py."""
import glob
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from tritonkit.tune import TuneCache
from tritonkit.tune._replay import matmul_grid, synthetic_landscape
from tritonkit.tune._space import point_key
from tritonkit.tune._workers import ReplayJob, WorkerError, WorkPool
from tritonkit.tune._workers import _ledger
from tritonkit.tune._workers._protocol import _SleepyReplay
from tritonkit.tune._workers._sweep import make_engine, sweep
from tritonkit.tune._workers._tables import MoeTable, table_file_name

GRID = matmul_grid({"BM": [32, 64, 128], "BN": [32, 64, 128], "BK": [32, 64], "GM": [8], "num_warps": [4, 8],
                    "num_stages": [3]})  # 36 configs
LANDS = {m: synthetic_landscape("bowl", m, GRID) for m in (1, 2, 4, 8, 16)}
SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "src")
#: the "GPUs" of the test's Ray: a custom resource on this CPU machine.
RAY_GPUS = 4


def start_ray():
    """A small local Ray for the tests of a module (2 CPUs, a 200 MB object store, no dashboard),
    with RAY_GPUS stand-in GPUs; returns the ray module (skips without Ray)."""
    ray = pytest.importorskip("ray")
    from tritonkit.tune._workers._ray import FAKE_GPU, start_local_ray
    if not ray.is_initialized():
        start_local_ray(num_cpus=2, object_store_memory=200 * 1024 * 1024, log_to_driver=False,
                        resources={FAKE_GPU: RAY_GPUS})
    return ray


@pytest.fixture(scope="module")
def ray_cluster():
    """Ray, started once for the module and shut down after it."""
    ray = start_ray()
    yield ray
    ray.shutdown()


@pytest.fixture(params=["local", "ray"])
def engine(request):
    """The engine's name: each test runs with local worker processes and with Ray actors."""
    if request.param == "ray":
        request.getfixturevalue("ray_cluster")
    return request.param



def job(key, seconds=0.002, **kw):
    return ReplayJob(LANDS[key["M"]], seconds=seconds, **kw)


def ledger_entries(cache_dir):
    """(key, point key, worker) of every measurement journaled (merged files kept)."""
    out = []
    for path in sorted(glob.glob(os.path.join(cache_dir, "ledger", "*.jsonl*"))):
        out += [(tuple(k), t.key, w) for _, k, t, w in _ledger.read(path)]
    return out


def truth(m):
    """The replay's winner of key M=m."""
    lands = LANDS[m]
    return min((ms, k) for k, ms in lands.items() if ms < float("inf"))[1]


def test_same_winners_with_one_and_several_workers(tmp_path, engine):
    keys = [{"M": m} for m in (1, 2, 4)]
    one = sweep("mm", keys, job, GRID, source_hash="h", engine=engine, workers=1, cache=str(tmp_path / "c1"),
                progress=False)
    three = sweep("mm", keys, job, GRID, source_hash="h", engine=engine, workers=3, cache=str(tmp_path / "c3"),
                  progress=False)
    assert one.winners() == three.winners()
    assert {k: point_key(p) for k, p in one.winners().items()} == {(str(m),): truth(m) for m in (1, 2, 4)}
    for a, b in zip(one.results["cpu"], three.results["cpu"]):
        assert {t.key: (t.status, t.ms) for t in a.trials} == {t.key: (t.status, t.ms) for t in b.trials}
    # one worker per "GPU", each with its own CUDA_VISIBLE_DEVICES (its own actor), all of them busy
    assert len({w.gpu for w in three.workers}) == 3 and len({p for w in three.workers for p in w.pids}) == 3
    if engine == "local":
        assert sorted(w.gpu for w in three.workers) == ["0", "1", "2"]
    assert all(w.measured > 0 and w.deaths == 0 for w in three.workers)
    assert sum(w.measured for w in three.workers) == 3 * len(GRID) == three.measured()
    # every measurement was journaled, then recorded in the cache by key
    cache = TuneCache(str(tmp_path / "c3"))
    assert sum(e.configs for e in cache.entries()) == 3 * len(GRID)
    assert glob.glob(str(tmp_path / "c3" / "ledger" / "*.jsonl")) == []  # merged, then removed


@pytest.mark.parametrize("engine, kill", [("local", "sigkill"), ("ray", "sigkill"), ("ray", "ray.kill")],
                         indirect=["engine"])
def test_a_killed_worker_loses_nothing_and_nothing_is_measured_twice(tmp_path, engine, kill):
    cache_dir = str(tmp_path / "c")
    killed = []
    with WorkPool(make_engine(engine, 2)) as pool:
        def killer():
            deadline = time.monotonic() + 20
            while not killed and time.monotonic() < deadline:
                if sum(w.measured for w in pool.summary()) < 8:  # mid-sweep: both workers measured some
                    time.sleep(0.005)
                    continue
                for pid, busy in pool.worker_pids().items():
                    if busy is not None and 0.005 < busy[1] < 0.02:  # in the middle of a 30 ms measurement
                        if kill == "ray.kill":
                            assert pool.engine.kill(pid)
                        else:
                            os.kill(pid, signal.SIGKILL)
                        killed.append(pid)
                        return
                time.sleep(0.001)

        t = threading.Thread(target=killer)
        t.start()
        # two keys: long enough after the kill for the replacement to start (an actor: up to 2 s) and measure
        res = sweep("mm", [{"M": 1}, {"M": 2}], lambda k: job(k, seconds=0.03), GRID, source_hash="h", pool=pool,
                    cache=cache_dir, progress=False, keep_ledger=True)
        t.join()
        summary = pool.summary()
    assert killed, "no worker was caught in the middle of a measurement"
    assert sum(w.deaths for w in summary) == 1 and sum(w.requeued for w in summary) == 1
    assert sum(w.crashed for w in summary) == 0 and len([p for w in summary for p in w.pids]) == 3  # a replacement
    for r in res.results["cpu"]:
        assert len(r.trials) == len(GRID) and all(t.status == "ok" or t.error for t in r.trials)
    assert {k: point_key(p) for k, p in res.winners().items()} == {("1",): truth(1), ("2",): truth(2)}
    measured = ledger_entries(cache_dir)
    assert len(measured) == len(set(measured)) == 2 * len(GRID)      # none twice, none lost
    assert len({(k, pk) for k, pk, _ in measured}) == 2 * len(GRID)
    assert len({w for _, _, w in measured}) == 3                      # both workers and the replacement measured


def test_a_config_that_kills_two_workers_is_crashed(tmp_path, engine):
    bad = point_key(GRID[5])
    res = sweep("mm", [{"M": 2}], lambda k: job(k, crash=(bad,)), GRID, source_hash="h", engine=engine, workers=2,
                cache=str(tmp_path / "c"), progress=False)
    trials = {t.key: t for t in res.results["cpu"][0].trials}
    assert trials[bad].status == "crashed" and "killed 2 workers" in trials[bad].error
    assert ("exit status 139" if engine == "local" else "the Ray actor died") in trials[bad].error
    assert sum(t.status == "crashed" for t in trials.values()) == 1 and len(trials) == len(GRID)
    assert sum(w.deaths for w in res.workers) == 2 and sum(w.crashed for w in res.workers) == 1
    assert point_key(res.winners()[("2",)]) == truth(2)
    cached = TuneCache(str(tmp_path / "c")).show("mm")[0]
    assert {t.key: t.status for t in cached.trials}[bad] == "crashed"
    # a restart does not try it again (nor anything else)
    again = sweep("mm", [{"M": 2}], lambda k: job(k, crash=(bad,)), GRID, source_hash="h", engine=engine,
                  workers=1, cache=str(tmp_path / "c"), progress=False)
    assert again.measured() == 0 and again.winners() == res.winners()


class CrashOnce(ReplayJob):
    """Dies on ``crash`` configs unless ``flag`` exists, creating it first: the first worker that
    measures one dies, the next measures it."""

    def __init__(self, landscape, flag, crash):
        super().__init__(landscape, seconds=0.002, crash=crash)
        self.flag = flag

    def runner(self):
        inner = _SleepyReplay(super().runner().replay, self.seconds, set())

        def run(points):
            if any(point_key(p) in self.crash for p in points) and not os.path.exists(self.flag):
                open(self.flag, "w").close()
                os._exit(139)
            return inner(points)
        return run


def test_a_config_that_kills_one_worker_is_measured_elsewhere(tmp_path, engine):
    bad = point_key(GRID[7])
    res = sweep("mm", [{"M": 4}], lambda k: CrashOnce(LANDS[4], str(tmp_path / "flag"), (bad,)), GRID,
                source_hash="h", engine=engine, workers=2, cache=str(tmp_path / "c"), progress=False, keep_ledger=True)
    trials = {t.key: t for t in res.results["cpu"][0].trials}
    assert all(t.status != "crashed" for t in trials.values()) and trials[bad].ok
    assert sum(w.deaths for w in res.workers) == 1 and sum(w.requeued for w in res.workers) == 1
    measured = ledger_entries(str(tmp_path / "c"))
    assert len(measured) == len(GRID) == len({pk for _, pk, _ in measured})


def test_a_restart_skips_finished_work(tmp_path, engine):
    cache = str(tmp_path / "c")
    first = sweep("mm", [{"M": 1}, {"M": 2}], job, GRID, source_hash="h", engine=engine, workers=2, cache=cache,
                  progress=False)
    assert first.measured() == 2 * len(GRID)
    second = sweep("mm", [{"M": 1}, {"M": 2}, {"M": 4}], job, GRID, source_hash="h", engine=engine, workers=2,
                   cache=cache, progress=False)
    assert second.measured() == len(GRID)  # only the new key
    assert all(t.source == "cache" for r in second.results["cpu"][:2] for t in r.trials)
    assert {k: v for k, v in second.winners().items() if k != ("4",)} == first.winners()


DRIVER = """
import sys
sys.path[:0] = [{src!r}, {here!r}]
from test_workers import GRID, job
from tritonkit.tune._workers._sweep import sweep
if __name__ == "__main__":
    sweep("mm", [{{"M": m}} for m in (1, 2, 4, 8)], lambda k: job(k, seconds=0.01), GRID, source_hash="h",
          engine={engine!r}, workers=2, cache={cache!r}, progress=False, keep_ledger=True)
"""


def test_a_killed_driver_keeps_every_finished_measurement(tmp_path, engine):
    """The driver in a child process (with Ray: a second driver on the tests' cluster, through
    RAY_ADDRESS), SIGKILLed mid-sweep; its workers die with it (Ray kills the actors of a dead
    owner); the sweep run again measures only what was left."""
    cache = str(tmp_path / "c")
    script = tmp_path / "driver.py"
    script.write_text(DRIVER.format(src=SRC, here=os.path.dirname(os.path.abspath(__file__)), cache=cache,
                                    engine=engine))
    env = dict(os.environ)
    if engine == "ray":
        import ray
        env["RAY_ADDRESS"] = ray.get_runtime_context().gcs_address
    proc = subprocess.Popen([sys.executable, str(script)], env=env)
    deadline = time.monotonic() + 90
    while len(ledger_entries(cache)) < 40 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 10  # the driver's workers die with it
    while not all(_ledger.writer_gone(f) for f in glob.glob(os.path.join(cache, "ledger", "*.jsonl"))):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    before = ledger_entries(cache)
    assert 40 <= len(before) < 4 * len(GRID)
    keys = [{"M": m} for m in (1, 2, 4, 8)]
    res = sweep("mm", keys, job, GRID, source_hash="h", engine=engine, workers=2, cache=cache, progress=False,
                keep_ledger=True)
    measured = ledger_entries(cache)
    pairs = [(k, pk) for k, pk, _ in measured]
    assert len(pairs) == len(set(pairs)) == 4 * len(GRID)    # nothing measured twice, nothing missing
    assert res.measured() == 4 * len(GRID) - len(before)      # the restart did only what was left
    assert {k: point_key(p) for k, p in res.winners().items()} == {(str(m),): truth(m) for m in (1, 2, 4, 8)}


def vllm_get_moe_configs(path):
    """How vLLM's get_moe_configs reads a tuned table: json.load, keys through int()."""
    with open(path) as f:
        return {int(key): val for key, val in json.load(f).items()}


def test_a_sweep_writes_the_vllm_table_and_the_heuristics(tmp_path):
    grid = [{"BLOCK_SIZE_M": p["BM"], "BLOCK_SIZE_N": p["BN"], "BLOCK_SIZE_K": p["BK"], "GROUP_SIZE_M": 8,
             "num_warps": p["num_warps"], "num_stages": p["num_stages"]} for p in GRID]
    lands = {m: {point_key(g): LANDS[m][point_key(p)] for g, p in zip(grid, GRID)} for m in LANDS}
    res = sweep("fused_moe_kernel", [{"M": m} for m in lands], lambda k: ReplayJob(lands[k["M"]]), grid,
                source_hash="h", workers=2, cache=str(tmp_path / "c"), out_dir=str(tmp_path / "out"),
                table=MoeTable(E=8, N=14336, dtype="fp8_w8a8"), progress=False)
    name = "E=8,N=14336,device_name=cpu,dtype=fp8_w8a8.json"
    path = str(tmp_path / "out" / name)
    assert path in res.files
    configs = vllm_get_moe_configs(path)
    assert sorted(configs) == [1, 2, 4, 8, 16]
    for m, cfg in configs.items():
        assert all(isinstance(v, int) for v in cfg.values())
        assert set(cfg) == {"BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "num_warps", "num_stages"}
        assert cfg == res.winners()[(str(m),)]
    heur = [f for f in res.files if f.endswith(".py")]
    assert len(heur) == 1 and "def choose_config" in open(heur[0]).read()
    compile(open(heur[0]).read(), heur[0], "exec")
    assert table_file_name(8, 14336, "NVIDIA H100 80GB HBM3") == "E=8,N=14336,device_name=NVIDIA_H100_80GB_HBM3.json"


class Broken(ReplayJob):
    def runner(self):
        raise RuntimeError("no such tensor")


def test_a_runner_that_raises_fails_the_key_with_the_workers_traceback(tmp_path, engine):
    with pytest.raises(WorkerError, match="no such tensor"):
        sweep("mm", [{"M": 1}], lambda k: Broken(LANDS[1]), GRID, source_hash="h", engine=engine, workers=1,
              cache=False, progress=False)


SWEEP_FILE = """
import triton
from pool_kernels import add_kernel as kernel, workload
keys = [{"n": 1000}, {"n": 3000}]
configs = [triton.Config({"BLOCK": 128, "WRONG": 0}), triton.Config({"BLOCK": 64, "WRONG": 1}),
           triton.Config({"BLOCK": 256, "WRONG": 0})]
"""


@pytest.mark.slow
def test_tritonkit_tune_sweep_checks_and_times_a_real_kernel_on_the_workers(tmp_path, monkeypatch):
    """The launch path, through the command line: workers import the kernel and the workload by
    name, make the arguments once per key, run the reference config first, and reject a wrong
    config (in Triton's CPU interpreter: TRITONKIT_TUNE_ON_CPU=1)."""
    from tritonkit.cli import main
    monkeypatch.syspath_prepend(os.path.dirname(os.path.abspath(__file__)))
    (tmp_path / "my_sweep.py").write_text(SWEEP_FILE)
    monkeypatch.setenv("TRITONKIT_TUNE_ON_CPU", "1")
    out = tmp_path / "out"
    assert main(["tune", "sweep", str(tmp_path / "my_sweep.py"), "--workers", "2", "--out", str(out),
                 "--cache-dir", str(tmp_path / "c")]) == 0
    report = json.loads((out / "add_kernel-cpu-results.json").read_text())
    assert len(report["results"]) == 2
    for r in report["results"]:
        status = {t["point"]["BLOCK"]: t["status"] for t in r["trials"]}
        assert status == {128: "ok", 64: "wrong", 256: "ok"}, r["trials"]
        assert all(t["source"] == "cpu" for t in r["trials"])
    assert main(["tune", "sweep", str(tmp_path / "nope.py")]) == 2
