"""The Ray engine's own behaviour (tritonkit.tune._workers._ray), on a two-node Ray cluster on this
CPU machine (ray.cluster_utils): node A with 2 stand-in GPUs of type FAKE_A (the driver's node),
node B with 2 of type FAKE_B. Actors replay landscapes. The key's job is put in the object store
once per key; each GPU type is tuned separately, or only the one named; an idle actor that dies
is noticed and replaced at once, blaming nothing; a config that breaks the CUDA context kills its
actor and is `crashed` after two; actors off the driver's node are journaled by the driver; a node
that goes away mid-sweep loses nothing. Skipped where Ray is not installed. The tests shared with
the local engine (same winners, killed workers, crashes, restarts) are in test_workers.py."""
import os
import signal
import sys
import threading
import time

import pytest

from tritonkit.tune import TuneCache
from tritonkit.tune._runner import ContextPoisoned
from tritonkit.tune._space import point_key
from tritonkit.tune._workers import ReplayJob, WorkPool
from tritonkit.tune._workers._sweep import sweep

from test_workers import GRID, LANDS, SWEEP_FILE, job, ledger_entries, truth

ray = pytest.importorskip("ray")
_ray = pytest.importorskip("tritonkit.tune._workers._ray")
RayEngine, FAKE_GPU = _ray.RayEngine, _ray.FAKE_GPU
MB = 1024 * 1024


@pytest.fixture(scope="module")
def cluster():
    """Two Ray nodes on this host (1 CPU, a 100 MB object store each), started once for the module;
    their processes inherit PYTHONPATH = this sys.path, so actors import what the tests import."""
    from ray.cluster_utils import Cluster
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p and os.path.isdir(p))
    try:
        c = Cluster(initialize_head=True, head_node_args={
            "num_cpus": 1, "object_store_memory": 100 * MB, "include_dashboard": False,
            "resources": {FAKE_GPU: 2, "accelerator_type:FAKE_A": 1}})
        c.add_node(num_cpus=1, object_store_memory=100 * MB, resources={FAKE_GPU: 2, "accelerator_type:FAKE_B": 1})
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
    ray.init(address=c.address, log_to_driver=False)
    yield c
    ray.shutdown()
    c.shutdown()


PICKLED = []


class Counted(ReplayJob):
    """A replay job that counts how often the driver serialises it."""

    def __getstate__(self):
        PICKLED.append(1)
        return dict(self.__dict__)


def test_the_job_of_a_key_is_put_in_the_object_store_once(cluster, tmp_path):
    PICKLED.clear()
    engine = RayEngine(workers=4)
    keys = [{"M": m} for m in (1, 2, 4)]
    res = sweep("mm", keys, lambda k: Counted(LANDS[k["M"]], seconds=0.002), GRID, source_hash="h", engine=engine,
                cache=str(tmp_path / "c"), progress=False)
    # once per key (and GPU type: each type tunes its own keys), not per worker, not per config...
    assert engine.puts == len(PICKLED) == 2 * 3
    assert sum(w.keys for w in res.workers) > 2 * 3        # ... though several actors measured each key
    assert sum(w.measured for w in res.workers) == 2 * 3 * len(GRID)   # two GPU types, each tuned


def test_each_gpu_type_is_tuned_separately(cluster, tmp_path):
    res = sweep("mm", [{"M": 1}, {"M": 2}], job, GRID, source_hash="h", engine="ray", workers=4,
                cache=str(tmp_path / "c"), progress=False)
    assert sorted(res.results) == ["FAKE_A", "FAKE_B"]
    for device in res.results:
        assert {k: point_key(p) for k, p in res.winners(device).items()} == {("1",): truth(1), ("2",): truth(2)}
        # each type's keys were measured by that type's actors only
        assert sum(w.measured for w in res.workers if w.device == device) == 2 * len(GRID)
    assert sorted(w.device for w in res.workers) == ["FAKE_A", "FAKE_A", "FAKE_B", "FAKE_B"]
    cached = {e.kernel_id.device for e in TuneCache(str(tmp_path / "c")).entries()}
    assert cached == {"FAKE_A", "FAKE_B"}


def test_only_the_gpu_type_named_is_tuned(cluster, tmp_path):
    res = sweep("mm", [{"M": 4}], job, GRID, source_hash="h", engine="ray", gpu_type="fake_b",
                cache=str(tmp_path / "c"), progress=False)
    assert list(res.results) == ["FAKE_B"] and point_key(res.winners()[("4",)]) == truth(4)
    assert [w.device for w in res.workers] == ["FAKE_B", "FAKE_B"]      # both actors on node B, none on A
    with pytest.raises(ValueError, match="FAKE_A, FAKE_B"):
        RayEngine(gpu_type="H100")
    with pytest.raises(ValueError, match="2 tritonkit_gpu of type FAKE_A"):
        RayEngine(workers=3, gpu_type="FAKE_A")


