"""The real runner: measures configs of one kernel on one launch's own arguments, on the GPU.

Per batch of points (see :meth:`LaunchRunner.__call__`): compile every config in parallel on all
CPU cores (Triton's ``AsyncCompileMode`` over forked compile processes, :mod:`._compile`), drop the ones whose compiled kernel
cannot launch, run each once with the arguments restored (crash journal around it), compare what
it wrote with the reference, then time the correct ones in interleaved rounds (:mod:`._bench`).
"""
from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence

from ._bench import Clocks, CudaRoundTimer, TimingOptions, WallRoundTimer, time_interleaved
from ._result import Trial
from ._runner_api import Runner
from ._space import Point, point_key

#: Errors that mean "this config cannot run" (Triton's own classes are matched by name so the
#: module imports without a GPU): out of resources, compile errors, ptxas errors.
_FAILED_NAMES = ("OutOfResources", "CompilationError", "CompileTimeAssertionFailure", "PTXASError",
                 "MLIRCompilationError", "AutotunerError")


class ContextPoisoned(RuntimeError):
    """A config broke the CUDA context (an illegal memory access, a launch failure): no further
    GPU work is possible in this process. The config is recorded as ``crashed`` before this is
    raised; under ``tritonkit tune`` the process is restarted and tuning goes on."""

    def __init__(self, point: Point, error: str):
        super().__init__(f"config {point_key(point)} broke the CUDA context ({error}); it is recorded as crashed. "
                         f"Run again to go on tuning without it (`tritonkit tune -- python SCRIPT.py` restarts "
                         f"by itself).")
        self.point = point
        self.error = error


def tolerance(dtype) -> float:
    """Relative tolerance for comparing a config's output with the reference, by dtype.

    Configs legitimately differ in summation order (tile sizes, split-K) and, for float32 inputs
    of ``tl.dot``, tf32 rounding; outputs are compared as ``|out - ref| <= tol * (|ref| +
    max|ref|)``, i.e. relative to the output's scale, so cancellation near zero is not a failure.
    """
    import torch
    if not dtype.is_floating_point:
        return 0.0
    return {torch.float64: 1e-9, torch.float32: 1e-2, torch.float16: 2e-2, torch.bfloat16: 4e-2}.get(dtype, 1.5e-1)


def outputs_differ(out, ref) -> Optional[str]:
    """Why tensor ``out`` differs from ``ref`` beyond :func:`tolerance`, or None where it matches.

    NaN and Inf must sit at the same elements with the same values; the finite elements must be
    within ``tol * (|ref| + max|ref|)``. Computed in float32 (float64 for float64 tensors), with a
    few full passes over the tensor and no boolean indexing (outputs are often GiB-sized).
    """
    import torch
    if out.shape != ref.shape:
        return f"shape {tuple(out.shape)} vs {tuple(ref.shape)}"
    if not out.dtype.is_floating_point:
        n = int((out != ref).sum())
        return f"{n} of {out.numel()} elements differ" if n else None
    wide = torch.float64 if out.dtype == torch.float64 else torch.float32
    o, r = out.to(wide), ref.to(wide)
    fin_o, fin_r = torch.isfinite(o), torch.isfinite(r)
    if not bool(torch.equal(fin_o, fin_r)):
        n = int((fin_o != fin_r).sum())
        return f"NaN or Inf at {n} elements where the reference has a finite value (or the reverse)"
    if not bool(fin_r.all()):  # the same elements are not finite: they must be the same non-finite values
        same = (o == r) | (torch.isnan(o) & torch.isnan(r)) | fin_r
        if not bool(same.all()):
            return "NaN/Inf values differ from the reference"
        o, r = torch.where(fin_r, o, 0.0), torch.where(fin_r, r, 0.0)
    scale = float(r.abs().max()) if r.numel() else 0.0
    tol = tolerance(out.dtype)
    err = (o - r).abs_()
    bad = err > (r.abs() + scale) * tol
    n = int(bad.sum())
    if n:
        return (f"{n} of {out.numel()} elements differ (max abs error {float(err.max()):.3g}; "
                f"tolerance {tol:g} x (|ref| + {scale:.3g}))")
    return None


@dataclass
class RunnerStats:
    """What a runner spent, in wall seconds: compiling (parallel), first runs (restore, launch,
    output check), timing; and how many configs were compiled and timed."""

    compile_s: float = 0.0
    first_run_s: float = 0.0
    timing_s: float = 0.0
    compiled: int = 0
    timed: int = 0
    batches: int = 0
    written: List[str] = field(default_factory=list)
    reads_own_output: bool = False


