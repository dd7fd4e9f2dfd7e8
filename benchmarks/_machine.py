"""What the benchmarks print about the machine they ran on (shared by the benchmark scripts)."""
from __future__ import annotations

import platform


def cpu_model() -> str:
    """The CPU's model name from ``/proc/cpuinfo`` (Linux), else what ``platform`` says."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return cpu


def gpu_machine() -> dict:
    """The GPU benchmarks' machine record: ``{"device", "torch", "triton", "date"}`` (CUDA device 0)."""
    import time

    import torch
    import triton
    return {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
            "date": time.strftime("%Y-%m-%d")}
