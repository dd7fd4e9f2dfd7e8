"""Search spaces and points: plain dicts of meta-parameter values, and their canonical names.

A *point* is one config as a plain dict: the kernel's meta-parameters (``BLOCK_M``: 128, ...) plus
the compiler options ``num_warps``, ``num_stages`` and, where given, ``num_ctas`` and ``maxnreg``.
Points, not ``triton.Config`` objects, travel between the parts of the tuner (strategies, runners,
the cache): they are hashable through :func:`point_key` and round-trip through JSON.
"""
from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

#: compiler options of ``triton.Config`` that a point may carry besides the meta-parameters.
COMPILER_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")
_DEFAULTS = {"num_warps": 4, "num_stages": 3, "num_ctas": 1, "maxnreg": None}

Point = Dict[str, Any]
Constraint = Callable[[Point, Mapping[str, Any]], bool]


def point_key(point: Mapping[str, Any]) -> str:
    """The canonical name of a point: ``"BK=64,BM=128,num_stages=3,num_warps=8"``.

    Meta-parameters come first in name order, then the compiler options in name order; an option
    at Triton's default (``num_ctas=1``, ``maxnreg=None``) is left out, so a point written with or
    without it names the same config.
    """
    meta = sorted((k, v) for k, v in point.items() if k not in COMPILER_OPTIONS)
    opts = sorted((k, v) for k, v in point.items()
                  if k in COMPILER_OPTIONS and not (k in ("num_ctas", "maxnreg") and v == _DEFAULTS[k]))
    return ",".join(f"{k}={_fmt(v)}" for k, v in meta + opts)


def _fmt(v: Any) -> str:
    return repr(v) if isinstance(v, str) else str(v)


def parse_point_key(key: str) -> Point:
    """Inverse of :func:`point_key` (ints, floats, booleans, None and quoted strings).

    Raises:
        ValueError: ``key`` is not of the form ``name=value,name=value``.
    """
    out: Point = {}
    if not key:
        return out
    for part in key.split(","):
        name, sep, value = part.partition("=")
        if not sep or not name:
            raise ValueError(f"not a config key: {key!r} (expected name=value,name=value)")
        out[name.strip()] = _parse_value(value.strip())
    return out


def _parse_value(text: str) -> Any:
    if text in ("None", "True", "False"):
        return {"None": None, "True": True, "False": False}[text]
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


_TRITON_STR = re.compile(r"\s*([A-Za-z_][A-Za-z_0-9]*)\s*:\s*([^,]+)")


def point_from_triton_str(text: str) -> Point:
    """A point from ``str(triton.Config)``: ``"BM: 32, BN: 32, num_warps: 4, num_stages: 2, maxnreg: None"``
    (the form Triton prints and the shared landscape files use).

    Raises:
        ValueError: no ``name: value`` pair in ``text``.
    """
    pairs = _TRITON_STR.findall(text)
    if not pairs:
        raise ValueError(f"not a triton.Config string: {text!r}")
    return {k: _parse_value(v.strip()) for k, v in pairs}


def point_from_config(config) -> Point:
    """The point of a ``triton.Config`` (its ``kwargs`` and compiler options)."""
    point = dict(config.kwargs)
    for name in COMPILER_OPTIONS:
        point[name] = getattr(config, name, _DEFAULTS[name])
    return point


def config_from_point(point: Mapping[str, Any], pre_hook=None):
    """A ``triton.Config`` for ``point`` (imports triton)."""
    import triton
    meta = {k: v for k, v in point.items() if k not in COMPILER_OPTIONS}
    opts = {k: point.get(k, _DEFAULTS[k]) for k in COMPILER_OPTIONS}
    return triton.Config(meta, pre_hook=pre_hook, **opts)


@dataclass
class Space:
    """A search space: value choices per meta-parameter and compiler option, and constraints.

    Args:
        params: name -> the values to try, e.g. ``{"BLOCK_M": [64, 128], "num_warps": [4, 8]}``.
            ``num_warps`` and ``num_stages`` default to Triton's 4 and 3 when not given.
        constraints: functions ``f(point, key_args) -> bool``; a point is kept only where every one
            returns True. ``key_args`` maps the kernel's argument names to this launch's values
            (empty when the space is enumerated without a launch).

    Raises:
        ValueError: a parameter has no values, or a value list repeats a value.
    """

    params: Dict[str, Sequence[Any]]
    constraints: Sequence[Constraint] = field(default_factory=tuple)

    def __post_init__(self):
        if not isinstance(self.params, Mapping) or not self.params:
            raise ValueError("a Space needs at least one parameter: Space({'BLOCK': [64, 128]})")
        params = {}
        for name, values in self.params.items():
            values = list(values) if not isinstance(values, (str, bytes)) else [values]
            if not values:
                raise ValueError(f"Space parameter {name!r} has no values to try")
            if len(set(map(_fmt, values))) != len(values):
                raise ValueError(f"Space parameter {name!r} repeats a value: {values}")
            params[name] = values
        self.params = params
        if callable(self.constraints):
            self.constraints = (self.constraints,)
        self.constraints = tuple(self.constraints)

    @property
    def names(self) -> List[str]:
        """The parameters' names, in the order given."""
        return list(self.params)

    @property
    def size(self) -> int:
        """Number of points before constraints."""
        n = 1
        for v in self.params.values():
            n *= len(v)
        return n

    def points(self, key_args: Optional[Mapping[str, Any]] = None) -> List[Point]:
        """Every point of the space that passes the constraints, in a fixed order.

        Raises:
            ValueError: a constraint raised (its message and the point are in the error).
        """
        key_args = key_args or {}
        out = []
        names = self.names
        for values in itertools.product(*(self.params[n] for n in names)):
            point = dict(zip(names, values))
            for name in ("num_warps", "num_stages"):
                point.setdefault(name, _DEFAULTS[name])
            ok = True
            for c in self.constraints:
                try:
                    ok = bool(c(point, key_args))
                except Exception as e:  # a user's constraint with a bug: say where
                    raise ValueError(f"constraint {getattr(c, '__name__', c)!r} raised on {point_key(point)}: "
                                     f"{type(e).__name__}: {e}") from e
                if not ok:
                    break
            if ok:
                out.append(point)
        return out

    @classmethod
    def from_points(cls, points: Iterable[Mapping[str, Any]]) -> "Space":
        """The smallest grid that holds every point (used for strategies over a given config list)."""
        points = list(points)
        names: List[str] = []
        for p in points:
            names += [k for k in p if k not in names]
        params = {}
        for n in names:
            seen: List[Any] = []
            for p in points:
                v = p.get(n, _DEFAULTS.get(n))
                if all(_fmt(v) != _fmt(s) for s in seen):
                    seen.append(v)
            params[n] = _sorted(seen)
        return cls(params)


def _sorted(values: List[Any]) -> List[Any]:
    try:
        return sorted(values)
    except TypeError:
        return values


def neighbours(point: Point, space: Space) -> List[Tuple[str, Point]]:
    """The points one step away from ``point`` along one parameter (the next smaller and larger
    value of that parameter's choices), as ``(parameter, point)`` pairs."""
    out = []
    for name, values in space.params.items():
        keys = [_fmt(v) for v in values]
        try:
            i = keys.index(_fmt(point.get(name)))
        except ValueError:
            continue
        for j in (i - 1, i + 1):
            if 0 <= j < len(values):
                out.append((name, {**point, name: values[j]}))
    return out
