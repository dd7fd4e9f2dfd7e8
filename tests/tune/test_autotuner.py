"""tritonkit.autotune end to end on the CPU: kernels run in Triton's interpreter
(``TRITONKIT_TUNE_ON_CPU=1``), so correctness filtering, argument restoring, the cache, budgets,
failures and crash isolation run through the real code paths; only the clock is the host's."""
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
from tritonkit.tune import Budget, Space
from tritonkit.tune._autotuner import RESULTS
from tritonkit.tune._cache import TuneCache


def interpreted(fn):
    """``triton.jit`` as Triton's CPU interpreter's function, whatever the environment says."""
    old = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1"
    try:
        return triton.jit(fn)
    finally:
        if old is None:
            del os.environ["TRITON_INTERPRET"]
        else:
            os.environ["TRITON_INTERPRET"] = old


def _scale(x_ptr, o_ptr, n, BLOCK: tl.constexpr, SKIP_TAIL: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    if SKIP_TAIL:  # a config with a bug: the last block is not written
        mask = mask & (offs < (n // BLOCK) * BLOCK)
    tl.store(o_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2.0, mask=mask)


def _accumulate(x_ptr, o_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(o_ptr + offs, tl.load(o_ptr + offs, mask=mask) + tl.load(x_ptr + offs, mask=mask), mask=mask)


def _limited(x_ptr, o_ptr, n, BLOCK: tl.constexpr):
    tl.static_assert(BLOCK <= 32, "BLOCK too large for this kernel")
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(o_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1.0, mask=mask)


scale_kernel = interpreted(_scale)
accumulate_kernel = interpreted(_accumulate)
limited_kernel = interpreted(_limited)


def grid(n):
    return lambda meta: (triton.cdiv(n, meta["BLOCK"]),)


@pytest.fixture(autouse=True)
def on_cpu(monkeypatch, tmp_path):
    monkeypatch.setenv("TRITONKIT_TUNE_ON_CPU", "1")
    monkeypatch.setenv("TRITONKIT_CACHE_DIR", str(tmp_path / "cache"))
    RESULTS.clear()
    yield


def test_wrong_config_is_excluded_and_never_wins(tmp_path):
    configs = [triton.Config({"BLOCK": b, "SKIP_TAIL": s}) for b in (16, 64) for s in (False, True)]
    tuned = tritonkit.autotune(configs=configs, key=["n"], cache=str(tmp_path / "c"))(scale_kernel)
    x = torch.randn(100)
    o = torch.zeros(100)
    tuned[grid(100)](x, o, 100)
    result = RESULTS[-1]
    status = {t.key: t.status for t in result.trials}
    assert status["BLOCK=16,SKIP_TAIL=True,num_stages=3,num_warps=4"] == "wrong"
    assert status["BLOCK=64,SKIP_TAIL=True,num_stages=3,num_warps=4"] == "wrong"
    assert sum(1 for s in status.values() if s == "ok") == 2
    assert tuned.best_config.kwargs["SKIP_TAIL"] is False
    torch.testing.assert_close(o, x * 2)
    wrong = [t for t in result.trials if t.status == "wrong"][0]
    assert "'o_ptr'" in wrong.error and "elements differ" in wrong.error


def test_user_reference_decides_correctness(tmp_path):
    configs = [triton.Config({"BLOCK": 32, "SKIP_TAIL": False}), triton.Config({"BLOCK": 32, "SKIP_TAIL": True})]
    # the reference says the output is x * 3: every config is wrong, so tuning has no winner
    tuned = tritonkit.autotune(configs=configs, key=["n"], cache=False,
                               reference=lambda x_ptr, o_ptr, n: x_ptr * 3)(scale_kernel)
    with pytest.raises(RuntimeError, match="no config ran correctly"):
        tuned[grid(50)](torch.randn(50), torch.zeros(50), 50)
    tuned = tritonkit.autotune(configs=configs, key=["n"], cache=False,
                               reference=lambda x_ptr, o_ptr, n: {"o_ptr": x_ptr * 2})(scale_kernel)
    x = torch.randn(50)
    o = torch.zeros(50)
    tuned[grid(50)](x, o, 50)
    assert [t.status for t in RESULTS[-1].trials].count("wrong") == 1


def test_in_place_kernel_is_restored_between_trials():
    configs = [triton.Config({"BLOCK": b}) for b in (8, 16, 32, 64)]
    tuned = tritonkit.autotune(configs=configs, key=["n"], cache=False)(accumulate_kernel)
    x = torch.randn(100)
    o0 = torch.randn(100)
    o = o0.clone()
    tuned[grid(100)](x, o, 100)
    # tuning ran every config several times; the launch after it must see the original o
    torch.testing.assert_close(o, o0 + x)
    assert all(t.status == "ok" for t in RESULTS[-1].trials), [t.error for t in RESULTS[-1].trials]


def test_failing_config_is_recorded_and_tuning_goes_on():
    configs = [triton.Config({"BLOCK": b}) for b in (16, 32, 64)]
    tuned = tritonkit.autotune(configs=configs, key=["n"], cache=False)(limited_kernel)
    x = torch.randn(70)
    o = torch.zeros(70)
    tuned[grid(70)](x, o, 70)
    status = {t.point["BLOCK"]: t for t in RESULTS[-1].trials}
    assert status[64].status == "failed" and "BLOCK too large" in status[64].error
    assert status[16].ok and status[32].ok
    torch.testing.assert_close(o, x + 1)


def test_warm_cache_runs_zero_trials(tmp_path):
    cache_dir = str(tmp_path / "warm")
    configs = [triton.Config({"BLOCK": b, "SKIP_TAIL": False}) for b in (16, 32, 64)]
    x = torch.randn(64)
    o = torch.zeros(64)
    tritonkit.autotune(configs=configs, key=["n"], cache=cache_dir)(scale_kernel)[grid(64)](x, o, 64)
    first = RESULTS[-1]
    assert all(t.source == "cpu" for t in first.trials)
    again = tritonkit.autotune(configs=configs, key=["n"], cache=cache_dir)(scale_kernel)
    again[grid(64)](x, o, 64)
    second = RESULTS[-1]
    assert [t.source for t in second.trials] == ["cache"] * 3
    assert again.best_config.kwargs == {"BLOCK": first.winner.point["BLOCK"], "SKIP_TAIL": False}
    # adding a config measures only the new one
    more = configs + [triton.Config({"BLOCK": 8, "SKIP_TAIL": False})]
    tritonkit.autotune(configs=more, key=["n"], cache=cache_dir)(scale_kernel)[grid(64)](x, o, 64)
    third = RESULTS[-1]
    assert sorted(t.source for t in third.trials) == ["cache", "cache", "cache", "cpu"]
    # a new key tunes again
    tritonkit.autotune(configs=configs, key=["n"], cache=cache_dir)(scale_kernel)[grid(32)](x, o, 32)
    assert all(t.source == "cpu" for t in RESULTS[-1].trials)


def test_space_with_constraints_and_budget():
    space = Space({"BLOCK": [8, 16, 32, 64, 128], "SKIP_TAIL": [False], "num_warps": [1, 2, 4]},
                  constraints=[lambda p, args: p["BLOCK"] <= args["n"]])
    tuned = tritonkit.autotune(space=space, key=["n"], budget=4, strategy="random", cache=False)(scale_kernel)
    x = torch.randn(40)
    o = torch.zeros(40)
    tuned[grid(40)](x, o, 40)
    result = RESULTS[-1]
    assert len(result.trials) == 4
    assert all(t.point["BLOCK"] <= 40 for t in result.trials)
    assert result.strategy == "random"
    torch.testing.assert_close(o, x * 2)


def test_bad_arguments_are_clear():
    with pytest.raises(ValueError, match="needs configs"):
        tritonkit.autotune(key=["n"])
    with pytest.raises(ValueError, match="not an argument"):
        tritonkit.autotune(configs=[triton.Config({"BLOCK": 8, "SKIP_TAIL": False})], key=["nn"])(scale_kernel)
    with pytest.raises(ValueError, match="budget"):
        Budget.parse("fast")


def test_context_poisoned_is_recorded_as_crashed(monkeypatch, tmp_path):
    from tritonkit.tune import _runner
    cache_dir = str(tmp_path / "poison")
    configs = [triton.Config({"BLOCK": b}) for b in (16, 32, 64)]
    tuned = tritonkit.autotune(configs=configs, key=["n"], cache=cache_dir)(limited_kernel)
    monkeypatch.setattr(_runner.LaunchRunner, "_context_ok", lambda self: False)
    with pytest.raises(_runner.ContextPoisoned, match="BLOCK=64"):
        tuned[grid(70)](torch.randn(70), torch.zeros(70), 70)
    cache = TuneCache(cache_dir)
    entries = list(cache.entries())
    assert len(entries) == 1
    crashed = [t for t in entries[0].trials if t.status == "crashed"]
    assert [t.point["BLOCK"] for t in crashed] == [64]


CRASHING_SCRIPT = textwrap.dedent('''
    import os, signal, sys
    os.environ["TRITON_INTERPRET"] = "1"
    import torch, triton, triton.language as tl

    def die_on_32(nargs):
        if nargs.get("BLOCK") == 32:
            os.kill(os.getpid(), signal.SIGKILL)  # what an illegal memory access does to a process

    @triton.autotune(configs=[triton.Config({"BLOCK": b}, pre_hook=die_on_32) for b in (16, 32, 64)], key=["n"])
    @triton.jit
    def add_one(x_ptr, o_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(o_ptr + offs, tl.load(x_ptr + offs, mask=m) + 1.0, mask=m)

    x = torch.arange(100, dtype=torch.float32)
    o = torch.zeros(100)
    add_one[lambda meta: (triton.cdiv(100, meta["BLOCK"]),)](x, o, 100)
    assert torch.equal(o, x + 1)
    print("SCRIPT DONE", add_one.best_config.kwargs["BLOCK"])
''')


def test_tune_cli_survives_a_crashing_config(tmp_path):
    script = tmp_path / "crashing.py"
    script.write_text(CRASHING_SCRIPT)
    out = tmp_path / "tune.json"
    env = dict(os.environ, TRITONKIT_TUNE_ON_CPU="1", TRITONKIT_CACHE_DIR=str(tmp_path / "cli-cache"),
               COLUMNS="200")
    proc = subprocess.run([sys.executable, "-m", "tritonkit", "tune", "--json", str(out), "--", "python", str(script)],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SCRIPT DONE" in proc.stdout
    assert "running it again (1/10)" in proc.stdout
    data = json.loads(out.read_text())
    assert data["restarts"] == 1
    (result,) = data["results"]
    status = {t["point"]["BLOCK"]: t["status"] for t in result["trials"]}
    assert status == {16: "ok", 32: "crashed", 64: "ok"}
    assert result["winner"] in ("BLOCK=16,num_stages=3,num_warps=4", "BLOCK=64,num_stages=3,num_warps=4")


def test_cli_wires_cache_and_distill(tmp_path, capsys):
    from tritonkit.cli import main
    from tritonkit.tune import Trial, TuneResult
    cache_dir = str(tmp_path / "wired")
    configs = [triton.Config({"BLOCK": b, "SKIP_TAIL": False}) for b in (16, 64)]
    for n in (32, 64, 100, 200, 300):
        tritonkit.autotune(configs=configs, key=["n"], cache=cache_dir)(scale_kernel)[grid(n)](
            torch.randn(n), torch.zeros(n), n)
    assert main(["cache", "list", "--dir", cache_dir]) == 0
    assert "5 key(s) in 1 file(s)" in capsys.readouterr().out
    # distill from the cache (5 keys) and from a --json file of results
    out = tmp_path / "heur.py"
    assert main(["distill", "_scale", "--cache-dir", cache_dir, "--key-names", "n", "--out", str(out),
                 "--folds", "0"]) == 0
    assert "def choose_config(args)" in out.read_text()
    rows = [TuneResult("k", [str(m)], [Trial({"BLOCK": 64}, ms=1.0 if m > 256 else 2.0),
                                       Trial({"BLOCK": 16}, ms=1.5)]).to_dict() for m in (64, 128, 512, 1024, 2048)]
    src = tmp_path / "results.json"
    src.write_text(json.dumps({"results": rows}))
    assert main(["distill", "k", "--from", str(src), "--key-names", "M", "--out", str(tmp_path / "k.py"),
                 "--folds", "0"]) == 0
    assert "args['M']" in (tmp_path / "k.py").read_text()
    assert main(["distill", "nothing", "--from", str(src)]) == 2
