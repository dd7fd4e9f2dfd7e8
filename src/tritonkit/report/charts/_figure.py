"""What the charts share: figures made without pyplot, writing them (atomically) and embedding them,
labels, colours, and numbers read tolerantly.

matplotlib is imported only here and only to draw (:func:`new_figure`, :func:`patch_types`,
:func:`save_figure`, :func:`svg_data_uri`), through :func:`tritonkit._imports.require`, so that
computing a chart's data needs no matplotlib and a missing one says to install ``tritonkit[report]``.
Figures are :class:`matplotlib.figure.Figure` objects on an Agg canvas: no global backend is chosen
and no pyplot figure list keeps them alive.
"""
from __future__ import annotations

import base64
import io
import math
import os
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from ..._imports import require
from ..names import LABEL_WIDTH, _middle, short_name

if TYPE_CHECKING:  # pragma: no cover - types only
    from matplotlib.figure import Figure

#: what needs matplotlib, for the missing-dependency message
_DRAWING = "drawing a chart"

#: bound -> colour (the terminal table's colours: memory cyan-blue, compute green, latency amber, host red).
BOUND_COLORS = {"memory": "#1f77b4", "compute": "#2ca02c", "latency": "#ff7f0e", "host": "#d62728",
                "unknown": "#7f7f7f"}

#: matplotlib's ``Blues`` colour map (ColorBrewer's 9-class Blues), light to dark, RGB in 0..1
_BLUES = ((0.9686274509803922, 0.984313725490196, 1.0), (0.8705882352941177, 0.9215686274509803, 0.9686274509803922),
          (0.7764705882352941, 0.8588235294117647, 0.9372549019607843),
          (0.6196078431372549, 0.792156862745098, 0.8823529411764706),
          (0.4196078431372549, 0.6823529411764706, 0.8392156862745098),
          (0.25882352941176473, 0.5725490196078431, 0.7764705882352941),
          (0.12941176470588237, 0.44313725490196076, 0.7098039215686275),
          (0.03137254901960784, 0.3176470588235294, 0.611764705882353),
          (0.03137254901960784, 0.18823529411764706, 0.4196078431372549))
_RAMP_SIZE = 256  # entries of a colour map's lookup table, as matplotlib makes them


# ------------------------------------------------------------------------------------------ numbers

def finite(x: Any) -> Optional[float]:
    """``x`` as a float where it is a finite int or float, else None."""
    return float(x) if isinstance(x, (int, float)) and math.isfinite(x) else None


# ------------------------------------------------------------------------------------------- labels

def unique_labels(items: Sequence[Tuple[str, Sequence[str]]], width: int = LABEL_WIDTH) -> List[str]:
    """Short labels (:func:`~tritonkit.report.names.short_name`) for (name, scope) pairs, at most
    ``width`` characters; labels that collide get the scope, then ``#2``, ``#3``."""
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


def tex_safe(text: str) -> str:
    """Literal ``$`` for matplotlib (a pair of them would start mathtext)."""
    return text.replace("$", r"\$")


# ------------------------------------------------------------------------------------------ colours

def hex_to_rgb(hex_color: str) -> Tuple[int, int, int]:
    """``#rrggbb`` as an (r, g, b) tuple of ints in 0..255."""
    h = hex_color.lstrip("#")
    return int(h[0:2], 16), int(h[2:4], 16), int(h[4:6], 16)


def rgb_to_hex(color: Sequence[int]) -> str:
    """(r, g, b) in 0..255 as ``#rrggbb``."""
    return "#" + "".join(f"{int(v):02x}" for v in color)


def _ramp_table(colors: Sequence[Tuple[float, float, float]], n: int = _RAMP_SIZE) -> np.ndarray:
    """An (n, 3) table interpolating ``colors``, evenly spaced over 0..1, as matplotlib's
    ``LinearSegmentedColormap.from_list`` builds its lookup table."""
    c = np.asarray(colors, dtype=np.float64)
    x = np.linspace(0, 1, len(c)) * (n - 1)
    xs = (n - 1) * np.linspace(0, 1, n)
    ind = np.searchsorted(x, xs)[1:-1]
    distance = (xs[1:-1] - x[ind - 1]) / (x[ind] - x[ind - 1])
    mid = distance[:, None] * (c[ind] - c[ind - 1]) + c[ind - 1]
    return np.clip(np.concatenate([c[:1], mid, c[-1:]]), 0.0, 1.0)


_BLUES_TABLE = _ramp_table(_BLUES)


def blues(t: Any) -> np.ndarray:
    """matplotlib's ``Blues`` colour map at ``t`` (0 lightest .. 1 darkest; outside, the end colours),
    without matplotlib: the same 256-entry table and the same lookup, so the same colours.

    Args:
        t: a number or an array of numbers.

    Returns:
        float64 RGB in 0..1, shape ``np.shape(t) + (3,)``.
    """
    t = np.asarray(t, dtype=np.float64)
    x = t.reshape(-1) * _RAMP_SIZE
    x[x == _RAMP_SIZE] = _RAMP_SIZE - 1
    return _BLUES_TABLE[np.clip(x, 0, _RAMP_SIZE - 1).astype(int)].reshape(t.shape + (3,))


# ------------------------------------------------------------------------------------------ drawing

def new_figure(width: float, height: float) -> "Figure":
    """A :class:`matplotlib.figure.Figure` of ``width`` x ``height`` inches, constrained layout, on
    an Agg canvas (no pyplot).

    Raises:
        MissingDependency: matplotlib is not installed (``pip install 'tritonkit[report]'``).
    """
    figure = require("matplotlib.figure", _DRAWING)
    agg = require("matplotlib.backends.backend_agg", _DRAWING)
    fig = figure.Figure(figsize=(width, height), layout="constrained")
    agg.FigureCanvasAgg(fig)
    return fig


def patch_types():
    """:mod:`matplotlib.patches` (legend swatches, rectangles).

    Raises:
        MissingDependency: matplotlib is not installed.
    """
    return require("matplotlib.patches", _DRAWING)


def bound_legend(bounds: Iterable[str]) -> list:
    """Legend patches for the bounds present, in :data:`BOUND_COLORS`' order.

    Raises:
        MissingDependency: matplotlib is not installed.
    """
    present = set(bounds)
    order = [b for b in BOUND_COLORS if b in present]
    patch = patch_types().Patch
    return [patch(color=BOUND_COLORS[b], label=f"{b} bound" if b != "unknown" else "bound unknown") for b in order]


def save_figure(fig: "Figure", path_without_ext: str, dpi: int = 150) -> List[str]:
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
        MissingDependency: matplotlib is not installed.
    """
    matplotlib = require("matplotlib", _DRAWING)
    from ..._io import atomic_write

    base = os.fspath(path_without_ext)
    root, ext = os.path.splitext(base)
    if ext.lower() in (".png", ".svg"):
        base = root
    directory = os.path.dirname(os.path.abspath(base))
    os.makedirs(directory, exist_ok=True)
    written = []
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


def svg_data_uri(fig: "Figure") -> str:
    """``fig`` as a ``data:image/svg+xml;base64,...`` URI for an ``<img src>`` (text kept as text, no
    date, as :func:`save_figure` writes its SVG).

    Raises:
        MissingDependency: matplotlib is not installed.
    """
    matplotlib = require("matplotlib", _DRAWING)
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "tritonkit"}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    return "data:image/svg+xml;base64," + base64.b64encode(buf.getvalue().encode("utf-8")).decode("ascii")
