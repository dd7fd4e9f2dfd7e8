"""The distillation pipeline: :func:`distill` (keys and features, labels, a tree with its depth
chosen by cross-validation, held-out regret by nested cross-validation, the generated module) and
:func:`evaluate` (the regret of a given choice of config per key)."""
from __future__ import annotations

from typing import Any, Callable, List, Mapping, Optional, Sequence

from .._result import TuneResult
from .._space import point_key
from ._distilled import Distilled
from ._features import collect, key_features, key_sources, number
from ._fit import KeyData, decision_tree_classifier
from ._regret import Regret, regret
from ._source import render_source

#: the default fewest keys (with a successful trial) that :func:`distill` works from.
MIN_KEYS = 4
#: the goal documented for distilled heuristics: this share of the per-key tuned speed (geomean)
#: on held-out keys.
GOAL = 0.95


def evaluate(choose: Callable[[List[str]], Mapping[str, Any]], results: Sequence[TuneResult]) -> Regret:
    """The regret of a given choice of config per key against the per-key tuned winners.

    Args:
        choose: maps a tuning key (its entries as strings) to the config to use there.
        results: the tuning results of one kernel (keys with no successful trial are skipped).

    Returns:
        :class:`Regret` with ``method="given"``; a key where the chosen config was not measured
        is listed in ``unknown``, one where it was measured but did not run correctly in ``failed``.

    Raises:
        ValueError: no results, or results of several kernels.
    """
    recs, _, _ = collect(results, [])
    pairs = []
    for rec in recs:
        c = point_key(choose(list(rec.key)))
        pairs.append((rec, c))
    return regret("given", pairs)


def distill(results: Sequence[TuneResult], key_names: Optional[Sequence[str]] = None, *, tolerance: float = 0.03,
            depths: Sequence[int] = (1, 2, 3, 4), folds: Optional[int] = 5, ratios: bool = True,
            min_keys: int = MIN_KEYS, goal: float = GOAL, depth_slack: float = 0.002, seed: int = 0) -> Distilled:
    """Distil the tuned winners of one kernel across many keys into a ``choose_config`` function.

    Args:
        results: the kernel's :class:`TuneResult` objects, one per key (a key given twice is merged;
            keys with no successful trial are skipped, with a note).
        key_names: the names of the tuning key's arguments in key order (``["M", "N", "K"]``); the
            entries of the key past them are the dtypes of tensor arguments. None: inferred as
            ``key0``, ``key1``, ... up to the first dtype-looking entry (with a note).
        tolerance: a config within this fraction of a key's winner counts as good enough there when
            choosing the labels (the set cover).
        depths: the tree depths to choose from by cross-validation.
        folds: folds of the cross-validation (inner and outer); None: leave-one-out. Fewer keys
            than folds also gives leave-one-out.
        ratios: let the tree also split on ratios of numeric key arguments (``M/N``, for up to 4
            of them) where cross-validation says they help.
        min_keys: the fewest usable keys.
        goal: the documented goal for the held-out geometric-mean speed (see :attr:`Distilled.meets_goal`).
        depth_slack: the simplest variant (the smallest depth, then without ratios) whose
            cross-validated speed is within this of the best wins.
        seed: seed of the fold shuffle and the tree.

    Returns:
        :class:`Distilled`: the generated module source, the held-out regret (nested
        cross-validation), the baseline of one config for all keys, the depth and the configs.

    Raises:
        ValueError: no results, results of several kernels, keys of different lengths, key_names
            that do not fit the keys, or fewer than ``min_keys`` keys with a successful trial.
        MissingDependency: scikit-learn is not installed (``pip install 'tritonkit[distill]'``; an
            ``ImportError``).
    """
    if not 0 <= tolerance < 1:
        raise ValueError(f"tolerance must be a fraction in [0, 1), got {tolerance}")
    depths = sorted({int(d) for d in depths})
    if not depths or depths[0] < 1:
        raise ValueError(f"depths must be positive integers, got {depths}")
    if folds is not None and folds < 2:
        raise ValueError(f"folds must be at least 2 (or None for leave-one-out), got {folds}")
    decision_tree_classifier()
    notes: List[str] = []
    recs, points, kernel = collect(results, notes)
    min_keys = max(2, int(min_keys))
    if len(recs) < min_keys:
        raise ValueError(f"distill needs at least {min_keys} tuned keys (shapes) with a successful trial to learn "
                         f"from and to check on held-out ones; got {len(recs)} for kernel {kernel!r}. Tune more "
                         "shapes: run the kernel through the tuner at more sizes (e.g. M, N, K over powers of two "
                         "from small to large), each shape is one key")
    recs.sort(key=lambda r: [(0, n, "") if (n := number(v)) is not None else (1, 0.0, v) for v in r.key])
    keys = [r.key for r in recs]
    sources = key_sources(keys, key_names, notes)
    features = key_features(keys, sources, ratios, notes)
    data = KeyData(recs, features, sources, points, tolerance, seed)
    everything = list(range(len(recs)))
    variants = data.variants(depths, ratios)

    # held-out regret of the whole procedure: nested cross-validation
    tree_picks, base_picks = [], []
    for test in data.folds(everything, folds):
        train = [i for i in everything if i not in test]
        v, _ = data.select(train, variants, folds, depth_slack)
        model = data.fit(train, v)
        single = data.best_single(train)
        for i in test:
            tree_picks.append((i, model.predict_key(recs[i].key)))
            base_picks.append((i, single))
    tree_picks.sort()
    base_picks.sort()
    k = len(data.folds(everything, folds))
    method = "leave-one-out" if k == len(recs) else f"{k}-fold"
    held_out = data.regret(method, tree_picks)
    baseline = data.regret(method, base_picks)

    # the final function: depth by cross-validation on all keys, fitted on all keys
    (depth, use_ratios), cv = data.select(everything, variants, folds, depth_slack)
    model = data.fit(everything, (depth, use_ratios))
    training = data.regret("training", [(i, model.predict_key(recs[i].key)) for i in everything])
    partial = [c for c in model.cover if not all(c in r.times for r in recs)]
    if partial:
        notes.append(f"{len(partial)} config(s) of the cover were not measured at every key (no config measured "
                     f"everywhere covers some keys): {'; '.join(partial)}; their regret at the other keys is unknown "
                     "(measure them there to know it)")
    if held_out.unknown or held_out.failed:
        notes.append(f"held out: at {len(held_out.unknown)} key(s) the picked config was not measured and at "
                     f"{len(held_out.failed)} it failed; the speed statistics leave them out")
    leaves = model.root.leaves()
    used: List[str] = []
    for leaf in leaves:
        if leaf.config not in used:
            used.append(leaf.config)
    result = Distilled(kernel=kernel, key_names=[s.name for s in sources if s.dtype_index is None],
                       features=[f.name for f in features], depth=depth, leaves=len(leaves),
                       cv_speed={f"{d}+ratios" if r else str(d): s for (d, r), s in cv.items()}, ratios=use_ratios,
                       configs=[dict(points[c]) for c in used], cover=[dict(points[c]) for c in model.cover],
                       tolerance=tolerance, n_keys=len(recs), goal=goal, held_out=held_out, baseline=baseline,
                       training=training, source="", notes=notes, _model=model)
    result.source = render_source(result)
    return result
