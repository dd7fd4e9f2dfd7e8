"""The page's profile: the kernel table (slowest first, the slowest few in the summary), the peaks
and measured ceiling in one line each, and the roofline and time-breakdown charts, from the
profile step's :class:`~tritonkit.profile.ProfileReport`."""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..charts import roofline_chart, time_breakdown_chart
from ..names import short_name
from ._format import chart, css, fmt, num
from ._view import Chart, KernelRow, Page

if TYPE_CHECKING:  # pragma: no cover - types only
    from ...profile import KernelReport, ProfileReport

_BOUNDS = ("memory", "compute", "latency", "host", "unknown")
_SLOWEST = 5


def _kernel_row(k: "KernelReport", total_ms: float) -> KernelRow:
    bound = k.bound or "unknown"
    if bound == "compute" or k.pct_peak_bw is None:
        pct, ceil = k.pct_peak_flops, k.pct_ceiling_flops
        what = f"{k.flops_dtype or ''} FLOP/s".strip()
    else:
        pct, ceil = k.pct_peak_bw, k.pct_ceiling_bw
        what = "bandwidth"
    pct_s = "-" if num(pct) is None else f"{pct:.0f}%"
    res = k.resources
    res_parts = []
    if res.get("registers") is not None:
        res_parts.append(f"{res['registers']} regs" + (f" ({res['spills']} spills)" if res.get("spills") else ""))
    if num(res.get("shared")) is not None:
        res_parts.append(f"{res['shared'] / 1024:.0f} KiB smem" if res["shared"] else "no smem")
    if res.get("num_warps") is not None:
        res_parts.append(f"{res['num_warps']} warps" +
                         (f" x {res['num_stages']} stages" if res.get("num_stages") is not None else ""))
    if num(res.get("occupancy")) is not None:
        res_parts.append(f"occupancy {res['occupancy'] * 100:.0f}%")
    flops = fmt(k.tflops, ".3g")
    if k.flops_dtype and flops != "-":
        flops += f" {k.flops_dtype}"
    return KernelRow(
        name=k.name, label=short_name(k.name, 56), scope="/".join(k.scope) or "-",
        launches=fmt(k.launches, ",.0f"), total_ms=fmt(k.total_ms, ".4g"),
        share=f"{100 * k.total_ms / total_ms:.1f}%" if total_ms > 0 else "-", mean_us=fmt(k.mean_us, ".4g"),
        host_us=fmt(k.host_us, ".3g"), gbps=fmt(k.gbps, ".4g"), tflops=flops,
        pct_peak_bw=fmt(k.pct_peak_bw, ".0f", "%"), pct_peak_flops=fmt(k.pct_peak_flops, ".0f", "%"),
        pct_ceiling=fmt(ceil, ".0f", "%"), pct=pct_s, pct_what=what if pct_s != "-" else "", bound=bound,
        bound_css=css(bound, _BOUNDS, "unknown"), bound_reason=k.bound_reason, work_source=k.work_source or "",
        resources=", ".join(res_parts) or "-", total_ms_value=k.total_ms)


def profile_section(page: Page, prof: "ProfileReport") -> None:
    """Fill ``page``'s kernel rows (times in ms and us, GB/s, TFLOP/s, % of peak), peaks and ceiling
    lines, charts (drawn here; one that cannot be drawn says why) and chart files from ``prof``."""
    kernels = sorted(prof.kernels, key=lambda k: -k.total_ms)
    total = sum(k.total_ms for k in kernels)
    page.total_ms = fmt(total, ".4g") if kernels else ""
    page.kernels = [_kernel_row(k, total) for k in kernels]
    page.slowest = page.kernels[:_SLOWEST]
    page.has_scope = any(k.scope != "-" for k in page.kernels)
    peaks, ceiling = prof.peaks, prof.ceiling
    if peaks is not None:
        tf = ", ".join(f"{k} {v:g}" for k, v in peaks.tflops.items())
        page.peaks = (f"{peaks.name}: {fmt(peaks.bandwidth_gbps, '.0f')} GB/s" + (f", {tf} TFLOP/s" if tf else "")
                      + (f" ({peaks.source})" if peaks.source else ""))
    if ceiling is not None:
        tf = ", ".join(f"{k} {v:g}" for k, v in ceiling.tflops.items())
        page.ceiling = (f"measured {fmt(ceiling.bandwidth_gbps, '.0f')} GB/s" + (f", {tf} TFLOP/s" if tf else "")
                        + (f" ({ceiling.source})" if ceiling.source else ""))
    if not kernels:
        page.roofline = Chart("Roofline", error="the profile has no kernels")
    elif peaks is None:
        page.roofline = Chart("Roofline", error="the profile has no device peaks: no roofline to draw")
    else:
        page.roofline = chart("Roofline", "roofline: arithmetic intensity (FLOP/byte) against TFLOP/s, one point "
                                          "per kernel", lambda: roofline_chart(kernels, peaks, ceiling))
    if kernels:
        page.breakdown = chart("GPU time by kernel", "GPU time per kernel, slowest first",
                               lambda: time_breakdown_chart(kernels))
    page.profile_files = list(prof.charts)
