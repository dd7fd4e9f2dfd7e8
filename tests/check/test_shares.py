"""A launch's programs shared out between forked worker processes, against one program at a time.

The cost model is set so that every launch of more than one batch is shared out between two
processes (after its first batch, with a small batch budget so that each share runs several
batches); outputs, findings, what was printed, counts of work and access maps must be those of the
sequential engine, and the launches must really have been shared (``LaunchRecord.processes``).
"""
import os
import types

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import tritonkit
from tritonkit.check.engine import batched as _engine
from tritonkit.check.engine import guard as _guard
from tritonkit.check.engine import runs as _runs
from tritonkit.check import forks
from tritonkit.check.engine import shares

import test_batched as tb

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="shares are forked worker processes")

WORK = ("programs", "lanes", "flops", "flops_by_width", "bytes_read", "bytes_written",
        "unique_bytes_read", "unique_bytes_written", "access_maps")  # not ``accesses``: a masked loop's batch
# counts its inactive programs' (as the serial batched engine does: it depends on how programs were batched)


@pytest.fixture
def always_share(monkeypatch):
    """Every launch past its first batch is shared out between two processes."""
    monkeypatch.setattr(shares, "SECONDS_PER_LAUNCH", 0.0)
    monkeypatch.setattr(shares, "SECONDS_PER_BYTE_WRITTEN", 0.0)
    monkeypatch.setattr(shares, "MIN_SAVING", -100.0)
    monkeypatch.setattr(shares, "UNSHARE_SLOWER", float("inf"))  # one slower than serially is shared again
    monkeypatch.setenv("TRITONKIT_CHECK_CACHE", "0")  # no batch size or cost from an earlier process
    for memo in (_engine._PER_PROGRAM, _engine._SECONDS, _engine._UNSHARED):
        memo.clear()
    yield
    for memo in (_engine._PER_PROGRAM, _engine._SECONDS, _engine._UNSHARED):
        memo.clear()


@pytest.fixture(params=[False, True], ids=["own_memory", "host_copies"])
def host_copies(request, monkeypatch):
    """Both ways: CPU tensors checked in their own memory, and on host copies in shared mappings as
    GPU tensors are (every storage: the workers write them in place, see tritonkit.check.memory.host)."""
    if request.param:
        from tritonkit.check.launch.arguments import ArgMapper
        from tritonkit.check.memory import host
        monkeypatch.setattr(ArgMapper, "COPY_CPU_TENSORS", True)
        monkeypatch.setattr(host, "SHARED_MIN_BYTES", 0)
    return request.param


def _work(records):
    return [[getattr(r, f) for f in WORK] for r in records]


@pytest.mark.parametrize("module,bug", [(m, b) for m in tb.EXAMPLES for b in m.BUGS],
                         ids=[f"{m.__name__}-{b}" for m in tb.EXAMPLES for b in m.BUGS])
def test_example_shared_out_gives_the_results_of_one_program_at_a_time(always_share, host_copies, module, bug):
    from tritonkit.check.checks import AccessMap, default_checks
    argv = ["--bug", bug]
    # workers=2 both ways: an autotuned kernel's configs go to config workers alike (see test_parallel_configs)
    seq = tb._run(lambda: module.main(argv), "sequential", checks=[*default_checks(), AccessMap()], workers=2)
    _engine._SECONDS.clear()
    par = tb._run(lambda: module.main(argv), "auto", checks=[*default_checks(), AccessMap()], workers=2,
                  batch_memory=1 << 14)
    assert tb._same(par[0], seq[0])
    assert par[1] == seq[1]
    assert par[3] == seq[3]
    for mine, theirs in zip(_work(par[2]), _work(seq[2])):
        assert [w == t for w, t in zip(mine, theirs)] == [True] * len(WORK), (mine, theirs)
    if bug == "none":
        assert all(r.engine == "batched" and r.fallback is None for r in par[2]), [r.fallback for r in par[2]]


def test_the_examples_really_are_shared_out(always_share):
    """The differential test above compares shared launches: most of the examples' launches of
    more than one batch run in two processes."""
    from tritonkit.check.checks import AccessMap, default_checks
    shared = []
    for module in tb.EXAMPLES:
        _engine._SECONDS.clear()
        got = tb._run(lambda: module.main(["--bug", "none"]), "auto", checks=[*default_checks(), AccessMap()],
                      workers=2, batch_memory=1 << 14)
        shared += [r.processes for r in got[2] if r.batches > 1]
    assert shared and sum(p == 2 for p in shared) >= len(shared) // 2, shared


