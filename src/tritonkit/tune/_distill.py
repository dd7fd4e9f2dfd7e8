"""Heuristics from data: distil the tuned winners of one kernel across many keys into a small
decision tree, rendered as a Python function for ``@triton.heuristics``, with its regret measured
on held-out keys.

The pipeline (:func:`distill`):

1. **Features** from each key (the tuning key's values, then the dtypes of tensor arguments, as
   ``triton.autotune`` builds it): numeric key arguments (``M``, ``N``, ``K``) and their pairwise
   ratios (``M/N``) as numbers (split on a log scale, so a threshold lies at the geometric middle
   between two tuned sizes), other key values and dtypes as categories. Features constant over
   all keys are left out.
2. **Labels that minimise regret**, not "the winner": many configs are within a few percent of each
   other at a key, and the winner among near-ties is noise. A greedy set cover picks a few configs,
   measured at every training key, such that each key has one within ``tolerance`` (3%) of its
   winner; each key is labelled with the first config of the cover (most general first) within
   the tolerance.
3. **A decision tree** (scikit-learn ``DecisionTreeClassifier``) with its depth (among 1..4) and
   whether it may split on ratios chosen by cross-validation on the speed it reaches, not on its
   accuracy (the simplest within 0.2% of the best); each leaf then
   returns the cover config with the best geometric-mean speed over the leaf's training keys, and
   splits whose two sides return the same config are merged.
4. **Regret on held-out keys** by nested cross-validation (the depth is chosen again inside each
   outer fold, so the estimate covers the whole procedure): per key, the tuned winner's time over
   the time of the config the function picks, from that key's own trials. Where the picked config
   was not measured at a key, the key counts as *unknown* (reported, never imputed); where it was
   measured but did not run correctly there, as *failed*.

scikit-learn is an optional dependency: ``pip install 'tritonkit[distill]'``.
"""
from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from ._result import TuneResult
from ._space import COMPILER_OPTIONS, Point, point_key

#: the default fewest keys (with a successful trial) that :func:`distill` works from.
MIN_KEYS = 4
#: the goal documented for distilled heuristics: this share of the per-key tuned speed (geomean)
#: on held-out keys.
GOAL = 0.95
#: speed assumed for a held-out key where the picked config was not measured or failed, only
#: while choosing the depth (never in the reported statistics).
_PENALTY_SPEED = 0.5
_DTYPE = re.compile(r"^(torch\.|tl\.|triton\.language\.)?(u?int\d+|float\d+\w*|bfloat16|fp\d+\w*|bf16|bool|"
                    r"complex\d+|half|double|float)$")


def _require_sklearn():
    try:
        from sklearn.tree import DecisionTreeClassifier
    except ImportError as e:  # pragma: no cover - exercised only without scikit-learn
        raise ImportError("tritonkit distill needs scikit-learn: pip install 'tritonkit[distill]' "
                          "(or pip install scikit-learn)") from e
    return DecisionTreeClassifier


# ----------------------------------------------------------------------------------------------
# result objects
# ----------------------------------------------------------------------------------------------

