"""Keys and features of distillation: the tuned keys of one kernel with their times per config
(:class:`TunedKey`, :func:`collect`), the positions of a key (:class:`Source`: a named key argument
or the dtype of a tensor argument) and the features a tree splits on (:class:`Feature`: a number,
a ratio of two numbers, or a category)."""
from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from .._result import TuneResult
from .._space import Point

_DTYPE = re.compile(r"^(torch\.|tl\.|triton\.language\.)?(u?int\d+|float\d+\w*|bfloat16|fp\d+\w*|bf16|bool|"
                    r"complex\d+|half|double|float)$")


@dataclass
class TunedKey:
    """One tuning key of the kernel and what was measured there.

    Attributes:
        key: the key's values as strings.
        times: config name (:func:`~tritonkit.tune.point_key`) -> its best ``ok`` time, ms.
        bad: config name -> status, for configs measured there but never ``ok``.
        best: the fastest config's name.
        best_ms: its time, ms.
    """

    key: List[str]
    times: Dict[str, float]
    bad: Dict[str, str]
    best: str = ""
    best_ms: float = math.inf


def number(text: str) -> Optional[float]:
    """``text`` as a finite number, or None (booleans, non-numbers, inf and NaN are not numbers)."""
    if text in ("True", "False"):
        return None
    try:
        v = float(text)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def collect(results: Sequence[TuneResult], notes: List[str]) -> Tuple[List[TunedKey], Dict[str, Point], str]:
    """The tuned keys of one kernel from its tuning results.

    A key given twice is merged (a config measured twice counts with its best time); keys with no
    successful trial are skipped, with a note appended to ``notes``.

    Returns:
        ``(keys, config name -> point, kernel name)``.

    Raises:
        ValueError: no results, results of several kernels, or keys of different lengths.
    """
    results = list(results)
    if not results:
        raise ValueError("no tuning results to distil: tune the kernel at several shapes first")
    kernels = sorted({r.kernel for r in results})
    if len(kernels) > 1:
        raise ValueError(f"results of several kernels ({', '.join(kernels)}): distil one kernel at a time")
    lengths = sorted({len(r.key) for r in results})
    if len(lengths) > 1:
        raise ValueError(f"the tuned keys have different lengths ({lengths}): were they tuned with different "
                         "key arguments? distil results of one tuning key")
    points: Dict[str, Point] = {}
    merged: Dict[Tuple[str, ...], TunedKey] = {}
    for r in results:
        rec = merged.setdefault(tuple(str(v) for v in r.key), TunedKey([str(v) for v in r.key], {}, {}))
        for t in r.trials:
            name = t.key
            points.setdefault(name, dict(t.point))
            if t.ok:
                rec.times[name] = min(rec.times.get(name, math.inf), t.ms)
                rec.bad.pop(name, None)
            elif name not in rec.times:
                rec.bad[name] = t.status
    recs, skipped = [], []
    for rec in merged.values():
        if not rec.times:
            skipped.append(rec.key)
            continue
        rec.best = min(rec.times, key=lambda c: (rec.times[c], c))
        rec.best_ms = rec.times[rec.best]
        recs.append(rec)
    if skipped:
        notes.append(f"skipped {len(skipped)} key(s) with no successful trial: "
                     + "; ".join(",".join(k) for k in skipped[:5]) + (" ..." if len(skipped) > 5 else ""))
    return recs, points, kernels[0]


@dataclass
class Source:
    """One position of the key: a named key argument, or the j-th dtype of the tensor arguments.

    Attributes:
        pos: the position in the key.
        name: the key argument's name, or ``dtype<j>``.
        dtype_index: j for a dtype; None for a key argument (read as ``args[name]``).
    """

    pos: int
    name: str
    dtype_index: Optional[int] = None

    def expr(self) -> str:
        """The Python expression of this position in the generated ``choose_config(args)``."""
        return f"args[{self.name!r}]" if self.dtype_index is None else f"_dtypes(args)[{self.dtype_index}]"

    def from_args(self, args: Mapping[str, Any]) -> Any:
        """This position's value from the kernel's arguments by name (what :meth:`expr` computes).

        Raises:
            KeyError: a key argument is missing from ``args``.
        """
        if self.dtype_index is None:
            return args[self.name]
        return dtypes(args)[self.dtype_index]


