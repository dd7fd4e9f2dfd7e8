"""Replay a recorded (or synthetic) timing landscape instead of a GPU: for testing and comparing
search strategies without a device.

A *landscape* maps configs to median times in milliseconds (``inf`` or None: the config failed,
e.g. out of resources). :class:`ReplayRunner` answers :class:`~tritonkit.tune._evaluator.Evaluator`'s
``measure`` calls from it, optionally with seeded multiplicative noise and a simulated cost in
seconds per evaluation (read through :meth:`ReplayRunner.clock`, which an Evaluator can take as
its clock so that time budgets work in replay too).

The generators at the end (:func:`matmul_grid`, :func:`synthetic_landscape`,
:func:`permute_param`) build landscapes over the same BLOCK_M/BLOCK_N/BLOCK_K/warps/stages grid as
the shared H100 matmul recording; the strategy tests and ``benchmarks/tune_strategies.py`` use them
to check that a strategy is not tuned to one landscape.
"""
from __future__ import annotations

import itertools
import json
import math
import zlib
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from ._result import Trial
from ._runner_api import Runner
from ._space import Point, parse_point_key, point_from_triton_str, point_key

Landscape = Union[Mapping[str, Optional[float]], Iterable[Tuple[Mapping[str, Any], Optional[float]]]]

NOT_RECORDED = "not in the recorded landscape"
OUT_OF_RESOURCES = "out of resources (recorded)"


def _parse_key(key: str) -> Point:
    """A point from a landscape key: ``str(triton.Config)`` (``"BM: 32, ..."``) or a point key (``"BM=32,..."``)."""
    return point_from_triton_str(key) if ":" in key else parse_point_key(key)


def _to_ms(value: Any) -> float:
    if value is None:
        return math.inf
    value = float(value)
    return value if math.isfinite(value) and value > 0 else math.inf


