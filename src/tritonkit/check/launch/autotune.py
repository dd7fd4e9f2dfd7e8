"""A ``@triton.autotune`` kernel under check: every config runs (once per distinct key) instead of
being timed, with the arguments' side effects undone between configs; the first config that
compiles is the one the program keeps, and a finding names the configs it occurred under."""
from __future__ import annotations

import contextlib
import contextvars
from typing import Dict, List, Optional

from ..errors import StaticAssertFailed
from ..triton_hooks import autotuning
from .active import active_session

_config_label: contextvars.ContextVar[Optional[str]] = contextvars.ContextVar("tritonkit_config", default=None)


def current_config() -> Optional[str]:
    """The description of the autotune config running now (see :func:`config_label`), or None."""
    return _config_label.get()


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
    """Copies of the storages of some tensors, and what each check knows of them
    (``Check.save_state``), to undo a config's side effects."""

    def __init__(self, tensors):
        self.saved: Dict[int, tuple] = {}
        for t in tensors:
            st = t.untyped_storage()
            if st.data_ptr() not in self.saved:
                self.saved[st.data_ptr()] = (st, st.clone())
        self.checks = [(c, c.save_state(tensors)) for c in active_session().checks]

    def restore(self) -> None:
        for st, copy in self.saved.values():
            st.copy_(copy)
        for check, state in self.checks:
            check.restore_state(state)


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


def checked_autotune(self, *args, **kwargs):
    """``Autotuner.run`` under check (``self``: Triton's ``Autotuner``): every config of a new key
    runs, its side effects undone; the kept config's launch is the one the program sees."""
    self.nargs = dict(zip(self.arg_names, args))
    try:
        all_args = {**self.nargs, **kwargs}
        named = {k: v for k, v in all_args.items() if k in self.arg_names}
        key = [named[k] for k in self.keys if k in named]
        key += [str(v.dtype) for v in named.values() if hasattr(v, "dtype")]
        key = tuple(key)
        configs = self.prune_configs(kwargs) if len(self.configs) > 1 else list(self.configs)
        seen = active_session().autotuned_keys
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


