"""The fitted decision tree of a distilled heuristic: :class:`Node` (a split on one feature's raw
value, or a leaf that returns one config) and :class:`Model` (the tree with its features and
configs, which picks a config for a tuning key or for a launch's arguments). Both go to and come
from the plain dicts of ``tritonkit distill --json``'s ``tree``."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence

from .._space import Point, point_key
from ._features import Feature, Source


@dataclass
class Node:
    """A node of the tree.

    Attributes:
        feature: the index of the feature a split tests (in :attr:`Model.features`); -1 for a leaf.
        threshold: a split sends a raw value ``<= threshold`` left (the test is true), else right.
        left / right: a split's children.
        config: a leaf's config name (:func:`~tritonkit.tune.point_key`).
        n_train: training keys that reach the node.
        n_within: a leaf's training keys where its config is within the tolerance of the winner.
        speed: a leaf's geometric-mean speed (winner ms / its config's ms) over its training keys
            where measured, or None.
    """

    feature: int = -1
    threshold: float = 0.0
    left: Optional["Node"] = None
    right: Optional["Node"] = None
    config: str = ""
    n_train: int = 0
    n_within: int = 0
    speed: Optional[float] = None

    @property
    def leaf(self) -> bool:
        """Whether the node returns a config (no split)."""
        return self.feature < 0

    def walk(self, raw: Sequence[float]) -> "Node":
        """The leaf that the raw feature values ``raw`` (one per feature) reach."""
        node = self
        while not node.leaf:
            node = node.left if raw[node.feature] <= node.threshold else node.right
        return node

    def depth(self) -> int:
        """Splits on the longest path down (0 for a leaf)."""
        return 0 if self.leaf else 1 + max(self.left.depth(), self.right.depth())

    def leaves(self) -> List["Node"]:
        """The leaves, left to right."""
        return [self] if self.leaf else self.left.leaves() + self.right.leaves()

    def to_dict(self, model: "Model") -> Dict[str, Any]:
        """Plain JSON data: a split has ``feature`` (its name), ``threshold``, ``test`` (the Python
        condition of the ``if_true`` branch), ``n_train``, ``if_true``, ``if_false``; a leaf has
        ``config`` (the point), ``n_train``, ``n_within``, ``speed``."""
        if self.leaf:
            return {"config": dict(model.points[self.config]), "n_train": self.n_train, "n_within": self.n_within,
                    "speed": self.speed}
        f = model.features[self.feature]
        return {"feature": f.name, "threshold": self.threshold, "test": f.condition(self.threshold),
                "n_train": self.n_train, "if_true": self.left.to_dict(model), "if_false": self.right.to_dict(model)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], features: Sequence[Feature], points: Dict[str, Point]) -> "Node":
        """The inverse of :meth:`to_dict`; a leaf's config is added to ``points`` by name.

        Raises:
            KeyError: a split names a feature not in ``features``, or a field is missing.
        """
        if "config" in d:
            point = dict(d["config"])
            name = point_key(point)
            points.setdefault(name, point)
            return cls(config=name, n_train=int(d.get("n_train", 0)), n_within=int(d.get("n_within", 0)),
                       speed=d.get("speed"))
        index = {f.name: j for j, f in enumerate(features)}
        return cls(feature=index[d["feature"]], threshold=d["threshold"], n_train=int(d.get("n_train", 0)),
                   left=cls.from_dict(d["if_true"], features, points),
                   right=cls.from_dict(d["if_false"], features, points))


@dataclass
class Model:
    """A fitted tree and what it needs to pick configs.

    Attributes:
        features: the features the tree's splits index.
        sources: the key's positions.
        points: config name -> point, for every config the tree (or the cover) names.
        root: the tree.
        cover: the set-cover configs the labels were drawn from (names).
        length: the length of the tuned keys.
    """

    features: List[Feature]
    sources: List[Source]
    points: Dict[str, Point]
    root: Node
    cover: List[str]
    length: int

    def raw_from_key(self, key: Sequence[str]) -> List[float]:
        """Every feature's raw value at a tuning key (its entries as strings)."""
        return [f.raw_from_key(key) for f in self.features]

    def predict_key(self, key: Sequence[str]) -> str:
        """The name of the config picked for a tuning key (its entries as strings).

        Raises:
            ValueError: ``key`` has another length than the tuned keys.
        """
        if len(key) != self.length:
            raise ValueError(f"a key of {len(key)} entries; the tuned keys have {self.length}")
        return self.root.walk(self.raw_from_key(key)).config

    def predict_args(self, args: Mapping[str, Any]) -> str:
        """The name of the config picked for a launch, from the kernel's arguments by name.

        Raises:
            KeyError: a key argument the tree reads is missing from ``args``.
        """
        node = self.root
        while not node.leaf:
            value = self.features[node.feature].raw_from_args(args)
            node = node.left if value <= node.threshold else node.right
        return node.config
