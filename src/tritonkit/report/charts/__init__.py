"""Charts of tritonkit's results, one module per chart, each data first and drawing second:

* :mod:`.roofline` — the roofline of ``tritonkit profile``'s kernels (:func:`roofline_data`,
  :func:`draw_roofline`, :func:`roofline_chart`);
* :mod:`.time_breakdown` — GPU time per kernel (:func:`time_breakdown_data`,
  :func:`draw_time_breakdown`, :func:`time_breakdown_chart`);
* :mod:`.tuning_landscape` — one tuning run's configs (:func:`tuning_landscape_data`,
  :func:`draw_tuning_landscape`, :func:`tuning_landscape_chart`);
* :mod:`.heatmap` — the memory accesses of one tensor argument in one launch (:func:`heatmap_data`,
  :func:`heatmap_rgba`, :func:`heatmap_png`, :func:`heatmap_data_uri`).

A ``*_data`` function turns results into a plain dataclass of numbers and labels (``to_dict`` for
JSON) without matplotlib; the drawing functions make :class:`matplotlib.figure.Figure` objects on an
Agg canvas (no pyplot) or images, and need ``tritonkit[report]`` (matplotlib, Pillow): without it
they raise :class:`~tritonkit._imports.MissingDependency`. :func:`save_figure` writes a figure as PNG
and SVG atomically; :func:`svg_data_uri` embeds one in a page.
"""
from ..names import short_name
from ._figure import BOUND_COLORS, save_figure, svg_data_uri
from .heatmap import (MAX_SIDE, OOB_COLOR, PANELS, PROGRAM_PALETTE, HeatmapData, LegendEntry, cell_pixels,
                      heatmap_data, heatmap_data_uri, heatmap_png, heatmap_rgba)
from .roofline import (NO_WORK_NOTE, KernelPoint, OffRoofKernel, Ridge, Roof, RooflineData, draw_roofline,
                       roofline_chart, roofline_data)
from .time_breakdown import TimeBar, TimeBreakdown, draw_time_breakdown, time_breakdown_chart, time_breakdown_data
from .tuning_landscape import (TRIAL_STATUS_COLORS, LandscapeBar, LandscapeMiss, TuningLandscape,
                               draw_tuning_landscape, tuning_landscape_chart, tuning_landscape_data)

__all__ = ["BOUND_COLORS", "KernelPoint", "NO_WORK_NOTE", "OffRoofKernel", "Ridge", "Roof", "RooflineData", "TimeBar",
           "TimeBreakdown", "draw_roofline", "draw_time_breakdown", "roofline_chart", "roofline_data", "save_figure",
           "short_name", "svg_data_uri", "time_breakdown_chart", "time_breakdown_data", "LandscapeBar",
           "LandscapeMiss", "TRIAL_STATUS_COLORS", "TuningLandscape", "draw_tuning_landscape",
           "tuning_landscape_chart", "tuning_landscape_data", "HeatmapData", "LegendEntry", "MAX_SIDE", "OOB_COLOR",
           "PANELS", "PROGRAM_PALETTE", "cell_pixels", "heatmap_data", "heatmap_data_uri", "heatmap_png",
           "heatmap_rgba"]
