"""``tritonkit calibrate [--json FILE]``: measure this GPU's bandwidth and matmul TFLOP/s (the
ceilings ``tritonkit profile`` compares with) and keep them. Exit status: 0 done; 2 no GPU."""
from __future__ import annotations

import argparse
import json

from . import _status
from ._console import make_console
from ._status import BadUsage
from ._target import writable_path

NAME = "calibrate"
ORDER = 40


def add_parser(sub) -> argparse.ArgumentParser:
    """Add ``calibrate`` to the ``tritonkit`` subparsers."""
    p = sub.add_parser("calibrate", help="measure this GPU's bandwidth and matmul TFLOP/s (the ceilings "
                                         "tritonkit profile compares with)",
                       description="Time a 1 GiB device-to-device copy and torch.matmul at 8192^3 in bf16, fp16, "
                                   "fp32 and tf32 with triton.testing.do_bench, show them next to the datasheet "
                                   "peaks, and keep them for tritonkit profile's % of ceiling.")
    p.add_argument("--json", metavar="FILE", help="also write the measurement as JSON")
    return p


def run(args, console=None) -> int:
    """Run ``tritonkit calibrate``; returns the exit status.

    Raises:
        BadUsage: no CUDA GPU here, or a ``--json`` path whose directory does not exist.
    """
    from ..profile import Calibration, current_peaks
    from ..profile._calibrate import measure, save
    from ..report.profile import ceiling_table
    console = console or make_console()
    if args.json:
        writable_path(args.json, "--json")
    try:
        import torch
        gpu = torch.cuda.is_available()
    except ImportError:  # pragma: no cover
        gpu = False
    if not gpu:
        raise BadUsage("no CUDA GPU here: calibrate measures the GPU it runs on")
    ceiling = measure()
    peaks = current_peaks()
    path = save(torch.cuda.get_device_name(), ceiling)
    if args.json:  # before printing: a reader that closes stdout early loses nothing
        from .._io import atomic_write_text
        atomic_write_text(args.json, json.dumps(Calibration(torch.cuda.get_device_name(), peaks, ceiling).to_dict(),
                                                indent=1) + "\n")
    console.print(ceiling_table(ceiling, peaks))
    console.print(f"kept in {path}; tritonkit profile now shows % of these ceilings")
    return _status.OK
