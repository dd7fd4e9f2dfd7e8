"""Charts of ``tritonkit profile``'s results: a roofline and a GPU-time breakdown, as PNG and SVG.

Data first, then drawing: :func:`roofline_data` and :func:`time_breakdown_data` turn
:class:`~tritonkit.profile.KernelReport` lists (and :class:`~tritonkit.profile.DevicePeaks`) into
plain dataclasses of numbers and labels; :func:`draw_roofline` and :func:`draw_time_breakdown`
draw those; :func:`roofline_chart` and :func:`time_breakdown_chart` do both. :func:`save_figure`
writes a figure as PNG and SVG.

Figures are :class:`matplotlib.figure.Figure` objects on an Agg canvas, made without pyplot: no
global backend is chosen and no pyplot figure list keeps them alive.

Units: arithmetic intensity in FLOP/byte, throughput in TFLOP/s (1e12 FLOP/s), bandwidth in GB/s
(1e9 bytes/s), times in ms.
"""
from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from .names import LABEL_WIDTH, _middle, short_name

__all__ = ["BOUND_COLORS", "KernelPoint", "OffRoofKernel", "Ridge", "Roof", "RooflineData", "TimeBar",
           "TimeBreakdown", "draw_roofline", "draw_time_breakdown", "roofline_chart", "roofline_data",
           "save_figure", "short_name", "time_breakdown_chart", "time_breakdown_data"]

#: bound -> colour (the terminal table's colours: memory cyan-blue, compute green, latency amber, host red).
BOUND_COLORS = {"memory": "#1f77b4", "compute": "#2ca02c", "latency": "#ff7f0e", "host": "#d62728",
                "unknown": "#7f7f7f"}
_OTHER_COLOR = "#c7c7c7"
_MEMORY_COLOR = "#222222"
_DTYPE_COLORS = {"fp8": "#9467bd", "int8": "#9467bd", "bf16": "#8c1c13", "fp16": "#8c1c13", "tf32": "#8c564b",
                 "fp32": "#17becf", "fp64": "#bcbd22"}
#: the note a roofline carries when no kernel has bytes or FLOPs.
NO_WORK_NOTE = ("no kernel has bytes or FLOPs: give the kernels launch_metadata (bytes, flops16, ...) "
                "or profile with --counters")


# ----------------------------------------------------------------------------------------- names

def _unique_labels(items: Sequence[Tuple[str, Sequence[str]]], width: int = LABEL_WIDTH) -> List[str]:
    """Short labels for (name, scope) pairs; labels that collide get the scope, then ``#2``, ``#3``."""
    labels = [short_name(name, width) for name, _ in items]
    counts: Dict[str, int] = {}
    for lab in labels:
        counts[lab] = counts.get(lab, 0) + 1
    for k, (name, scope) in enumerate(items):
        if counts[labels[k]] > 1 and scope:
            tag = " [" + "/".join(scope) + "]"
            labels[k] = short_name(name, max(width - len(tag), 8)) + tag if len(tag) < width - 8 else \
                _middle(labels[k] + tag, width)
    seen: Dict[str, int] = {}
    out = []
    for lab in labels:
        seen[lab] = seen.get(lab, 0) + 1
        if seen[lab] > 1 or labels.count(lab) > 1:
            tag = f" #{seen[lab]}"
            lab = _middle(lab, width - len(tag)) + tag
        out.append(lab)
    return out


def _tex_safe(text: str) -> str:
    """Literal ``$`` for matplotlib (a pair of them would start mathtext)."""
    return text.replace("$", r"\$")


# ---------------------------------------------------------------------------------- roofline data

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
        return asdict(self)


def _dtype_label(dtype: str, tflops: Dict[str, float]) -> str:
    if dtype in ("bf16", "fp16") and tflops.get("bf16") is not None and tflops.get("bf16") == tflops.get("fp16"):
        return "bf16/fp16"
    return dtype


def _decade_floor(x: float) -> float:
    return 10.0 ** math.floor(math.log10(x))


