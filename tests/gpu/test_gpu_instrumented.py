"""``tritonkit check --gpu`` on a real GPU: every example, buggy and correct, run with its kernels
instrumented gives the out-of-bounds findings the CPU check gives (kind, line, argument, program
ids) where the access's pointer derives from one tensor argument in the kernel's own body (the
instrumented mode's reach), and none for a correct example. Skipped without a CUDA GPU."""
import json
import os
import re
import subprocess
import sys

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


def _check(tmp_path, module, bug, *flags):
    out = tmp_path / f"{module}-{bug}{'-gpu' if flags else ''}.json"
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    proc = subprocess.run([sys.executable, "-m", "tritonkit", "check", *flags, "--json", str(out), "--",
                           sys.executable, os.path.join(ROOT, "examples", f"{module}.py"), "--bug", bug],
                          capture_output=True, text=True, env=env, timeout=900)
    assert out.exists(), proc.stderr[-3000:]
    return proc, json.loads(out.read_text())


def _oob(report, outside_storage=False):
    """Out-of-bounds findings by (line, argument): their program ids; with ``outside_storage`` only
    those the GPU mode looks for (outside the argument's storage, not a gap of a strided view)."""
    return {(f["line"], f["arg"]): {tuple(p) for p in f["program_ids"]} for f in report["findings"]
            if f["kind"] == "out_of_bounds" and (not outside_storage or f["reason"] in ("past_end", "before_start"))}


@pytest.mark.parametrize("module,bug", _bugs())
def test_an_example_gives_the_cpu_checks_out_of_bounds_findings(tmp_path, module, bug):
    proc, gpu = _check(tmp_path, module, bug, "--gpu")
    assert proc.returncode in (0, 1, 3), proc.stderr[-3000:]
    _, cpu = _check(tmp_path, module, bug)
    got, want = _oob(gpu), _oob(cpu, outside_storage=True)
    if bug == "none":
        assert got == {} and want == {}
        return
    unchecked = {int(n) for u in gpu["summary"]["gpu"]["unchecked"] if "lines" in u
                 for n in re.findall(r"\b(\d+)\b", u.split("lines", 1)[1].split(" have ")[0])}
    for site, programs in want.items():
        if site[0] in unchecked:  # an access the instrumented mode says it did not check
            continue
        assert site in got, (site, got, unchecked)
        assert programs & got[site], (site, programs, got[site])  # the first programs the CPU lists, some found
    assert set(got) <= set(_oob(cpu))