@triton.jit
def scaled_rows(x, out, n_cols, scale, B: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, B)
    v = tl.load(x + row * n_cols + cols, mask=cols < n_cols, other=0.0)
    tl.device_assert(v == v, "row has a NaN")
    tl.store(out + row * n_cols + cols, v * scale, mask=cols < n_cols)


def test_a_shared_launch_gives_outputs_findings_and_records_of_the_serial_run(always_share, host_copies, monkeypatch):
    def go():
        x = torch.randn(64, 100, generator=torch.Generator().manual_seed(1))
        x[5, 3] = float("nan")  # an assert in the first share
        x[50, 7] = float("nan")  # and one in the second
        out = torch.empty_like(x)
        scaled_rows[(64,)](x, out, 100, 2.0, B=128)
        return out
    seq = tb._run(go, "sequential")
    _engine._SECONDS.clear()
    copied_in = []
    copy_in = shares._copy_in
    monkeypatch.setattr(shares, "_copy_in", lambda storage, *a: copied_in.append(storage) or copy_in(storage, *a))
    par = tb._run(go, "auto", workers=2, batch_memory=1 << 12)
    assert tb._same(par[0], seq[0]) and repr(par[1]) == repr(seq[1])  # (the examples quote NaN values)
    assert [f["program_ids"] for f in par[1] if f["kind"] == "assert_failed"] == [[[5], [50]]]
    (rec,) = par[2]
    assert rec.processes == 2 and rec.programs == 64 and rec.engine == "batched"
    # the worker's bytes of `out` came back through its file, or were written in place (a shared mapping)
    assert [s.shared for s in copied_in] == ([] if host_copies else [False])


@triton.jit
def rows_per_program_sum(x, out, n_rows, rows_per_program, B: tl.constexpr):
    """A persistent-style kernel: each program loops over its ``rows_per_program`` rows."""
    pid = tl.program_id(0)
    cols = tl.arange(0, B)
    acc = tl.zeros((B,), dtype=tl.float32)
    for row in range(pid * rows_per_program, tl.minimum((pid + 1) * rows_per_program, n_rows)):
        acc += tl.load(x + row * B + cols)
    tl.store(out + pid * B + cols, acc)


def test_a_program_cost_is_not_taken_from_a_launch_with_other_integer_arguments(monkeypatch):
    """What a program cost is remembered per specialization *and* integer arguments: one program
    looping over 600 rows costs what 64 programs of 2 rows do not, and the second launch, estimated
    from the first, would be shared out (its 64 programs priced as 64 x 600 rows)."""
    monkeypatch.setenv("TRITONKIT_CHECK_CACHE", "0")
    for memo in (_engine._PER_PROGRAM, _engine._SECONDS, _engine._UNSHARED):
        memo.clear()
    x = torch.randn(600, 16)
    with tritonkit.checking(workers=2) as s:
        out = torch.empty(64, 16)
        rows_per_program_sum[(1,)](x, out, 600, 600, B=16)
        many = torch.empty(64, 16)
        rows_per_program_sum[(64,)](x, many, 128, 2, B=16)
    assert [r.processes for r in s.launches] == [1, 1]
    assert torch.allclose(out[0], x.sum(0), atol=1e-4)
    assert torch.allclose(many, x[:128].view(64, 2, 16).sum(1), atol=1e-5)
    for memo in (_engine._PER_PROGRAM, _engine._SECONDS, _engine._UNSHARED):
        memo.clear()


def test_one_worker_never_shares(always_share):
    def go():
        x = torch.ones(64, 100)
        out = torch.empty_like(x)
        scaled_rows[(64,)](x, out, 100, 2.0, B=128)
        return out
    par = tb._run(go, "auto", workers=1, batch_memory=1 << 12)
    assert par[2][0].processes == 1 and par[2][0].batches > 1
    assert torch.equal(par[0], torch.full((64, 100), 2.0))


def test_programs_of_two_shares_that_depend_on_each_other_run_serially_with_the_serial_result(always_share,
                                                                                             host_copies):
    """Without the race check, programs run in order see what earlier ones wrote: a program of the
    first share reads what one of the second writes, so the shares cannot stand for the serial
    run; the launch runs again in one process, batched, with the serial result."""
    def go():
        x = torch.arange(32 * 64, dtype=torch.float32)
        tb.read_ahead_in_place[(32,)](x, 32 * 64, AHEAD=20, B=64)
        return x
    seq = tb._run(go, "sequential", checks=["out_of_bounds"])
    _engine._SECONDS.clear()
    par = tb._run(go, "auto", checks=["out_of_bounds"], workers=2, batch_memory=1 << 10)
    assert torch.equal(par[0], seq[0]) and par[1] == seq[1] == []
    (rec,) = par[2]
    assert rec.processes == 1 and rec.engine == "batched" and rec.fallback is None
    assert any(_engine._UNSHARED.values())  # and the kernel is not shared out again


