"""A ``@triton.autotune`` kernel under check: every config runs (once per distinct key) instead of
being timed, with the arguments' side effects undone between configs; the first config that
compiles is the one the program keeps, and a finding names the configs it occurred under."""
from __future__ import annotations

import contextlib
import contextvars
from typing import Dict, List, Optional

from ..errors import CheckAborted, StaticAssertFailed, UsageError
from ..triton_hooks import autotuning
from . import parallel
from .active import active_session
from .tensor_like import describe, is_tensor_like, owner_of

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
        elif is_tensor_like(v):  # an object with data_ptr() and a dtype: the tensor it points into
            with contextlib.suppress(UsageError):
                owner = owner_of(v, describe("", v))
                if owner is not None:
                    out.append(owner)
    return out


class _Snapshot:
    """Copies of the storages of some tensors, and what each check knows of them
    (``Check.save_state``), to undo a config's side effects. In a config's worker process the
    storages of CUDA tensors are left out: the GPU is out of its reach, and its launches write
    copies of their bytes (see :mod:`.parallel`)."""

    def __init__(self, tensors):
        from .parallel import WORKER_HOST_STORAGES
        self.tensors = tensors
        self.saved: Dict[int, tuple] = {}
        for t in tensors:
            if WORKER_HOST_STORAGES is not None and t.device.type != "cpu":
                continue
            st = t.untyped_storage()
            if st.data_ptr() not in self.saved:
                self.saved[st.data_ptr()] = (st, st.clone())
        self.checks = [(c, c.save_state(tensors)) for c in active_session().checks]

    def restore(self) -> None:
        for st, copy in self.saved.values():
            st.copy_(copy)
        for check, state in self.checks:
            check.restore_state(state)

    @contextlib.contextmanager
    def restored(self):
        """The ``with`` block runs on the snapshot's state; what was there before it is put back after."""
        now = _Snapshot(self.tensors)
        self.restore()
        try:
            yield
        finally:
            now.restore()


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
            def run_one(i):
                snap = _Snapshot(tensors)
                try:
                    with _compiling_quietly():
                        _run_config(self, args, kwargs, configs[i])
                finally:
                    snap.restore()
            session = active_session()
            others = list(range(1, len(configs)))
            mine, theirs, workers, overlap = parallel.plan(session, others)
            pool = parallel.start(run_one, theirs, session, tensors, workers) if theirs else None
            if pool is None:
                mine, theirs = others, []
            try:
                with (parallel.limit_threads(pool.threads) if pool else contextlib.nullcontext()):
                    for i in mine:  # the earliest configs, here, while the workers run theirs
                        try:
                            run_one(i)
                            candidates.append(configs[i])
                        except StaticAssertFailed:
                            pass
                    if pool is not None:
                        session.flush_journal()  # the workers' findings wait for this process
                    kept = _run_kept_meanwhile(self, args, kwargs, configs[0], session, tensors) if pool and overlap \
                        else None
            except BaseException:
                if pool is not None:
                    pool.abandon()  # a serial run would never have run the later configs
                raise
            done = pool.finish() if pool else {}
            for i in theirs:
                result = done.get(i)
                if result is not None:
                    session.adopt(result.records, result.violations, result.printed)
                    if result.outcome == "aborted":
                        pool.settle()
                        if kept is not None:
                            kept.before.restore()  # a serial run stopped before the kept config
                            kept.capture.settle()
                        raise CheckAborted(result.message)
                    if result.outcome == "ok":
                        candidates.append(configs[i])
                    continue
                try:
                    with (kept.before.restored() if kept else contextlib.nullcontext()):
                        run_one(i)
                    candidates.append(configs[i])
                except StaticAssertFailed:
                    pass
            if pool is not None:
                pool.settle()
            if kept is not None:
                session.adopt(kept.capture.records, kept.capture.violations, kept.capture.printed)
                kept.capture.settle()
                if kept.error is not None:
                    raise kept.error
                seen[(id(self), key)] = (self, configs[0])
                return kept.value
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


class _Kept:
    """The kept config's launch, run in this process while workers check the others (see
    :mod:`.parallel`): what it added to the session held back (``capture``), its return value or
    the exception it raised, and the arguments as they were before it (``before``), for a config a
    worker could not finish, which then runs here on them."""

    def __init__(self, before, capture=None, value=None, error=None) -> None:
        self.before, self.capture, self.value, self.error = before, capture, value, error


def _run_kept_meanwhile(self, args, kwargs, config, session, tensors) -> Optional[_Kept]:
    """Run the first config, which the program keeps, while workers run the others (as the serial
    order runs it after them: with the autotuner's ``reset_to_zero`` arguments zeroed first); None
    where it would not compile (then the next config that compiles is kept, which the workers tell,
    and the arguments are as before)."""
    before = _Snapshot(tensors)
    kept = _Kept(before)
    capture = parallel.Capture(session, hold=True)
    try:
        with capture:
            self.pre_hook({**self.nargs, **kwargs, **config.all_kwargs()}, reset_only=True)
            kept.value = _run_kept(self, args, kwargs, config)
    except StaticAssertFailed:
        before.restore()
        capture.settle()  # nothing of it is taken: the next config that compiles is kept
        return None
    except Exception as e:  # raised after the other configs' findings are taken, as a serial run would
        kept.error = e
    kept.capture = capture
    return kept


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


