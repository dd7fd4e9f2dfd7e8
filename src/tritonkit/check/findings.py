"""Findings: what the checks report, as plain data that round-trips through JSON.

A *violation* is one bad access of one program (one load/store/atomic op, the lanes that broke a
rule). Violations of the same rule at the same place (kind, kernel, file, line, argument) are
folded into one :class:`Finding` with counts, the first program ids and the elements touched.

Nothing here knows a finding kind by name: how a kind's findings fold and read (message, hint)
comes from its description (a :class:`KindRules`, declared by the check that makes the kind, see
:mod:`tritonkit.check.checks`), which the session hands to the :class:`FindingLog`.
"""
from __future__ import annotations

import dataclasses
import json
import linecache
import math
import os
import typing
from typing import Any, Callable, Dict, List, Mapping, Optional, Protocol, Sequence, Tuple

import numpy as np

_MAX_PROGRAMS = 8  # program ids kept in a finding
_MAX_ELEMENTS = 1 << 16  # distinct element offsets kept per finding to describe them
_SHOWN_INDICES = 8


class KindRules(Protocol):
    """How the findings of one kind fold and read (implemented by
    :class:`tritonkit.check.checks.base.FindingKind`).

    Attributes:
        by_origin: findings are placed on the line where a bad value was made and folded by that
            line, whatever the value then reached (not also by the argument).
        first_message_only: the first occurrence's message stands for all (it quotes values).
    """

    by_origin: bool
    first_message_only: bool

    def message(self, f: "Finding") -> str:
        """A one-line description of a folded finding that its violations gave no message for."""

    def hint(self, f: "Finding") -> str:
        """A one-line suggestion for the finding ("" for none)."""

    def facts(self, f: "Finding") -> List[Tuple[str, str]]:
        """``[(label, text)]`` of this kind that a report shows under the generic facts."""


class _Plain:
    """The rules of a kind nothing describes: folded by place, its kind name as the message."""

    by_origin = False
    first_message_only = False

    def message(self, f: "Finding") -> str:
        return f.kind

    def hint(self, f: "Finding") -> str:
        return ""

    def facts(self, f: "Finding") -> List[Tuple[str, str]]:
        return []


_PLAIN = _Plain()


@dataclasses.dataclass
class Frame:
    """A place in kernel source: ``file``, 1-based ``line``, the jitted function's name."""

    file: str
    line: int
    function: str

    def source(self) -> str:
        """The text of the line (without its newline; "" where the file cannot be read)."""
        return linecache.getline(self.file, self.line).rstrip("\n")

    def at(self) -> str:
        """``file.py:LINE`` (the file's base name), as messages quote a place."""
        return f"{os.path.basename(self.file)}:{self.line}"


@dataclasses.dataclass
class Violation:
    """One access of one program that broke a rule (before folding).

    Attributes:
        kind: the finding kind, e.g. ``"out_of_bounds"`` (see :data:`tritonkit.check.FINDING_KINDS`).
        kernel: the kernel's name.
        frames: kernel source frames, innermost first (device functions, then the kernel).
        program_id: the program's (x, y, z) id.
        access: the operation, e.g. ``"load"``, ``"store"``, ``"atomic_add"``.
        masked: whether the access had a mask.
        lanes: how many lanes broke the rule.
        arg: the tensor argument's description (name, shape, dtype, strides) or None.
        offsets: element coordinates of the offending lanes in the argument, int64 ``(n, ndim)``.
        reason: a finer cause (``past_end``, ``before_start``, ``outside_view``, ``misaligned``,
            ``no_argument``, ``outside_block_shape``) or a message.
        config: the autotune config the launch ran under, or None.
        addresses: for lanes that point into no argument, their addresses.
    """

    kind: str
    kernel: str
    frames: List[Frame]
    program_id: Tuple[int, ...]
    access: str
    masked: bool
    lanes: int
    arg: Optional[dict] = None
    offsets: Optional[np.ndarray] = None
    reason: str = ""
    config: Optional[str] = None
    addresses: Optional[List[int]] = None
    message: str = ""
    example: Optional[dict] = None
    other: Optional[dict] = None  # data_race: the other side ({"access", "frames", "program_ids"})