def _decade_ceil(x: float) -> float:
    return 10.0 ** math.ceil(math.log10(x))


def _num(x: Any) -> Optional[float]:
    return float(x) if isinstance(x, (int, float)) and math.isfinite(x) else None


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
    bw = _num(getattr(peaks, "bandwidth_gbps", None))
    if bw is None or bw <= 0:
        raise ValueError(f"peaks need a positive bandwidth_gbps (GB/s), got {getattr(peaks, 'bandwidth_gbps', None)!r}")
    peak_tflops: Dict[str, float] = {d: float(v) for d, v in (getattr(peaks, "tflops", None) or {}).items()
                                     if _num(v) and v > 0}
    data = RooflineData(getattr(peaks, "name", "device"), bw, getattr(peaks, "source", ""))
    reports = list(reports)
    with_work = [r for r in reports if (getattr(r, "bytes", None) or getattr(r, "flops", None))]
    data.without_work = len(reports) - len(with_work)
    labels = _unique_labels([(r.name, list(getattr(r, "scope", []) or [])) for r in with_work])

    present = []
    for r in with_work:
        if r.flops and r.flops_dtype and r.flops_dtype not in present:
            present.append(r.flops_dtype)
    missing = [d for d in present if d not in peak_tflops]
    data.dtypes = sorted((d for d in present if d in peak_tflops), key=lambda d: -peak_tflops[d]) + missing
    data.compute_peaks = {d: peak_tflops[d] for d in present if d in peak_tflops}

    for r, label in zip(with_work, labels):
        scope = list(getattr(r, "scope", []) or [])
        intensity, tflops, gbps = _num(r.intensity), _num(r.tflops), _num(r.gbps)
        if r.bytes and r.flops and intensity and tflops:
            p = KernelPoint(label, r.name, scope, intensity, tflops, gbps, r.flops_dtype, r.bound, r.total_ms,
                            _num(r.pct_peak_flops))
            p.pct_roof = 100.0 * tflops / data.attainable(intensity, r.flops_dtype) \
                if r.flops_dtype in data.compute_peaks else None
            data.points.append(p)
        elif r.flops and (tflops is not None or not r.bytes):
            data.off_roof.append(OffRoofKernel(label, r.name, scope, r.bound, r.total_ms, "compute", tflops,
                                               "TFLOP/s", r.flops_dtype, _num(r.pct_peak_flops),
                                               _num(getattr(r, "pct_ceiling_flops", None))))
        else:
            data.off_roof.append(OffRoofKernel(label, r.name, scope, r.bound, r.total_ms, "bandwidth", gbps, "GB/s",
                                               None, _num(r.pct_peak_bw), _num(getattr(r, "pct_ceiling_bw", None))))

    # axes: whole decades around the kernels, the ridges and intensity 1
    ridges = {d: v * 1e3 / bw for d, v in data.compute_peaks.items()}  # = peaks.ridge(d), FLOP/byte
    c_bw = _num(getattr(ceiling, "bandwidth_gbps", None)) if ceiling is not None else None
    c_bw = c_bw if c_bw and c_bw > 0 else None
    c_tflops = {d: float(v) for d, v in (getattr(ceiling, "tflops", None) or {}).items()
                if d in present and _num(v) and v > 0} if ceiling is not None else {}
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


# ---------------------------------------------------------------------------------- roofline draw

def _new_figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _bound_legend(bounds: Iterable[str]) -> List[Patch]:
    present = set(bounds)
    order = [b for b in BOUND_COLORS if b in present]
    return [Patch(color=BOUND_COLORS[b], label=f"{b} bound" if b != "unknown" else "bound unknown") for b in order]


