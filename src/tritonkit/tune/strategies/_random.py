"""Random search: a uniform sample of the candidates, without replacement."""
from __future__ import annotations

import numpy as np

from .._evaluator import Evaluator
from ._base import Strategy
from ._common import batches


class RandomSearch(Strategy):
    """Random search: a uniform sample of the candidates, without replacement, in batches.

    Evaluates candidates in a uniformly random order, ``batch`` at a time, until the budget is
    spent (or every candidate is done).

    Options:
        batch: configs per call to the evaluator (default 16).
    """

    name = "random"
    OPTIONS = {"batch": 16}

    def search(self, evaluator: Evaluator, rng: np.random.Generator) -> None:
        """Evaluate a random permutation of the unevaluated candidates (see the class).

        Raises:
            BudgetExhausted: from the evaluator (caught by :meth:`run`).
        """
        todo = evaluator.unevaluated()
        order = rng.permutation(len(todo))
        for chunk in batches([todo[i] for i in order], self.options["batch"]):
            evaluator.evaluate(chunk)
