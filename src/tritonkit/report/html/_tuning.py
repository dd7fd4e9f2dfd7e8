"""The page's tuning: per (kernel, key) tuning run, the tuning landscape chart, what the winner
gained over the other correct configs, the fastest configs and those that gave no time, from the
tune step's :class:`~tritonkit.tune.TuneReport`."""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..charts import tuning_landscape_chart, tuning_landscape_data
from ._format import chart, css, fmt, ms_text
from ._view import ConfigRow, Page, TuneView

if TYPE_CHECKING:  # pragma: no cover - types only
    from ...tune import TuneReport, TuneResult

_TOP_CONFIGS = 8
_TRIAL_STATUSES = ("ok", "failed", "wrong", "crashed", "pruned")
_GAIN_NOTE = ("\"Gained\" compares the winner's median time with the other configs that ran correctly in the same "
              "tuning run: the median and the slowest of them, and the first config tried. It is not a comparison "
              "with an untuned kernel or with another implementation.")


def _tune_view(result: "TuneResult", index: int) -> TuneView:
    data = tuning_landscape_data(result)
    key = ", ".join(data.key)
    gain_worst = gain_first = "-"
    if data.winner_ms is None:
        gain, gain_x = "no config ran correctly: nothing was gained", "-"
    elif len(data.bars) == 1:
        gain, gain_x = "only one config ran correctly: nothing to compare it with", "-"
    else:
        w = data.winner_ms
        parts = [f"{data.median_ms / w:.2f}x faster than the median correct config ({ms_text(data.median_ms)})",
                 f"{data.worst_ms / w:.2f}x faster than the slowest ({ms_text(data.worst_ms)})",
                 f"{data.first_ms / w:.2f}x faster than the first config tried ({ms_text(data.first_ms)})"]
        gain = "; ".join(parts)
        gain_x = f"{data.median_ms / w:.2f}x"
        gain_worst, gain_first = f"{data.worst_ms / w:.2f}x", f"{data.first_ms / w:.2f}x"
    top = []
    for b in data.bars[:_TOP_CONFIGS]:
        top.append(ConfigRow(str(b.rank), b.label, ms_text(b.ms),
                             "winner" if b.winner else (f"{b.ms / data.winner_ms:.2f}x" if data.winner_ms else "-"),
                             "ok", "ok", b.winner, "from the cache" if b.cached else ""))
    misses = [ConfigRow("-", m.label, "-", "-", m.status, css(m.status, _TRIAL_STATUSES, "other"), False,
                        m.error) for m in data.misses]
    counts = [(s, n, css(s, _TRIAL_STATUSES, "other")) for s, n in sorted(data.counts.items(), key=lambda x: -x[1])]
    landscape = chart(f"Tuning landscape: {data.kernel}", f"time per config of {data.kernel}, fastest first",
                      lambda: tuning_landscape_chart(result))
    return TuneView(anchor=f"tune-{index}", kernel=data.kernel, key=key or "-", strategy=data.strategy or "-",
                    tuning_s=fmt(data.tuning_s, ".3g", " s"), counts=counts, winner=data.winner or "-",
                    winner_ms=ms_text(data.winner_ms), gain=gain, gain_x=gain_x, gain_worst=gain_worst,
                    gain_first=gain_first, chart=landscape, top=top, misses=misses,
                    more_ok=max(0, len(data.bars) - len(top)))


def tuning_section(page: Page, tune: "TuneReport") -> None:
    """Fill ``page``'s tuning runs (times in ms, gains as ``1.21x``; landscapes drawn here) from ``tune``."""
    page.tunes = [_tune_view(r, i) for i, r in enumerate(tune.results)]
    page.gain_note = _GAIN_NOTE
