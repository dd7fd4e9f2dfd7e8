"""The tuning landscape of one (kernel, key): data first (:func:`tuning_landscape_data`: the correct
configs' times fastest first and the configs that gave none, a :class:`TuningLandscape`), then the
drawing (:func:`draw_tuning_landscape`); :func:`tuning_landscape_chart` does both. Times in ms.
Computing the data needs no matplotlib; drawing does (``tritonkit[report]``).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Dict, List, Optional

from ..names import short_name
from ._figure import finite, new_figure, patch_types, tex_safe

if TYPE_CHECKING:  # pragma: no cover - types only
    from matplotlib.figure import Figure

__all__ = ["LandscapeBar", "LandscapeMiss", "TRIAL_STATUS_COLORS", "TuningLandscape", "draw_tuning_landscape",
           "tuning_landscape_chart", "tuning_landscape_data"]

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
        from ...tune import point_key
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
        ms = finite(t.get("ms"))
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


def draw_tuning_landscape(data: TuningLandscape, title: Optional[str] = None, top_labels: int = 0) -> "Figure":
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
        MissingDependency: matplotlib is not installed (``pip install 'tritonkit[report]'``).
    """
    Patch, Rectangle = patch_types().Patch, patch_types().Rectangle
    fig = new_figure(10.0, 4.2)
    gs = fig.add_gridspec(2, 1, height_ratios=[1, 9])
    sx = fig.add_subplot(gs[0])
    ax = fig.add_subplot(gs[1])
    key = ", ".join(data.key)
    fig.suptitle(tex_safe(title or f"Tuning: {short_name(data.kernel, 60)}" + (f"  [{key}]" if key else "")),
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


def tuning_landscape_chart(result: Any, title: Optional[str] = None) -> "Figure":
    """The tuning landscape of one (kernel, key): :func:`tuning_landscape_data` drawn by
    :func:`draw_tuning_landscape`.

    Args:
        result: a :class:`~tritonkit.tune.TuneResult` or its ``to_dict()``.
        title: the figure's title.

    Returns:
        A :class:`matplotlib.figure.Figure` on an Agg canvas; times in ms.

    Raises:
        KeyError: ``result`` has no ``kernel``.
        MissingDependency: matplotlib is not installed (``pip install 'tritonkit[report]'``).
    """
    return draw_tuning_landscape(tuning_landscape_data(result), title)
