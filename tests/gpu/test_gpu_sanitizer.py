"""``tritonkit check --gpu=sanitizer`` on a real GPU: memcheck's reports on a buggy example become the
findings the CPU check gives for it (kind, line, argument, program), with PyTorch's caching
allocator off (with it on, memcheck misses the overrun); the correct example gives none. Skipped
without a CUDA GPU and compute-sanitizer."""
import json
import os
import subprocess
import sys

import pytest
import torch

from tritonkit.check.gpu import sanitizer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "examples", "vector_add.py")

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
              pytest.mark.skipif(sanitizer.find_sanitizer() is None, reason="needs compute-sanitizer")]


def _check(tmp_path, *flags, bug="missing_mask"):
    out = tmp_path / f"{bug}{'-gpu' if flags else ''}.json"
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    proc = subprocess.run([sys.executable, "-m", "tritonkit", "check", *flags, "--json", str(out), "--",
                           sys.executable, EXAMPLE, "--bug", bug], capture_output=True, text=True, env=env,
                          timeout=600)
    return proc, json.loads(out.read_text())


def test_memcheck_reports_become_the_cpu_checks_findings(tmp_path):
    proc, gpu = _check(tmp_path, "--gpu=sanitizer")
    assert proc.returncode == 1, proc.stderr[-3000:]
    _, cpu = _check(tmp_path)
    cpu_sites = {(f["kind"], f["line"], f["arg"]) for f in cpu["findings"]}
    assert gpu["findings"] and all((f["kind"], f["line"], f["arg"]) in cpu_sites for f in gpu["findings"])
    cpu_programs = {tuple(p) for f in cpu["findings"] for p in f["program_ids"]}
    for f in gpu["findings"]:
        assert f["file"] == EXAMPLE and f["tensor"]["shape"] == [1000]
        assert {tuple(p) for p in f["program_ids"]} <= cpu_programs
        assert all(i[0] >= 1000 for i in f["element_indices"])  # past the end of a 1000-element tensor
    assert gpu["summary"]["gpu"]["memcheck_errors"] >= len(gpu["findings"])


def test_the_correct_example_gives_no_finding(tmp_path):
    proc, gpu = _check(tmp_path, "--gpu=sanitizer", bug="none")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert gpu["findings"] == [] and gpu["launches"] >= 1
