"""The strategy interface: one class per file, one entry point, options with defaults."""
from __future__ import annotations

from typing import Any, Dict, Optional

import numpy as np

from .._evaluator import BudgetExhausted, Evaluator


class Strategy:
    """A search strategy: proposes points and reads their times through an :class:`Evaluator`.

    Subclasses implement :meth:`search`, which calls ``evaluator.evaluate(points)`` (batches are
    welcome: they compile in parallel and are timed interleaved) until it has nothing more to try
    or :class:`BudgetExhausted` is raised; :meth:`run` catches the latter.

    Args:
        seed: seed of the strategy's random choices (None: fresh entropy each run).
        **options: strategy-specific options; see the subclass's ``OPTIONS`` (name -> default).
    """

    name = "base"
    OPTIONS: Dict[str, Any] = {}

    def __init__(self, seed: Optional[int] = None, **options: Any):
        unknown = set(options) - set(self.OPTIONS)
        if unknown:
            raise ValueError(f"strategy {self.name!r} has no option(s) {sorted(unknown)}; "
                             f"its options are {sorted(self.OPTIONS) or 'none'}")
        self.seed = seed
        self.options = {**self.OPTIONS, **options}

    def search(self, evaluator: Evaluator, rng: np.random.Generator) -> None:  # pragma: no cover - abstract
        """Propose points to ``evaluator`` until done (the subclass's algorithm).

        Raises:
            BudgetExhausted: from the evaluator, once the budget is spent.
        """
        raise NotImplementedError

    def run(self, evaluator: Evaluator) -> Evaluator:
        """Search until done or out of budget; returns ``evaluator`` (its ``trials`` and ``best``)."""
        rng = np.random.default_rng(self.seed)
        try:
            self.search(evaluator, rng)
        except BudgetExhausted:
            pass
        return evaluator
