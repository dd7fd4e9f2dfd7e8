"""``tritonkit.autotune``: a drop-in for ``triton.autotune`` that compiles in parallel, times with
noise control, rejects wrong configs, survives crashing ones, remembers every measurement, and
searches large spaces with real strategies."""
from __future__ import annotations

import inspect
import os
import sys
import time
import warnings
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

from ._evaluator import Budget, Evaluator
from ._result import Trial, TuneResult
from ._space import Space, config_from_point, point_from_config, point_key

#: Every TuneResult made in this process, in order (``tritonkit tune`` reports them).
RESULTS: List[TuneResult] = []

#: Functions called with every new TuneResult (``tritonkit tune`` writes them to its report).
ON_RESULT: List[Callable[[TuneResult], None]] = []

#: Set by ``tritonkit tune`` in the process it runs: defaults for every autotuner made there.
DEFAULTS: Dict[str, Any] = {}

#: Exit status of a process whose CUDA context a config broke (``tritonkit tune`` restarts it).
EXIT_CONTEXT_POISONED = 86


def _base_autotuner():
    from triton.runtime.autotuner import Autotuner
    return Autotuner


def _make_class():
    Base = _base_autotuner()

    class Autotuner(Base):
        """Triton's ``Autotuner`` with tritonkit's tuning underneath (see :func:`autotune`)."""

        def __init__(self, fn, arg_names, configs, key, reset_to_zero, restore_value, pre_hook=None,
                     post_hook=None, prune_configs_by=None, warmup=None, rep=None, use_cuda_graph=False,
                     do_bench=None, cache_results=False, *, space: Optional[Space] = None, strategy=None,
                     budget=None, reference=None, check=True, cache=True, seed=0, timing=None, verbose=None,
                     progress=None):
            for what, names in (("key", key), ("reset_to_zero", reset_to_zero), ("restore_value", restore_value)):
                for name in names or ():
                    if name not in arg_names:  # Triton < 3.7 drops unknown names silently
                        raise ValueError(f"{what}: {name!r} is not an argument of the kernel; its arguments are "
                                         f"{', '.join(arg_names)}")
            kw = dict(pre_hook=pre_hook, post_hook=post_hook, prune_configs_by=prune_configs_by, warmup=warmup,
                      rep=rep, use_cuda_graph=use_cuda_graph, do_bench=do_bench)
            if "cache_results" in inspect.signature(Base.__init__).parameters:
                kw["cache_results"] = False  # tritonkit's cache replaces Triton's
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                super().__init__(fn, arg_names, list(configs or []) or None, key, reset_to_zero, restore_value, **kw)
            self.space = space
            self.strategy = strategy if strategy is not None else DEFAULTS.get("strategy")
            self.budget = budget if budget is not None else DEFAULTS.get("budget")
            self.reference = reference
            self.check_outputs = check
            self.use_cache = cache if cache is not True or "cache" not in DEFAULTS else DEFAULTS["cache"]
            self.seed = seed
            self.timing = timing
            self.verbose = verbose if verbose is not None else DEFAULTS.get("verbose", False)
            self.progress = progress if progress is not None else DEFAULTS.get("progress", sys.stderr.isatty())
            # a do_bench of the user's (or Triton's, built from the deprecated warmup/rep/use_cuda_graph)
            # replaces tritonkit's interleaved timing
            self._user_do_bench = getattr(self, "_do_bench", None) or do_bench \
                if (do_bench is not None or warmup is not None or rep is not None or use_cuda_graph) else None
            self._chosen: Dict[tuple, Any] = {}
            self._fast: Dict[tuple, Any] = {}
            self._option_defaults: Optional[Dict[str, Any]] = None
            self._arg_set = frozenset(arg_names)
            self.results: List[TuneResult] = []
            self._key_pos = [arg_names.index(k) for k in key]
            self._max_key_pos = max(self._key_pos, default=-1)
            self._kernel_name = self.base_fn.__name__
            self._tcache = None
            self._source_hash: Optional[str] = None
            _warm_compiler_key()

        # ---------------------------------------------------------------- launching
        def _tuning_key(self, args, kwargs) -> tuple:
            """The key exactly as Triton's autotuner builds it (key argument values, then the dtypes of
            every tensor argument)."""
            all_args = dict(zip(self.arg_names, args))
            all_args.update(kwargs)
            _args = {k: v for k, v in all_args.items() if k in self.arg_names}
            key = [_args[k] for k in self.keys if k in _args]
            for arg in _args.values():
                if hasattr(arg, "dtype"):
                    key.append(str(arg.dtype))
            return tuple(key)

        def run(self, *args, **kwargs):
            """Launch with the config chosen for this launch's key, tuning the key first when it is
            new (as Triton's ``Autotuner.run``; ``kwargs`` carries ``grid`` and ``warmup``).

            Returns:
                what the wrapped kernel's ``run`` returns (the compiled kernel).

            Raises:
                RuntimeError: every config failed, was wrong or was pruned for this key (the
                    reasons are in the message).
                ContextPoisoned: a config broke the CUDA context (outside ``tritonkit tune``).
            """
            if getattr(Base.run, "checks_every_config", False):
                # a checker (``tritonkit check``) runs Triton's autotuners' launches: it checks every
                # config of the space (each launch under check), as for ``triton.autotune``
                if self.space is not None:
                    self.nargs = dict(zip(self.arg_names, args))
                    try:
                        self._candidates(kwargs)
                    finally:
                        self.nargs = None
                return Base.run(self, *args, **kwargs)
            # The fast path of a launch whose key was decided: a tuple of the key arguments and
            # the tensor arguments' dtype objects (no strings, no dicts), looked up in memory.
            fast = None
            if self._arg_set.isdisjoint(kwargs) and len(args) > self._max_key_pos:
                fast = tuple([args[i] for i in self._key_pos]) + tuple([getattr(a, "dtype", None) for a in args])
                hit = self._fast.get(fast)
                if hit is not None:
                    config, meta = hit
                    self.best_config = config
                    if config.pre_hook is not None:
                        config.pre_hook({**dict(zip(self.arg_names, args)), **kwargs, **meta})
                    return self.fn.run(*args, **kwargs, **meta)
            key = self._tuning_key(args, kwargs)
            config = self._chosen.get(key)
            if config is None:
                self.nargs = dict(zip(self.arg_names, args))
                config = self._choose(key, args, kwargs)
                self._chosen[key] = config
                self.cache[key] = config
                self.nargs = None
            if fast is not None:
                self._fast[fast] = (config, self._lean_kwargs(config))
            self.best_config = config
            if config.pre_hook is not None:
                config.pre_hook({**dict(zip(self.arg_names, args)), **kwargs, **config.all_kwargs()})
            return self.fn.run(*args, **kwargs, **config.all_kwargs())

        def _lean_kwargs(self, config) -> Dict[str, Any]:
            """``config.all_kwargs()`` without the compiler options that equal the backend's defaults:
            the same compiled kernel (Triton fills in the defaults), but each launch parses fewer
            options (about 2 us per launch on the H100 machine's host)."""
            meta = config.all_kwargs()
            if self._option_defaults is None:
                self._option_defaults = {}
                try:
                    from triton.compiler.compiler import make_backend
                    from triton.runtime import driver
                    if _gpu_available():
                        opts = make_backend(driver.active.get_current_target()).parse_options({})
                        self._option_defaults = {n: getattr(opts, n) for n in ("num_warps", "num_stages", "num_ctas",
                                                                                "maxnreg") if hasattr(opts, n)}
                except Exception:  # an unknown backend: pass every option
                    self._option_defaults = {}
            return {k: v for k, v in meta.items()
                    if not (k in self._option_defaults and self._option_defaults[k] == v)}

        # ---------------------------------------------------------------- tuning
        def _candidates(self, kwargs) -> Dict[str, Any]:
            """point key -> triton.Config of the configs to consider for this launch."""
            if self.space is not None:
                key_args = {**self.nargs, **{k: v for k, v in kwargs.items() if k in self.arg_names}}
                configs = [config_from_point(p) for p in self.space.points(key_args)]
                if not configs:
                    raise ValueError(f"{self._kernel_name}: every config of the space fails its constraints for "
                                     f"this launch; loosen the constraints or widen the space")
                self.configs = configs
            out: Dict[str, Any] = {}
            for c in self.prune_configs(kwargs):
                out.setdefault(point_key(point_from_config(c)), c)
            return out

        def _choose(self, key, args, kwargs):
            candidates = self._candidates(kwargs)
            if len(candidates) == 1:
                return next(iter(candidates.values()))
            if not self._on_gpu() and not os.environ.get("TRITONKIT_TUNE_ON_CPU"):
                first = next(iter(candidates.values()))
                warnings.warn(f"tritonkit.autotune: no GPU to time {self._kernel_name} on; using its first config "
                              f"({first})", RuntimeWarning, stacklevel=3)
                return first
            return self._tune(key, args, kwargs, candidates)

        def _on_gpu(self) -> bool:
            """Whether this kernel runs on the GPU: a GPU is there and the kernel is not Triton's
            CPU interpreter's (``TRITON_INTERPRET=1`` when it was decorated)."""
            fn = self.fn
            while True:
                if type(fn).__name__ == "InterpretedFunction":
                    return False
                if not hasattr(fn, "fn") or fn.fn is fn:
                    break
                fn = fn.fn
            return _gpu_available()

        def _cache(self):
            if self.use_cache is False:
                return None
            if self._tcache is None:
                from ._cache import TuneCache
                self._tcache = self.use_cache if isinstance(self.use_cache, TuneCache) else \
                    TuneCache(None if self.use_cache is True else self.use_cache)
            return self._tcache

        def _tune(self, key, args, kwargs, candidates: Dict[str, Any]):
            import torch
            from ._prune import DeviceLimits, prune
            from ._runner import ContextPoisoned, LaunchRunner
            from .strategies import DEFAULT_STRATEGY, get_strategy

            start = time.perf_counter()
            on_gpu = self._on_gpu()
            limits = DeviceLimits.current() if on_gpu else DeviceLimits(name="cpu (Triton interpreter)")
            key_s = [str(k) for k in key]
            points = {k: point_from_config(c) for k, c in candidates.items()}
            tensors = [a for a in list(args) + list(kwargs.values()) if isinstance(a, torch.Tensor)]
            elem = max((t.element_size() for t in tensors), default=None)
            keep, pruned = prune(list(points.values()), limits, elem)
            result = TuneResult(self._kernel_name, key_s, flops=None, bytes=None)
            result.trials += [Trial(p, "pruned", error=why, source="gpu" if on_gpu else "cpu") for p, why in pruned]
            if not keep:
                raise RuntimeError(f"{self._kernel_name}: every config was pruned before compiling: "
                                   + "; ".join(f"{point_key(p)}: {w}" for p, w in pruned[:5]))
            cache = self._cache()
            kid = None
            if cache is not None:
                from ._cache import KernelId, source_hash
                if self._source_hash is None:
                    self._source_hash = source_hash(_source(self.base_fn))
                kid = KernelId(self._kernel_name, self._source_hash, _triton_version(), limits.name)
                _recover_once(cache)
            runner = LaunchRunner(self.fn, args, kwargs, self.arg_names, candidates, pre_hook=self.pre_hook,
                                  post_hook=self.post_hook, reference=self.reference, check=self.check_outputs,
                                  timing=self.timing, do_bench=self._user_do_bench, limits=limits, cuda=on_gpu,
                                  journal=(lambda p: cache.begin(kid, key_s, p), lambda p: cache.end(kid, key_s, p))
                                  if cache is not None else None)

            name = self.strategy or ("exhaustive" if self.space is None and self.budget is None else DEFAULT_STRATEGY)
            budget = self.budget if isinstance(self.budget, Budget) else Budget.parse(
                self.budget if self.budget is not None else (None if name == "exhaustive" else "20%"),
                space_size=len(points))
            progress = _Progress(self._kernel_name, key_s, len(keep) if budget.evaluations is None
                                 else min(budget.evaluations, len(keep)), enabled=self.progress)

            def on_trial(trial: Trial) -> None:
                if cache is not None and trial.source != "cache":
                    cache.record(kid, key_s, trial)
                progress.update(trial)
                if self.verbose:
                    print(f"tritonkit: {self._kernel_name} {trial.key}: {trial.status} "
                          f"{trial.ms if trial.ok else trial.error}", file=sys.stderr)

            evaluator = Evaluator(keep, runner, budget,
                                  lookup=(lambda p: cache.lookup(kid, key_s, p)) if cache is not None else None,
                                  on_trial=on_trial)
            try:
                with progress:
                    get_strategy(name, seed=self.seed).run(evaluator)
            except ContextPoisoned as e:
                if cache is not None:
                    cache.record(kid, key_s, Trial(e.point, "crashed", error=e.error))
                if os.environ.get("TRITONKIT_TUNE_SUPERVISED"):
                    print(f"tritonkit: {e}", file=sys.stderr)
                    sys.stderr.flush()
                    os._exit(EXIT_CONTEXT_POISONED)
                raise
            finally:
                runner.finish()
            result.trials += list(evaluator.trials.values())
            result.tuning_s = time.perf_counter() - start
            result.compile_s, result.timing_s = runner.stats.compile_s, runner.stats.timing_s
            result.check_s = runner.stats.first_run_s
            result.strategy = name
            result.flops, result.bytes = _work(self.fn, args, kwargs, self.arg_names)
            self.results.append(result)
            RESULTS.append(result)
            for hook in ON_RESULT:
                hook(result)
            best = result.winner
            if best is None:
                reasons = "; ".join(f"{t.key}: {t.status} ({t.error})" for t in result.trials[:6])
                raise RuntimeError(f"{self._kernel_name}: no config ran correctly for key {key_s}: {reasons}")
            self.configs_timings = {candidates[t.key]: [t.ms] for t in result.trials
                                    if t.key in candidates and t.ok}
            self.bench_time = result.tuning_s
            return candidates[best.key]

    return Autotuner


