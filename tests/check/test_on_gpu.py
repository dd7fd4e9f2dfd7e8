"""Launches too large for the interpreter checked on the GPU instead (``gpu_above``): the options,
which launches go, and how what the GPU recorded becomes the session's findings. The GPU itself is
replaced by a stand-in here; tests/gpu/test_gpu_above.py runs it on a real one."""
import types

import pytest
import torch
import triton
import triton.language as tl

import tritonkit
from tritonkit.check import CheckAborted
from tritonkit.check.launch import on_gpu
from tritonkit.cli import main


@pytest.mark.parametrize("text,value", [("off", None), ("None", None), ("never", None), ("0", 0), ("1e9", 10 ** 9),
                                        ("2^30", 1 << 30), ("2**30", 1 << 30), ("1073741824", 1 << 30), (5, 5),
                                        (None, None)])
def test_a_limit_is_read_as_people_write_it(text, value):
    assert on_gpu.parse_gpu_above(text) == value


@pytest.mark.parametrize("text", ["lots", "-1", "1.5", "2^x", "", "1e999"])
def test_a_limit_that_is_not_a_number_of_elements_is_refused(text):
    with pytest.raises(ValueError, match="number of elements"):
        on_gpu.parse_gpu_above(text)


@pytest.mark.parametrize("value", [-1, 1.5, "2^30", True])
def test_the_api_refuses_a_limit_that_is_not_a_count(value):
    with pytest.raises(ValueError, match="gpu_above must be a number of elements"):
        with tritonkit.checking(gpu_above=value):
            pass


class _Storage:
    def __init__(self, nbytes):
        self._nbytes = nbytes

    def nbytes(self):
        return self._nbytes

    def data_ptr(self):
        return id(self)


def _fake_cuda(n, storage=None, itemsize=4):
    """A CUDA tensor as the count sees it: ``n`` elements of ``itemsize`` bytes, viewing ``storage``."""
    storage = storage or _Storage(n * itemsize)
    return types.SimpleNamespace(untyped_storage=lambda: storage, device=types.SimpleNamespace(type="cuda"),
                                 numel=lambda: n, element_size=lambda: itemsize)


def test_only_launches_with_every_tensor_on_a_gpu_count_their_storages_elements():
    assert on_gpu.cuda_elements((_fake_cuda(10), 3, None), {"y": _fake_cuda(5)}) == 15
    assert on_gpu.cuda_elements((_fake_cuda(10), torch.ones(4)), {}) is None  # one tensor on the host
    assert on_gpu.cuda_elements((1, 2.0), {}) is None  # no tensor
    desc = types.SimpleNamespace(base=_fake_cuda(7), shape=[7])  # a host-side tensor descriptor: its base
    assert on_gpu.cuda_elements((desc,), {}) == 7
    # two small views of one large storage: the storage, once (the interpreter copies all of it)
    big = _Storage(4 << 30)
    assert on_gpu.cuda_elements((_fake_cuda(8, big), _fake_cuda(8, big, itemsize=4)), {}) == 1 << 30
    assert on_gpu.cuda_elements((_fake_cuda(8, big, itemsize=2),), {}) == 2 << 30


@triton.jit
def copy_past_end(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n + 3), mask=offs < n)


def test_host_tensors_stay_in_the_interpreter_whatever_the_limit():
    x, y = torch.arange(100.0), torch.zeros(100)
    with tritonkit.checking(gpu_above=0) as s:
        copy_past_end[(2,)](x, y, 100, BLOCK=64)
    assert [r.engine for r in s.launches] == ["batched"]
    assert [(f.kind, f.arg) for f in s.findings] == [("out_of_bounds", "x_ptr")]
    assert torch.equal(y, x)


SITE = {"0": [14, "load", "x_ptr", 12, True]}
TENSOR = {"name": "x_ptr", "ptr": 1 << 20, "base": 1 << 20, "nbytes": 4000, "shape": [1000], "strides": [1],
          "dtype": "float32", "itemsize": 4}


def _record(program, lo, hi, file=__file__):
    return {"t": "launch", "kernel": "copy_past_end", "file": file, "count": 1, "grid": [4, 1, 1],
            "sites": SITE, "tensors": {"x_ptr": TENSOR}, "records": [[0, program, 0, 0, hi - lo + 1, lo, hi, 0]],
            "meta": {}, "counted": {}, "replayed": False}


