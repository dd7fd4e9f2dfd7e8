"""Launches too large for the interpreter, checked on the GPU instead (a session's ``gpu_above``).

A launch whose tensor arguments are all on a CUDA device and view storages of more than
``gpu_above`` elements in all (:func:`cuda_elements`) runs natively as its instrumented version
(:mod:`tritonkit.check.gpu.runtime`, what ``tritonkit check --gpu`` runs): every load, store and
atomic checks its offsets, in int64, against its tensor argument's view, lanes outside are not
performed, and what they did comes back as the session's ``out_of_bounds`` and ``int_overflow``
findings. Nothing else is checked in such a launch
(no data race, uninitialized read or NaN/Inf check: the interpreter makes those), and its tensors get
the GPU's results. The launch record says ``engine="gpu"``.

A launch goes to the interpreter after all, unchanged, where the GPU could not check it as the
interpreter checks out-of-bounds accesses and int32 overflow: a kernel launched through the
checked autotuner (its configs are tried and undone in the interpreter), a kernel decorated under
``TRITON_INTERPRET=1``, an access the instrumented kernel leaves unchecked (block pointers, pointers
from helpers), an offset it cannot compute again in int64, a view with more gaps than it tells apart,
an instrumented version that does not compile, pdb, a config's worker process.
"""
from __future__ import annotations

import sys
import time
from typing import Optional

from ..results import LaunchRecord

#: ``pytest --tritonkit``'s default ``gpu_above``: 2^30 elements. The checked interpreter takes about
#: 2 s per 2^30 elements of a launch's tensors on 16 cores (Liger-Kernel's 2^31-element RMS norm
#: launch, 2 x 2^31 elements: 8.4-9.2 s on an H100 host, benchmarks/check_large_launch.py), where the
#: GPU takes well under a second
PYTEST_GPU_ABOVE = 1 << 30

_OFF = ("off", "none", "never")


def parse_gpu_above(text) -> Optional[int]:
    """A ``gpu_above`` as people write it: a number of elements (``1073741824``, ``1e9``, ``2^30``,
    ``2**30``), or ``off`` (also ``none``, ``never``) for None: every launch in the interpreter.

    Raises:
        ValueError: anything else, or a negative number.
    """
    if text is None or isinstance(text, int) and not isinstance(text, bool):
        value = text
    else:
        word = str(text).strip().lower().replace("**", "^")
        if word in _OFF:
            return None
        try:
            if "^" in word:
                base, _, exp = word.partition("^")
                value = int(base) ** int(exp)
            else:
                f = float(word)
                value = int(f)
                if value != f:
                    raise ValueError
        except (ValueError, OverflowError):
            raise ValueError(f"{text!r} is not a number of elements (write 1073741824, 1e9 or 2^30) nor 'off'") \
                from None
    if value is not None and value < 0:
        raise ValueError(f"{text!r}: a number of elements, 0 or more, or 'off'")
    return value


_instrumenter = None
_told: set = set()
_launching = [False]  # whether the instrumenter's callback comes from a launch running on the GPU


def cuda_elements(args, kwargs) -> Optional[int]:
    """The elements of the storages a launch's tensor arguments view (each storage once, counted in
    the element size of the first tensor seen on it: a slice of a larger tensor counts the whole
    tensor, which the interpreter copies to the host and keeps for the launch), where it has at least
    one tensor argument and all are on a CUDA device (a host-side tensor descriptor counts its base
    tensor's); None otherwise."""
    total, seen = 0, set()
    for v in (*args, *kwargs.values()):
        t = v if hasattr(v, "untyped_storage") else getattr(v, "base", None)
        if not hasattr(t, "untyped_storage"):
            continue
        if getattr(t.device, "type", None) != "cuda":
            return None
        st = t.untyped_storage()
        if st.data_ptr() in seen:
            continue
        seen.add(st.data_ptr())
        total += int(st.nbytes()) // max(1, int(t.element_size()))
    return total if seen else None


def _unchecked(fn, why: str) -> None:
    """What a launch on the GPU left unchecked, said once per kernel and reason. What the instrumenter
    says while preparing a launch is not said: such a launch goes to the interpreter, which checks it."""
    key = (id(fn), why)
    if _launching[0] and key not in _told:
        _told.add(key)
        sys.stderr.write(f"tritonkit: {getattr(fn, '__name__', 'kernel')} on the GPU: {why}\n")


def _get_instrumenter(original):
    global _instrumenter
    if _instrumenter is None:
        from ..gpu.runtime import Instrumenter
        _instrumenter = Instrumenter(original, _unchecked)
    return _instrumenter


def run_on_gpu(session, jit, args, kwargs, grid, original, config: Optional[str] = None) -> Optional[LaunchRecord]:
    """Check the launch ``jit[grid](*args, **kwargs)`` on the GPU (see the module) where
    ``session.gpu_above`` asks for it and the GPU can check it fully; ``original`` is Triton's own
    ``JITFunction.run``.

    Returns:
        the launch's :class:`~tritonkit.check.LaunchRecord` (``engine="gpu"``), or None where the
        launch is for the interpreter (nothing ran).
    Raises:
        CheckAborted: ``stop_on_first`` and the launch had a finding (it ran to its end).
    """
    from triton.compiler.errors import CompilationError
    from triton.runtime.jit import JITFunction

    from ..gpu.runtime import Instrumenter, cuda_arguments
    from .arguments import bind_arguments, normalize_grid
    from .parallel import WORKER_HOST_STORAGES
    limit = session.gpu_above
    if limit is None or session.pdb or WORKER_HOST_STORAGES is not None or not isinstance(jit, JITFunction) \
            or original is None:
        return None
    n = cuda_elements(args, kwargs)
    if n is None or n <= limit:
        return None
    named = dict(zip(jit.arg_names, args))
    named.update(kwargs)
    instrumenter = _get_instrumenter(original)
    inst, key = instrumenter.prepare(jit, named, cuda_arguments(named))
    if inst is None or inst.skipped or inst.no_overflow or Instrumenter.partial_views(inst, named):
        return None
    bound, _ = bind_arguments(jit.fn, args, kwargs)
    dims, _ = normalize_grid(grid({**kwargs, **bound}) if callable(grid) else grid, jit.fn.__name__)
    record = LaunchRecord(kernel=jit.fn.__name__, grid=dims, config=config, engine="gpu", outputs="gpu",
                          programs=dims[0] * dims[1] * dims[2])
    found: list = []
    start = time.perf_counter()
    _launching[0] = True
    try:
        instrumenter.launch(jit, inst, key, named, args, kwargs, grid, keep=found.append)
    except CompilationError:  # nothing ran: the interpreter checks it
        return None
    except BaseException:  # what the launch found before it failed is kept
        record.status, record.seconds = "aborted", time.perf_counter() - start
        session.add_gpu_launch(record, found)
        raise
    finally:
        _launching[0] = False
    record.seconds = time.perf_counter() - start
    session.add_gpu_launch(record, found)
    return record