def test_a_worker_that_dies_leaves_the_serial_result(always_share, host_copies, monkeypatch):
    def dying(*args, **kwargs):
        os._exit(3)
    monkeypatch.setattr(shares, "_worker", dying)

    def go():
        x = torch.randn(64, 100, generator=torch.Generator().manual_seed(2))
        out = torch.empty_like(x)
        scaled_rows[(64,)](x, out, 100, 3.0, B=128)
        return out, x
    par = tb._run(go, "auto", workers=2, batch_memory=1 << 12)
    out, x = par[0]
    assert torch.equal(out, x * 3.0) and par[1] == []
    assert par[2][0].processes == 1 and par[2][0].engine == "batched"


def test_the_cost_model_shares_only_work_worth_a_fork(monkeypatch):
    class Session:
        workers, pdb = 4, False
    s = Session()
    assert shares.processes_for(s, seconds=0.01, written=0, programs=1000) == 1  # a fork costs more
    assert shares.processes_for(s, seconds=10.0, written=0, programs=1000) == 4
    assert shares.processes_for(s, seconds=10.0, written=0, programs=3) == 3  # a program per process at most
    # writing 4 GB costs more in page faults than halving 1 s of work saves
    assert shares.processes_for(s, seconds=1.0, written=4e9, programs=1000) == 1
    monkeypatch.setattr(forks, "IN_SHARE_WORKER", True)
    assert shares.processes_for(s, seconds=10.0, written=0, programs=1000) == 1  # never from a worker


def test_footprints_conflict_only_where_one_writes_what_another_touches():
    def fp(written, touched):
        arr = lambda iv: (np.array([a for a, _ in iv], dtype=np.int64), np.array([b for _, b in iv], dtype=np.int64))
        return (arr(written), arr(touched))
    a = {1: fp([(0, 10)], [(0, 10)]), 2: fp([], [(0, 100)])}
    b = {1: fp([(10, 20)], [(10, 20)]), 2: fp([], [(50, 150)])}  # both read storage 2: no conflict
    assert shares.conflict([a, b]) is None
    c = {2: fp([(99, 100)], [(99, 100)])}  # writes an element a and b read
    assert shares.conflict([a, b, c]) == 2
    d = {1: fp([], [(19, 25)])}  # reads the last element b writes
    assert shares.conflict([a, b, d]) == 1


def test_a_guard_footprint_holds_runs_cells_and_load_ranges():
    g = _guard.Guard("x")
    runs = _runs.Runs()
    runs.add(np.array([0, 10]), np.array([5, 12]), np.array([0, 1], dtype=np.int32), "x")
    g.runs[7] = runs
    owners = _guard._Owners(1 << 16)
    pos = owners.index(np.array([3, 4, 40000], dtype=np.int64))
    owners.flags[pos] = [_guard._LOAD, _guard._STORE, _guard._ATOMIC]
    g.owners[8] = owners
    g.summary[9] = (8, 20)  # bytes: cells of 4 bytes 2-5
    got = g.footprint({7: 4, 8: 4, 9: 4})
    assert [x.tolist() for x in got[7][0]] == [[0, 10], [5, 12]]
    assert [x.tolist() for x in got[8][0]] == [[4, 40000], [5, 40001]]
    assert [x.tolist() for x in got[8][1]] == [[3, 40000], [5, 40001]]
    assert [x.tolist() for x in got[9][0]] == [[], []] and [x.tolist() for x in got[9][1]] == [[2], [5]]


def test_a_session_with_a_debugger_never_shares():
    class Session:
        workers, pdb = 4, True
    assert shares.processes_for(Session(), seconds=10.0, written=0, programs=100) == 1


def test_checks_state_of_a_shared_launch_merges_like_the_serial_run(always_share, host_copies):
    """The uninitialized-read check: what a worker wrote counts as written in this process (a later
    launch reads it without a finding), and the access map counts every share's bytes."""
    from tritonkit.check.checks import AccessMap, default_checks

    def go():
        x = torch.randn(64, 100, generator=torch.Generator().manual_seed(3))
        out = torch.empty_like(x)
        scaled_rows[(64,)](x, out, 100, 2.0, B=128)
        again = torch.empty_like(x)
        scaled_rows[(64,)](out, again, 100, 0.5, B=128)  # reads every row the first launch wrote
        return again, x
    par = tb._run(go, "auto", checks=[*default_checks(), AccessMap()], workers=2, batch_memory=1 << 12)
    again, x = par[0]
    assert torch.equal(again, x) and par[1] == []
    assert [r.processes for r in par[2]] == [2, 2]
    assert [r.unique_bytes_written for r in par[2]] == [64 * 100 * 4] * 2


