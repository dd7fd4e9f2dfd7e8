"""Memory-access heatmaps: which parts of a tensor each launch read and wrote, by which program.

Data first, then drawing. :func:`heatmap_data` (numpy only) turns one *access map* (the checked interpreter's
per-argument record of a launch, a plain dict, see below) into a :class:`HeatmapData`: the cells
to draw as numpy arrays on a display grid, the tensor's place on it, out-of-bounds lanes binned
onto an extended canvas, the legend and a caption. :func:`heatmap_rgba` colours one panel of it
(``reads``, ``writes`` or ``density``) as an RGBA array; :func:`heatmap_png` encodes that as PNG
bytes (Pillow, ``tritonkit[report]``) and :func:`heatmap_data_uri` as a ``data:image/png;base64,...``
URI for a self-contained page.

An access map (one per tensor argument of a launch)::

    {"arg": "x_ptr", "shape": [1000], "dtype": "float32", "strides": [1],
     "rows": R, "cols": C,                 # the tensor as a 2-D canvas: 1-D -> (1, n); N-D -> (prod(shape[:-1]), shape[-1])
     "bin_rows": r, "bin_cols": c,         # elements per bin along each axis (>= 1)
     "reads": [[int]], "writes": [[int]],  # ceil(R/r) x ceil(C/c): lanes that read / wrote an element of the bin
     "read_program": [[int]], "write_program": [[int]],   # highest program (linear id) per bin; -1: none
     "oob": [[row, col, "load" | "store" | "atomic...", lanes], ...],   # canvas coordinates outside the tensor
     "oob_lanes": int, "oob_truncated": bool, "programs": int}

Layout. A 1-D tensor (``rows == 1``) is a line of bins; it is wrapped row-major into a roughly
square grid (left to right, then top to bottom). A 2-D canvas keeps its rows and columns. Either
way the canvas is extended to take in the out-of-bounds coordinates (binned with the same bin
size), up to a margin of the tensor's own extent (at least 8 bins) on each side; lanes farther
out are drawn in the outermost cell of the margin and counted in ``oob_clipped``. Grids
larger than :data:`MAX_SIDE` cells a side (1-D: :data:`MAX_SIDE` squared cells) are merged
further by an integer factor: counts add up, and a merged cell's program is the highest of the
merged bins' programs.

Colours: a cell's program is drawn with :data:`PROGRAM_PALETTE` (cyclic, 14 colours, no reds),
a cell that no lane touched is white, the extended canvas outside the tensor grey, and cells with
out-of-bounds lanes :data:`OOB_COLOR` (red), which no other cell uses.
"""
from __future__ import annotations

import base64
import io
import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ..._imports import require
from ._figure import blues, hex_to_rgb, rgb_to_hex

__all__ = ["HeatmapData", "LegendEntry", "MAX_SIDE", "OOB_COLOR", "PANELS", "PROGRAM_PALETTE", "cell_pixels",
           "heatmap_data", "heatmap_data_uri", "heatmap_png", "heatmap_rgba"]

#: the most display cells along one side of a 2-D heatmap (1-D: ``MAX_SIDE ** 2`` cells in all).
MAX_SIDE = 256
#: the panels :func:`heatmap_rgba` draws.
PANELS = ("reads", "writes", "density")
#: out-of-bounds cells (no other cell is drawn in this colour).
OOB_COLOR = "#e3001b"
#: cells of the tensor that no lane read (``reads`` panel) / wrote (``writes``) / touched (``density``).
UNTOUCHED_COLOR = "#ffffff"
#: cells of the extended canvas outside the tensor.
OUTSIDE_COLOR = "#c9ced6"
#: the tensor's outline where the canvas extends past it.
EDGE_COLOR = "#1f2937"
#: program id -> PROGRAM_PALETTE[id % len(PROGRAM_PALETTE)]: matplotlib's tab20 without its reds,
#: pinks and greys, dark shades first so that neighbouring programs differ in hue and lightness.
PROGRAM_PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#bcbd22", "#17becf",
                   "#aec7e8", "#ffbb78", "#98df8a", "#c5b0d5", "#c49c94", "#dbdb8d", "#9edae5")
