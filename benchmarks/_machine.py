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


def run_parts(names: str, parts: dict, json_path: str, log) -> dict:
    """Run the benchmark parts named in ``names`` (comma-separated keys of ``parts``: name -> a
    function of ``log`` returning JSON-ready data), logging each part's seconds and rewriting
    ``json_path`` after each, so that a run cut short keeps the parts done. Returns the results,
    with the GPU machine under ``"machine"``.

    Raises:
        KeyError: a name that is not in ``parts``.
    """
    import json
    import time
    res = {"machine": gpu_machine()}
    for name in names.split(","):
        t0 = time.perf_counter()
        res[name] = parts[name](log)
        log(f"[{name}: {time.perf_counter() - t0:.1f} s]")
        with open(json_path, "w") as fh:
            json.dump(res, fh, indent=1, default=str)
    return res
