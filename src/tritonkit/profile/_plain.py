"""Reading plain JSON values back tolerantly, for the ``from_dict`` of the profile's results: a value
of the wrong type or a non-finite number is treated as missing, never as an error."""
from __future__ import annotations

import math
from typing import Any, Callable, Dict, List, Mapping, Optional, TypeVar

T = TypeVar("T")


def number(x: Any) -> Optional[float]:
    """``x`` as a float where it is a finite int or float (not a bool), else None."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    return float(x) if math.isfinite(x) else None


def integer(x: Any, default: Optional[int] = 0) -> Optional[int]:
    """``x`` as an int where it is a finite number (floats truncated), else ``default``."""
    v = number(x)
    return default if v is None else int(v)


def text(x: Any, default: str = "") -> str:
    """``x`` as a string; ``default`` where it is None or empty."""
    return default if x is None or x == "" else str(x)


def optional_text(x: Any) -> Optional[str]:
    """``x`` as a string, or None where it is None or empty."""
    return None if x is None or x == "" else str(x)


def numbers(x: Any) -> Dict[str, float]:
    """A mapping's entries whose values are finite numbers, as ``{str: float}`` ({} for anything else)."""
    if not isinstance(x, Mapping):
        return {}
    out = {}
    for k, v in x.items():
        n = number(v)
        if n is not None:
            out[str(k)] = n
    return out


def mapping(x: Any) -> Dict[str, Any]:
    """A copy of ``x`` where it is a mapping, else {}."""
    return dict(x) if isinstance(x, Mapping) else {}


def strings(x: Any) -> List[str]:
    """``x``'s items as strings where it is a list or tuple, else []."""
    return [str(v) for v in x] if isinstance(x, (list, tuple)) else []


def require_mapping(d: Any, what: str) -> Mapping:
    """``d`` itself where it is a mapping.

    Raises:
        TypeError: ``d`` is not a mapping (the message names ``what``).
    """
    if not isinstance(d, Mapping):
        raise TypeError(f"{what} is a JSON object, not {type(d).__name__}")
    return d


def part(read: Callable[[Mapping[str, Any]], T], value: Any) -> Optional[T]:
    """``read(value)`` for a non-empty mapping; None for anything else, or where ``read`` raises
    TypeError or ValueError (a part that cannot be read is a missing part)."""
    if not isinstance(value, Mapping) or not value:
        return None
    try:
        return read(value)
    except (TypeError, ValueError):
        return None
