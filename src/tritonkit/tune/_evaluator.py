"""The one door between search strategies and measurements (after kernel_tuner's ``CostFunc``).

Strategies never time anything themselves: they hand points to :meth:`Evaluator.evaluate`, which
drops points that are not candidates (constraints, pruning), answers points seen before from
memory, asks the cache, sends the rest to the runner in one batch (so they compile in parallel and
are timed interleaved), and stops at the budget.
"""
from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence

from ._result import Trial
from ._runner_api import Runner
from ._space import Point, Space, point_key


class BudgetExhausted(Exception):
    """Raised by :meth:`Evaluator.evaluate` once the budget is spent; strategies let it propagate."""


@dataclass(frozen=True)
class Budget:
    """How much a search may spend: a number of configs evaluated, wall seconds, or both (the
    first reached stops it); both None means no limit.

    Args:
        evaluations: most distinct configs measured or taken from the cache.
        seconds: most wall seconds from the first evaluation.
    """

    evaluations: Optional[int] = None
    seconds: Optional[float] = None

    @classmethod
    def parse(cls, text: Optional[str], space_size: Optional[int] = None) -> "Budget":
        """``"60"`` (evaluations), ``"25%"`` (of the space's size), ``"30s"`` / ``"2m"`` (wall time),
        or both joined by a comma (``"60,30s"``); None or ``""`` gives no limit.

        Raises:
            ValueError: the text is none of these, a number is not positive, or a percentage is
                given without ``space_size``.
        """
        if text is None or str(text).strip() == "":
            return cls()
        evaluations = seconds = None
        for part in str(text).split(","):
            part = part.strip().lower()
            m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(s|sec|m|min|%)?", part)
            if not m:
                raise ValueError(f"budget {part!r}: give a number of evaluations (60), a share of the space (20%), "
                                 f"or a time (30s, 2m)")
            value, unit = float(m.group(1)), m.group(2)
            if value <= 0:
                raise ValueError(f"budget {part!r} must be positive")
            if unit in ("s", "sec"):
                seconds = value
            elif unit in ("m", "min"):
                seconds = 60 * value
            elif unit == "%":
                if space_size is None:
                    raise ValueError(f"budget {part!r} is a share of the space, but the space's size is not known")
                evaluations = max(1, int(math.floor(space_size * value / 100)))
            else:
                if value != int(value):
                    raise ValueError(f"budget {part!r}: a number of evaluations must be whole")
                evaluations = int(value)
        return cls(evaluations, seconds)

    def __str__(self) -> str:
        parts = ([f"{self.evaluations} evaluations"] if self.evaluations else []) + \
                ([f"{self.seconds:g} s"] if self.seconds else [])
        return " or ".join(parts) or "unlimited"