def draw_roofline(data: RooflineData, title: Optional[str] = None) -> Figure:
    """Draw a :class:`RooflineData`: log-log roofline on the left, off-roof kernels' % of peak on the right.

    Args:
        data: from :func:`roofline_data`.
        title: the figure's title (default: ``Roofline: <device>``).

    Returns:
        A :class:`matplotlib.figure.Figure` on an Agg canvas (no pyplot state).

    Raises:
        Nothing of its own; matplotlib's errors pass through.
    """
    n_off = len(data.off_roof)
    if n_off:
        fig = _new_figure(15.0, max(6.5, 0.34 * n_off + 2.0))
        gs = fig.add_gridspec(1, 2, width_ratios=[2.0, 1.0])
        ax = fig.add_subplot(gs[0])
        bx = fig.add_subplot(gs[1])
    else:
        fig = _new_figure(10.0, 6.5)
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
        ax.annotate(_tex_safe(p.label) + pct, xy=(p.intensity, p.tflops), xytext=(-7 if right_half else 7, -7),
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
    handles += _bound_legend([p.bound for p in data.points] + [k.bound for k in data.off_roof])
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
    bx.set_yticks(ys, [_tex_safe(k.label) for k in kernels], fontsize=7.5)
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


def roofline_chart(reports: Iterable, peaks, ceiling=None, title: Optional[str] = None) -> Figure:
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
        A :class:`matplotlib.figure.Figure` on an Agg canvas; save it with :func:`save_figure`.

    Raises:
        ValueError: ``peaks`` has no positive bandwidth.
    """
    return draw_roofline(roofline_data(reports, peaks, ceiling), title)


# ---------------------------------------------------------------------------------- time breakdown

@dataclass
class TimeBar:
    """One bar of the time breakdown.

    Attributes:
        label: short unique label (``other (N kernels)`` for the rest); name / scope: as profiled
            (``other``/``[]`` for the rest).
        ms: GPU time, ms; pct: % of the total.
        bound: the kernel's bound (``other`` for the rest); kernels: how many kernels the bar sums.
    """

    label: str
    name: str
    scope: List[str]
    ms: float
    pct: float
    bound: str
    kernels: int = 1


@dataclass
class TimeBreakdown:
    """GPU time per kernel, the slowest ``top`` then the rest as one ``other`` bar.

    Attributes:
        bars: slowest first, ``other`` last; their ``ms`` sum to ``total_ms``.
        total_ms: all kernels' GPU time, ms.
        kernels: how many kernels there are.
    """

    bars: List[TimeBar]
    total_ms: float
    kernels: int

    def to_dict(self) -> dict:
        return asdict(self)


def _time_rows(source) -> List[Tuple[str, List[str], float, str]]:
    """(name, scope, ms, bound) per kernel of a report list, a scope tree or a ProtonProfile."""
    if hasattr(source, "tree") and hasattr(source, "kernels"):  # a ProtonProfile
        source = source.tree
    if hasattr(source, "walk") and hasattr(source, "inclusive_ns"):  # a ScopeNode
        return [(node.name, list(path), node.time_ns / 1e6, "unknown") for path, node in source.walk()
                if node.kernel]
    rows = []
    for r in source:
        rows.append((r.name, list(getattr(r, "scope", []) or []), float(r.total_ms), getattr(r, "bound", "unknown")))
    return rows


def time_breakdown_data(source, top: int = 12) -> TimeBreakdown:
    """GPU time per kernel, slowest first: the ``top`` slowest, the rest summed as ``other``.

    Args:
        source: :class:`~tritonkit.profile.KernelReport` objects (bars coloured by bound), or a scope
            tree (:class:`~tritonkit.profile.ScopeNode`, or a :class:`~tritonkit.profile.ProtonProfile`)
            whose kernel nodes become bars (bound ``unknown``).
        top: how many kernels get a bar of their own (>= 1).

    Returns:
        A :class:`TimeBreakdown`; times in ms, shares in % of the total GPU time.

    Raises:
        ValueError: ``top`` < 1.
    """
    if top < 1:
        raise ValueError(f"top must be >= 1, got {top}")
    rows = sorted(_time_rows(source), key=lambda row: -row[2])
    total = sum(row[2] for row in rows)
    shown, rest = rows[:top], rows[top:]
    labels = _unique_labels([(row[0], row[1]) for row in shown])

    def pct(ms: float) -> float:
        return 100.0 * ms / total if total > 0 else 0.0

    bars = [TimeBar(lab, name, scope, ms, pct(ms), bound) for lab, (name, scope, ms, bound) in zip(labels, shown)]
    if rest:
        ms = sum(row[2] for row in rest)
        bars.append(TimeBar(f"other ({len(rest)} kernels)", "other", [], ms, pct(ms), "other", len(rest)))
    return TimeBreakdown(bars, total, len(rows))


def draw_time_breakdown(data: TimeBreakdown, title: Optional[str] = None) -> Figure:
    """Draw a :class:`TimeBreakdown` as horizontal bars (slowest on top) with ms and % of the total.

    Args:
        data: from :func:`time_breakdown_data`.
        title: the figure's title (default: ``GPU time by kernel (total X ms)``).

    Returns:
        A :class:`matplotlib.figure.Figure` on an Agg canvas (no pyplot state).

    Raises:
        Nothing of its own; matplotlib's errors pass through.
    """
    n = len(data.bars)
    fig = _new_figure(10.0, max(2.5, 0.4 * n + 1.6))
    ax = fig.add_subplot()
    fig.suptitle(title or f"GPU time by kernel (total {data.total_ms:.3f} ms, {data.kernels} kernels)", fontsize=11)
    if not n:
        ax.text(0.5, 0.5, "no kernels in the profile", transform=ax.transAxes, ha="center", va="center")
        ax.set_axis_off()
        return fig
    ys = list(range(n))
    colors = [_OTHER_COLOR if b.bound == "other" else BOUND_COLORS.get(b.bound, BOUND_COLORS["unknown"])
              for b in data.bars]
    patches = ax.barh(ys, [b.ms for b in data.bars], color=colors, height=0.65)
    for patch, b in zip(patches, data.bars):  # per patch: a list of hatches needs matplotlib >= 3.10
        if b.bound == "other":
            patch.set_hatch("//")
    ax.set_yticks(ys, [_tex_safe(b.label) for b in data.bars], fontsize=8)
    ax.invert_yaxis()
    x_max = max(b.ms for b in data.bars) or 1.0
    ax.set_xlim(0, x_max * 1.3)
    for y, b in zip(ys, data.bars):
        ax.text(b.ms + x_max * 0.01, y, f"{b.ms:.3f} ms ({b.pct:.1f}%)", va="center", fontsize=7.5)
    ax.set_xlabel("GPU time (ms, all launches)")
    ax.grid(True, axis="x", alpha=0.3)
    handles = _bound_legend(b.bound for b in data.bars)
    if any(b.bound == "other" for b in data.bars):
        handles.append(Patch(facecolor=_OTHER_COLOR, hatch="//", label="other kernels"))
    if handles:
        ax.legend(handles=handles, loc="lower right", fontsize=7)
    return fig


def time_breakdown_chart(source, top: int = 12, title: Optional[str] = None) -> Figure:
    """Horizontal bars of GPU time per kernel: :func:`time_breakdown_data` drawn by :func:`draw_time_breakdown`.

    Args:
        source: :class:`~tritonkit.profile.KernelReport` objects, a :class:`~tritonkit.profile.ScopeNode`
            tree or a :class:`~tritonkit.profile.ProtonProfile`.
        top: kernels with a bar of their own (>= 1); the rest are one ``other`` bar.
        title: the figure's title.

    Returns:
        A :class:`matplotlib.figure.Figure` on an Agg canvas; times in ms, shares in %.

    Raises:
        ValueError: ``top`` < 1.
    """
    return draw_time_breakdown(time_breakdown_data(source, top), title)


# ---------------------------------------------------------------------------------- saving

def save_figure(fig: Figure, path_without_ext: str, dpi: int = 150) -> List[str]:
    """Write ``fig`` as ``<path>.png`` and ``<path>.svg``, each atomically.

    Each file is written to a temporary file in the same directory and moved into place with
    :func:`os.replace`, so a reader never sees a half-written chart and a failed write leaves the
    previous file as it was. SVG text stays text (searchable, ``svg.fonttype = none``), and the SVG
    carries no date, so the same figure gives the same file.

    Args:
        fig: the figure.
        path_without_ext: where to write, without extension (a ``.png``/``.svg`` suffix is dropped);
            missing parent directories are made.
        dpi: the PNG's resolution, dots per inch.

    Returns:
        [the PNG's path, the SVG's path].

    Raises:
        OSError: a directory or file cannot be written (no temporary file is left behind).
    """
    import matplotlib

    base = os.fspath(path_without_ext)
    root, ext = os.path.splitext(base)
    if ext.lower() in (".png", ".svg"):
        base = root
    directory = os.path.dirname(os.path.abspath(base))
    os.makedirs(directory, exist_ok=True)
    written = []
    from .._io import atomic_write
    for fmt in ("png", "svg"):
        target = f"{base}.{fmt}"

        def write(fh, fmt=fmt):
            if fmt == "png":
                fig.savefig(fh, format="png", dpi=dpi)
            else:
                with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "tritonkit"}):
                    fig.savefig(fh, format="svg", metadata={"Date": None})
        atomic_write(target, write, binary=True)
        written.append(target)
    return written


# ---------------------------------------------------------------------------------- tuning landscape

#: trial status -> colour in the tuning landscape (``ok`` bars are drawn in the bar colours below).
TRIAL_STATUS_COLORS = {"failed": "#ff7f0e", "wrong": "#9467bd", "crashed": "#d62728", "pruned": "#9aa0a6",
                       "unknown": "#7f7f7f"}
_WINNER_COLOR = "#2ca02c"
_OK_COLOR = "#8fb3d9"


@dataclass
class LandscapeBar:
    """One correct config of a tuning run, as a bar.

    Attributes:
        rank: 1 for the fastest; label: the config's key (``BLOCK=128,num_warps=4``).
        ms: median kernel time, ms; winner: the tuner's winner; cached: the time came from the cache.
        order: its place in the order the tuner decided the configs (0 first).
    """

    rank: int
    label: str
    ms: float
    winner: bool = False
    cached: bool = False
    order: int = 0


@dataclass
class LandscapeMiss:
    """A config that gave no time: ``status`` (``failed``, ``wrong``, ``crashed``, ``pruned``), ``error`` why."""

    label: str
    status: str
    error: str = ""
    order: int = 0


@dataclass
class TuningLandscape:
    """One (kernel, key) tuning run as numbers: correct configs fastest first, then the rest.

    Attributes:
        kernel / key / strategy: as tuned; tuning_s: wall seconds.
        bars: correct configs, fastest first (ms); misses: configs without a time, in trial order.
        counts: status -> configs (``ok`` included).
        winner: the winner's key (None when no config ran correctly).
        winner_ms / median_ms / worst_ms / first_ms: the winner's time, the median and the slowest of
            the correct configs, and the first correct config decided (ms; None without one).
    """

    kernel: str
    key: List[str]
    strategy: str = ""
    tuning_s: float = 0.0
    bars: List[LandscapeBar] = field(default_factory=list)
    misses: List[LandscapeMiss] = field(default_factory=list)
    counts: Dict[str, int] = field(default_factory=dict)
    winner: Optional[str] = None
    winner_ms: Optional[float] = None
    median_ms: Optional[float] = None
    worst_ms: Optional[float] = None
    first_ms: Optional[float] = None

    def to_dict(self) -> dict:
        """Plain JSON data."""
        return asdict(self)


def _trial_label(trial: Dict[str, Any]) -> str:
    if trial.get("key"):
        return str(trial["key"])
    point = trial.get("point")
    if isinstance(point, dict):
        from ..tune import point_key
        try:
            return point_key(point)
        except TypeError:  # values that do not sort together
            return ",".join(f"{k}={v}" for k, v in point.items())
    return "?"


def tuning_landscape_data(result: Any) -> TuningLandscape:
    """A tuning run as numbers: the correct configs' times, fastest first, and those that gave none.

    Args:
        result: a :class:`~tritonkit.tune.TuneResult`'s ``to_dict()`` (a TuneResult is converted);
            each trial has ``point`` (or ``key``), ``status``, ``ms`` (None unless ``ok``), ``error``
            and ``source`` (``cache`` marks a cached time).

    Returns:
        A :class:`TuningLandscape`; times in ms. The winner is ``result["winner"]`` where that config
        ran correctly, else the fastest correct config.

    Raises:
        KeyError: ``result`` has no ``kernel``.
    """
    if hasattr(result, "to_dict"):
        result = result.to_dict()
    data = TuningLandscape(str(result["kernel"]), [str(k) for k in result.get("key") or []],
                           str(result.get("strategy") or ""), float(result.get("tuning_s") or 0.0))
    ok: List[LandscapeBar] = []
    for order, t in enumerate(result.get("trials") or []):
        status = str(t.get("status") or "unknown")
        data.counts[status] = data.counts.get(status, 0) + 1
        label = _trial_label(t)
        ms = _num(t.get("ms"))
        if status == "ok" and ms is not None:
            ok.append(LandscapeBar(0, label, ms, cached=t.get("source") == "cache", order=order))
        else:
            data.misses.append(LandscapeMiss(label, status, str(t.get("error") or ""), order))
    ok.sort(key=lambda b: b.ms)
    for rank, bar in enumerate(ok, 1):
        bar.rank = rank
    data.bars = ok
    if ok:
        named = [b for b in ok if b.label == result.get("winner")]
        win = named[0] if named else ok[0]
        win.winner = True
        data.winner, data.winner_ms = win.label, win.ms
        times = [b.ms for b in ok]
        mid = len(times) // 2
        data.median_ms = times[mid] if len(times) % 2 else (times[mid - 1] + times[mid]) / 2
        data.worst_ms = times[-1]
        data.first_ms = min(ok, key=lambda b: b.order).ms
    return data


def draw_tuning_landscape(data: TuningLandscape, title: Optional[str] = None, top_labels: int = 0) -> Figure:
    """Draw a :class:`TuningLandscape`: bars of ms per correct config, fastest left, the winner green,
    the median dashed; configs without a time as a strip of coloured cells above, one per config.

    Args:
        data: from :func:`tuning_landscape_data`.
        title: the figure's title (default: ``Tuning: <kernel> [key]``).
        top_labels: how many of the fastest configs besides the winner get their rank written above
            their bar.

    Returns:
        A :class:`matplotlib.figure.Figure` on an Agg canvas (no pyplot state).

    Raises:
        Nothing of its own; matplotlib's errors pass through.
    """
    fig = _new_figure(10.0, 4.2)
    gs = fig.add_gridspec(2, 1, height_ratios=[1, 9])
    sx = fig.add_subplot(gs[0])
    ax = fig.add_subplot(gs[1])
    key = ", ".join(data.key)
    fig.suptitle(_tex_safe(title or f"Tuning: {short_name(data.kernel, 60)}" + (f"  [{key}]" if key else "")),
                 fontsize=11)
    n = len(data.bars)
    if n:
        xs = list(range(1, n + 1))
        colors = [_WINNER_COLOR if b.winner else _OK_COLOR for b in data.bars]
        patches = ax.bar(xs, [b.ms for b in data.bars], color=colors, width=0.8 if n < 60 else 1.0,
                         edgecolor="#4a6d92" if n < 60 else "none", linewidth=0.4)
        for patch, b in zip(patches, data.bars):
            if b.cached:
                patch.set_hatch("//")
        if data.median_ms is not None:
            ax.axhline(data.median_ms, color="#555555", lw=0.9, ls="--", label=f"median {data.median_ms:.4g} ms")
        ax.set_xlim(0.3, n + 0.7)
        ax.set_ylim(0, max(b.ms for b in data.bars) * 1.22)
        win = next((b for b in data.bars if b.winner), None)
        if win is not None:
            ax.annotate(f"winner {win.ms:.4g} ms", xy=(win.rank, win.ms), xytext=(6, 22), textcoords="offset points",
                        ha="left", va="bottom", fontsize=8, color="#14532d", fontweight="bold",
                        bbox=dict(boxstyle="round,pad=0.2", fc="white", ec="none", alpha=0.85),
                        arrowprops=dict(arrowstyle="-", color="#14532d", lw=0.8)).set_in_layout(False)
        for b in [b for b in data.bars if not b.winner][:max(0, top_labels)]:
            ax.annotate(f"#{b.rank}", xy=(b.rank, b.ms), xytext=(0, 2), textcoords="offset points", ha="center",
                        va="bottom", fontsize=7, color="#333333").set_in_layout(False)
        ax.set_xlabel("correct configs, fastest first (rank)")
    else:
        ax.text(0.5, 0.5, "no config ran correctly", transform=ax.transAxes, ha="center", va="center", fontsize=11,
                bbox=dict(boxstyle="round", fc="#fff8dc", ec="#b8860b"))
        ax.set_xticks([])
    ax.set_ylabel("median time (ms)")
    ax.grid(True, axis="y", alpha=0.3)
    handles, _ = ax.get_legend_handles_labels()
    if n:
        handles.insert(0, Patch(color=_WINNER_COLOR, label="winner"))
        handles.insert(1, Patch(color=_OK_COLOR, label=f"correct ({n})"))
        if any(b.cached for b in data.bars):
            handles.append(Patch(facecolor=_OK_COLOR, hatch="//", label="time from the cache"))
    for status in sorted({m.status for m in data.misses}):
        handles.append(Patch(color=TRIAL_STATUS_COLORS.get(status, TRIAL_STATUS_COLORS["unknown"]),
                             label=f"{status} ({data.counts.get(status, 0)})"))
    if handles:
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7.5, frameon=False)

    # the strip: one cell per config without a time, in trial order
    from matplotlib.patches import Rectangle
    m = len(data.misses)
    if m:
        for i, miss in enumerate(data.misses):
            sx.add_patch(Rectangle((i, 0), 1, 1,
                                   facecolor=TRIAL_STATUS_COLORS.get(miss.status, TRIAL_STATUS_COLORS["unknown"]),
                                   edgecolor="white", linewidth=0.6 if m < 80 else 0.0))
            if m <= 16:
                sx.text(i + 0.5, 0.5, miss.status, ha="center", va="center", fontsize=7, color="white")
        sx.set_xlim(0, max(m, 1))
        sx.set_ylim(0, 1)
        sx.set_title(f"{m} config(s) without a time (failed / wrong / crashed / pruned), in the order tried",
                     fontsize=8, loc="left")
    else:
        sx.text(0.0, 0.5, "every config gave a time", transform=sx.transAxes, va="center", fontsize=8,
                color="#555555")
    sx.set_axis_off()
    return fig


def tuning_landscape_chart(result: Any, title: Optional[str] = None) -> Figure:
    """The tuning landscape of one (kernel, key): :func:`tuning_landscape_data` drawn by
    :func:`draw_tuning_landscape`.

    Args:
        result: a :class:`~tritonkit.tune.TuneResult` or its ``to_dict()``.
        title: the figure's title.

    Returns:
        A :class:`matplotlib.figure.Figure` on an Agg canvas; times in ms.

    Raises:
        KeyError: ``result`` has no ``kernel``.
    """
    return draw_tuning_landscape(tuning_landscape_data(result), title)


__all__ += ["LandscapeBar", "LandscapeMiss", "TRIAL_STATUS_COLORS", "TuningLandscape", "draw_tuning_landscape",
            "tuning_landscape_chart", "tuning_landscape_data"]