@dataclasses.dataclass
class Finding:
    """One problem in a kernel, folded over every program and launch where it occurred.

    Attributes:
        kind: ``"out_of_bounds"``, ``"undefined_value"``, ``"data_race"``, ``"uninitialized_read"``,
            ``"int_overflow"``, ``"nan_inf"``, ``"assert_failed"``; ``"unsupported"``, ``"timeout"``
            and ``"kernel_error"`` when a launch could not finish (every kind:
            :data:`tritonkit.check.FINDING_KINDS`).
        kernel: the kernel's name.
        file, line: where in the source (1-based line), ``source`` the line's text.
        arg: the tensor argument's name (None when the address points into no argument).
        tensor: ``{"shape", "dtype", "strides"}`` of that argument (strides in elements).
        access: the operation(s), e.g. ``"load"``.
        masked: whether the access had a mask (``tl.load(p, mask=m)``) or was unmasked.
        count: offending lanes, summed over programs and launches.
        program_ids: the first few program ids (each ``[x]``, ``[x, y]`` or ``[x, y, z]``).
        num_programs: how many distinct programs had offending lanes.
        elements: the offending elements in the tensor's own coordinates, e.g. ``"x[1000:1024]"``.
        element_indices: the first few offending element indices.
        num_elements: how many distinct elements (capped at 65,536 for the description).
        reason: ``past_end``, ``before_start``, ``outside_view``, ``misaligned``, ``no_argument`` or
            ``outside_block_shape``:
            the reason of most offending lanes.
        reasons: offending lanes per reason, when the lanes of one line had several.
        configs: the autotune configs under which it occurred (empty when not autotuned).
        occurrences: how many (program, access) events were folded in.
        launches: how many launches it occurred in.
        hint: a one-line suggestion.
        call_stack: the jitted functions from the kernel down to the line (``file``, ``line``,
            ``function``), outermost first.
        message: a one-line description.
        examples: the first few occurrences' facts, per kind: for ``assert_failed`` ``{"program_id",
            "lanes" (indices in the block), "values" (the condition's variables at those lanes)}``; for
            ``int_overflow`` ``{"program_id", "values": [{"lane", "lhs", "rhs", "exact", "wrapped"}],
            "access_at"}``; for ``nan_inf`` ``{"program_id", "lane", "inputs", "result", "stored_at"}``;
            for ``out_of_bounds`` lanes outside a block pointer's declared shape ``{"program_id",
            "shape", "offsets", "block_shape", "boundary_check", "dims"}``.
        other: for ``data_race``, the other side of the race: ``{"file", "line", "source", "function",
            "access", "program_ids"}`` (the program ids that made it, first few).
        facts: ``[label, text]`` pairs its kind declares for reports to show under the generic
            facts (e.g. the other side of a race, an overflow's values), made with the finding.
        process: where a child process of the checked program made it: ``{"pid", "argv"}``
            (``"fork_of"``: the pid it was forked from, for a fork without exec); None for the
            checked program's own process.
    """

    kind: str
    kernel: str
    file: str
    line: int
    source: str = ""
    arg: Optional[str] = None
    tensor: Optional[dict] = None
    access: str = ""
    masked: bool = False
    count: int = 0
    program_ids: List[List[int]] = dataclasses.field(default_factory=list)
    num_programs: int = 0
    elements: str = ""
    element_indices: List[List[int]] = dataclasses.field(default_factory=list)
    num_elements: int = 0
    reason: str = ""
    reasons: Dict[str, int] = dataclasses.field(default_factory=dict)
    configs: List[str] = dataclasses.field(default_factory=list)
    occurrences: int = 0
    launches: int = 0
    hint: str = ""
    call_stack: List[dict] = dataclasses.field(default_factory=list)
    message: str = ""
    examples: List[dict] = dataclasses.field(default_factory=list)
    other: Optional[dict] = None
    facts: List[List[str]] = dataclasses.field(default_factory=list)
    process: Optional[dict] = None

    def to_dict(self) -> dict:
        """Plain JSON data (every attribute)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Finding":
        """The inverse of :meth:`to_dict`, tolerant (see :func:`read_fields`): unknown keys are
        ignored; a missing or malformed field takes its default (``kind`` ``"unknown"``, ``kernel``
        and ``file`` ``""``, ``line`` 0).

        Raises:
            TypeError: ``data`` is not a mapping.
        """
        return cls(**read_fields(cls, data, kind="unknown", kernel="", file="", line=0))


def read_fields(cls, data: Mapping[str, Any], **required) -> Dict[str, Any]:
    """The fields of the dataclass ``cls`` read from JSON data, for a tolerant ``from_dict``: each
    value of the annotated type (``str``, ``int``, ``float``, ``bool``, ``Optional[...]``, lists,
    dicts, tuples) is kept, an int where a float is expected is converted, anything else is left out
    (the field then takes its default, or the value given in ``required``); unknown keys are ignored.

    Raises:
        TypeError: ``data`` is not a mapping.
    """
    if not isinstance(data, Mapping):
        raise TypeError(f"a {cls.__name__} is a JSON object, not {type(data).__name__}")
    hints = _hints(cls)
    out = dict(required)
    for f in dataclasses.fields(cls):
        if f.name in data:
            ok, value = _read_value(data[f.name], hints[f.name])
            if ok:
                out[f.name] = value
    return out


_HINTS: Dict[type, Dict[str, Any]] = {}


def _hints(cls) -> Dict[str, Any]:
    got = _HINTS.get(cls)
    if got is None:
        got = _HINTS[cls] = typing.get_type_hints(cls)
    return got


def _read_value(v: Any, hint) -> Tuple[bool, Any]:
    """``(whether v can stand for the type hint, the value to use)``."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Union:  # Optional[X]
        if v is None:
            return True, None
        return _read_value(v, next(a for a in args if a is not type(None)))
    if hint is bool:
        return isinstance(v, bool), v
    if hint is int:
        return isinstance(v, int) and not isinstance(v, bool), v
    if hint is float:
        return isinstance(v, (int, float)) and not isinstance(v, bool), float(v) if isinstance(v, (int, float)) else v
    if hint is str:
        return isinstance(v, str), v
    if origin in (list, List) or hint is list:
        return isinstance(v, list), list(v) if isinstance(v, list) else v
    if origin in (dict, Dict) or hint is dict:
        return isinstance(v, Mapping), dict(v) if isinstance(v, Mapping) else v
    if origin in (tuple, Tuple) or hint is tuple:
        return isinstance(v, (list, tuple)), tuple(v) if isinstance(v, (list, tuple)) else v
    return True, v


