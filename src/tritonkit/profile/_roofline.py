"""Roofline arithmetic: achieved throughput, % of the device's peak (and of a measured ceiling),
arithmetic intensity, and what bounds each kernel.

All figures are per launch: bytes and FLOPs summed over a kernel's launches divided by their
summed GPU time. Units: GB/s = 1e9 bytes/s, TFLOP/s = 1e12 FLOP/s, times in microseconds.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Mapping, Optional

from ._devices import DevicePeaks, occupancy
from ._plain import integer, mapping, number, numbers, optional_text, require_mapping, strings, text
from ._proton import KernelStats

#: FLOP width in bits -> the dtype whose peak applies (16-bit: bf16 and fp16 share a peak).
WIDTH_DTYPE = {8: "fp8", 16: "bf16", 32: "fp32", 64: "fp64"}

#: a kernel reaching less than this share of both roofs is "latency" bound (stalls, small grids).
LATENCY_SHARE = 0.3


@dataclass
class Ceiling:
    """What a device was measured to reach (``tritonkit calibrate``), next to its datasheet peaks.

    Attributes:
        bandwidth_gbps: a large device-to-device copy's GB/s (None: not measured).
        tflops: dtype -> a large matmul's TFLOP/s.
        source: how and when it was measured.
    """

    bandwidth_gbps: Optional[float] = None
    tflops: Dict[str, float] = field(default_factory=dict)
    source: str = ""

    def to_dict(self) -> dict:
        """Plain JSON data: ``{"bandwidth_gbps": GB/s or None, "tflops": {dtype: TFLOP/s}, "source": str}``."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Ceiling":
        """The inverse of :meth:`to_dict`; a missing or malformed field is unmeasured (None, or left
        out of ``tflops``); unknown keys are ignored.

        Raises:
            TypeError: ``d`` is not a mapping.
        """
        d = require_mapping(d, "a ceiling")
        return cls(number(d.get("bandwidth_gbps")), numbers(d.get("tflops")), text(d.get("source")))


