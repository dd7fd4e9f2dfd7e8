"""Coordinate descent (hill climbing) over the neighbourhood of one-parameter steps, with random restarts."""
from __future__ import annotations

import numpy as np

from .._evaluator import Evaluator
from ._base import Strategy
from ._common import CandidateIndex, climb

NEIGHBOURHOODS = {"adjacent": False, "all": True, "adaptive": "last"}


class CoordinateDescent(Strategy):
    """Coordinate descent: steepest-descent hill climbing over one-parameter steps, with random restarts.

    From a start point, evaluate all its neighbours (one step down or up along one parameter, to
    the nearest value that is a candidate) in one batch, move to the fastest while it beats the
    current point, and stop at a local minimum; then restart from a new point, until the budget
    is spent or every candidate is evaluated.

    Options:
        restarts: how many restarts after the first climb (None: until the budget is spent).
        start: ``"random"`` (uniform among unevaluated candidates) or ``"spread"`` (the unevaluated
            candidate farthest from everything evaluated, in normalized index space).
        neighbourhood: ``"adjacent"`` (the next smaller and larger value of each parameter),
            ``"all"`` (every other value of each parameter) or ``"adaptive"`` (adjacent values, and
            at a local minimum of those the other values too, before stopping).
    """

    name = "coordinate"
    OPTIONS = {"restarts": None, "start": "random", "neighbourhood": "adjacent"}

    def __init__(self, seed=None, **options):
        super().__init__(seed, **options)
        if self.options["start"] not in ("random", "spread"):
            raise ValueError(f"coordinate: start must be 'random' or 'spread', got {self.options['start']!r}")
        if self.options["neighbourhood"] not in NEIGHBOURHOODS:
            raise ValueError(f"coordinate: neighbourhood must be one of {sorted(NEIGHBOURHOODS)}, "
                             f"got {self.options['neighbourhood']!r}")

    def search(self, evaluator: Evaluator, rng: np.random.Generator) -> None:
        """Climb from successive start points (see the class).

        Raises:
            BudgetExhausted: from the evaluator (caught by :meth:`run`).
        """
        index = CandidateIndex(evaluator)
        restarts = self.options["restarts"]
        climbs = 0
        while restarts is None or climbs <= restarts:
            todo = evaluator.unevaluated()
            if not todo:
                return
            if self.options["start"] == "spread" and evaluator.trials:
                start = self._farthest(index, rng)
            else:
                start = todo[int(rng.integers(len(todo)))]
            climb(evaluator, index, start, full=NEIGHBOURHOODS[self.options["neighbourhood"]])
            climbs += 1

    @staticmethod
    def _farthest(index: CandidateIndex, rng: np.random.Generator):
        done = index.evaluated_mask()
        free = np.flatnonzero(~done)
        if not index.names or not done.any():
            return index.points[int(rng.choice(free))]
        d = np.full(len(free), np.inf)
        for i in np.flatnonzero(done):
            d = np.minimum(d, np.abs(index.U[free] - index.U[i]).sum(axis=1))
        d = d + rng.random(len(free)) * 1e-6
        return index.points[int(free[int(np.argmax(d))])]

