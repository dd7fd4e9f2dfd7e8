"""One launch, from ``kernel[grid](...)`` to its record: bind the arguments, map the tensors, run the
programs with an engine (the batched one first, one program at a time where it declines), copy
written storages back, and turn what stopped the launch into a finding."""
from __future__ import annotations

import os
import signal
import sys
import threading
import time
import types
from typing import List, Optional

import triton

from .. import repro
from ..checks.launch_errors import KernelError, Timeout, Unsupported
from ..engine import BatchedEngine, Engine, SequentialEngine
from ..errors import CheckAborted, InternalError, LaunchStalled, LaunchTimeout, StaticAssertFailed, UsageError
from ..findings import Violation
from ..forks import pass_threads
from ..interp import builtins as builtins_calls
from ..interp.kernels import LOCK, innermost_file, innermost_kernel_frame, traceback_frames
from ..results import LaunchRecord
from ..triton_hooks import patched_language
from .arguments import ArgMapper, RawPointers, bind_arguments, normalize_grid, scalar_specs, spec_item
from .progress import Progress
from .state import Launch, fp_fusion_enabled

#: where a builtin called from a kernel runs (see ..interp.builtins): its errors are the kernel's
_BUILTIN_CALLS = os.path.abspath(builtins_calls.FILE)
_TRITONKIT_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: Triton's front end (``triton/language``, ``triton/compiler``): what it raises, a GPU compile raises too
_TRITON_FRONT_END = tuple(os.path.join(os.path.dirname(os.path.abspath(triton.__file__)), d) + os.sep
                          for d in ("language", "compiler"))


def engines(session) -> List[Engine]:
    """The engines a launch of ``session`` tries, in order: the batched one then one program at a
    time (``engine="auto"``), or one program at a time only (``engine="sequential"``)."""
    if session.engine == "sequential":
        return [SequentialEngine()]
    return [BatchedEngine(session.batch_memory), SequentialEngine()]


def record_captured(session, pyfn, args, kwargs, grid, config: Optional[str] = None) -> LaunchRecord:
    """Record a launch made while a CUDA graph was being captured, which runs natively, unchecked
    (``status="captured"``): the graph records it and runs it at each replay, where no interpreter
    sees it, and its inputs cannot be read during the capture."""
    kernel = pyfn.__name__
    try:
        bound, _ = bind_arguments(pyfn, args, kwargs)
        dims, _ = normalize_grid(grid({**kwargs, **bound}) if callable(grid) else grid, kernel)
    except Exception:  # the native launch will say what is wrong with it
        dims = (0, 0, 0)
    record = LaunchRecord(kernel=kernel, grid=dims, config=config, status="captured")
    session.launches.append(record)
    if session.journal is not None:
        session.journal.launch(record)
    return record


