"""``data_race``: two programs of one launch touch the same element, at least one writes it, and
nothing orders them.

Programs of a launch run in no defined order on the GPU (and concurrently), so a plain store of an
element that another program loads or stores gives a result that depends on scheduling. The
checked interpreter runs programs one after another; this check remembers, per element of every
storage a launch touches (a *shadow*), the last program that stored it and up to two programs that
loaded it since, with the kernel line of each access. An access by another program that conflicts
(load after store, store after load, store after store) is a race unless it is ordered:

* **Atomics are never part of a race.** ``tl.atomic_add`` & co. to the same element from many
  programs is how kernels share an element (a histogram, a split-K reduction with atomics).
* **Scalar atomics synchronize.** An atomic to a single element (a lock, a flag, a counter:
  ``tl.atomic_cas(lock, 0, 1)``, ``tl.atomic_xchg(lock, 0)``, ``tl.atomic_add(count, 1)``) with
  acquire/release semantics (the default ``acq_rel``; ``sem="relaxed"`` does not synchronize)
  releases everything its program did before it to whoever later acquires the same element, and
  acquires what earlier releasers of that element did. Orders compose (vector clocks, as in
  FastTrack), so a lock-protected read-modify-write of shared partial sums (Triton's layer-norm
  backward tutorial) and a "last program reduces the partials" counter give no reports. Atomics
  over a block of different elements (a histogram's bins) do not synchronize.

Elements are compared at the granularity of the smallest element type of the tensor arguments on
a storage. Two loads never race. A program never races with itself.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import numpy as np

from ..findings import Violation
from ._base import Access, Check

_NONE = -1
_SHOWN_PROGRAMS = 8


class _Shadow:
    """Per element of one storage: the last writer and up to two readers since, with their sites."""

    __slots__ = ("g", "w", "ws", "r1", "r1s", "r2", "r2s", "we", "r1e", "r2e")

    def __init__(self, ncells: int, g: int, epochs: bool):
        self.g = g
        self.w = np.full(ncells, _NONE, dtype=np.int32)
        self.ws = np.zeros(ncells, dtype=np.int32)
        self.r1 = np.full(ncells, _NONE, dtype=np.int32)
        self.r1s = np.zeros(ncells, dtype=np.int32)
        self.r2 = np.full(ncells, _NONE, dtype=np.int32)
        self.r2s = np.zeros(ncells, dtype=np.int32)
        self.we = self.r1e = self.r2e = None
        if epochs:
            self.with_epochs()

    def with_epochs(self) -> None:
        if self.we is None:
            n = self.w.shape[0]
            self.we, self.r1e, self.r2e = (np.zeros(n, dtype=np.int32) for _ in range(3))


class RaceCheck(Check):
    """Reports plain loads and stores of one element by two programs of a launch with no order
    between them (see the module's docstring for the rule)."""

    kind = "data_race"

    def begin_launch(self, launch) -> None:
        launch.race_state = _LaunchState(launch)

    def end_launch(self, launch) -> None:
        launch.race_state = None

    def on_program(self, launch) -> None:
        st = launch.race_state
        st.vc = None
        st.epoch = 0

    def on_access(self, launch, access: Access, res) -> None:
        if res.n == 0:
            return
        st: _LaunchState = launch.race_state
        if access.kind == "atomic":
            st.atomic(access, res)
            return
        for region, sel in launch.space._groups(res):
            off = res.off if sel is None else res.off[sel]
            st.plain(region, off, access, res if sel is None else None)


class _LaunchState:
    def __init__(self, launch):
        self.launch = launch
        self.nprog = launch.grid[0] * launch.grid[1] * launch.grid[2]
        self.shadows: Dict[int, _Shadow] = {}
        self.vc: Optional[np.ndarray] = None  # what the running program knows of others (epochs)
        self.epoch = 0
        self.synced = False
        self.sync_vc: Dict[Tuple[int, int], np.ndarray] = {}

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
            g = min(r.layout.itemsize for r in self.launch.space.regions if r.storage is storage)
            sh = self.shadows[id(storage)] = _Shadow(-(-storage.nbytes // g), g, self.synced)
        return sh

    def _unordered(self, who: np.ndarray, epochs: Optional[np.ndarray], pid: int) -> np.ndarray:
        """Which records (program ``who``, at ``epochs``) are neither this program's nor ordered before now."""
        out = (who != _NONE) & (who != pid)
        if self.vc is not None and epochs is not None and out.any():
            idx = np.flatnonzero(out)
            out[idx] = epochs[idx] > self.vc[who[idx]]
        return out

    def plain(self, region, off: np.ndarray, access: Access, whole) -> None:
        sh = self.shadow(region)
        g = sh.g
        cells = off // g  # a new array: res.off itself is never modified
        size = access.size
        if size > g:
            cells = (cells[:, None] + np.arange(size // g)[None, :]).reshape(-1)
        np.clip(cells, 0, sh.w.shape[0] - 1, out=cells)
        launch = self.launch
        pid = launch.pid_linear
        site = launch.site_id(access.op)
        epoch = self.epoch
        w = sh.w[cells]
        if access.kind == "load":
            bad = self._unordered(w, sh.we[cells] if sh.we is not None else None, pid)
            if bad.any():
                self._report(region, off, cells, size, g, bad, w, sh.ws[cells], access, "write_read")
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
        # a store
        bad = self._unordered(w, sh.we[cells] if sh.we is not None else None, pid)
        if bad.any():
            self._report(region, off, cells, size, g, bad, w, sh.ws[cells], access, "write_write")
        for r, rs, re in ((sh.r1, sh.r1s, sh.r1e), (sh.r2, sh.r2s, sh.r2e)):
            who = r[cells]
            bad = self._unordered(who, re[cells] if re is not None else None, pid)
            if bad.any():
                self._report(region, off, cells, size, g, bad, who, rs[cells], access, "read_write")
        sh.w[cells], sh.ws[cells] = pid, site
        sh.r1[cells] = _NONE
        sh.r2[cells] = _NONE
        if sh.we is not None:
            sh.we[cells] = epoch

    def _report(self, region, off, cells, size, g, bad, who, sites, access: Access, reason: str) -> None:
        launch = self.launch
        per_lane = max(1, size // g)
        lane_bad = bad.reshape(-1, per_lane).any(axis=1) if per_lane > 1 else bad
        lane_who = who.reshape(-1, per_lane)[:, 0] if per_lane > 1 else who
        lane_site = sites.reshape(-1, per_lane)[:, 0] if per_lane > 1 else sites
        for s in np.unique(lane_site[lane_bad]):
            sel = lane_bad & (lane_site == s)
            others: List[int] = []
            for p in lane_who[sel].tolist():
                if p not in others:
                    others.append(p)
                    if len(others) >= _SHOWN_PROGRAMS:
                        break
            op, frames = launch.site(int(s))
            launch.report(Violation(
                kind="data_race", kernel="", frames=[], program_id=(), access=access.op, masked=access.masked,
                lanes=int(sel.sum()), arg=region.describe(), offsets=region.layout.coords(off[sel]), reason=reason,
                other={"access": op, "frames": frames,
                       "program_ids": [list(launch.program_of(p)) for p in others]}))
