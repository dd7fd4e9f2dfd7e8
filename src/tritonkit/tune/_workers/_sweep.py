"""Sweeps: one kernel tuned over a list of keys on every GPU of a pool, writing the cache, the
distilled heuristics and a vLLM/SGLang fused-MoE table per device.

Each key is tuned as the in-process tuner tunes one: an :class:`~tritonkit.tune.Evaluator` with
the cache as lookup and the strategy of choice, but its runner is a
:class:`~._pool.PoolRunner`, so its configs are measured by the pool's workers. Several keys are
tuned at once (threads in the driver, ``concurrent_keys``), and their configs share the pool's
queue. Each finished measurement is journaled in the cache's ledger as it arrives; each key is
recorded in the cache once it is tuned; a sweep started again on the same cache merges the ledger
of a killed run first and does not measure anything twice.
"""
from __future__ import annotations

import os
import re
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

from .._cache import KernelId, TuneCache
from .._evaluator import Budget, Evaluator
from .._result import Trial, TuneReport, TuneResult
from .._space import Point
from . import _ledger
from ._pool import Engine, WorkPool
from ._protocol import KeyJob, WorkerSummary, key_strings
from ._tables import MoeTable, write_table


@dataclass
class SweepResult:
    """What a sweep tuned and wrote.

    Attributes:
        kernel: the kernel's name.
        key_names: the names of the keys' entries, in order.
        results: device name -> one :class:`~tritonkit.tune.TuneResult` per key, in key order.
        files: the files written (tables, heuristics modules, result JSON).
        workers: what each worker slot did (:class:`WorkerSummary`).
        notes: what was left out and why (distillation with too few keys, ...).
        seconds: wall seconds of the sweep.
    """

    kernel: str
    key_names: List[str]
    results: Dict[str, List[TuneResult]] = field(default_factory=dict)
    files: List[str] = field(default_factory=list)
    workers: List[WorkerSummary] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)
    seconds: float = 0.0

    def winners(self, device: Optional[str] = None) -> Dict[tuple, Optional[Point]]:
        """key (tuple of strings) -> the winning config (None where no config ran), of ``device``
        (default: the first device)."""
        if not self.results:
            return {}
        rs = self.results[device if device is not None else next(iter(self.results))]
        return {tuple(r.key): (dict(r.winner.point) if r.winner else None) for r in rs}

    def measured(self) -> int:
        """Configs measured by workers in this sweep (cache hits left out)."""
        return sum(1 for rs in self.results.values() for r in rs for t in r.trials if t.source != "cache")


def make_engine(engine: Union[str, Engine] = "local", workers: Optional[int] = None, **options: Any) -> Engine:
    """An engine by name: ``local`` (:class:`~._local.LocalEngine`: a process per GPU of this host)
    or ``ray`` (:class:`~._ray.RayEngine`: an actor per GPU of a Ray cluster, ``$RAY_ADDRESS`` or
    a local Ray); ``options`` go to the engine.

    Raises:
        ValueError: an unknown engine name, or options the engine rejects.
        MissingDependency: ``ray`` without Ray installed.
    """
    if isinstance(engine, Engine):
        return engine
    if engine == "local":
        from ._local import LocalEngine
        return LocalEngine(workers=workers, **options)
    if engine == "ray":
        from ._ray import RayEngine
        return RayEngine(workers=workers, **options)
    raise ValueError(f"unknown engine {engine!r}: local (this host's GPUs) or ray (a Ray cluster)")


