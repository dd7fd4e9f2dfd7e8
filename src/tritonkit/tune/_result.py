"""Plain result objects of the tuner: one :class:`Trial` per config measured, one :class:`TuneResult`
per kernel and key, one :class:`TuneReport` per ``tritonkit tune`` run. Each round-trips through
JSON (``to_dict`` / ``from_dict``): trials go to the cache file, results from the tuned script's
process to its supervisor, reports to ``tritonkit tune --json`` and the doctor."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from ._space import Point, point_key

#: Trial statuses: ``ok`` measured; ``failed`` did not compile or launch (out of resources, a
#: compile error, a Python exception); ``wrong`` ran but its outputs differ from the reference;
#: ``crashed`` took the process or its CUDA context down (illegal memory access, a signal);
#: ``pruned`` left out before any compile because it cannot fit the device.
STATUSES = ("ok", "failed", "wrong", "crashed", "pruned")


@dataclass
class Trial:
    """One config's measurement.

    Attributes:
        point: the config as a plain dict (meta-parameters, ``num_warps``, ``num_stages``, ...).
        status: one of :data:`STATUSES`.
        ms: median kernel time in milliseconds (``inf`` unless ``status == "ok"``).
        ci_ms: a 95% confidence interval of the median, (low, high) in ms, or None when not measured.
        samples: number of timed runs behind the median.
        error: why the config failed, was wrong, crashed or was pruned ("" when ok).
        sm_clock_mhz / mem_clock_mhz: the GPU clocks read through NVML around the measurement
            (None where NVML is not available).
        compile_s: seconds the config took to compile (None when it was compiled earlier).
        source: where the number comes from: ``gpu`` (measured now), ``cpu`` (Triton's CPU
            interpreter, host clock: ``TRITONKIT_TUNE_ON_CPU=1``), ``cache`` (an earlier
            measurement), ``replay`` (a recorded landscape), ``fake`` (tests).
    """

    point: Point
    status: str = "ok"
    ms: float = math.inf
    ci_ms: Optional[Tuple[float, float]] = None
    samples: int = 0
    error: str = ""
    sm_clock_mhz: Optional[float] = None
    mem_clock_mhz: Optional[float] = None
    compile_s: Optional[float] = None
    source: str = "gpu"

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"unknown trial status {self.status!r}; expected one of {STATUSES}")
        if self.status != "ok":
            self.ms = math.inf
        if self.ci_ms is not None:
            self.ci_ms = (float(self.ci_ms[0]), float(self.ci_ms[1]))

    @property
    def key(self) -> str:
        """The config's canonical name (:func:`~tritonkit.tune.point_key`)."""
        return point_key(self.point)

    @property
    def ok(self) -> bool:
        """True when the config ran correctly and has a finite time."""
        return self.status == "ok" and math.isfinite(self.ms)

    def to_dict(self) -> Dict[str, Any]:
        """Plain JSON data (``ms`` None where not finite, ``ci_ms`` a list)."""
        d = asdict(self)
        d["ms"] = self.ms if math.isfinite(self.ms) else None
        d["ci_ms"] = list(self.ci_ms) if self.ci_ms else None
        return d

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Trial":
        """The inverse of :meth:`to_dict` (unknown fields ignored).

        Raises:
            ValueError: an unknown status.
        """
        d = dict(d)
        d["ms"] = math.inf if d.get("ms") is None else float(d["ms"])
        d["ci_ms"] = tuple(d["ci_ms"]) if d.get("ci_ms") else None
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in d.items() if k in known})