class _Progress:
    """A rich progress bar for one tuning: configs decided out of the budget, the best so far."""

    def __init__(self, kernel: str, key: List[str], total: int, enabled: bool):
        self.enabled = enabled
        self.kernel, self.key, self.total = kernel, key, total
        self.best: Optional[Trial] = None
        self._bar = None

    def __enter__(self):
        if self.enabled:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
            self._bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), console=Console(stderr=True), transient=True)
            self._bar.__enter__()
            self._task = self._bar.add_task(self._text(), total=self.total)
        return self

    def _text(self) -> str:
        best = f"best {self.best.ms:.4f} ms {self.best.key}" if self.best else "best: -"
        return f"tuning {self.kernel} [{', '.join(self.key)}]: {best}"

    def update(self, trial: Trial) -> None:
        if trial.ok and (self.best is None or trial.ms < self.best.ms):
            self.best = trial
        if self._bar is not None:
            self._bar.update(self._task, advance=1, description=self._text())

    def __exit__(self, *exc):
        if self._bar is not None:
            self._bar.__exit__(*exc)
        return False


_CLASS = None


def autotuner_class():
    """tritonkit's Autotuner class (a subclass of ``triton.runtime.autotuner.Autotuner``)."""
    global _CLASS
    if _CLASS is None:
        _CLASS = _make_class()
    return _CLASS