def run_launch(session, pyfn, args, kwargs, grid, config: Optional[str] = None, jit=None,
               native=None) -> LaunchRecord:
    """Run one launch of the ``@triton.jit`` function ``pyfn`` in the checked interpreter.

    Args:
        session: the active :class:`~tritonkit.check.CheckSession`.
        pyfn: the kernel's Python function (``JITFunction.fn``).
        args, kwargs: the launch's arguments as given to ``kernel[grid](...)``; keyword arguments
            that are not parameters (``num_warps``, ``num_stages``, ...) are ignored.
        grid: a tuple of 1-3 program counts or a callable taking the arguments by name.
        config: the autotune config's description, to tag findings with.
        jit: the ``JITFunction`` launched (for ``do_not_specialize`` and annotations), if known.
        native: a callable that runs the launch natively on the GPU (``outputs="gpu"``): called
            instead of copying the interpreter's results back when the launch ended with no finding.
    Returns:
        the :class:`~tritonkit.check.LaunchRecord`.
    Raises:
        UsageError: the launch cannot be checked as given.
        CheckAborted: the kernel could not finish (the reason is a finding) or ``stop_on_first``.
    """
    kernel = pyfn.__name__
    bound, constexprs = bind_arguments(pyfn, args, kwargs)
    if callable(grid):
        grid = grid({**kwargs, **bound})
    dims, ndim = normalize_grid(grid, kernel)
    cap = repro.capture(pyfn, bound, kwargs, dims[:ndim], config)  # None unless --repro
    launch = Launch(session, pyfn, dims, ndim, config)
    if "enable_fp_fusion" in kwargs:
        launch.fp_fusion = fp_fusion_enabled(kwargs["enable_fp_fusion"])
    record = launch.record
    session.begin_launch(launch)
    if dims[0] * dims[1] * dims[2] == 0:
        record.status = "empty_grid"
        session.end_launch(launch)
        return record
    specs = scalar_specs(jit, pyfn)
    mapper = ArgMapper(launch.space, pass_threads(session))
    launch.space.foreign = RawPointers(mapper)
    start = time.perf_counter()
    timer = _Timer(session.timeout)
    with LOCK:
        try:
            # one patched scope for the launch: an engine's own is nested in it (only its builder changes)
            with patched_language(launch.builder):
                call_args = {n: (v if n in constexprs else mapper.convert(n, v, specs.get(n, ("", True))))
                             for n, v in bound.items()}
                launch.spec_key = (pyfn.__code__, tuple(spec_item(v) for v in call_args.values()))
                launch.work_key = launch.spec_key + (tuple(
                    v for n, v in bound.items()
                    if n not in constexprs and isinstance(v, int) and not isinstance(v, bool)),)
                launch.builder.set_grid_dim(*dims)
                launch.entry_frame = sys._getframe()
                with timer, Progress(launch, session.journal):
                    for engine in engines(session):
                        why = engine.run(launch, call_args)
                        if why is None:
                            record.engine = engine.name
                            break
                        record.fallback = why
        except LaunchTimeout as e:
            record.status = "aborted"
            stalled = isinstance(e, LaunchStalled)
            launch.report(Violation(kind=Timeout.kind, kernel=kernel, frames=traceback_frames(e.__traceback__),
                                    program_id=launch.program_id(), access="", masked=False, lanes=0,
                                    reason="stalled" if stalled else "time_limit",
                                    message=e.message if stalled else
                                    f"the launch ran longer than {session.timeout:g} s; "
                                    f"stopped in program {launch.program_id()[:ndim]}"))
            raise CheckAborted(f"kernel {kernel} {'stalled' if stalled else 'timed out'}") from None
        except StaticAssertFailed:
            record.status = "aborted"
            raise
        except (CheckAborted, UsageError, KeyboardInterrupt):
            record.status = "aborted"
            raise
        except Exception as e:  # the kernel could not run: a finding, then stop the program
            record.status = "aborted"
            _kernel_failure(session, launch, e)
            raise CheckAborted(f"kernel {kernel} could not run in the interpreter") from e
        finally:
            record.seconds = time.perf_counter() - start
            try:
                if native is not None and record.status == "ok" and not launch.found:
                    native()  # the device tensors still hold the launch's inputs: the GPU's results
                    record.outputs = "gpu"
                else:
                    mapper.copy_back()
                session.end_launch(launch)
                if cap is not None and launch.found:
                    repro.write_safely(cap, [f for f in session.findings if f.kernel == kernel])
            finally:
                launch.release()
                if record.seconds > _TRIM_AFTER_S:
                    _return_freed_memory()
    return record


def _kernel_failure(session, launch: Launch, exc: BaseException) -> None:
    """Turn an exception raised while a kernel ran into a finding (or re-raise a tritonkit bug)."""
    tb = exc.__traceback__
    where = os.path.abspath(innermost_file(tb))
    if isinstance(exc, NotImplementedError) and where.startswith(_TRITON_FRONT_END):
        # Triton's own front end refused the kernel (``tl.make_block_ptr`` in Triton >= 3.7): compiling
        # it for a GPU fails the same way, so it is the kernel's error, not the CPU's
        kind = KernelError.kind
        msg = f"Triton raised NotImplementedError: {exc} (compiling for a GPU raises it too)"
    elif isinstance(exc, NotImplementedError):
        kind = Unsupported.kind
        msg = f"cannot run on the CPU: {exc}" if str(exc) else f"cannot run on the CPU: {type(exc).__name__}"
    elif where.startswith(_TRITONKIT_DIR + os.sep) and where != _BUILTIN_CALLS:
        raise InternalError(f"tritonkit failed while running kernel {launch.kernel}: {exc!r}") from exc
    else:
        kind = KernelError.kind
        msg = _missing_construct(exc) or f"{type(exc).__name__}: {exc}"
    v = Violation(kind=kind, kernel=launch.kernel, frames=traceback_frames(tb), program_id=launch.program_id(),
                  access="", masked=False, lanes=0, message=msg)
    v.config = launch.config
    session.add_violation(v, launch, frame=innermost_kernel_frame(tb) if session.pdb else None)