class Evaluator:
    """Evaluate points for a strategy, within a budget.

    Args:
        candidates: the legal points (after constraints and pruning); anything else evaluates to
            ``inf`` without spending budget.
        measure: the runner (:class:`~tritonkit.tune._runner_api.Runner`): takes a batch of new,
            distinct candidates and returns one :class:`Trial` each, in order (times in ms).
        budget: when to stop.
        lookup: the cache: a point's earlier :class:`Trial`, or None (a hit spends one evaluation
            but no time).
        on_trial: called with every new trial as it is decided (progress bars, the cache).
        clock: seconds, monotonic (a parameter so tests control time).
    """

    def __init__(self, candidates: Sequence[Point], measure: Runner,
                 budget: Budget = Budget(), lookup: Optional[Callable[[Point], Optional[Trial]]] = None,
                 on_trial: Optional[Callable[[Trial], None]] = None, clock: Callable[[], float] = time.monotonic):
        if not candidates:
            raise ValueError("nothing to tune: no config is left after the constraints and pruning")
        self.candidates: List[Point] = [dict(p) for p in candidates]
        self._keys = {point_key(p): p for p in self.candidates}
        self.space = Space.from_points(self.candidates)
        self.measure = measure
        self.budget = budget
        self.lookup = lookup
        self.on_trial = on_trial
        self.clock = clock
        self.trials: Dict[str, Trial] = {}
        self._start: Optional[float] = None

    # ------------------------------------------------------------------ state
    @property
    def evaluations(self) -> int:
        """Configs decided so far (measured, from the cache, failed alike)."""
        return len(self.trials)

    @property
    def best(self) -> Optional[Trial]:
        """The fastest correct trial so far, or None."""
        ok = [t for t in self.trials.values() if t.ok]
        return min(ok, key=lambda t: t.ms) if ok else None

    def elapsed(self) -> float:
        """Seconds since the first :meth:`evaluate` (0 before it)."""
        return 0.0 if self._start is None else self.clock() - self._start

    def remaining(self) -> Optional[int]:
        """Evaluations left; 0 when the time is up. Under a time budget, the evaluations the time
        left allows at the average cost so far (at least 1), so a batch does not run far past it."""
        left = len(self.candidates) - self.evaluations
        if self.budget.seconds is not None and self._start is not None:
            elapsed = self.elapsed()
            if elapsed >= self.budget.seconds:
                return 0
            if self.evaluations:
                per = elapsed / self.evaluations
                if per > 0:
                    left = min(left, max(1, int((self.budget.seconds - elapsed) / per)))
        if self.budget.evaluations is not None:
            left = min(left, self.budget.evaluations - self.evaluations)
        return max(0, left)

    @property
    def exhausted(self) -> bool:
        """Whether the budget (or the candidates) is spent."""
        return self.remaining() == 0

    def is_candidate(self, point: Point) -> bool:
        """Whether ``point`` is one of the legal candidates."""
        return point_key(point) in self._keys

    def unevaluated(self) -> List[Point]:
        """The candidates not decided yet, in candidate order."""
        return [p for k, p in self._keys.items() if k not in self.trials]

    # ------------------------------------------------------------------ the door
    def evaluate(self, points: Sequence[Point]) -> List[float]:
        """Milliseconds per point (``inf`` for a failed, wrong, crashed or illegal one), in order.

        New points beyond the budget are not measured; if none of the new points fits in what is
        left, the ones that fit are measured (their trials kept in :attr:`trials`) and then
        :class:`BudgetExhausted` is raised.

        Raises:
            BudgetExhausted: the budget is spent and ``points`` holds a point not evaluated yet.
        """
        if self._start is None:
            self._start = self.clock()
        keys = [point_key(p) for p in points]
        new: List[str] = []
        for k in keys:
            if k in self._keys and k not in self.trials and k not in new:
                new.append(k)
        left = self.remaining()
        cut = len(new) > (left if left is not None else len(new))
        new = new[:left] if left is not None else new
        misses: List[str] = []
        for k in new:
            hit = self.lookup(self._keys[k]) if self.lookup else None
            if hit is not None:
                self._decide(k, hit)
            else:
                misses.append(k)
        if misses:
            trials = self.measure([self._keys[k] for k in misses])
            if len(trials) != len(misses):
                raise RuntimeError(f"the runner returned {len(trials)} trials for {len(misses)} configs")
            for k, t in zip(misses, trials):
                self._decide(k, t)
        if cut:
            raise BudgetExhausted(f"budget spent: {self.budget}")
        return [self.trials[k].ms if k in self.trials else math.inf for k in keys]

    def evaluate_one(self, point: Point) -> float:
        """:meth:`evaluate` for one point: its ms (``inf`` where it failed or is not a candidate).

        Raises:
            BudgetExhausted: the budget is spent and ``point`` was not evaluated yet.
        """
        return self.evaluate([point])[0]

    def _decide(self, key: str, trial: Trial) -> None:
        self.trials[key] = trial
        if self.on_trial:
            self.on_trial(trial)