def sweep(kernel: str, keys: Sequence[Mapping[str, Any]], job: Callable[[Dict[str, Any]], KeyJob],
          candidates: Union[Sequence[Point], Callable[[Dict[str, Any]], Sequence[Point]]], *, source_hash: str,
          triton_version: Optional[str] = None, strategy: Optional[str] = None,
          budget: Union[None, str, int, Budget] = None, seed: Optional[int] = 0,
          pool: Optional[WorkPool] = None, engine: Union[str, Engine] = "local", workers: Optional[int] = None,
          cache: Union[bool, str, TuneCache] = True, out_dir: Optional[str] = None,
          table: Optional[MoeTable] = None, distill: bool = True, progress: Optional[bool] = None,
          concurrent_keys: Optional[int] = None, keep_ledger: bool = False,
          gpu_type: Optional[str] = None) -> SweepResult:
    """Tune one kernel over ``keys`` on a pool of workers (see the module).

    Args:
        kernel: the kernel's name (the cache and the outputs are named after it).
        keys: the keys, each a dict name -> value (``{"M": 64}``); every key has the same names.
        job: ``job(key)`` -> the :class:`KeyJob` of a key (:class:`~._launch.LaunchJob`,
            :class:`~._protocol.ReplayJob`).
        candidates: the configs (points) to choose from, or ``candidates(key)`` -> them.
        source_hash: the kernel's source hash (the cache's kernel identity; a new source starts
            a fresh cache).
        triton_version: for the kernel identity (default: the installed Triton's, read without
            importing it).
        strategy, budget, seed: as :func:`tritonkit.autotune` (exhaustive for no budget; the
            default strategy with 20% of the candidates otherwise).
        pool: a started :class:`WorkPool` to use (kept open); None: one made from ``engine`` and
            ``workers``, closed at the end.
        engine, workers: ``"local"``, ``"ray"`` (or an :class:`Engine`) and how many workers
            (default every GPU: of this host, or of the Ray cluster).
        cache: True (the default directory), a directory, a :class:`~tritonkit.tune.TuneCache`,
            or False (nothing journaled: a killed sweep starts over).
        out_dir: where the tables, the distilled modules and the results go (None: nothing written
            but the cache).
        table: the fused-MoE table to write per device (needs ``out_dir``).
        distill: distil each device's winners into ``@triton.heuristics`` (needs ``out_dir``,
            scikit-learn and at least 4 keys; otherwise a note says why not).
        progress: a progress bar on stderr (default: when stderr is a terminal).
        concurrent_keys: keys tuned at once (default: twice the workers).
        keep_ledger: keep the merged ledger files (as ``*.merged``: one line per measurement).
        gpu_type: tune only on workers whose device name holds this (``"H100"``; case, spaces and
            dashes aside); with ``engine="ray"`` actors are also placed only on nodes of that Ray
            accelerator type. None: every device the workers have, each tuned separately.

    Returns:
        :class:`SweepResult`.

    Raises:
        ValueError: no keys, keys with different names, an unknown strategy or engine, or no
            worker with a ``gpu_type`` device.
        MissingDependency: ``engine="ray"`` without Ray installed.
        WorkerError: no worker came up, or a worker's runner raised (a bug in the workload, a
            reference that does not fit).
        TuneCacheError: the cache cannot be used.
    """
    from ..strategies import DEFAULT_STRATEGY, get_strategy
    keys = [dict(k) for k in keys]
    if not keys:
        raise ValueError("a sweep needs at least one key")
    names = list(keys[0])
    if any(list(k) != names for k in keys):
        raise ValueError(f"every key of a sweep must have the same names, in the same order ({names})")
    start = time.perf_counter()
    tcache = _cache(cache)
    out = SweepResult(kernel, names)
    if tcache is not None:
        _ledger.merge(tcache, keep=keep_ledger)
    own = pool is None
    pool = pool or WorkPool(make_engine(engine, workers, **({"gpu_type": gpu_type} if engine == "ray" else {}))).start()
    try:
        every = pool.devices()
        devices = [d for d in every if gpu_type is None or _squash(gpu_type) in _squash(str(d))]
        if not devices:
            raise ValueError(f"no worker has a {gpu_type} GPU; the workers have: {', '.join(map(str, every))}")
        plans = [(d, k) for d in devices for k in keys]
        name = strategy or ("exhaustive" if budget is None else DEFAULT_STRATEGY)
        get_strategy(name)  # an unknown name fails now, not in a thread
        bar = _Bar(kernel, len(plans), enabled=sys.stderr.isatty() if progress is None else progress)
        version = triton_version or _triton_version()

        def tune(device: str, key: Dict[str, Any]) -> TuneResult:
            t0 = time.perf_counter()
            cands = list(candidates(dict(key)) if callable(candidates) else candidates)
            b = budget if isinstance(budget, Budget) else Budget.parse(
                None if budget is None and name == "exhaustive" else (str(budget) if budget is not None else "20%"),
                space_size=len(cands))
            bar.add(min(len(cands), b.evaluations or len(cands)))
            kid = KernelId(kernel, source_hash, version, device)
            key_s = key_strings(key)
            runner = pool.runner(job(dict(key)), tcache, kid, key_s, device=device if len(every) > 1 else None)
            ev = Evaluator(cands, runner, b, lookup=(lambda p: tcache.lookup(kid, key_s, p)) if tcache else None,
                           on_trial=bar.update)
            try:
                get_strategy(name, seed=seed).run(ev)
            finally:
                runner.finish()
            result = TuneResult(kernel, key_s, trials=list(ev.trials.values()), strategy=name,
                                tuning_s=time.perf_counter() - t0)
            if tcache is not None:
                tcache.record_many(kid, key_s, [t for t in result.trials if t.source != "cache"])
            bar.key_done()
            return result

        ex = ThreadPoolExecutor(max_workers=concurrent_keys or max(2, 2 * len(pool.gpus)),
                                thread_name_prefix="tritonkit-sweep")
        with bar:
            futures = [(d, ex.submit(tune, d, k)) for d, k in plans]
            try:
                for d, f in futures:
                    out.results.setdefault(d, []).append(f.result())
            except BaseException:  # a key failed, or Ctrl-C: keys not started are not started, and
                ex.shutdown(wait=False, cancel_futures=True)
                if own:  # closing our pool fails the configs in flight, so the threads end now
                    pool.close()
                raise
        ex.shutdown()
        out.workers = pool.summary()
    finally:
        if own:
            pool.close()
        if tcache is not None:
            _ledger.merge(tcache, keep=keep_ledger)
            _ledger.merge(tcache, keep=keep_ledger, only=pool.driver_ledgers())
    if out_dir is not None:
        _write(out, out_dir, table, distill)
    out.seconds = time.perf_counter() - start
    return out