def _missing_construct(exc: BaseException) -> Optional[str]:
    """What to say of an ``AttributeError`` on Triton's language (a module of ``triton.language``, or
    one of its objects: a ``tl.tensor``, a dtype) raised by kernel code: the construct does not exist
    in the installed Triton, whose version it names. None for any other exception."""
    obj, name = getattr(exc, "obj", None), getattr(exc, "name", None)
    if not isinstance(exc, AttributeError) or not isinstance(name, str):
        return None
    if isinstance(obj, types.ModuleType) and obj.__name__.split(".")[:2] == ["triton", "language"]:
        construct = f"{obj.__name__}.{name}"
    elif type(obj).__module__.split(".")[:2] == ["triton", "language"]:
        construct = f"{type(obj).__module__}.{type(obj).__name__}.{name}"
    else:
        return None
    return (f"`{construct}` does not exist in the installed Triton ({triton.__version__}): the kernel uses a construct "
            "this Triton version does not have (compiling it with this Triton fails too); run it with the Triton "
            f"version it was written for, or write it without `{name}` ({type(exc).__name__}: {exc})")


class _Timer:
    """Raises :class:`~tritonkit.check.errors.LaunchTimeout` in the main thread after ``seconds``
    (None: never; only in the main thread, where signals are delivered). A ``SIGALRM`` timer the
    program had set is put back afterwards with what was left of it."""

    def __init__(self, seconds: Optional[float]):
        self.seconds = seconds
        self.active = bool(seconds) and threading.current_thread() is threading.main_thread() \
            and hasattr(signal, "setitimer")

    def _fire(self, signum, frame):
        raise LaunchTimeout()

    def __enter__(self):
        if self.active:
            self.prev = signal.signal(signal.SIGALRM, self._fire)
            self.prev_timer = signal.setitimer(signal.ITIMER_REAL, self.seconds)  # the program's own, if any
            self.start = time.monotonic()
        return self

    def __exit__(self, *exc):
        if self.active:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self.prev)
            delay, interval = self.prev_timer
            if delay > 0:  # the program's timer goes on (one due during the launch fires now)
                signal.setitimer(signal.ITIMER_REAL, max(1e-6, delay - (time.monotonic() - self.start)), interval)
        return False


#: launches that ran longer than this (seconds) hand the heap's free memory back to the system when
#: they end; shorter ones allocate too little for it to matter, and trimming costs ~1 ms a GiB of heap
_TRIM_AFTER_S = 0.25
_libc_trim = None


def _return_freed_memory() -> None:
    """Give the C heap's free pages back to the system (glibc's ``malloc_trim``).

    A batched launch frees many arrays of a few MiB to a few tens of MiB; glibc keeps arrays under
    its mmap threshold (up to 32 MiB) in its heaps, and the resident memory they leave stays with
    the process after they are freed: a test suite's RSS then ratchets up from test to test. A no-op
    where the C library is not glibc.
    """
    global _libc_trim
    if _libc_trim is None:
        _libc_trim = False
        if sys.platform.startswith("linux"):
            try:
                import ctypes
                _libc_trim = ctypes.CDLL("libc.so.6").malloc_trim
                _libc_trim.argtypes = [ctypes.c_size_t]
            except (OSError, AttributeError):
                _libc_trim = False
    if _libc_trim:
        _libc_trim(0)
