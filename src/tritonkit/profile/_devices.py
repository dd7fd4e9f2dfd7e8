"""Device peaks: datasheet figures per device and dtype, and a fallback from driver attributes.

Sources (dense figures, no structured sparsity):
* H100 SXM5 80GB: NVIDIA H100 Tensor Core GPU datasheet (2023): 3.35 TB/s HBM3; FP64 34, FP64
  tensor 67, FP32 67, TF32 tensor 494.7, BF16/FP16 tensor 989.4, FP8 tensor 1978.9 TFLOP/s,
  INT8 tensor 1978.9 TOPS.
* H100 PCIe 80GB: same datasheet: 2.0 TB/s; FP64 26, FP32 51, TF32 378, BF16/FP16 756, FP8 1513.
* H200 SXM 141GB: NVIDIA H200 datasheet (2024): 4.8 TB/s HBM3e; compute as H100 SXM.
* A100 SXM4 80GB / 40GB and A100 PCIe 80GB: NVIDIA A100 datasheet (2021): 2.039 / 1.555 /
  1.935 TB/s; FP64 9.7, FP64 tensor 19.5, FP32 19.5, TF32 156, BF16/FP16 312, INT8 624.
* L40S: NVIDIA L40S datasheet (2023): 864 GB/s; FP32 91.6, TF32 183, BF16/FP16 362.05,
  FP8 733 (dense).

For other devices, :func:`peaks_from_attributes` computes what the driver's attributes allow:
bandwidth = 2 x memory clock x bus width (DDR), FP32 = SMs x FP32 lanes per SM x 2 x SM clock
(64 lanes per SM on sm_80, 128 on sm_86 and later, from the CUDA programming guide's throughput
table); tensor-core peaks are then unknown (None) rather than guessed.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, Mapping, Optional

from ._plain import integer, number, numbers, require_mapping, text

#: dtype names used for compute peaks (what the FLOPs were done in).
DTYPES = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8")


@dataclass(frozen=True)
class DevicePeaks:
    """One device's peaks.

    Attributes:
        name: the device's name as the driver reports it (or the table's name).
        bandwidth_gbps: peak DRAM bandwidth, GB/s (1e9 bytes per second).
        tflops: dtype -> peak dense TFLOP/s (TOPS for int8); a dtype missing is unknown.
        source: where the figures come from (a datasheet, or ``driver attributes``).
        sms: streaming multiprocessors; sm_clock_mhz: the boost clock the figures assume.
        max_warps_per_sm / regs_per_sm / shared_per_sm (bytes) / max_blocks_per_sm: per-SM limits
            for occupancy (CUDA programming guide, "Compute capabilities" table: 64 warps, 64 Ki
            registers, 228 KiB shared memory on sm_90; 164 KiB on sm_80; 48 warps, 100 KiB on sm_89).
    """

    name: str
    bandwidth_gbps: float
    tflops: Dict[str, float] = field(default_factory=dict)
    source: str = ""
    sms: Optional[int] = None
    sm_clock_mhz: Optional[float] = None
    max_warps_per_sm: int = 64
    regs_per_sm: int = 65536
    shared_per_sm: int = 233472
    max_blocks_per_sm: int = 32

    def peak_tflops(self, dtype: str) -> Optional[float]:
        """The peak for ``dtype`` (see :data:`DTYPES`), or None where unknown."""
        return self.tflops.get(dtype)

    def ridge(self, dtype: str) -> Optional[float]:
        """The roofline's ridge point for ``dtype``: FLOPs per byte where compute and memory meet."""
        p = self.peak_tflops(dtype)
        return None if p is None or not self.bandwidth_gbps else p * 1e12 / (self.bandwidth_gbps * 1e9)

    def to_dict(self) -> dict:
        """Plain JSON data (bandwidth in GB/s, peaks in TFLOP/s, shared memory in bytes)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "DevicePeaks":
        """The inverse of :meth:`to_dict`. Missing or malformed fields take their defaults (``name``:
        ``"?"``; peaks that are not numbers are left out); unknown keys are ignored.

        Raises:
            TypeError: ``d`` is not a mapping.
            ValueError: ``bandwidth_gbps`` is missing or not a number (no peaks without it).
        """
        d = require_mapping(d, "device peaks")
        bandwidth = number(d.get("bandwidth_gbps"))
        if bandwidth is None:
            raise ValueError(f"device peaks need bandwidth_gbps (GB/s), got {d.get('bandwidth_gbps')!r}")
        limits = {k: integer(d.get(k), getattr(cls, k)) for k in ("max_warps_per_sm", "regs_per_sm", "shared_per_sm",
                                                                  "max_blocks_per_sm")}
        return cls(text(d.get("name"), "?"), bandwidth, numbers(d.get("tflops")), text(d.get("source")),
                   integer(d.get("sms"), None), number(d.get("sm_clock_mhz")), **limits)


_H100_SXM = {"fp64": 67.0, "fp32": 67.0, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1978.9, "int8": 1978.9}
_H100_PCIE = {"fp64": 51.0, "fp32": 51.0, "tf32": 378.0, "bf16": 756.0, "fp16": 756.0, "fp8": 1513.0, "int8": 1513.0}
_A100 = {"fp64": 19.5, "fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0, "int8": 624.0}
_L40S = {"fp32": 91.6, "tf32": 183.0, "bf16": 362.05, "fp16": 362.05, "fp8": 733.0, "int8": 733.0}

#: (name pattern, DevicePeaks) in match order; the pattern is searched in the driver's device name.
TABLE = [
    (r"H200", DevicePeaks("NVIDIA H200", 4800.0, _H100_SXM, "NVIDIA H200 datasheet (2024)", 132, 1980.0)),
    (r"H100.*PCIe", DevicePeaks("NVIDIA H100 PCIe", 2000.0, _H100_PCIE, "NVIDIA H100 datasheet (2023)", 114,
                                1755.0)),
    (r"H100", DevicePeaks("NVIDIA H100 SXM5 80GB", 3350.0, _H100_SXM, "NVIDIA H100 datasheet (2023)", 132, 1980.0)),
    (r"A100.*PCIe", DevicePeaks("NVIDIA A100 PCIe 80GB", 1935.0, _A100, "NVIDIA A100 datasheet (2021)", 108,
                                1410.0, shared_per_sm=167936)),
    (r"A100.*40GB", DevicePeaks("NVIDIA A100 SXM4 40GB", 1555.0, _A100, "NVIDIA A100 datasheet (2021)", 108,
                                1410.0, shared_per_sm=167936)),
    (r"A100", DevicePeaks("NVIDIA A100 SXM4 80GB", 2039.0, _A100, "NVIDIA A100 datasheet (2021)", 108, 1410.0,
                          shared_per_sm=167936)),
    (r"L40S", DevicePeaks("NVIDIA L40S", 864.0, _L40S, "NVIDIA L40S datasheet (2023)", 142, 2520.0,
                          max_warps_per_sm=48, shared_per_sm=102400, max_blocks_per_sm=24)),
]


def peaks_by_name(name: str) -> Optional[DevicePeaks]:
    """The datasheet peaks of a device named ``name`` (as ``torch.cuda.get_device_name`` gives it),
    or None for a device not in :data:`TABLE`."""
    for pattern, peaks in TABLE:
        if re.search(pattern, name, re.I):
            return peaks
    return None


def peaks_from_attributes(info: Mapping, name: str = "unknown device") -> DevicePeaks:
    """Peaks from driver attributes, as Proton records them per device.

    Args:
        info: ``arch`` (e.g. ``"90"``), ``num_sms``, ``clock_rate`` and ``memory_clock_rate``
            (kHz), ``bus_width`` (bits).

    Raises:
        ValueError: an attribute is missing or not a number.
    """
    try:
        arch = int(str(info["arch"])[:2])
        sms = int(info["num_sms"])
        sm_khz = float(info["clock_rate"])
        mem_khz = float(info["memory_clock_rate"])
        bus = int(info["bus_width"])
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"device attributes need arch, num_sms, clock_rate, memory_clock_rate, bus_width: {e}") \
            from e
    bandwidth = 2 * mem_khz * 1e3 * bus / 8 / 1e9
    lanes = 64 if arch == 80 else 128
    fp32 = sms * lanes * 2 * sm_khz * 1e3 / 1e12
    limits = {"shared_per_sm": 167936} if arch == 80 else \
        ({"max_warps_per_sm": 48, "shared_per_sm": 102400, "max_blocks_per_sm": 24} if arch in (86, 89) else {})
    return DevicePeaks(name, bandwidth, {"fp32": fp32}, "driver attributes (FP32 lanes x SMs x clock; "
                       "2 x memory clock x bus width)", sms, sm_khz / 1e3, **limits)


def identify(info: Mapping, name: Optional[str] = None) -> DevicePeaks:
    """The peaks for a device: by ``name`` in the datasheet table where it is there; else by its
    attributes (an sm_90 with 132 SMs and a 5120-bit bus is an H100 SXM, with a 6144-bit bus an
    H200); else computed from the attributes (:func:`peaks_from_attributes`).

    Args:
        info: the device's attributes as Proton records them (``arch``, ``num_sms``, clocks in kHz,
            ``bus_width`` in bits).
        name: the device's name, where known.

    Raises:
        ValueError: neither the name nor the attributes identify the device, and the attributes
            lack what :func:`peaks_from_attributes` needs.
    """
    if name:
        found = peaks_by_name(name)
        if found:
            return found
    try:
        arch, sms, bus = str(info.get("arch")), int(info.get("num_sms", 0)), int(info.get("bus_width", 0))
    except (TypeError, ValueError):
        arch, sms, bus = "", 0, 0
    if arch.startswith("90") and sms == 132:
        return peaks_by_name("H200" if bus >= 6144 else "H100 SXM")
    if arch.startswith("80") and sms == 108:
        return peaks_by_name("A100")
    return peaks_from_attributes(info, name or "unknown device")


def current_peaks() -> DevicePeaks:
    """The peaks of the current CUDA device.

    Raises:
        RuntimeError: no CUDA device is available.
    """
    import torch
    if not torch.cuda.is_available():
        raise RuntimeError("no CUDA device: device peaks need a GPU (use identify(...) with recorded attributes)")
    name = torch.cuda.get_device_name()
    found = peaks_by_name(name)
    if found:
        return found
    p = torch.cuda.get_device_properties(torch.cuda.current_device())
    from triton.runtime import driver
    props = driver.active.utils.get_device_properties(torch.cuda.current_device())
    info = {"arch": f"{p.major}{p.minor}", "num_sms": p.multi_processor_count,
            "clock_rate": props.get("sm_clock_rate"), "memory_clock_rate": props.get("mem_clock_rate"),
            "bus_width": props.get("mem_bus_width")}
    return peaks_from_attributes(info, name)


def occupancy(n_regs: int, shared_bytes: int, num_warps: int, peaks: DevicePeaks) -> Optional[float]:
    """Theoretical occupancy: resident warps per SM over the maximum, from a kernel's registers
    per thread, shared memory per block (bytes) and warps per block (the CUDA occupancy
    calculator's rules: registers allocated per warp in units of 256, a block fits only whole).

    Returns:
        a share in [0, 1], or None where ``num_warps`` is not positive.
    """
    if num_warps <= 0:
        return None
    regs_per_warp = -(-max(n_regs, 1) * 32 // 256) * 256
    by_regs = peaks.regs_per_sm // (regs_per_warp * num_warps)
    by_shared = peaks.shared_per_sm // shared_bytes if shared_bytes else peaks.max_blocks_per_sm
    by_warps = peaks.max_warps_per_sm // num_warps
    blocks = max(0, min(by_regs, by_shared, by_warps, peaks.max_blocks_per_sm))
    return blocks * num_warps / peaks.max_warps_per_sm
