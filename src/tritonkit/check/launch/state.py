"""The state of one launch while it runs: its address space, its checks' hooks, which program (or
batch of programs) is running, its counters, and where findings go.

Everything that runs a launch (the engines, the builders, the checks) works through a
:class:`Launch`; it calls none of them back. The procedure that makes and runs one is
:func:`tritonkit.check.launch.run.run_launch`.
"""
from __future__ import annotations

import dataclasses
import os
import sys
from typing import Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from ..engine.cooperative import YIELD_POLLS
from ..errors import LaunchStalled, Unbatchable
from ..findings import Frame, Violation
from ..interp.builder import Access, CheckedBuilder
from ..interp.kernels import kernel_frame, kernel_frames, user_code
from ..memory import AddressSpace, Resolved
from ..results import LaunchRecord
from . import debug_ops


@dataclasses.dataclass
class Batch:
    """The programs of one execution of the batched engine: their execution indices, linear ids and
    (x, y, z) ids (``(P,)`` arrays each)."""

    order: np.ndarray
    pids: np.ndarray
    coords: Tuple[np.ndarray, np.ndarray, np.ndarray]


def _env_on(name: str, default: str) -> bool:
    return os.environ.get(name, default).strip().lower() not in ("", "0", "false", "off", "no")


def fp_fusion_enabled(requested: Optional[bool] = None) -> bool:
    """Whether Triton's compiler contracts a float multiply and the add or subtract of its product
    into one fma for a launch given ``enable_fp_fusion=requested`` (None: not given): never under
    ``TRITON_FORCE_DISABLE_FP_FUSION``, else as requested, else Triton's default
    (``triton.knobs.language.default_fp_fusion`` where this Triton has the knobs, else
    ``TRITON_DEFAULT_FP_FUSION``; on unless set to 0)."""
    import triton
    language = getattr(getattr(triton, "knobs", None), "language", None)
    force_off = getattr(language, "force_disable_fp_fusion", None)
    if bool(force_off) if force_off is not None else _env_on("TRITON_FORCE_DISABLE_FP_FUSION", "0"):
        return False
    if requested is not None:
        return bool(requested)
    default = getattr(language, "default_fp_fusion", None)
    return bool(default) if default is not None else _env_on("TRITON_DEFAULT_FP_FUSION", "1")


