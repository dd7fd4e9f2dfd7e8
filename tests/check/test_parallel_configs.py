"""An autotuned kernel's configs checked in worker processes (``workers`` > 1) give what one process
checking them one after another gives: the same findings in the same order, launch records,
printed text, kept config and outputs, also when a worker dies, hangs or raises (its configs are
then run by the parent), and under ``stop_on_first``."""
import os
import time

import pytest
import torch
import triton
import triton.language as tl

import tritonkit
from tritonkit.check import CheckAborted
from tritonkit.check import forks
from tritonkit.check.launch import parallel

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="workers are forked")

N = 1000


def _in_worker() -> bool:
    return parallel.WORKER_HOST_STORAGES is not None


def _configs(hook_block=None, hook=None):
    out = []
    for block in (32, 64, 128, 256, 512):
        for warps in (2, 4):
            pre = hook if (hook is not None and block == hook_block and warps == 4) else None
            out.append(triton.Config({"BLOCK": block}, num_warps=warps, pre_hook=pre))
    return out


def _kernel(configs):
    @triton.autotune(configs=configs, key=["n"])
    @triton.jit
    def scaled_copy(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        tl.static_assert(BLOCK != 256, "BLOCK 256 does not compile here")
        pid = tl.program_id(0)
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n)
        if BLOCK == 128:
            if pid == 0:
                tl.device_print("first x", x)
        # only with BLOCK 64: the last program stores past the end
        tl.store(out_ptr + offs, x * 2, mask=offs < n + (BLOCK == 64) * 7)
    return scaled_copy


@pytest.fixture
def taken(monkeypatch):
    """The config indices whose results the parent took from workers, per pool."""
    got = []
    finish = parallel.Pool.finish

    def recording(self):
        results = finish(self)
        got.append(sorted(results))
        return results
    monkeypatch.setattr(parallel.Pool, "finish", recording)
    return got


def _plain(value):
    """A session's data without what differs between two runs of the same work: times, and the
    batches a launch ran in (a config sizes its batches from what an earlier launch of the same
    specialization learned, which a config with another ``num_warps`` in another process did not)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if k not in ("seconds", "checked_seconds", "batches")}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _check(kernel, workers, capfd, **kwargs):
    x = torch.arange(N, dtype=torch.float32)
    out = torch.zeros(N)
    error = None
    with pytest.MonkeyPatch.context():
        try:
            with tritonkit.checking(workers=workers, **kwargs) as session:
                kernel[lambda m: (triton.cdiv(N, m["BLOCK"]),)](x, out, N)
        except CheckAborted as e:
            error = str(e)
    printed = capfd.readouterr().out
    best = str(kernel.best_config) if error is None else None
    return {"session": _plain(session.to_dict()), "out": out.tolist(), "printed": printed, "best": best,
            "error": error}


@pytest.mark.parametrize("workers", [2, 3, 8])
def test_configs_checked_in_workers_give_what_one_process_gives(workers, capfd, taken):
    serial = _check(_kernel(_configs()), 1, capfd)
    assert taken == []
    assert [f["kind"] for f in serial["session"]["findings"]] == ["out_of_bounds"]
    assert "first x" in serial["printed"]
    assert len(serial["session"]["launch_records"]) == 10  # each config once, the kept one last
    assert _check(_kernel(_configs()), workers, capfd) == serial
    # the parent runs the kept config and about its share of the others; workers the rest
    assert len(taken) == 1 and len(taken[0]) >= 9 - -(-10 // workers)


def _crash(nargs):
    if _in_worker():
        os._exit(3)


def _raise(nargs):
    if _in_worker():
        raise RuntimeError("only in a worker")


def _hang(nargs):
    if _in_worker():
        time.sleep(120)


@pytest.mark.parametrize("hook", [_crash, _raise, _hang], ids=["dies", "raises", "hangs"])
@pytest.mark.parametrize("block", [64, 512])
def test_a_config_a_worker_cannot_finish_is_run_by_the_parent(hook, block, capfd, monkeypatch, taken):
    monkeypatch.setattr(forks, "MIN_STALL", 2.0)
    serial = _check(_kernel(_configs(block, hook)), 1, capfd)
    start = time.monotonic()
    assert _check(_kernel(_configs(block, hook)), 3, capfd) == serial
    assert time.monotonic() - start < 60
    failing = [i for i, c in enumerate(_configs(block, hook)) if c.pre_hook is not None]
    assert len(taken) == 1 and taken[0] and not set(failing) & set(taken[0])


def test_stop_on_first_stops_at_the_same_finding(capfd):
    serial = _check(_kernel(_configs()), 1, capfd, stop_on_first=True)
    assert serial["error"] and len(serial["session"]["findings"]) == 1
    assert _check(_kernel(_configs()), 4, capfd, stop_on_first=True) == serial


def test_a_kept_config_that_does_not_compile_gives_way_to_the_next(capfd):
    configs = [triton.Config({"BLOCK": b}, num_warps=4) for b in (256, 64, 128, 32)]
    serial = _check(_kernel(configs), 1, capfd)
    assert serial["best"].startswith("BLOCK: 64")
    assert _check(_kernel([triton.Config({"BLOCK": b}, num_warps=4) for b in (256, 64, 128, 32)]), 3, capfd) == serial


def test_the_worker_count_is_checked():
    with pytest.raises(ValueError, match="workers"):
        tritonkit.check.CheckSession(workers=0)
    with pytest.raises(ValueError, match="TRITONKIT_WORKERS"):
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("TRITONKIT_WORKERS", "many")
            tritonkit.check.CheckSession()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRITONKIT_WORKERS", "3")
        assert tritonkit.check.CheckSession().workers == 3
        mp.delenv("TRITONKIT_WORKERS")
        mp.delenv("PYTEST_XDIST_WORKER_COUNT", raising=False)  # under xdist the cores are shared out
        assert tritonkit.check.CheckSession().workers == parallel.available_cores()


@tritonkit.autotune(configs=[triton.Config({"B": 64}), triton.Config({"B": 256})], key=["n"])
@triton.jit
def _tk_tuned_copy(x_ptr, y_ptr, n, B: tl.constexpr):
    offs = tl.program_id(0) * 64 + tl.arange(0, B)  # B=256 runs past the 64 elements a program owns
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)  # LINE: tk_copy


@tritonkit.autotune(space={"B": [64, 256]}, key=["n"])
@triton.jit
def _tk_space_copy(x_ptr, y_ptr, n, B: tl.constexpr):
    offs = tl.program_id(0) * 64 + tl.arange(0, B)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


@pytest.mark.parametrize("kernel", ["configs", "space"])
def test_a_tritonkit_autotune_kernel_is_checked_under_every_config(kernel):
    """The bug is in the second config only (programs' blocks overlap: a data race): it is found."""
    fn = _tk_tuned_copy if kernel == "configs" else _tk_space_copy
    x, y = torch.arange(256, dtype=torch.float32), torch.zeros(256)
    with tritonkit.checking(workers=1) as s:
        fn[(4,)](x, y, 256)
    assert [f.kind for f in s.findings] == ["data_race"]
    assert s.findings[0].configs and s.findings[0].configs[0].startswith("B=256")
    assert torch.equal(y, x)