class _Fold:
    """Accumulates violations with one key into a finding."""

    def __init__(self, v: Violation, ndim_grid: int, rules: KindRules):
        self.first = v
        self.index = 0  # its place among the log's findings (order of discovery)
        self.rules = rules
        self.ndim_grid = ndim_grid
        self.count = 0
        self.occurrences = 0
        self.programs: Dict[Tuple[int, ...], None] = {}
        self.elements: Dict[Tuple[int, ...], None] = {}
        self.elements_capped = False
        self.configs: Dict[str, None] = {}
        self.accesses: Dict[str, None] = {}
        self.masked = False
        self.launch_ids: Dict[int, None] = {}
        self.addresses: List[int] = []
        self.messages: Dict[str, None] = {}
        self.reasons: Dict[str, int] = {}
        self.examples: List[dict] = []
        self.other_programs: Dict[Tuple[int, ...], None] = {}

    def add(self, v: Violation, launch_id: int) -> None:
        self.count += v.lanes
        if v.reason:
            self.reasons[v.reason] = self.reasons.get(v.reason, 0) + v.lanes
        self.occurrences += 1
        self.programs.setdefault(tuple(v.program_id[: max(1, self.ndim_grid)]), None)
        if v.config is not None:
            self.configs.setdefault(v.config, None)
        self.accesses.setdefault(v.access, None)
        self.masked = self.masked or v.masked
        self.launch_ids.setdefault(launch_id, None)
        if v.message and (not self.messages or not self.rules.first_message_only):
            self.messages.setdefault(v.message, None)
        if v.offsets is not None and not self.elements_capped:
            for row in map(tuple, v.offsets.tolist()):
                self.elements.setdefault(row, None)
                if len(self.elements) >= _MAX_ELEMENTS:
                    self.elements_capped = True
                    break
        if v.example is not None and len(self.examples) < _MAX_PROGRAMS:
            self.examples.append(v.example)
        if v.other is not None and len(self.other_programs) < _MAX_PROGRAMS:
            for p in v.other.get("program_ids", []):
                self.other_programs.setdefault(tuple(p), None)
        if v.addresses and len(self.addresses) < _SHOWN_INDICES:
            self.addresses.extend(v.addresses[: _SHOWN_INDICES - len(self.addresses)])

    def _other(self) -> Optional[dict]:
        o = self.first.other
        if o is None:
            return None
        frames = o.get("frames") or []
        fr = frames[0] if frames else Frame("<unknown>", 0, "")
        return {"file": fr.file, "line": fr.line, "source": fr.source().strip(), "function": fr.function,
                "access": o.get("access", ""), "program_ids": [list(p) for p in self.other_programs][:_MAX_PROGRAMS]}

    def finding(self) -> Finding:
        v = self.first
        inner = v.frames[0] if v.frames else Frame("<unknown>", 0, v.kernel)
        arg = v.arg or {}
        elems = sorted(self.elements)
        name = arg.get("name")
        f = Finding(
            kind=v.kind, kernel=v.kernel, file=inner.file, line=inner.line, source=inner.source().strip(),
            arg=name, tensor={k: arg[k] for k in ("shape", "dtype", "strides")} if arg else None,
            access="/".join(self.accesses), masked=self.masked, count=self.count,
            program_ids=[list(p) for p in list(self.programs)[:_MAX_PROGRAMS]], num_programs=len(self.programs),
            elements=describe_elements(name, elems, self.elements_capped) if name else
            ", ".join(hex(a) for a in self.addresses),
            element_indices=[list(e) for e in elems[:_SHOWN_INDICES]], num_elements=len(elems),
            reason=max(self.reasons, key=self.reasons.get) if self.reasons else v.reason,
            reasons=dict(self.reasons), configs=list(self.configs), occurrences=self.occurrences,
            launches=len(self.launch_ids),
            call_stack=[dataclasses.asdict(fr) for fr in reversed(v.frames)], examples=list(self.examples),
            other=self._other(),
        )
        f.message = "; ".join(self.messages) if self.messages else self.rules.message(f)
        f.hint = self.rules.hint(f)
        f.facts = [[str(label), str(text)] for label, text in self.rules.facts(f)]
        return f


