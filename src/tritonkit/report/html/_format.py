"""Formatting for the page: numbers read tolerantly and written with their units, CSS classes from
closed lists, and charts drawn as ``data:`` URIs (a chart that cannot be drawn says why instead)."""
from __future__ import annotations

import json
import math
from typing import Any, Callable, Optional, Sequence

from ..charts import svg_data_uri
from ._view import Chart

_EXAMPLE_CHARS = 400  # one example's JSON, at most


def num(x: Any) -> Optional[float]:
    """``x`` as a float where it is a finite int or float (not a bool), else None."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    return float(x) if math.isfinite(x) else None


def fmt(x: Any, spec: str, suffix: str = "") -> str:
    """``x`` formatted with ``spec`` and ``suffix``, or ``-`` where it is not a finite number."""
    v = num(x)
    return "-" if v is None else format(v, spec) + suffix


def ms_text(x: Any) -> str:
    """A time in ms as ``1.234 ms`` (under 1 us: ``0.5 us``), ``-`` where not a number."""
    v = num(x)
    if v is None:
        return "-"
    return f"{v:.4g} ms" if v >= 0.001 else f"{v * 1e3:.3g} us"


def bytes_text(x: Any) -> str:
    """A byte count as ``1.5 MB`` (decimal units), ``-`` where not a number."""
    v = num(x)
    if v is None:
        return "-"
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if v >= size:
            return f"{v / size:.3g} {unit}"
    return f"{v:.0f} B"


def program_text(p: Any) -> str:
    """A program id as ``(x, y, z)`` (a 1-tuple as ``(x,)``)."""
    if isinstance(p, (list, tuple)):
        return "(" + ", ".join(str(i) for i in p) + ("," if len(p) == 1 else "") + ")"
    return str(p)


def programs_text(ids: Any, total: Any = None) -> str:
    """The first 8 program ids, with how many programs there are in all."""
    ids = list(ids or [])
    text = ", ".join(program_text(p) for p in ids[:8])
    n = num(total)
    if n is not None and n > len(ids):
        text += f" ... ({int(n):,} programs in all)"
    elif n is not None:
        text += f" ({int(n):,} program{'s' if n != 1 else ''})"
    return text


def brief_json(value: Any, limit: int = _EXAMPLE_CHARS) -> str:
    """``value`` as JSON (repr where it is not JSON), cut to ``limit`` characters."""
    try:
        text = json.dumps(value, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def css(value: Any, allowed: Sequence[str], default: str) -> str:
    """A CSS class from a closed list (user data never becomes a class name of its own)."""
    return value if value in allowed else default


def chart(title: str, alt: str, draw: Callable) -> Chart:
    """A :class:`Chart` of ``draw()`` (a matplotlib figure) as an SVG ``data:`` URI; where it cannot
    be drawn (bad data, matplotlib missing), the chart carries the error instead of raising."""
    try:
        return Chart(title, svg_data_uri(draw()), alt)
    except Exception as e:  # a chart that cannot be drawn must not take the page down
        return Chart(title, "", alt, f"{type(e).__name__}: {e}")
