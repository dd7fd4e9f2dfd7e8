"""Exhaustive search: every candidate, in batches."""
from __future__ import annotations

import numpy as np

from .._evaluator import Evaluator
from ._base import Strategy
from ._common import batches


class Exhaustive(Strategy):
    """Exhaustive search: every candidate, in batches.

    Evaluates the candidates in their order, ``batch`` at a time (so that compiles of one batch
    overlap and its timings interleave); the budget, if any, cuts it short.

    Options:
        batch: configs per call to the evaluator (default 32; 0 or None: all at once).
    """

    name = "exhaustive"
    OPTIONS = {"batch": 32}

    def search(self, evaluator: Evaluator, rng: np.random.Generator) -> None:
        """Evaluate all candidates (see the class).

        Raises:
            BudgetExhausted: from the evaluator (caught by :meth:`run`).
        """
        todo = evaluator.unevaluated()
        for chunk in batches(todo, self.options["batch"] or len(todo)):
            evaluator.evaluate(chunk)
