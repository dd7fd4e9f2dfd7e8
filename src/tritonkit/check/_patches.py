"""Hooks into Triton's launch paths while a check session is active.

Patched (and restored when the session ends):

* ``JITFunction.run`` and ``InterpretedFunction.run``: every ``kernel[grid](...)`` launch, whether
  the kernel was decorated with ``TRITON_INTERPRET`` set or not, runs in the checked interpreter;
* ``JITFunction.__call__`` and ``InterpretedFunction.__call__``: a ``@triton.jit`` device function
  called from a kernel body runs as interpreted Python (its lines are placed in findings too);
* ``Autotuner.run``: the kernel is checked under every config once per distinct key, instead of
  being benchmarked (which needs a GPU);
* the bodiless ``triton.language.extra.libdevice`` stubs call the CUDA backend's libdevice
  functions, which the checked builder computes with numpy (``_libdevice.py``).

``Heuristics.run`` needs nothing: it computes its values and calls the patched ``run``.
"""
from __future__ import annotations

import contextlib
import functools
import contextvars
import types
from typing import Dict, List, Optional

from triton.runtime import autotuner as _autotuner
from triton.runtime import interpreter as _interp
from triton.runtime import jit as _jit

from ._launch import StaticAssertFailed, autotuning, rewritten, run_launch

_config_label: contextvars.ContextVar[Optional[str]] = contextvars.ContextVar("tritonkit_config", default=None)
_saved: List[tuple] = []


def _session():
    from ._session import active_session
    return active_session()


def _checked_run(self, *args, grid, warmup=False, **kwargs):
    if warmup:
        return None
    session = _session()
    run_launch(session, self.fn, args, kwargs, grid, config=_config_label.get(), jit=self)
    return None


def _checked_call(self, *args, **kwargs):
    from ._batched import BatchedBuilder
    return rewritten(self.fn, simt=isinstance(_interp.interpreter_builder, BatchedBuilder))(*args, **kwargs)


def config_label(config) -> str:
    """A config as people write it: ``"BLOCK_M=64, BLOCK_N=32, num_warps=4, num_stages=3"``."""
    parts = [f"{k}={v}" for k, v in config.kwargs.items()]
    for opt in ("num_warps", "num_stages", "num_ctas", "maxnreg"):
        v = getattr(config, opt, None)
        if v is not None and not (opt == "num_ctas" and v == 1):
            parts.append(f"{opt}={v}")
    return ", ".join(parts)


def _tensors(values) -> List:
    out = []
    for v in values:
        if hasattr(v, "untyped_storage"):
            out.append(v)
        elif isinstance(v, (tuple, list)):
            out.extend(_tensors(v))
        elif hasattr(v, "base") and hasattr(v.base, "untyped_storage"):
            out.append(v.base)
    return out


class _Snapshot:
    """Copies of the storages of some tensors (and of which of their elements are uninitialized),
    to undo a config's side effects."""

    def __init__(self, tensors):
        self.saved: Dict[int, tuple] = {}
        for t in tensors:
            st = t.untyped_storage()
            if st.data_ptr() not in self.saved:
                self.saved[st.data_ptr()] = (st, st.clone())
        tracked = _session().uninitialized
        self.uninitialized = tracked.save(tensors) if tracked is not None else {}

    def restore(self) -> None:
        for st, copy in self.saved.values():
            st.copy_(copy)
        tracked = _session().uninitialized
        if tracked is not None:
            tracked.restore(self.uninitialized)


def _run_config(self, args, kwargs, config) -> None:
    current = dict(kwargs, **config.all_kwargs())
    full_nargs = {**self.nargs, **current}
    token = _config_label.set(config_label(config))
    try:
        if config.pre_hook:
            config.pre_hook(full_nargs)
        self.pre_hook(full_nargs)
        try:
            self.fn.run(*args, **current)
        except Exception as e:
            self.post_hook(full_nargs, exception=e)
            raise
        self.post_hook(full_nargs, exception=None)
    finally:
        _config_label.reset(token)


