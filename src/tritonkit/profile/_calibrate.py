"""``tritonkit calibrate``: what this device actually reaches, next to its datasheet peaks.

Measured with ``triton.testing.do_bench`` (median of its repeats, L2 cleared between them):
bandwidth is a 1 GiB device-to-device copy (read + write = 2 GiB moved per copy); compute is
``torch.matmul`` at 8192^3 in bf16 and fp16, fp32 with TF32 off (``fp32``) and on (``tf32``).
The result is cached per device name in ``$TRITONKIT_CACHE_DIR/../calibrate.json`` (default
``~/.cache/tritonkit/calibrate.json``, ``{device name: Ceiling.to_dict()}``) and used by
``tritonkit profile`` for "% of ceiling"; ``tritonkit calibrate --json`` writes a
:class:`Calibration`.
"""
from __future__ import annotations

import datetime
import json
import os
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional

from ._devices import DevicePeaks
from ._plain import part, require_mapping, text
from ._roofline import Ceiling

ENV_DIR = "TRITONKIT_CACHE_DIR"


@dataclass
class Calibration:
    """One ``tritonkit calibrate`` run (its ``--json`` file): what the device reached, next to its
    datasheet peaks.

    Attributes:
        device: the CUDA device's name.
        peaks: its datasheet peaks (GB/s, TFLOP/s), or None where unknown.
        ceiling: what it was measured to reach (GB/s, TFLOP/s per dtype), or None.
    """

    device: str
    peaks: Optional[DevicePeaks] = None
    ceiling: Optional[Ceiling] = None

    def to_dict(self) -> dict:
        """Plain JSON data: ``{"device", "peaks", "ceiling"}`` (None where missing)."""
        return {"device": self.device, "peaks": self.peaks.to_dict() if self.peaks is not None else None,
                "ceiling": self.ceiling.to_dict() if self.ceiling is not None else None}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Calibration":
        """The inverse of :meth:`to_dict`; peaks or a ceiling that cannot be read are None.

        Raises:
            TypeError: ``d`` is not a mapping.
        """
        d = require_mapping(d, "a calibration")
        return cls(text(d.get("device"), "?"), part(DevicePeaks.from_dict, d.get("peaks")),
                   part(Ceiling.from_dict, d.get("ceiling")))


def calibration_path() -> str:
    """Where calibrations are kept: next to the tuning cache (``$TRITONKIT_CACHE_DIR``'s parent
    when set, else ``~/.cache/tritonkit``)."""
    base = os.environ.get(ENV_DIR)
    root = os.path.dirname(os.path.abspath(base)) if base else os.path.join(os.path.expanduser("~"), ".cache",
                                                                              "tritonkit")
    return os.path.join(root, "calibrate.json")


def measure(copy_bytes: int = 1 << 30, n: int = 8192, dtypes=("bf16", "fp16", "fp32", "tf32")) -> Ceiling:
    """Measure this device's bandwidth (GB/s) and matmul TFLOP/s per dtype.

    Args:
        copy_bytes: size of the copied buffer, bytes (2x this moves per copy).
        n: the matmul's M = N = K.
        dtypes: which matmuls to time (``bf16``, ``fp16``, ``fp32``, ``tf32``).

    Returns:
        The :class:`~tritonkit.profile.Ceiling` (GB/s, TFLOP/s per dtype, how it was measured).

    Raises:
        RuntimeError: no CUDA device.
    """
    import torch
    import triton.testing
    if not torch.cuda.is_available():
        raise RuntimeError("no CUDA device: calibrate measures the GPU it runs on")
    src = torch.empty(copy_bytes // 4, dtype=torch.float32, device="cuda")
    dst = torch.empty_like(src)
    ms = triton.testing.do_bench(lambda: dst.copy_(src), warmup=50, rep=300)
    bandwidth = 2 * copy_bytes / (ms * 1e-3) / 1e9
    tflops: Dict[str, float] = {}
    old = torch.backends.cuda.matmul.allow_tf32
    try:
        for dtype in dtypes:
            tdtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32,
                      "tf32": torch.float32}[dtype]
            torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
            a = torch.randn(n, n, device="cuda", dtype=tdtype)
            b = torch.randn(n, n, device="cuda", dtype=tdtype)
            ms = triton.testing.do_bench(lambda: torch.matmul(a, b), warmup=50, rep=300)
            tflops[dtype] = 2.0 * n ** 3 / (ms * 1e-3) / 1e12
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old
    stamp = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    return Ceiling(bandwidth, tflops, f"tritonkit calibrate on {torch.cuda.get_device_name()}, {stamp}: "
                                      f"{copy_bytes >> 20} MiB copy, torch.matmul {n}^3 (triton.testing.do_bench)")


def save(device: str, ceiling: Ceiling, path: Optional[str] = None) -> str:
    """Keep ``ceiling`` for ``device`` (other devices' entries are kept), written atomically.

    Args:
        device: the device's name (as ``torch.cuda.get_device_name`` gives it).
        ceiling: what it reached.
        path: the file (default :func:`calibration_path`); its directory is made.

    Returns:
        The file's path.

    Raises:
        OSError: the file cannot be written.
    """
    from .._io import atomic_write_text
    path = path or calibration_path()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    data = _read(path)
    data[device] = ceiling.to_dict()
    atomic_write_text(path, json.dumps(data, indent=1) + "\n")
    return path


def load(device: str, path: Optional[str] = None) -> Optional[Ceiling]:
    """The kept ceiling of ``device`` (:meth:`Ceiling.from_dict`), or None: never calibrated, or an
    unreadable file or entry. Never raises."""
    entry = _read(path or calibration_path()).get(device)
    if not isinstance(entry, dict):
        return None
    return Ceiling.from_dict(entry)


def _read(path: str) -> dict:
    try:
        with open(path) as fh:
            data = json.load(fh)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}