class LaunchRunner(Runner):
    """Measure configs of one kernel on the arguments of the launch that triggered tuning (a
    :class:`~tritonkit.tune._runner_api.Runner`).

    Args:
        fn: what the autotuner wraps (a ``JITFunction`` or ``Heuristics``); launched through
            ``fn.run(*args, **kwargs, **config.all_kwargs())``.
        args, kwargs: the launch's positional arguments and keyword arguments (``grid`` included).
        arg_names: the kernel's argument names, in order.
        configs: point key -> ``triton.Config`` to launch for it.
        pre_hook / post_hook: the autotuner's hooks (Triton's signature: ``pre_hook(nargs)``,
            ``post_hook(nargs, exception)``), run around every launch.
        reference: a function ``reference(**named_args)`` returning the expected values of the
            arguments the kernel writes (one tensor, a tuple in argument order, or a dict name ->
            tensor); None: the first config that runs is the reference.
        check: compare outputs at all (False: trust every config).
        timing: :class:`TimingOptions`.
        do_bench: a user's ``do_bench(fn, quantiles)`` (Triton's autotune argument); replaces the
            interleaved timing when given.
        journal: ``(begin(point), end(point))`` called around each config's first run, so a
            process that dies is traced to the config (the cache's crash journal).
        limits: device limits for compiled-kernel checks (None: read from the device).
        cuda: whether the kernel runs on the GPU (None: a GPU is there and ``TRITON_INTERPRET``
            is not 1); False runs it in Triton's CPU interpreter with host-clock timing.
    """

    def __init__(self, fn, args: Sequence[Any], kwargs: Dict[str, Any], arg_names: Sequence[str],
                 configs: Dict[str, Any], pre_hook: Optional[Callable] = None, post_hook: Optional[Callable] = None,
                 reference: Optional[Callable] = None, check: bool = True, timing: Optional[TimingOptions] = None,
                 do_bench: Optional[Callable] = None, journal=None, limits=None, cuda: Optional[bool] = None):
        import torch
        self.torch = torch
        self.fn = fn
        self.args = list(args)
        self.kwargs = {k: v for k, v in kwargs.items() if k != "warmup"}
        self.arg_names = list(arg_names)
        self.configs = configs
        self.pre_hook = pre_hook
        self.post_hook = post_hook
        self.reference_fn = reference
        self.check = check
        self.timing = timing or TimingOptions()
        self.do_bench = do_bench
        self.journal = journal
        self.limits = limits
        self.stats = RunnerStats()
        #: False where kernels run in Triton's CPU interpreter (``TRITONKIT_TUNE_ON_CPU=1``):
        #: no parallel compile, host-clock timing, no context to break.
        self.cuda = (torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1") if cuda is None \
            else cuda
        if not self.cuda and timing is None:
            self.timing = TimingOptions(warmup_ms=0.0, target_ms=0.0, min_samples=3, max_samples=3, retime_top=0)
        self.clocks = Clocks.shared(torch.cuda.current_device() if torch.cuda.is_available() else 0)
        self.nargs = dict(zip(self.arg_names, self.args))
        self.nargs.update({k: v for k, v in self.kwargs.items() if k in self.arg_names})
        self._tensors = {n: v for n, v in self.nargs.items() if isinstance(v, torch.Tensor)}
        self._snapshot: Optional[Dict[str, Any]] = None  # taken at the first batch (a warm cache needs none)
        self._written: Optional[List[str]] = None
        self._reference: Optional[Dict[str, Any]] = None

    # ------------------------------------------------------------------ arguments
    def restore(self) -> None:
        """Put every argument the kernel writes back to its value before tuning."""
        if self._snapshot is None:
            return
        names = self._written if self._written is not None else list(self._tensors)
        for n in names:
            self._tensors[n].copy_(self._snapshot[n])

    def finish(self) -> None:
        """Restore the arguments and free the snapshot (call once tuning of this launch is over)."""
        self.restore()
        self._snapshot = None

    def _launch(self, point: Point) -> None:
        config = self.configs[point_key(point)]
        current = dict(self.kwargs, **config.all_kwargs())
        full = {**self.nargs, **{k: v for k, v in current.items() if k != "grid"}}
        if config.pre_hook:
            config.pre_hook(full)
        if self.pre_hook:
            self.pre_hook(full)
        try:
            self.fn.run(*self.args, warmup=False, **current)
        except Exception as e:
            if self.post_hook:
                self.post_hook(full, e)
            raise
        if self.post_hook:
            self.post_hook(full, None)

    # ------------------------------------------------------------------ batch
    def __call__(self, points: Sequence[Point]) -> List[Trial]:
        """Compile, run once and check, then time ``points`` (see the module's docstring).

        Args:
            points: the configs to measure (keys of ``configs``).

        Returns:
            One :class:`Trial` per point, in order: ``ok`` with the median ms per launch, ``failed``
            (did not compile or launch), or ``wrong`` (outputs differ from the reference);
            ``source`` is ``gpu`` or ``cpu``.

        Raises:
            ContextPoisoned: a config broke the CUDA context (after recording nothing else: the
                caller records the crash through the journal).
        """
        self.stats.batches += 1
        if self._snapshot is None:
            self._snapshot = {n: t.clone() for n, t in self._tensors.items()}
        trials: Dict[str, Trial] = {}
        compile_errors = self._compile(points)
        runnable: List[Point] = []
        t0 = time.perf_counter()
        for p in points:
            k = point_key(p)
            if k in compile_errors:
                trials[k] = Trial(p, "failed", error=compile_errors[k])
                continue
            trial = self._first_run(p)
            if trial is not None:
                trials[k] = trial
            else:
                runnable.append(p)
        self.stats.first_run_s += time.perf_counter() - t0
        if runnable:
            for p, t in zip(runnable, self._time(runnable)):
                trials[point_key(p)] = t
        self.restore()
        source = "gpu" if self.cuda else "cpu"
        for t in trials.values():
            t.source = source
        return [trials[point_key(p)] for p in points]

    def _compile(self, points: List[Point]) -> Dict[str, str]:
        """Compile every point's kernel in parallel; returns point key -> error for those that failed."""
        errors: Dict[str, str] = {}
        if not self.cuda:
            return errors
        start = time.perf_counter()
        try:
            from triton.runtime._async_compile import AsyncCompileMode
        except ImportError:  # pragma: no cover - Triton without async compile: compile at first launch
            return errors
        from ._compile import make_executor
        futures = {}
        executor, run_all = make_executor(min(len(points), os.cpu_count() or 1))
        try:
            with AsyncCompileMode(executor, ignore_errors=True):
                for p in points:
                    k = point_key(p)
                    config = self.configs[k]
                    try:
                        futures[k] = self.fn.run(*self.args, warmup=True, **dict(self.kwargs, **config.all_kwargs()))
                    except Exception as e:  # binding or specialization errors surface here
                        errors[k] = _describe(e)
                run_all()
        finally:
            executor.shutdown(wait=False)
        for k, fut in futures.items():
            if k in errors:
                continue
            kernel = fut
            if type(fut).__name__ == "FutureKernel":
                kernel = fut.kernel
                if kernel is None:
                    # Triton 3.6 keeps the failed future (its error is the reason); later Triton
                    # versions drop it, and the first launch compiles again and raises the reason.
                    inner = getattr(fut, "future", None)
                    if inner is not None and inner.done() and inner.exception() is not None:
                        errors[k] = _describe(inner.exception())
                    continue
            if self.limits is not None:
                from ._prune import compiled_misfit
                why = compiled_misfit(kernel, {**self.configs[k].kwargs, "num_warps": self.configs[k].num_warps},
                                      self.limits)
                if why:
                    errors[k] = f"out of resources: {why}"
        self.stats.compile_s += time.perf_counter() - start
        self.stats.compiled += len(points)
        return errors

    def sync(self) -> None:
        """Wait for the GPU (nothing in CPU mode).

        Raises:
            RuntimeError: a CUDA error of an earlier launch surfaces here.
        """
        if self.cuda:
            self.torch.cuda.synchronize()

    def _context_ok(self) -> bool:
        if not self.cuda:
            return True
        try:
            self.torch.cuda.synchronize()
            self.torch.zeros(1, device="cuda").add_(1).item()
            return True
        except Exception:
            return False

    def _first_run(self, point: Point) -> Optional[Trial]:
        """Run ``point`` once and check its outputs; a failed/wrong :class:`Trial`, or None if it may be timed."""
        if self.journal:
            self.journal[0](point)
        try:
            self.restore()
            try:
                self._launch(point)
                self.sync()
            except Exception as e:
                err = _describe(e)
                if not self._context_ok():
                    raise ContextPoisoned(point, err) from e
                return Trial(point, "failed", error=err)
            if self._written is None:
                self._learn_outputs(point)
                if self.reference_fn is None:
                    return None  # this run is the reference
            if self.check:
                why = self._compare()
                if why:
                    return Trial(point, "wrong", error=why)
            return None
        finally:
            if self.journal:
                self.journal[1](point)

    def _learn_outputs(self, point: Point) -> None:
        """After the first successful run: which arguments the kernel wrote, whether it reads them
        back (a second run from the written state gives another result), and the reference."""
        self._written = [n for n, t in self._tensors.items() if not _same(t, self._snapshot[n])]
        self.stats.written = list(self._written)
        first = {n: self._tensors[n].clone() for n in self._written}
        self._launch(point)  # again, without restoring
        self.sync()
        self.stats.reads_own_output = any(not _same(self._tensors[n], first[n]) for n in self._written)
        if self.reference_fn is not None:
            self.restore()
            got = self.reference_fn(**self.nargs)
            self._reference = _as_named(got, self._written)
        else:
            self._reference = first
        for n, t in first.items():  # leave the state of one run: the first run's result
            self._tensors[n].copy_(t)

    def _compare(self) -> Optional[str]:
        for n, ref in (self._reference or {}).items():
            why = outputs_differ(self._tensors[n], ref)
            if why:
                return f"argument {n!r}: {why}"
        return None

    def _time(self, points: List[Point]) -> List[Trial]:
        start = time.perf_counter()
        calls = [lambda p=p: self._launch(p) for p in points]
        restore = self.restore if self.stats.reads_own_output else None
        out: List[Trial] = []
        if self.do_bench is not None:
            for p, call in zip(points, calls):
                def run(call=call):
                    if restore:
                        restore()
                    call()
                res = self.do_bench(run, quantiles=(0.5, 0.2, 0.8))
                med, lo, hi = (res if isinstance(res, (list, tuple)) else (res, res, res))[:3]
                c = self.clocks.read()
                out.append(Trial(p, "ok", ms=float(med), ci_ms=(float(lo), float(hi)), samples=0,
                                 sm_clock_mhz=c[0], mem_clock_mhz=c[1]))
        else:
            timer = CudaRoundTimer(calls, restore=restore, flush_l2=self.timing.flush_l2, clocks=self.clocks) \
                if self.cuda else WallRoundTimer(calls, restore=restore)
            for p, t in zip(points, time_interleaved(len(points), timer, self.timing)):
                ms = t.median_ms
                out.append(Trial(p, "ok" if math.isfinite(ms) else "failed", ms=ms, ci_ms=t.ci_ms,
                                 samples=len(t.samples_ms), sm_clock_mhz=t.sm_clock_mhz,
                                 mem_clock_mhz=t.mem_clock_mhz, error="" if math.isfinite(ms) else "no sample"))
        self.stats.timing_s += time.perf_counter() - start
        self.stats.timed += len(points)
        return out


def _same(a, b) -> bool:
    import torch
    if a.dtype.is_floating_point:
        return bool(torch.equal(torch.nan_to_num(a, 0.0), torch.nan_to_num(b, 0.0))) and \
            bool(torch.equal(torch.isnan(a), torch.isnan(b)))
    return bool(torch.equal(a, b))


def _as_named(got, written: List[str]) -> Dict[str, Any]:
    """The reference function's result as name -> tensor for the written arguments.

    Raises:
        ValueError: the result does not match the arguments the kernel writes.
    """
    if isinstance(got, dict):
        missing = [n for n in written if n not in got]
        if missing:
            raise ValueError(f"the reference returned {sorted(got)} but the kernel writes {written}: "
                             f"return a value for {missing}")
        return {n: got[n] for n in written}
    if not isinstance(got, (list, tuple)):
        got = (got,)
    if len(got) != len(written):
        raise ValueError(f"the reference returned {len(got)} value(s) but the kernel writes {len(written)} "
                         f"argument(s) ({written}): return one per written argument, in argument order, or a "
                         f"dict name -> tensor")
    return dict(zip(written, got))


def _describe(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    first = text[0] if text else ""
    if len(first) > 300:
        first = first[:300] + "..."
    kind = type(e).__name__
    if kind in _FAILED_NAMES and "out of resource" not in first.lower() and kind == "OutOfResources":
        first = "out of resources: " + first
    return f"{kind}: {first}" if first else kind