def dtypes(args: Mapping[str, Any]) -> List[str]:
    """The dtypes of the tensor arguments in argument order, as ``triton.autotune`` appends them to its key."""
    return [str(v.dtype) for v in args.values() if hasattr(v, "dtype")]


def ratio(a: float, b: float) -> float:
    """``a / b``, or ``inf`` where ``b`` is 0."""
    return a / b if b else math.inf


@dataclass
class Feature:
    """A feature: ``num`` (a source's number), ``ratio`` (a/b of two sources), ``cat`` (source == value).

    Attributes:
        kind: ``"num"``, ``"ratio"`` or ``"cat"``.
        sources: the one source (two for a ratio).
        log: the tree is fitted on log2 of the value (positive numbers: a split lies at the
            geometric middle); it matters only while fitting.
        value: for ``cat``, the value compared with.
    """

    kind: str
    sources: Tuple[Source, ...]
    log: bool = False
    value: str = ""

    @property
    def name(self) -> str:
        """``"M"``, ``"M/N"`` or ``"dtype0 == 'torch.float16'"``."""
        if self.kind == "num":
            return self.sources[0].name
        if self.kind == "ratio":
            return f"{self.sources[0].name}/{self.sources[1].name}"
        return f"{self.sources[0].name} == {self.value!r}"

    def raw_from_key(self, key: Sequence[str]) -> float:
        """The feature's value at a tuning key (1.0/0.0 for a category).

        Raises:
            ValueError: a numeric feature's key entry is not a number.
        """
        vals = [key[s.pos] for s in self.sources]
        if self.kind == "cat":
            return 1.0 if vals[0] == self.value else 0.0
        nums = [number(v) for v in vals]
        if any(n is None for n in nums):
            raise ValueError(f"key entry for {self.name} is not a number: {vals}")
        return nums[0] if self.kind == "num" else ratio(nums[0], nums[1])

    def raw_from_args(self, args: Mapping[str, Any]) -> float:
        """The feature's value from the kernel's arguments by name (1.0/0.0 for a category).

        Raises:
            KeyError: a key argument is missing from ``args``.
        """
        vals = [s.from_args(args) for s in self.sources]
        if self.kind == "cat":
            return 1.0 if str(vals[0]) == self.value else 0.0
        return float(vals[0]) if self.kind == "num" else ratio(vals[0], vals[1])

    def model_value(self, raw: float) -> float:
        """What the tree is fitted on: log2 for positive numbers (geometric split points)."""
        if not self.log:
            return raw
        if raw <= 0:
            return -1e9
        return math.log2(raw) if math.isfinite(raw) else 1e9

    def condition(self, threshold: float) -> str:
        """Python source of the test that sends a launch to the first (``<=``) branch."""
        if self.kind == "cat":
            s = self.sources[0]
            value = s.expr() if s.dtype_index is not None else f"str({s.expr()})"
            return f"{value} != {self.value!r}"
        if self.kind == "num":
            return f"{self.sources[0].expr()} <= {num_text(threshold)}"
        return f"_ratio({self.sources[0].expr()}, {self.sources[1].expr()}) <= {num_text(threshold)}"


def num_text(v: float) -> str:
    """A number as short Python source: an int where it is whole, else its repr."""
    if isinstance(v, int) or (float(v).is_integer() and abs(v) < 2 ** 53):
        return str(int(v))
    return repr(float(v))


