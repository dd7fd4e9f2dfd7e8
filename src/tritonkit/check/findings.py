"""Findings: what the checks report, as plain data that round-trips through JSON.

A *violation* is one bad access of one program (one load/store/atomic op, the lanes that broke a
rule). Violations of the same rule at the same place (kind, kernel, file, line, argument) are
folded into one :class:`Finding` with counts, the first program ids and the elements touched.
"""
from __future__ import annotations

import dataclasses
import json
import linecache
import math
import os
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

KINDS = ("out_of_bounds", "undefined_value", "data_race", "uninitialized_read", "nan_inf", "int_overflow",
         "assert_failed",
         "unsupported", "timeout", "kernel_error")
_MAX_PROGRAMS = 8  # program ids kept in a finding
_MAX_ELEMENTS = 1 << 16  # distinct element offsets kept per finding to describe them
_SHOWN_INDICES = 8
# kinds placed on the line where a bad value was made: one finding per line, whatever it then reached
_BY_ORIGIN = ("int_overflow", "nan_inf")
# kinds whose message quotes one occurrence's values: the first occurrence's message stands for all
_FIRST_MESSAGE_ONLY = ("int_overflow", "nan_inf", "uninitialized_read", "undefined_value")


@dataclasses.dataclass
class Frame:
    """A place in kernel source: ``file``, 1-based ``line``, the jitted function's name."""

    file: str
    line: int
    function: str

    def source(self) -> str:
        return linecache.getline(self.file, self.line).rstrip("\n")

    def at(self) -> str:
        """``file.py:LINE`` (the file's base name), as messages quote a place."""
        return f"{os.path.basename(self.file)}:{self.line}"