@dataclass
class KernelReport:
    """One kernel (in one scope) with its roofline figures. Plain data; ``to_dict`` for JSON.

    Attributes:
        name / scope / launches: from the profile.
        total_ms: GPU time over all launches, ms; mean_us: per launch, us.
        host_us: host time per launch (the Python and driver work of one launch), us; None
            where not measured.
        bytes / flops: per launch (None where unknown); flops_dtype: the dtype whose peak applies.
        work_source: where bytes and FLOPs come from (``launch_metadata``, ``scope``, ``ncu``,
            ``interpreter``) or None.
        gbps / tflops: achieved, per launch.
        intensity: FLOPs per byte (None unless both are known).
        pct_peak_bw / pct_peak_flops: % of the datasheet peaks; pct_ceiling_bw /
            pct_ceiling_flops: % of the measured ceiling (None where not calibrated).
        bound: ``memory``, ``compute``, ``latency``, ``host`` or ``unknown``; bound_reason says why.
        resources: registers, spills, shared memory (bytes), num_warps, num_stages, occupancy
            (warps per SM as a share of the maximum) where the compiled kernel is known.
    """

    name: str
    scope: List[str]
    launches: int
    total_ms: float
    mean_us: float
    host_us: Optional[float] = None
    bytes: Optional[float] = None
    flops: Optional[float] = None
    flops_dtype: Optional[str] = None
    work_source: Optional[str] = None
    gbps: Optional[float] = None
    tflops: Optional[float] = None
    intensity: Optional[float] = None
    pct_peak_bw: Optional[float] = None
    pct_peak_flops: Optional[float] = None
    pct_ceiling_bw: Optional[float] = None
    pct_ceiling_flops: Optional[float] = None
    bound: str = "unknown"
    bound_reason: str = ""
    resources: Dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict:
        """Plain JSON data (the attributes above, in their units)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "KernelReport":
        """The inverse of :meth:`to_dict`. Missing or malformed fields take their defaults (``name``
        ``"?"``, no launches, 0 ms, figures None, bound ``unknown``); unknown keys are ignored.

        Raises:
            TypeError: ``d`` is not a mapping.
        """
        d = require_mapping(d, "a kernel report")
        figures = {k: number(d.get(k)) for k in ("host_us", "bytes", "flops", "gbps", "tflops", "intensity",
                                                 "pct_peak_bw", "pct_peak_flops", "pct_ceiling_bw",
                                                 "pct_ceiling_flops")}
        return cls(text(d.get("name"), "?"), strings(d.get("scope")), integer(d.get("launches")),
                   number(d.get("total_ms")) or 0.0, number(d.get("mean_us")) or 0.0,
                   flops_dtype=optional_text(d.get("flops_dtype")), work_source=optional_text(d.get("work_source")),
                   bound=text(d.get("bound"), "unknown"), bound_reason=text(d.get("bound_reason")),
                   resources=mapping(d.get("resources")), **figures)


def _pct(x: Optional[float], peak: Optional[float]) -> Optional[float]:
    return None if x is None or not peak else 100.0 * x / peak


def analyze_kernel(k: KernelStats, peaks: DevicePeaks, ceiling: Optional[Ceiling] = None,
                   host_us: Optional[float] = None) -> KernelReport:
    """The roofline figures of one kernel (see :class:`KernelReport`).

    The FLOP dtype is the widest-used width's (``flops16`` -> bf16/fp16 peak). 32-bit FLOPs are
    compared with the plain FP32 peak unless they exceed it, which only tf32 tensor cores can do;
    then with the TF32 peak.

    Args:
        k: the kernel's launches, GPU time (ns), bytes and FLOPs summed over its launches.
        peaks: the device's datasheet peaks (GB/s, TFLOP/s).
        ceiling: the measured ceiling, for the % of ceiling figures (None: not calibrated).
        host_us: host time per launch, us, where measured.

    Returns:
        A :class:`KernelReport`: per launch bytes and FLOPs, GB/s, TFLOP/s, % of peak, the bound.
    """
    launches = max(k.launches, 1)
    secs = k.time_ns / 1e9
    r = KernelReport(k.name, list(k.scope), k.launches, k.time_ns / 1e6, k.mean_us, host_us,
                     work_source=k.work_source)
    if k.bytes:
        r.bytes = k.bytes / launches
        r.gbps = k.bytes / secs / 1e9 if secs else None
    if k.flops:
        width = max(k.flops, key=lambda w: k.flops[w])
        total = sum(k.flops.values())
        r.flops = total / launches
        r.tflops = total / secs / 1e12 if secs else None
        dtype = WIDTH_DTYPE.get(width, "fp32")
        if dtype == "fp32" and r.tflops and peaks.peak_tflops("fp32") and r.tflops > peaks.peak_tflops("fp32"):
            dtype = "tf32"
        r.flops_dtype = dtype
    if r.bytes and r.flops:
        r.intensity = r.flops / r.bytes
    r.pct_peak_bw = _pct(r.gbps, peaks.bandwidth_gbps)
    r.pct_peak_flops = _pct(r.tflops, peaks.peak_tflops(r.flops_dtype) if r.flops_dtype else None)
    if ceiling is not None:
        r.pct_ceiling_bw = _pct(r.gbps, ceiling.bandwidth_gbps)
        r.pct_ceiling_flops = _pct(r.tflops, ceiling.tflops.get(r.flops_dtype) if r.flops_dtype else None)
    r.bound, r.bound_reason = classify(r, peaks)
    return r


def classify(r: KernelReport, peaks: DevicePeaks):
    """(bound, reason) for a kernel report (``r``'s GB/s, TFLOP/s and host us against ``peaks``).

    * ``memory`` / ``compute``: the roof the kernel is closer to, as a share of each peak (with both
      bytes and FLOPs, the arithmetic intensity against the ridge point says the same), when it
      reaches at least ``LATENCY_SHARE`` of it: the GPU is busy doing that work;
    * ``host``: near no roof (or its work unknown), and the host spends longer launching it than
      the GPU spends running it, so back-to-back launches leave the GPU idle;
    * ``latency``: below ``LATENCY_SHARE`` of both roofs: neither bandwidth nor compute is
      the limit (too few programs in flight, dependent loads, synchronization);
    * ``unknown``: no bytes or FLOPs (give the kernel a ``launch_metadata``, or use ``--counters``).
    """
    mem = (r.pct_peak_bw or 0.0) / 100.0 if r.gbps is not None else None
    comp = (r.pct_peak_flops or 0.0) / 100.0 if r.tflops is not None and r.pct_peak_flops is not None else None
    best = max((x for x in (mem, comp) if x is not None), default=None)
    host = r.host_us is not None and r.host_us > r.mean_us
    if host and (best is None or best < LATENCY_SHARE):
        return "host", (f"{r.host_us:.1f} us of host time per launch > {r.mean_us:.1f} us on the GPU, and the kernel "
                        f"is near no roof: back-to-back launches leave the GPU idle")
    if best is None:
        return "unknown", "no bytes or FLOPs known (give the kernel launch_metadata, or profile with --counters)"
    if best < LATENCY_SHARE:
        return "latency", (f"{best * 100:.0f}% of the nearer roof (< {LATENCY_SHARE * 100:.0f}%): "
                           f"neither bandwidth nor compute is the limit")
    if comp is None or (mem is not None and mem >= comp):
        ridge = peaks.ridge(r.flops_dtype) if r.flops_dtype else None
        extra = f"; intensity {r.intensity:.1f} < ridge {ridge:.0f} FLOP/B" if (r.intensity and ridge) else ""
        return "memory", f"{mem * 100:.0f}% of peak bandwidth{extra}"
    ridge = peaks.ridge(r.flops_dtype) if r.flops_dtype else None
    extra = f"; intensity {r.intensity:.0f} >= ridge {ridge:.0f} FLOP/B" if (r.intensity and ridge and
                                                                              r.intensity >= ridge) else ""
    return "compute", f"{comp * 100:.0f}% of peak {r.flops_dtype} compute{extra}"


def analyze(kernels: List[KernelStats], peaks: DevicePeaks, ceiling: Optional[Ceiling] = None,
            host_us: Optional[Dict[str, float]] = None,
            resources: Optional[Dict[str, Dict[str, float]]] = None) -> List[KernelReport]:
    """:func:`analyze_kernel` for every kernel, slowest (total GPU time) first.

    Args:
        kernels: the profile's kernels (:class:`~tritonkit.profile.KernelStats`).
        peaks / ceiling: as :func:`analyze_kernel`.
        host_us: kernel name -> host microseconds per launch, where measured.
        resources: kernel name -> the compiled kernel's ``registers``, ``spills``, ``shared``
            (bytes), ``num_warps``, ``num_stages``; the theoretical occupancy is added from them.

    Returns:
        One :class:`KernelReport` per kernel, by total GPU time (ms), slowest first.
    """
    host_us, resources = host_us or {}, resources or {}
    out = []
    for k in kernels:
        r = analyze_kernel(k, peaks, ceiling, host_us.get(k.name))
        res = dict(resources.get(k.name) or {})
        if "num_warps" in res:
            occ = occupancy(int(res.get("registers", 0)), int(res.get("shared", 0)), int(res["num_warps"]), peaks)
            if occ is not None:
                res["occupancy"] = occ
        r.resources = res
        out.append(r)
    return sorted(out, key=lambda r: -r.total_ms)
