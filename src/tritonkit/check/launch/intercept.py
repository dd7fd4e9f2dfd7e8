"""Hooks into Triton's launch paths while a check session is active.

Patched (and restored when the session ends):

* ``JITFunction.run`` and ``InterpretedFunction.run``: every ``kernel[grid](...)`` launch, whether
  the kernel was decorated with ``TRITON_INTERPRET`` set or not, runs in the checked interpreter;
  but a launch while a CUDA graph is being captured runs natively, unchecked and recorded as
  ``captured`` (the graph runs it at replay, and tensors cannot be read during a capture); with
  ``outputs="gpu"``, a launch on CUDA tensors is then also run natively when it had no finding;
  with ``gpu_above``, a launch larger than that runs natively, instrumented (see :mod:`.on_gpu`);
* ``JITFunction.__call__`` and ``InterpretedFunction.__call__``: a ``@triton.jit`` device function
  called from a kernel body runs as interpreted Python (its lines are placed in findings too);
* ``Autotuner.run``: the kernel is checked under every config once per distinct key, instead of
  being benchmarked (which needs a GPU; see :mod:`.autotune`);
* the bodiless ``triton.language.extra.libdevice`` stubs call the CUDA backend's libdevice
  functions, which the checked builder computes with numpy (:mod:`tritonkit.check.interp.libdevice`).

``Heuristics.run`` needs nothing: it computes its values and calls the patched ``run``.
"""
from __future__ import annotations

import contextlib
import functools
import types
from typing import List

from triton.runtime import autotuner as _autotuner
from triton.runtime import interpreter as _interp
from triton.runtime import jit as _jit

from ..errors import UsageError
from ..interp.batched import BatchedBuilder
from ..interp.kernels import LOCK, rewritten
from ..triton_hooks import autotuning
from . import cpu_driver
from .active import active_session
from .autotune import checked_autotune, current_config
from .on_gpu import run_on_gpu
from .run import record_captured, run_launch

_saved: List[tuple] = []


def _checked_run(self, *args, grid, warmup=False, **kwargs):
    if warmup:
        return WarmedUp(self, kwargs)
    with LOCK:  # a launch at a time, whole (threads): the checks' state and findings are the launch's
        return _checked_run_locked(self, args, kwargs, grid)


def _checked_run_locked(self, args, kwargs, grid):
    if _capturing():
        return _captured_run(self, args, kwargs, grid)
    session = active_session()
    if session.gpu_above is not None and not autotuning.get() and \
            run_on_gpu(session, self, args, kwargs, grid, _original(_jit.JITFunction, "run"), current_config()):
        return None  # too large for the interpreter: checked on the GPU (see .on_gpu)
    # a config tried and undone by the checked autotuner needs no native run: only the kept one does
    native = _native_launch(self, args, kwargs, grid) if session.outputs == "gpu" and not autotuning.get() else None
    run_launch(session, self.fn, args, kwargs, grid, config=current_config(), jit=self, native=native)
    return None


class WarmedUp:
    """What ``kernel.warmup(...)`` returns under check, in place of a compiled kernel: nothing is
    compiled on the CPU, so its metadata is a stand-in (32 registers a thread, no spills, no shared
    memory: what host code reads to size a grid, as Triton's fused-softmax tutorial does), and
    ``warmed[grid](*args)`` is a checked launch of the kernel.

    Args:
        jit: the kernel (a ``JITFunction``); kwargs: the keyword arguments given to ``warmup``
            (meta-parameters such as ``BLOCK_SIZE``), passed on to its launches.
    """

    n_regs = 32
    n_spills = 0

    def __init__(self, jit, kwargs) -> None:
        self.jit = jit
        self.kwargs = {k: v for k, v in kwargs.items() if k not in ("grid", "warmup")}
        self.metadata = types.SimpleNamespace(shared=0, num_warps=kwargs.get("num_warps", 4),
                                              num_stages=kwargs.get("num_stages", 3), name=jit.fn.__name__)
        self.name = jit.fn.__name__

    def _init_handles(self) -> None:
        pass

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            names = list(self.jit.arg_names)[:len(args)]  # positional arguments the launch gives itself
            merged = {k: v for k, v in self.kwargs.items() if k not in names}
            merged.update(kwargs)
            return self.jit.run(*args, grid=grid, warmup=False, **merged)
        return launch


def _native_launch(self, args, kwargs, grid):
    """With ``outputs="gpu"``: a callable that runs this launch natively, where it can run on the GPU
    (a compiled kernel, every tensor argument on a CUDA device); else None."""
    native = _original(_jit.JITFunction, "run")
    if not isinstance(self, _jit.JITFunction) or native is None:
        return None
    devices = {v.device.type for v in (*args, *kwargs.values()) if hasattr(v, "device") and hasattr(v, "data_ptr")}
    if devices != {"cuda"}:
        return None
    return lambda: native(self, *args, grid=grid, warmup=False, **kwargs)


def _original(cls, name):
    """What :func:`install` replaced ``cls.name`` with (None where it did not)."""
    return next((old for obj, n, old, had in _saved if obj is cls and n == name), None)


