"""Running one kernel launch in the checked CPU interpreter.

:func:`run_launch` binds the launch's arguments like Triton's JIT does, maps every tensor
argument into a fresh :class:`~tritonkit.check._memory.AddressSpace` (copying tensors on a GPU
to the host, as Triton's interpreter does), runs the grid one program at a time through Triton's
own front end with a :class:`~tritonkit.check._builder.CheckedBuilder` underneath, and copies
written storages back. How programs are executed is kept apart from what is checked: the
builder calls :meth:`Launch.access` for every memory operation and the checks decide.
"""
from __future__ import annotations

import dataclasses
import inspect
import os
import signal
import sys
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import torch
import triton
import triton.language as tl
from triton.runtime import interpreter as _interp

from ._builder import CheckedBuilder
from ._memory import AddressSpace, HostStorage, Resolved
from .checks import Access
from .findings import Frame, Violation

_TRITONKIT_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# code objects of the rewritten (interpretable) jitted functions -> their names
KERNEL_CODES: Dict[Any, str] = {}
_REWRITTEN: Dict[Any, Any] = {}
_lock = threading.RLock()


class CheckAborted(BaseException):
    """Raised through the user's program to stop it: a launch could not finish, or
    ``stop_on_first`` was asked for and a finding was made.

    A ``BaseException`` so that a script's ``except Exception`` does not swallow it.
    """


class UsageError(Exception):
    """A launch that cannot be checked as given (missing argument, bad grid, ...)."""


class InternalError(CheckAborted):
    """tritonkit itself failed while running a launch (a bug to report), not the kernel."""


class _LaunchTimeout(BaseException):
    pass


def rewritten(pyfn):
    """The interpretable version of a ``@triton.jit`` function's Python body (cached).

    Uses Triton's own AST rewriter, and remembers the code object so that findings can be
    placed on kernel lines by walking the Python stack.
    """
    fn = _REWRITTEN.get(pyfn)
    if fn is None:
        fn = _interp.FunctionRewriter(pyfn).rewrite_ast()
        _REWRITTEN[pyfn] = fn
        KERNEL_CODES[fn.__code__] = pyfn.__name__
    return fn


def kernel_frames(frame=None) -> List[Frame]:
    """Kernel source frames on the current stack, innermost first."""
    out = []
    f = frame or sys._getframe(1)
    while f is not None:
        if f.f_code in KERNEL_CODES:
            out.append(Frame(f.f_code.co_filename, f.f_lineno, f.f_code.co_name))
        f = f.f_back
    return out


def _traceback_frames(tb) -> List[Frame]:
    out = []
    while tb is not None:
        if tb.tb_frame.f_code in KERNEL_CODES:
            out.append(Frame(tb.tb_frame.f_code.co_filename, tb.tb_lineno, tb.tb_frame.f_code.co_name))
        tb = tb.tb_next
    return out[::-1]


def _innermost_file(tb) -> str:
    last = None
    while tb is not None:
        last = tb
        tb = tb.tb_next
    return last.tb_frame.f_code.co_filename if last is not None else ""


def _is_constexpr(param: inspect.Parameter) -> bool:
    ann = param.annotation
    if ann is inspect.Parameter.empty:
        return False
    if ann is tl.constexpr or isinstance(ann, tl.constexpr):
        return True
    return isinstance(ann, str) and ann.split(".")[-1].strip() == "constexpr"


@dataclasses.dataclass
class LaunchRecord:
    """What one checked launch did.

    Attributes:
        kernel: the kernel's name.
        grid: the grid, as (x, y, z) program counts.
        programs: programs run (the product of the grid unless stopped early).
        config: the autotune config, or None.
        accesses: memory operations checked (one per op per program).
        lanes: active lanes checked.
        seconds: wall time of the launch in the interpreter, in seconds.
        status: ``"ok"``, ``"empty_grid"`` or ``"aborted"``.
        engine: which executor ran it (``"sequential"``: one program at a time).
    """

    kernel: str
    grid: Tuple[int, int, int]
    programs: int = 0
    config: Optional[str] = None
    accesses: int = 0
    lanes: int = 0
    seconds: float = 0.0
    status: str = "ok"
    engine: str = "sequential"


