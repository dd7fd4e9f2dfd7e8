"""``tritonkit check --gpu`` on a real GPU: every example, buggy and correct, run with its kernels
instrumented gives the out-of-bounds findings the CPU check gives (kind, line, argument, program
ids) where the access's pointer derives from one tensor argument in the kernel's own body (the
instrumented mode's reach), and none for a correct example. Skipped without a CUDA GPU."""
import json
import os
import re
import subprocess
import sys
import time

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples"))

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

EXAMPLES = ["embedding", "grad_accumulate", "histogram", "layer_norm", "matmul", "row_sum", "softmax",
            "split_k_matmul", "tensor_descriptor", "vector_add"]


def _bugs():
    import importlib
    return [(m, b) for m in EXAMPLES for b in importlib.import_module(m).BUGS]


def _env(src: bool = False) -> dict:
    """The environment of a child that runs on the GPU (not Triton's interpreter); ``src``: with
    this checkout's ``src`` first on ``PYTHONPATH``."""
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    if src:
        env["PYTHONPATH"] = os.pathsep.join([os.path.join(ROOT, "src"), os.environ.get("PYTHONPATH", "")])
    return env


def _run_script(tmp_path, source: str):
    """Run ``source`` as a script on the GPU with a records file as its argument; returns the
    finished process and the records file's path."""
    (tmp_path / "s.py").write_text(source)
    records = tmp_path / "records.jsonl"
    proc = subprocess.run([sys.executable, str(tmp_path / "s.py"), str(records)], capture_output=True, text=True,
                          env=_env(src=True), timeout=300)
    return proc, records


def _check(tmp_path, module, bug, *flags):
    out = tmp_path / f"{module}-{bug}{'-gpu' if flags else ''}.json"
    env = _env()
    proc = subprocess.run([sys.executable, "-m", "tritonkit", "check", *flags, "--json", str(out), "--",
                           sys.executable, os.path.join(ROOT, "examples", f"{module}.py"), "--bug", bug],
                          capture_output=True, text=True, env=env, timeout=900)
    assert out.exists(), proc.stderr[-3000:]
    return proc, json.loads(out.read_text())


def _found(report):
    """Out-of-bounds and int32-overflow findings by (kind, line, argument, reason: where an
    out-of-bounds access falls): their program ids."""
    return {(f["kind"], f["line"], f["arg"], f["reason"] if f["kind"] == "out_of_bounds" else ""):
            {tuple(p) for p in f["program_ids"]} for f in report["findings"]
            if f["kind"] in ("out_of_bounds", "int_overflow")}


def _unchecked_lines(report):
    return {int(n) for u in report["summary"]["gpu"]["unchecked"] if "no single tensor" in u
            for n in re.findall(r"\b(\d+)\b", u.split("lines", 1)[1].split(" have ")[0].split(" could ")[0])}


@pytest.mark.parametrize("module,bug", _bugs())
def test_an_example_gives_the_cpu_checks_findings(tmp_path, module, bug):
    """Each out-of-bounds finding (past the end, before the start, outside the view) and each int32
    overflow the CPU check makes, the instrumented kernels make on the GPU, on the same line and
    argument with programs in common; none that the CPU check does not make."""
    proc, gpu = _check(tmp_path, module, bug, "--gpu")
    assert proc.returncode in (0, 1, 3), proc.stderr[-3000:]
    _, cpu = _check(tmp_path, module, bug)
    got, want = _found(gpu), _found(cpu)
    if bug == "none":
        assert got == {} and want == {}
        return
    unchecked = _unchecked_lines(gpu)
    for site, programs in want.items():
        if site[1] in unchecked:  # an access the instrumented mode says it did not check
            continue
        assert site in got, (site, got, unchecked)
        assert programs & got[site], (site, programs, got[site])  # the first programs the CPU lists, some found
    assert set(got) <= set(want)