@dataclass
class Regret:
    """How a choice of config per key compares with the per-key tuned winners.

    Attributes:
        method: how the keys were held out (``"5-fold"``, ``"leave-one-out"``), or ``"training"``
            (the final function on the keys it was fitted on), or ``"given"`` (:func:`evaluate`).
        n: keys evaluated.
        n_known: keys where the picked config has a time (``n - len(unknown) - len(failed)``).
        speed_geomean: geometric mean over known keys of ``winner_ms / chosen_ms`` (1.0: as fast as
            tuning each key; the goal is >= :data:`GOAL`); None when no key is known.
        speed_worst: the smallest ``winner_ms / chosen_ms``; None when no key is known.
        slowdown_mean: mean over known keys of ``chosen_ms / winner_ms - 1`` (0.05: 5% slower).
        slowdown_worst: the largest such slowdown.
        unknown: keys where the picked config was not measured (its regret there is unknown).
        failed: keys where the picked config was measured but did not run correctly (failed,
            wrong, crashed or pruned).
        per_key: one dict per key: ``key``, ``chosen`` and ``winner`` (config names), ``winner_ms``,
            ``chosen_ms`` and ``speed`` (None unless known), ``status`` (``ok``/``unknown``/``failed``).
    """

    method: str
    n: int
    n_known: int
    speed_geomean: Optional[float]
    speed_worst: Optional[float]
    slowdown_mean: Optional[float]
    slowdown_worst: Optional[float]
    unknown: List[List[str]] = field(default_factory=list)
    failed: List[List[str]] = field(default_factory=list)
    per_key: List[Dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> Dict[str, Any]:
        """Returns: the statistics as plain JSON-ready values."""
        return {"method": self.method, "n": self.n, "n_known": self.n_known, "speed_geomean": self.speed_geomean,
                "speed_worst": self.speed_worst, "slowdown_mean": self.slowdown_mean,
                "slowdown_worst": self.slowdown_worst, "unknown": [list(k) for k in self.unknown],
                "failed": [list(k) for k in self.failed], "per_key": [dict(r) for r in self.per_key]}


@dataclass
class Distilled:
    """A distilled heuristic: the function's source, the tree behind it and its measured regret.

    Attributes:
        kernel: the kernel's name.
        key_names: the name of each key argument (positions past them are the dtypes of tensor
            arguments, read in the generated code as ``triton.autotune`` does).
        features: the features the tree could split on (``"M"``, ``"M/N"``, ``"dtype0 == 'torch.float16'"``).
        depth: the tree's maximum depth chosen by cross-validation (the generated ifs nest at most
            this deep; less where splits were merged).
        leaves: how many cases the final function has.
        cv_speed: ``"depth"`` or ``"depth+ratios"`` -> cross-validated geometric-mean speed of that
            variant on all keys (the selection score, where a key whose picked config is unknown or
            failed counts as speed 0.5; the simplest variant within ``depth_slack`` of the best wins).
        ratios: whether the tree may split on ratios of key arguments (chosen by cross-validation:
            only where they help).
        configs: the configs the function returns, in the order they first appear in it.
        cover: the set-cover configs the labels were drawn from (a superset of ``configs``).
        tolerance: a config within this fraction of a key's winner covers the key.
        n_keys: keys used (with at least one successful trial).
        goal: the documented goal for ``held_out.speed_geomean``.
        held_out: regret on held-out keys (nested cross-validation).
        baseline: regret on held-out keys of one config for all keys (the best on the training keys),
            for comparison.
        training: regret of the final function on the keys it was fitted on.
        source: the generated Python module (``choose_config(args) -> dict`` and ``HEURISTICS``).
        notes: keys skipped, features left out, configs not measured everywhere, ...
    """

    kernel: str
    key_names: List[str]
    features: List[str]
    depth: int
    leaves: int
    cv_speed: Dict[str, float]
    ratios: bool
    configs: List[Point]
    cover: List[Point]
    tolerance: float
    n_keys: int
    goal: float
    held_out: Regret
    baseline: Regret
    training: Regret
    source: str
    notes: List[str] = field(default_factory=list)
    _model: Any = field(default=None, repr=False, compare=False)

    @property
    def meets_goal(self) -> bool:
        """Whether the held-out geometric-mean speed is at least :attr:`goal`."""
        s = self.held_out.speed_geomean
        return s is not None and s >= self.goal

    def predict(self, key: Sequence[Any]) -> Point:
        """The config the distilled function picks for a tuning key (as in :attr:`TuneResult.key`).

        Raises:
            ValueError: ``key`` has a different length than the tuned keys.
        """
        return dict(self._model.points[self._model.predict_key([str(v) for v in key])])

    def choose_config(self, args: Mapping[str, Any]) -> Point:
        """The config for a launch, from the kernel's arguments by name (what the generated
        ``choose_config`` computes, without exec).

        Raises:
            KeyError: a key argument the function reads is missing from ``args``.
        """
        return dict(self._model.points[self._model.predict_args(args)])

    def splits_on(self) -> List[str]:
        """Returns: the features the generated function actually tests, in the order they first appear."""
        out: List[str] = []

        def walk(node):
            if node is None or node.leaf:
                return
            name = self._model.features[node.feature].name
            if name not in out:
                out.append(name)
            walk(node.left)
            walk(node.right)

        walk(self._model.root if self._model else None)
        return out

    def leaf_counts(self) -> Dict[str, Tuple[int, int]]:
        """Per config the tree picks (its :func:`~tritonkit.tune.point_key`): ``(training keys that
        reach it, how many of them it is within tolerance at)``, summed over its leaves."""
        counts: Dict[str, Tuple[int, int]] = {}
        for leaf in (self._model.root.leaves() if self._model else []):
            n, w = counts.get(leaf.config, (0, 0))
            counts[leaf.config] = (n + leaf.n_train, w + leaf.n_within)
        return counts

    def to_dict(self) -> Dict[str, Any]:
        """Returns: the result as plain JSON-ready values (the tree as nested dicts, the source as text)."""
        return {"kernel": self.kernel, "key_names": list(self.key_names), "features": list(self.features),
                "splits_on": self.splits_on(),
                "depth": self.depth, "leaves": self.leaves, "cv_speed": dict(self.cv_speed),
                "ratios": self.ratios,
                "configs": [dict(c) for c in self.configs], "cover": [dict(c) for c in self.cover],
                "tolerance": self.tolerance, "n_keys": self.n_keys, "goal": self.goal, "meets_goal": self.meets_goal,
                "held_out": self.held_out.to_dict(), "baseline": self.baseline.to_dict(),
                "training": self.training.to_dict(), "tree": self._model.root.to_dict(self._model) if self._model
                else None, "notes": list(self.notes), "source": self.source}


# ----------------------------------------------------------------------------------------------
# keys and features
# ----------------------------------------------------------------------------------------------

@dataclass
class _Key:
    key: List[str]
    times: Dict[str, float]       # config name -> best ok ms
    bad: Dict[str, str]           # config name -> status, for configs measured but never ok
    best: str = ""
    best_ms: float = math.inf


def _number(text: str) -> Optional[float]:
    if text in ("True", "False"):
        return None
    try:
        v = float(text)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


@dataclass
class _Source:
    """One position of the key: a named key argument, or the j-th dtype of the tensor arguments."""

    pos: int
    name: str
    dtype_index: Optional[int] = None   # None: a key argument read as args[name]

    def expr(self) -> str:
        return f"args[{self.name!r}]" if self.dtype_index is None else f"_dtypes(args)[{self.dtype_index}]"

    def from_args(self, args: Mapping[str, Any]) -> Any:
        if self.dtype_index is None:
            return args[self.name]
        return _dtypes(args)[self.dtype_index]


def _dtypes(args: Mapping[str, Any]) -> List[str]:
    """The dtypes of the tensor arguments in argument order, as ``triton.autotune`` appends them to its key."""
    return [str(v.dtype) for v in args.values() if hasattr(v, "dtype")]


def _ratio(a: float, b: float) -> float:
    return a / b if b else math.inf


@dataclass
class _Feature:
    """A feature: ``num`` (a source's number), ``ratio`` (a/b of two sources), ``cat`` (source == value)."""

    kind: str
    sources: Tuple[_Source, ...]
    log: bool = False
    value: str = ""

    @property
    def name(self) -> str:
        if self.kind == "num":
            return self.sources[0].name
        if self.kind == "ratio":
            return f"{self.sources[0].name}/{self.sources[1].name}"
        return f"{self.sources[0].name} == {self.value!r}"

    def raw_from_key(self, key: Sequence[str]) -> float:
        vals = [key[s.pos] for s in self.sources]
        if self.kind == "cat":
            return 1.0 if vals[0] == self.value else 0.0
        nums = [_number(v) for v in vals]
        if any(n is None for n in nums):
            raise ValueError(f"key entry for {self.name} is not a number: {vals}")
        return nums[0] if self.kind == "num" else _ratio(nums[0], nums[1])

    def raw_from_args(self, args: Mapping[str, Any]) -> float:
        vals = [s.from_args(args) for s in self.sources]
        if self.kind == "cat":
            return 1.0 if str(vals[0]) == self.value else 0.0
        return float(vals[0]) if self.kind == "num" else _ratio(vals[0], vals[1])

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
            return f"{self.sources[0].expr()} <= {_num_text(threshold)}"
        return f"_ratio({self.sources[0].expr()}, {self.sources[1].expr()}) <= {_num_text(threshold)}"


def _num_text(v: float) -> str:
    if isinstance(v, int) or (float(v).is_integer() and abs(v) < 2 ** 53):
        return str(int(v))
    return repr(float(v))


def _sources(keys: List[List[str]], key_names: Optional[Sequence[str]], notes: List[str]) -> List[_Source]:
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
    out = [_Source(i, n) for i, n in enumerate(names)]
    for i in range(len(names), length):
        column = [k[i] for k in keys]
        if not all(_DTYPE.match(v) for v in column):
            raise ValueError(f"key entry {i} ({', '.join(sorted(set(column))[:4])}) is not a dtype, but key_names names "
                             f"only {len(names)} key arguments ({', '.join(names) or 'none'}): give a name for each "
                             "key argument, in the order of the tuning key (e.g. --key-names M,N,K)")
        out.append(_Source(i, f"dtype{i - len(names)}", dtype_index=i - len(names)))
    return out


def _features(keys: List[List[str]], sources: List[_Source], ratios: bool, notes: List[str]) -> List[_Feature]:
    feats: List[_Feature] = []
    positive_args: List[_Source] = []
    dropped = []
    for s in sources:
        column = [k[s.pos] for k in keys]
        nums = [_number(v) for v in column]
        if s.dtype_index is None and all(n is not None for n in nums):
            if len(set(nums)) == 1:
                dropped.append(s.name)
                continue
            positive = all(n > 0 for n in nums)
            feats.append(_Feature("num", (s,), log=positive))
            if positive:
                positive_args.append(s)
        else:
            values = sorted(set(column))
            if len(values) == 1:
                dropped.append(s.name)
                continue
            for v in values[:-1] if len(values) == 2 else values:
                feats.append(_Feature("cat", (s,), value=v))
    if ratios and 2 <= len(positive_args) <= 4:
        for i, a in enumerate(positive_args):
            for b in positive_args[i + 1:]:
                f = _Feature("ratio", (a, b), log=True)
                if len({f.raw_from_key(k) for k in keys}) > 1:
                    feats.append(f)
    if dropped:
        notes.append(f"the same at every key, so not used: {', '.join(dropped)}")
    return feats


# ----------------------------------------------------------------------------------------------
# the tree
# ----------------------------------------------------------------------------------------------

@dataclass
class _Node:
    feature: int = -1              # -1: a leaf
    threshold: float = 0.0
    left: Optional["_Node"] = None
    right: Optional["_Node"] = None
    config: str = ""               # leaf: the config's name
    n_train: int = 0
    n_within: int = 0              # leaf: training keys where the config is within the tolerance
    speed: Optional[float] = None  # leaf: geomean speed on its training keys where known

    @property
    def leaf(self) -> bool:
        return self.feature < 0

    def walk(self, raw: Sequence[float]) -> "_Node":
        node = self
        while not node.leaf:
            node = node.left if raw[node.feature] <= node.threshold else node.right
        return node

    def depth(self) -> int:
        return 0 if self.leaf else 1 + max(self.left.depth(), self.right.depth())

    def leaves(self) -> List["_Node"]:
        return [self] if self.leaf else self.left.leaves() + self.right.leaves()

    def to_dict(self, model: "_Model") -> Dict[str, Any]:
        if self.leaf:
            return {"config": dict(model.points[self.config]), "n_train": self.n_train, "n_within": self.n_within,
                    "speed": self.speed}
        f = model.features[self.feature]
        return {"feature": f.name, "threshold": self.threshold, "test": f.condition(self.threshold),
                "n_train": self.n_train, "if_true": self.left.to_dict(model), "if_false": self.right.to_dict(model)}


@dataclass
class _Model:
    features: List[_Feature]
    sources: List[_Source]
    points: Dict[str, Point]
    root: _Node
    cover: List[str]
    length: int

    def raw_from_key(self, key: Sequence[str]) -> List[float]:
        return [f.raw_from_key(key) for f in self.features]

    def predict_key(self, key: Sequence[str]) -> str:
        if len(key) != self.length:
            raise ValueError(f"a key of {len(key)} entries; the tuned keys have {self.length}")
        return self.root.walk(self.raw_from_key(key)).config

    def predict_args(self, args: Mapping[str, Any]) -> str:
        node = self.root
        while not node.leaf:
            value = self.features[node.feature].raw_from_args(args)
            node = node.left if value <= node.threshold else node.right
        return node.config


class _Data:
    """The keys of one kernel with their features, and the fitting and evaluation on index subsets."""

    def __init__(self, recs: List[_Key], features: List[_Feature], sources: List[_Source], points: Dict[str, Point],
                 tolerance: float, seed: int):
        import numpy as np

        self.recs, self.features, self.sources, self.points = recs, features, sources, points
        self.tolerance, self.seed = tolerance, seed
        self.raw = np.array([[f.raw_from_key(r.key) for f in features] for r in recs], dtype=float).reshape(
            len(recs), len(features))
        self.x = np.array([[f.model_value(v) for f, v in zip(features, row)] for row in self.raw],
                          dtype=float).reshape(len(recs), len(features))
        self.configs = sorted({c for r in recs for c in r.times})

    # --- labels ---
    def within(self, c: str, i: int) -> bool:
        r = self.recs[i]
        return c in r.times and r.times[c] <= (1.0 + self.tolerance) * r.best_ms

    def _log_speed(self, c: str, idx: Sequence[int]) -> float:
        vals = [math.log(self.recs[i].best_ms / self.recs[i].times[c]) for i in idx if c in self.recs[i].times]
        return sum(vals) / len(vals) if vals else -math.inf

    def cover(self, idx: Sequence[int]) -> Tuple[List[str], Dict[int, str]]:
        """Greedy set cover of the keys ``idx``: configs measured at every one of them first, then
        (for keys none of those covers) any config; returns the cover and each key's label."""
        idx = list(idx)
        measured = {c: {i for i in idx if c in self.recs[i].times} for c in self.configs}
        covers = {c: {i for i in measured[c] if self.within(c, i)} for c in self.configs}
        full = [c for c in self.configs if len(measured[c]) == len(idx)]
        chosen: List[str] = []
        uncovered = set(idx)
        for pool in (full, self.configs):
            while uncovered:
                cands = [c for c in pool if c not in chosen and covers[c] & uncovered]
                if not cands:
                    break
                best = max(cands, key=lambda c: (len(covers[c] & uncovered), len(measured[c]), self._log_speed(c, idx)))
                chosen.append(best)
                uncovered -= covers[best]
        labels = {i: next(c for c in chosen if i in covers[c]) for i in idx}
        return chosen, labels

    # --- fitting ---
    def columns(self, ratios: bool) -> List[int]:
        """The features a tree may split on: all, or all but the ratios."""
        return [j for j, f in enumerate(self.features) if ratios or f.kind != "ratio"]

    def fit(self, idx: Sequence[int], variant: Tuple[int, bool]) -> _Model:
        """Fit on the keys ``idx`` a tree of ``variant = (max depth, split on ratios too)``."""
        idx = list(idx)
        depth, ratios = variant
        cover, labels = self.cover(idx)
        classes = sorted(set(labels.values()), key=cover.index)
        cols = self.columns(ratios)
        if len(classes) == 1 or not cols:
            root = self._leaf(idx, cover, classes[0] if len(classes) == 1 else None, labels)
        else:
            DecisionTreeClassifier = _require_sklearn()
            y = [classes.index(labels[i]) for i in idx]
            x = self.x[idx][:, cols]
            clf = DecisionTreeClassifier(max_depth=depth, random_state=self.seed).fit(x, y)
            paths = clf.decision_path(x).toarray().astype(bool)
            root = self._convert(clf.tree_, 0, idx, list(range(len(idx))), paths, cover, labels, cols)
        return _Model(self.features, self.sources, self.points, root, cover, len(self.recs[0].key))

    def _convert(self, tree, node: int, idx: List[int], rows: List[int], paths, cover: List[str],
                 labels: Dict[int, str], cols: List[int]) -> _Node:
        keys = [idx[r] for r in rows]
        left, right = int(tree.children_left[node]), int(tree.children_right[node])
        if left < 0:
            return self._leaf(keys, cover, None, labels)
        f = cols[int(tree.feature[node])]
        lrows = [r for r in rows if paths[r, left]]
        rrows = [r for r in rows if paths[r, right]]
        lo = max(self.raw[idx[r], f] for r in lrows)
        hi = min(self.raw[idx[r], f] for r in rrows)
        threshold = 0.5 if self.features[f].kind == "cat" else _nice_threshold(lo, hi, self.features[f].log)
        a = self._convert(tree, left, idx, lrows, paths, cover, labels, cols)
        b = self._convert(tree, right, idx, rrows, paths, cover, labels, cols)
        if a.leaf and b.leaf and a.config == b.config:
            return self._leaf(keys, cover, a.config, labels)
        return _Node(feature=f, threshold=threshold, left=a, right=b, n_train=len(keys))

    def _leaf(self, keys: List[int], cover: List[str], forced: Optional[str], labels: Dict[int, str]) -> _Node:
        if forced is None:
            # the cover config measured at every key of the leaf with the best geomean speed there;
            # where none is measured at all of them, the most frequent label
            cands = [c for c in cover if all(c in self.recs[i].times for i in keys)]
            if cands:
                forced = max(cands, key=lambda c: (self._log_speed(c, keys), -cover.index(c)))
            else:
                counts: Dict[str, int] = {}
                for i in keys:
                    counts[labels[i]] = counts.get(labels[i], 0) + 1
                forced = max(counts, key=lambda c: (counts[c], -cover.index(c)))
        known = [i for i in keys if forced in self.recs[i].times]
        speed = math.exp(self._log_speed(forced, known)) if known else None
        return _Node(config=forced, n_train=len(keys), n_within=sum(1 for i in keys if self.within(forced, i)),
                     speed=speed)

    # --- evaluation ---
    def outcome(self, i: int, c: str) -> Tuple[str, Optional[float]]:
        r = self.recs[i]
        if c in r.times:
            return "ok", r.times[c]
        return ("failed", None) if c in r.bad else ("unknown", None)

    def folds(self, idx: Sequence[int], k: Optional[int]) -> List[List[int]]:
        idx = list(idx)
        k = len(idx) if k is None else max(2, min(k, len(idx)))
        order = list(idx)
        random.Random(self.seed).shuffle(order)
        return [sorted(order[j::k]) for j in range(k)]

    def variants(self, depths: Sequence[int], ratios: bool) -> List[Tuple[int, bool]]:
        """The (depth, ratios) pairs to choose from, simplest first: by depth, then without ratios first."""
        with_ratios = ratios and any(f.kind == "ratio" for f in self.features)
        return [(d, r) for d in depths for r in ((False, True) if with_ratios else (False,))]

    def cv_scores(self, idx: Sequence[int], variants: Sequence[Tuple[int, bool]],
                  k: Optional[int]) -> Dict[Tuple[int, bool], float]:
        folds = self.folds(idx, k)
        scores = {}
        for v in variants:
            logs = []
            for test in folds:
                train = [i for i in idx if i not in test]
                model = self.fit(train, v)
                for i in test:
                    status, ms = self.outcome(i, model.predict_key(self.recs[i].key))
                    logs.append(math.log(self.recs[i].best_ms / ms) if status == "ok" else math.log(_PENALTY_SPEED))
            scores[v] = math.exp(sum(logs) / len(logs))
        return scores

    def select(self, idx: Sequence[int], variants: Sequence[Tuple[int, bool]], k: Optional[int],
               slack: float) -> Tuple[Tuple[int, bool], Dict[Tuple[int, bool], float]]:
        """The simplest variant whose cross-validated speed on ``idx`` is within ``slack`` of the best."""
        if len(idx) < 2 or len(variants) == 1:
            return variants[0], {}
        scores = self.cv_scores(idx, variants, k)
        top = max(scores.values())
        return next(v for v in variants if scores[v] >= top - slack), scores

    def best_single(self, idx: Sequence[int]) -> str:
        idx = list(idx)
        full = [c for c in self.configs if all(c in self.recs[i].times for i in idx)]
        if full:
            return max(full, key=lambda c: self._log_speed(c, idx))
        return self.cover(idx)[0][0]

    def regret(self, method: str, picks: Sequence[Tuple[int, str]]) -> Regret:
        return _regret(method, [(self.recs[i], c) for i, c in picks], self.points)


def _nice_threshold(lo: float, hi: float, geometric: bool) -> float:
    """A short number ``t`` with ``lo <= t < hi`` near the (geometric) middle of the two: the power
    of two nearest a geometric middle where it is within a factor 2**0.25 of it, else the middle
    rounded to as few significant digits (2 or more) as keep it in range."""
    if not lo < hi:
        return lo
    if math.isinf(hi):
        return lo
    mid = math.sqrt(lo * hi) if geometric and lo > 0 else (lo + hi) / 2
    if geometric and lo > 0:
        p = 2.0 ** round(math.log2(mid))
        if lo <= p < hi and abs(math.log2(p / mid)) <= 0.25:
            return int(p) if p >= 1 else p
    for sig in range(2, 18):
        t = float(f"{mid:.{sig}g}")
        if lo <= t < hi:
            return int(t) if t.is_integer() and abs(t) < 2 ** 53 else t
    return lo


def _regret(method: str, pairs: Sequence[Tuple[_Key, str]], points: Mapping[str, Point]) -> Regret:
    per_key, speeds, slow, unknown, failed = [], [], [], [], []
    for rec, c in pairs:
        if c in rec.times:
            status, ms = "ok", rec.times[c]
        else:
            status, ms = ("failed" if c in rec.bad else "unknown"), None
        speed = rec.best_ms / ms if ms else None
        per_key.append({"key": list(rec.key), "chosen": c, "winner": rec.best, "winner_ms": rec.best_ms,
                        "chosen_ms": ms, "speed": speed, "status": status})
        if status == "ok":
            speeds.append(speed)
            slow.append(ms / rec.best_ms - 1.0)
        elif status == "failed":
            failed.append(list(rec.key))
        else:
            unknown.append(list(rec.key))
    return Regret(method=method, n=len(pairs), n_known=len(speeds),
                  speed_geomean=math.exp(sum(math.log(s) for s in speeds) / len(speeds)) if speeds else None,
                  speed_worst=min(speeds) if speeds else None,
                  slowdown_mean=sum(slow) / len(slow) if slow else None,
                  slowdown_worst=max(slow) if slow else None, unknown=unknown, failed=failed, per_key=per_key)


# ----------------------------------------------------------------------------------------------
# public API
# ----------------------------------------------------------------------------------------------

def _collect(results: Sequence[TuneResult], notes: List[str]) -> Tuple[List[_Key], Dict[str, Point], str]:
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
    merged: Dict[Tuple[str, ...], _Key] = {}
    for r in results:
        rec = merged.setdefault(tuple(str(v) for v in r.key), _Key([str(v) for v in r.key], {}, {}))
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


def evaluate(choose: Callable[[List[str]], Mapping[str, Any]], results: Sequence[TuneResult]) -> Regret:
    """The regret of a given choice of config per key against the per-key tuned winners.

    Args:
        choose: maps a tuning key (its entries as strings) to the config to use there.
        results: the tuning results of one kernel (keys with no successful trial are skipped).

    Returns:
        :class:`Regret` with ``method="given"``; a key where the chosen config was not measured
        is listed in ``unknown``, one where it was measured but did not run correctly in ``failed``.

    Raises:
        ValueError: no results, or results of several kernels.
    """
    recs, points, _ = _collect(results, [])
    pairs = []
    for rec in recs:
        c = point_key(choose(list(rec.key)))
        pairs.append((rec, c))
    return _regret("given", pairs, points)


def distill(results: Sequence[TuneResult], key_names: Optional[Sequence[str]] = None, *, tolerance: float = 0.03,
            depths: Sequence[int] = (1, 2, 3, 4), folds: Optional[int] = 5, ratios: bool = True,
            min_keys: int = MIN_KEYS, goal: float = GOAL, depth_slack: float = 0.002, seed: int = 0) -> Distilled:
    """Distil the tuned winners of one kernel across many keys into a ``choose_config`` function.

    Args:
        results: the kernel's :class:`TuneResult` objects, one per key (a key given twice is merged;
            keys with no successful trial are skipped, with a note).
        key_names: the names of the tuning key's arguments in key order (``["M", "N", "K"]``); the
            entries of the key past them are the dtypes of tensor arguments. None: inferred as
            ``key0``, ``key1``, ... up to the first dtype-looking entry (with a note).
        tolerance: a config within this fraction of a key's winner counts as good enough there when
            choosing the labels (the set cover).
        depths: the tree depths to choose from by cross-validation.
        folds: folds of the cross-validation (inner and outer); None: leave-one-out. Fewer keys
            than folds also gives leave-one-out.
        ratios: let the tree also split on ratios of numeric key arguments (``M/N``, for up to 4
            of them) where cross-validation says they help.
        min_keys: the fewest usable keys.
        goal: the documented goal for the held-out geometric-mean speed (see :attr:`Distilled.meets_goal`).
        depth_slack: the simplest variant (the smallest depth, then without ratios) whose
            cross-validated speed is within this of the best wins.
        seed: seed of the fold shuffle and the tree.

    Returns:
        :class:`Distilled`: the generated module source, the held-out regret (nested
        cross-validation), the baseline of one config for all keys, the depth and the configs.

    Raises:
        ValueError: no results, results of several kernels, keys of different lengths, key_names
            that do not fit the keys, or fewer than ``min_keys`` keys with a successful trial.
        ImportError: scikit-learn is not installed (``pip install 'tritonkit[distill]'``).
    """
    if not 0 <= tolerance < 1:
        raise ValueError(f"tolerance must be a fraction in [0, 1), got {tolerance}")
    depths = sorted({int(d) for d in depths})
    if not depths or depths[0] < 1:
        raise ValueError(f"depths must be positive integers, got {depths}")
    if folds is not None and folds < 2:
        raise ValueError(f"folds must be at least 2 (or None for leave-one-out), got {folds}")
    _require_sklearn()
    notes: List[str] = []
    recs, points, kernel = _collect(results, notes)
    min_keys = max(2, int(min_keys))
    if len(recs) < min_keys:
        raise ValueError(f"distill needs at least {min_keys} tuned keys (shapes) with a successful trial to learn "
                         f"from and to check on held-out ones; got {len(recs)} for kernel {kernel!r}. Tune more "
                         "shapes: run the kernel through the tuner at more sizes (e.g. M, N, K over powers of two "
                         "from small to large), each shape is one key")
    recs.sort(key=lambda r: [(0, n, "") if (n := _number(v)) is not None else (1, 0.0, v) for v in r.key])
    keys = [r.key for r in recs]
    sources = _sources(keys, key_names, notes)
    features = _features(keys, sources, ratios, notes)
    data = _Data(recs, features, sources, points, tolerance, seed)
    everything = list(range(len(recs)))
    variants = data.variants(depths, ratios)

    # held-out regret of the whole procedure: nested cross-validation
    tree_picks, base_picks = [], []
    for test in data.folds(everything, folds):
        train = [i for i in everything if i not in test]
        v, _ = data.select(train, variants, folds, depth_slack)
        model = data.fit(train, v)
        single = data.best_single(train)
        for i in test:
            tree_picks.append((i, model.predict_key(recs[i].key)))
            base_picks.append((i, single))
    tree_picks.sort()
    base_picks.sort()
    k = len(data.folds(everything, folds))
    method = "leave-one-out" if k == len(recs) else f"{k}-fold"
    held_out = data.regret(method, tree_picks)
    baseline = data.regret(method, base_picks)

    # the final function: depth by cross-validation on all keys, fitted on all keys
    (depth, use_ratios), cv = data.select(everything, variants, folds, depth_slack)
    model = data.fit(everything, (depth, use_ratios))
    training = data.regret("training", [(i, model.predict_key(recs[i].key)) for i in everything])
    partial = [c for c in model.cover if not all(c in r.times for r in recs)]
    if partial:
        notes.append(f"{len(partial)} config(s) of the cover were not measured at every key (no config measured "
                     f"everywhere covers some keys): {'; '.join(partial)}; their regret at the other keys is unknown "
                     "(measure them there to know it)")
    if held_out.unknown or held_out.failed:
        notes.append(f"held out: at {len(held_out.unknown)} key(s) the picked config was not measured and at "
                     f"{len(held_out.failed)} it failed; the speed statistics leave them out")
    leaves = model.root.leaves()
    used: List[str] = []
    for leaf in leaves:
        if leaf.config not in used:
            used.append(leaf.config)
    result = Distilled(kernel=kernel, key_names=[s.name for s in sources if s.dtype_index is None],
                       features=[f.name for f in features], depth=depth, leaves=len(leaves),
                       cv_speed={f"{d}+ratios" if r else str(d): s for (d, r), s in cv.items()}, ratios=use_ratios,
                       configs=[dict(points[c]) for c in used], cover=[dict(points[c]) for c in model.cover],
                       tolerance=tolerance, n_keys=len(recs), goal=goal, held_out=held_out, baseline=baseline,
                       training=training, source="", notes=notes, _model=model)
    result.source = render_source(result)
    return result


# ----------------------------------------------------------------------------------------------
# the generated module
# ----------------------------------------------------------------------------------------------

def _config_literal(point: Mapping[str, Any]) -> str:
    p = dict(point)
    p.setdefault("num_warps", 4)
    p.setdefault("num_stages", 3)
    meta = [(k, v) for k, v in p.items() if k not in COMPILER_OPTIONS]
    opts = [(k, p[k]) for k in COMPILER_OPTIONS if k in p]
    return "{" + ", ".join(f"{k!r}: {v!r}" for k, v in meta + opts) + "}"


def _pct(v: Optional[float]) -> str:
    return "n/a" if v is None else f"{100 * v:.1f}%"


def render_source(d: Distilled) -> str:
    """The Python module of a :class:`Distilled` result: ``choose_config(args) -> dict`` (nested ifs
    over the key arguments) and ``HEURISTICS`` for ``@triton.heuristics``.

    Args:
        d: the result of :func:`distill`.

    Returns:
        The module's source text (it imports nothing).
    """
    model: _Model = d._model
    tol = f"{100 * d.tolerance:g}%"
    lines: List[str] = []
    used_helpers = set()

    def emit(node: _Node, indent: int) -> None:
        pad = "    " * indent
        if node.leaf:
            lines.append(f"{pad}# {node.n_train} training key(s); within {tol} of the tuned winner at "
                         f"{node.n_within}, geomean speed {_pct(node.speed)}")
            lines.append(f"{pad}return {_config_literal(model.points[node.config])}")
            return
        f = model.features[node.feature]
        cond = f.condition(node.threshold)
        if "_ratio(" in cond:
            used_helpers.add("_ratio")
        if "_dtypes(" in cond:
            used_helpers.add("_dtypes")
        first, second = node.left, node.right
        if f.kind == "cat":  # "if x == 'v'" reads better than "if x != 'v'"
            cond = cond.replace(" != ", " == ", 1)
            first, second = second, first
        lines.append(f"{pad}if {cond}:")
        emit(first, indent + 1)
        lines.append(f"{pad}else:")
        emit(second, indent + 1)

    emit(model.root, 1)
    body = "\n".join(lines)
    meta_names = [k for k in d.configs[0] if k not in COMPILER_OPTIONS] if d.configs else []
    meta_names = [k for k in meta_names if all(k in c for c in d.configs)]
    options = [k for k in COMPILER_OPTIONS if k in ("num_warps", "num_stages") or any(k in c for c in d.configs)]
    ho = d.held_out
    read: List[str] = []
    stack = [model.root]
    while stack:
        node = stack.pop()
        if not node.leaf:
            read += [s.name for s in model.features[node.feature].sources if s.name not in read]
            stack += [node.right, node.left]
    reads = ", ".join(read) or "nothing (one config for every key)"
    kernel = re.sub(r"[^\w.\-]", "_", d.kernel)
    fname = kernel.split(".")[-1] if kernel.split(".")[-1].isidentifier() else "kernel"
    head = [
        f'"""Launch heuristics for the Triton kernel ``{kernel}``, distilled by tritonkit from {d.n_keys} tuned keys.',
        "",
        f"A decision tree (depth {d.depth}, {d.leaves} case(s)) over {reads} picks one of "
        f"{len(d.configs)} config(s).",
        f"On held-out keys ({ho.method} cross-validation) it reaches {_pct(ho.speed_geomean)} of the per-key",
        f"tuned speed (geometric mean; worst key {_pct(ho.speed_worst)}; {ho.n_known} of {ho.n} keys measured"
        f"{'' if ho.n_known == ho.n else ', the others unknown or failed'}).",
        f"One config for all keys reaches {_pct(d.baseline.speed_geomean)}.",
        "",
        "Use::",
        "",
        "    @triton.heuristics(HEURISTICS)",
        "    @triton.jit",
        f"    def {fname}(...): ...",
        "",
        "    cfg = choose_config(args)   # args: the kernel's arguments by name",
        f"    {fname}[grid](..., " + ", ".join(f"{o}=cfg[{o!r}]" for o in options) + ")",
        '"""',
        "",
    ]
    helpers = []
    if "_dtypes" in used_helpers:
        helpers += ["",
                    "def _dtypes(args):",
                    "    # the dtypes of the tensor arguments in argument order, as triton.autotune appends them "
                    "to its key",
                    "    return [str(v.dtype) for v in args.values() if hasattr(v, \"dtype\")]",
                    ""]
    if "_ratio" in used_helpers:
        helpers += ["",
                    "def _ratio(a, b):",
                    "    return a / b if b else float(\"inf\")",
                    ""]
    func = ["",
            "def choose_config(args) -> dict:",
            '    """The config for one launch: meta-parameters and compiler options by name.',
            "",
            "    ``args`` maps the kernel's argument names to their values, as ``@triton.heuristics`` passes them.",
            '    """',
            body,
            "",
            "",
            "# @triton.heuristics is for meta-parameters, the kernel's tl.constexpr arguments. "
            f"{' and '.join(options)}",
            "# are compiler options, not kernel arguments: Triton does not document setting them through",
            "# @triton.heuristics, so HEURISTICS leaves them out. Pass them at launch instead:",
            f"#     cfg = choose_config(args); {fname}[grid](..., "
            + ", ".join(f"{o}=cfg[{o!r}]" for o in options) + ")",
            f"META_PARAMETERS = {tuple(meta_names)!r}",
            "HEURISTICS = {_n: (lambda args, _n=_n: choose_config(args)[_n]) for _n in META_PARAMETERS}",
            ""]
    return "\n".join(head + helpers + func)
