"""``uninitialized_read``: a kernel reads an element that nothing has written since it was allocated.

**Which buffers are known to be uninitialized.** While a check session runs, every tensor made
by ``torch.empty``, ``torch.empty_like``, ``torch.empty_strided``, ``Tensor.new_empty`` and
``Tensor.new_empty_strided`` (called from Python) is *tracked*, and so is any tensor passed to
:func:`mark_uninitialized` (e.g. a scratch buffer from your own allocator). A tracked tensor's
elements are filled with a sentinel (a NaN with the payload ``0xA5...`` for floats, ``0xA5``
bytes for integers: what ``torch.empty`` gives is arbitrary anyway) and an element is
uninitialized while

* no kernel has stored to it (kernel stores and atomics are tracked exactly, per element), and
* its bytes still hold the sentinel, so anything PyTorch wrote there (``zero_()``, ``copy_``,
  ``x[:n] = ...``, an ``out=`` op) counts as a write without tracking every PyTorch op.

The sentinel of 1- and 2-byte integer types (``0xA5``, ``0xA5A5``) is a value real data can
hold, so for those a buffer that PyTorch has modified in place (its version counter moved), or in
which an element no kernel wrote no longer holds the sentinel (written through a NumPy view, say),
is taken to be fully initialized. Boolean and complex tensors are not tracked.

An atomic that reads (``atomic_add``, ``atomic_cas``, ...: all but ``atomic_xchg``) such an
element is reported at once. A load of one is reported when what it read becomes observable: the
loaded lanes carry the ``uninit`` lane taint (:mod:`tritonkit.check.interp.taint`) through
arithmetic, ``tl.where``, ``tl.dot``, reductions and scans, and the finding the load made (its
line, argument, elements and program) is reported when a tainted lane reaches a store, an
atomic, an address or mask, a branch, a print or an assert; a load whose value is never used, or
used only in lanes that are discarded, gives no finding. The finding names the line where the
buffer was allocated. Within an autotuned launch every config starts from the same state.
"""
from __future__ import annotations

import dataclasses
import functools
import os
import sys
import weakref
from typing import Dict, Optional, Tuple

import numpy as np
import torch

from ..findings import Violation
from ..forks import pass_threads
from ..interp import taint as _taint
from ..memory import element_cells, interval_cells, row_windows, runs_within
from ..memory.host import GRAIN, huge_array, in_parallel
from .base import Access, Check, performed_lanes

# torch dtype -> the bit pattern of the sentinel, as an unsigned integer of the element's size
_FLOAT_SENTINELS = {torch.float32: 0x7FE5A5A5, torch.float64: 0x7FFCA5A5A5A5A5A5, torch.float16: 0x7EA5,
                    torch.bfloat16: 0x7FE5}
_INT_VIEW = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
_NP_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
_ALLOCATORS = (("torch", "empty"), ("torch", "empty_like"), ("torch", "empty_strided"),
               ("Tensor", "new_empty"), ("Tensor", "new_empty_strided"))
_HERE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__))


def _sentinel(dtype: torch.dtype) -> Optional[int]:
    """The sentinel bit pattern for ``dtype`` (None: not tracked)."""
    if dtype in _FLOAT_SENTINELS:
        return _FLOAT_SENTINELS[dtype]
    if dtype == torch.bool or dtype.is_complex or getattr(dtype, "is_quantized", False):
        return None
    try:
        size = torch.empty(0, dtype=dtype).element_size()
    except (RuntimeError, TypeError):  # a dtype with no plain storage
        return None
    return int.from_bytes(b"\xa5" * size, "little") if size in _INT_VIEW else None


_TL_SENTINELS = {"fp32": 0x7FE5A5A5, "fp64": 0x7FFCA5A5A5A5A5A5, "fp16": 0x7EA5, "bf16": 0x7FE5}


def sentinel_of_type(ty) -> Optional[int]:
    """The sentinel bits (an unsigned int of the type's width) of the Triton float type ``ty``
    (``tl.float32``, ``tl.float16``, ...); None for other types, whose loads are never NaN."""
    return _TL_SENTINELS.get(getattr(ty, "name", ""))


#: cells compared at a time when refreshing a storage that is partly initialized
_REFRESH_CELLS = 1 << 22