class ReplayRunner(Runner):
    """A runner (:class:`~tritonkit.tune._runner_api.Runner`) that looks configs up in a recorded
    landscape instead of timing them.

    Call it with a list of points (as :class:`~tritonkit.tune._evaluator.Evaluator` does) to get one
    :class:`~tritonkit.tune.Trial` per point, ``source="replay"``: ``ok`` with the recorded median
    (times the noise factor), ``failed`` with error ``"out of resources (recorded)"`` where the
    recording is ``inf``/None, and ``failed`` with error ``"not in the recorded landscape"`` for a
    point the recording does not hold (never a KeyError).

    Args:
        landscape: config -> median ms. Either a mapping whose keys are ``str(triton.Config)``
            strings or :func:`~tritonkit.tune.point_key` strings, or an iterable of
            ``(point, ms)`` pairs. ``inf``, None, NaN or a non-positive time mean "failed".
        noise: relative standard deviation of a multiplicative log-normal noise on each time
            (0.015 means about 1.5%); 0 replays the recording exactly. A config's noise factor is
            fixed by ``seed`` and its key, so a replay does not depend on the order of requests.
        seed: seed of the noise (None: fresh entropy).
        seconds_per_eval: simulated wall seconds that each evaluated config costs; :meth:`clock`
            advances by this much per config measured.

    Raises:
        ValueError: the landscape is empty, a key cannot be parsed, or two keys name the same config.
    """

    def __init__(self, landscape: Landscape, noise: float = 0.0, seed: Optional[int] = None,
                 seconds_per_eval: float = 0.0):
        if noise < 0:
            raise ValueError(f"noise must be >= 0, got {noise}")
        if seconds_per_eval < 0:
            raise ValueError(f"seconds_per_eval must be >= 0, got {seconds_per_eval}")
        items = landscape.items() if isinstance(landscape, Mapping) else landscape
        self._points: Dict[str, Point] = {}
        self._ms: Dict[str, float] = {}
        for key, ms in items:
            point = dict(key) if isinstance(key, Mapping) else _parse_key(str(key))
            k = point_key(point)
            if k in self._points:
                raise ValueError(f"the landscape names config {k} twice")
            self._points[k] = point
            self._ms[k] = _to_ms(ms)
        if not self._points:
            raise ValueError("empty landscape: no config recorded")
        self.noise = float(noise)
        self.seed = int(np.random.SeedSequence().entropy % (2 ** 63)) if seed is None else int(seed)
        self.seconds_per_eval = float(seconds_per_eval)
        self._elapsed = 0.0
        #: number of configs measured (calls to the runner, summed over their points).
        self.evaluations = 0
        #: number of calls (batches).
        self.calls = 0

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_file(cls, path: str, shape: Optional[str] = None, **kwargs: Any) -> "ReplayRunner":
        """A runner from a landscape JSON file.

        Two formats are read: the shared recording format ``{shape: {"timings_ms": {config: ms},
        "wall_s": ..., "torch_ms": ...}}`` (pick the shape with ``shape``; it may be left out when
        the file holds one), and a flat ``{config: ms}`` mapping.

        Args:
            path: the JSON file.
            shape: which recorded shape to replay (e.g. ``"4096"``).
            **kwargs: ``noise``, ``seed``, ``seconds_per_eval`` (see the class).

        Returns:
            A :class:`ReplayRunner`.

        Raises:
            KeyError: ``shape`` is not in the file (the message lists the shapes that are).
            ValueError: ``shape`` is needed (several shapes) but not given, or the file holds no timings.
        """
        with open(path) as f:
            data = json.load(f)
        return cls(cls._select(data, shape, path), **kwargs)

    @staticmethod
    def _select(data: Mapping[str, Any], shape: Optional[str], where: str) -> Mapping[str, Any]:
        nested = {k: v for k, v in data.items() if isinstance(v, Mapping) and "timings_ms" in v}
        if not nested:
            if shape is not None:
                raise KeyError(f"{where}: no shape {shape!r}: the file is a flat config -> ms mapping")
            return data
        if shape is None:
            if len(nested) != 1:
                raise ValueError(f"{where} records several shapes {sorted(nested)}; pick one with shape=")
            shape = next(iter(nested))
        if str(shape) not in nested:
            raise KeyError(f"{where}: no shape {shape!r}; recorded shapes: {sorted(nested)}")
        return nested[str(shape)]["timings_ms"]

    # ------------------------------------------------------------------ the runner
    def __call__(self, points: Sequence[Point]) -> List[Trial]:
        """Replay a batch of points.

        Args:
            points: the configs to "measure".

        Returns:
            One :class:`Trial` per point, in order (``source="replay"``, ``samples=1`` when ok).
        """
        self.calls += 1
        out = []
        for point in points:
            self.evaluations += 1
            self._elapsed += self.seconds_per_eval
            k = point_key(point)
            if k not in self._ms:
                out.append(Trial(dict(point), status="failed", error=NOT_RECORDED, source="replay"))
                continue
            ms = self._ms[k]
            if not math.isfinite(ms):
                out.append(Trial(dict(point), status="failed", error=OUT_OF_RESOURCES, source="replay"))
                continue
            out.append(Trial(dict(point), status="ok", ms=ms * self._factor(k), samples=1, source="replay"))
        return out

    def _factor(self, key: str) -> float:
        if self.noise == 0:
            return 1.0
        z = np.random.default_rng([self.seed, zlib.crc32(key.encode())]).standard_normal()
        return float(math.exp(self.noise * z))

    def clock(self) -> float:
        """Simulated seconds spent so far (``seconds_per_eval`` per config measured); pass it as an
        Evaluator's ``clock`` to replay time budgets."""
        return self._elapsed

    # ------------------------------------------------------------------ the recording
    def points(self) -> List[Point]:
        """Every recorded config (failed ones included), in the recording's order: the candidates."""
        return [dict(p) for p in self._points.values()]

    def true_ms(self, point: Mapping[str, Any]) -> float:
        """The recorded median of ``point`` in ms, without noise (``inf`` if failed or not recorded)."""
        return self._ms.get(point_key(point), math.inf)

    def noisy_ms(self, point: Mapping[str, Any]) -> float:
        """What the runner answers for ``point`` (ms, noise included; ``inf`` if failed or not recorded)."""
        k = point_key(point)
        ms = self._ms.get(k, math.inf)
        return ms * self._factor(k) if math.isfinite(ms) else math.inf

    @property
    def best(self) -> Trial:
        """The fastest recorded config, noise-free (a :class:`Trial`, ``source="replay"``).

        Raises:
            ValueError: every recorded config failed.
        """
        ok = [(ms, k) for k, ms in self._ms.items() if math.isfinite(ms)]
        if not ok:
            raise ValueError("every config of the landscape failed")
        ms, k = min(ok)
        return Trial(dict(self._points[k]), status="ok", ms=ms, samples=1, source="replay")

    def landscape(self) -> Dict[str, float]:
        """The recording as ``{point_key: ms}`` (noise-free; ``inf`` for failed configs)."""
        return dict(self._ms)

    def __len__(self) -> int:
        return len(self._points)

    def __repr__(self) -> str:
        n_ok = sum(math.isfinite(v) for v in self._ms.values())
        return (f"ReplayRunner({len(self)} configs, {n_ok} ran, best {self.best.ms:.4g} ms, noise {self.noise:g})"
                if n_ok else f"ReplayRunner({len(self)} configs, none ran)")


