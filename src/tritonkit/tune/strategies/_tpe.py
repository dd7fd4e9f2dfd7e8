"""Bayesian search with Optuna's TPE sampler (Tree-structured Parzen Estimator), through ask/tell.

Optuna is imported when a search starts (through :func:`tritonkit._imports.require`: without it,
:class:`~tritonkit._imports.MissingDependency` names ``pip install 'tritonkit[tune]'``), not when
the strategy is made. Each parameter that takes more than one value becomes one Optuna parameter
over the *indices* of its choices: an integer (ordinal) parameter when every choice is a number
(block sizes, warps, stages: their order means something), else a categorical one. A proposal
that is not a candidate (a constraint or pruning left it out) is told to Optuna as a very bad
result without spending budget; one that repeats an evaluated point is told that point's time.
After ``max_misses`` such proposals in a row, a random unevaluated candidate is evaluated instead
(and told to Optuna), so the search always progresses.
"""
from __future__ import annotations

import contextlib
import math
import numbers
import warnings
from types import ModuleType
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from ..._imports import require
from .._evaluator import Evaluator
from .._space import Point, point_key
from ._base import Strategy
from ._common import CandidateIndex

#: what Optuna is told for a failed config or a non-candidate proposal (TPE only ranks values).
PENALTY = 1e30


def _import_optuna() -> ModuleType:
    """The optuna module.

    Raises:
        MissingDependency: Optuna is not installed (``pip install 'tritonkit[tune]'``).
    """
    return require("optuna", "the 'tpe' and 'hybrid' strategies")


@contextlib.contextmanager
def quiet_optuna():
    """Silence Optuna's per-trial INFO logging for the duration of a search, then restore its level.

    Raises:
        MissingDependency: Optuna is not installed (``pip install 'tritonkit[tune]'``).
    """
    optuna = _import_optuna()
    before = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        yield optuna
    finally:
        optuna.logging.set_verbosity(before)


