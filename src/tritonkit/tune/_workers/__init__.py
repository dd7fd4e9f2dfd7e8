"""Tuning past one GPU: a work queue of configs dealt out to workers, one per GPU, behind the
:class:`~tritonkit.tune.Runner` interface, so strategies, the evaluator, the cache and
distillation are unchanged.

The package, by concept:

* :mod:`._protocol`: the messages between the driver and a worker, what a worker does with them
  (:class:`KeyJob`: what a worker needs for one key; :class:`ReplayJob`: a recorded landscape);
* :mod:`._ledger`: the append-only journal of finished measurements under the cache directory;
* :mod:`._pool`: the driver (:class:`WorkPool`, one :class:`PoolRunner` per key): the queue,
  dealing, requeueing the work of dead workers, ``crashed`` after two kills;
* the engines, one module each behind :class:`Engine`: :mod:`._local` (worker processes on this
  host, ``CUDA_VISIBLE_DEVICES`` per worker) and :mod:`._ray` (:class:`RayEngine`: an actor per GPU
  of a Ray cluster, ``num_gpus=1``; Ray itself is imported only when one is made);
* :mod:`._launch`: :class:`LaunchJob`, a real kernel's launch on a worker's GPU;
* :mod:`._sweep`: :func:`sweep`, one kernel over many keys, writing the cache, the distilled
  heuristics and vLLM-style tables (:mod:`._tables`).
"""
from ._local import LocalEngine, visible_gpus
from ._pool import Engine, PoolRunner, WorkPool
from ._protocol import KeyJob, ReplayJob, WorkerError, WorkerSummary
from ._ray import RayEngine

__all__ = ["WorkPool", "PoolRunner", "Engine", "LocalEngine", "RayEngine", "visible_gpus", "KeyJob", "ReplayJob",
           "WorkerError", "WorkerSummary"]