# ====================================================================== synthetic landscapes
#: The grid of the shared H100 matmul recording (GROUP_M fixed at 8): 4*4*3*2*4 = 384 configs.
MATMUL_GRID: Dict[str, List[Any]] = {"BM": [32, 64, 128, 256], "BN": [32, 64, 128, 256], "BK": [32, 64, 128],
                                     "GM": [8], "num_warps": [4, 8], "num_stages": [2, 3, 4, 5]}

#: Kinds of :func:`synthetic_landscape`.
SYNTHETIC_KINDS = ("bowl", "roofline", "multimodal")

_SMEM_BYTES = 232448   # H100: 227 KiB of shared memory per block
_N_SM = 132


def matmul_grid(grid: Optional[Mapping[str, Sequence[Any]]] = None) -> List[Point]:
    """Every point of a matmul tile grid (default :data:`MATMUL_GRID`), in product order.

    Args:
        grid: parameter name -> values; must hold ``BM``, ``BN``, ``BK``, ``num_warps``, ``num_stages``
            for the synthetic models.

    Returns:
        A list of points.
    """
    grid = dict(grid or MATMUL_GRID)
    names = list(grid)
    return [dict(zip(names, vals)) for vals in itertools.product(*(grid[n] for n in names))]


def _smem_fails(p: Point, elem_bytes: int = 2) -> bool:
    return p["num_stages"] * (p["BM"] + p["BN"]) * p["BK"] * elem_bytes > _SMEM_BYTES


def _spill_factor(p: Point) -> float:
    """fp32 accumulator registers per thread; beyond ~200 the kernel spills and slows down sharply."""
    acc = p["BM"] * p["BN"] / (32 * p["num_warps"])
    return 1.0 if acc <= 128 else (1.15 if acc <= 256 else 6.0)


def synthetic_landscape(kind: str, seed: int = 0, points: Optional[Sequence[Point]] = None) -> Dict[str, float]:
    """A synthetic but realistic matmul timing landscape over a tile grid.

    Kinds:

    * ``"bowl"``: smooth, one minimum: a log-quadratic bowl in log2(BM), log2(BN), log2(BK), warps and
      stages around a seeded optimum, times a register-spill penalty, ``inf`` where the shared memory
      (stages x (BM+BN) x BK x 2 bytes) exceeds 227 KiB.
    * ``"roofline"``: a roofline model of a seeded problem shape (M, N, K among a few common ones):
      per-tile compute vs. memory time, wave quantization over 132 SMs, occupancy from shared memory,
      latency hiding from stages x BK, warps that suit the tile size, spills: strong interactions
      between parameters, plateaus and steps.
    * ``"multimodal"``: several wells in index space: broad shallow local minima and one narrower,
      deeper global one, over a seeded random tilt, with the same out-of-resources region.

    Args:
        kind: one of :data:`SYNTHETIC_KINDS`.
        seed: seeds the landscape (optimum location, problem shape, wells).
        points: the configs (default :func:`matmul_grid`); need ``BM``, ``BN``, ``BK``, ``num_warps``,
            ``num_stages``.

    Returns:
        ``{point_key: ms}`` with ``inf`` for failed configs.

    Raises:
        ValueError: an unknown kind.
    """
    if kind not in SYNTHETIC_KINDS:
        raise ValueError(f"unknown synthetic landscape {kind!r}; kinds: {SYNTHETIC_KINDS}")
    points = list(points) if points is not None else matmul_grid()
    rng = np.random.default_rng([zlib.crc32(kind.encode()), seed])
    model = {"bowl": _bowl, "roofline": _roofline, "multimodal": _multimodal}[kind](points, rng)
    out = {}
    for p in points:
        out[point_key(p)] = math.inf if _smem_fails(p) else float(model(p))
    return out


def _bowl(points: Sequence[Point], rng: np.random.Generator):
    centre = {"BM": rng.uniform(5.5, 7.8), "BN": rng.uniform(5.5, 7.8), "BK": rng.uniform(5.0, 6.8),
              "num_warps": rng.uniform(2.0, 3.0), "num_stages": rng.uniform(2.5, 4.5)}
    weight = {k: rng.uniform(0.04, 0.15) for k in centre}
    weight["num_stages"] = rng.uniform(0.01, 0.04)
    base = rng.uniform(0.1, 1.0)

    def f(p: Point) -> float:
        x = {"BM": math.log2(p["BM"]), "BN": math.log2(p["BN"]), "BK": math.log2(p["BK"]),
             "num_warps": math.log2(p["num_warps"]), "num_stages": p["num_stages"]}
        return base * math.exp(sum(weight[k] * (x[k] - centre[k]) ** 2 for k in centre)) * _spill_factor(p)
    return f


