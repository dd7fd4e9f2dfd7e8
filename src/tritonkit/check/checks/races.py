"""``data_race``: two programs of one launch touch the same element, at least one writes it, and
nothing orders them.

Programs of a launch run in no defined order on the GPU (and concurrently), so a plain store of an
element that another program loads or stores gives a result that depends on scheduling. The
checked interpreter runs programs one after another; this check remembers, per element of every
storage a launch touches (a *shadow*), the last program that stored it and up to two programs that
loaded it since, with the kernel line of each access. An access by another program that conflicts
(load after store, store after load, store after store) is a race unless it is ordered:

* **Two atomics never race.** ``tl.atomic_add`` & co. to the same element from many programs is
  how kernels share an element (a histogram, a split-K reduction with atomics). An atomic and a
  *plain* load or store of the same element by another program do race, unless ordered: a plain
  store can land before or after the atomic update, and a plain load sees the element before or
  after it. A volatile load (``tl.load(..., volatile=True)``, ``tl.atomic_load``, a spin's poll)
  counts as an atomic one: it races with a plain store before it, not with an atomic (a flag set
  with ``tl.atomic_xchg``); it synchronizes nothing (relaxed), and a store after it is not compared
  with it.
* **Scalar atomics synchronize.** An atomic to a single element (a lock, a flag, a counter:
  ``tl.atomic_cas(lock, 0, 1)``, ``tl.atomic_xchg(lock, 0)``, ``tl.atomic_add(count, 1)``) with
  acquire/release semantics (the default ``acq_rel``; ``sem="relaxed"`` does not synchronize)
  releases everything its program did before it to whoever later acquires the same element, and
  acquires what earlier releasers of that element did. Orders compose (vector clocks, as in
  FastTrack), so a lock-protected read-modify-write of shared partial sums (Triton's layer-norm
  backward tutorial) and a "last program reduces the partials" counter give no reports. Atomics
  over a block of different elements (a histogram's bins) do not synchronize.

Elements are compared at the granularity of the smallest element type of the tensor arguments on
a storage. Two loads never race. A program never races with itself, with one exception reported
as ``reason="same_program"``: lanes of *one* store that write *different* values to the same
element (a histogram's load-add-store within a block): which lane lands is undefined on the GPU.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import numpy as np

from ..findings import Violation, program_label, short_path
from ..memory import PAGE, PagedCells, element_cells
from .base import Access, Check

_NONE = -1
_SHOWN_PROGRAMS = 8


class _Shadow(PagedCells):
    """Per element of one storage: the last writer and up to two readers since, with their sites.

    Paged (:class:`~tritonkit.check.memory.PagedCells`): 24 bytes a touched cell, 36 with epochs. The pools ``w``,
    ``ws``, ``r1``, ... hold program ids, sites and epochs (int32).
    """

    _FIELDS = {"w": (_NONE, np.int32), "ws": (0, np.int32), "r1": (_NONE, np.int32), "r1s": (0, np.int32),
               "r2": (_NONE, np.int32), "r2s": (0, np.int32)}
    _LAZY = {"wa": (0, np.int8)}  # the last write was an atomic (allocated at the storage's first atomic)
    _EPOCHS = ("we", "r1e", "r2e")

    def __init__(self, ncells: int, g: int, epochs: bool):
        self.g = g
        self.written = False  # any plain store to this storage in this launch yet
        self.epochs = False
        self.we = self.r1e = self.r2e = None
        super().__init__(ncells)
        if epochs:
            self.with_epochs()

    def _grow(self, pages: int) -> None:
        super()._grow(pages)
        if self.epochs:
            for name in self._EPOCHS:
                self._extend(name, self.cap, 0, np.int32)

    def with_epochs(self) -> None:
        if not self.epochs:
            self.epochs = True
            for name in self._EPOCHS:
                setattr(self, name, np.zeros(self.cap * PAGE, dtype=np.int32))


_CONFLICTS = {"write_write": "both store", "write_read": "one stores what the other loads",
              "read_write": "one loads what the other stores"}


class RaceCheck(Check):
    """Reports plain loads and stores of one element by two programs of a launch with no order
    between them (see the module's docstring for the rule).

    Constructed without arguments (``checks=["data_race"]``); its state is per launch, from
    ``begin_launch`` to ``end_launch``. Under the batched engine it asks for the whole launch to be
    guarded (two programs sharing an element one of them writes run one program at a time), so it
    keeps no shadow there. Raises nothing itself.
    """

    kind = "data_race"
    title = "data race between programs"
    color = "#7c3aed"
    order = 20
    guards_whole_launch = True

    def __init__(self) -> None:
        self._st: Optional[_LaunchState] = None

    @classmethod
    def message(cls, f) -> str:
        mine = program_label(f.program_ids[0]) if f.program_ids else "?"
        if f.reason == "same_program":
            return (f"{f.access} of `{f.arg}` in program {mine}: lanes of this one {f.access} write different values "
                    f"to {f.elements}; which lane's value lands is undefined on the GPU")
        if not f.other:
            return f.kind
        o = f.other
        theirs = program_label(o["program_ids"][0]) if o.get("program_ids") else "?"
        return (f"{f.access} of `{f.arg}` in program {mine} races with the {o['access']} at line {o['line']} in "
                f"program {theirs}: {_CONFLICTS.get(f.reason, f.reason)} {f.elements or 'the same elements'}, with no "
                f"atomic or lock between them")

    @classmethod
    def hint(cls, f) -> str:
        if f.reason == "same_program":
            return ("several lanes of one block hit the same element (e.g. repeated histogram bins): use an atomic "
                    "(tl.atomic_add) so every lane's update counts")
        if f.reason == "write_write":
            return ("two programs store the same elements: check that the grid matches the data (one program per "
                    "row/tile), or combine partial results with tl.atomic_add")
        return ("programs run in no defined order: a value one program stores is not visible to another unless "
                "ordered (an atomic flag/lock), or the work is split so no element is shared")

    @classmethod
    def facts(cls, f):
        o = f.other
        if not o or f.reason == "same_program":  # lanes of one store: the message says it all
            return []
        progs = o.get("program_ids", [])
        return [("races with", f"{o['access']} at {short_path(o['file'])}:{o['line']} in program{'s' if len(progs) != 1 else ''} "
                               f"{', '.join(program_label(p) for p in progs)}\n{o['line']}  {o.get('source', '')}")]

    def begin_launch(self, launch) -> None:
        self._st = _LaunchState(launch)

    def end_launch(self, launch) -> None:
        self._st = None

    def on_program(self, launch) -> None:
        st = self._st
        st.vc = None
        st.epoch = 0

    def suspend_program(self, launch):
        return self._st.vc, self._st.epoch  # vc is replaced, never changed in place

    def resume_program(self, launch, state) -> None:
        self._st.vc, self._st.epoch = state

    def on_store(self, launch, access: Access, res, value, flat) -> None:
        if access.kind == "store":
            self._st.one_store(res, flat, access.op, access.masked)

    def on_access(self, launch, access: Access, res) -> None:
        if res.n == 0 or launch.batch is not None:  # batched: the engine's guard stands for the shadow
            return
        st = self._st
        epoch = st.epoch  # an atomic's own update is part of what it releases (at this epoch)
        if access.kind == "atomic":
            st.atomic(access, res)
        for region, sel in launch.space._groups(res):
            off = res.off if sel is None else res.off[sel]
            st.plain(region, off, access, res, sel, epoch)


def _rows_apart(res, size: int) -> bool:
    """Whether every lane is in rows of consecutive elements (a tile's, see
    :meth:`~tritonkit.check.memory.resolved.Resolved.rows`) that, within each program's lanes
    (``res.per`` a program; one program when it is 0), start one row's length or more after the row
    before: then no program writes an element twice in this store, found from the rows' starts."""
    rows = res.rows(size)
    if rows is None:
        return False
    starts, length = rows
    per = res.per or res.n
    if per % length or starts.shape[0] * length != res.n:
        return False
    mine = starts.reshape(-1, per // length)  # a program's rows a line
    return mine.shape[1] < 2 or bool((mine[:, 1:] - mine[:, :-1] >= length).all())


class _LaunchState:
    def __init__(self, launch):
        self.launch = launch
        self.nprog = launch.grid[0] * launch.grid[1] * launch.grid[2]
        self.shadows: Dict[int, _Shadow] = {}
        self.vc: Optional[np.ndarray] = None  # what the running program knows of others (epochs)
        self.epoch = 0
        self.synced = False
        self.sync_vc: Dict[Tuple[int, int], np.ndarray] = {}

    # --- lanes of one store ---------------------------------------------------------------------------
    def one_store(self, res, values_flat: np.ndarray, op: str, masked: bool) -> None:
        """Lanes of one store ``op`` (``values_flat``: the block's values, flat, in the element dtype)
        that write different values to one element."""
        if res.n < 2:
            return
        ok = res._ok
        size = values_flat.dtype.itemsize
        if ok is None and (res.contiguous(size) or _rows_apart(res, size)):  # no element twice in a program
            return
        off = res.off if ok is None else res.off[ok]
        if off.shape[0] < 2:
            return
        if res.single_slot >= 0:
            if bool((off[1:] > off[:-1]).all()):  # the common case: increasing addresses, no duplicates
                return
            key = off
        else:
            slot = res.slot if ok is None else res.slot[ok]
            key = (slot << 40) | (off & ((1 << 40) - 1))
        order = np.argsort(key, kind="stable")
        k = key[order]
        same = k[1:] == k[:-1]
        if not same.any():
            return
        lanes = (res.lanes if ok is None else res.lanes[ok])[order]
        launch = self.launch
        pids = launch.lane_programs(res, None if ok is None else np.flatnonzero(ok))
        if not isinstance(pids, int):  # lanes of other programs on one element: the engine's guard sees those
            pids = pids[order]
            same &= pids[1:] == pids[:-1]
        vals = values_flat[lanes]
        bits = vals.view(np.dtype(f"u{vals.dtype.itemsize}")) if vals.dtype.kind == "f" else vals
        differ = same & (bits[1:] != bits[:-1])
        if not differ.any():
            return
        hit = np.zeros(k.shape[0], dtype=bool)
        hit[1:] |= differ
        hit[:-1] |= differ
        region = launch.space.region(res.single_slot if res.single_slot >= 0 else
                                     int((res.slot if ok is None else res.slot[ok])[order][hit][0]))
        if region is None:
            return
        frames = launch.here()
        sorted_off = off[order]
        for me in ([pids] if isinstance(pids, int) else np.unique(pids[hit]).tolist()):
            mine = hit if isinstance(pids, int) else hit & (pids == me)
            launch.report(Violation(
                kind="data_race", kernel="", frames=frames, program_id=launch.program_of(me), access=op,
                masked=masked, lanes=int(mine.sum()), arg=region.describe(),
                offsets=region.layout.coords(sorted_off[mine]), reason="same_program",
                other={"access": op, "frames": frames, "program_ids": [list(launch.program_of(me))]}))

    # --- synchronization through scalar atomics ----------------------------------------------------
    def atomic(self, access: Access, res) -> None:
        if access.sem == "relaxed" or res.single_slot < 0 or res.lo != res.hi or res._ok is not None:
            return
        region = self.launch.space.region(res.single_slot)
        if region is None:
            return
        key = (id(region.storage), res.lo)
        pid = self.launch.pid_linear
        known = self.sync_vc.get(key)
        if access.sem in ("acq_rel", "acquire") and known is not None:
            self.vc = known.copy() if self.vc is None else np.maximum(self.vc, known)
        if access.sem in ("acq_rel", "release"):
            rel = known if known is not None else np.full(self.nprog, _NONE, dtype=np.int32)
            if self.vc is not None:
                np.maximum(rel, self.vc, out=rel)
            rel[pid] = max(rel[pid], self.epoch)
            self.sync_vc[key] = rel
            self.epoch += 1
            if not self.synced:
                self.synced = True
                for sh in self.shadows.values():
                    sh.with_epochs()

    # --- plain loads and stores --------------------------------------------------------------------
    def shadow(self, region) -> _Shadow:
        storage = region.storage
        sh = self.shadows.get(id(storage))
        if sh is None:
            g = self.launch.space.cell_bytes(storage)
            sh = self.shadows[id(storage)] = _Shadow(-(-storage.nbytes // g), g, self.synced)
        return sh

    def _unordered(self, who: np.ndarray, epochs: Optional[np.ndarray], pid: int) -> np.ndarray:
        """Which records (program ``who``, at ``epochs``) are neither this program's nor ordered before now."""
        out = (who != _NONE) & (who != pid)
        if self.vc is not None and epochs is not None and out.any():
            idx = np.flatnonzero(out)
            out[idx] = epochs[idx] > self.vc[who[idx]]
        return out

    def plain(self, region, off: np.ndarray, access: Access, res, sel, epoch: int) -> None:
        """A load, store or atomic of the lanes ``sel`` (bool over ``res`` arrays, None for all) of
        ``res`` into ``region`` (byte offsets ``off``) at the running program's ``epoch``. An
        atomic races with an unordered plain load or store of another program, never with another
        atomic."""
        sh = self.shadow(region)
        g = sh.g
        size = access.size
        cells = sh.index(element_cells(off, size, g, sh.ncells))
        launch = self.launch
        pid = launch.pid_linear  # one program at a time: under the batched engine the guard stands for this
        site = launch.site_id(access.op)
        if access.kind == "load":
            if sh.written:  # a storage no program stored to yet (an input) has no writer to race with
                w = sh.w[cells]
                bad = self._unordered(w, sh.we[cells] if sh.we is not None else None, pid)
                if access.volatile and sh.wa is not None:  # a volatile (or atomic) load after an atomic
                    bad &= sh.wa[cells] == 0
                if bad.any():
                    self._report(region, off, cells, size, g, bad, w, sh.ws[cells], access, "write_read", pid)
            if access.volatile:  # not kept as a reader: the atomic that sets a polled flag does not race with it
                return
            r1 = sh.r1[cells]
            fresh = r1 == _NONE
            if fresh.all():
                sh.r1[cells], sh.r1s[cells] = pid, site
                if sh.r1e is not None:
                    sh.r1e[cells] = epoch
                return
            c = cells[fresh]
            sh.r1[c], sh.r1s[c] = pid, site
            other = ~fresh & (r1 != pid)
            c2 = cells[other]
            sh.r2[c2], sh.r2s[c2] = pid, site
            if sh.r1e is not None:
                sh.r1e[c] = epoch
                sh.r2e[c2] = epoch
            return
        # a store or an atomic
        sh.written = True
        atomic = access.kind == "atomic"
        w = sh.w[cells]
        bad = self._unordered(w, sh.we[cells] if sh.we is not None else None, pid)
        if atomic and sh.wa is not None:  # atomics after atomics: no race
            bad &= sh.wa[cells] == 0
        if bad.any():
            self._report(region, off, cells, size, g, bad, w, sh.ws[cells], access, "write_write", pid)
        for r, rs, re in ((sh.r1, sh.r1s, sh.r1e), (sh.r2, sh.r2s, sh.r2e)):
            who = r[cells]
            bad = self._unordered(who, re[cells] if re is not None else None, pid)
            if bad.any():
                self._report(region, off, cells, size, g, bad, who, rs[cells], access, "read_write", pid)
        sh.w[cells], sh.ws[cells] = pid, site
        sh.r1[cells] = _NONE
        sh.r2[cells] = _NONE
        if sh.we is not None:
            sh.we[cells] = epoch
        if atomic:
            sh.need("wa")[cells] = 1
        elif sh.wa is not None:
            sh.wa[cells] = 0

    def _report(self, region, off, cells, size, g, bad, who, sites, access: Access, reason: str, pid) -> None:
        launch = self.launch
        per_lane = max(1, size // g)
        lane_bad = bad.reshape(-1, per_lane).any(axis=1) if per_lane > 1 else bad
        lane_who = who.reshape(-1, per_lane)[:, 0] if per_lane > 1 else who
        lane_site = sites.reshape(-1, per_lane)[:, 0] if per_lane > 1 else sites
        mine = lane_bad
        for s in np.unique(lane_site[mine]):
            sel = mine & (lane_site == s)
            others: List[int] = []
            for p in lane_who[sel].tolist():
                if p not in others:
                    others.append(p)
                    if len(others) >= _SHOWN_PROGRAMS:
                        break
            op, frames = launch.site(int(s))
            launch.report(Violation(
                kind="data_race", kernel="", frames=[], program_id=launch.program_of(pid), access=access.op,
                masked=access.masked, lanes=int(sel.sum()), arg=region.describe(),
                offsets=region.layout.coords(off[sel]), reason=reason,
                other={"access": op, "frames": frames,
                       "program_ids": [list(launch.program_of(p)) for p in others]}))
