"""Running one kernel launch in the checked CPU interpreter.

:func:`run_launch` binds the launch's arguments like Triton's JIT does, maps every tensor
argument into a fresh :class:`~tritonkit.check._memory.AddressSpace` (copying tensors on a GPU
to the host, as Triton's interpreter does), runs the grid one program at a time through Triton's
own front end with a :class:`~tritonkit.check._builder.CheckedBuilder` underneath, and copies
written storages back. How programs are executed is kept apart from what is checked: the
builder calls :meth:`Launch.access` for every memory operation and the checks decide.
"""
from __future__ import annotations

import contextvars
import dataclasses
import inspect
import os
import signal
import sys
import threading
import time
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch
import triton
import triton.language as tl
from triton.runtime import interpreter as _interp

from . import _batched, _taint
from ._builder import CheckedBuilder, np_dtype_of
from ._numerics import BITS_TYPES, from_float, to_float, values
from ._memory import AddressSpace, HostStorage, Resolved
from .checks import Access, Check
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


class StaticAssertFailed(CheckAborted):
    """A ``tl.static_assert`` failed: the kernel would not compile for these constexpr values."""


# True while an autotuner tries its configs (a config that fails a static_assert is skipped there)
autotuning: "contextvars.ContextVar[bool]" = contextvars.ContextVar("tritonkit_autotuning", default=False)


def rewritten(pyfn, simt: bool = False):
    """The interpretable version of a ``@triton.jit`` function's Python body (cached).

    Uses Triton's own AST rewriter (``simt``: then the loops made runnable over a batch of programs
    whose trip counts differ, for the batched engine, see :mod:`._simt`), and remembers the code
    object so that findings can be placed on kernel lines by walking the Python stack.
    """
    fn = _REWRITTEN.get((pyfn, simt))
    if fn is None:
        from ._simt import SimtRewriter
        fn = (SimtRewriter if simt else _interp.FunctionRewriter)(pyfn).rewrite_ast()
        _REWRITTEN[(pyfn, simt)] = fn
        KERNEL_CODES[fn.__code__] = pyfn.__name__
    return fn


_TRITON_DIR = os.path.dirname(os.path.abspath(triton.__file__)) + os.sep


def _user_code(code) -> bool:
    """A jitted function of the user's (not one of triton.language's own, such as tl.sum)."""
    return code in KERNEL_CODES and not code.co_filename.startswith(_TRITON_DIR)


def kernel_frames(frame=None, stop=None) -> List[Frame]:
    """Kernel source frames on the current stack, innermost first (triton.language's own jitted
    helpers such as ``tl.sum`` are left out: a finding belongs on the user's line that called them).
    The walk ends at ``stop`` (the frame that started the launch: nothing above it is kernel code)."""
    out = []
    f = frame or sys._getframe(1)
    while f is not None and f is not stop:
        if _user_code(f.f_code):
            out.append(Frame(f.f_code.co_filename, f.f_lineno, f.f_code.co_name))
        f = f.f_back
    return out


def _kernel_frame(frame):
    """The innermost kernel (or jitted helper) frame at or above ``frame``, or None."""
    while frame is not None and not _user_code(frame.f_code):
        frame = frame.f_back
    return frame


