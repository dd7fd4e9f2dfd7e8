"""The GPU-time breakdown of ``tritonkit profile``: data first (:func:`time_breakdown_data`: the
slowest kernels and the rest as one ``other`` bar, a :class:`TimeBreakdown`), then the drawing
(:func:`draw_time_breakdown`); :func:`time_breakdown_chart` does both. Times in ms, shares in % of
the total. Computing the data needs no matplotlib; drawing does (``tritonkit[report]``).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, List, Optional, Tuple

from ._figure import BOUND_COLORS, bound_legend, new_figure, patch_types, tex_safe, unique_labels

if TYPE_CHECKING:  # pragma: no cover - types only
    from matplotlib.figure import Figure

__all__ = ["TimeBar", "TimeBreakdown", "draw_time_breakdown", "time_breakdown_chart", "time_breakdown_data"]

_OTHER_COLOR = "#c7c7c7"


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
        """Plain JSON data."""
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
    labels = unique_labels([(row[0], row[1]) for row in shown])

    def pct(ms: float) -> float:
        return 100.0 * ms / total if total > 0 else 0.0

    bars = [TimeBar(lab, name, scope, ms, pct(ms), bound) for lab, (name, scope, ms, bound) in zip(labels, shown)]
    if rest:
        ms = sum(row[2] for row in rest)
        bars.append(TimeBar(f"other ({len(rest)} kernels)", "other", [], ms, pct(ms), "other", len(rest)))
    return TimeBreakdown(bars, total, len(rows))


def draw_time_breakdown(data: TimeBreakdown, title: Optional[str] = None) -> "Figure":
    """Draw a :class:`TimeBreakdown` as horizontal bars (slowest on top) with ms and % of the total.

    Args:
        data: from :func:`time_breakdown_data`.
        title: the figure's title (default: ``GPU time by kernel (total X ms)``).

    Returns:
        A :class:`matplotlib.figure.Figure` on an Agg canvas (no pyplot state).

    Raises:
        MissingDependency: matplotlib is not installed (``pip install 'tritonkit[report]'``).
    """
    n = len(data.bars)
    fig = new_figure(10.0, max(2.5, 0.4 * n + 1.6))
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
    ax.set_yticks(ys, [tex_safe(b.label) for b in data.bars], fontsize=8)
    ax.invert_yaxis()
    x_max = max(b.ms for b in data.bars) or 1.0
    ax.set_xlim(0, x_max * 1.3)
    for y, b in zip(ys, data.bars):
        ax.text(b.ms + x_max * 0.01, y, f"{b.ms:.3f} ms ({b.pct:.1f}%)", va="center", fontsize=7.5)
    ax.set_xlabel("GPU time (ms, all launches)")
    ax.grid(True, axis="x", alpha=0.3)
    handles = bound_legend(b.bound for b in data.bars)
    if any(b.bound == "other" for b in data.bars):
        handles.append(patch_types().Patch(facecolor=_OTHER_COLOR, hatch="//", label="other kernels"))
    if handles:
        ax.legend(handles=handles, loc="lower right", fontsize=7)
    return fig


def time_breakdown_chart(source, top: int = 12, title: Optional[str] = None) -> "Figure":
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
        MissingDependency: matplotlib is not installed (``pip install 'tritonkit[report]'``).
    """
    return draw_time_breakdown(time_breakdown_data(source, top), title)
