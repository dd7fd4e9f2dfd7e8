"""Regret: how a choice of config per key compares with the per-key tuned winners (:class:`Regret`,
computed by :func:`regret` from the keys' own trials; a key where the picked config was not
measured is *unknown*, one where it did not run correctly *failed*, never imputed)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ._features import TunedKey


@dataclass
class Regret:
    """How a choice of config per key compares with the per-key tuned winners.

    Attributes:
        method: how the keys were held out (``"5-fold"``, ``"leave-one-out"``), or ``"training"``
            (the final function on the keys it was fitted on), or ``"given"`` (:func:`evaluate`).
        n: keys evaluated.
        n_known: keys where the picked config has a time (``n - len(unknown) - len(failed)``).
        speed_geomean: geometric mean over known keys of ``winner_ms / chosen_ms`` (1.0: as fast as
            tuning each key; the goal is >= :data:`GOAL`); None when no key is known.
        speed_worst: the smallest ``winner_ms / chosen_ms``; None when no key is known.
        slowdown_mean: mean over known keys of ``chosen_ms / winner_ms - 1`` (0.05: 5% slower).
        slowdown_worst: the largest such slowdown.
        unknown: keys where the picked config was not measured (its regret there is unknown).
        failed: keys where the picked config was measured but did not run correctly (failed,
            wrong, crashed or pruned).
        per_key: one dict per key: ``key``, ``chosen`` and ``winner`` (config names), ``winner_ms``,
            ``chosen_ms`` and ``speed`` (None unless known), ``status`` (``ok``/``unknown``/``failed``).
    """

    method: str
    n: int
    n_known: int
    speed_geomean: Optional[float]
    speed_worst: Optional[float]
    slowdown_mean: Optional[float]
    slowdown_worst: Optional[float]
    unknown: List[List[str]] = field(default_factory=list)
    failed: List[List[str]] = field(default_factory=list)
    per_key: List[Dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> Dict[str, Any]:
        """Returns: the statistics as plain JSON-ready values."""
        return {"method": self.method, "n": self.n, "n_known": self.n_known, "speed_geomean": self.speed_geomean,
                "speed_worst": self.speed_worst, "slowdown_mean": self.slowdown_mean,
                "slowdown_worst": self.slowdown_worst, "unknown": [list(k) for k in self.unknown],
                "failed": [list(k) for k in self.failed], "per_key": [dict(r) for r in self.per_key]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Regret":
        """The inverse of :meth:`to_dict`.

        Raises:
            KeyError: ``method``, ``n`` or ``n_known`` is missing.
        """
        return cls(method=d["method"], n=int(d["n"]), n_known=int(d["n_known"]),
                   speed_geomean=d.get("speed_geomean"), speed_worst=d.get("speed_worst"),
                   slowdown_mean=d.get("slowdown_mean"), slowdown_worst=d.get("slowdown_worst"),
                   unknown=[list(k) for k in d.get("unknown") or []], failed=[list(k) for k in d.get("failed") or []],
                   per_key=[dict(r) for r in d.get("per_key") or []])


def regret(method: str, pairs: Sequence[Tuple[TunedKey, str]]) -> Regret:
    """The regret of picking config ``c`` at key ``rec`` for each ``(rec, c)`` of ``pairs``.

    Args:
        method: the :attr:`Regret.method` to report.
        pairs: each key with the name of the config picked there.

    Returns:
        :class:`Regret`, statistics over the keys where the picked config has a time.
    """
    per_key, speeds, slow, unknown, failed = [], [], [], [], []
    for rec, c in pairs:
        if c in rec.times:
            status, ms = "ok", rec.times[c]
        else:
            status, ms = ("failed" if c in rec.bad else "unknown"), None
        speed = rec.best_ms / ms if ms else None
        per_key.append({"key": list(rec.key), "chosen": c, "winner": rec.best, "winner_ms": rec.best_ms,
                        "chosen_ms": ms, "speed": speed, "status": status})
        if status == "ok":
            speeds.append(speed)
            slow.append(ms / rec.best_ms - 1.0)
        elif status == "failed":
            failed.append(list(rec.key))
        else:
            unknown.append(list(rec.key))
    return Regret(method=method, n=len(pairs), n_known=len(speeds),
                  speed_geomean=math.exp(sum(math.log(s) for s in speeds) / len(speeds)) if speeds else None,
                  speed_worst=min(speeds) if speeds else None,
                  slowdown_mean=sum(slow) / len(slow) if slow else None,
                  slowdown_worst=max(slow) if slow else None, unknown=unknown, failed=failed, per_key=per_key)