def _checked_autotune(self, *args, **kwargs):
    """``Autotuner.run``: every config checked (:func:`~.autotune.checked_autotune`), but during a
    CUDA graph capture Triton's own (the best config it has, captured once)."""
    with LOCK:  # every config of the key, one launch after another (see _checked_run)
        if _capturing():
            return _original(_autotuner.Autotuner, "run")(self, *args, **kwargs)
        return checked_autotune(self, *args, **kwargs)


#: a subclass of Triton's ``Autotuner`` with a ``run`` of its own (``tritonkit.autotune``'s) defers to
#: ``Autotuner.run`` while it carries this mark, so that every config is checked there too
_checked_autotune.checks_every_config = True


def _capturing() -> bool:
    """Whether this thread's current CUDA stream is capturing a graph (never initializes CUDA;
    never in a config's worker process, which has no GPU: see :mod:`.parallel`)."""
    import torch

    from .parallel import WORKER_HOST_STORAGES
    if WORKER_HOST_STORAGES is not None:
        return False
    try:
        return torch.cuda.is_initialized() and torch.cuda.is_current_stream_capturing()
    except (RuntimeError, AssertionError):
        return False


def _captured_run(self, args, kwargs, grid):
    """A launch inside ``torch.cuda.graph(...)``: natively, so that the graph holds it.

    Raises:
        UsageError: the kernel is Triton's interpreted function (decorated with ``TRITON_INTERPRET=1``),
            which cannot run on the GPU, nor be captured.
    """
    native = _original(_jit.JITFunction, "run")
    if not isinstance(self, _jit.JITFunction) or native is None:
        raise UsageError(f"kernel {self.fn.__name__} was launched while a CUDA graph was being captured, and it "
                         "was decorated with TRITON_INTERPRET=1, so it cannot run on the GPU (Triton's interpreter "
                         "cannot be captured either): unset TRITON_INTERPRET, which tritonkit does not need")
    record_captured(active_session(), self.fn, args, kwargs, grid, config=current_config())
    return native(self, *args, grid=grid, warmup=False, **kwargs)


def _checked_call(self, *args, **kwargs):
    return rewritten(self.fn, simt=isinstance(_interp.interpreter_builder, BatchedBuilder))(*args, **kwargs)


def _libdevice_stubs():
    """The functions of ``triton.language.extra.libdevice``: bodiless stubs the compiler swaps for the
    backend's libdevice, which the interpreter would run as ``...`` and so return None."""
    try:
        from triton.language.extra import libdevice
    except ImportError:  # pragma: no cover
        return []
    return [fn for fn in vars(libdevice).values()
            if isinstance(fn, types.FunctionType) and fn.__module__ == libdevice.__name__]


_STUB = "_tritonkit_libdevice_stub_name"  # the placeholder the templates below are renamed from


def _stub_calling_cuda(*args, **kwargs):
    from triton.language.extra.cuda import libdevice as _cuda
    from triton.runtime.interpreter import interpreter_semantic as _semantic
    kwargs.pop("_semantic", None)
    return _cuda._tritonkit_libdevice_stub_name(*args, _semantic=_semantic, **kwargs)


def _stub_missing(*args, **kwargs):
    raise NotImplementedError("libdevice._tritonkit_libdevice_stub_name (no CPU version of it)")


@functools.lru_cache(maxsize=None)
def _libdevice_code(name: str):
    """Code for a ``triton.language.extra.libdevice`` stub: call the CUDA backend's function of that
    name (which dispatches on argument types exactly as the compiler does, then reaches the checked
    builder's ``create_extern_elementwise``), or say that there is none. A template's code renamed
    (``code.replace``): compiling ~200 stubs from source took 3-5 ms of each process's first launch."""
    try:
        from triton.language.extra.cuda import libdevice as cuda
        has = callable(getattr(cuda, name, None))
    except ImportError:  # pragma: no cover
        has = False
    code = (_stub_calling_cuda if has else _stub_missing).__code__
    names = {"co_qualname": name} if hasattr(code, "co_qualname") else {}  # Python >= 3.11
    return code.replace(co_name=name, co_names=tuple(name if n == _STUB else n for n in code.co_names),
                        co_consts=tuple(c.replace(_STUB, name) if isinstance(c, str) else c
                                        for c in code.co_consts), **names)


def _set(obj, name, value) -> None:
    _saved.append((obj, name, obj.__dict__.get(name, None), name in obj.__dict__))
    setattr(obj, name, value)


def install() -> None:
    """Patch Triton's launch paths (idempotent while installed)."""
    if _saved:
        return
    cpu_driver.install()  # host code asking Triton for the device gets CPU answers where there is no GPU
    _set(_jit.JITFunction, "run", _checked_run)
    _set(_jit.JITFunction, "__call__", _checked_call)
    _set(_interp.InterpretedFunction, "run", _checked_run)
    _set(_interp.InterpretedFunction, "__call__", _checked_call)
    _set(_autotuner.Autotuner, "run", _checked_autotune)
    # libdevice stubs run the CUDA backend's dispatch, computed on the CPU by tritonkit
    for fn in _libdevice_stubs():
        _saved.append((fn, "__code__", fn.__code__, True))
        fn.__code__ = _libdevice_code(fn.__name__)


def uninstall() -> None:
    """Restore what :func:`install` patched."""
    cpu_driver.uninstall()
    while _saved:
        obj, name, value, had = _saved.pop()
        if had:
            setattr(obj, name, value)
        else:
            with contextlib.suppress(AttributeError):
                delattr(obj, name)