def _traceback_frames(tb) -> List[Frame]:
    out = []
    while tb is not None:
        if _user_code(tb.tb_frame.f_code):
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
        engine: which engine ran it: ``"batched"`` (many programs per execution of the kernel's
            body) or ``"sequential"`` (one program at a time: forced, or after ``fallback``).
        fallback: why the batched engine gave the launch to the sequential one, or None.
        batches: executions of the kernel's body for a batch of programs (0 when sequential).
        groups: extra batches made where control flow diverged between programs.
        masked_loops: executions of a loop whose trip count differed between the programs of a
            batch, run once for the batch with an active mask (see ``_simt``).
        flops: floating-point operations the launch's programs executed, counted like Nsight
            Compute counts them: 1 per element of an add, subtract, multiply or divide, 2 of an
            fma, ``2*M*N*K`` per ``tl.dot``; every lane of the block, masked or not (what the
            hardware executes); special functions (exp, sqrt, ...) not counted.
        flops_by_width: the same by the operands' width, as Proton names them: ``{"flops16": n,
            "flops32": m}`` (a ``tl.dot`` on bf16 is ``flops16``).
        bytes_read, bytes_written: bytes the active, in-bounds lanes of loads / stores moved (an
            atomic counts as both); None unless the :class:`~.checks.access_map.AccessMap` check ran.
        unique_bytes_read, unique_bytes_written: bytes of the distinct elements read / written
            (what a perfect cache fetches from DRAM); None where not tracked (see ``AccessMap``).
        access_maps: binned maps of which elements each tensor argument had read and written, by
            which program, and the lanes outside it (``AccessMap``; empty when not kept).
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
    fallback: Optional[str] = None
    batches: int = 0
    groups: int = 0
    masked_loops: int = 0
    flops: int = 0
    flops_by_width: Dict[str, int] = dataclasses.field(default_factory=dict)
    bytes_read: Optional[int] = None
    bytes_written: Optional[int] = None
    unique_bytes_read: Optional[int] = None
    unique_bytes_written: Optional[int] = None
    access_maps: List[dict] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class _Batch:
    """The programs of one execution of the batched engine: their execution indices, linear ids and
    (x, y, z) ids (``(P,)`` arrays each)."""

    order: np.ndarray
    pids: np.ndarray
    coords: Tuple[np.ndarray, np.ndarray, np.ndarray]


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
        # checks the builder calls on values (set by the checks' begin_launch), and their per-launch state
        self.overflow = None
        self.nan = None
        self.race_state = None
        self.uninit_state = None
        self.program_hooks = [c for c in self.checks if type(c).on_program is not Check.on_program]
        self.pid_linear = 0
        self.builder = CheckedBuilder(self)
        self.batch: Optional[_Batch] = None  # the batch of programs running now (batched engine only)
        self.tx = None  # the running transaction of the batched engine (see _engine), or None
        self.uniform_access = False  # the batched engine makes a load with the same addresses in every program
        self._last_batch: Tuple[int, ...] = (0, 0, 0)  # the first program of the last batch run
        self.record = LaunchRecord(kernel=kernel, grid=grid, config=config)
        self.spec_key: tuple = ()
        self.entry_frame = None  # the frame that runs the programs: kernel frames are all below it
        self._site_ids: Dict[tuple, int] = {}
        self._sites: List[Tuple[str, List[Frame]]] = []

    def program_id(self) -> Tuple[int, ...]:
        """The running program's (x, y, z) id (the batch's first program under the batched engine)."""
        if self.batch is not None:
            return tuple(int(c[0]) for c in self.batch.coords)
        idx = getattr(self.builder, "grid_idx", None)
        return tuple(int(i) for i in idx) if idx is not None else self._last_batch

    def execution_index(self, program_id: Sequence[int]) -> int:
        """Where a program (its (x, y, z) id, trailing dims may be left out) comes in the order the
        sequential engine runs them (``z`` fastest): the order findings are made in."""
        x, y, z = (tuple(program_id) + (0, 0, 0))[:3]
        _, gy, gz = self.grid
        return z + gz * (y + gy * x)

    # --- the batched engine ------------------------------------------------------------------------
    def begin_batch(self, order: np.ndarray) -> None:
        """Make the programs with execution indices ``order`` (int64, ``(P,)``) the running batch."""
        from ._engine import batch_order
        pids, coords = batch_order(self, order)
        self.batch = _Batch(order=order, pids=pids, coords=coords)
        self._last_batch = tuple(int(c[0]) for c in coords)
        self.builder.set_batch(pids, coords)
        self.record.batches += 1
        for check in self.program_hooks:
            check.on_program(self)

    def end_batch(self) -> None:
        self.batch = None

    def begin_tx(self, guard) -> None:
        """Start the batched engine's transaction over this launch (``guard``: an :class:`~._engine.Guard`)."""
        from ._engine import Transaction
        self.tx = Transaction(guard)
        self.space.journal = self.tx.undo
        self._tx_start = (self.record.programs, self.record.accesses, self.record.lanes, self.record.batches,
                          self.record.groups, self.record.masked_loops, self.record.flops,
                          dict(self.record.flops_by_width))

    def commit_tx(self) -> None:
        """End the running transaction, releasing its held-back findings (may raise CheckAborted)."""
        from ._engine import flush
        tx, self.tx = self.tx, None
        self.space.journal = None
        if tx is not None:
            flush(self, tx)

    def rollback_tx(self) -> None:
        """Undo everything the running transaction did (memory, checks' state, findings, counts)."""
        tx, self.tx = self.tx, None
        self.space.journal = None
        if tx is not None:
            tx.rollback_to((0, 0, 0))
            r = self.record
            (r.programs, r.accesses, r.lanes, r.batches, r.groups, r.masked_loops, r.flops,
             r.flops_by_width) = self._tx_start

    def count_flops(self, n: int, elem_ty, operands=()) -> None:
        """Add ``n`` floating-point operations on operands of Triton type ``elem_ty`` to the record.

        ``operands`` (the op's input handles) tell the batched engine's uniform values apart: an op
        none of whose operands has a program axis was made once for the whole batch, and counts for
        each of its programs. In a loop whose trip count differs between the programs of a batch
        (``_simt``), only the programs still active count.
        """
        if self.batch is not None:
            programs = int(self.batch.pids.shape[0])
            active = getattr(self.builder, "active", None)
            running = programs if active is None else int(np.count_nonzero(active))
            if not any(getattr(h, "bat", False) for h in operands):
                n *= running
            elif running != programs:
                n = n * running // programs
        r = self.record
        r.flops += n
        key = f"flops{elem_ty.primitive_bitwidth}"
        r.flops_by_width[key] = r.flops_by_width.get(key, 0) + n

    def on_undo(self, fn) -> None:
        """Register ``fn`` to be called if the running transaction is undone (no-op outside one)."""
        if self.tx is not None:
            self.tx.undo.append(fn)

    def by_program(self, res: Resolved, positions: np.ndarray) -> Iterator[Tuple[Tuple[int, ...], np.ndarray]]:
        """Split positions into an access's active lanes (``res`` arrays; int, increasing) by program.

        Yields ``(program id, positions of that program)``; one pair (the running program) outside
        the batched engine.
        """
        if self.batch is None:
            if positions.shape[0]:
                yield self.program_id(), positions
            return
        prog = res.lanes[positions] // res.per
        cuts = np.flatnonzero(prog[1:] != prog[:-1]) + 1
        for lo, hi in zip(np.r_[0, cuts], np.r_[cuts, prog.shape[0]]):
            if hi > lo:
                yield self.program_of(int(self.batch.pids[prog[lo]])), positions[lo:hi]

    def lane_programs(self, res: Resolved, positions: Optional[np.ndarray] = None) -> Union[int, np.ndarray]:
        """The linear program id of active lanes (``positions`` into ``res`` arrays, None for all):
        an int64 array under the batched engine, the running program's id (an int) otherwise."""
        if self.batch is None:
            return self.pid_linear
        lanes = res.lanes if positions is None else res.lanes[positions]
        return self.batch.pids[lanes // res.per]

    def block_programs(self, lanes: np.ndarray) -> Iterator[Tuple[int, Tuple[int, ...], np.ndarray]]:
        """Split a bool array over a block (with the program axis first under the batched engine) by
        program: yields ``(batch index, program id, that program's lanes)`` for programs with a True lane."""
        if self.batch is None:
            if lanes.any():
                yield 0, self.program_id(), lanes
            return
        P = self.batch.pids.shape[0]
        if lanes.ndim == 0 or lanes.shape[0] != P:
            lanes = np.broadcast_to(lanes, (P,) + lanes.shape)
        for b in np.flatnonzero(lanes.reshape(P, -1).any(axis=1)):
            yield int(b), self.program_of(int(self.batch.pids[b])), lanes[b]

    def program_of(self, linear: int) -> Tuple[int, ...]:
        """The (x, y, z) program id of a linear one (``x + gx * (y + gy * z)``), cut to the grid's dims."""
        gx, gy, _ = self.grid
        pid = (linear % gx, (linear // gx) % gy, linear // (gx * gy))
        return pid[: max(1, self.grid_ndim)]

    def begin_program(self, x: int, y: int, z: int) -> None:
        """Make (x, y, z) the running program."""
        self.builder.set_grid_idx(x, y, z)
        self.pid_linear = x + self.grid[0] * (y + self.grid[1] * z)
        for check in self.program_hooks:
            check.on_program(self)

    def site_id(self, op: str) -> int:
        """A small integer for (``op``, the kernel frames of the running operation), for checks that
        remember where an access was made (e.g. the other side of a data race)."""
        key = [op]
        f = sys._getframe(1)
        stop = self.entry_frame
        while f is not None and f is not stop:
            if _user_code(f.f_code):
                key.append((f.f_code, f.f_lineno))
            f = f.f_back
        key = tuple(key)
        sid = self._site_ids.get(key)
        if sid is None:
            sid = self._site_ids[key] = len(self._sites)
            self._sites.append((op, [Frame(c.co_filename, ln, c.co_name) for c, ln in key[1:]]))
        return sid

    def site(self, sid: int) -> Tuple[str, List[Frame]]:
        """The (op, kernel frames innermost first) of a :meth:`site_id`."""
        return self._sites[sid]

    def sentinel_bits(self, elem_ty) -> Optional[int]:
        """The bits an uninitialized element of this Triton type holds while they are tracked, or None."""
        if getattr(self.session, "uninitialized", None) is None:
            return None
        from .checks.uninitialized import sentinel_of_type
        return sentinel_of_type(elem_ty)

    def access(self, op: str, kind: str, addrs: np.ndarray, mask: Optional[np.ndarray], size: int,
               masked: bool, ptrs=None, sem: str = "") -> Resolved:
        """Resolve and check one memory operation; returns the lanes to perform (``res.ok``).

        ``ptrs`` (the address handle) is given to report taints of the address (undefined lanes,
        overflowed offsets); ``sem`` is an atomic's memory semantics.
        """
        res = self.space.resolve(addrs, mask)
        if self.batch is not None:
            P = self.batch.pids.shape[0]
            self.record.accesses += P
            if self.uniform_access:  # made once for the batch: every lane is the first program's
                res.per = max(1, addrs.size)
                self.record.lanes += res.n * P
            else:
                res.per = max(1, addrs.size // P)
                self.record.lanes += res.n
        else:
            self.record.accesses += 1
            self.record.lanes += res.n
        if not self.session.bounds_enforced:
            res.keep(self.space.in_storage(res, size))
        if ptrs is not None and ptrs.tainted:  # causes first: the bad address's origin, then what it hits
            shape = addrs.shape
            if ptrs.undef is not None:
                self.undefined_used(_taint.active(ptrs, "undef", shape, mask), ptrs.undef_at, f"{op} address")
            if ptrs.ovf is not None and self.overflow is not None:
                region = self.space.region_of(res)
                self.overflow.address_used(self, ptrs, shape, mask, op, region.describe() if region else None)
        if self.checks:
            acc = Access(op=op, kind=kind, size=size, masked=masked, shape=addrs.shape, sem=sem)
            for check in self.checks:
                check.on_access(self, acc, res)
        if self.tx is not None and res.n:
            self.tx.guard.access(self, kind, res, size)
        return res

    def here(self) -> List[Frame]:
        """The kernel source frames of the operation running now, innermost first."""
        return kernel_frames(sys._getframe(1), self.entry_frame)

    def undefined_used(self, lanes: Optional[np.ndarray], origin, op: str) -> None:
        """Undefined lanes (``lanes``: bool, None for none) reached ``op`` (a store, a reduction, ...)."""
        if lanes is None:
            return
        where = origin[0].at() if origin else "a masked load"
        for _, pid, mine in self.block_programs(lanes):
            n = int(np.count_nonzero(mine))
            if not n:
                continue
            self.report(Violation(kind="undefined_value", kernel=self.kernel, frames=[], program_id=pid, access=op,
                                  masked=False, lanes=n,
                                  message=f"{op} uses undefined lanes: masked off by the load at {where}, "
                                          "which has no other=",
                                  example=dict(self._example(np.argwhere(mine.reshape(mine.shape or (1,))), pid),
                                               loaded_at=where)))

    def _example(self, lanes: np.ndarray, pid: Optional[Tuple[int, ...]] = None) -> dict:
        """A finding's example: the program's id and the first few lanes (``lanes``: int (n, ndim))."""
        pid = self.program_id() if pid is None else pid
        return {"program_id": list(pid[: max(1, self.grid_ndim)]),
                "lanes": [list(map(int, ix)) for ix in lanes[:_SHOWN_LANES]]}

    # --- debug operations ------------------------------------------------------------------------
    def device_print(self, prefix: str, hex: bool, handles) -> None:
        """``tl.device_print``: one line per element, like the GPU's printf, ``pid (x, y, z) idx (i)``.

        Under the batched engine each program's lines are held back and printed in program order."""
        if self.batch is None:
            sys.stdout.write(self._print_lines(self.program_id(), prefix, hex,
                                               [values(h.data, h.dtype.scalar) for h in handles]))
            return
        P = self.batch.pids.shape[0]
        datas = [values(h.data, h.dtype.scalar) for h in handles]
        active = getattr(self.builder, "active", None)  # a divergent loop's running programs (see _simt)
        for b in range(P):
            if active is not None and not active[b]:
                continue
            pid = tuple(int(c[b]) for c in self.batch.coords)
            mine = [d[b] if getattr(h, "bat", False) else d for d, h in zip(datas, handles)]
            self.tx.prints.append((int(self.batch.order[b]), len(self.tx.prints),
                                   self._print_lines(pid, prefix, hex, mine)))

    def _print_lines(self, program_id, prefix: str, hex: bool, datas) -> str:
        pid = ", ".join(str(i) for i in program_id)
        lines = []
        for k, data in enumerate(datas):
            data = np.asarray(data)
            operand = f" (operand {k})" if len(datas) > 1 else ""
            fmt = _print_format(data.dtype, hex)
            if data.size == 1 and data.ndim <= 1:
                lines.append(f"pid ({pid}) idx (){prefix}{operand}{fmt(data.reshape(-1)[0])}")
                continue
            widths = [len(str(max(n - 1, 0))) for n in data.shape]
            for idx in np.ndindex(data.shape):
                at = ", ".join(str(i).rjust(w) for i, w in zip(idx, widths))
                lines.append(f"pid ({pid}) idx ({at}){prefix}{operand}{fmt(data[idx])}")
        return "\n".join(lines) + "\n"

    def assert_failed(self, cond: np.ndarray, message: str, batched: bool = False) -> None:
        """A ``tl.device_assert`` (or ``assert`` in a kernel) whose condition is false in some lanes
        (``batched``: ``cond`` has the program axis first)."""
        frame = sys._getframe(1)
        text = f"device_assert failed: {message}" if message else "device_assert failed"
        bad = ~cond.astype(bool)
        if self.batch is not None and not batched:  # the same condition in every program of the batch
            bad = np.broadcast_to(bad, (self.batch.pids.shape[0],) + bad.shape)
        for b, pid, mine in self.block_programs(bad):
            failing = np.argwhere(mine.reshape(mine.shape if mine.ndim else (1,)))
            values_at = _assert_values(frame, ~mine, failing[:_SHOWN_LANES],
                                       b if self.batch is not None else None)
            self.report(Violation(kind="assert_failed", kernel=self.kernel, frames=kernel_frames(frame),
                                  program_id=pid, access="device_assert", masked=False, lanes=len(failing),
                                  message=text, example=dict(self._example(failing, pid), values=values_at)))

    def report(self, v: Violation) -> None:
        """Record a violation at the current program and kernel line (held back until the running
        transaction of the batched engine commits)."""
        v.kernel = self.kernel
        if not v.frames:
            v.frames = kernel_frames(sys._getframe(1))
        if not v.program_id:
            v.program_id = self.program_id()
        v.config = self.config
        if self.tx is not None:
            self.tx.reports.append((self.execution_index(v.program_id), len(self.tx.reports), v))
            return
        self.session._add_violation(v, self, frame=_kernel_frame(sys._getframe(1)) if self.session.pdb else None)


_SHOWN_LANES = 8


def _print_format(dtype: np.dtype, hex: bool):
    """How the GPU's printf shows one value: ``%d``/``%u`` for integers, ``%f`` for floats, hex bits."""
    if hex:
        width = dtype.itemsize * 2
        if dtype.kind == "f":
            return lambda v: f"0x{int(np.asarray(v).view(f'u{dtype.itemsize}')):0{width}x}"
        return lambda v: f"0x{int(v) & ((1 << (8 * dtype.itemsize)) - 1):0{width}x}"
    if dtype.kind == "f":
        return lambda v: f"{float(v):f}"
    if dtype.kind == "b":
        return lambda v: str(int(bool(v)))
    return lambda v: str(int(v))


def _assert_values(frame, cond: np.ndarray, failing: np.ndarray, batch: Optional[int] = None) -> Dict[str, list]:
    """The values, at the failing lanes, of the kernel variables named in the assert's condition
    (``batch``: the program's index in the batch, whose slice of batched variables is read)."""
    import ast
    import linecache

    frame = _kernel_frame(frame)
    if frame is None or not len(failing):
        return {}
    text = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
    try:
        tree = ast.parse(text.rstrip(",").rstrip("\\"))
    except SyntaxError:
        return {}
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args:
            for sub in ast.walk(node.args[0]):
                if isinstance(sub, ast.Name) and sub.id not in names:
                    names.append(sub.id)
            break
    out: Dict[str, list] = {}
    for name in names:
        val = frame.f_locals.get(name)
        if not isinstance(val, tl.tensor) or not hasattr(val.handle, "data"):
            continue
        data = values(val.handle.data, val.dtype)
        if batch is not None and getattr(val.handle, "bat", False):
            data = data[batch]
        try:
            data = np.broadcast_to(data.reshape(data.shape or (1,)), cond.shape or (1,))
        except ValueError:
            continue
        out[name] = [data[tuple(ix)].item() for ix in failing]
    return out


def _dtype_name(t: torch.Tensor) -> str:
    return str(t.dtype).replace("torch.", "")


def scalar_argument(value, annotation_type: str = "", specialize: bool = True):
    """A scalar kernel argument as the compiled kernel receives it.

    Triton's JIT types a scalar by its value: ``bool`` -> int1, ``int`` -> int32 when it fits, else
    int64 (uint64 above 2**63), ``float`` -> fp32; the int ``1`` is specialized to the constexpr
    ``1`` unless the parameter is in ``do_not_specialize``; an annotated parameter (``n: tl.int64``)
    takes its annotation's type. Returns a ``tl.tensor`` of that type, or the plain value for
    constexpr specializations and values that are not numbers.

    Raises:
        UsageError: an integer that does not fit in 64 bits.
    """
    if isinstance(value, np.generic):
        value = value.item()
    if not isinstance(value, (bool, int, float)):
        return value
    try:
        name = annotation_type.lstrip("*") if annotation_type else triton.runtime.jit.mangle_type(value, specialize)
    except Exception as e:  # e.g. an int over 64 bits
        raise UsageError(f"scalar argument {value!r} cannot be passed to a kernel: {e}") from None
    if name == "constexpr":
        return value
    ty = tl.str_to_ty(name, None)
    if ty.is_floating() and ty.name not in ("fp32", "fp64", "fp16"):
        data = from_float(np.array([float(value)], dtype=np.float64), ty)
    else:
        data = np.array([value]).astype(np_dtype_of(ty))
    return tl.tensor(_interp.TensorHandle(data, ty), ty)


def scalar_specs(jit, pyfn) -> Dict[str, Tuple[str, bool]]:
    """Per parameter of a kernel: (annotated type or "", whether ints are value-specialized)."""
    dns = list(getattr(jit, "do_not_specialize", None) or getattr(jit, "kwargs", {}).get("do_not_specialize")
               or [])
    out = {}
    for i, (name, p) in enumerate(inspect.signature(pyfn).parameters.items()):
        off = i in dns or name in dns
        try:
            ann = triton.runtime.jit.KernelParam(i, p, off, False).annotation_type
        except Exception:  # pragma: no cover - an annotation Triton itself cannot read
            ann = ""
        out[name] = (ann if isinstance(ann, str) else "", not off)
    return out


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
            hs = HostStorage(buf=buf_t.numpy(), device_storage=dev, host_storage=host, key=key + (st.nbytes(),))
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

    def convert(self, name: str, arg, spec: Tuple[str, bool] = ("", True)):
        if hasattr(arg, "data_ptr") and hasattr(arg, "untyped_storage") or \
                isinstance(arg, triton.runtime.jit.TensorWrapper):
            return self.pointer(name, arg)
        if isinstance(arg, tuple):
            items = [self.convert(f"{name}[{i}]", a, spec) for i, a in enumerate(arg)]
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
        return scalar_argument(arg, *spec)

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


def _tensor_array(self, dtype=None, copy=None):
    data = values(self.handle.data, self.dtype)
    return data if dtype is None else data.astype(dtype)


def _spec_item(v):
    """What a compiled kernel is specialized on for one argument: its type, or a constexpr's value."""
    if isinstance(v, tl.tensor):
        return str(v.type)
    if isinstance(v, tl.tensor_descriptor_base if hasattr(tl, "tensor_descriptor_base") else ()):
        return "desc"
    try:
        hash(v)
        return ("constexpr", v)
    except TypeError:
        return ("constexpr", repr(v))


def _unstale(scope) -> None:
    """Put back, for this scope, Triton builtins that an earlier plain-interpreter launch left
    patched (Triton 3.6 does not restore ``triton.language.core`` after kernels that call jitted
    functions such as ``tl.max``): the stale wrapper is bound to that launch's builder, and
    re-patching skips what is no longer a builtin. Triton's wrapper keeps the original as its
    ``member`` keyword default."""
    for pkg in (tl, tl.core, tl.math, tl.tensor):
        for name, member in list(vars(pkg).items()):
            if getattr(member, "__name__", "") != "<lambda>" or getattr(member, "__module__", "") != _interp.__name__:
                continue
            original = (getattr(member, "__kwdefaults__", None) or {}).get("member")
            if original is not None and tl.core.is_builtin(original):
                scope.set_attr(pkg, name, original)


class _Patched:
    """Triton's language patched for interpretation, with ``builder`` underneath, for a block."""

    def __init__(self, builder):
        self.builder = builder

    def __enter__(self):
        scope = _interp._LangPatchScope()
        _unstale(scope)
        for lang in (tl, tl.core):
            _interp._patch_builtin(lang, self.builder, scope)
            _interp._patch_builtin(lang.tensor, self.builder, scope)
            if lang is tl:
                _interp._patch_builtin(lang.math, self.builder, scope)
            _interp._patch_lang_tensor(lang.tensor, scope)
            _interp._patch_lang_core(lang, scope)
            # Triton < 3.7 converts with int(array of shape (1,)), which NumPy >= 2.4 refuses; under the
            # batched engine a value that differs between programs splits the batch (see _batched)
            scope.set_attr(lang.tensor, "__index__", _batched.tensor_index)
            scope.set_attr(lang.tensor, "__bool__", _batched.tensor_bool)
            scope.set_attr(lang.tensor, "T", property(_batched.tensor_transpose))
            # np.asarray(x) of a kernel tensor is its values (in pdb, in device-side debugging)
            scope.set_attr(lang.tensor, "__array__", _tensor_array)
        _interp._patch_builtin(tl.core.tensor_descriptor_base, self.builder, scope)
        cuda_libdevice = _cuda_libdevice()
        if cuda_libdevice is not None:  # called directly: tl.extra.cuda.libdevice.tanh(x)
            _interp._patch_builtin(cuda_libdevice, self.builder, scope)
        for lang in (tl, tl.core):
            scope.set_attr(lang, "reduce", _reduce)
            scope.set_attr(lang, "associative_scan", _scan)
        for lang in (tl, tl.core):
            scope.set_attr(lang, "static_print", _static_print)
            scope.set_attr(lang, "static_assert", _static_assert)
        _taint.install(scope)
        scope.set_attr(_interp.TensorHandle, "bat", False)  # values with a program axis (batched engine)
        self.errstate = np.errstate(all="ignore")  # the GPU raises no floating-point exceptions
        self.errstate.__enter__()
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
        self.errstate.__exit__(*exc)
        return False


def _cuda_libdevice():
    try:
        from triton.language.extra.cuda import libdevice
    except ImportError:  # pragma: no cover
        return None
    return libdevice


# --- reductions and scans of 16- and 8-bit floats ---------------------------------------------------
_LOW_FLOATS = BITS_TYPES | {"fp16"}


_FAST_COMBINE_NAMES = ("_sum_combine", "_prod_combine", "_elementwise_max", "_elementwise_min",
                       "_argmin_combine_tie_break_left", "_argmin_combine_tie_break_fast",
                       "_argmax_combine_tie_break_left", "_argmax_combine_tie_break_fast")
# triton.language.standard's combine functions that Triton's ReduceOps/ScanOps compute with numpy
_FAST_COMBINES = tuple(getattr(tl.standard, n) for n in _FAST_COMBINE_NAMES if hasattr(tl.standard, n))
_SUM_COMBINE = getattr(tl.standard, "_sum_combine", None)


def _widen(t):
    """A tl.tensor of bf16/fp16/fp8 values as an fp32 tensor (exact)."""
    if not isinstance(t, tl.tensor) or t.dtype.name not in _LOW_FLOATS:
        return t
    data = to_float(np.asarray(t.handle.data), t.dtype)
    ty = tl.block_type(tl.float32, list(t.type.shape)) if t.type.is_block() else tl.float32
    h = _interp.TensorHandle(data, tl.float32)
    h.bat = _batched.is_batched(t.handle)
    return tl.tensor(h, ty)


def _narrow(t, like):
    """An fp32 result of a widened reduction rounded back to the input's type."""
    if not isinstance(t, tl.tensor) or t.dtype != tl.float32:
        return t
    dt = like.dtype
    data = from_float(np.asarray(t.handle.data), dt)
    ty = tl.block_type(dt, list(t.type.shape)) if t.type.is_block() else dt
    h = _interp.TensorHandle(data, dt)
    h.bat = _batched.is_batched(t.handle)
    return tl.tensor(h, ty)


def _widened(op, input):
    """Run a reduce/scan op; the built-in combines (sum, max, argmax, ...) of bf16/fp16/fp8 values run
    on exact fp32 copies and round once at the end (numpy would otherwise add raw bf16 bits)."""
    items = input if isinstance(input, tuple) else (input,)
    launch = _current_launch()
    for t in items:
        h = getattr(t, "handle", None)
        if launch is not None and getattr(h, "undef", None) is not None:
            name = "reduction" if isinstance(op, _interp.ReduceOps) else "scan"
            launch.undefined_used(np.broadcast_to(h.undef, np.shape(h.data)), h.undef_at, name)
    res = _reduce_or_scan(op, input, items)
    if launch is not None and op.combine_fn is _SUM_COMBINE and isinstance(items[0], tl.tensor) \
            and items[0].dtype.is_floating():  # a float sum: one add per element (custom combines count their ops)
        launch.count_flops(int(np.size(items[0].handle.data)), items[0].dtype, (items[0].handle,))
    if launch is not None and launch.nan is not None:
        outs = res if isinstance(res, tuple) else (res,)
        fn_name = getattr(getattr(op.combine_fn, "fn", op.combine_fn), "__name__", "reduction")
        name = fn_name.strip("_").replace("_combine", "").replace("elementwise_", "")  # _sum_combine -> sum
        for o, i in zip(outs, items):
            launch.nan.reduced(launch, name, o, i)
    return res


def _reduce_or_scan(op, input, items):
    """Run a reduce/scan op, with 16- and 8-bit floats widened for the built-in combines."""
    first = items[0]
    if op.combine_fn not in _FAST_COMBINES or not isinstance(first, tl.tensor) or \
            first.dtype.name not in _LOW_FLOATS:
        return op.apply(input)
    res = op.apply(tuple(_widen(t) for t in items))
    out = tuple(_narrow(r, first) for r in res)
    return out if isinstance(input, tuple) else out[0]


def _reduce(input, axis, combine_fn, keep_dims=False, **kwargs):
    return _widened(_batched.BatchedReduce(axis, combine_fn, keep_dims), input)


def _scan(input, axis, combine_fn, reverse=False, **kwargs):
    return _widened(_batched.BatchedScan(axis, combine_fn, reverse), input)


# --- compile-time debug operations: once per specialization and call site ---------------------------
def _current_launch() -> Optional["Launch"]:
    return getattr(_interp.interpreter_semantic.builder, "launch", None)


def _site_key(site_frame):
    """(specialization, call site) of a static_print/static_assert call, or None outside a launch."""
    launch = _current_launch()
    if launch is None:
        return None, None
    frames = kernel_frames(site_frame)
    site = (frames[0].file, frames[0].line) if frames else (site_frame.f_code.co_filename, site_frame.f_lineno)
    return launch.session.static_sites, (launch.spec_key, site)


def _first_time(site_frame) -> bool:
    """Whether this static_print call site runs for the first time in this specialization."""
    seen, key = _site_key(site_frame)
    if seen is None:
        return True
    if key in seen:
        return False
    seen.add(key)
    return True


def _compile_time_value(v):
    """What ``print`` shows of a value at compile time: a tensor's type and shape, a constexpr's value."""
    if isinstance(v, tl.tensor):
        return f"{v.dtype}[{', '.join(str(int(s)) for s in v.shape)}]"
    if isinstance(v, tl.constexpr):
        return v.value
    return v


def _static_print(*values, sep=" ", end="\n", file=None, flush=False):
    if _first_time(sys._getframe(1)):
        print(*(_compile_time_value(v) for v in values), sep=sep, end=end, file=file, flush=flush)


def _static_assert(cond, msg="", *args, **kwargs):
    seen, key = _site_key(sys._getframe(1))
    if seen is not None and key in seen:  # held already for this specialization: a compile-time fact
        return
    value = cond.value if isinstance(cond, tl.constexpr) else cond
    if isinstance(value, tl.tensor):
        value = bool(np.asarray(value.handle.data).all())
    if value:
        if seen is not None:
            seen.add(key)
        return
    msg = msg.value if isinstance(msg, tl.constexpr) else msg
    launch = _current_launch()
    text = f"static_assert failed: {msg}" if msg else "static_assert failed"
    if launch is not None and not autotuning.get():
        launch.report(Violation(kind="assert_failed", kernel=launch.kernel, frames=kernel_frames(sys._getframe(1)),
                                program_id=launch.program_id(), access="static_assert", masked=False, lanes=0,
                                message=text))
    raise StaticAssertFailed(text)


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
    v = Violation(kind=kind, kernel=launch.kernel, frames=frames, program_id=launch.program_id(),
                  access="", masked=False, lanes=0, message=msg)
    v.config = launch.config
    last = None
    while tb is not None:  # the innermost kernel frame of the traceback, for --pdb
        if _user_code(tb.tb_frame.f_code):
            last = tb.tb_frame
        tb = tb.tb_next
    launch.session._add_violation(v, launch, frame=last if launch.session.pdb else None)


def run_launch(session, pyfn, args, kwargs, grid, config: Optional[str] = None, jit=None) -> LaunchRecord:
    """Run one launch of the ``@triton.jit`` function ``pyfn`` in the checked interpreter.

    Args:
        session: the active :class:`~tritonkit.check.CheckSession`.
        pyfn: the kernel's Python function (``JITFunction.fn``).
        args, kwargs: the launch's arguments as given to ``kernel[grid](...)``; keyword arguments
            that are not parameters (``num_warps``, ``num_stages``, ...) are ignored.
        grid: a tuple of 1-3 program counts or a callable taking the arguments by name.
        config: the autotune config's description, to tag findings with.
        jit: the ``JITFunction`` launched (for ``do_not_specialize`` and annotations), if known.
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
    specs = scalar_specs(jit, pyfn)
    mapper = _ArgMapper(launch.space)
    start = time.perf_counter()
    timer = _Timer(session.timeout)
    with _lock:
        try:
            with _Patched(launch.builder):
                call_args = {n: (v if n in constexprs else mapper.convert(n, v, specs.get(n, ("", True))))
                             for n, v in bound.items()}
                launch.spec_key = (fn.__code__, tuple(_spec_item(v) for v in call_args.values()))
                launch.builder.set_grid_dim(*dims)
            launch.entry_frame = sys._getframe()
            with timer:
                # each engine patches the language with its own builder (Triton 3.6 keeps the first
                # patch of a nested scope)
                if not _run_batched(launch, fn, call_args, pyfn):
                    with _Patched(launch.builder):
                        _run_sequential(launch, fn, call_args)
        except _LaunchTimeout as e:
            record.status = "aborted"
            frames = _traceback_frames(e.__traceback__)
            launch.report(Violation(kind="timeout", kernel=kernel, frames=frames, program_id=launch.program_id(),
                                    access="", masked=False, lanes=0,
                                    message=f"the launch ran longer than {session.timeout:g} s; "
                                            f"stopped in program {launch.program_id()[:ndim]}"))
            raise CheckAborted(f"kernel {kernel} timed out") from None
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
            mapper.copy_back()
            session._end_launch(launch)
    return record


_DEBUGGER_CALLS = ("breakpoint(", "set_trace(")
_debugs: Dict[Any, bool] = {}


def _calls_debugger(pyfn) -> bool:
    """Whether a kernel's source calls ``breakpoint()`` or ``pdb.set_trace()`` (cached)."""
    got = _debugs.get(pyfn)
    if got is None:
        try:
            src = inspect.getsource(pyfn)
        except (OSError, TypeError):
            src = ""
        got = _debugs[pyfn] = any(c in src for c in _DEBUGGER_CALLS)
    return got


def _debugged(launch: Launch, pyfn) -> Optional[str]:
    """Why a debugger needs this launch run one program at a time, or None."""
    session = launch.session
    if session.pdb:
        return "--pdb: the debugger stops in one program"
    if _calls_debugger(pyfn):
        return "the kernel calls breakpoint(): the debugger stops in one program"
    return None


def _run_batched(launch: Launch, fn, call_args, pyfn) -> bool:
    """Run the launch's programs with the batched engine; returns whether it ran them all (if not,
    it undid what it did, and the launch runs one program at a time)."""
    from ._batched import BatchedBuilder
    from ._engine import DEFAULT_BATCH_MEMORY, run_batched

    launch.record.engine = "sequential"
    if getattr(launch.session, "engine", "auto") == "sequential":
        return False
    launch.record.fallback = _debugged(launch, pyfn)
    if launch.record.fallback is not None:
        return False
    sequential = launch.builder
    launch.builder = BatchedBuilder(launch)
    launch.builder.set_grid_dim(*launch.grid)
    try:
        with _Patched(launch.builder):
            why = run_batched(launch, rewritten(pyfn, simt=True), call_args,
                              getattr(launch.session, "batch_memory", None) or DEFAULT_BATCH_MEMORY)
    finally:
        launch.builder = sequential
        launch.batch = None
    launch.record.engine = "batched" if why is None else "sequential"
    launch.record.fallback = why
    return why is None


def _run_sequential(launch: Launch, fn, call_args) -> None:
    """Run every program, one at a time (``z`` fastest)."""
    _, gy, gz = launch.grid
    total = launch.grid[0] * gy * gz
    for e in range(total):
        launch.begin_program(e // (gy * gz), (e // gz) % gy, e % gz)
        fn(**call_args)
        launch.record.programs += 1


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
