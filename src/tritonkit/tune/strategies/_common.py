"""Helpers shared by the strategies: candidate indexing, neighbourhoods among candidates, a
Latin-hypercube-like design and a steepest-descent climb. Everything goes through the Evaluator."""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from .._evaluator import Evaluator
from .._space import Point, _fmt, point_key


class CandidateIndex:
    """The candidates of an evaluator as a matrix of value indices (one column per parameter that
    takes more than one value), for distances and neighbourhoods.

    Args:
        evaluator: whose ``candidates`` and ``space`` are indexed.
    """

    def __init__(self, evaluator: Evaluator):
        self.evaluator = evaluator
        self.names = [n for n, vals in evaluator.space.params.items() if len(vals) > 1]
        self.values = {n: list(evaluator.space.params[n]) for n in self.names}
        self._pos = {n: {_fmt(v): i for i, v in enumerate(vals)} for n, vals in self.values.items()}
        self.points: List[Point] = evaluator.candidates
        self.keys = [point_key(p) for p in self.points]
        self.row: Dict[str, int] = {k: i for i, k in enumerate(self.keys)}
        self.X = np.array([self.index(p) for p in self.points], dtype=float).reshape(len(self.points), -1)
        scale = np.array([max(1, len(self.values[n]) - 1) for n in self.names], dtype=float)
        self.U = self.X / scale if self.names else self.X  # in [0, 1]

    def index(self, point: Point) -> List[int]:
        """The value index of each parameter of ``point`` (-1 where the value is not a choice)."""
        return [self._pos[n].get(_fmt(point.get(n)), -1) for n in self.names]

    def evaluated_mask(self) -> np.ndarray:
        """Boolean per candidate: already evaluated."""
        done = self.evaluator.trials
        return np.array([k in done for k in self.keys], dtype=bool)

    def neighbours(self, point: Point, full: bool = False) -> List[Point]:
        """The candidates one step away from ``point`` along one parameter: per parameter and
        direction, the nearest value for which the changed point is a candidate (so constraints
        and pruning do not cut the neighbourhood off); with ``full``, every other value of each
        parameter (for parameters whose order means nothing)."""
        out = []
        for n in self.names:
            vals = self.values[n]
            i = self._pos[n].get(_fmt(point.get(n)))
            if i is None:
                continue
            if full:
                for j in range(len(vals)):
                    q = {**point, n: vals[j]}
                    if j != i and point_key(q) in self.row:
                        out.append(self.points[self.row[point_key(q)]])
                continue
            for step in (-1, 1):
                j = i + step
                while 0 <= j < len(vals):
                    q = {**point, n: vals[j]}
                    if point_key(q) in self.row:
                        out.append(self.points[self.row[point_key(q)]])
                        break
                    j += step
        return out


def batches(seq: Sequence, size: int):
    """Successive slices of ``seq`` of at most ``size`` items."""
    size = max(1, int(size))
    for i in range(0, len(seq), size):
        yield seq[i:i + size]


def latin_design(index: CandidateIndex, n: int, rng: np.random.Generator, tries: int = 16) -> List[Point]:
    """``n`` unevaluated candidates in a Latin-hypercube-like design: each parameter's values
    appear about equally often, combined at random; each target combination is snapped to the
    nearest free candidate (L1 over normalized indices). Of ``tries`` such designs, the one whose
    closest pair is farthest apart is kept.

    Args:
        index: the candidate index.
        n: how many points.
        rng: random source.
        tries: designs drawn to pick the best spread one from.

    Returns:
        Up to ``n`` points (fewer when fewer candidates are left).
    """
    free = np.flatnonzero(~index.evaluated_mask())
    n = min(n, len(free))
    if n <= 0:
        return []
    if not index.names:
        return [index.points[int(i)] for i in rng.choice(free, size=n, replace=False)]
    k = np.array([len(index.values[c]) for c in index.names])
    best, best_score = None, -1.0
    tries = max(1, min(tries, int(4e6 // (n * len(free) * len(k)))))   # keep huge spaces fast
    for _ in range(tries):
        cols = []
        for kj in k:
            seq = np.concatenate([rng.permutation(kj) for _ in range(-(-n // kj))])[:n]
            cols.append(rng.permutation(seq))
        target = np.stack(cols, axis=1) / np.maximum(1, k - 1)
        avail = np.ones(len(free), dtype=bool)
        rows = []
        for t in target:
            d = np.abs(index.U[free] - t).sum(axis=1) + rng.random(len(free)) * 1e-6
            d[~avail] = np.inf
            j = int(np.argmin(d))
            avail[j] = False
            rows.append(int(free[j]))
        P = index.U[rows]
        dist = np.abs(P[:, None, :] - P[None, :, :]).sum(axis=2) + np.eye(len(rows)) * 1e9
        score = float(dist.min()) if len(rows) > 1 else 0.0
        if score > best_score:
            best, best_score = rows, score
    return [index.points[i] for i in best]


def climb(evaluator: Evaluator, index: CandidateIndex, start: Point,
          start_ms: Optional[float] = None, full: Union[bool, str] = False) -> Tuple[Point, float]:
    """Steepest descent from ``start``: evaluate its whole neighbourhood in one batch, move to the
    fastest neighbour while it is faster, stop at a local minimum.

    Args:
        evaluator: the measurements.
        index: the candidate index of ``evaluator``.
        start: where to begin (evaluated first if it is not yet).
        start_ms: ``start``'s time if known (ms).
        full: False: the neighbours are the adjacent values of each parameter; True: every other
            value of each parameter; ``"last"``: adjacent values, and at a local minimum of those
            also the other values (robust to parameters whose order means little).

    Returns:
        ``(point, ms)`` of the local minimum (``inf`` ms if nothing around ran).

    Raises:
        BudgetExhausted: from the evaluator.
    """
    cur = start
    cur_ms = evaluator.evaluate_one(cur) if start_ms is None else start_ms
    wide = full is True
    while True:
        nbrs = index.neighbours(cur, wide)
        times = evaluator.evaluate(nbrs) if nbrs else []
        j = int(np.argmin(times)) if nbrs else -1
        if j >= 0 and times[j] < cur_ms:
            cur, cur_ms = nbrs[j], times[j]
            wide = full is True
        elif full == "last" and not wide:
            wide = True
        else:
            return cur, cur_ms
