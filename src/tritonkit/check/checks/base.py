"""The interface of a check, in one place: what a finding kind declares, and every hook a check may
implement.

A check kind is one module in this package that defines a :class:`Check` subclass (or, for kinds
that no check makes but a launch reports, a :class:`FindingKind` subclass). Defining the class
registers it: the session finds it by its ``kind``, the builder calls the hooks it overrides, and
the renderers ask it how its findings read. Nothing else names a kind.
"""
from __future__ import annotations

import math
from typing import Any, Callable, ClassVar, Dict, List, Optional, Sequence, Tuple, Type

import numpy as np

from ..interp.builder import Access

__all__ = ["Access", "FindingKind", "Check", "Hooks", "KINDS", "CHECKS", "performed_lanes"]

#: every finding kind declared, by name (filled as the check modules are imported)
KINDS: Dict[str, Type["FindingKind"]] = {}
#: every check that can be asked for by its kind, by kind
CHECKS: Dict[str, Type["Check"]] = {}


class FindingKind:
    """How the findings of one kind read and fold. Subclasses set :attr:`kind`; defining one
    registers it in :data:`KINDS`.

    Attributes:
        kind: the finding kind's name, e.g. ``"out_of_bounds"``.
        title: what it is, in a few words (the summary and the HTML page's legend).
        color: its colour on the doctor's HTML page (``#rrggbb``).
        by_origin: findings are placed on the line where a bad value was made and folded by that
            line, not by the argument it reached.
        first_message_only: the first occurrence's message stands for all (it quotes values).
        aborts_launch: a finding of this kind stops its launch (the launch raises
            :class:`~tritonkit.check.CheckAborted` itself after reporting it).
        level: how a code-scanning viewer ranks it (a SARIF result's ``level``): ``"error"`` for a
            bug in the kernel, ``"warning"`` for a launch that could not be checked.
    """

    kind: ClassVar[str] = ""
    title: ClassVar[str] = ""
    color: ClassVar[str] = "#6b7280"
    by_origin: ClassVar[bool] = False
    first_message_only: ClassVar[bool] = False
    aborts_launch: ClassVar[bool] = False
    level: ClassVar[str] = "error"

    def __init_subclass__(cls, **kw) -> None:
        super().__init_subclass__(**kw)
        if "kind" in vars(cls) and cls.kind:
            KINDS[cls.kind] = cls

    @classmethod
    def message(cls, f) -> str:
        """A one-line description of the folded finding ``f`` (a :class:`~tritonkit.check.Finding`),
        where its violations gave none."""
        return f.kind

    @classmethod
    def hint(cls, f) -> str:
        """A one-line suggestion of what to change ("" for none)."""
        return ""

    @classmethod
    def facts(cls, f) -> List[Tuple[str, str]]:
        """Facts of this kind that a report shows under the generic ones (argument, access,
        programs, elements): ``[(label, text)]``, e.g. the other side of a race."""
        return []