class _Given:
    """A finding made whole elsewhere (see :meth:`FindingLog.add_given`)."""

    def __init__(self, make: Callable[[], Finding]) -> None:
        self.make = make
        self.index = 0

    def finding(self) -> Finding:
        return self.make()


def _ranges(values: Sequence[int]) -> List[Tuple[int, int]]:
    out: List[Tuple[int, int]] = []
    for x in values:
        if out and x == out[-1][1]:
            out[-1] = (out[-1][0], x + 1)
        else:
            out.append((x, x + 1))
    return out


def _fmt_range(a: int, b: int) -> str:
    return str(a) if b == a + 1 else f"{a}:{b}"


def describe_elements(name: str, elems: Sequence[Tuple[int, ...]], capped: bool = False) -> str:
    """Describe element indices compactly in the tensor's coordinates.

    ``[(1000,), ..., (1023,)]`` gives ``"x[1000:1024]"``; 2-D sets give their bounding box,
    e.g. ``"x[0:64, 120:128]"`` (a row/column range per dim). ``capped`` adds ``" …"``.
    """
    if not elems:
        return ""
    more = " …" if capped else ""
    if len(elems[0]) == 1:
        rs = _ranges(sorted({e[0] for e in elems}))
        shown = ", ".join(f"{name}[{_fmt_range(a, b)}]" for a, b in rs[:4])
        return shown + (f" (+{len(rs) - 4} more ranges)" if len(rs) > 4 else "") + more
    arr = np.asarray(elems, dtype=np.int64)
    lo, hi = arr.min(axis=0), arr.max(axis=0) + 1
    box = ", ".join(_fmt_range(int(a), int(b)) for a, b in zip(lo, hi))
    return f"{name}[{box}]" + more


def short_path(path: str) -> str:
    """``path`` relative to the working directory when it lies under it, else as given (how reports
    show a kernel's file)."""
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return rel if not rel.startswith("..") else path


def process_label(process: dict) -> str:
    """A child process as reports name it: ``pid 4242: python worker.py --n 5`` (``, forked from pid 41``)."""
    argv = " ".join(str(a) for a in process.get("argv") or []) or "?"
    if len(argv) > 200:
        argv = argv[:199] + "…"
    fork = f", forked from pid {process['fork_of']}" if process.get("fork_of") else ""
    return f"pid {process.get('pid', '?')}: {argv}{fork}"