class _StandIn:
    """The GPU's instrumenter, replaced: ``prepare`` gives ``inst``, a launch records ``records[k]``."""

    def __init__(self, inst, records):
        self.inst, self.records, self.launched = inst, list(records), 0

    def prepare(self, fn, named, cuda):
        return self.inst, ("key",)

    def launch(self, fn, inst, key, named, args, kwargs, grid, keep):
        self.launched += 1
        rec = self.records.pop(0)
        if rec is not None:
            keep(rec)
        return None, rec is not None


@pytest.fixture
def stand_in(monkeypatch):
    """Every launch counts as one of 200 elements on CUDA tensors; the GPU is a stand-in."""
    monkeypatch.setattr(on_gpu, "cuda_elements", lambda args, kwargs: 200)
    made = {}

    def install(inst, records):
        made["gpu"] = _StandIn(inst, records)
        monkeypatch.setattr(on_gpu, "_get_instrumenter", lambda original: made["gpu"])
        return made["gpu"]
    return install


def _complete():
    return types.SimpleNamespace(skipped=[], no_overflow=[], roots=[])


def test_a_launch_over_the_limit_is_checked_on_the_gpu_and_its_records_are_findings(stand_in, tmp_path):
    """Each such launch is a record with engine "gpu"; the records of one site in two launches are
    one finding (lanes, programs, elements and launches added up), journalled as it is found."""
    from tritonkit.check.journal import Journal, read_journal
    gpu = stand_in(_complete(), [_record(3, 1000, 1023), None, _record(1, 1000, 1001)])
    x, y = torch.arange(100.0), torch.zeros(100)
    journal = Journal(str(tmp_path), "root", ["out_of_bounds"], "auto")
    with tritonkit.checking(gpu_above=10, journal=journal) as s:
        for _ in range(3):
            copy_past_end[(2,)](x, y, 100, BLOCK=64)
    assert gpu.launched == 3 and torch.equal(y, torch.zeros(100))  # the stand-in ran nothing; nor did the interpreter
    assert [r.engine for r in s.launches] == ["gpu"] * 3
    assert all(r.outputs == "gpu" and r.programs == 2 and r.status == "ok" for r in s.launches)
    (f,) = s.findings
    assert (f.kind, f.arg, f.line, f.reason, f.count, f.launches) == ("out_of_bounds", "x_ptr", 14, "past_end", 26, 2)
    assert f.program_ids == [[1], [3]] and f.element_indices == [[1000], [1023]]
    assert s.summary()["gpu_launches"] == 3 and s.summary()["batched_launches"] == 0
    journal.close()
    got = read_journal(journal.path)
    assert [(g.kind, g.count) for g in got.findings.values()] == [("out_of_bounds", 26)]
    assert [r.engine for r in got.launch_records] == ["gpu"] * 3


def test_a_finding_made_again_and_again_keeps_a_bounded_number_of_records(stand_in, monkeypatch):
    """Past the records kept per finding, a launch adds its lanes and its launch only."""
    from tritonkit.check import session as session_module
    monkeypatch.setattr(session_module, "_GPU_RECORDS_KEPT", 2)
    stand_in(_complete(), [_record(p, 1000, 1001 + p) for p in range(5)])
    x, y = torch.arange(100.0), torch.zeros(100)
    with tritonkit.checking(gpu_above=10) as s:
        for _ in range(5):
            copy_past_end[(4,)](x, y, 100, BLOCK=32)
    (f,) = s.findings
    assert (f.count, f.launches) == (sum(p + 2 for p in range(5)), 5)
    assert f.program_ids == [[0], [1]] and "15 more lanes in 3 later launches" in f.message
    assert [len(v) for v in s._gpu_records.values()] == [2]


def test_a_launch_the_gpu_cannot_check_fully_goes_to_the_interpreter(stand_in):
    """Accesses the instrumented kernel leaves unchecked, offsets it cannot compute again, views it
    cannot tell apart: the interpreter checks the launch instead."""
    for inst in (types.SimpleNamespace(skipped=[12], no_overflow=[], roots=[]),
                 types.SimpleNamespace(skipped=[], no_overflow=[14], roots=[]), None):
        gpu = stand_in(inst, [])
        x, y = torch.arange(100.0), torch.zeros(100)
        with tritonkit.checking(gpu_above=10) as s:
            copy_past_end[(2,)](x, y, 100, BLOCK=64)
        assert gpu.launched == 0 and [r.engine for r in s.launches] == ["batched"]
        assert [f.kind for f in s.findings] == ["out_of_bounds"]


