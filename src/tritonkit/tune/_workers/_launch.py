"""A real kernel's launch as a :class:`~._protocol.KeyJob`: what a worker needs to compile, check
and time configs of one kernel at one key on its own GPU, with the timing method the in-process
tuner uses (:class:`~tritonkit.tune._runner.LaunchRunner`).

The kernel and the workload travel by name (``"module:function"``, imported in the worker); the
arguments either travel with the job (tensors moved to the CPU to cross processes, then to the
worker's GPU), or are made in the worker by the workload function (a seeded workload gives every
worker the same arguments). Either way they travel once per key and worker, never per config.

The correctness check is the in-process one, with one reference per key that every worker agrees
on: the user's ``reference`` function where given, else the first config of the key's candidate
list that runs (each worker runs it first, before its first config of the key).
"""
from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence

from .._result import Trial
from .._runner_api import Runner
from .._space import Point, config_from_point, point_key


def reference_name(obj: Any) -> str:
    """``"module:qualname"`` of a function, a ``@triton.jit`` kernel or an autotuned kernel (a
    string is returned as it is).

    Raises:
        ValueError: ``obj`` has no importable name (a lambda, a nested function).
    """
    if isinstance(obj, str):
        return obj
    inner = obj
    while not hasattr(inner, "__qualname__") and hasattr(inner, "fn"):
        inner = inner.fn
    module, qual = getattr(inner, "__module__", None), getattr(inner, "__qualname__", None)
    if not module or not qual or "<" in qual:
        raise ValueError(f"{obj!r} has no importable name (module:function): workers import it by name; define it "
                         f"at the top level of a module")
    return f"{module}:{qual}"


def resolve(name: str) -> Any:
    """Import ``"module:qualname"`` (``__main__`` is the driver's script, which ``spawn`` workers
    know as ``__mp_main__``).

    Raises:
        ImportError: the module cannot be imported. AttributeError: it has no such name.
    """
    module, _, qual = name.partition(":")
    if module == "__main__" and "__mp_main__" in sys.modules:
        mod = sys.modules["__mp_main__"]
    else:
        mod = importlib.import_module(module)
    obj: Any = mod
    for part in qual.split("."):
        obj = getattr(obj, part)
    return obj


def _jit(kernel: Any) -> Any:
    """The function to launch: an autotuner's wrapped kernel, else the kernel itself."""
    if type(kernel).__name__ == "Autotuner" or hasattr(kernel, "configs_timings"):
        return kernel.fn
    return kernel


@dataclass
class LaunchJob:
    """One key of a real kernel (see the module).

    Attributes:
        kernel: ``"module:qualname"`` of the ``@triton.jit`` kernel (or an autotuned one: its kernel).
        configs: the key's candidates as points, in order (the first that runs is the reference).
        workload: ``"module:qualname"`` of ``workload(key) -> (args, kwargs)`` (``kwargs`` with
            ``grid``), called in the worker; or None where ``args``/``kwargs`` are given.
        key: the key (name -> value) passed to ``workload``.
        args, kwargs: the launch's arguments, where they travel with the job (CPU tensors).
        reference: ``"module:qualname"`` of ``reference(**named_args)`` returning the expected
            outputs; None: the first config that runs is the reference.
        check: compare outputs with the reference.
        timing: :class:`~tritonkit.tune.TimingOptions` (None: the tuner's defaults).
        cuda: run on the GPU (None: where one is there and ``TRITON_INTERPRET`` is not 1).
    """

    kernel: str
    configs: List[Point]
    workload: Optional[str] = None
    key: Dict[str, Any] = field(default_factory=dict)
    args: Optional[Sequence[Any]] = None
    kwargs: Optional[Dict[str, Any]] = None
    reference: Optional[str] = None
    check: bool = True
    timing: Any = None
    cuda: Optional[bool] = None

    def arguments(self):
        """(args, kwargs) of the launch, on this process's device.

        Raises:
            ValueError: neither ``workload`` nor ``args`` is given.
        """
        if self.args is not None:
            args, kwargs = list(self.args), dict(self.kwargs or {})
        elif self.workload is not None:
            args, kwargs = resolve(self.workload)(dict(self.key))
            args, kwargs = list(args), dict(kwargs or {})
        else:
            raise ValueError("a LaunchJob needs a workload or args")
        import torch
        cuda = self._on_gpu()
        move = (lambda v: v.cuda() if isinstance(v, torch.Tensor) and not v.is_cuda else v) if cuda else \
            (lambda v: v.cpu() if isinstance(v, torch.Tensor) else v)
        return [move(a) for a in args], {k: move(v) for k, v in kwargs.items()}

    def _on_gpu(self) -> bool:
        if self.cuda is not None:
            return self.cuda
        import os

        import torch
        return torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1"

    def runner(self) -> Runner:
        """A :class:`~tritonkit.tune._runner.LaunchRunner` on this worker's GPU, that runs the
        key's reference config first.

        Raises:
            ImportError, AttributeError: the kernel, workload or reference cannot be imported.
            ValueError: no arguments.
        """
        from .._runner import LaunchRunner
        fn = _jit(resolve(self.kernel))
        args, kwargs = self.arguments()
        configs = {point_key(p): config_from_point(p) for p in self.configs}
        reference = resolve(self.reference) if self.reference else None
        inner = LaunchRunner(fn, args, kwargs, fn.arg_names, configs, reference=reference, check=self.check,
                             timing=self.timing, cuda=self._on_gpu())
        return _Referenced(inner, [] if reference is not None else list(self.configs))