def test_an_idle_actor_that_dies_is_replaced_at_once_and_blames_nothing(cluster, tmp_path):
    with WorkPool(RayEngine(workers=2, gpu_type="FAKE_A")) as pool:
        victim = pool.wait_ready()[0]["pid"]
        os.kill(victim, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while len([p for w in pool.summary() for p in w.pids]) < 3:  # the replacement said hello
            assert time.monotonic() < deadline, pool.summary()
            time.sleep(0.01)
        res = sweep("mm", [{"M": 1}], job, GRID, source_hash="h", pool=pool, cache=str(tmp_path / "c"),
                    progress=False)
        summary = pool.summary()
    assert sum(w.deaths for w in summary) == 1 and sum(w.requeued for w in summary) == 0
    assert sum(w.measured for w in summary) == len(GRID) and all(t.ok for t in res.results["FAKE_A"][0].trials)


class Poison(ReplayJob):
    """A replay whose ``bad`` config breaks the CUDA context (as an illegal memory access would)."""

    def __init__(self, landscape, bad):
        super().__init__(landscape, seconds=0.002)
        self.bad = bad

    def runner(self):
        inner = super().runner()

        def run(points):
            if any(point_key(p) == self.bad for p in points):
                raise ContextPoisoned(points[0], "an illegal memory access was encountered")
            return inner(points)
        return run


def test_a_config_that_breaks_the_cuda_context_kills_its_actor_and_is_crashed(cluster, tmp_path):
    bad = point_key(GRID[3])
    res = sweep("mm", [{"M": 2}], lambda k: Poison(LANDS[2], bad), GRID, source_hash="h", engine="ray",
                gpu_type="FAKE_A", cache=str(tmp_path / "c"), progress=False)
    trials = {t.key: t for t in res.results["FAKE_A"][0].trials}
    assert trials[bad].status == "crashed" and "broke the CUDA context" in trials[bad].error
    assert sum(t.status == "crashed" for t in trials.values()) == 1 and len(trials) == len(GRID)
    assert sum(w.deaths for w in res.workers) == 2 and point_key(res.winners()[("2",)]) == truth(2)


@pytest.mark.slow
def test_a_node_that_goes_away_mid_sweep_loses_nothing(cluster, tmp_path):
    """A third node (one FAKE_B) is removed while its actor measures: the config goes back to the
    queue, the two actors of node B finish the sweep (the replacement waits for a FAKE_B GPU that
    never comes back); actors off the driver's node are journaled by the driver."""
    node = cluster.add_node(num_cpus=1, object_store_memory=80 * MB,
                            resources={FAKE_GPU: 1, "accelerator_type:FAKE_B": 1})
    cache = str(tmp_path / "c")
    with WorkPool(RayEngine(gpu_type="FAKE_B")) as pool:
        assert len(pool.wait_ready()) == 3
        removed = []

        def remover():
            deadline = time.monotonic() + 60
            while sum(w.measured for w in pool.summary()) < 20 and time.monotonic() < deadline:
                time.sleep(0.005)
            cluster.remove_node(node, allow_graceful=False)
            removed.append(1)

        t = threading.Thread(target=remover)
        t.start()
        res = sweep("mm", [{"M": 1}, {"M": 2}], lambda k: job(k, seconds=0.03), GRID, source_hash="h", pool=pool,
                    cache=cache, progress=False, keep_ledger=True)
        t.join()
        summary = pool.summary()
    assert removed and sum(w.deaths for w in summary) == 1
    assert {k: point_key(p) for k, p in res.winners().items()} == {("1",): truth(1), ("2",): truth(2)}
    measured = ledger_entries(cache)
    assert {w for _, _, w in measured} == {"driver"}                  # node B is not the driver's node
    pairs = [(k, pk) for k, pk, _ in measured]
    assert len(pairs) == len(set(pairs)) == 2 * len(GRID)               # none twice, none lost
    held = {(tuple(e.key), t.key) for e in TuneCache(cache).show("mm") for t in e.trials}
    assert set(pairs) == held


@pytest.mark.slow
def test_tritonkit_tune_sweep_on_a_ray_cluster_checks_and_times_a_real_kernel(cluster, tmp_path, monkeypatch):
    """The launch path through the command line, on Ray actors of the GPU type named (Triton's CPU
    interpreter in the actors: TRITONKIT_TUNE_ON_CPU=1)."""
    import json

    from tritonkit.cli import main
    (tmp_path / "my_sweep.py").write_text(SWEEP_FILE)
    monkeypatch.setenv("TRITONKIT_TUNE_ON_CPU", "1")
    out = tmp_path / "out"
    assert main(["tune", "sweep", str(tmp_path / "my_sweep.py"), "--cluster", "ray", "--gpu-type", "FAKE_A",
                 "--workers", "2", "--out", str(out), "--cache-dir", str(tmp_path / "c")]) == 0
    report = json.loads((out / "add_kernel-FAKE_A-results.json").read_text())
    for r in report["results"]:
        assert {t["point"]["BLOCK"]: t["status"] for t in r["trials"]} == {128: "ok", 64: "wrong", 256: "ok"}
    assert main(["tune", "sweep", str(tmp_path / "my_sweep.py"), "--cluster", "ray", "--gpu-type", "H100"]) == 2
    assert main(["tune", "--gpu-type", "H100", "--", "python", "x.py"]) == 2
