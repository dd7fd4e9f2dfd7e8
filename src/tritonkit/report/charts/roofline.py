"""The roofline chart of ``tritonkit profile``'s kernels: data first (:func:`roofline_data`: roofs,
ridges, kernel points and off-roof kernels as a :class:`RooflineData`), then the drawing
(:func:`draw_roofline`); :func:`roofline_chart` does both.

Units: arithmetic intensity in FLOP/byte, throughput in TFLOP/s (1e12 FLOP/s), bandwidth in GB/s
(1e9 bytes/s), times in ms. Computing the data needs no matplotlib; drawing does
(``tritonkit[report]``).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Dict, Iterable, List, Optional, Tuple

from ._figure import BOUND_COLORS, bound_legend, finite, new_figure, tex_safe, unique_labels

if TYPE_CHECKING:  # pragma: no cover - types only
    from matplotlib.figure import Figure

__all__ = ["KernelPoint", "NO_WORK_NOTE", "OffRoofKernel", "Ridge", "Roof", "RooflineData", "draw_roofline",
           "roofline_chart", "roofline_data"]

_MEMORY_COLOR = "#222222"
_DTYPE_COLORS = {"fp8": "#9467bd", "int8": "#9467bd", "bf16": "#8c1c13", "fp16": "#8c1c13", "tf32": "#8c564b",
                 "fp32": "#17becf", "fp64": "#bcbd22"}
#: the note a roofline carries when no kernel has bytes or FLOPs.
NO_WORK_NOTE = ("no kernel has bytes or FLOPs: give the kernels launch_metadata (bytes, flops16, ...) "
                "or profile with --counters")


@dataclass
class Roof:
    """One roof of the roofline, as a polyline on log-log axes.

    Attributes:
        kind: ``memory`` (y = intensity x bandwidth) or ``compute`` (flat at a dtype's peak).
        label: the legend text, with the peak (``HBM peak 3350 GB/s``, ``bf16/fp16 peak 989 TFLOP/s``).
        value: the peak: GB/s for a memory roof, TFLOP/s for a compute roof.
        points: (intensity FLOP/byte, TFLOP/s) vertices, left to right.
        dtype: the compute dtype (None for a memory roof).
        measured: True for a measured ceiling (``tritonkit calibrate``), drawn dashed.
    """

    kind: str
    label: str
    value: float
    points: List[Tuple[float, float]]
    dtype: Optional[str] = None
    measured: bool = False


@dataclass
class Ridge:
    """Where the memory roof meets a compute roof: intensity FLOP/byte, TFLOP/s, for ``dtype``."""

    dtype: str
    intensity: float
    tflops: float
    measured: bool = False


@dataclass
class KernelPoint:
    """A kernel with both bytes and FLOPs: a point on the roofline.

    Attributes:
        label: short unique label; name / scope: as profiled.
        intensity: FLOP/byte; tflops: achieved TFLOP/s; gbps: achieved GB/s.
        dtype: the FLOP dtype; bound: the report's bound (the point's colour).
        total_ms: GPU time over all launches, ms.
        pct_peak_flops: % of the dtype's datasheet peak; pct_roof: % of the datasheet roof at this
            intensity (min of memory and compute roofs), None where the dtype's peak is unknown.
    """

    label: str
    name: str
    scope: List[str]
    intensity: float
    tflops: float
    gbps: Optional[float]
    dtype: Optional[str]
    bound: str
    total_ms: float
    pct_peak_flops: Optional[float] = None
    pct_roof: Optional[float] = None


@dataclass
class OffRoofKernel:
    """A kernel with bytes or FLOPs but not both (or no GPU time): shown as a bar of % of peak.

    Attributes:
        label / name / scope / bound / total_ms: as :class:`KernelPoint`.
        metric: ``bandwidth`` (value in GB/s) or ``compute`` (value in TFLOP/s of ``dtype``).
        value: achieved GB/s or TFLOP/s (None without GPU time).
        unit: ``GB/s`` or ``TFLOP/s``.
        pct_peak: % of the datasheet peak (None where unknown); pct_ceiling: % of the measured ceiling.
    """

    label: str
    name: str
    scope: List[str]
    bound: str
    total_ms: float
    metric: str
    value: Optional[float]
    unit: str
    dtype: Optional[str] = None
    pct_peak: Optional[float] = None
    pct_ceiling: Optional[float] = None


@dataclass
class RooflineData:
    """Everything :func:`draw_roofline` draws, as numbers. ``to_dict`` for JSON.

    Attributes:
        device: the peaks' device name; bandwidth_gbps: its datasheet bandwidth, GB/s;
            peaks_source: where the peaks come from.
        dtypes: the FLOP dtypes among the kernels, highest peak first.
        roofs / ridges: datasheet ones, then the measured ceiling's (``measured=True``).
        points: kernels with bytes and FLOPs; off_roof: kernels with only one of them.
        without_work: how many kernels have neither (not drawn).
        x_range / y_range: the axes' limits: FLOP/byte and TFLOP/s.
        notes: what the chart should say (no work at all, kernels left out, unknown peaks).
    """

    device: str
    bandwidth_gbps: float
    peaks_source: str = ""
    dtypes: List[str] = field(default_factory=list)
    roofs: List[Roof] = field(default_factory=list)
    ridges: List[Ridge] = field(default_factory=list)
    points: List[KernelPoint] = field(default_factory=list)
    off_roof: List[OffRoofKernel] = field(default_factory=list)
    without_work: int = 0
    x_range: Tuple[float, float] = (0.1, 1000.0)
    y_range: Tuple[float, float] = (0.1, 1000.0)
    notes: List[str] = field(default_factory=list)
    compute_peaks: Dict[str, float] = field(default_factory=dict)

    def attainable(self, intensity: float, dtype: Optional[str] = None) -> float:
        """The datasheet roofline at ``intensity``: min(intensity x bandwidth, the dtype's peak).

        Args:
            intensity: FLOP/byte (> 0).
            dtype: the compute dtype; None (or one without a known peak): the memory roof alone.

        Returns:
            TFLOP/s.

        Raises:
            ValueError: ``intensity`` <= 0.
        """
        if not intensity > 0:
            raise ValueError(f"intensity must be > 0 FLOP/byte, got {intensity}")
        mem = intensity * self.bandwidth_gbps / 1e3
        peak = self.compute_peaks.get(dtype) if dtype else None
        return mem if peak is None else min(mem, peak)

    def to_dict(self) -> dict:
        """Plain JSON data (tuples as lists)."""
        return asdict(self)


def _dtype_label(dtype: str, tflops: Dict[str, float]) -> str:
    if dtype in ("bf16", "fp16") and tflops.get("bf16") is not None and tflops.get("bf16") == tflops.get("fp16"):
        return "bf16/fp16"
    return dtype


def _decade_floor(x: float) -> float:
    return 10.0 ** math.floor(math.log10(x))


def _decade_ceil(x: float) -> float:
    return 10.0 ** math.ceil(math.log10(x))


def roofline_data(reports: Iterable, peaks, ceiling=None) -> RooflineData:
    """The roofline as numbers: roofs, ridge points, kernel points and off-roof kernels.

    The memory roof is TFLOP/s = intensity (FLOP/byte) x bandwidth (GB/s) / 1000, drawn up to the
    highest ridge among the kernels' dtypes; each dtype among the kernels' FLOPs gets a flat compute
    roof at its peak from its ridge (``peaks.ridge(dtype)``) rightwards. A measured ``ceiling`` adds
    the same roofs at its bandwidth and TFLOP/s (``measured=True``); where it lacks a bandwidth the
    datasheet's is used for its ridges.

    Args:
        reports: :class:`~tritonkit.profile.KernelReport` objects (anything with their attributes).
        peaks: :class:`~tritonkit.profile.DevicePeaks` (GB/s and TFLOP/s per dtype).
        ceiling: a :class:`~tritonkit.profile.Ceiling`, or None.

    Returns:
        A :class:`RooflineData`. Kernels with bytes and FLOPs and GPU time are ``points``; with only
        bytes or only FLOPs (or no GPU time), ``off_roof``; with neither, counted in ``without_work``.

    Raises:
        ValueError: ``peaks.bandwidth_gbps`` is not a positive number.
    """
    bw = finite(getattr(peaks, "bandwidth_gbps", None))
    if bw is None or bw <= 0:
        raise ValueError(f"peaks need a positive bandwidth_gbps (GB/s), got {getattr(peaks, 'bandwidth_gbps', None)!r}")
    peak_tflops: Dict[str, float] = {d: float(v) for d, v in (getattr(peaks, "tflops", None) or {}).items()
                                     if finite(v) and v > 0}
    data = RooflineData(getattr(peaks, "name", "device"), bw, getattr(peaks, "source", ""))
    reports = list(reports)
    with_work = [r for r in reports if (getattr(r, "bytes", None) or getattr(r, "flops", None))]
    data.without_work = len(reports) - len(with_work)
    labels = unique_labels([(r.name, list(getattr(r, "scope", []) or [])) for r in with_work])

    present = []
    for r in with_work:
        if r.flops and r.flops_dtype and r.flops_dtype not in present:
            present.append(r.flops_dtype)
    missing = [d for d in present if d not in peak_tflops]
    data.dtypes = sorted((d for d in present if d in peak_tflops), key=lambda d: -peak_tflops[d]) + missing
    data.compute_peaks = {d: peak_tflops[d] for d in present if d in peak_tflops}

    for r, label in zip(with_work, labels):
        scope = list(getattr(r, "scope", []) or [])
        intensity, tflops, gbps = finite(r.intensity), finite(r.tflops), finite(r.gbps)
        if r.bytes and r.flops and intensity and tflops:
            p = KernelPoint(label, r.name, scope, intensity, tflops, gbps, r.flops_dtype, r.bound, r.total_ms,
                            finite(r.pct_peak_flops))
            p.pct_roof = 100.0 * tflops / data.attainable(intensity, r.flops_dtype) \
                if r.flops_dtype in data.compute_peaks else None
            data.points.append(p)
        elif r.flops and (tflops is not None or not r.bytes):
            data.off_roof.append(OffRoofKernel(label, r.name, scope, r.bound, r.total_ms, "compute", tflops,
                                               "TFLOP/s", r.flops_dtype, finite(r.pct_peak_flops),
                                               finite(getattr(r, "pct_ceiling_flops", None))))
        else:
            data.off_roof.append(OffRoofKernel(label, r.name, scope, r.bound, r.total_ms, "bandwidth", gbps, "GB/s",
                                               None, finite(r.pct_peak_bw), finite(getattr(r, "pct_ceiling_bw", None))))

    # axes: whole decades around the kernels, the ridges and intensity 1
    ridges = {d: v * 1e3 / bw for d, v in data.compute_peaks.items()}  # = peaks.ridge(d), FLOP/byte
    c_bw = finite(getattr(ceiling, "bandwidth_gbps", None)) if ceiling is not None else None
    c_bw = c_bw if c_bw and c_bw > 0 else None
    c_tflops = {d: float(v) for d, v in (getattr(ceiling, "tflops", None) or {}).items()
                if d in present and finite(v) and v > 0} if ceiling is not None else {}
    c_ridges = {d: v * 1e3 / (c_bw or bw) for d, v in c_tflops.items()}
    xs = [1.0] + [p.intensity for p in data.points] + list(ridges.values()) + list(c_ridges.values())
    x_lo, x_hi = _decade_floor(min(xs)) / 10, _decade_ceil(max(xs)) * 10
    data.x_range = (x_lo, x_hi)

    # datasheet roofs
    x_mem_end = max(ridges.values()) if ridges else x_hi
    data.roofs.append(Roof("memory", f"HBM peak {bw:.0f} GB/s", bw, [(x_lo, x_lo * bw / 1e3),
                                                                      (x_mem_end, x_mem_end * bw / 1e3)]))
    seen_labels = set()
    for d in data.dtypes:
        if d not in data.compute_peaks:
            data.notes.append(f"no {d} peak known for {data.device}: its kernels have no compute roof")
            continue
        lab = _dtype_label(d, peak_tflops)
        if lab in seen_labels:
            continue
        seen_labels.add(lab)
        v = data.compute_peaks[d]
        data.roofs.append(Roof("compute", f"{lab} peak {v:.4g} TFLOP/s", v, [(ridges[d], v), (x_hi, v)], d))
        data.ridges.append(Ridge(d, ridges[d], v))
    # measured ceiling
    if c_bw:
        ends = list(c_ridges.values()) or [v * 1e3 / c_bw for v in data.compute_peaks.values()]
        x_end = min(max(ends), x_hi) if ends else x_hi
        data.roofs.append(Roof("memory", f"measured {c_bw:.0f} GB/s", c_bw, [(x_lo, x_lo * c_bw / 1e3),
                                                                            (x_end, x_end * c_bw / 1e3)],
                               measured=True))
    for d, v in sorted(c_tflops.items(), key=lambda kv: -kv[1]):
        data.roofs.append(Roof("compute", f"measured {d} {v:.4g} TFLOP/s", v, [(c_ridges[d], v), (x_hi, v)], d,
                               measured=True))
        data.ridges.append(Ridge(d, c_ridges[d], v, measured=True))

    ys = [y for roof in data.roofs for _, y in roof.points if y > 0] + [p.tflops for p in data.points]
    data.y_range = (_decade_floor(min(ys)), _decade_ceil(max(ys) * 1.5))

    if not with_work:
        data.notes.insert(0, NO_WORK_NOTE)
    elif not data.points:
        data.notes.insert(0, "no kernel has both bytes and FLOPs: the bytes-only and FLOPs-only kernels are "
                             "on the right")
    if data.without_work and with_work:
        data.notes.append(f"{data.without_work} kernel(s) without bytes or FLOPs are not shown")
    return data


def draw_roofline(data: RooflineData, title: Optional[str] = None) -> "Figure":
    """Draw a :class:`RooflineData`: log-log roofline on the left, off-roof kernels' % of peak on the right.

    Args:
        data: from :func:`roofline_data`.
        title: the figure's title (default: ``Roofline: <device>``).

    Returns:
        A :class:`matplotlib.figure.Figure` on an Agg canvas (no pyplot state).

    Raises:
        MissingDependency: matplotlib is not installed (``pip install 'tritonkit[report]'``).
    """
    n_off = len(data.off_roof)
    if n_off:
        fig = new_figure(15.0, max(6.5, 0.34 * n_off + 2.0))
        gs = fig.add_gridspec(1, 2, width_ratios=[2.0, 1.0])
        ax = fig.add_subplot(gs[0])
        bx = fig.add_subplot(gs[1])
    else:
        fig = new_figure(10.0, 6.5)
        ax, bx = fig.add_subplot(), None
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(*data.x_range)
    ax.set_ylim(*data.y_range)
    x_lo, y_lo = data.x_range[0], data.y_range[0]

    for roof in data.roofs:
        xs, ys = zip(*roof.points)
        color = _MEMORY_COLOR if roof.kind == "memory" else _DTYPE_COLORS.get(roof.dtype or "", "#555555")
        ax.plot(xs, ys, color=color, lw=1.3 if roof.measured else 2.2, ls="--" if roof.measured else "-",
                alpha=0.8 if roof.measured else 1.0, label=roof.label, zorder=2)
        if roof.measured:  # named in the legend only: inline they would crowd the kernels near the roofs
            continue
        if roof.kind == "compute":
            ax.annotate(roof.label, xy=roof.points[-1], xytext=(-4, 3), textcoords="offset points", ha="right",
                        va="bottom", fontsize=8, color=color)
        else:  # below and right of the rising line, where nothing else is drawn
            x0 = roof.points[0][0] * 2
            ax.annotate(roof.label, xy=(x0, x0 * roof.value / 1e3), xytext=(8, -8), textcoords="offset points",
                        ha="left", va="top", fontsize=8, color=color)
    for r in data.ridges:
        color = _DTYPE_COLORS.get(r.dtype, "#555555")
        ax.plot([r.intensity, r.intensity], [y_lo, r.tflops], color=color, lw=0.8, ls=":", zorder=1)
        ax.plot([r.intensity], [r.tflops], marker="o", ms=6, mfc="white" if r.measured else color, mec=color,
                zorder=3)
        if not r.measured:
            ax.annotate(f"ridge {r.intensity:.0f} FLOP/B", xy=(r.intensity, y_lo), xytext=(3, 4),
                        textcoords="offset points", rotation=90, ha="left", va="bottom", fontsize=7, color=color)

    total_ms = sum(p.total_ms for p in data.points) or 1.0
    for p in data.points:
        color = BOUND_COLORS.get(p.bound, BOUND_COLORS["unknown"])
        size = 30 + 170 * math.sqrt(max(p.total_ms, 0.0) / total_ms)
        ax.scatter([p.intensity], [p.tflops], s=size, color=color, edgecolors="black", linewidths=0.6, zorder=4)
        pct = f" ({p.pct_roof:.0f}% of roof)" if p.pct_roof is not None else ""
        right_half = math.log(p.intensity / x_lo) > 0.55 * math.log(data.x_range[1] / x_lo)
        ax.annotate(tex_safe(p.label) + pct, xy=(p.intensity, p.tflops), xytext=(-7 if right_half else 7, -7),
                    textcoords="offset points", ha="right" if right_half else "left", va="top", fontsize=7.5,
                    zorder=5,
                    bbox=dict(boxstyle="round,pad=0.15", fc="white", ec="none", alpha=0.75))

    if data.notes:
        main = data.notes[0] if not data.points else None
        rest = data.notes[1:] if main else data.notes
        if main:
            ax.text(0.5, 0.5, main, transform=ax.transAxes, ha="center", va="center", fontsize=10, wrap=True,
                    bbox=dict(boxstyle="round", fc="#fff8dc", ec="#b8860b"), zorder=6)
        if rest:
            ax.text(0.01, 0.99, "\n".join(rest), transform=ax.transAxes, ha="left", va="top", fontsize=7,
                    color="#555555")

    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("TFLOP/s")
    ax.grid(True, which="major", alpha=0.35)
    ax.grid(True, which="minor", alpha=0.12)
    handles, _ = ax.get_legend_handles_labels()
    handles += bound_legend([p.bound for p in data.points] + [k.bound for k in data.off_roof])
    ax.legend(handles=handles, loc="lower right", fontsize=7, framealpha=0.9)
    ax.set_title(f"{data.device} ({data.peaks_source})" if data.peaks_source else data.device, fontsize=9)
    fig.suptitle(title or f"Roofline: {data.device}", fontsize=12)

    if bx is not None:
        _draw_off_roof(bx, data.off_roof)
    return fig


def _draw_off_roof(bx, kernels: List[OffRoofKernel]) -> None:
    ys = list(range(len(kernels)))
    pcts = [k.pct_peak or 0.0 for k in kernels]
    bx.barh(ys, pcts, color=[BOUND_COLORS.get(k.bound, BOUND_COLORS["unknown"]) for k in kernels], height=0.6)
    bx.set_yticks(ys, [tex_safe(k.label) for k in kernels], fontsize=7.5)
    bx.set_ylim(max(len(kernels), 8) - 0.5, -0.5)  # top to bottom; a few bars stay thin
    x_max = max([100.0] + pcts) * 1.45
    bx.set_xlim(0, x_max)
    bx.axvline(100.0, color="black", lw=0.8, ls="--")
    for y, k, pct in zip(ys, kernels, pcts):
        if k.value is None:
            text = "no GPU time"
        else:
            if k.metric == "bandwidth":
                text = f"{k.value:.0f} GB/s"
            else:
                text = f"{k.value:.1f} TFLOP/s" + (f" {k.dtype}" if k.dtype else "")
            text += f", {k.pct_peak:.0f}%" if k.pct_peak is not None else ", peak unknown"
            if k.pct_ceiling is not None:
                text += f" ({k.pct_ceiling:.0f}% measured)"
        bx.text(pct + x_max * 0.01, y, text, va="center", fontsize=7)
    bx.set_xlabel("% of datasheet peak (GB/s or the dtype's TFLOP/s)")
    bx.set_title("kernels with bytes only or FLOPs only\n(not placeable on the roofline)", fontsize=9)
    bx.grid(True, axis="x", alpha=0.3)


def roofline_chart(reports: Iterable, peaks, ceiling=None, title: Optional[str] = None) -> "Figure":
    """A roofline chart of ``reports``: :func:`roofline_data` drawn by :func:`draw_roofline`.

    Log-log axes: x = arithmetic intensity (FLOP/byte), y = TFLOP/s. The memory roof (the datasheet
    bandwidth, GB/s) and one flat compute roof per FLOP dtype among the kernels, each labelled with
    its peak; ridge points marked; a measured ``ceiling`` drawn dashed. Kernels with bytes and FLOPs
    are points coloured by bound and labelled; kernels with only bytes or only FLOPs are bars of %
    of peak in a side panel; with no bytes or FLOPs at all the chart says so.

    Args:
        reports: :class:`~tritonkit.profile.KernelReport` objects.
        peaks: :class:`~tritonkit.profile.DevicePeaks`.
        ceiling: a :class:`~tritonkit.profile.Ceiling` (measured), or None.
        title: the figure's title (default: ``Roofline: <device>``).

    Returns:
        A :class:`matplotlib.figure.Figure` on an Agg canvas; save it with
        :func:`~tritonkit.report.charts.save_figure`.

    Raises:
        ValueError: ``peaks`` has no positive bandwidth.
        MissingDependency: matplotlib is not installed (``pip install 'tritonkit[report]'``).
    """
    return draw_roofline(roofline_data(reports, peaks, ceiling), title)