def _checked_autotune(self, *args, **kwargs):
    self.nargs = dict(zip(self.arg_names, args))
    try:
        all_args = {**self.nargs, **kwargs}
        named = {k: v for k, v in all_args.items() if k in self.arg_names}
        key = [named[k] for k in self.keys if k in named]
        key += [str(v.dtype) for v in named.values() if hasattr(v, "dtype")]
        key = tuple(key)
        configs = self.prune_configs(kwargs) if len(self.configs) > 1 else list(self.configs)
        seen = _session().autotuned_keys
        entry = seen.get((id(self), key))
        candidates = [entry[1]] if entry is not None else configs[:1]
        tensors = _tensors(all_args.values())
        if entry is None and len(configs) > 1:
            # Like Triton's autotuner, a config that fails a tl.static_assert (it would not compile)
            # is skipped, not reported: the kept config is the first one that compiles.
            for config in configs[1:]:
                snap = _Snapshot(tensors)
                try:
                    with _compiling_quietly():
                        _run_config(self, args, kwargs, config)
                    candidates.append(config)
                except StaticAssertFailed:
                    pass
                finally:
                    snap.restore()
            self.pre_hook({**self.nargs, **kwargs, **configs[0].all_kwargs()}, reset_only=True)
        for i, chosen in enumerate(candidates):
            last = i == len(candidates) - 1
            snap = None if last else _Snapshot(tensors)
            try:
                with contextlib.ExitStack() as stack:
                    if not last:
                        stack.enter_context(_compiling_quietly())
                    result = _run_kept(self, args, kwargs, chosen)
            except StaticAssertFailed:
                if last:
                    raise
                snap.restore()
                continue
            seen[(id(self), key)] = (self, chosen)  # keeps self alive, so its id is not reused
            return result
    finally:
        self.nargs = None


def _run_kept(self, args, kwargs, chosen):
    self.best_config = chosen
    current = dict(kwargs, **chosen.all_kwargs())
    token = _config_label.set(config_label(chosen))
    try:
        if chosen.pre_hook is not None:
            chosen.pre_hook({**self.nargs, **current})
        return self.fn.run(*args, **current)
    finally:
        _config_label.reset(token)


@contextlib.contextmanager
def _compiling_quietly():
    """While an autotuner tries configs: a failing static_assert raises without a finding."""
    token = autotuning.set(True)
    try:
        yield
    finally:
        autotuning.reset(token)


def _libdevice_stubs():
    """The functions of ``triton.language.extra.libdevice``: bodiless stubs the compiler swaps for the
    backend's libdevice, which the interpreter would run as ``...`` and so return None."""
    try:
        from triton.language.extra import libdevice
    except ImportError:  # pragma: no cover
        return []
    return [fn for fn in vars(libdevice).values()
            if isinstance(fn, types.FunctionType) and fn.__module__ == libdevice.__name__]


@functools.lru_cache(maxsize=None)
def _libdevice_code(name: str):
    """Code for a ``triton.language.extra.libdevice`` stub: call the CUDA backend's function of that
    name (which dispatches on argument types exactly as the compiler does, then reaches the checked
    builder's ``create_extern_elementwise``), or say that there is none."""
    try:
        from triton.language.extra.cuda import libdevice as cuda
        has = callable(getattr(cuda, name, None))
    except ImportError:  # pragma: no cover
        has = False
    if has:
        src = (f"def {name}(*args, **kwargs):\n"
               f"    from triton.language.extra.cuda import libdevice as _cuda\n"
               f"    from triton.runtime.interpreter import interpreter_semantic as _semantic\n"
               f"    kwargs.pop('_semantic', None)\n"
               f"    return _cuda.{name}(*args, _semantic=_semantic, **kwargs)\n")
    else:
        src = (f"def {name}(*args, **kwargs):\n"
               f"    raise NotImplementedError('libdevice.{name} (no CPU version of it)')\n")
    ns: dict = {}
    exec(compile(src, "<tritonkit libdevice stub>", "exec"), ns)
    return ns[name].__code__


def _set(obj, name, value) -> None:
    _saved.append((obj, name, obj.__dict__.get(name, None), name in obj.__dict__))
    setattr(obj, name, value)


def install() -> None:
    """Patch Triton's launch paths (idempotent while installed)."""
    if _saved:
        return
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
    while _saved:
        obj, name, value, had = _saved.pop()
        if had:
            setattr(obj, name, value)
        else:
            with contextlib.suppress(AttributeError):
                delattr(obj, name)