class Launch:
    """The state of one launch while it runs: its address space, its checks, where it is."""

    def __init__(self, session, kernel: str, grid: Tuple[int, int, int], ndim: int, config: Optional[str]):
        self.session = session
        self.kernel = kernel
        self.grid = grid
        self.grid_ndim = ndim
        self.config = config
        self.space = AddressSpace()
        self.checks = session.checks
        self.builder = CheckedBuilder(self)
        self.record = LaunchRecord(kernel=kernel, grid=grid, config=config)

    def program_id(self) -> Tuple[int, ...]:
        return tuple(int(i) for i in self.builder.grid_idx)

    def access(self, op: str, kind: str, addrs: np.ndarray, mask: Optional[np.ndarray], size: int,
               masked: bool) -> Resolved:
        """Resolve and check one memory operation; returns the lanes to perform (``res.ok``)."""
        res = self.space.resolve(addrs, mask)
        self.record.accesses += 1
        self.record.lanes += res.n
        if self.checks:
            acc = Access(op=op, kind=kind, size=size, masked=masked, shape=addrs.shape)
            for check in self.checks:
                check.on_access(self, acc, res)
        if not self.session.bounds_enforced:
            res.keep(self.space.in_storage(res, size))
        return res

    def report(self, v: Violation) -> None:
        """Record a violation at the current program and kernel line."""
        v.kernel = self.kernel
        if not v.frames:
            v.frames = kernel_frames(sys._getframe(1))
        if not v.program_id:
            v.program_id = self.program_id()
        v.config = self.config
        self.session._add_violation(v, self)


def _dtype_name(t: torch.Tensor) -> str:
    return str(t.dtype).replace("torch.", "")


class _ArgMapper:
    """Maps a launch's arguments into the address space, and copies device storages back."""

    def __init__(self, space: AddressSpace):
        self.space = space

    def storage(self, t: torch.Tensor) -> HostStorage:
        st = t.untyped_storage()
        key = (str(t.device), st.data_ptr())
        hs = self.space.storages.get(key)
        if hs is None:
            if t.device.type == "cpu":
                host, dev = st, None
            elif t.device.type == "meta":
                raise UsageError("a tensor on the 'meta' device has no data to check: pass real tensors")
            else:
                host, dev = st.cpu(), st
            nbytes = host.nbytes()
            buf_t = torch.empty(0, dtype=torch.uint8).set_(host, 0, (nbytes,), (1,))
            hs = HostStorage(buf=buf_t.numpy(), device_storage=dev, host_storage=host)
            self.space.storages[key] = hs
        return hs

    def pointer(self, name: str, arg) -> tl.tensor:
        t = arg.base if isinstance(arg, triton.runtime.jit.TensorWrapper) else arg
        if t.layout != torch.strided:
            raise UsageError(f"argument '{name}' is a {t.layout} tensor: Triton kernels take dense (strided) "
                             "tensors; pass .to_dense()")
        hs = self.storage(t)
        itemsize = t.element_size()
        region = self.space.add(name, hs, t.storage_offset() * itemsize, itemsize, tuple(t.shape), tuple(t.stride()),
                                _dtype_name(t))
        ty = tl.str_to_ty(triton.runtime.jit.mangle_type(arg), None)
        return tl.tensor(_interp.TensorHandle(np.array([region.vaddr], dtype=np.uint64), ty), ty)

    def convert(self, name: str, arg):
        if hasattr(arg, "data_ptr") and hasattr(arg, "untyped_storage") or \
                isinstance(arg, triton.runtime.jit.TensorWrapper):
            return self.pointer(name, arg)
        if isinstance(arg, tuple):
            items = [self.convert(f"{name}[{i}]", a) for i, a in enumerate(arg)]
            return type(arg)(*items) if hasattr(arg, "_fields") else type(arg)(items)
        from triton.tools.tensor_descriptor import TensorDescriptor
        if isinstance(arg, TensorDescriptor):
            base = self.pointer(f"{name}.base", arg.base)
            strides = [_interp._implicit_cvt(s) for s in arg.strides]
            strides[-1] = tl.constexpr(1)
            kw = {}
            if "padding_option" in inspect.signature(_interp.interpreter_semantic.make_tensor_descriptor).parameters:
                kw["padding_option"] = arg.padding
            desc = _interp.interpreter_semantic.make_tensor_descriptor(
                base=base, shape=[_interp._implicit_cvt(s) for s in arg.shape], strides=strides,
                block_shape=[tl.constexpr(b) for b in arg.block_shape], **kw)
            if hasattr(desc.handle, "round_f32_to_tf32"):
                desc.handle.round_f32_to_tf32 = getattr(arg, "round_f32_to_tf32", False)
            return desc
        return _interp._implicit_cvt(arg)

    def copy_back(self) -> None:
        for hs in self.space.storages.values():
            if hs.device_storage is not None and hs.written:
                hs.device_storage.copy_(hs.host_storage)