class _Referenced(Runner):
    """Runs the key's reference config (the first of ``order`` that runs) before anything else, so
    every worker checks against the same reference; a config measured that way is not measured
    again when asked for."""

    def __init__(self, inner, order: List[Point]):
        self.inner, self.order = inner, order
        self.ready = not order
        self.seen: Dict[str, Trial] = {}

    def __call__(self, points):
        if not self.ready:
            self.ready = True
            for p in self.order:
                t = self.inner([p])[0]
                self.seen[point_key(p)] = t
                if t.status != "failed":
                    break
        return [self.seen.pop(point_key(p)) if point_key(p) in self.seen else self.inner([p])[0] for p in points]

    def finish(self) -> None:
        """Restore the arguments and free them (:meth:`LaunchRunner.finish`)."""
        self.inner.finish()


def sweep_kernel(kernel: Any, workload: Any, keys: Sequence[Dict[str, Any]], configs: Optional[Sequence[Any]] = None,
                 space: Any = None, reference: Any = None, check: bool = True, timing: Any = None, **options: Any):
    """Tune a real kernel over ``keys`` on every GPU of a pool (:func:`~._sweep.sweep` with a
    :class:`LaunchJob` per key).

    Args:
        kernel: the ``@triton.jit`` kernel (or an autotuned one), defined at the top level of a
            module (workers import it by name).
        workload: ``workload(key) -> (args, kwargs)``: the launch's arguments for a key (``kwargs``
            with ``grid``), at the top level of a module; called in each worker, so it should be
            seeded (every worker must make the same inputs for the outputs to be comparable).
        keys: the keys, each a dict name -> value (``{"M": 64}``).
        configs: ``triton.Config`` objects (or points) to choose from.
        space: instead of ``configs``: a :class:`~tritonkit.tune.Space` or a dict of value lists;
            its constraints get the key as ``key_args``.
        reference: ``reference(**named_args)`` returning the expected outputs, at the top level of
            a module (None: the first config of the list that runs).
        check: compare every config's outputs with the reference.
        timing: :class:`~tritonkit.tune.TimingOptions`.
        **options: the rest of :func:`~._sweep.sweep`'s options (``engine``, ``workers``,
            ``strategy``, ``budget``, ``cache``, ``out_dir``, ``table``, ...).

    Returns:
        :class:`~._sweep.SweepResult`.

    Raises:
        ValueError: neither ``configs`` nor ``space``, or a kernel/workload/reference that has no
            importable name.
        WorkerError: as :func:`~._sweep.sweep`.
    """
    import inspect

    from .._cache import source_hash
    from .._space import Space, point_from_config
    from ._sweep import sweep
    if not configs and space is None:
        raise ValueError("sweep_kernel needs configs=[triton.Config(...), ...] or space={'BLOCK': [64, 128]}")
    kernel_name, workload_name = reference_name(kernel), reference_name(workload)
    reference_fn = reference_name(reference) if reference is not None else None
    fn = _jit(kernel)
    while hasattr(fn, "fn") and not inspect.isfunction(fn):
        fn = fn.fn
    listed = [p if isinstance(p, dict) else point_from_config(p) for p in (configs or [])]
    if space is not None and not isinstance(space, Space):
        space = Space(dict(space))

    def candidates(key: Dict[str, Any]) -> List[Point]:
        out = list(listed)
        if space is not None:
            out += [p for p in space.points(key) if point_key(p) not in {point_key(q) for q in out}]
        return out

    def job(key: Dict[str, Any]) -> LaunchJob:
        return LaunchJob(kernel_name, candidates(key), workload=workload_name, key=dict(key), reference=reference_fn,
                         check=check, timing=timing)

    return sweep(getattr(fn, "__name__", kernel_name), keys, job, candidates,
                 source_hash=source_hash(inspect.getsource(fn)), **options)
