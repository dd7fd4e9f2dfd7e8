"""tritonkit.autotune on a real GPU: parallel compile, timing, wrong-config rejection, an in-place
kernel restored between trials, a crash isolated by ``tritonkit tune``, pruning reasons, the cache."""
import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import triton
import triton.language as tl

import tritonkit
from tritonkit.tune._autotuner import RESULTS

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


@triton.jit
def scale_kernel(x_ptr, o_ptr, n, BLOCK: tl.constexpr, SKIP_TAIL: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    if SKIP_TAIL:
        mask = mask & (offs < (n // BLOCK) * BLOCK)
    tl.store(o_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2.0, mask=mask)


@triton.jit
def accumulate_kernel(x_ptr, o_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.atomic_add(o_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


@pytest.fixture(autouse=True)
def fresh(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITONKIT_CACHE_DIR", str(tmp_path / "cache"))
    RESULTS.clear()


def grid(n):
    return lambda meta: (triton.cdiv(n, meta["BLOCK"]),)


def test_tunes_on_the_gpu_and_rejects_a_wrong_config():
    configs = [triton.Config({"BLOCK": b, "SKIP_TAIL": s}, num_warps=w) for b in (256, 1024) for s in (False, True)
               for w in (4, 8)]
    tuned = tritonkit.autotune(configs=configs, key=["n"])(scale_kernel)
    n = 1_000_003
    x = torch.randn(n, device="cuda")
    o = torch.zeros(n, device="cuda")
    tuned[grid(n)](x, o, n)
    r = RESULTS[-1]
    assert r.count("wrong") == 4 and r.count("ok") == 4
    assert not tuned.best_config.kwargs["SKIP_TAIL"]
    torch.testing.assert_close(o, x * 2)
    w = r.winner
    assert w.source == "gpu" and w.samples >= 7 and w.ci_ms[0] <= w.ms <= w.ci_ms[1]
    assert w.sm_clock_mhz is None or w.sm_clock_mhz > 100


def test_atomic_accumulation_is_restored_between_trials():
    configs = [triton.Config({"BLOCK": b}) for b in (128, 256, 512, 1024)]
    tuned = tritonkit.autotune(configs=configs, key=["n"], cache=False)(accumulate_kernel)
    n = 100_000
    x = torch.randn(n, device="cuda")
    o0 = torch.randn(n, device="cuda")
    o = o0.clone()
    tuned[grid(n)](x, o, n)
    torch.testing.assert_close(o, o0 + x)
    assert RESULTS[-1].count("ok") == 4


def test_pruned_configs_are_reported_with_the_reason():
    configs = [triton.Config({"BLOCK": 256, "SKIP_TAIL": False}, num_warps=w) for w in (4, 64)]
    tuned = tritonkit.autotune(configs=configs, key=["n"], cache=False)(scale_kernel)
    n = 4096
    tuned[grid(n)](torch.randn(n, device="cuda"), torch.zeros(n, device="cuda"), n)
    pruned = [t for t in RESULTS[-1].trials if t.status == "pruned"]
    assert len(pruned) == 1 and "threads per block" in pruned[0].error


def test_warm_cache_zero_trials(tmp_path):
    configs = [triton.Config({"BLOCK": b, "SKIP_TAIL": False}) for b in (256, 512, 1024)]
    n = 1 << 20
    x = torch.randn(n, device="cuda")
    o = torch.zeros(n, device="cuda")
    tritonkit.autotune(configs=configs, key=["n"])(scale_kernel)[grid(n)](x, o, n)
    tritonkit.autotune(configs=configs, key=["n"])(scale_kernel)[grid(n)](x, o, n)
    assert [t.source for t in RESULTS[-1].trials] == ["cache"] * 3


ILLEGAL = textwrap.dedent('''
    import torch, triton, triton.language as tl

    @triton.autotune(configs=[triton.Config({"BLOCK": b, "BAD": bad}) for b, bad in ((256, 0), (512, 1), (1024, 0))],
                     key=["n"])
    @triton.jit
    def k(x_ptr, o_ptr, n, BLOCK: tl.constexpr, BAD: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        if BAD:
            offs = offs.to(tl.int64) + 1099511627776  # 2**40 elements past: an illegal address
        tl.store(o_ptr + offs, tl.load(x_ptr + offs) + 1.0)

    n = 1 << 20
    x = torch.randn(n, device="cuda")
    o = torch.zeros(n, device="cuda")
    k[lambda m: (n // m["BLOCK"],)](x, o, n)
    torch.cuda.synchronize()
    assert torch.equal(o, x + 1)
    print("SCRIPT DONE")
''')


def test_tune_cli_survives_an_illegal_memory_access(tmp_path):
    script = tmp_path / "illegal.py"
    script.write_text(ILLEGAL)
    out = tmp_path / "r.json"
    proc = subprocess.run([sys.executable, "-m", "tritonkit", "tune", "--json", str(out), "--", "python",
                           str(script)], capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, TRITONKIT_CACHE_DIR=str(tmp_path / "c")))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SCRIPT DONE" in proc.stdout
    data = json.loads(out.read_text())
    (r,) = data["results"]
    status = {t["point"]["BAD"] * 10000 + t["point"]["BLOCK"]: t["status"] for t in r["trials"]}
    assert status[10512] == "crashed" and status[256] == "ok" and status[1024] == "ok", (r["trials"], proc.stdout,
                                                                                          proc.stderr[-3000:])
    assert data["restarts"] >= 1


def test_cached_launches_reuse_the_tuned_kernel():
    configs = [triton.Config({"BLOCK": b, "SKIP_TAIL": False}, num_warps=w) for b in (256, 1024) for w in (4, 8)]
    tuned = tritonkit.autotune(configs=configs, key=["n"], cache=False)(scale_kernel)
    n = 1 << 16
    x = torch.randn(n, device="cuda")
    o = torch.zeros(n, device="cuda")
    tuned[grid(n)](x, o, n)  # tunes, then launches
    tuned[grid(n)](x, o, n)  # the fast path (options at their defaults left out: one in-memory entry more)
    kernels = scale_kernel.device_caches[torch.cuda.current_device()][0]
    before = len(kernels)
    for _ in range(3):
        tuned[grid(n)](x, o, n)
    torch.cuda.synchronize()
    assert len(kernels) == before
    torch.testing.assert_close(o, x * 2)