_SHAPES = [(4096, 4096, 4096), (8192, 8192, 1024), (1024, 1024, 8192), (2048, 8192, 2048), (512, 4096, 4096),
           (16384, 1024, 4096), (3072, 3072, 3072), (768, 768, 16384)]


def _roofline(points: Sequence[Point], rng: np.random.Generator):
    M, N, K = _SHAPES[int(rng.integers(len(_SHAPES)))]
    peak = 990e12 / _N_SM * rng.uniform(0.8, 1.0)    # dense bf16 FLOP/s per SM
    bw = 3.35e12 * rng.uniform(0.6, 0.9)              # HBM bytes/s for the whole chip
    lat = rng.uniform(0.6, 1.4)                       # how much pipelining latency hiding matters

    def f(p: Point) -> float:
        bm, bn, bk, w, s = p["BM"], p["BN"], p["BK"], p["num_warps"], p["num_stages"]
        tiles = math.ceil(M / bm) * math.ceil(N / bn)
        smem = s * (bm + bn) * bk * 2
        per_sm = max(1, min(_SMEM_BYTES // max(smem, 1), 2048 // (32 * w), 4))
        waves = math.ceil(tiles / (_N_SM * per_sm))
        # tensor-core efficiency: small tiles feed the MMA units poorly; warps must suit the tile
        mma_eff = min(1.0, (bm * bn) / (128 * 256)) ** 0.35
        warp_fit = 1.0 / (1.0 + 0.5 * abs(math.log2(bm * bn / (w * 4096))) ** 1.5 / 4)
        hide = min(1.0, (s - 1) * bk / (128 * lat)) ** 0.5
        eff = max(0.05, mma_eff * warp_fit * (0.35 + 0.65 * hide))
        t_compute = 2 * bm * bn * K / (peak * eff) * per_sm       # per wave, per SM (blocks share the SM)
        traffic = (M * N * K * 2) * (1 / bm + 1 / bn) / 4          # L2 hits cut HBM traffic (GROUP_M)
        t_mem = traffic / bw / max(1, waves)                      # per wave
        t = waves * max(t_compute, t_mem) + 4e-6 * waves
        return 1e3 * t * _spill_factor(p)
    return f


def _multimodal(points: Sequence[Point], rng: np.random.Generator):
    names = ["BM", "BN", "BK", "num_warps", "num_stages"]
    values = {n: sorted({p[n] for p in points}) for n in names}

    def idx(p: Point) -> np.ndarray:
        return np.array([values[n].index(p[n]) / max(1, len(values[n]) - 1) for n in names])

    legal = [p for p in points if not _smem_fails(p)]
    centres = [idx(legal[int(i)]) for i in rng.choice(len(legal), size=5, replace=False)]
    depth = [0.45] + list(rng.uniform(0.2, 0.38, size=4))      # the first well is the global one
    width = [0.22] + list(rng.uniform(0.3, 0.5, size=4))       # ... and the narrowest
    tilt = rng.normal(0, 0.08, size=len(names))
    base = rng.uniform(0.1, 1.0)

    def f(p: Point) -> float:
        x = idx(p)
        v = 1.0 + float(tilt @ (x - 0.5))
        for c, d, w in zip(centres, depth, width):
            v -= d * math.exp(-float(np.sum((x - c) ** 2)) / (2 * w * w))
        return base * max(0.05, v) * _spill_factor(p)
    return f


def permute_param(landscape: Mapping[str, float], param: str, seed: int = 0) -> Dict[str, float]:
    """A landscape derived from ``landscape`` by permuting one parameter's values (a seeded
    derangement where possible), so that the parameter's order no longer means anything while the
    rest of the structure and the distribution of times stay.

    Args:
        landscape: config key (``point_key`` or ``str(triton.Config)``) -> ms.
        param: the parameter whose values are permuted.
        seed: seeds the permutation.

    Returns:
        ``{point_key: ms}`` over the same configs.

    Raises:
        KeyError: a config lacks ``param``.
    """
    points = {k: _parse_key(k) for k in landscape}
    values = sorted({p[param] for p in points.values()}, key=repr)
    rng = np.random.default_rng([zlib.crc32(param.encode()), seed])
    perm = list(values)
    for _ in range(100):
        perm = list(rng.permutation(np.array(values, dtype=object)))
        if len(values) < 2 or all(a != b for a, b in zip(values, perm)):
            break
    mapping = dict(zip(values, perm))
    out = {}
    for k, p in points.items():
        q = {**p, param: mapping[p[param]]}
        out[point_key(q)] = landscape[k]
    return out
