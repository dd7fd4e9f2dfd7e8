"""Triton's driver on a machine without a GPU, while a check session is active.

Host code asks Triton's driver for the device before it launches anything: every Triton tutorial
starts with ``DEVICE = triton.runtime.driver.active.get_active_torch_device()``, and the fused
softmax tutorial sizes its grid from ``driver.active.utils.get_device_properties(...)``. Without a
GPU, Triton has no active driver and those lines raise ("0 active drivers"), so the script never
reaches its kernels. Under check, where no driver is active, :class:`CPUDriver` answers instead:
the torch device is the CPU, and the device properties are those of :data:`DEVICE_MODEL` (an H100
by default; ``TRITONKIT_DEVICE_MODEL=a100`` picks another), so that host code sizes its launches as
it would for that GPU. Where a GPU driver is active, nothing is replaced.
"""
from __future__ import annotations

import os
from typing import Dict, Optional

#: device properties as Triton's CUDA driver reports them (``utils.get_device_properties``):
#: shared memory per block (opt-in maximum, bytes), registers per block, SMs, warp size, SM and
#: memory clocks (kHz) and the memory bus width (bits). Figures: NVIDIA's CUDA C++ Programming
#: Guide (compute capability 9.0 and 8.0 limits) and the H100 SXM5 / A100 SXM4 datasheets.
DEVICE_MODELS: Dict[str, Dict[str, int]] = {
    "h100": {"max_shared_mem": 232448, "max_num_regs": 65536, "multiprocessor_count": 132, "warpSize": 32,
             "sm_clock_rate": 1980000, "mem_clock_rate": 2619000, "mem_bus_width": 5120},
    "a100": {"max_shared_mem": 166912, "max_num_regs": 65536, "multiprocessor_count": 108, "warpSize": 32,
             "sm_clock_rate": 1410000, "mem_clock_rate": 1593000, "mem_bus_width": 5120},
}
#: compute capability of each model (what ``get_current_target`` reports)
CAPABILITY = {"h100": 90, "a100": 80}
ENV_MODEL = "TRITONKIT_DEVICE_MODEL"


def device_model() -> str:
    """The device model named by ``TRITONKIT_DEVICE_MODEL`` (default ``h100``).

    Raises:
        ValueError: an unknown model name (the message lists the known ones).
    """
    name = os.environ.get(ENV_MODEL, "h100").strip().lower()
    if name not in DEVICE_MODELS:
        raise ValueError(f"{ENV_MODEL}={name!r}: unknown device model; choose from {', '.join(DEVICE_MODELS)}")
    return name


class _Utils:
    def __init__(self, model: str) -> None:
        self.model = model

    def get_device_properties(self, device=0) -> Dict[str, int]:
        return dict(DEVICE_MODELS[self.model])


class CPUDriver:
    """The answers Triton's driver gives host code, for a checked run without a GPU (see the module):
    ``get_active_torch_device()`` is ``torch.device("cpu")``; ``utils.get_device_properties(d)`` the
    model's dict (bytes, counts, kHz, bits; see :data:`DEVICE_MODELS`); ``get_current_device()``
    and ``get_current_stream()`` 0; ``get_current_target()`` a CUDA ``GPUTarget`` of the model's
    compute capability, warp size 32; ``get_benchmarker()`` ``triton.testing.do_bench``; the
    benchmark cache a 256 MiB CPU int32 tensor. None of them raises.

    Args:
        model: a key of :data:`DEVICE_MODELS`.
    """

    def __init__(self, model: str = "h100") -> None:
        self.model = model
        self.utils = _Utils(model)

    @staticmethod
    def is_active() -> bool:
        return True

    def get_active_torch_device(self):
        import torch
        return torch.device("cpu")

    def get_current_device(self) -> int:
        return 0

    def set_current_device(self, device) -> None:
        pass

    def get_current_stream(self, device=None) -> int:
        return 0

    def get_current_target(self):
        from triton.backends.compiler import GPUTarget
        return GPUTarget("cuda", CAPABILITY[self.model], 32)

    def get_device_interface(self):
        import torch
        return torch.cpu

    def get_benchmarker(self):
        from triton.testing import do_bench
        return do_bench

    def get_empty_cache_for_benchmark(self):
        import torch
        return torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int)

    def clear_cache(self, cache) -> None:
        cache.zero_()


_installed: Optional[CPUDriver] = None


def install() -> None:
    """Make :class:`CPUDriver` Triton's active driver where no GPU driver is active (a no-op where
    one is, or where one was set by the program).

    Raises:
        ValueError: ``TRITONKIT_DEVICE_MODEL`` names no known model.
    """
    global _installed
    config = _config()
    if getattr(config, "_active", None) is not None:
        return
    try:
        config.default
        return
    except RuntimeError:  # "0 active drivers": no GPU here
        pass
    _installed = CPUDriver(device_model())
    config._active = _installed


def _config():
    """Triton's ``DriverConfig`` (``triton.runtime.driver.driver``)."""
    import importlib
    return importlib.import_module("triton.runtime.driver").driver


def uninstall() -> None:
    """Undo :func:`install` (the driver is left alone if the program set another meanwhile)."""
    global _installed
    config = _config()
    if _installed is not None and getattr(config, "_active", None) is _installed:
        config._active = None
    _installed = None