class Check(FindingKind):
    """A rule checked while kernels run in the checked interpreter.

    Subclasses set :attr:`kind` (the finding kind they report, "" for none) and override the hooks
    they need; the others do nothing and cost nothing (the builder calls only the overridden
    ones). Findings go through ``launch.report(Violation(...))``. A check is made per session
    (constructed without arguments when asked for by its kind) and sees its launches one at a time.

    Class attributes:
        default: on unless the session names its checks (``nan_inf`` is off by default).
        order: where it comes in the default list (the summary's order).
        first: runs before every other check (``out_of_bounds``: it decides which lanes are
            performed, the others see only those).
        keeps_lanes_in_bounds: its ``on_access`` clears every lane outside its argument's storage;
            without such a check the launch drops those lanes itself, silently (the safety net).
        guards_whole_launch: under the batched engine, no two programs of the whole launch (not
            just of a batch) may share an element one of them writes, or the launch runs one
            program at a time; the check then sees one program at a time whenever it matters
            (``data_race``: its shadow is per launch).

    Hooks, by when they are called (``launch`` is the running :class:`~tritonkit.check.launch.Launch`):

    * session: :meth:`begin_session`, :meth:`end_session`; :meth:`save_state` /
      :meth:`restore_state` around each config an autotuned kernel is checked under;
    * launch: :meth:`begin_launch`, :meth:`end_launch`, :meth:`on_program` (before each program or
      batch of programs); :meth:`suspend_program`, :meth:`resume_program` around a program that
      gives way to others while it waits for one of them; :meth:`share_begin`,
      :meth:`share_export`, :meth:`share_merge` where a launch's programs are shared out between
      processes;
    * memory: :meth:`on_address` (an address that carries lane taints), :meth:`on_access` (before a
      load, store or atomic is performed; may clear lanes), :meth:`on_load` (after a load filled its
      value), :meth:`on_store` (before a store or atomic writes);
    * values: :meth:`on_result` (every elementwise result), :meth:`on_int_arith` (binary arithmetic
      with a signed integer result), :meth:`on_cast` (an integer cast), :meth:`on_dot`,
      :meth:`on_reduce` (a reduction or scan), :meth:`on_observe` (a value whose lanes carry an
      undefined or uninitialized taint decides what the program does: a branch, a mask, a print).
    """

    default: ClassVar[bool] = True
    order: ClassVar[int] = 100
    first: ClassVar[bool] = False
    keeps_lanes_in_bounds: ClassVar[bool] = False
    guards_whole_launch: ClassVar[bool] = False

    def __init_subclass__(cls, **kw) -> None:
        super().__init_subclass__(**kw)
        if "kind" in vars(cls) and cls.kind:
            CHECKS[cls.kind] = cls

    # --- session ---------------------------------------------------------------------------------
    def begin_session(self, session) -> None:
        """The session starts (e.g. to watch allocations)."""

    def end_session(self, session) -> None:
        """The session ends (undo what :meth:`begin_session` did)."""

    def save_state(self, tensors: Sequence) -> Any:
        """What this check knows about ``tensors`` (torch tensors) now, to put back with
        :meth:`restore_state` after an autotune config ran on them (None: nothing)."""
        return None

    def restore_state(self, saved: Any) -> None:
        """Put back what :meth:`save_state` returned."""

    # --- launch ----------------------------------------------------------------------------------
    def begin_launch(self, launch) -> None:
        """A launch starts (per-launch state)."""

    def end_launch(self, launch) -> None:
        """A launch ended (its record is complete but for ``seconds``)."""

    def on_program(self, launch) -> None:
        """A program (``launch.pid_linear``), or a batch of programs (``launch.batch``), starts."""

    def suspend_program(self, launch) -> Any:
        """The running program (one at a time) gives way to others mid-way, as it waits for memory
        another program writes (see :mod:`tritonkit.check.engine.cooperative`): return its
        per-program state (what :meth:`on_program` starts afresh), handed back to
        :meth:`resume_program` when it runs again. None by default."""
        return None

    def resume_program(self, launch, state: Any) -> None:
        """The program whose :meth:`suspend_program` returned ``state`` is the running one again."""

    # --- a launch shared out between processes (see tritonkit.check.engine.shares) ----------------
    # A check whose state changes while a launch's batches run (what it registers with
    # ``launch.on_undo``) must carry those changes from a worker to the parent with these three.
    def share_prepare(self, launch) -> None:
        """In this process, before a launch's share workers are forked: build the per-storage state
        each worker would otherwise build for itself (the workers inherit it)."""

    def share_begin(self, launch) -> None:
        """In a worker, before it runs its share: start collecting what the share changes."""

    def share_export(self, launch) -> Any:
        """In a worker, after its share ran: what it changed in this check's state (picklable;
        None: nothing)."""
        return None

    def share_merge(self, launch, state: Any, written: Sequence[tuple]) -> None:
        """In the parent: take in a worker's :meth:`share_export` (shares in program order).
        ``written``: the worker's writes, ``(storage, cell bytes, lo, hi)`` with cell intervals
        ``[lo, hi)`` (int64 arrays), already in memory."""

    # --- memory ----------------------------------------------------------------------------------
    def on_address(self, launch, access: Access, ptrs, mask: Optional[np.ndarray], res) -> None:
        """The address handle ``ptrs`` of ``access`` carries lane taints (``ptrs.tainted``);
        ``mask``: the access's bool mask (None: every lane); ``res``: its resolved lanes."""

    def on_access(self, launch, access: Access, res) -> None:
        """Before ``access`` is performed: ``res`` (a :class:`~tritonkit.check.memory.Resolved`) has
        the active lanes' storage offsets; clearing lanes (``res.keep``) leaves them undone."""

    def on_load(self, launch, access: Access, res, value, mask: Optional[np.ndarray], other) -> None:
        """A load put what it read into ``value`` (a TensorHandle of the block's shape; lanes not
        performed hold ``other``, or 0 without it); ``mask``: its bool mask or None."""

    def on_store(self, launch, access: Access, res, value, flat: np.ndarray) -> None:
        """Before a store or atomic writes ``value`` (a TensorHandle); ``flat``: its values broadcast
        to the block, flat, in the element's numpy dtype."""

    # --- values ----------------------------------------------------------------------------------
    def on_result(self, launch, op, out, ins: Sequence) -> None:
        """``out`` (a TensorHandle) was computed elementwise by ``op`` (a numpy ufunc, or a name such
        as ``"cast"``) from the handles ``ins``."""

    def on_int_arith(self, launch, op, out, lhs, rhs) -> None:
        """``out = lhs op rhs`` (``op`` a numpy ufunc) with a signed integer result, wrapped."""

    def on_cast(self, launch, src, out) -> None:
        """``out`` is the integer handle ``src`` cast to another integer type."""

    def on_dot(self, launch, out, a, b, d) -> None:
        """``out = a @ b + d`` (floating point)."""

    def on_reduce(self, launch, what: str, name: str, outs: Tuple, ins: Tuple) -> None:
        """A ``what`` (``"reduction"`` or ``"scan"``) with the combine ``name`` (``"sum"``, ``"max"``,
        ...) made the ``tl.tensor`` s ``outs`` from ``ins``."""

    def on_observe(self, launch, what: str, value, lanes: Optional[np.ndarray]) -> None:
        """``value`` (a TensorHandle carrying one of :data:`~tritonkit.check.interp.taint.OBSERVED`'s
        taints) is observed by ``what`` (``"branch"``, ``"loop bound"``, ``"device_print"``,
        ``"device_assert"``, ``"store mask"``, ...); ``lanes``: the lanes observed (bool,
        broadcastable to the value; None: all)."""


