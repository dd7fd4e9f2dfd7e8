"""Search strategies of :mod:`tritonkit.tune` (one class per file) and their registry.

* ``exhaustive``: every candidate, in batches.
* ``random``: a uniform sample without replacement.
* ``tpe``: Bayesian search with Optuna's TPE sampler.
* ``coordinate``: steepest-descent hill climbing with random restarts.
* ``hybrid`` (the default): a Latin-hypercube-like design, then TPE batches interleaved with
  climbs from every near-best config and from the best of each TPE batch.
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Type

from ._base import Strategy
from ._coordinate import CoordinateDescent
from ._exhaustive import Exhaustive
from ._hybrid import Hybrid
from ._random import RandomSearch
from ._tpe import TPE

#: strategy name -> class.
STRATEGIES: Dict[str, Type[Strategy]] = {cls.name: cls for cls in (Exhaustive, RandomSearch, TPE, CoordinateDescent,
                                                                    Hybrid)}

#: the strategy used when none is named (see ``benchmarks/tune_strategies.py`` for why).
DEFAULT_STRATEGY = "hybrid"


def get_strategy(name: Optional[str] = None, seed: Optional[int] = None, **options: Any) -> Strategy:
    """A strategy instance by name.

    Args:
        name: one of :data:`STRATEGIES` (None: :data:`DEFAULT_STRATEGY`).
        seed: seed of the strategy's random choices (None: fresh entropy each run).
        **options: the strategy's options (its class's ``OPTIONS``).

    Returns:
        The :class:`Strategy`.

    Raises:
        ValueError: an unknown name (the message lists the known ones), or an unknown option.
    """
    if name is None:
        name = DEFAULT_STRATEGY
    try:
        cls = STRATEGIES[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown strategy {name!r}; strategies: {', '.join(STRATEGIES)}") from None
    return cls(seed=seed, **options)


__all__ = ["Strategy", "Exhaustive", "RandomSearch", "TPE", "CoordinateDescent", "Hybrid", "STRATEGIES",
           "DEFAULT_STRATEGY", "get_strategy"]