def _normalize_grid(grid, kernel: str) -> Tuple[Tuple[int, int, int], int]:
    if not isinstance(grid, (tuple, list)):
        grid = (grid,)
    try:
        dims = tuple(int(g) for g in grid)
    except (TypeError, ValueError) as e:
        raise UsageError(f"kernel {kernel}: the grid must be a tuple of 1 to 3 integers, got {grid!r}") from e
    if not 1 <= len(dims) <= 3:
        raise UsageError(f"kernel {kernel}: the grid must have 1 to 3 dimensions, got {len(dims)}: {dims}")
    if any(d < 0 for d in dims):
        raise UsageError(f"kernel {kernel}: the grid has a negative dimension: {dims}")
    return dims + (1,) * (3 - len(dims)), len(dims)


def bind_arguments(pyfn, args, kwargs):
    """Bind a launch's arguments to the kernel's parameters like Triton's JIT does.

    Returns:
        (bound arguments in signature order, names of constexpr parameters).
    Raises:
        UsageError: a parameter has no value, or too many positional arguments were given.
    """
    sig = inspect.signature(pyfn)
    params = sig.parameters
    kw = {k: v for k, v in kwargs.items() if k in params}
    try:
        bound = sig.bind(*args, **kw)
    except TypeError as e:
        raise UsageError(f"kernel {pyfn.__name__}: {e} (parameters: {', '.join(params)})") from None
    bound.apply_defaults()
    constexprs = {n for n, p in params.items() if _is_constexpr(p)}
    return dict(bound.arguments), constexprs


def _tensor_index(self) -> int:
    data = np.asarray(self.handle.data)
    if data.size != 1:
        raise TypeError(f"only a scalar can be used as an index, not a block of shape {data.shape}")
    return int(data.reshape(-1)[0])


class _Patched:
    """Triton's language patched for interpretation, with ``builder`` underneath, for a block."""

    def __init__(self, builder):
        self.builder = builder

    def __enter__(self):
        scope = _interp._LangPatchScope()
        for lang in (tl, tl.core):
            _interp._patch_builtin(lang, self.builder, scope)
            _interp._patch_builtin(lang.tensor, self.builder, scope)
            if lang is tl:
                _interp._patch_builtin(lang.math, self.builder, scope)
            _interp._patch_lang_tensor(lang.tensor, scope)
            _interp._patch_lang_core(lang, scope)
            # Triton < 3.7 converts with int(array of shape (1,)), which NumPy >= 2.4 refuses
            scope.set_attr(lang.tensor, "__index__", _tensor_index)
        _interp._patch_builtin(tl.core.tensor_descriptor_base, self.builder, scope)
        self.scope = scope
        sem = _interp.interpreter_semantic
        self.saved = (sem.builder, _interp.interpreter_builder)
        sem.builder = self.builder
        _interp.interpreter_builder = self.builder
        return self

    def __exit__(self, *exc):
        sem = _interp.interpreter_semantic
        sem.builder, _interp.interpreter_builder = self.saved
        self.scope.restore()
        return False