_HOOKS = ("on_program", "on_address", "on_access", "on_load", "on_store", "on_result", "on_int_arith", "on_cast",
          "on_dot", "on_reduce", "on_observe")


class Hooks:
    """The checks' hooks by event: for each hook of :class:`Check`, the bound methods of the checks
    that override it, in the checks' order (``hooks.store``, ``hooks.result``, ...; an empty list
    where none does). Built once per session.

    Args:
        checks: the session's checks, in order.
    """

    program: List[Callable]
    address: List[Callable]
    access: List[Callable]
    load: List[Callable]
    store: List[Callable]
    result: List[Callable]
    int_arith: List[Callable]
    cast: List[Callable]
    dot: List[Callable]
    reduce: List[Callable]
    observe: List[Callable]

    def __init__(self, checks: Sequence[Check]) -> None:
        for hook in _HOOKS:
            setattr(self, hook[3:], [getattr(c, hook) for c in checks
                                     if getattr(type(c), hook, None) is not getattr(Check, hook)])
        #: some check keeps every lane inside its storage (else the launch does, silently)
        self.in_bounds = any(c.keeps_lanes_in_bounds for c in checks)
        #: some check needs the batched engine to guard the whole launch (see Check)
        self.whole_launch = any(c.guards_whole_launch for c in checks)


def performed_lanes(res, shape) -> np.ndarray:
    """The lanes of a block (``shape``) that an access really performs (active and allowed by the
    checks), as a bool array of that shape."""
    out = np.zeros(math.prod(shape), dtype=bool)
    out[res.lanes[res.ok]] = True
    return out.reshape(shape)