def _tiles(fill: np.ndarray, pattern: int, g: int) -> bool:
    """Whether a storage whose bytes repeat ``fill`` (a length-1 unsigned array) holds the sentinel
    ``pattern`` (of ``g`` bytes) in every cell."""
    width = fill.dtype.itemsize
    span = max(width, g)
    ours = np.tile(fill.view(np.uint8), span // width)
    theirs = np.tile(np.array([pattern], dtype=_NP_UINT[g]).view(np.uint8), span // g)
    return bool((ours == theirs).all())


def _all(flags: np.ndarray, threads: int) -> bool:
    """Whether every one of ``flags`` (bool, 1-D) is set, looked at on up to ``threads`` threads."""
    found = []
    in_parallel(lambda lo, hi: found.append(bool(flags[lo:hi].all())), flags.shape[0], threads)
    return all(found)


def _to_signed(pattern: int, size: int) -> int:
    return pattern - (1 << (8 * size)) if pattern >= 1 << (8 * size - 1) else pattern


@dataclasses.dataclass
class _Tracked:
    """One tracked storage: which of its cells (elements of ``g`` bytes) are still uninitialized.

    ``uninit`` is None until a launch first touches the storage ("every cell that still holds the
    sentinel"): a fresh allocation costs no memory here until a kernel uses it.
    """

    g: int
    ncells: int
    pattern: int
    uninit: Optional[np.ndarray]  # bool per cell, or None: wherever the sentinel still is
    allocated_at: str
    guard_version: bool  # 1-/2-byte integers: a PyTorch write anywhere counts as initializing all
    ref: Optional[weakref.ref] = None
    version: int = 0

    def cells(self) -> np.ndarray:
        """The bool-per-cell array (made all True from the "everywhere" state)."""
        if self.uninit is None:
            self.uninit = np.ones(self.ncells, dtype=bool)
        return self.uninit

    def refresh(self, buf: np.ndarray, threads: int = 1, fill=False) -> None:
        """Cells whose bytes no longer hold the sentinel were written (by PyTorch) since.

        Args:
            buf: the storage's host bytes (uint8).
            threads: threads the pass over a large storage may be split between.
            fill: the one value ``buf`` holds where known without reading it (a
                :class:`~tritonkit.check.memory.host.HostCopy`'s ``fill``), else ``False``.
        """
        if self.guard_version:
            t = self.ref() if self.ref is not None else None
            if t is None or t._version != self.version:
                self.uninit = np.zeros(self.ncells, dtype=bool)
                return
        n, grain = self.ncells, max(1, GRAIN // self.g)
        if self.guard_version and self._written_outside_kernels(buf, fill):
            self.uninit = np.zeros(n, dtype=bool)
            return
        if self.uninit is None and fill is not False and fill is not None:
            if not _tiles(fill, self.pattern, self.g):  # one value, not the sentinel: all written
                self.uninit = np.zeros(n, dtype=bool)
                return
            self.uninit = huge_array(n, bool, threads, True)
            return
        typed = buf[: n * self.g].view(_NP_UINT[self.g])
        sentinel = np.array(self.pattern, dtype=_NP_UINT[self.g])
        if self.uninit is None:
            uninit = self.uninit = huge_array(n, bool, threads)
            in_parallel(lambda lo, hi: np.equal(typed[lo:hi], sentinel, out=uninit[lo:hi]), n, threads, grain)
            return
        uninit = self.uninit

        def piece(lo, hi):  # in pieces: no temporary the size of the storage
            for a in range(lo, hi, _REFRESH_CELLS):
                b = min(hi, a + _REFRESH_CELLS)
                sub = uninit[a:b]
                if sub.any():
                    np.logical_and(sub, typed[a:b] == sentinel, out=sub)
        in_parallel(piece, n, threads, grain)

    def _written_outside_kernels(self, buf: np.ndarray, fill) -> bool:
        """For 1- and 2-byte integers, whose sentinel real data can hold: whether an element no kernel
        wrote no longer holds the sentinel (NumPy through a view, a C extension: a write PyTorch's
        version counter does not see). Then anything else may have been written with the sentinel's
        value too, and the buffer counts as written whole: written-ness is never taken from values
        alone."""
        if self.uninit is None and fill is not False and fill is not None:
            return not _tiles(fill, self.pattern, self.g)
        typed = buf[: self.ncells * self.g].view(_NP_UINT[self.g])
        sentinel = np.array(self.pattern, dtype=_NP_UINT[self.g])
        for a in range(0, self.ncells, _REFRESH_CELLS):
            b = min(self.ncells, a + _REFRESH_CELLS)
            part = typed[a:b] != sentinel
            if self.uninit is not None:
                part &= self.uninit[a:b]
            if part.any():
                return True
        return False

    def anything_left(self) -> bool:
        return self.uninit is None or bool(self.uninit.any())


def _fill(view: torch.Tensor, value: int) -> None:
    """Write ``value`` into every element of ``view`` (an integer view of a new tensor): a CPU tensor
    smaller than :data:`~..memory.host.GRAIN` by NumPy on this thread. torch fills a CPU tensor in a
    parallel region, and the first one starts its thread pool, whose threads wait for a free core:
    at a session's start on the 2-core CPU machine (2026-11-28) the other core makes the session's
    heap resident (see :mod:`..memory.allocator`), and a 1 MiB ``torch.empty`` took 9-12 ms instead
    of 1."""
    if view.device.type == "cpu" and view.numel() * view.element_size() < GRAIN:
        try:
            arr = view.numpy()
            arr.view(f"i{arr.itemsize}").fill(value)  # value: signed, as _to_signed gives it
            return
        except (RuntimeError, TypeError):  # a tensor NumPy cannot view (conjugate or negative bit)
            pass
    view.fill_(value)


def _storage_key(t: torch.Tensor) -> Tuple[str, int, int]:
    st = t.untyped_storage()
    return str(t.device), st.data_ptr(), st.nbytes()


def _caller() -> str:
    """``file:line`` of the user's code that called the allocator."""
    f = sys._getframe(2)
    while f is not None:
        path = os.path.abspath(f.f_code.co_filename)
        if not path.startswith(_HERE) and not path.startswith(_TORCH_DIR) and "functools" not in path:
            return f"{os.path.basename(path)}:{f.f_lineno}"
        f = f.f_back
    return "?"


class _Registry:
    """The tracked storages of the running session (keyed by device, data pointer, size)."""

    def __init__(self) -> None:
        self.tracked: Dict[Tuple[str, int, int], _Tracked] = {}

    def track(self, t: torch.Tensor, allocated_at: str, whole_storage: bool) -> None:
        if type(t) is not torch.Tensor and not isinstance(t, torch.nn.Parameter):
            return  # tensor subclasses (fake, functional, ...) hold no data of their own
        if t.layout != torch.strided or t.device.type == "meta" or t.numel() == 0:
            return
        pattern = _sentinel(t.dtype)
        if pattern is None:
            return
        g = t.element_size()
        with torch.no_grad():
            _fill(t.view(_INT_VIEW[g]), _to_signed(pattern, g))
        key = _storage_key(t)
        ncells = key[2] // g
        tr = self.tracked.get(key)
        if tr is None or tr.g != g:
            tr = self.tracked[key] = _Tracked(g=g, ncells=ncells, pattern=pattern,
                                              uninit=None if whole_storage else np.zeros(ncells, dtype=bool),
                                              allocated_at=allocated_at,
                                              guard_version=g <= 2 and t.dtype not in _FLOAT_SENTINELS)
        if whole_storage:
            tr.uninit = None
        elif tr.uninit is not None:
            tr.uninit[_element_cells(t, g)] = True
        tr.allocated_at = allocated_at
        tr.ref = weakref.ref(t)
        tr.version = t._version

    def lookup(self, key) -> Optional[_Tracked]:
        return self.tracked.get(key)

    def save(self, tensors) -> Dict[tuple, Tuple[_Tracked, np.ndarray]]:
        """Which elements of these tensors' storages are uninitialized now (for :meth:`restore`)."""
        out = {}
        for t in tensors:
            key = _storage_key(t)
            tr = self.tracked.get(key)
            if tr is not None and key not in out:
                out[key] = (tr, None if tr.uninit is None else tr.uninit.copy())
        return out

    def restore(self, saved: Dict[tuple, Tuple[_Tracked, np.ndarray]]) -> None:
        """Put back what :meth:`save` saw (also for storages that became fully initialized since)."""
        for key, (tr, uninit) in saved.items():
            tr.uninit = None if uninit is None else uninit.copy()
            self.tracked[key] = tr


def _element_cells(t: torch.Tensor, g: int) -> np.ndarray:
    """Storage cell index of every element of the view ``t`` (cells of ``g`` bytes)."""
    idx = np.array([t.storage_offset()], dtype=np.int64)
    for size, stride in zip(t.shape, t.stride()):
        idx = (idx[:, None] + np.arange(size, dtype=np.int64)[None, :] * stride).reshape(-1)
    return idx * t.element_size() // g


_registry: Optional[_Registry] = None
_pending = _Registry()  # marked before a session starts
_saved_allocators: list = []


def mark_uninitialized(t: torch.Tensor) -> torch.Tensor:
    """Declare the elements of ``t`` uninitialized: a kernel that reads one before anything writes
    it is reported as ``uninitialized_read``.

    For buffers that do not come from ``torch.empty*`` (which are tracked automatically while
    checking), e.g. a slice of a workspace from your own allocator. The elements are overwritten
    with a sentinel. Works inside and before a :func:`tritonkit.checking` block (the mark is kept
    until that session ends).

    Args:
        t: a strided tensor (any shape, dtype other than bool/complex, CPU or GPU).
    Returns:
        ``t`` itself.
    Raises:
        TypeError: ``t`` is not a strided tensor, or its dtype cannot hold a sentinel.
    """
    if not isinstance(t, torch.Tensor) or t.layout != torch.strided:
        raise TypeError(f"mark_uninitialized takes a strided torch.Tensor, not {type(t).__name__}")
    if _sentinel(t.dtype) is None:
        raise TypeError(f"mark_uninitialized: {t.dtype} tensors are not tracked (no sentinel value for them)")
    (_registry or _pending).track(t, _caller(), whole_storage=False)
    return t


def _wrap(orig, out_kw: bool):
    @functools.wraps(orig)
    def allocate(*args, **kwargs):
        t = orig(*args, **kwargs)
        if _registry is not None and isinstance(t, torch.Tensor) and not (out_kw and "out" in kwargs):
            _registry.track(t, _caller(), whole_storage=True)
        return t
    return allocate


class UninitializedCheck(Check):
    """Reports reads of tensor elements that nothing wrote since ``torch.empty*`` (see the module).

    Constructed without arguments (``checks=["uninitialized_read"]``). While its session runs it
    replaces ``torch.empty``, ``torch.empty_like``, ``torch.empty_strided``, ``Tensor.new_empty`` and
    ``Tensor.new_empty_strided`` with wrappers (restored by ``end_session``). Raises nothing itself.
    """

    kind = "uninitialized_read"
    title = "read of uninitialized memory"
    color = "#ea580c"
    order = 30
    first_message_only = True

    def __init__(self) -> None:
        self._state: Optional[Dict] = None  # storage key -> its _Tracked (None: not tracked), per launch
        # the running load's findings, held until its value is observed: (access, [(block lanes, Violation)])
        self._held: Optional[Tuple[Access, list]] = None

    @classmethod
    def message(cls, f) -> str:
        return f"{f.access} reads {f.elements} before anything wrote it"

    @classmethod
    def hint(cls, f) -> str:
        return ("the buffer comes from torch.empty (or mark_uninitialized): allocate it with torch.zeros, or store "
                "before loading (e.g. initialize the accumulator in registers, not by loading the output)")

    def begin_session(self, session) -> None:
        global _registry, _pending
        _registry = _pending
        _pending = _Registry()
        for owner, name in _ALLOCATORS:
            obj = torch if owner == "torch" else torch.Tensor
            orig = getattr(obj, name, None)
            if orig is not None:
                _saved_allocators.append((obj, name, orig))
                setattr(obj, name, _wrap(orig, owner == "torch"))

    def end_session(self, session) -> None:
        global _registry
        while _saved_allocators:
            obj, name, orig = _saved_allocators.pop()
            setattr(obj, name, orig)
        _registry = None

    def save_state(self, tensors):
        return _registry.save(tensors) if _registry is not None else None

    def restore_state(self, saved) -> None:
        if _registry is not None and saved is not None:
            _registry.restore(saved)

    def begin_launch(self, launch) -> None:
        self._state = {}

    def end_launch(self, launch) -> None:
        for key, tr in (self._state or {}).items():
            if tr is not None and _registry is not None and not tr.anything_left():
                _registry.tracked.pop(key, None)
        self._state = None

    def _tracked(self, launch, storage) -> Optional[_Tracked]:
        state = self._state
        key = storage.key
        if key in state:
            return state[key]
        tr = _registry.lookup(key) if _registry is not None else None
        if tr is not None:
            tr.refresh(storage.buf, pass_threads(launch.session), storage.fill if not storage.written else False)
            if not tr.anything_left():
                _registry.tracked.pop(key, None)
                tr = None
        state[key] = tr
        return tr

    def share_prepare(self, launch) -> None:
        """Which cells of the launch's tracked storages are uninitialized, found once here (see
        :meth:`_Tracked.refresh`): not by each worker, each with a bool per cell of its own."""
        if self._state is not None and _registry is not None and _registry.tracked:
            for storage in launch.space.storages.values():
                self._tracked(launch, storage)

    def share_merge(self, launch, state, written) -> None:
        """A worker's stores and atomics initialized the elements they wrote (as they would have here)."""
        if _registry is None or not _registry.tracked:
            return
        for storage, g, lo, hi in written:
            tr = self._tracked(launch, storage)
            if tr is None:
                continue
            first = (lo * g) // tr.g
            last = np.minimum(-(-(hi * g) // tr.g), tr.ncells)
            uninit = tr.cells()
            if first.shape[0] > 64:  # scattered: one index array
                pieces = [interval_cells(first, last)]
            else:
                pieces = [slice(a, b) for a, b in zip(first.tolist(), last.tolist())]
            threads = pass_threads(launch.session)
            for cells in pieces:
                was = uninit[cells]
                if _all(was, threads):  # undone by a fill, with no copy (an output written whole, as a rule)
                    launch.on_undo(lambda u=uninit, c=cells: u.__setitem__(c, True))
                elif not was.any():
                    continue
                else:
                    old = was.copy()
                    launch.on_undo(lambda u=uninit, c=cells, o=old: u.__setitem__(c, o))
                if isinstance(cells, slice):  # a view: cleared on up to ``threads`` threads
                    in_parallel(lambda lo, hi, w=was: w[lo:hi].fill(False), was.shape[0], threads)
                else:
                    uninit[cells] = False

    def on_access(self, launch, access: Access, res) -> None:
        if res.n == 0 or _registry is None or not _registry.tracked:
            return
        for region, sel in launch.space._groups(res):
            tr = self._tracked(launch, region.storage)
            if tr is None:
                continue
            per = max(1, access.size // tr.g)
            state, cells = tr.uninit, None
            if sel is None and access.size == tr.g:
                if res.contiguous(access.size):  # consecutive: a slice
                    c0 = res.lo // tr.g
                    cells = slice(c0, c0 + res.n)
                else:
                    rows = res.rows(access.size)
                    if rows is not None and runs_within(*rows, tr.ncells):  # a tile's rows: by their first cells
                        cells, length = rows
                        state = row_windows(tr.uninit, length, writeable=True)
            if cells is None:
                cells = element_cells(res.off if sel is None else res.off[sel], access.size, tr.g, tr.ncells)
            reads = access.kind == "load" or (access.kind == "atomic" and access.op not in ("atomic_xchg",
                                                                                             "atomic_store"))
            if reads:
                bad = state[cells].reshape(-1)
                if per > 1:
                    bad = bad.reshape(-1, per).any(axis=1)
                if bad.any():
                    held = self._report(launch, access, res, sel, region, tr, res.off if sel is None else res.off[sel],
                                        bad, hold=access.kind == "load")
                    if held:
                        if self._held is None or self._held[0] is not access:
                            self._held = (access, [])
                        self._held[1].extend(held)
            if access.kind != "load":
                if launch.tx is not None:
                    old = state[cells].copy()
                    launch.on_undo(lambda: state.__setitem__(cells, old))
                state[cells] = False

    # --- a load's findings, held until what it read is observed ----------------------------------------
    def on_load(self, launch, access: Access, res, value, mask, other) -> None:
        """Mark the lanes of ``value`` that the load read from unwritten elements with the ``uninit``
        taint, whose origin holds the load's findings (one per program)."""
        held, self._held = self._held, None
        if held is None or held[0] is not access:
            return
        size = value.data.size
        lanes = np.zeros(size, dtype=bool)
        by_program: Dict[int, Violation] = {}
        per = max(1, res.per) if launch.batch is not None else size
        for block_lanes, v in held[1]:
            if block_lanes.size and int(block_lanes.max()) >= size:  # lanes this value does not hold: at once
                launch.report(v)
                continue
            lanes[block_lanes] = True
            b = int(block_lanes[0]) // per if block_lanes.size else 0
            if b not in by_program:
                by_program[b] = v
        if not lanes.any():
            return
        frames = held[1][0][1].frames
        batch = launch.batch
        if batch is None:
            origin = _taint.Origin(frames=frames, program_id=held[1][0][1].program_id,
                                   info={"finding": by_program.get(0, held[1][0][1])})
        elif getattr(value, "bat", False):
            programs = np.zeros(batch.pids.shape[0], dtype=bool)
            programs[list(by_program)] = True
            origin = _taint.BatchOrigin(programs, lambda b: _taint.Origin(
                frames=frames, program_id=by_program[b].program_id, info={"finding": by_program[b]}))
        else:  # a load made once for the batch: the same elements in every program
            first = held[1][0][1]
            origin = _taint.BatchOrigin(np.ones(batch.pids.shape[0], dtype=bool), lambda b: _taint.Origin(
                frames=frames, program_id=launch.program_of(int(batch.pids[b])),
                info={"finding": dataclasses.replace(first, program_id=launch.program_of(int(batch.pids[b])))}))
        _taint.mark(value, "uninit", lanes.reshape(value.data.shape), origin)

    def on_store(self, launch, access: Access, res, value, flat) -> None:
        if value.uninit is not None:
            self._observed(launch, value, performed_lanes(res, access.shape), access.op, access.shape)

    def on_address(self, launch, access: Access, ptrs, mask, res) -> None:
        if ptrs.uninit is not None:
            self._observed(launch, ptrs, mask, f"{access.op} address", access.shape)

    def on_observe(self, launch, what, value, lanes) -> None:
        if value.uninit is not None:
            self._observed(launch, value, lanes, what, np.shape(value.data))

    def _observed(self, launch, h, lanes, what: str, shape) -> None:
        """The lanes of ``h`` (``lanes``: bool or None for all, broadcast with it to ``shape``) are
        used by ``what``: report, once each, the held findings of the loads their uninitialized
        values came from."""
        used = _taint.active(h, "uninit", shape, lanes)
        if used is None:
            return
        here = launch.here()
        at = here[0].at() if here else "?"
        for origin, _ in _taint.by_program(launch, used, h.uninit_at):
            info = origin.info
            if info.get("reported"):
                continue
            info["reported"] = True
            v = info["finding"]
            launch.report(dataclasses.replace(v, message=f"{v.message}; what it read reaches the {what} at {at}"))

    def _report(self, launch, access: Access, res, sel, region, tr: _Tracked, off, bad, hold: bool = False):
        """Report the lanes ``bad`` (bool over the group's positions) of ``access``, one finding per
        program; with ``hold``, return them instead as ``[(the block's flat lane indices, Violation)]``
        (frames set: the load's line) for :meth:`on_load` to hold until the value is observed."""
        positions = np.arange(res.n) if sel is None else np.flatnonzero(sel)
        held = []
        if launch.batch is not None and access.kind == "atomic":
            # atomics of many programs on one element: only the first (in program order) reads it unwritten
            pids = launch.lane_programs(res, positions)
            _, at, inv = np.unique(off, return_index=True, return_inverse=True)
            bad = bad & (pids == pids[at][inv.reshape(-1)])
        frames = launch.here() if hold else []
        for pid, pos in launch.by_program(res, positions[bad]):
            where = np.searchsorted(positions, pos)
            v = Violation(
                kind=self.kind, kernel=launch.kernel, frames=frames, program_id=pid, access=access.op,
                masked=access.masked, lanes=int(pos.shape[0]), arg=region.describe(),
                offsets=region.layout.coords(off[where]), reason="never_written",
                message=f"{access.op} of `{region.name}` reads elements that nothing has written since "
                        f"it was allocated (at {tr.allocated_at})")
            if hold:
                held.append((res.lanes[pos], v))
            else:
                launch.report(v)
        return held