@dataclasses.dataclass
class Violation:
    """One access of one program that broke a rule (before folding).

    Attributes:
        kind: one of :data:`KINDS`.
        kernel: the kernel's name.
        frames: kernel source frames, innermost first (device functions, then the kernel).
        program_id: the program's (x, y, z) id.
        access: the operation, e.g. ``"load"``, ``"store"``, ``"atomic_add"``.
        masked: whether the access had a mask.
        lanes: how many lanes broke the rule.
        arg: the tensor argument's description (name, shape, dtype, strides) or None.
        offsets: element coordinates of the offending lanes in the argument, int64 ``(n, ndim)``.
        reason: a finer cause (``past_end``, ``before_start``, ``outside_view``, ``misaligned``,
            ``no_argument``) or a message.
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
        kind: ``"out_of_bounds"`` (and, as later checks land, ``"data_race"``,
            ``"uninitialized_read"``, ``"nan_inf"``, ``"int_overflow"``, ``"assert_failed"``);
            ``"unsupported"``, ``"timeout"`` and ``"kernel_error"`` when a launch could not finish.
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
        reason: ``past_end``, ``before_start``, ``outside_view``, ``misaligned`` or ``no_argument``:
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
            "access_at"}``; for ``nan_inf`` ``{"program_id", "lane", "inputs", "result", "stored_at"}``.
        other: for ``data_race``, the other side of the race: ``{"file", "line", "source", "function",
            "access", "program_ids"}`` (the program ids that made it, first few).
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

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "Finding":
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


class _Fold:
    """Accumulates violations with one key into a finding."""

    def __init__(self, v: Violation, ndim_grid: int):
        self.first = v
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
        if v.message and (not self.messages or v.kind not in _FIRST_MESSAGE_ONLY):
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
        f.message = "; ".join(self.messages) if self.messages else _message(f)
        f.hint = _hint(f)
        return f


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


_REASON_TEXT = {
    "past_end": "past the end of",
    "before_start": "before the start of",
    "outside_view": "outside the view (inside the storage) of",
    "misaligned": "misaligned in",
    "no_argument": "outside every tensor argument",
}


def _message(f: Finding) -> str:
    if f.kind == "out_of_bounds":
        where = _REASON_TEXT.get(f.reason, "outside")
        target = f" `{f.arg}`" if f.arg and f.reason != "no_argument" else ""
        progs = f"{f.num_programs} program" + ("s" if f.num_programs != 1 else "")
        msg = f"{f.access} {where}{target}: {f.count} lane" + ("s" if f.count != 1 else "") + f" in {progs}"
        if len(f.reasons) > 1:
            msg += " (" + ", ".join(f"{n} {_REASON_TEXT.get(r, r).replace(' of', '').replace(' in', '')}"
                                    for r, n in sorted(f.reasons.items(), key=lambda kv: -kv[1])) + ")"
        return msg
    if f.kind == "data_race" and f.reason == "same_program":
        mine = program_label(f.program_ids[0]) if f.program_ids else "?"
        return (f"{f.access} of `{f.arg}` in program {mine}: lanes of this one {f.access} write different values to "
                f"{f.elements}; which lane's value lands is undefined on the GPU")
    if f.kind == "data_race" and f.other:
        o = f.other
        mine = program_label(f.program_ids[0]) if f.program_ids else "?"
        theirs = program_label(o["program_ids"][0]) if o.get("program_ids") else "?"
        what = {"write_write": "both store", "write_read": "one stores what the other loads",
                "read_write": "one loads what the other stores"}.get(f.reason, f.reason)
        return (f"{f.access} of `{f.arg}` in program {mine} races with the {o['access']} at line {o['line']} in "
                f"program {theirs}: {what} {f.elements or 'the same elements'}, with no atomic or lock between them")
    if f.kind == "uninitialized_read":
        return f"{f.access} reads {f.elements} before anything wrote it"
    return f.kind


def program_label(p) -> str:
    """A program id as Python writes the tuple: ``(3,)``, ``(0, 1)``."""
    return "(" + ", ".join(str(i) for i in p) + ("," if len(p) == 1 else "") + ")"


def _hint(f: Finding) -> str:
    if f.kind == "out_of_bounds":
        if f.reason == "misaligned":
            return "the address is not a multiple of the element size: check pointer casts and byte offsets"
        if f.reason == "no_argument":
            return ("the pointer points into no tensor argument: check pointers loaded from memory or "
                    "built from integers")
        if f.reason == "outside_view":
            return ("the address is inside the tensor's storage but not in this view: index with the view's "
                    "strides (x.stride(0)) and bound by its shape, not the underlying tensor's")
        if f.reason == "before_start":
            return "negative offsets: check the index arithmetic (pid/offset minus something) or mask i >= 0"
        if not f.masked:
            extra = " (and other= for the value of masked-off lanes)" if "load" in f.access else ""
            return f"this {f.access} has no mask: add mask=offsets < n{extra} to it"
        return ("the mask lets these lanes through: check its bound (< vs <=, the tail of the last block, "
                "the right size for this dimension)")
    if f.kind == "unsupported":
        return "the CPU interpreter cannot run this operation; check the rest of the kernel without it"
    if f.kind == "timeout":
        return "a loop that never ends? check its condition (spin locks wait on other programs, which run later here)"
    if f.kind == "undefined_value":
        return ("on the GPU masked-off lanes of a load without other= hold garbage: give the load other= (0 for a "
                "sum, -inf for a max), or mask the store/reduction the same way")
    if f.kind == "assert_failed":
        if f.access == "static_assert":
            return "a compile-time assertion failed for these constexpr values: the GPU compile would fail too"
        return "the condition is false in the lanes listed; the values of its variables there are under examples"
    if f.kind == "data_race":
        if f.reason == "same_program":
            return ("several lanes of one block hit the same element (e.g. repeated histogram bins): use an atomic "
                    "(tl.atomic_add) so every lane's update counts")
        if f.reason == "write_write":
            return ("two programs store the same elements: check that the grid matches the data (one program per "
                    "row/tile), or combine partial results with tl.atomic_add")
        return ("programs run in no defined order: a value one program stores is not visible to another unless "
                "ordered (an atomic flag/lock), or the work is split so no element is shared")
    if f.kind == "uninitialized_read":
        return ("the buffer comes from torch.empty (or mark_uninitialized): allocate it with torch.zeros, or store "
                "before loading (e.g. initialize the accumulator in registers, not by loading the output)")
    if f.kind == "int_overflow":
        return ("compute offsets in 64 bits: cast the program id or the index first, e.g. "
                "pid.to(tl.int64) * stride, or annotate the argument (stride: tl.int64)")
    if f.kind == "nan_inf":
        if f.reason == "loaded":
            return "the input already holds NaN/Inf: look at what produced it before this kernel"
        return ("this operation is where the NaN/Inf is made from finite values: e.g. subtract the row max "
                "before exp, guard divisions, accumulate in float32")
    if f.kind == "kernel_error":
        return "the kernel raised while it ran in the interpreter; the message says why"
    return ""


class FindingLog:
    """Collects violations of a session and folds them into findings.

    Violations are folded by (kind, kernel, file, line, argument); ``int_overflow`` and ``nan_inf``
    (placed where the value was made) by line only; data races also by the other side's line and the
    kind of conflict.
    """

    def __init__(self) -> None:
        self._folds: Dict[tuple, _Fold] = {}

    def add(self, v: Violation, launch_id: int, grid_ndim: int) -> bool:
        """Record a violation; return True if it started a new finding."""
        inner = v.frames[0] if v.frames else None
        key = (v.kind, v.kernel, inner.file if inner else "", inner.line if inner else 0,
               None if v.kind in _BY_ORIGIN else (v.arg or {}).get("name"))
        if v.other is not None:  # a race is a pair of lines
            o = v.other.get("frames") or []
            key += ((o[0].file, o[0].line) if o else None, v.reason)
        fold = self._folds.get(key)
        new = fold is None
        if new:
            fold = self._folds[key] = _Fold(v, grid_ndim)
        fold.add(v, launch_id)
        return new

    def __len__(self) -> int:
        return len(self._folds)

    def findings(self) -> List[Finding]:
        return [fold.finding() for fold in self._folds.values()]


def write_json(path: str, data: dict) -> None:
    """Write ``data`` as standard JSON to ``path`` atomically (a temporary file renamed over it).

    Non-finite floats (a NaN/Inf result in a ``nan_inf`` finding, a NaN in an assert's values) are
    written as the strings ``"nan"``, ``"inf"``, ``"-inf"``: JSON has no literal for them, and
    ``NaN`` would break standard parsers (a browser's ``JSON.parse``).

    Raises:
        OSError: if the directory cannot be written; an existing file is left as it was.
    """
    from .._io import atomic_write_text
    atomic_write_text(path, json.dumps(_finite(data), indent=2, default=_json_default, allow_nan=False) + "\n")


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
