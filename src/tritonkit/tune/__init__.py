"""``tritonkit.tune``: an autotuner for Triton kernels.

Public API:

* :func:`autotune` — a drop-in for ``triton.autotune`` (parallel compilation, interleaved timing
  with L2 flushes and NVML clocks, correctness per config, crash journal, persistent cache,
  search strategies over large spaces).
* :class:`Space` — value choices per meta-parameter and constraints; points are plain dicts.
* :class:`Budget`, :class:`Evaluator`, :mod:`tritonkit.tune.strategies` — the search machinery
  (strategies only see the evaluator).
* :class:`Runner` — the interface of what measures configs for the Evaluator (one :class:`Trial`
  per point, times in ms); :class:`ReplayRunner` answers from a recorded landscape (strategies
  tested without a GPU); the real one launches the kernel (``tune._runner.LaunchRunner``).
* :class:`TuneCache`, :class:`KernelId` — the persistent per-config cache.
* :class:`Trial`, :class:`TuneResult`, :class:`TuneReport` — plain result objects
  (``to_dict``/``from_dict``).
* :func:`distill` — turn tuned winners over many keys into ``@triton.heuristics`` code
  (:class:`Distilled`, also ``to_dict``/``from_dict``).
* :func:`sweep_kernel`, :func:`sweep` — one kernel over many keys on a pool of workers, one per
  GPU (:class:`WorkPool`, :class:`LocalEngine`), writing the cache, the distilled heuristics and
  vLLM-style fused-MoE tables (:class:`MoeTable`); :class:`WorkerError` when workers cannot measure.
* :data:`EXIT_CONTEXT_POISONED` — the exit status of a process whose CUDA context a config broke.
* :func:`install_patch` — make ``triton.autotune`` build tritonkit's autotuner in this process
  (what ``tritonkit tune`` and ``tritonkit profile --tuned`` do in the script's process).

Heavy modules (torch, triton) and the optional libraries (Optuna, filelock, nvidia-ml-py: the
``tune`` extra; scikit-learn: the ``distill`` extra) are imported only when used; a missing
optional library raises :class:`~tritonkit._imports.MissingDependency` naming the extra, except
nvidia-ml-py, without which timing goes on without clock readings.
"""
from ._evaluator import Budget, BudgetExhausted, Evaluator
from ._result import STATUSES, Trial, TuneReport, TuneResult
from ._runner_api import Runner
from ._space import Space, parse_point_key, point_from_triton_str, point_key

__all__ = ["autotune", "Space", "Budget", "BudgetExhausted", "Evaluator", "Trial", "TuneResult", "TuneReport",
           "STATUSES", "point_key", "parse_point_key", "point_from_triton_str", "Runner", "ReplayRunner", "TuneCache",
           "KernelId", "TimingOptions", "distill", "Distilled", "DeviceLimits", "install_patch",
           "EXIT_CONTEXT_POISONED", "sweep", "sweep_kernel", "MoeTable", "WorkPool", "LocalEngine", "WorkerError"]

_LAZY = {
    "autotune": "._autotuner",
    "ReplayRunner": "._replay",
    "TuneCache": "._cache",
    "KernelId": "._cache",
    "TimingOptions": "._bench",
    "distill": "._distill",
    "Distilled": "._distill",
    "EXIT_CONTEXT_POISONED": "._autotuner",
    "install_patch": "._patch",
    "DeviceLimits": "._prune",
    "sweep": "._workers._sweep",
    "sweep_kernel": "._workers._launch",
    "MoeTable": "._workers._tables",
    "WorkPool": "._workers._pool",
    "LocalEngine": "._workers._local",
    "WorkerError": "._workers._protocol",
}


def __getattr__(name):
    if name in _LAZY:
        import importlib
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module 'tritonkit.tune' has no attribute {name!r}")