@triton.jit
def _offset(base, offs):
    return base + offs


@triton.jit
def gather_through_helper(x_ptr, idx_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    i = tl.load(idx_ptr + offs, mask=offs < n)
    tl.store(y_ptr + offs, tl.load(_offset(x_ptr, i), mask=offs < n), mask=offs < n)


def test_what_the_instrumenter_cannot_check_is_not_reported_unchecked_when_the_interpreter_checks_it(
        monkeypatch, capfd):
    """The real instrumenter (rewriting needs no GPU) leaves the load through a helper's pointer
    unchecked: the launch goes to the interpreter, and nothing says it went unchecked."""
    from tritonkit.check.gpu import runtime
    monkeypatch.setattr(on_gpu, "cuda_elements", lambda args, kwargs: 200)
    monkeypatch.setattr(on_gpu, "_instrumenter", None)
    monkeypatch.setattr(runtime, "cuda_arguments", lambda named: (frozenset({"x_ptr", "idx_ptr", "y_ptr"}),
                                                                  frozenset()))
    x, idx, y = torch.arange(100.0), torch.arange(100) + 3, torch.zeros(100)
    with tritonkit.checking(gpu_above=10) as s:
        gather_through_helper[(2,)](x, idx, y, 100, BLOCK=64)
    assert [bool(inst.skipped) for _, inst in on_gpu._instrumenter._cache.values()] == [True]
    assert [r.engine for r in s.launches] == ["batched"]
    assert [f.kind for f in s.findings] == ["out_of_bounds"]  # the interpreter checked the load
    assert "on the GPU" not in capfd.readouterr().err


def test_what_a_gpu_launch_leaves_unchecked_is_said_once(stand_in, capfd):
    gpu = stand_in(_complete(), [None, None])
    launch = gpu.launch

    def unchecked_launch(fn, *args, **kwargs):
        on_gpu._unchecked(fn, "the replay did not compile")
        return launch(fn, *args, **kwargs)
    gpu.launch = unchecked_launch
    x, y = torch.arange(100.0), torch.zeros(100)
    with tritonkit.checking(gpu_above=10):
        copy_past_end[(2,)](x, y, 100, BLOCK=64)
        copy_past_end[(2,)](x, y, 100, BLOCK=64)
    assert capfd.readouterr().err.count("copy_past_end on the GPU: the replay did not compile") == 1


def test_under_the_limit_and_without_a_limit_launches_stay_in_the_interpreter(stand_in):
    gpu = stand_in(_complete(), [])
    x, y = torch.arange(100.0), torch.zeros(100)
    for limit in (200, None):
        with tritonkit.checking(gpu_above=limit) as s:
            copy_past_end[(2,)](x, y, 100, BLOCK=64)
        assert gpu.launched == 0 and [r.engine for r in s.launches] == ["batched"]


def test_stop_on_first_stops_after_a_gpu_launch_with_a_finding(stand_in):
    stand_in(_complete(), [_record(3, 1000, 1023)])
    x, y = torch.arange(100.0), torch.zeros(100)
    with pytest.raises(CheckAborted):
        with tritonkit.checking(gpu_above=10, stop_on_first=True) as s:
            copy_past_end[(2,)](x, y, 100, BLOCK=64)
            copy_past_end[(2,)](x, y, 100, BLOCK=64)
    assert len(s.launches) == 1 and len(s.findings) == 1


def test_the_command_line_refuses_a_bad_limit_and_the_gpu_modes_take_none(tmp_path, capfd):
    script = tmp_path / "s.py"
    script.write_text("print('ran')\n")
    assert main(["check", "--gpu-above", "lots", "--", "python", str(script)]) == 2
    err = capfd.readouterr()
    assert "--gpu-above: 'lots' is not a number of elements" in err.err and "ran" not in err.out
    assert main(["check", "--gpu", "--gpu-above", "5", "--", "python", str(script)]) == 2
    assert "drop --gpu-above" in capfd.readouterr().err


def test_the_limit_reaches_the_scripts_session(tmp_path, capfd):
    script = tmp_path / "s.py"
    script.write_text("from tritonkit.check.launch.active import active_session\n"
                      "print('limit', active_session().gpu_above)\n")
    assert main(["check", "--gpu-above", "2^20", "--", "python", str(script)]) == 0
    assert "limit 1048576" in capfd.readouterr().out
