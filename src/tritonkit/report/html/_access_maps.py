"""The page's memory-access maps: for the launches of the check's report that have access maps
(out-of-bounds ones first, at most :data:`MAX_MAP_LAUNCHES`), the launch's facts and, per tensor
argument, heatmap panels drawn as PNG ``data:`` URIs with their legend and caption
(:mod:`tritonkit.report.charts.heatmap`).

Reads the check's :class:`~tritonkit.check.LaunchRecord` s; their access maps are the plain dicts
``AccessMap`` wrote (a map that cannot be drawn is reported in its place).
"""
from __future__ import annotations

from typing import Any, List, Mapping, Sequence, Tuple

from ...check import LaunchRecord
from ..charts.heatmap import heatmap_data, heatmap_data_uri, heatmap_rgba
from ._format import bytes_text
from ._view import MAX_MAP_LAUNCHES, ArgMap, Fact, LaunchView, Legend, Panel

_PANEL_TITLES = {"reads": "reads, by program", "writes": "writes, by program",
                 "density": "lanes per element (reads + writes)"}


def _arg_map(m: Mapping[str, Any]) -> ArgMap:
    name = str(m.get("arg") or "?")
    try:
        data = heatmap_data(m)
        panels = []
        for panel in data.panels():
            img = heatmap_rgba(data, panel)
            uri = heatmap_data_uri(data, panel)
            h, w = img.shape[:2]
            panels.append(Panel(_PANEL_TITLES[panel], uri, w, h, f"{name}: {_PANEL_TITLES[panel]}"))
        drawn = set(data.panels())
        legend = [Legend(e.label, list(e.colors or (e.color,))) for e in data.legend if drawn & set(e.panels)]
        return ArgMap(name, data.caption, panels, legend, data.has_oob)
    except Exception as e:  # a malformed map is reported, not fatal
        return ArgMap(name, "", error=f"could not draw this access map: {type(e).__name__}: {e}")


def launch_views(records: Sequence[LaunchRecord]) -> Tuple[List[LaunchView], int, int]:
    """(launches drawn, launches with maps not drawn, launches with maps) of the check's launch records."""
    with_maps = [(i, r) for i, r in enumerate(records) if r.access_maps]
    oob = [x for x in with_maps if any(isinstance(a, Mapping) and (a.get("oob") or a.get("oob_lanes"))
                                       for a in x[1].access_maps)]
    chosen = oob[:MAX_MAP_LAUNCHES]
    chosen += [x for x in with_maps if x not in chosen][:MAX_MAP_LAUNCHES - len(chosen)]
    chosen.sort(key=lambda x: x[0])
    views = []
    for i, r in chosen:
        facts = []
        if r.grid:
            facts.append(Fact("grid", "(" + ", ".join(str(g) for g in r.grid) + ")" +
                              (f", {r.programs:,} programs" if r.programs else ""), code=True))
        if r.config:
            facts.append(Fact("config", r.config, code=True))
        for name, value in (("status", r.status), ("engine", r.engine)):
            if value:
                facts.append(Fact(name, value))
        facts.append(Fact("interpreted in", f"{r.seconds:.3g} s"))
        io_text = []
        for label, moved, unique in (("read", r.bytes_read, r.unique_bytes_read),
                                     ("written", r.bytes_written, r.unique_bytes_written)):
            if moved is not None:
                io_text.append(f"{bytes_text(moved)} {label}" +
                               (f" ({bytes_text(unique)} unique)" if unique is not None else ""))
        if io_text:
            facts.append(Fact("memory traffic", ", ".join(io_text)))
        facts.append(Fact("FLOPs", f"{r.flops:,}"))
        args = [_arg_map(m) for m in r.access_maps if isinstance(m, Mapping)]
        views.append(LaunchView(f"launch-{i}", r.kernel or "?", i, facts, args, any(a.oob for a in args)))
    return views, len(with_maps) - len(views), len(with_maps)