def test_int32_offsets_past_two_billion_elements_are_found(tmp_path):
    """The embedding kernel that computes row offsets in int32, over a bf16 table of 150000 x 16384
    (2.46 billion elements): the overflow on the line that forms the pointer, and the wrapped load
    before the table's start, as the CPU check reports them at small sizes."""
    out = tmp_path / "big.json"
    env = _env()
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "tritonkit", "check", "--gpu", "--json", str(out), "--",
                           sys.executable, os.path.join(ROOT, "examples", "embedding.py"), "--bug", "int32_offsets",
                           "--vocab", "150000", "--dtype", "bfloat16"], capture_output=True, text=True, env=env,
                          timeout=900)
    seconds = time.perf_counter() - start
    assert out.exists(), proc.stderr[-3000:]
    found = _found(json.loads(out.read_text()))
    print(f"embedding int32_offsets, 150000 x 16384 bf16 under --gpu: {seconds:.1f} s, {sorted(found)}")
    assert ("int_overflow", 81, "weight_ptr", "") in found
    assert ("out_of_bounds", 82, "weight_ptr", "before_start") in found


BROKEN = '''
import sys, torch, triton, triton.language as tl
from tritonkit.check.gpu import device, runtime

@triton.jit
def broken_guard(off, mask, hi, s1, e1, s2, e2, rec, cap, site: tl.constexpr, G: tl.constexpr,
                 COUNT: tl.constexpr, SKIP: tl.constexpr):
    return mask & undefined_name  # noqa: F821 - does not compile

device.guard_offset = broken_guard
runtime.install(sys.argv[1])

@triton.jit
def add(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)

x = torch.arange(1000, device="cuda", dtype=torch.float32)
y = torch.empty_like(x)
add[(4,)](x, y, 1000, BLOCK=256)
add[(4,)](x, y, 1000, BLOCK=256)
runtime.uninstall()
print("equal", bool(torch.equal(y, x + 1)))
'''


def test_a_kernel_whose_instrumented_version_does_not_compile_runs_as_written(tmp_path):
    """The script goes on with the kernel as written, and the report says it was not checked."""
    proc, records = _run_script(tmp_path, BROKEN)
    assert proc.returncode == 0 and "equal True" in proc.stdout, proc.stderr[-3000:]
    from tritonkit.check.gpu import runtime
    _, clean, unchecked = runtime.read(str(records))
    assert [u["kernel"] for u in unchecked if "did not compile" in u["why"]] == ["add"]


REPLAY_BREAKS = '''
import sys, torch, triton, triton.language as tl
from tritonkit.check.gpu import device, runtime

kept = device.guard_offset

@triton.jit
def replay_breaks(off, mask, hi, s1, e1, s2, e2, rec, cap, site: tl.constexpr, G: tl.constexpr,
                  COUNT: tl.constexpr, SKIP: tl.constexpr):
    if SKIP:
        undefined_name  # noqa: F821 - only the replay (writes skipped) compiles this
    return kept(off, mask, hi, s1, e1, s2, e2, rec, cap, site, G, COUNT, SKIP)

device.guard_offset = replay_breaks
runtime.install(sys.argv[1])

@triton.jit
def row_sums(x_ptr, out_ptr, n, K: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    p = x_ptr + offs + 2
    acc = tl.zeros((BLOCK,), tl.float32)
    for k in range(0, K):
        acc += tl.load(p, mask=offs < n - k * BLOCK, other=0.0)
        p += BLOCK
    tl.store(out_ptr + offs, acc)

x = torch.ones(64, device="cuda")
out = torch.zeros(16, device="cuda")
row_sums[(1,)](x, out, 64, K=4, BLOCK=16)
runtime.uninstall()
print("sums", out.tolist())
'''


def test_a_replay_that_does_not_compile_keeps_the_first_runs_counts(tmp_path):
    """Lanes counted in a loop whose replay cannot be compiled: the script goes on, the finding keeps
    its lane count (without programs), and the report says why."""
    proc, records = _run_script(tmp_path, REPLAY_BREAKS)
    assert proc.returncode == 0 and "sums" in proc.stdout, proc.stderr[-3000:]
    from tritonkit.check.gpu import runtime
    launches, _, unchecked = runtime.read(str(records))
    assert any("replay" in u["why"] and "did not compile" in u["why"] for u in unchecked)
    (f,) = runtime.to_findings(launches)
    # the pointer starts 2 elements in: the last iteration's lanes 14 and 15 reach past the end
    assert (f.kind, f.reason, f.count, f.program_ids) == ("out_of_bounds", "outside", 2, [])
