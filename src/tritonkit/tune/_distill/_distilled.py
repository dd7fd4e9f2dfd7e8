"""The result of :func:`~tritonkit.tune.distill`: :class:`Distilled`, the generated function's
source with the tree behind it and its measured regret; it goes to and comes back from the JSON
that ``tritonkit distill --json`` writes (``to_dict``/``from_dict``)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from .._space import Point, point_key
from ._features import Source, dtype_source, feature_from_name
from ._model import Model, Node
from ._regret import Regret


@dataclass
class Distilled:
    """A distilled heuristic: the function's source, the tree behind it and its measured regret.

    Attributes:
        kernel: the kernel's name.
        key_names: the name of each key argument (positions past them are the dtypes of tensor
            arguments, read in the generated code as ``triton.autotune`` does).
        features: the features the tree could split on (``"M"``, ``"M/N"``, ``"dtype0 == 'torch.float16'"``).
        depth: the tree's maximum depth chosen by cross-validation (the generated ifs nest at most
            this deep; less where splits were merged).
        leaves: how many cases the final function has.
        cv_speed: ``"depth"`` or ``"depth+ratios"`` -> cross-validated geometric-mean speed of that
            variant on all keys (the selection score, where a key whose picked config is unknown or
            failed counts as speed 0.5; the simplest variant within ``depth_slack`` of the best wins).
        ratios: whether the tree may split on ratios of key arguments (chosen by cross-validation:
            only where they help).
        configs: the configs the function returns, in the order they first appear in it.
        cover: the set-cover configs the labels were drawn from (a superset of ``configs``).
        tolerance: a config within this fraction of a key's winner covers the key.
        n_keys: keys used (with at least one successful trial).
        goal: the documented goal for ``held_out.speed_geomean``.
        held_out: regret on held-out keys (nested cross-validation).
        baseline: regret on held-out keys of one config for all keys (the best on the training keys),
            for comparison.
        training: regret of the final function on the keys it was fitted on.
        source: the generated Python module (``choose_config(args) -> dict`` and ``HEURISTICS``).
        notes: keys skipped, features left out, configs not measured everywhere, ...
    """

    kernel: str
    key_names: List[str]
    features: List[str]
    depth: int
    leaves: int
    cv_speed: Dict[str, float]
    ratios: bool
    configs: List[Point]
    cover: List[Point]
    tolerance: float
    n_keys: int
    goal: float
    held_out: Regret
    baseline: Regret
    training: Regret
    source: str
    notes: List[str] = field(default_factory=list)
    _model: Any = field(default=None, repr=False, compare=False)

    @property
    def meets_goal(self) -> bool:
        """Whether the held-out geometric-mean speed is at least :attr:`goal`."""
        s = self.held_out.speed_geomean
        return s is not None and s >= self.goal

    def _fitted(self) -> Model:
        if self._model is None:
            raise ValueError(f"this distilled heuristic of {self.kernel} has no tree (it was read from JSON without "
                             "one): run distill() again, or exec its source")
        return self._model

    def predict(self, key: Sequence[Any]) -> Point:
        """The config the distilled function picks for a tuning key (as in :attr:`TuneResult.key`).

        Raises:
            ValueError: ``key`` has a different length than the tuned keys, or the result has no tree.
        """
        model = self._fitted()
        return dict(model.points[model.predict_key([str(v) for v in key])])

    def choose_config(self, args: Mapping[str, Any]) -> Point:
        """The config for a launch, from the kernel's arguments by name (what the generated
        ``choose_config`` computes, without exec).

        Raises:
            KeyError: a key argument the function reads is missing from ``args``.
            ValueError: the result has no tree.
        """
        model = self._fitted()
        return dict(model.points[model.predict_args(args)])

    def splits_on(self) -> List[str]:
        """Returns: the features the generated function actually tests, in the order they first
        appear (empty where the result has no tree)."""
        out: List[str] = []

        def walk(node):
            if node is None or node.leaf:
                return
            name = self._model.features[node.feature].name
            if name not in out:
                out.append(name)
            walk(node.left)
            walk(node.right)

        walk(self._model.root if self._model else None)
        return out

    def leaf_counts(self) -> Dict[str, Tuple[int, int]]:
        """Per config the tree picks (its :func:`~tritonkit.tune.point_key`): ``(training keys that
        reach it, how many of them it is within tolerance at)``, summed over its leaves (empty
        where the result has no tree)."""
        counts: Dict[str, Tuple[int, int]] = {}
        for leaf in (self._model.root.leaves() if self._model else []):
            n, w = counts.get(leaf.config, (0, 0))
            counts[leaf.config] = (n + leaf.n_train, w + leaf.n_within)
        return counts

    def to_dict(self) -> Dict[str, Any]:
        """Returns: the result as plain JSON-ready values (the tree as nested dicts, the source as
        text; ``splits_on`` and ``meets_goal`` derived); :meth:`from_dict` reads it back."""
        return {"kernel": self.kernel, "key_names": list(self.key_names), "features": list(self.features),
                "splits_on": self.splits_on(),
                "depth": self.depth, "leaves": self.leaves, "cv_speed": dict(self.cv_speed),
                "ratios": self.ratios,
                "configs": [dict(c) for c in self.configs], "cover": [dict(c) for c in self.cover],
                "tolerance": self.tolerance, "n_keys": self.n_keys, "goal": self.goal, "meets_goal": self.meets_goal,
                "held_out": self.held_out.to_dict(), "baseline": self.baseline.to_dict(),
                "training": self.training.to_dict(), "tree": self._model.root.to_dict(self._model) if self._model
                else None, "notes": list(self.notes), "source": self.source}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Distilled":
        """The inverse of :meth:`to_dict` (the derived ``splits_on`` and ``meets_goal`` are
        recomputed, not read).

        The tree is rebuilt from ``tree``, so :meth:`predict`, :meth:`choose_config`,
        :meth:`splits_on` and :meth:`leaf_counts` work again and give what they gave before; where
        ``tree`` is null, the result has no tree and :meth:`predict` and :meth:`choose_config`
        raise ``ValueError``. The key's length is read from the regrets' ``per_key`` (the
        positions past ``key_names`` are dtypes).

        Raises:
            KeyError: a field is missing.
            ValueError: the tree names a feature that ``features`` does not describe.
        """
        key_names = [str(n) for n in d["key_names"]]
        held_out, baseline, training = (Regret.from_dict(d[k]) for k in ("held_out", "baseline", "training"))
        configs = [dict(c) for c in d.get("configs") or []]
        cover = [dict(c) for c in d.get("cover") or []]
        features = [str(f) for f in d.get("features") or []]
        model = None
        if d.get("tree") is not None:
            length = _key_length(len(key_names), (training, held_out, baseline))
            sources = [Source(i, n) for i, n in enumerate(key_names)]
            sources += [dtype_source(i, i - len(key_names)) for i in range(len(key_names), length)]
            feats = [feature_from_name(f, sources) for f in features]
            points = {point_key(p): p for p in cover + configs}
            root = Node.from_dict(d["tree"], feats, points)
            model = Model(feats, sources, points, root, [point_key(p) for p in cover], length)
        return cls(kernel=d["kernel"], key_names=key_names, features=features, depth=int(d["depth"]),
                   leaves=int(d["leaves"]), cv_speed={str(k): float(v) for k, v in (d.get("cv_speed") or {}).items()},
                   ratios=bool(d.get("ratios", False)), configs=configs, cover=cover,
                   tolerance=float(d["tolerance"]), n_keys=int(d["n_keys"]), goal=float(d["goal"]),
                   held_out=held_out, baseline=baseline, training=training, source=d.get("source", ""),
                   notes=[str(n) for n in d.get("notes") or []], _model=model)


def _key_length(named: int, regrets: Sequence[Regret]) -> int:
    """The tuned keys' length, from the first key a regret lists (else ``named``)."""
    for r in regrets:
        for row in r.per_key:
            key: Optional[List[str]] = row.get("key")
            if key is not None:
                return len(key)
    return named
