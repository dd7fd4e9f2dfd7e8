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

The package, by concept: :mod:`._features` (keys and features), :mod:`._fit` (labels, the tree,
cross-validation), :mod:`._model` (the fitted tree), :mod:`._regret` (regret against the per-key
winners), :mod:`._source` (the generated module), :mod:`._distilled` (the result, to and from
JSON) and :mod:`._pipeline` (:func:`distill`, :func:`evaluate`).

scikit-learn is an optional dependency (``pip install 'tritonkit[distill]'``), imported when a tree
is fitted: without it :func:`distill` raises :class:`~tritonkit._imports.MissingDependency`.
"""
from ._distilled import Distilled
from ._pipeline import GOAL, MIN_KEYS, distill, evaluate
from ._regret import Regret
from ._source import render_source

__all__ = ["distill", "evaluate", "Distilled", "Regret", "render_source", "MIN_KEYS", "GOAL"]