@dataclass
class TuneResult:
    """The outcome of tuning one kernel for one key.

    Attributes:
        kernel: the kernel's name.
        key: the tuning key's values, as Triton builds it (the ``key`` arguments' values, then the
            dtypes of tensor arguments), each as a string.
        trials: every config looked at, in the order they were decided (cache hits included).
        tuning_s: wall seconds spent tuning this key (0 on a cache hit).
        strategy: the search strategy's name.
        flops / bytes: work of one launch where known (from the kernel's ``launch_metadata`` or the
            user), for TFLOP/s and GB/s; None where unknown.
        compile_s / check_s / timing_s: wall seconds of ``tuning_s`` spent compiling (in
            parallel), on each config's first run and output check, and timing.
    """

    kernel: str
    key: List[str]
    trials: List[Trial] = field(default_factory=list)
    tuning_s: float = 0.0
    strategy: str = ""
    flops: Optional[float] = None
    bytes: Optional[float] = None
    compile_s: float = 0.0
    check_s: float = 0.0
    timing_s: float = 0.0

    def ranked(self) -> List[Trial]:
        """The configs that ran correctly, fastest first."""
        return sorted((t for t in self.trials if t.ok), key=lambda t: t.ms)

    @property
    def winner(self) -> Optional[Trial]:
        """The fastest correct trial, or None when no config ran correctly."""
        r = self.ranked()
        return r[0] if r else None

    @property
    def runner_up(self) -> Optional[Trial]:
        """The second fastest correct trial, or None."""
        r = self.ranked()
        return r[1] if len(r) > 1 else None

    def count(self, status: str) -> int:
        """How many trials have ``status`` (one of :data:`STATUSES`)."""
        return sum(1 for t in self.trials if t.status == status)

    def tflops(self, trial: Optional[Trial] = None) -> Optional[float]:
        """TFLOP/s of ``trial`` (default the winner), or None where FLOPs are unknown."""
        t = trial or self.winner
        if t is None or not self.flops or not t.ok:
            return None
        return self.flops / (t.ms * 1e-3) / 1e12

    def gbps(self, trial: Optional[Trial] = None) -> Optional[float]:
        """GB/s (1e9 bytes per second) of ``trial`` (default the winner), or None where bytes are unknown."""
        t = trial or self.winner
        if t is None or not self.bytes or not t.ok:
            return None
        return self.bytes / (t.ms * 1e-3) / 1e9

    def to_dict(self) -> Dict[str, Any]:
        """Plain JSON data, with the winner's key (derived: :meth:`from_dict` does not read it) and
        every trial."""
        w = self.winner
        return {"kernel": self.kernel, "key": list(self.key), "strategy": self.strategy, "tuning_s": self.tuning_s,
                "compile_s": self.compile_s, "check_s": self.check_s, "timing_s": self.timing_s, "flops": self.flops,
                "bytes": self.bytes, "winner": w.key if w else None, "trials": [t.to_dict() for t in self.trials]}

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "TuneResult":
        """The inverse of :meth:`to_dict`.

        Raises:
            KeyError: ``kernel`` or ``key`` is missing.
            ValueError: a trial has an unknown status.
        """
        return cls(kernel=d["kernel"], key=list(d["key"]), trials=[Trial.from_dict(t) for t in d.get("trials", [])],
                   tuning_s=float(d.get("tuning_s", 0.0)), strategy=d.get("strategy", ""), flops=d.get("flops"),
                   bytes=d.get("bytes"), compile_s=float(d.get("compile_s", 0.0)),
                   check_s=float(d.get("check_s", 0.0)), timing_s=float(d.get("timing_s", 0.0)))


@dataclass
class TuneReport:
    """What one ``tritonkit tune`` run tuned (its ``--json`` file; the doctor's ``tune`` part).

    Attributes:
        results: one :class:`TuneResult` per kernel and key, every run of a restarted script merged.
        restarts: how many times the script was run again after a crash.
    """

    results: List[TuneResult] = field(default_factory=list)
    restarts: int = 0

    def to_dict(self) -> Dict[str, Any]:
        """Plain JSON data: ``{"results": [TuneResult dicts], "restarts": n}``."""
        return {"results": [r.to_dict() for r in self.results], "restarts": self.restarts}

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "TuneReport":
        """The inverse of :meth:`to_dict`. Results that cannot be read (no ``kernel`` or ``key``, or
        not a mapping) are left out rather than failing the whole report.

        Raises:
            TypeError: ``d`` is not a mapping.
        """
        if not isinstance(d, dict):
            raise TypeError(f"a tune report is a JSON object, not {type(d).__name__}")
        results = []
        for r in d.get("results") or []:
            try:
                results.append(TuneResult.from_dict(r))
            except (KeyError, TypeError, ValueError, AttributeError):
                continue
        return cls(results=results, restarts=int(d.get("restarts") or 0))
