"""Launches larger than ``--gpu-above`` checked on a real GPU by their instrumented versions, in a
checked run (``tritonkit check --gpu-above``, ``pytest --tritonkit``): the same out-of-bounds and
int32-overflow findings as the interpreter gives, the GPU's results, and the interpreter for what
the GPU cannot check fully. Skipped without a CUDA GPU."""
import json
import subprocess
import sys

import pytest
import torch

from test_gpu_instrumented import _bugs, _check, _env, _found

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


@pytest.mark.parametrize("module,bug", _bugs())
def test_an_example_checked_on_the_gpu_over_the_limit_gives_the_interpreters_findings(tmp_path, module, bug):
    """With every launch over the limit (0 elements), each out-of-bounds and int32-overflow finding of
    the interpreter is made, on the same line and argument with programs in common, and no other:
    launches the GPU checks fully go there, the others to the interpreter."""
    proc, mixed = _check(tmp_path, module, bug, "--gpu-above", "0", "--outputs", "gpu")
    assert proc.returncode in (0, 1, 3), proc.stderr[-3000:]
    _, cpu = _check(tmp_path, module, bug)
    got, want = _found(mixed), _found(cpu)
    assert set(got) == set(want), (got, want)
    for site, programs in want.items():
        assert programs & got[site], (site, programs, got[site])
    engines = {r["engine"] for r in mixed["launch_records"]}
    assert mixed["summary"]["gpu_launches"] == sum(r["engine"] == "gpu" for r in mixed["launch_records"])
    if module in ("vector_add", "softmax", "row_sum"):  # plain kernels: every launch on the GPU
        assert engines == {"gpu"}, engines


SUITE = '''
import torch
import triton
import triton.language as tl


@triton.jit
def scale(x_ptr, y_ptr, n, BLOCK: tl.constexpr, PAST: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n + PAST, other=0.0)
    tl.store(y_ptr + offs, x * 2, mask=offs < n)


def run(n, past):
    x = torch.randn(n, device="cuda")
    y = torch.empty_like(x)
    scale[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024, PAST=past)
    return x, y


def test_large_clean():
    x, y = run(3_000_000, 0)
    assert torch.equal(y, x * 2)


def test_large_reads_past_the_end():
    run(3_000_000, 5)


def test_small_reads_past_the_end():
    run(1000, 5)
'''


def test_pytest_checks_launches_over_the_limit_on_the_gpu(tmp_path):
    """A suite with ``--tritonkit-gpu-above 1e6``: the large launches run on the GPU (their tests see
    the GPU's results, and the one reading past its tensor fails with that finding), the small one
    in the interpreter, and the summary says how many went to the GPU."""
    (tmp_path / "test_scale.py").write_text(SUITE)
    out = tmp_path / "tk.json"
    from importlib.metadata import entry_points
    # where tritonkit is only on PYTHONPATH (the GPU machine), its plugin is loaded by name
    plugin = [] if any(ep.value.startswith("tritonkit") for ep in entry_points(group="pytest11")) else \
        ["-p", "tritonkit.pytest_plugin"]
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *plugin, "--tritonkit",
                           "--tritonkit-gpu-above", "1e6", "--tritonkit-json", str(out), str(tmp_path)],
                          capture_output=True, text=True, env=_env(src=True), cwd=str(tmp_path), timeout=600)
    assert "1 passed" in proc.stdout and "2 failed" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "2 launches larger than --tritonkit-gpu-above checked on the GPU instead" in proc.stdout
    tests = json.loads(out.read_text())["tests"]
    big = tests["test_scale.py::test_large_reads_past_the_end"]
    small = tests["test_scale.py::test_small_reads_past_the_end"]
    assert [(f["kind"], f["arg"], f["reason"]) for f in big["findings"]] == [("out_of_bounds", "x_ptr", "past_end")]
    assert [(f["kind"], f["arg"]) for f in small["findings"]] == [("out_of_bounds", "x_ptr")]
    assert big["summary"]["gpu_launches"] == 1 and small["summary"]["gpu_launches"] == 0
    assert "on the GPU" in big["findings"][0]["message"] and "on the GPU" not in small["findings"][0]["message"]
