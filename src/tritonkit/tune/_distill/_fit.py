"""Fitting and cross-validation: the labels that minimise regret (a greedy set cover), the decision
tree (scikit-learn's ``DecisionTreeClassifier``, converted to a :class:`~._model.Node` tree with
readable thresholds), the folds, and the choice of depth by cross-validated speed.

scikit-learn is imported when a tree is fitted, through :func:`tritonkit._imports.require`: without
it, :class:`~tritonkit._imports.MissingDependency` names ``pip install 'tritonkit[distill]'``.
"""
from __future__ import annotations

import math
import random
from typing import Dict, List, Optional, Sequence, Tuple

from ..._imports import require
from .._space import Point
from ._features import Feature, Source, TunedKey
from ._model import Model, Node
from ._regret import Regret, regret

#: speed assumed for a held-out key where the picked config was not measured or failed, only
#: while choosing the depth (never in the reported statistics).
PENALTY_SPEED = 0.5

#: a variant of the tree: (maximum depth, whether it may split on ratios).
Variant = Tuple[int, bool]


def decision_tree_classifier():
    """scikit-learn's ``DecisionTreeClassifier`` class.

    Raises:
        MissingDependency: scikit-learn is not installed (``pip install 'tritonkit[distill]'``).
    """
    return require("sklearn.tree", "tritonkit distill").DecisionTreeClassifier


class KeyData:
    """The keys of one kernel with their features, and the fitting and evaluation on index subsets.

    Args:
        recs: the tuned keys.
        features: the features a tree may split on.
        sources: the key's positions.
        points: config name -> point.
        tolerance: a config within this fraction of a key's winner covers the key.
        seed: seed of the fold shuffle and the tree.
    """

    def __init__(self, recs: List[TunedKey], features: List[Feature], sources: List[Source],
                 points: Dict[str, Point], tolerance: float, seed: int):
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
        """Whether config ``c`` is within the tolerance of the winner at key ``i``."""
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

    def fit(self, idx: Sequence[int], variant: Variant) -> Model:
        """Fit on the keys ``idx`` a tree of ``variant = (max depth, split on ratios too)``.

        Raises:
            MissingDependency: scikit-learn is not installed.
        """
        idx = list(idx)
        depth, ratios = variant
        cover, labels = self.cover(idx)
        classes = sorted(set(labels.values()), key=cover.index)
        cols = self.columns(ratios)
        if len(classes) == 1 or not cols:
            root = self._leaf(idx, cover, classes[0] if len(classes) == 1 else None, labels)
        else:
            DecisionTreeClassifier = decision_tree_classifier()
            y = [classes.index(labels[i]) for i in idx]
            x = self.x[idx][:, cols]
            clf = DecisionTreeClassifier(max_depth=depth, random_state=self.seed).fit(x, y)
            paths = clf.decision_path(x).toarray().astype(bool)
            root = self._convert(clf.tree_, 0, idx, list(range(len(idx))), paths, cover, labels, cols)
        return Model(self.features, self.sources, self.points, root, cover, len(self.recs[0].key))

    def _convert(self, tree, node: int, idx: List[int], rows: List[int], paths, cover: List[str],
                 labels: Dict[int, str], cols: List[int]) -> Node:
        keys = [idx[r] for r in rows]
        left, right = int(tree.children_left[node]), int(tree.children_right[node])
        if left < 0:
            return self._leaf(keys, cover, None, labels)
        f = cols[int(tree.feature[node])]
        lrows = [r for r in rows if paths[r, left]]
        rrows = [r for r in rows if paths[r, right]]
        lo = max(self.raw[idx[r], f] for r in lrows)
        hi = min(self.raw[idx[r], f] for r in rrows)
        threshold = 0.5 if self.features[f].kind == "cat" else nice_threshold(lo, hi, self.features[f].log)
        a = self._convert(tree, left, idx, lrows, paths, cover, labels, cols)
        b = self._convert(tree, right, idx, rrows, paths, cover, labels, cols)
        if a.leaf and b.leaf and a.config == b.config:
            return self._leaf(keys, cover, a.config, labels)
        return Node(feature=f, threshold=threshold, left=a, right=b, n_train=len(keys))

    def _leaf(self, keys: List[int], cover: List[str], forced: Optional[str], labels: Dict[int, str]) -> Node:
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
        return Node(config=forced, n_train=len(keys), n_within=sum(1 for i in keys if self.within(forced, i)),
                    speed=speed)

    # --- evaluation ---
    def outcome(self, i: int, c: str) -> Tuple[str, Optional[float]]:
        """``("ok", ms)`` where config ``c`` has a time at key ``i``, else ``("failed", None)`` or
        ``("unknown", None)``."""
        r = self.recs[i]
        if c in r.times:
            return "ok", r.times[c]
        return ("failed", None) if c in r.bad else ("unknown", None)

    def folds(self, idx: Sequence[int], k: Optional[int]) -> List[List[int]]:
        """``idx`` shuffled (seeded) into ``k`` folds (None: one key per fold), each sorted."""
        idx = list(idx)
        k = len(idx) if k is None else max(2, min(k, len(idx)))
        order = list(idx)
        random.Random(self.seed).shuffle(order)
        return [sorted(order[j::k]) for j in range(k)]

    def variants(self, depths: Sequence[int], ratios: bool) -> List[Variant]:
        """The (depth, ratios) pairs to choose from, simplest first: by depth, then without ratios first."""
        with_ratios = ratios and any(f.kind == "ratio" for f in self.features)
        return [(d, r) for d in depths for r in ((False, True) if with_ratios else (False,))]

    def cv_scores(self, idx: Sequence[int], variants: Sequence[Variant], k: Optional[int]) -> Dict[Variant, float]:
        """Each variant's cross-validated geometric-mean speed on the keys ``idx`` (a held-out key
        whose picked config is unknown or failed counts as :data:`PENALTY_SPEED`)."""
        folds = self.folds(idx, k)
        scores = {}
        for v in variants:
            logs = []
            for test in folds:
                train = [i for i in idx if i not in test]
                model = self.fit(train, v)
                for i in test:
                    status, ms = self.outcome(i, model.predict_key(self.recs[i].key))
                    logs.append(math.log(self.recs[i].best_ms / ms) if status == "ok" else math.log(PENALTY_SPEED))
            scores[v] = math.exp(sum(logs) / len(logs))
        return scores

    def select(self, idx: Sequence[int], variants: Sequence[Variant], k: Optional[int],
               slack: float) -> Tuple[Variant, Dict[Variant, float]]:
        """The simplest variant whose cross-validated speed on ``idx`` is within ``slack`` of the
        best, and every variant's score (empty where there was nothing to choose)."""
        if len(idx) < 2 or len(variants) == 1:
            return variants[0], {}
        scores = self.cv_scores(idx, variants, k)
        top = max(scores.values())
        return next(v for v in variants if scores[v] >= top - slack), scores

    def best_single(self, idx: Sequence[int]) -> str:
        """The one config with the best geometric-mean speed over the keys ``idx`` (among those
        measured at all of them; else the first of the cover)."""
        idx = list(idx)
        full = [c for c in self.configs if all(c in self.recs[i].times for i in idx)]
        if full:
            return max(full, key=lambda c: self._log_speed(c, idx))
        return self.cover(idx)[0][0]

    def regret(self, method: str, picks: Sequence[Tuple[int, str]]) -> Regret:
        """The :class:`Regret` of picking config ``c`` at key ``i`` for each ``(i, c)``."""
        return regret(method, [(self.recs[i], c) for i, c in picks])


def nice_threshold(lo: float, hi: float, geometric: bool) -> float:
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