def program_label(p) -> str:
    """A program id as Python writes the tuple: ``(3,)``, ``(0, 1)``."""
    return "(" + ", ".join(str(i) for i in p) + ("," if len(p) == 1 else "") + ")"


class FindingLog:
    """Collects violations of a session and folds them into findings.

    Violations are folded by (kind, kernel, file, line, argument); kinds whose rules say
    ``by_origin`` (placed where a bad value was made) by line only; violations with another side
    (a data race) also by the other side's line and the reason.

    Args:
        kinds: the rules of each finding kind by name (kinds not in it fold by place and have their
            name as the message).
    """

    def __init__(self, kinds: Optional[Mapping[str, KindRules]] = None) -> None:
        self._folds: Dict[tuple, _Fold] = {}
        self._order: List[_Fold] = []
        self._kinds = dict(kinds or {})
        self._dirty: Dict[int, None] = {}

    def add(self, v: Violation, launch_id: int, grid_ndim: int) -> Tuple[int, bool]:
        """Record a violation; return ``(the index of its finding, whether it started that finding)``."""
        rules = self._kinds.get(v.kind, _PLAIN)
        inner = v.frames[0] if v.frames else None
        # one finding per tensor: the same argument name on a tensor of another shape, dtype or
        # strides (another launch's) is another finding, not folded under the first one's shape
        arg = v.arg or {}
        key = (v.kind, v.kernel, inner.file if inner else "", inner.line if inner else 0,
               None if rules.by_origin else (arg.get("name"), tuple(arg.get("shape") or ()), arg.get("dtype"),
                                             tuple(arg.get("strides") or ())))
        if v.other is not None:  # a race is a pair of lines
            o = v.other.get("frames") or []
            key += ((o[0].file, o[0].line) if o else None, v.reason)
        fold = self._folds.get(key)
        new = fold is None
        if new:
            fold = self._folds[key] = _Fold(v, grid_ndim, rules)
            fold.index = len(self._order)
            self._order.append(fold)
        fold.add(v, launch_id)
        self._dirty[fold.index] = None
        return fold.index, new

    def add_given(self, key: tuple, make: Callable[[], Finding]) -> Tuple[int, bool]:
        """Record a finding made whole elsewhere (on the GPU: see :mod:`tritonkit.check.launch.on_gpu`)
        under ``key``: ``make()`` gives it as it stands now (called again whenever it is read, so that
        what its key gathers later is in it). Returns ``(its index, whether it is new)``."""
        fold = self._folds.get(("given",) + key)
        new = fold is None
        if new:
            fold = self._folds[("given",) + key] = _Given(make)
            fold.index = len(self._order)
            self._order.append(fold)
        self._dirty[fold.index] = None
        return fold.index, new

    def finding(self, index: int) -> Finding:
        """The finding at ``index`` (order of discovery) as it stands now."""
        return self._order[index].finding()

    def take_changed(self) -> List[int]:
        """The indices of the findings changed since the last call (in order), and forget them."""
        out = sorted(self._dirty)
        self._dirty.clear()
        return out

    def __len__(self) -> int:
        return len(self._folds)

    def findings(self) -> List[Finding]:
        """The folded findings, in the order they were first seen."""
        return [fold.finding() for fold in self._order]


def to_json(data: Any, indent: Optional[int] = None) -> str:
    """``data`` as standard JSON: non-finite floats (a NaN/Inf result in a ``nan_inf`` finding, a NaN
    in an assert's values) as the strings ``"nan"``, ``"inf"``, ``"-inf"`` (JSON has no literal for
    them, and ``NaN`` would break standard parsers, a browser's ``JSON.parse``), numpy numbers and
    arrays as numbers and lists."""
    return json.dumps(_finite(data), indent=indent, default=_json_default, allow_nan=False)


def write_json(path: str, data: dict) -> None:
    """Write ``data`` as standard JSON (:func:`to_json`) to ``path`` atomically (a temporary file
    renamed over it).

    Raises:
        OSError: if the directory cannot be written; an existing file is left as it was.
    """
    from .._io import atomic_write_text
    atomic_write_text(path, to_json(data, indent=2) + "\n")


def _finite(obj):
    """``obj`` with non-finite floats replaced by their names (recursively through dicts/lists/tuples)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else str(obj)
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    if isinstance(obj, np.floating):
        return _finite(float(obj))
    return obj


def _json_default(obj):
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    return str(obj)
