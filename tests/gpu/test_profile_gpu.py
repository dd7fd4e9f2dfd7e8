"""tritonkit profile on a real GPU: the CLI runs a script under Proton and reports its kernels."""
import json
import os
import subprocess
import sys

import pytest
import torch

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_profile_cli_on_the_workload(tmp_path):
    out = tmp_path / "p.json"
    proc = subprocess.run([sys.executable, "-m", "tritonkit", "profile", "--json", str(out), "--", "python",
                           os.path.join(ROOT, "benchmarks", "profile_workload.py"), "--repeat", "3"],
                          capture_output=True, text=True, timeout=300, env=dict(os.environ, COLUMNS="220"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads(out.read_text())
    kernels = {k["name"]: k for k in data["kernels"]}
    add = kernels["add_kernel n=16777216"]
    # over 90% of peak bandwidth: memory bound, whatever its host time under Proton
    assert add["launches"] == 3 and add["bound"] == "memory" and add["pct_peak_bw"] > 50
    assert add["host_us"] is not None and 0 < add["host_us"] < 10000
    mm = kernels["matmul_kernel M=4096 N=4096 K=4096"]
    assert mm["bound"] == "compute" and mm["flops_dtype"] == "bf16"
    assert data["peaks"]["name"].startswith("NVIDIA")
    assert "vector_add" in proc.stdout and "GPU time" in proc.stdout