def test_the_default_workers_share_the_cores_between_the_processes_of_an_xdist_run(monkeypatch):
    from tritonkit.check import forks as parallel
    monkeypatch.delenv("TRITONKIT_WORKERS", raising=False)
    monkeypatch.setattr(parallel, "available_cores", lambda: 16)
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "8")
    assert parallel.resolve_workers(None) == 2
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "32")
    assert parallel.resolve_workers(None) == 1
    monkeypatch.delenv("PYTEST_XDIST_WORKER_COUNT")
    assert parallel.resolve_workers(None) == 16
    assert parallel.resolve_workers(3) == 3  # given: as given


def test_a_kernel_whose_shared_launch_was_slower_than_serial_is_not_shared_again(always_share, monkeypatch):
    import time
    monkeypatch.setattr(shares, "UNSHARE_SLOWER", 1.0)
    run_shared = shares.run_shared

    def slow(*args, **kwargs):  # a share that costs more than the whole launch did serially
        time.sleep(0.5)
        return run_shared(*args, **kwargs)
    monkeypatch.setattr(shares, "run_shared", slow)

    def go():
        x = torch.ones(64, 100)
        outs = []
        for _ in range(2):
            out = torch.empty_like(x)
            scaled_rows[(64,)](x, out, 100, 2.0, B=128)
            outs.append(out)
        return outs
    par = tb._run(go, "auto", workers=2, batch_memory=1 << 12)
    assert [r.processes for r in par[2]] == [2, 1]
    assert all(torch.equal(o, torch.full((64, 100), 2.0)) for o in par[0])


def test_the_interpreters_builtin_wrappers_call_the_semantic_of_the_running_scope(monkeypatch):
    """The wrappers are made once per process and kept from launch to launch (and an engine's scope
    nests in its launch's): each call must take the interpreter's semantic as it is then, never the
    one of the launch the wrapper was made in (Triton 3.6's own wrapper binds its builder)."""
    from triton.runtime import interpreter as _interp
    from tritonkit.check import triton_hooks
    seen = []

    def member(x, _semantic=None):
        seen.append(_semantic)
        return x
    wrapper = triton_hooks._wrapper(member)
    first, second = types.SimpleNamespace(builder=None), types.SimpleNamespace(builder=None)
    monkeypatch.setattr(_interp, "interpreter_semantic", first)
    assert wrapper(1, _semantic="the caller's") == 1
    monkeypatch.setattr(_interp, "interpreter_semantic", second)
    assert wrapper(2) == 2
    assert seen[0] is first and seen[1] is second and len(seen) == 2


def test_a_launch_shared_out_from_its_first_batch_finds_uninitialized_cells_once_in_this_process(
        always_share, host_copies, monkeypatch, tmp_path):
    """The second launch of a kernel is shared out before any batch ran here (its cost is known):
    which cells are uninitialized is found before the fork, not by every worker for itself."""
    from tritonkit.check.checks import uninitialized as un
    refresh = un._Tracked.refresh
    log = tmp_path / "pids"

    def logged(self, *args, **kwargs):
        with open(log, "a") as f:
            f.write(f"{os.getpid()}\n")
        return refresh(self, *args, **kwargs)
    monkeypatch.setattr(un._Tracked, "refresh", logged)

    def go():
        x = torch.randn(64, 100, generator=torch.Generator().manual_seed(4))
        outs = []
        for _ in range(2):
            outs.append(torch.empty_like(x))
            scaled_rows[(64,)](x, outs[-1], 100, 2.0, B=128)
        return outs, x
    par = tb._run(go, "auto", workers=2, batch_memory=1 << 12)
    outs, x = par[0]
    assert all(torch.equal(o, x * 2.0) for o in outs) and par[1] == []
    assert [r.processes for r in par[2]] == [2, 2]
    assert set(log.read_text().split()) == {str(os.getpid())}


def test_limit_threads_limits_numpys_blas_each_time_and_restores_it():
    """Workers limit NumPy's BLAS threads (through one threadpoolctl controller made per process):
    inside, every BLAS pool runs the threads asked for; after, it runs as many as before; the
    second use of the kept controller does the same."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    from tritonkit.check import forks

    def blas():
        return [i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]
    before = blas()
    if not before:
        pytest.skip("NumPy's BLAS is not one threadpoolctl knows")
    target = 1 if max(before) > 1 else 2
    for _ in range(2):
        with forks.limit_threads(target):
            assert blas() == [target] * len(before)
        assert blas() == before