class TPEProposer:
    """An Optuna study over an evaluator's candidates, in index coordinates.

    Args:
        index: the candidates (see :class:`~tritonkit.tune.strategies._common.CandidateIndex`).
        seed: the sampler's seed (an int).
        startup: random proposals before TPE models the results (Optuna's ``n_startup_trials``;
            points told through :meth:`tell_known` count).
        ordinal: encode parameters whose choices are all numbers as ordered integers (else every
            parameter is categorical).
        multivariate: model the parameters jointly (Optuna's multivariate TPE) rather than one by one.
        gamma: share of the results that TPE treats as "good" (Optuna's default is 10%, at most 25).

    Raises:
        MissingDependency: Optuna is not installed (``pip install 'tritonkit[tune]'``).
    """

    def __init__(self, index: CandidateIndex, seed: int, startup: int = 10, ordinal: bool = True,
                 multivariate: bool = True, gamma: Optional[float] = None):
        optuna = _import_optuna()
        self.optuna = optuna
        self.index = index
        self.dists: Dict[str, Any] = {}
        for n in index.names:
            k = len(index.values[n])
            numeric = all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in index.values[n])
            self.dists[n] = (optuna.distributions.IntDistribution(0, k - 1) if ordinal and numeric
                             else optuna.distributions.CategoricalDistribution(list(range(k))))
        kwargs: Dict[str, Any] = dict(n_startup_trials=max(0, int(startup)), seed=int(seed),
                                      multivariate=multivariate, constant_liar=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if gamma is not None:
                g = float(gamma)
                kwargs["gamma"] = lambda n: min(int(math.ceil(g * n)), 25)
            sampler = optuna.samplers.TPESampler(**kwargs)
        self.study = optuna.create_study(direction="minimize", sampler=sampler)
        self._repeats: List[Tuple[Any, str]] = []

    # ------------------------------------------------------------------ encoding
    def decode(self, params: Dict[str, int]) -> Tuple[str, Point]:
        """The point key and point for Optuna parameters (indices); the candidate's own dict when it is one."""
        template = self.index.points[0]
        point = dict(template)
        for n in self.index.names:
            point[n] = self.index.values[n][int(params[n])]
        key = point_key(point)
        row = self.index.row.get(key)
        return key, (self.index.points[row] if row is not None else point)

    def encode(self, point: Point) -> Dict[str, int]:
        """Optuna parameters (value indices; -1 where a value is not a choice) of ``point``."""
        return dict(zip(self.index.names, self.index.index(point)))

    @staticmethod
    def value(ms: float) -> float:
        """What Optuna is told for a time in ms: the time, or :data:`PENALTY` where it is not finite."""
        return ms if ms is not None and math.isfinite(ms) else PENALTY

    # ------------------------------------------------------------------ ask / tell
    def ask(self):
        """A new Optuna trial and its ``(key, point)``."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            trial = self.study.ask(self.dists)
        return trial, self.decode(trial.params)

    def tell(self, trial, ms: float) -> None:
        """Report ``trial``'s time (ms; ``inf`` for failed)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.study.tell(trial, self.value(ms))

    def tell_known(self, point: Point, ms: float) -> None:
        """Report a point evaluated outside this study (a design point, a local-search step)."""
        params = self.encode(point)
        if any(i < 0 for i in params.values()):
            return
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.study.add_trial(self.optuna.trial.create_trial(params=params, distributions=self.dists,
                                                                value=self.value(ms)))

    def propose(self, evaluator: Evaluator, n: int, rng: np.random.Generator, max_misses: int,
                exclude: Optional[set] = None) -> List[Tuple[Any, Point]]:
        """Up to ``n`` new, distinct, unevaluated candidates from TPE, as ``(trial, point)`` pairs
        (``trial`` None for a random fallback, which the caller reports with :meth:`tell_known`).

        Proposals that are not candidates are told :data:`PENALTY`; those that repeat an evaluated
        point are told its time; after ``max_misses`` misses in a row, a random unevaluated
        candidate is taken instead. Nothing here spends budget.

        Args:
            evaluator: the measurements (for what is evaluated).
            n: how many points.
            rng: random source of the fallback.
            max_misses: proposals in a row that bring nothing new before falling back to random.
            exclude: keys not to propose (e.g. points already queued elsewhere).

        Returns:
            The proposals, fewer than ``n`` only when fewer candidates are left.
        """
        out: List[Tuple[Any, Point]] = []
        taken = set(exclude or ())
        repeats: List[Tuple[Any, str]] = []
        misses = 0
        while len(out) < n:
            left = [p for p in evaluator.unevaluated() if point_key(p) not in taken] if misses >= max_misses else None
            if left is not None:
                if not left:
                    break
                p = left[int(rng.integers(len(left)))]
                out.append((None, p))
                taken.add(point_key(p))
                misses = 0
                continue
            trial, (key, point) = self.ask()
            if key not in self.index.row:
                self.tell(trial, math.inf)
                misses += 1
            elif key in evaluator.trials:
                self.tell(trial, evaluator.trials[key].ms)
                misses += 1
            elif key in taken:
                repeats.append((trial, key))   # told once the batch is measured
                misses += 1
            else:
                out.append((trial, point))
                taken.add(key)
                misses = 0
            if misses and len(evaluator.trials) + len(taken) >= len(self.index.points):
                break                          # every candidate is evaluated or queued
        self._repeats = repeats
        return out

    def report(self, evaluator: Evaluator, proposals: List[Tuple[Any, Point]]) -> None:
        """Tell Optuna the times of evaluated proposals (and of repeated proposals within the batch);
        proposals the budget cut off are left unreported."""
        for trial, point in proposals:
            t = evaluator.trials.get(point_key(point))
            if t is None:
                continue
            if trial is None:
                self.tell_known(point, t.ms)
            else:
                self.tell(trial, t.ms)
        for trial, key in self._repeats:
            t = evaluator.trials.get(key)
            if t is not None:
                self.tell(trial, t.ms)
        self._repeats = []


class TPE(Strategy):
    """Bayesian search with Optuna's TPE sampler, through ask/tell (see the module's docstring).

    Options:
        batch: proposals per call to the evaluator (default 4; TPE proposes a batch with Optuna's
            "constant liar" so that its points differ).
        startup: random proposals before the model is used (default 10).
        max_misses: proposals in a row that are not new candidates before a random unevaluated
            candidate is taken instead (default 8).
        ordinal: numeric parameters as ordered integers (default True) rather than categories.
        multivariate: joint TPE over the parameters (default True).
    """

    name = "tpe"
    OPTIONS = {"batch": 4, "startup": 10, "max_misses": 8, "ordinal": True, "multivariate": True}

    def search(self, evaluator: Evaluator, rng: np.random.Generator) -> None:
        """Propose, evaluate and tell, batch by batch, until the budget is spent or every
        candidate is evaluated.

        Raises:
            BudgetExhausted: from the evaluator (caught by :meth:`run`).
        """
        with quiet_optuna():
            self._search(evaluator, rng)

    def _search(self, evaluator: Evaluator, rng: np.random.Generator) -> None:
        index = CandidateIndex(evaluator)
        o = self.options
        tpe = TPEProposer(index, seed=int(rng.integers(2 ** 31)), startup=o["startup"], ordinal=o["ordinal"],
                          multivariate=o["multivariate"])
        for t in list(evaluator.trials.values()):    # anything evaluated before informs TPE
            tpe.tell_known(t.point, t.ms)
        while evaluator.unevaluated():
            proposals = tpe.propose(evaluator, max(1, int(o["batch"])), rng, max(1, int(o["max_misses"])))
            if not proposals:
                return
            try:
                evaluator.evaluate([p for _, p in proposals])
            finally:
                tpe.report(evaluator, proposals)