def autotune(configs=None, key=(), prune_configs_by=None, reset_to_zero=None, restore_value=None, pre_hook=None,
             post_hook=None, warmup=None, rep=None, use_cuda_graph=False, do_bench=None, cache_results=False, *,
             space: Optional[Union[Space, Dict[str, Sequence[Any]]]] = None, constraints=None,
             strategy: Optional[str] = None, budget: Optional[Union[str, int, Budget]] = None,
             reference: Optional[Callable] = None, check: bool = True, cache=True, seed: Optional[int] = 0,
             timing=None, verbose: Optional[bool] = None, progress: Optional[bool] = None):
    """Decorator for auto-tuning a ``@triton.jit`` function: a drop-in for ``triton.autotune``.

    Same arguments as ``triton.autotune`` (``configs``, ``key``, ``prune_configs_by``,
    ``reset_to_zero``, ``restore_value``, ``pre_hook``, ``post_hook``, ``do_bench``; ``warmup``/
    ``rep``/``use_cuda_graph`` as Triton treats them), plus:

    Args:
        space: instead of (or besides) ``configs``: value choices per meta-parameter and
            ``num_warps``/``num_stages``, a :class:`~tritonkit.tune.Space` or a dict.
        constraints: functions ``f(point, key_args) -> bool`` limiting ``space`` (a point is a
            dict of the config's values; ``key_args`` the launch's arguments by name).
        strategy: ``exhaustive`` (default for a config list without budget), ``random``, ``tpe``
            (Optuna), ``coordinate``, or the default strategy for spaces (see
            :data:`tritonkit.tune.strategies.DEFAULT_STRATEGY`).
        budget: configs to evaluate (``60``), a share of the space (``"20%"``), seconds
            (``"30s"``), or both (``"60,30s"``); default 20% of a space, everything of a list.
        reference: ``reference(**named_args)`` returning the expected values of the arguments the
            kernel writes; default: the first config that runs is the reference.
        check: compare every config's outputs with the reference and exclude wrong ones.
        cache: True (``~/.cache/tritonkit/tune`` or ``TRITONKIT_CACHE_DIR``), a directory, a
            ``TuneCache``, or False.
        seed: the strategy's seed (fixed by default so a warm cache replays with zero trials).
        timing: :class:`~tritonkit.tune.TimingOptions`.
        verbose: print every config's outcome to stderr as it is decided.
        progress: a progress bar on stderr with the best config so far (default: when stderr is
            a terminal).

    Returns:
        a decorator that wraps a ``JITFunction`` (or ``triton.heuristics``) in tritonkit's Autotuner.

    Raises:
        ValueError: neither ``configs`` nor ``space`` is given, or a name in ``key`` /
            ``reset_to_zero`` / ``restore_value`` is not an argument of the kernel.
    """
    if space is not None and not isinstance(space, Space):
        space = Space(dict(space), constraints or ())
    elif space is not None and constraints:
        space = Space(space.params, tuple(space.constraints) + tuple(constraints))
    if not configs and space is None:
        raise ValueError("tritonkit.autotune needs configs=[triton.Config(...), ...] or space={'BLOCK': [64, 128]}")
    if configs and space is not None:
        extra = [point_from_config(c) for c in configs]
        merged = Space.from_points(space.points() + extra)
        space = Space(merged.params, space.constraints)

    def decorator(fn):
        cls = autotuner_class()
        return cls(fn, fn.arg_names, configs, key, reset_to_zero, restore_value, pre_hook=pre_hook,
                   post_hook=post_hook, prune_configs_by=prune_configs_by, warmup=warmup, rep=rep,
                   use_cuda_graph=use_cuda_graph, do_bench=do_bench, cache_results=cache_results, space=space,
                   strategy=strategy, budget=budget, reference=reference, check=check, cache=cache, seed=seed,
                   timing=timing, verbose=verbose, progress=progress)

    return decorator