class Launch:
    """One launch of a kernel while it runs in the checked interpreter.

    Args:
        session: the :class:`~tritonkit.check.CheckSession` (its checks, hooks and options).
        pyfn: the kernel's Python function (``JITFunction.fn``).
        grid: (x, y, z) program counts.
        ndim: how many grid dims the launch gave (1 to 3): program ids in findings have that many.
        config: the autotune config's description, or None.

    Attributes:
        space: the launch's :class:`~tritonkit.check.memory.AddressSpace`.
        checks, hooks: the session's checks and their hooks by event.
        builder: the builder under the language now (the batched engine swaps in its own).
        batch: the batch of programs running now (batched engine), or None.
        pid_linear: the running program's linear id (one program at a time).
        tx: the batched engine's running :class:`~tritonkit.check.engine.transaction.Transaction`, or None.
        uniform_access: the batched engine is making a load once for every program of the batch.
        record: the :class:`~tritonkit.check.LaunchRecord` being filled.
        spec_key: what the compiled kernel would be specialized on (set once the arguments are bound).
        work_key: ``spec_key`` with the values of the launch's integer scalar arguments: what a
            program's work depends on beyond its specialization (a row count, rows per program, the
            trip counts they give), the key of what a program cost in an earlier launch.
        entry_frame: the frame that started the programs: kernel frames are all below it.
        fp_fusion: whether the compiler would contract a float multiply and the add or subtract of
            its product into one fma (Triton's ``enable_fp_fusion``: the launch's keyword, else
            ``TRITON_DEFAULT_FP_FUSION``, else on).
    """

    def __init__(self, session, pyfn, grid: Tuple[int, int, int], ndim: int, config: Optional[str]):
        self.session = session
        self.pyfn = pyfn
        self.kernel = pyfn.__name__
        self.grid = grid
        self.grid_ndim = ndim
        self.config = config
        self.space = AddressSpace()
        self.checks = session.checks
        self.hooks = session.hooks
        self.pid_linear = 0
        self.builder = CheckedBuilder(self)
        self.batch: Optional[Batch] = None
        self.tx = None
        self.uniform_access = False
        #: while this process runs its share of a launch shared out between processes: (programs run
        #: before the share, the share's programs, the programs the shares run), for the progress
        self.share: Optional[Tuple[int, int, int]] = None
        self._last_batch: Tuple[int, ...] = (0, 0, 0)  # the first program of the last batch run
        self.record = LaunchRecord(kernel=self.kernel, grid=grid, config=config)
        self.spec_key: tuple = ()
        self.work_key: tuple = ()
        self.entry_frame = None
        self.fp_fusion = fp_fusion_enabled()
        self.found = False  # a finding was reported for this launch
        self.stall_polls = getattr(session, "stall_polls", 0)
        self._poll = (None, -1, 0)  # (what was polled, memory changes then, polls since)
        #: the sequential engine's :class:`~tritonkit.check.engine.cooperative.Cooperative` while it
        #: runs: a program that waits for another gives way to it
        self.scheduler = None
        self._site_ids: Dict[tuple, int] = {}
        self._sites: List[Tuple[str, List[Frame]]] = []

    def release(self) -> None:
        """The launch ended: drop what it held (its address space with the tensors' memory, its
        builder, the frame that started it) so that they are freed now, not at the next cyclic
        garbage collection or never (a frame keeps its callers' tensors alive); the record stays.
        The address space's pointer tables refer back to it through the argument mapper: that cycle
        is cut here, or the storages it maps would wait for a collection (for the rest of the
        session, which leaves what it found out of the collector's passes)."""
        if self.space is not None:
            self.space.foreign = None
        self.space = None
        self.builder = None
        self.batch = None
        self.tx = None
        self.entry_frame = None
        self._sites.clear()
        self._site_ids.clear()

    # --- which program runs ----------------------------------------------------------------------
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

    def program_of(self, linear: int) -> Tuple[int, ...]:
        """The (x, y, z) program id of a linear one (``x + gx * (y + gy * z)``), cut to the grid's dims."""
        gx, gy, _ = self.grid
        pid = (linear % gx, (linear // gx) % gy, linear // (gx * gy))
        return pid[: max(1, self.grid_ndim)]

    def begin_program(self, x: int, y: int, z: int) -> None:
        """Make (x, y, z) the running program (one program at a time)."""
        self.builder.set_grid_idx(x, y, z)
        self.pid_linear = x + self.grid[0] * (y + self.grid[1] * z)
        self.space.new_batch()
        for hook in self.hooks.program:
            hook(self)

    def program_state(self) -> tuple:
        """What makes the running program (one program at a time) the running one: its ids, the
        poll it repeats, the builder's state inside the operation it is in, and each check's
        per-program state (:meth:`~tritonkit.check.checks.base.Check.suspend_program`). Taken when
        the program gives way to others and handed back to :meth:`resume_program` when it runs again
        (see :mod:`tritonkit.check.engine.cooperative`)."""
        b = self.builder
        return (self.pid_linear, self._poll, tuple(getattr(b, n) for n in b.PROGRAM_STATE),
                [c.suspend_program(self) for c in self.checks])

    def resume_program(self, state: tuple) -> None:
        """Make the program whose :meth:`program_state` is ``state`` the running one again."""
        self.pid_linear, self._poll, kept, checks = state
        b = self.builder
        for name, value in zip(b.PROGRAM_STATE, kept):
            setattr(b, name, value)
        self.space.new_batch()
        for check, saved in zip(self.checks, checks):
            check.resume_program(self, saved)

    def begin_batch(self, order: np.ndarray) -> None:
        """Make the programs with execution indices ``order`` (int64, ``(P,)``: the order the
        sequential engine runs them, ``z`` fastest) the running batch."""
        gx, gy, gz = self.grid
        x = order // (gy * gz)
        y = (order // gz) % gy
        z = order % gz
        pids = x + gx * (y + gy * z)
        coords = (x.astype(np.int32), y.astype(np.int32), z.astype(np.int32))
        self.batch = Batch(order=order, pids=pids, coords=coords)
        self.space.new_batch()
        self._last_batch = tuple(int(c[0]) for c in coords)
        self.builder.set_batch(pids, coords)
        self.record.batches += 1
        for hook in self.hooks.program:
            hook(self)

    def end_batch(self) -> None:
        """No batch runs now."""
        self.batch = None
        self.space.new_batch()

    # --- splitting lanes by program --------------------------------------------------------------
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

    # --- what the builder calls ------------------------------------------------------------------
    def access(self, acc: Access, addrs: Optional[np.ndarray], mask: Optional[np.ndarray], ptrs=None) -> Resolved:
        """Resolve and check one memory operation ``acc`` (its ``addrs``: uint64 virtual addresses of
        the block's shape, or None where ``ptrs`` is a pointer block whose addresses are not made yet,
        :class:`~tritonkit.check.interp.addresses.LazyAddresses`; ``mask``: bool, broadcastable, None
        for every lane); returns the lanes to perform (``res.ok``).

        ``ptrs`` (the address handle) is given so that the address hooks see its lane taints
        (undefined lanes, overflowed offsets).
        """
        if acc.kind != "store" and (ptrs.offsets.size if addrs is None else addrs.size) <= 1024:
            # a poll (a spin on a flag or a lock reads a few elements), before anything of it is
            # done: a program that gives way here makes it, hooks included, once it runs again
            self._watch_poll(acc, ptrs.data if addrs is None else addrs, mask)
        if addrs is None:  # an unmade pointer block (interp.addresses.LazyAddresses): from its operands
            res = self.space.resolve_sum(ptrs.base, ptrs.offsets, ptrs.size, mask)
            if res is None:
                addrs = ptrs.data
        if addrs is not None:
            res = self.space.resolve(addrs, mask)
        nlanes = ptrs.offsets.size if addrs is None else addrs.size
        if self.batch is not None:
            P = self.batch.pids.shape[0]
            self.record.accesses += P
            if self.uniform_access:  # made once for the batch: every lane is the first program's
                res.per = max(1, nlanes)
                self.record.lanes += res.n * P
            else:
                res.per = max(1, nlanes // P)
                self.record.lanes += res.n
        else:
            self.record.accesses += 1
            self.record.lanes += res.n
        hooks = self.hooks
        if not hooks.in_bounds:  # the safety net: nothing outside a storage is ever touched
            res.keep(self.space.in_storage(res, acc.size))
        if ptrs is not None and ptrs.tainted:  # causes first: the bad address's origin, then what it hits
            for hook in hooks.address:
                hook(self, acc, ptrs, mask, res)
        for hook in hooks.access:
            hook(self, acc, res)
        if self.tx is not None and res.n:
            self.tx.on_access(self, acc.kind, res, acc.size)
        return res

    def _watch_poll(self, acc: Access, addrs: np.ndarray, mask: Optional[np.ndarray]) -> None:
        """Count how often the running program (or batch) makes the same load or atomic at the same
        addresses while no write changes memory. A program that polls so (an atomic or a volatile
        load) :data:`~tritonkit.check.engine.cooperative.YIELD_POLLS` times waits for another
        program: it gives way to the others (see :mod:`tritonkit.check.engine.cooperative`; a batch
        raises :class:`Unbatchable`, and the launch runs one program at a time). Past
        ``stall_polls`` no other program can change memory: raise :class:`LaunchStalled`."""
        who = self.pid_linear if self.batch is None else self.batch.pids.tobytes()
        what = (acc.op, who, addrs.tobytes())
        seen, changes, polls = self._poll
        if what != seen or changes != self.space.changes:
            self._poll = (what, self.space.changes, 1)
            return
        polls += 1
        self._poll = (seen, changes, polls)
        limit = self.stall_polls
        spin = acc.kind == "atomic" or acc.volatile
        op = "volatile load" if acc.op == "load" and acc.volatile else acc.op
        if spin and polls == max(2, min(YIELD_POLLS, limit) if limit else YIELD_POLLS):  # before the stall
            if self.batch is not None:
                raise Unbatchable(f"programs spin on memory ({op} of the same addresses with nothing "
                                  f"written): they take turns one at a time")
            if self.scheduler is not None and self.scheduler.give_way(acc, addrs, mask):
                return
        if limit and polls >= limit:
            here = self.here()
            at = here[0].at() if here else "?"
            said = (f"program {self.program_id()[: max(1, self.grid_ndim)]} made the same {op} at {at} "
                    f"{polls} times while nothing wrote to memory")
            if spin and self.scheduler is not None:
                raise LaunchStalled(
                    f"{said}, and no other program can run to change it: {self.scheduler.waiting()}. It waits for a "
                    f"value no program writes (a deadlock), or one that a program which cannot start "
                    f"would write (on a GPU too, such a kernel hangs)")
            raise LaunchStalled(
                f"{said}: it waits for a value another program would write, and a plain load is not a poll "
                f"here: programs give way to each other only at atomics and volatile loads "
                f"(tl.load(..., volatile=True), which a spin on a GPU needs too)")

    def count_flops(self, n: int, elem_ty, operands=()) -> None:
        """Add ``n`` floating-point operations on operands of Triton type ``elem_ty`` to the record.

        ``operands`` (the op's input handles) tell the batched engine's uniform values apart: an op
        none of whose operands has a program axis was made once for the whole batch, and counts for
        each of its programs. In a loop whose trip count differs between the programs of a batch
        (see :mod:`tritonkit.check.interp.simt`), only the programs still active count.
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

    def device_print(self, prefix: str, hex: bool, handles) -> None:
        """``tl.device_print`` (see :func:`~.debug_ops.device_print`)."""
        debug_ops.device_print(self, prefix, hex, handles)

    def assert_failed(self, cond: np.ndarray, message: str, batched: bool = False) -> None:
        """A ``tl.device_assert`` false in some lanes (see :func:`~.debug_ops.assert_failed`)."""
        debug_ops.assert_failed(self, sys._getframe(1), cond, message, batched)

    # --- what the checks call --------------------------------------------------------------------
    def on_undo(self, fn) -> None:
        """Register ``fn`` to be called if the running transaction is undone (no-op outside one)."""
        if self.tx is not None:
            self.tx.undo.append(fn)

    def here(self) -> List[Frame]:
        """The kernel source frames of the operation running now, innermost first."""
        return kernel_frames(sys._getframe(1), self.entry_frame)

    def site_id(self, op: str) -> int:
        """A small integer for (``op``, the kernel frames of the running operation), for checks that
        remember where an access was made (e.g. the other side of a data race)."""
        key = [op]
        f = sys._getframe(1)
        stop = self.entry_frame
        while f is not None and f is not stop:
            if user_code(f.f_code):
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

    def example(self, lanes: np.ndarray, pid: Optional[Tuple[int, ...]] = None) -> dict:
        """A finding's example: the program's id and its first few lanes (``lanes``: int ``(n, ndim)``
        indices into the block)."""
        pid = self.program_id() if pid is None else pid
        return {"program_id": list(pid[: max(1, self.grid_ndim)]),
                "lanes": [list(map(int, ix)) for ix in lanes[:debug_ops.SHOWN_LANES]]}

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
        self.session.add_violation(v, self, frame=kernel_frame(sys._getframe(1)) if self.session.pdb else None)