def _kernel_failure(session, launch: Launch, exc: BaseException) -> None:
    """Turn an exception raised while a kernel ran into a finding (or re-raise a tritonkit bug)."""
    tb = exc.__traceback__
    frames = _traceback_frames(tb)
    inner_file = os.path.abspath(_innermost_file(tb))
    if isinstance(exc, NotImplementedError):
        kind = "unsupported"
        msg = f"cannot run on the CPU: {exc}" if str(exc) else f"cannot run on the CPU: {type(exc).__name__}"
    elif inner_file.startswith(_TRITONKIT_DIR + os.sep):
        raise InternalError(f"tritonkit failed while running kernel {launch.kernel}: {exc!r}") from exc
    else:
        kind = "kernel_error"
        msg = f"{type(exc).__name__}: {exc}"
    launch.report(Violation(kind=kind, kernel=launch.kernel, frames=frames, program_id=launch.program_id(),
                            access="", masked=False, lanes=0, message=msg))


def run_launch(session, pyfn, args, kwargs, grid, config: Optional[str] = None) -> LaunchRecord:
    """Run one launch of the ``@triton.jit`` function ``pyfn`` in the checked interpreter.

    Args:
        session: the active :class:`~tritonkit.check.CheckSession`.
        pyfn: the kernel's Python function (``JITFunction.fn``).
        args, kwargs: the launch's arguments as given to ``kernel[grid](...)``; keyword arguments
            that are not parameters (``num_warps``, ``num_stages``, ...) are ignored.
        grid: a tuple of 1-3 program counts or a callable taking the arguments by name.
        config: the autotune config's description, to tag findings with.
    Returns:
        the :class:`LaunchRecord`.
    Raises:
        UsageError: the launch cannot be checked as given.
        CheckAborted: the kernel could not finish (the reason is a finding) or ``stop_on_first``.
    """
    kernel = pyfn.__name__
    bound, constexprs = bind_arguments(pyfn, args, kwargs)
    if callable(grid):
        grid = grid({**kwargs, **bound})
    dims, ndim = _normalize_grid(grid, kernel)
    launch = Launch(session, kernel, dims, ndim, config)
    record = launch.record
    session._begin_launch(launch)
    programs = dims[0] * dims[1] * dims[2]
    if programs == 0:
        record.status = "empty_grid"
        session._end_launch(launch)
        return record
    fn = rewritten(pyfn)
    mapper = _ArgMapper(launch.space)
    start = time.perf_counter()
    timer = _Timer(session.timeout)
    with _lock:
        try:
            with _Patched(launch.builder):
                call_args = {n: (v if n in constexprs else mapper.convert(n, v)) for n, v in bound.items()}
                launch.builder.set_grid_dim(*dims)
                with timer:
                    for x in range(dims[0]):
                        for y in range(dims[1]):
                            for z in range(dims[2]):
                                launch.builder.set_grid_idx(x, y, z)
                                fn(**call_args)
                                record.programs += 1
        except _LaunchTimeout as e:
            record.status = "aborted"
            frames = _traceback_frames(e.__traceback__)
            launch.report(Violation(kind="timeout", kernel=kernel, frames=frames, program_id=launch.program_id(),
                                    access="", masked=False, lanes=0,
                                    message=f"the launch ran longer than {session.timeout:g} s; "
                                            f"stopped in program {launch.program_id()[:ndim]}"))
            raise CheckAborted(f"kernel {kernel} timed out") from None
        except (CheckAborted, UsageError, KeyboardInterrupt):
            record.status = "aborted"
            raise
        except Exception as e:  # the kernel could not run: a finding, then stop the program
            record.status = "aborted"
            _kernel_failure(session, launch, e)
            raise CheckAborted(f"kernel {kernel} could not run in the interpreter") from e
        finally:
            record.seconds = time.perf_counter() - start
            mapper.copy_back()
            session._end_launch(launch)
    return record


class _Timer:
    """Raises :class:`_LaunchTimeout` in the main thread after ``seconds`` (None: never)."""

    def __init__(self, seconds: Optional[float]):
        self.seconds = seconds
        self.active = bool(seconds) and threading.current_thread() is threading.main_thread() \
            and hasattr(signal, "setitimer")

    def _fire(self, signum, frame):
        raise _LaunchTimeout()

    def __enter__(self):
        if self.active:
            self.prev = signal.signal(signal.SIGALRM, self._fire)
            signal.setitimer(signal.ITIMER_REAL, self.seconds)
        return self

    def __exit__(self, *exc):
        if self.active:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self.prev)
        return False