def _write(out: SweepResult, out_dir: str, table: Optional[MoeTable], distill: bool) -> None:
    """The tables, distilled modules and results JSON of every device."""
    import json

    from ..._io import atomic_write_text
    os.makedirs(out_dir, exist_ok=True)
    for device, results in out.results.items():
        safe = re.sub(r"[^A-Za-z0-9]+", "_", device).strip("_") or "device"
        path = os.path.join(out_dir, f"{out.kernel}-{safe}-results.json")
        atomic_write_text(path, json.dumps(TuneReport(results).to_dict(), indent=1) + "\n")
        out.files.append(path)
        if table is not None:
            written = write_table(out_dir, table, device, results, out.key_names)
            if written:
                out.files.append(written)
            else:
                out.notes.append(f"{device}: no key has a winner: no table written")
        if distill:
            _distill(out, out_dir, device, safe, results)


def _distill(out: SweepResult, out_dir: str, device: str, safe: str, results: List[TuneResult]) -> None:
    from ..._imports import MissingDependency
    from ..._io import atomic_write_text
    from .._distill import MIN_KEYS
    from .._distill import distill as fit
    ok = [r for r in results if r.winner is not None]
    if len(ok) < MIN_KEYS:
        out.notes.append(f"{device}: {len(ok)} key(s) with a winner; distillation needs {MIN_KEYS}: not distilled")
        return
    try:
        d = fit(ok, key_names=out.key_names)
    except (MissingDependency, ValueError) as e:
        out.notes.append(f"{device}: not distilled: {e}")
        return
    path = os.path.join(out_dir, f"{out.kernel}_heuristics_{safe}.py")
    atomic_write_text(path, d.source)
    out.files.append(path)


def _squash(name: str) -> str:
    """A device or GPU type's name compared loosely: lower case, letters and digits only
    (Ray's ``RTX-PRO-6000`` is in NVML's ``NVIDIA RTX PRO 6000 Blackwell``)."""
    return re.sub(r"[^a-z0-9]", "", name.lower())


def _cache(cache: Union[bool, str, TuneCache]) -> Optional[TuneCache]:
    if cache is False or cache is None:
        return None
    if isinstance(cache, TuneCache):
        return cache
    return TuneCache(None if cache is True else cache)


def _triton_version() -> str:
    try:
        from importlib.metadata import version
        return version("triton")
    except Exception:
        return "unknown"


class _Bar:
    """One rich progress bar for a sweep: configs decided of the (estimated) total, keys done."""

    def __init__(self, kernel: str, keys: int, enabled: bool):
        self.kernel, self.keys, self.enabled = kernel, keys, enabled
        self.done_keys, self.total, self._bar, self._task = 0, 0, None, None
        self._lock = threading.Lock()

    def __enter__(self) -> "_Bar":
        if self.enabled:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
            self._bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), console=Console(stderr=True), transient=False)
            self._bar.__enter__()
            self._task = self._bar.add_task(self._text(), total=None)
        return self

    def _text(self) -> str:
        return f"sweep {self.kernel}: {self.done_keys}/{self.keys} keys"

    def add(self, n: int) -> None:
        with self._lock:
            self.total += n
            if self._bar is not None:
                self._bar.update(self._task, total=self.total)

    def update(self, trial: Trial) -> None:
        if self._bar is not None:
            self._bar.update(self._task, advance=1)

    def key_done(self) -> None:
        with self._lock:
            self.done_keys += 1
            if self._bar is not None:
                self._bar.update(self._task, description=self._text())

    def __exit__(self, *exc) -> bool:
        if self._bar is not None:
            self._bar.__exit__(*exc)
        return False