_MIN_MARGIN = 8  # bins of extended canvas allowed on each side, at least
_TARGET_PX = 224  # the long side of a drawn panel, pixels (about)


@dataclass
class LegendEntry:
    """One legend swatch: ``label`` drawn in ``color`` (``#rrggbb``); ``panels`` it applies to;
    ``colors``: several swatches in a row under one label (the whole program palette), else empty."""

    label: str
    color: str
    panels: Tuple[str, ...] = PANELS
    colors: Tuple[str, ...] = ()


@dataclass
class HeatmapData:
    """One tensor argument's accesses in one launch, as a grid of display cells.

    Every array has shape ``grid_shape`` = (display rows, display columns).

    Attributes:
        arg / shape / dtype / strides: the argument's name, shape, dtype and strides (elements).
        programs: programs in the launch's grid (None where unknown).
        rows / cols: the tensor as a 2-D canvas (1-D: ``(1, n)``), elements.
        layout: ``"1d"`` (the line of bins wrapped row-major into the grid) or ``"2d"``.
        cell_rows / cell_cols: elements of the canvas per display cell along each axis (1-D:
            ``cell_rows == 1`` and ``cell_cols`` consecutive elements per cell).
        downsampled: True where a cell stands for more than one element.
        wrap_width: 1-D only: cells per display row (the line wraps after this many).
        first: the canvas coordinate (row, col) of the first element of the top-left cell (may be
            negative where the canvas extends before the tensor); 1-D: (0, first element index).
        inside: bool, the cell holds elements of the tensor.
        pad: bool, 1-D only: the cell is past the end of the wrapped line (drawn transparent).
        elements: int64, elements of the tensor in the cell.
        reads / writes: int64, lanes that read / wrote an element of the cell.
        read_program / write_program: int64, the highest program (linear id) that read / wrote in the
            cell (merged cells: the highest of those), -1 for none.
        oob_reads / oob_writes: int64, out-of-bounds lanes in the cell, loads / stores and atomics.
        reads_total / writes_total: lanes over the whole tensor.
        oob_lanes: out-of-bounds lanes of the launch on this argument (the map's count, which may
            exceed those listed); oob_drawn: lanes of the listed entries; oob_clipped: listed lanes
            farther out than the margin, drawn in the outermost cell; oob_truncated: the map listed
            only part of the out-of-bounds coordinates.
        oob_range: (lowest, highest) out-of-bounds canvas coordinate per axis, ``((r0, r1), (c0, c1))``
            (1-D: element indices ``((i0, i1),)``), None without out-of-bounds lanes.
        density_min / density_max: the fewest / most lanes per element in a touched cell (reads +
            writes), the lightest / darkest colour of the ``density`` panel (0 when nothing was
            accessed).
        legend: the swatches to show next to the panels.
        caption: one paragraph saying what is drawn (shape, dtype, layout, bin size, totals).
    """

    arg: str
    shape: List[int]
    dtype: str
    strides: Optional[List[int]]
    programs: Optional[int]
    rows: int
    cols: int
    layout: str
    cell_rows: int
    cell_cols: int
    wrap_width: Optional[int]
    first: Tuple[int, int]
    inside: np.ndarray
    pad: np.ndarray
    elements: np.ndarray
    reads: np.ndarray
    writes: np.ndarray
    read_program: np.ndarray
    write_program: np.ndarray
    oob_reads: np.ndarray
    oob_writes: np.ndarray
    reads_total: int = 0
    writes_total: int = 0
    oob_lanes: int = 0
    oob_drawn: int = 0
    oob_clipped: int = 0
    oob_truncated: bool = False
    oob_range: Optional[Tuple[Tuple[int, int], ...]] = None
    density_min: float = 0.0
    density_max: float = 0.0
    legend: List[LegendEntry] = field(default_factory=list)
    caption: str = ""

    @property
    def grid_shape(self) -> Tuple[int, int]:
        """(display rows, display columns)."""
        return tuple(self.inside.shape)  # type: ignore[return-value]

    @property
    def downsampled(self) -> bool:
        """True where one display cell stands for more than one element."""
        return self.cell_rows * self.cell_cols > 1

    @property
    def has_oob(self) -> bool:
        """True when any out-of-bounds lane is drawn."""
        return bool(self.oob_reads.any() or self.oob_writes.any())

    def panels(self) -> List[str]:
        """The panels worth drawing: ``reads`` where anything was read (or loaded out of bounds),
        ``writes`` likewise, and ``density`` unless every touched cell had exactly one lane per
        element (then it would repeat the others) or nothing was touched at all (then it is the
        only panel)."""
        out = []
        if self.reads_total or self.oob_reads.any():
            out.append("reads")
        if self.writes_total or self.oob_writes.any():
            out.append("writes")
        if not out or not (self.density_min == self.density_max == 1.0):
            out.append("density")
        return out

    def to_dict(self) -> Dict[str, Any]:
        """Plain JSON data (arrays as nested lists)."""
        out: Dict[str, Any] = {}
        for name in self.__dataclass_fields__:
            v = getattr(self, name)
            if isinstance(v, np.ndarray):
                v = v.tolist()
            elif name == "legend":
                v = [{"label": e.label, "color": e.color, "panels": list(e.panels)} for e in v]
            out[name] = v
        out["grid_shape"] = list(self.grid_shape)
        return out