_KEY_WARMED = False
_RECOVERED: set = set()


def _recover_once(cache) -> None:
    """Turn the crash journal's markers of dead processes into ``crashed`` trials, once per cache
    directory and process, before its first tuning (not for every key: the scan reads every file
    of the cache). A process that dies while this one runs is recovered by the next run."""
    if cache.directory in _RECOVERED:
        return
    _RECOVERED.add(cache.directory)
    for rec in cache.recover():
        print(f"tritonkit: {rec.kernel_id.name} {rec.trial.key} crashed in an earlier run: {rec.trial.error}; "
              f"it is recorded and will not be tried again", file=sys.stderr)


def _warm_compiler_key() -> None:
    """Compute Triton's compiler key (a hash of Triton's own sources, about 0.4 s, computed once per
    process at the first compile) in a background thread when a kernel is decorated, so the first
    tuning does not wait for it. Nothing happens without a GPU."""
    global _KEY_WARMED
    if _KEY_WARMED or os.environ.get("TRITON_INTERPRET") == "1":
        return
    _KEY_WARMED = True
    try:
        from triton.runtime.cache import triton_key
    except ImportError:  # pragma: no cover - Triton moved it
        return
    import threading
    threading.Thread(target=triton_key, name="tritonkit-warm-triton-key", daemon=True).start()


def _gpu_available() -> bool:
    if os.environ.get("TRITON_INTERPRET") == "1":
        return False
    try:
        import torch
        return torch.cuda.is_available()
    except Exception:  # pragma: no cover
        return False


def _source(fn) -> str:
    try:
        return inspect.getsource(fn)
    except (OSError, TypeError):
        return getattr(fn, "__qualname__", repr(fn))


def _triton_version() -> str:
    import triton
    return triton.__version__


def _work(fn, args, kwargs, arg_names):
    """(FLOPs, bytes) of one launch from the kernel's ``launch_metadata`` where it has one."""
    jit = fn
    while not hasattr(jit, "launch_metadata") and hasattr(jit, "fn"):
        jit = jit.fn
    meta = getattr(jit, "launch_metadata", None)
    if meta is None:
        return None, None
    try:
        named = dict(zip(arg_names, args))
        named.update({k: v for k, v in kwargs.items() if k in arg_names})
        info = meta(kwargs.get("grid"), None, named) or {}
    except Exception:
        return None, None
    flops = sum(v for k, v in info.items() if k.startswith("flops") and isinstance(v, (int, float))) or None
    nbytes = info.get("bytes")
    return (float(flops) if flops else None), (float(nbytes) if nbytes else None)