def key_sources(keys: List[List[str]], key_names: Optional[Sequence[str]], notes: List[str]) -> List[Source]:
    """The sources of the key's positions: ``key_names`` for the first ones, ``dtype<j>`` for the rest.

    Args:
        keys: the tuned keys (all of one length).
        key_names: the key arguments' names in key order; None: ``key0``, ``key1``, ... up to the
            first position whose values all look like dtypes (with a note).
        notes: where a note is appended.

    Raises:
        ValueError: an empty or repeated name, more names than positions, or a position past the
            names that is not a dtype.
    """
    length = len(keys[0])
    if key_names is not None:
        names = [str(n).strip() for n in key_names]
        if any(not n for n in names):
            raise ValueError(f"key_names has an empty name: {list(key_names)}")
        if len(names) > length:
            raise ValueError(f"key_names names {len(names)} key arguments ({', '.join(names)}) but the tuned keys "
                             f"have {length} entries, e.g. {keys[0]}")
        if len(set(names)) != len(names):
            raise ValueError(f"key_names repeats a name: {names}")
    else:
        n_args = 0
        while n_args < length and not all(_DTYPE.match(k[n_args]) for k in keys):
            n_args += 1
        names = [f"key{i}" for i in range(n_args)]
        if names:
            notes.append(f"no key names given: the key arguments are called {', '.join(names)} in the generated "
                         "function; pass key_names (--key-names M,N,K) so that it reads the kernel's arguments")
    out = [Source(i, n) for i, n in enumerate(names)]
    for i in range(len(names), length):
        column = [k[i] for k in keys]
        if not all(_DTYPE.match(v) for v in column):
            raise ValueError(f"key entry {i} ({', '.join(sorted(set(column))[:4])}) is not a dtype, but key_names names "
                             f"only {len(names)} key arguments ({', '.join(names) or 'none'}): give a name for each "
                             "key argument, in the order of the tuning key (e.g. --key-names M,N,K)")
        out.append(dtype_source(i, i - len(names)))
    return out


def dtype_source(pos: int, j: int) -> Source:
    """The source of key position ``pos``, the ``j``-th dtype of the tensor arguments."""
    return Source(pos, f"dtype{j}", dtype_index=j)


def key_features(keys: List[List[str]], sources: List[Source], ratios: bool, notes: List[str]) -> List[Feature]:
    """The features a tree may split on: numeric key arguments (on a log scale where all are
    positive), categories for other values and dtypes, and where ``ratios`` the pairwise ratios of
    2 to 4 positive numeric arguments. Features constant over all keys are left out (noted)."""
    feats: List[Feature] = []
    positive_args: List[Source] = []
    dropped = []
    for s in sources:
        column = [k[s.pos] for k in keys]
        nums = [number(v) for v in column]
        if s.dtype_index is None and all(n is not None for n in nums):
            if len(set(nums)) == 1:
                dropped.append(s.name)
                continue
            positive = all(n > 0 for n in nums)
            feats.append(Feature("num", (s,), log=positive))
            if positive:
                positive_args.append(s)
        else:
            values = sorted(set(column))
            if len(values) == 1:
                dropped.append(s.name)
                continue
            for v in values[:-1] if len(values) == 2 else values:
                feats.append(Feature("cat", (s,), value=v))
    if ratios and 2 <= len(positive_args) <= 4:
        for i, a in enumerate(positive_args):
            for b in positive_args[i + 1:]:
                f = Feature("ratio", (a, b), log=True)
                if len({f.raw_from_key(k) for k in keys}) > 1:
                    feats.append(f)
    if dropped:
        notes.append(f"the same at every key, so not used: {', '.join(dropped)}")
    return feats


def feature_from_name(name: str, sources: Sequence[Source]) -> Feature:
    """The feature :attr:`Feature.name` names, over ``sources`` (for a result read back from JSON).

    A source's own name is a number (``"M"``); ``"a == 'v'"`` a category; ``"a/b"`` a ratio. The
    ``log`` flag is not in the name (it matters only for fitting): numbers come back with
    ``log=False``, ratios with ``log=True``.

    Raises:
        ValueError: the name does not name a feature of these sources.
    """
    by_name = {s.name: s for s in sources}
    if name in by_name:
        return Feature("num", (by_name[name],))
    src, eq, value = name.partition(" == ")
    if eq and src in by_name:
        try:
            text = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            text = None
        if isinstance(text, str):
            return Feature("cat", (by_name[src],), value=text)
    a, slash, b = name.partition("/")
    if slash and a in by_name and b in by_name:
        return Feature("ratio", (by_name[a], by_name[b]), log=True)
    raise ValueError(f"{name!r} is not a feature of the key ({', '.join(by_name) or 'no positions'})")