def _grid(value: Any, shape: Tuple[int, int], name: str, fill: int) -> np.ndarray:
    """``value`` as an int64 array of ``shape`` (``fill`` where it is missing)."""
    if value is None:
        return np.full(shape, fill, dtype=np.int64)
    a = np.asarray(value, dtype=np.int64)
    if a.ndim == 1 and shape[0] == 1:
        a = a.reshape(1, -1)
    if a.shape != shape:
        raise ValueError(f"access map {name!r} has shape {list(a.shape)}, expected {list(shape)} "
                         f"(ceil(rows / bin_rows) x ceil(cols / bin_cols))")
    return a


def _place(a: np.ndarray, shape: Tuple[int, int], at: Tuple[int, int], fill: int) -> np.ndarray:
    out = np.full(shape, fill, dtype=a.dtype)
    out[at[0]:at[0] + a.shape[0], at[1]:at[1] + a.shape[1]] = a
    return out


def _merge(a: np.ndarray, fr: int, fc: int, how: str) -> np.ndarray:
    """Merge ``fr x fc`` blocks of cells (padding with 0 / -1): ``sum``, ``max`` or ``any``."""
    if fr == 1 and fc == 1:
        return a
    h, w = a.shape
    H, W = -(-h // fr), -(-w // fc)
    fill = -1 if how == "max" else 0
    p = np.full((H * fr, W * fc), fill, dtype=a.dtype)
    p[:h, :w] = a
    blocks = p.reshape(H, fr, W, fc)
    if how == "sum":
        return blocks.sum(axis=(1, 3))
    if how == "max":
        return blocks.max(axis=(1, 3))
    return blocks.any(axis=(1, 3))


def _is_store(access: str) -> bool:
    return not str(access).startswith("load")


def heatmap_data(access_map: Mapping[str, Any], max_side: int = MAX_SIDE) -> HeatmapData:
    """One access map (see the module's docstring) as display cells, legend and caption.

    Args:
        access_map: the checked interpreter's record of one tensor argument in one launch.
        max_side: the most display cells along one side (2-D), or ``max_side ** 2`` in all (1-D);
            larger grids are merged by an integer factor per axis.

    Returns:
        A :class:`HeatmapData`; counts in lanes, coordinates in elements of the 2-D canvas.

    Raises:
        ValueError: ``rows``/``cols`` are not positive, a bin size is < 1, or an array's shape is
            not ``ceil(rows / bin_rows) x ceil(cols / bin_cols)``.
    """
    m = access_map
    R, C = int(m.get("rows") or 0), int(m.get("cols") or 0)
    br, bc = int(m.get("bin_rows") or 1), int(m.get("bin_cols") or 1)
    if R < 1 or C < 1:
        raise ValueError(f"access map of {m.get('arg')!r} needs rows >= 1 and cols >= 1, got {R} x {C}")
    if br < 1 or bc < 1:
        raise ValueError(f"access map of {m.get('arg')!r} needs bin sizes >= 1, got {br} x {bc}")
    nbr, nbc = -(-R // br), -(-C // bc)
    shape = (nbr, nbc)
    reads = _grid(m.get("reads"), shape, "reads", 0)
    writes = _grid(m.get("writes"), shape, "writes", 0)
    rprog = _grid(m.get("read_program"), shape, "read_program", -1)
    wprog = _grid(m.get("write_program"), shape, "write_program", -1)
    # elements of the tensor per bin (edge bins hold fewer)
    er = np.minimum(br, R - np.arange(nbr) * br)
    ec = np.minimum(bc, C - np.arange(nbc) * bc)
    elements = np.outer(er, ec).astype(np.int64)

    oob = [e for e in (m.get("oob") or []) if isinstance(e, (list, tuple)) and len(e) >= 4]
    one_d = R == 1
    if one_d:
        # the line of bins; out-of-bounds coordinates as linear element indices
        pts = [(0, int(e[0]) * C + int(e[1]), _is_store(e[2]), int(e[3])) for e in oob]
    else:
        pts = [(int(e[0]), int(e[1]), _is_store(e[2]), int(e[3])) for e in oob]

    # the extended canvas, in bins: [lo, hi] per axis, within a margin around the tensor
    def extent(n_bins: int, coords: Sequence[int], size: int) -> Tuple[int, int, int]:
        margin = max(_MIN_MARGIN, n_bins)
        if not coords:
            return 0, n_bins - 1, margin
        lo = max(min(0, min(c // size for c in coords)), -margin)
        hi = min(max(n_bins - 1, max(c // size for c in coords)), n_bins - 1 + margin)
        return lo, hi, margin

    r_lo, r_hi, _ = extent(nbr, [p[0] for p in pts], br)
    c_lo, c_hi, _ = extent(nbc, [p[1] for p in pts], bc)
    ext = (r_hi - r_lo + 1, c_hi - c_lo + 1)
    at = (-r_lo, -c_lo)
    inside_b = _place(np.ones(shape, dtype=bool), ext, at, False)
    elements_b = _place(elements, ext, at, 0)
    reads_b, writes_b = _place(reads, ext, at, 0), _place(writes, ext, at, 0)
    rprog_b, wprog_b = _place(rprog, ext, at, -1), _place(wprog, ext, at, -1)
    oob_r = np.zeros(ext, dtype=np.int64)
    oob_w = np.zeros(ext, dtype=np.int64)
    clipped = 0
    for row, col, store, lanes in pts:
        i, j = row // br - r_lo, col // bc - c_lo
        ci, cj = min(max(i, 0), ext[0] - 1), min(max(j, 0), ext[1] - 1)
        if (ci, cj) != (i, j):
            clipped += lanes
        (oob_w if store else oob_r)[ci, cj] += lanes

    # merge cells: 2-D per axis to max_side; 1-D the line to max_side ** 2 cells
    if one_d:
        fr, fc = 1, max(1, -(-ext[1] // (max_side * max_side)))
    else:
        fr, fc = max(1, -(-ext[0] // max_side)), max(1, -(-ext[1] // max_side))
    # align the merge so that the tensor's first bin starts a cell
    sr, sc = (-at[0]) % fr, (-at[1]) % fc

    def shift(a: np.ndarray, fill) -> np.ndarray:
        if not sr and not sc:
            return a
        return _place(a, (a.shape[0] + sr, a.shape[1] + sc), (sr, sc), fill)

    inside_b, elements_b = shift(inside_b, False), shift(elements_b, 0)
    reads_b, writes_b, oob_r, oob_w = shift(reads_b, 0), shift(writes_b, 0), shift(oob_r, 0), shift(oob_w, 0)
    rprog_b, wprog_b = shift(rprog_b, -1), shift(wprog_b, -1)
    inside_c = _merge(inside_b, fr, fc, "any")
    cells = {"elements": _merge(elements_b, fr, fc, "sum"), "reads": _merge(reads_b, fr, fc, "sum"),
             "writes": _merge(writes_b, fr, fc, "sum"), "read_program": _merge(rprog_b, fr, fc, "max"),
             "write_program": _merge(wprog_b, fr, fc, "max"), "oob_reads": _merge(oob_r, fr, fc, "sum"),
             "oob_writes": _merge(oob_w, fr, fc, "sum")}
    first = ((r_lo - sr) * br, (c_lo - sc) * bc)
    cell_rows, cell_cols = br * fr, bc * fc

    wrap_width = None
    pad = np.zeros(inside_c.shape, dtype=bool)
    if one_d:
        n = inside_c.shape[1]
        wrap_width = max(1, math.ceil(math.sqrt(n)))
        height = -(-n // wrap_width)

        def wrap(a: np.ndarray, fill) -> np.ndarray:
            flat = np.full(height * wrap_width, fill, dtype=a.dtype)
            flat[:n] = a[0]
            return flat.reshape(height, wrap_width)

        pad = wrap(np.zeros((1, n), dtype=bool), True)
        inside_c = wrap(inside_c, False)
        cells = {k: wrap(v, -1 if k.endswith("program") else 0) for k, v in cells.items()}

    oob_listed = sum(p[3] for p in pts)
    oob_range = None
    if pts:
        if one_d:
            oob_range = ((min(p[1] for p in pts), max(p[1] for p in pts)),)
        else:
            oob_range = ((min(p[0] for p in pts), max(p[0] for p in pts)),
                         (min(p[1] for p in pts), max(p[1] for p in pts)))
    data = HeatmapData(
        arg=str(m.get("arg", "?")), shape=[int(s) for s in (m.get("shape") or [])], dtype=str(m.get("dtype", "?")),
        strides=[int(s) for s in m["strides"]] if m.get("strides") is not None else None,
        programs=int(m["programs"]) if m.get("programs") is not None else None,
        rows=R, cols=C, layout="1d" if one_d else "2d", cell_rows=cell_rows, cell_cols=cell_cols,
        wrap_width=wrap_width, first=first, inside=inside_c, pad=pad, elements=cells["elements"],
        reads=cells["reads"], writes=cells["writes"], read_program=cells["read_program"],
        write_program=cells["write_program"], oob_reads=cells["oob_reads"], oob_writes=cells["oob_writes"],
        reads_total=int(reads.sum()), writes_total=int(writes.sum()),
        oob_lanes=max(int(m.get("oob_lanes") or 0), oob_listed), oob_drawn=oob_listed, oob_clipped=clipped,
        oob_truncated=bool(m.get("oob_truncated")), oob_range=oob_range)
    per = _lanes_per_element(data)
    touched = per[per > 0]
    data.density_min = float(touched.min()) if touched.size else 0.0
    data.density_max = float(touched.max()) if touched.size else 0.0
    data.legend = _legend(data)
    data.caption = _caption(data)
    return data


def _lanes_per_element(data: HeatmapData) -> np.ndarray:
    lanes = (data.reads + data.writes).astype(np.float64)
    return np.divide(lanes, data.elements, out=np.zeros_like(lanes), where=data.elements > 0)


def _density_rgb(t: np.ndarray) -> np.ndarray:
    """Lanes per element as a share of the most (0..1] -> light to dark blue (no reds): matplotlib's
    ``Blues`` from 0.2 to 0.85, as uint8 RGB."""
    return (blues(0.2 + 0.65 * np.clip(t, 0.0, 1.0)) * 255).round().astype(np.uint8)


def _programs_seen(data: HeatmapData) -> List[int]:
    ids = np.union1d(data.read_program[data.read_program >= 0], data.write_program[data.write_program >= 0])
    return [int(i) for i in ids]


def _legend(data: HeatmapData) -> List[LegendEntry]:
    out: List[LegendEntry] = []
    seen = _programs_seen(data)
    k = len(PROGRAM_PALETTE)
    prog_panels = ("reads", "writes")
    if len(seen) <= k:
        out += [LegendEntry(f"program {p}", PROGRAM_PALETTE[p % k], prog_panels) for p in seen]
    else:
        out.append(LegendEntry(f"program id mod {k} (programs 0, {k}, {2 * k}, ... share the first colour)",
                               PROGRAM_PALETTE[0], prog_panels, PROGRAM_PALETTE))
    if data.density_max > 0:
        lo, hi = _density_rgb(np.array([data.density_min / data.density_max, 1.0]))

        def lanes(x: float) -> str:
            return f"{x:.3g} lane{'' if x == 1 else 's'} per element"

        if data.density_min < data.density_max:
            out.append(LegendEntry(lanes(data.density_min), rgb_to_hex(lo), ("density",)))
        out.append(LegendEntry(lanes(data.density_max), rgb_to_hex(hi), ("density",)))
    out.append(LegendEntry("not accessed", UNTOUCHED_COLOR))
    oob = (data.oob_reads + data.oob_writes) > 0
    if (~data.inside & ~data.pad & ~oob).any():
        out.append(LegendEntry("outside the tensor", OUTSIDE_COLOR))
    if data.has_oob:
        out.append(LegendEntry("out of bounds", OOB_COLOR))
    return out


def _n(x: int) -> str:
    return f"{x:,}"


def _caption(data: HeatmapData) -> str:
    shape = "[" + ", ".join(str(s) for s in data.shape) + "]"
    parts = [f"{data.arg}: {data.dtype} {shape}" + (f", strides {data.strides}" if data.strides else "")]
    h, w = data.grid_shape
    if data.layout == "1d":
        per = "1 element" if data.cell_cols == 1 else f"{_n(data.cell_cols)} elements"
        parts.append(f"1-D, wrapped row-major into {h} x {w} cells (read left to right, then top to bottom), "
                     f"{per} per cell" + (" (downsampled)" if data.downsampled else ""))
        parts.append(f"first cell starts at element {_n(data.first[1])}")
    else:
        lead = "" if len(data.shape) <= 2 else f"leading dimensions flattened into {_n(data.rows)} rows; "
        per = ("1 element" if not data.downsampled
               else f"{data.cell_rows} x {data.cell_cols} elements (downsampled)")
        parts.append(f"{lead}{_n(data.rows)} x {_n(data.cols)} canvas as {h} x {w} cells, {per} per cell")
        if data.first != (0, 0):
            parts.append(f"top-left cell starts at row {_n(data.first[0])}, column {_n(data.first[1])}")
    parts.append(f"reads {_n(data.reads_total)} lanes, writes {_n(data.writes_total)} lanes")
    if data.programs is not None:
        parts.append(f"{_n(data.programs)} programs; colour = the highest program id (linear) in the cell")
    if data.oob_lanes:
        where = ""
        if data.oob_range is not None:
            if data.layout == "1d":
                (i0, i1), = data.oob_range
                where = f" at elements {_n(i0)}..{_n(i1)}"
            else:
                (r0, r1), (c0, c1) = data.oob_range
                where = f" at rows {_n(r0)}..{_n(r1)}, columns {_n(c0)}..{_n(c1)}"
        text = f"out of bounds: {_n(data.oob_lanes)} lanes{where}, in red"
        if data.oob_truncated or data.oob_drawn < data.oob_lanes:
            text += f" ({_n(data.oob_drawn)} lanes listed and drawn)"
        if data.oob_clipped:
            text += f"; {_n(data.oob_clipped)} lanes lie farther out and are drawn at the canvas' edge"
        parts.append(text)
    else:
        parts.append("no out-of-bounds lanes")
    return "; ".join(parts) + "."


def _palette_rgb(ids: np.ndarray) -> np.ndarray:
    pal = np.array([hex_to_rgb(c) for c in PROGRAM_PALETTE], dtype=np.uint8)
    return pal[np.mod(ids, len(PROGRAM_PALETTE))]


def cell_pixels(data: HeatmapData, scale: Optional[int] = None) -> Tuple[int, int]:
    """Pixels per display cell, (height, width).

    2-D cells keep the canvas' aspect: a cell of ``cell_rows x cell_cols`` elements is drawn that
    much wider than tall (the ratio clipped to 1/4..4), so a downsampled square tensor stays square;
    1-D cells (a wrapped line) are square.

    Args:
        data: from :func:`heatmap_data`.
        scale: pixels along a cell's shorter side (>= 1); default: an area of about 224 x 224
            pixels for the whole grid, its long side at most 400 pixels, at most 24 pixels a side.

    Returns:
        (pixels per cell vertically, pixels per cell horizontally).

    Raises:
        ValueError: ``scale`` < 1.
    """
    h, w = data.grid_shape
    ratio = 1.0 if data.layout == "1d" else min(4.0, max(0.25, data.cell_cols / data.cell_rows))
    if scale is None:  # about _TARGET_PX squared pixels in all
        scale = int(math.sqrt(_TARGET_PX * _TARGET_PX / (h * w * max(ratio, 1 / ratio))))
        scale = max(1, min(24, scale, int(400 // (max(h, w) * max(ratio, 1 / ratio)))))
    if scale < 1:
        raise ValueError(f"scale must be >= 1 pixel, got {scale}")
    if ratio >= 1:
        return scale, max(1, round(scale * ratio))
    return max(1, round(scale / ratio)), scale


def heatmap_rgba(data: HeatmapData, panel: str, scale: Optional[int] = None) -> np.ndarray:
    """Colour one panel of ``data``, one block of pixels per cell (see :func:`cell_pixels`).

    Panels: ``reads`` and ``writes`` colour each cell by the highest program that read / wrote it
    (:data:`PROGRAM_PALETTE`), white where none did, and :data:`OOB_COLOR` where loads (``reads``)
    or stores and atomics (``writes``) went out of bounds; ``density`` colours lanes per element
    (reads + writes) from light to dark blue (white: none), out-of-bounds cells of either kind red.
    Cells outside the tensor are :data:`OUTSIDE_COLOR`, padding after a wrapped 1-D line is
    transparent, and the tensor's outline is drawn where the canvas extends beyond it. Where cells
    are smaller than 8 pixels, out-of-bounds cells get a red halo 2 pixels wide, drawn only on the
    extended canvas (never over the tensor or the padding), so that a single one stays visible.

    Args:
        data: from :func:`heatmap_data`.
        panel: one of :data:`PANELS`.
        scale: pixels along a cell's shorter side (>= 1); default: see :func:`cell_pixels`.

    Returns:
        uint8 array, shape ``(rows * ph, cols * pw, 4)`` (RGBA), ``(ph, pw) = cell_pixels(data, scale)``.

    Raises:
        ValueError: an unknown ``panel`` or ``scale`` < 1.
    """
    if panel not in PANELS:
        raise ValueError(f"unknown panel {panel!r}; expected one of {PANELS}")
    h, w = data.grid_shape
    ph, pw = cell_pixels(data, scale)
    rgb = np.empty((h, w, 3), dtype=np.uint8)
    rgb[...] = hex_to_rgb(UNTOUCHED_COLOR)
    if panel == "density":
        per_elem = _lanes_per_element(data)
        touched = per_elem > 0
        if data.density_max > 0:
            rgb[touched] = _density_rgb(per_elem / data.density_max)[touched]
        oob = (data.oob_reads + data.oob_writes) > 0
    else:
        prog = data.read_program if panel == "reads" else data.write_program
        count = data.reads if panel == "reads" else data.writes
        touched = (prog >= 0) | (count > 0)
        rgb[touched] = _palette_rgb(np.maximum(prog[touched], 0))
        oob = (data.oob_reads if panel == "reads" else data.oob_writes) > 0
    outside = ~data.inside & ~data.pad
    rgb[outside] = hex_to_rgb(OUTSIDE_COLOR)
    rgb[oob] = hex_to_rgb(OOB_COLOR)
    alpha = np.where(data.pad, 0, 255).astype(np.uint8)

    img = np.concatenate([rgb, alpha[..., None]], axis=2)
    img = np.repeat(np.repeat(img, ph, axis=0), pw, axis=1)
    if min(ph, pw) >= 6:  # faint lines between cells
        grid = np.zeros(img.shape[:2], dtype=bool)
        grid[::ph, :] = True
        grid[:, ::pw] = True
        img[grid, :3] = (img[grid, :3].astype(np.int32) * 9 // 10).astype(np.uint8)
    if outside.any():  # the tensor's outline
        ins = np.repeat(np.repeat(data.inside, ph, axis=0), pw, axis=1)
        edge = np.zeros_like(ins)
        edge[1:, :] |= ins[1:, :] != ins[:-1, :]
        edge[:-1, :] |= ins[1:, :] != ins[:-1, :]
        edge[:, 1:] |= ins[:, 1:] != ins[:, :-1]
        edge[:, :-1] |= ins[:, 1:] != ins[:, :-1]
        edge &= ins
        img[edge, :3] = hex_to_rgb(EDGE_COLOR)
        img[edge, 3] = 255
    if oob.any() and min(ph, pw) < 8:  # small cells: a red halo outside the tensor makes them findable
        big = np.repeat(np.repeat(oob, ph, axis=0), pw, axis=1)
        halo = big.copy()
        for _ in range(2):
            grown = halo.copy()
            grown[1:, :] |= halo[:-1, :]
            grown[:-1, :] |= halo[1:, :]
            grown[:, 1:] |= halo[:, :-1]
            grown[:, :-1] |= halo[:, 1:]
            halo = grown
        canvas = np.repeat(np.repeat(data.inside | data.pad, ph, axis=0), pw, axis=1)
        halo &= ~canvas
        img[halo, :3] = hex_to_rgb(OOB_COLOR)
        img[halo, 3] = 255
    return img


def heatmap_png(data: HeatmapData, panel: str, scale: Optional[int] = None) -> bytes:
    """:func:`heatmap_rgba` encoded as PNG (Pillow).

    Args: as :func:`heatmap_rgba`.

    Returns:
        The PNG file's bytes.

    Raises:
        ValueError: as :func:`heatmap_rgba`.
        MissingDependency: Pillow is not installed (``pip install 'tritonkit[report]'``).
    """
    image = require("PIL.Image", "drawing a memory-access heatmap")
    buf = io.BytesIO()
    image.fromarray(heatmap_rgba(data, panel, scale), mode="RGBA").save(buf, format="PNG", optimize=True)
    return buf.getvalue()


def heatmap_data_uri(data: HeatmapData, panel: str, scale: Optional[int] = None) -> str:
    """:func:`heatmap_png` as a ``data:image/png;base64,...`` URI (for an ``<img src>``).

    Args / Raises: as :func:`heatmap_png`.

    Returns:
        The URI (ASCII).
    """
    return "data:image/png;base64," + base64.b64encode(heatmap_png(data, panel, scale)).decode("ascii")
