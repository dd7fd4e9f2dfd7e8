"""``tritonkit.profile``: where the GPU time goes and how far each kernel is from the hardware's limit.

Public API (plain data in, plain data out; rendering lives in :mod:`tritonkit.report.profile`):

* :func:`read_proton` / :func:`parse_proton` — Proton's tree files without llnl-hatchet
  (:class:`ProtonProfile`, :class:`KernelStats`, :class:`ScopeNode`).
* :class:`DevicePeaks`, :func:`identify`, :func:`peaks_by_name`, :func:`peaks_from_attributes`,
  :func:`current_peaks` — datasheet peaks per device and dtype, or from driver attributes.
* :func:`analyze`, :class:`KernelReport`, :class:`Ceiling` — roofline figures and the bound.
* :class:`ProfileReport` — a whole profile (peaks, ceiling, kernels, scope tree, chart files):
  ``tritonkit profile --json``'s file, through ``to_dict`` / ``from_dict``.
* :func:`compare` — implementations of one operation side by side (ms, TFLOP/s, % of peak, speed-up).
* ``tritonkit calibrate`` (:mod:`._calibrate`, :class:`Calibration`) — measured ceilings kept per device.
* :func:`run_profiled`, :class:`HostTimer`, :class:`ChildMeta` — the profiled process of
  ``tritonkit profile`` (Proton around the script, host time per launch).
"""
from ._devices import DevicePeaks, current_peaks, identify, peaks_by_name, peaks_from_attributes
from ._proton import KernelStats, ProtonProfile, ScopeNode, parse_proton, read_proton
from ._roofline import Ceiling, KernelReport, analyze, analyze_kernel, classify
from ._compare import CompareRow, Comparison, compare
from ._devices import occupancy
from ._child import ChildMeta, HostTimer, run_profiled
from ._report import ProfileReport
from ._calibrate import Calibration

__all__ = ["DevicePeaks", "current_peaks", "identify", "peaks_by_name", "peaks_from_attributes", "KernelStats",
           "ProtonProfile", "ScopeNode", "parse_proton", "read_proton", "Ceiling", "KernelReport", "analyze",
           "analyze_kernel", "classify", "compare", "Comparison", "CompareRow", "occupancy", "ChildMeta", "HostTimer",
           "run_profiled", "ProfileReport", "Calibration"]
