"""What a launch touched: bytes moved (all lanes and unique elements) and memory-access maps.

Not a finding kind: :class:`AccessMap` is a :class:`Check` that reports nothing. It counts, per
launch, the bytes the active lanes of loads, stores and atomics moved inside the tensors
(``LaunchRecord.bytes_read`` / ``bytes_written``) and the bytes of the distinct elements they
touched (``unique_bytes_read`` / ``unique_bytes_written``: what a perfect cache would fetch from
DRAM, the figure a roofline wants). For the first launches of each kernel it also keeps a binned
map per tensor argument of which elements were read and written, by which program (the highest
program id per bin), and where lanes fell outside the tensor (``LaunchRecord.access_maps``, drawn
by ``tritonkit doctor``).

The maps are in the tensor's coordinates as a 2-D canvas: a 1-D tensor of ``n`` elements is one
row of ``n``; a tensor of more dims is ``prod(shape[:-1])`` rows of ``shape[-1]`` columns. A
canvas larger than ``max_bins`` is downsampled: each bin covers ``bin_rows x bin_cols`` elements.
"""
from __future__ import annotations

import dataclasses
from typing import Dict, List, Optional, Tuple

import numpy as np

from .base import Access, Check

#: distinct out-of-bounds element coordinates kept per argument and launch (the rest are counted)
MAX_OOB = 4096


def canvas_of(shape: Tuple[int, ...]) -> Tuple[int, int]:
    """The 2-D canvas (rows, cols) a tensor of ``shape`` is drawn on (see the module docstring)."""
    if len(shape) == 0:
        return 1, 1
    if len(shape) == 1:
        return 1, int(shape[0])
    return int(np.prod(shape[:-1], dtype=np.int64)), int(shape[-1])


def _bin_size(extent: int, bins: int) -> int:
    return max(1, -(-extent // max(1, bins)))


@dataclasses.dataclass
class _Map:
    """The binned access map of one tensor argument in one launch (see :meth:`to_dict`)."""

    arg: str
    shape: Tuple[int, ...]
    dtype: str
    strides: Tuple[int, ...]
    rows: int
    cols: int
    bin_rows: int
    bin_cols: int
    reads: np.ndarray
    writes: np.ndarray
    read_program: np.ndarray
    write_program: np.ndarray
    oob: Dict[Tuple[int, int, str], int] = dataclasses.field(default_factory=dict)
    oob_lanes: int = 0
    oob_truncated: bool = False

    def add_oob(self, key: Tuple[int, int, str], lanes: int) -> bool:
        """Count ``lanes`` lanes outside the tensor at ``key`` (row, col, access kind); False where the
        element is not kept (``MAX_OOB`` are already: the map is then marked truncated)."""
        if key in self.oob:
            self.oob[key] += lanes
        elif len(self.oob) < MAX_OOB:
            self.oob[key] = lanes
        else:
            self.oob_truncated = True
            return False
        return True

    def to_dict(self, programs: int) -> dict:
        """Plain JSON data: ``reads``/``writes`` (lanes per bin), ``read_program``/``write_program``
        (the highest linear id of the programs that read/wrote in the bin, -1 none: programs have no
        order on a GPU, so not the "last"; the same under both engines), each a list of
        ``ceil(rows / bin_rows)`` lists of ``ceil(cols / bin_cols)`` ints; ``oob``: ``[row, col,
        kind, lanes]`` per element outside the tensor, in canvas coordinates (may be negative or
        past ``rows``/``cols``), sorted."""
        return {"arg": self.arg, "shape": list(self.shape), "dtype": self.dtype, "strides": list(self.strides),
                "rows": self.rows, "cols": self.cols, "bin_rows": self.bin_rows, "bin_cols": self.bin_cols,
                "reads": self.reads.tolist(), "writes": self.writes.tolist(),
                "read_program": self.read_program.tolist(), "write_program": self.write_program.tolist(),
                "oob": [[r, c, k, n] for (r, c, k), n in sorted(self.oob.items())], "oob_lanes": self.oob_lanes,
                "oob_truncated": self.oob_truncated, "programs": programs}


class _Seen:
    """Which elements of one storage were read and written (bool per element of ``itemsize``)."""

    def __init__(self, nbytes: int, itemsize: int):
        self.itemsize = itemsize
        n = max(1, nbytes // itemsize)
        self.read = np.zeros(n, dtype=bool)
        self.written = np.zeros(n, dtype=bool)


class AccessMap(Check):
    """Counts the bytes each launch moves and keeps access maps of its first launches.

    Args:
        maps_per_kernel: launches of each kernel that get access maps (0: none, counts only).
        max_maps: launches that get access maps in all.
        max_bins: the most bins of a map, ``(rows, cols)``; bigger tensors are downsampled.
        unique_limit: storages larger than this many bytes are not tracked per element (their
            ``unique_bytes_*`` are then None).

    After each launch, its :class:`~tritonkit.check.LaunchRecord` has ``bytes_read``,
    ``bytes_written`` (bytes, all active in-bounds lanes; an atomic counts as both),
    ``unique_bytes_read``, ``unique_bytes_written`` (bytes of distinct elements) and
    ``access_maps`` (a list of dicts, see ``_Map.to_dict``).
    """

    kind = ""  # reports nothing
    order = 90

    def __init__(self, maps_per_kernel: int = 2, max_maps: int = 16, max_bins: Tuple[int, int] = (64, 256),
                 unique_limit: int = 1 << 30):
        self.maps_per_kernel = maps_per_kernel
        self.max_maps = max_maps
        self.max_bins = max_bins
        self.unique_limit = unique_limit
        self._mapped: Dict[str, int] = {}
        self._maps_made = 0
        self._state: Optional[dict] = None

    def begin_launch(self, launch) -> None:
        want = (self._maps_made < self.max_maps and self._mapped.get(launch.kernel, 0) < self.maps_per_kernel)
        if want:
            self._mapped[launch.kernel] = self._mapped.get(launch.kernel, 0) + 1
            self._maps_made += 1
        self._state = {"maps": {} if want else None, "seen": {}, "counts": [0, 0], "untracked": False}

    def end_launch(self, launch) -> None:
        st, self._state = self._state, None
        if st is None:
            return
        r = launch.record
        r.bytes_read, r.bytes_written = st["counts"]
        if st["untracked"]:
            r.unique_bytes_read = r.unique_bytes_written = None
        else:
            r.unique_bytes_read = sum(int(s.read.sum()) * s.itemsize for s in st["seen"].values())
            r.unique_bytes_written = sum(int(s.written.sum()) * s.itemsize for s in st["seen"].values())
        if st["maps"] is not None:
            programs = int(np.prod(launch.grid))
            r.access_maps = [m.to_dict(programs) for m in st["maps"].values()]

    # --- a launch shared out between processes -----------------------------------------------------------
    def share_begin(self, launch) -> None:
        st = self._state
        if st is not None:  # from here on, this worker's share only: counts, elements and maps from zero
            self._state = {"maps": {} if st["maps"] is not None else None, "seen": {}, "counts": [0, 0],
                           "untracked": False}

    def share_export(self, launch):
        st = self._state
        if st is None:
            return None
        seen = {key: (s.itemsize, s.read.shape[0], np.packbits(s.read), np.packbits(s.written))
                for key, s in st["seen"].items()}
        return {"counts": st["counts"], "untracked": st["untracked"], "seen": seen, "maps": st["maps"]}

    def share_merge(self, launch, state, written) -> None:
        st = self._state
        if st is None or state is None:
            return
        st["counts"][0] += state["counts"][0]
        st["counts"][1] += state["counts"][1]
        st["untracked"] = st["untracked"] or state["untracked"]
        for key, (itemsize, n, read, wrote) in state["seen"].items():
            seen = st["seen"].get(key)
            if seen is None:
                seen = st["seen"][key] = _Seen(n * itemsize, itemsize)
            seen.read |= np.unpackbits(read, count=n).astype(bool)
            seen.written |= np.unpackbits(wrote, count=n).astype(bool)
        for slot, theirs in (state["maps"] or {}).items():
            m = st["maps"].get(slot)
            if m is None:
                st["maps"][slot] = theirs
                continue
            m.reads += theirs.reads
            m.writes += theirs.writes
            np.maximum(m.read_program, theirs.read_program, out=m.read_program)
            np.maximum(m.write_program, theirs.write_program, out=m.write_program)
            m.oob_lanes += theirs.oob_lanes
            m.oob_truncated = m.oob_truncated or theirs.oob_truncated
            for key, k in theirs.oob.items():  # in the order the worker met them, as a serial run would
                m.add_oob(key, k)

    # --- per access ----------------------------------------------------------------------------------
    def on_access(self, launch, access: Access, res) -> None:
        st = self._state
        if st is None or res.n == 0:
            return
        reads = access.kind in ("load", "atomic")
        writes = access.kind in ("store", "atomic")
        space = launch.space
        # the batched engine makes a load with the same addresses in every program of a batch once,
        # with the first program's lanes: it stands for all P programs of the batch
        weight = 1
        if launch.batch is not None and launch.uniform_access:
            weight = int(launch.batch.pids.shape[0])
        if res.single_slot >= 0:
            groups = [(res.single_slot, None)]
        else:
            groups = [(int(s), res.slot == s) for s in np.unique(res.slot)]
        for slot, sel in groups:
            region = space.region(slot)
            if region is None:
                continue
            off = res.off if sel is None else res.off[sel]
            valid = region.layout.valid(off, access.size)
            n_ok = int(valid.sum())
            counts = st["counts"]
            moved = n_ok * access.size * weight
            if reads:
                counts[0] += moved
            if writes:
                counts[1] += moved
            launch.on_undo(lambda c=counts, m=moved, rd=reads, wr=writes: _uncount(c, m, rd, wr))
            if n_ok:
                self._mark_seen(launch, st, region, off[valid], access.size, reads, writes)
            if st["maps"] is not None:
                if weight > 1:  # every program of the batch touched them: the highest id stands
                    pids = int(launch.batch.pids.max())
                else:
                    pids = launch.lane_programs(res, None if sel is None else np.flatnonzero(sel))
                self._map(launch, st, region, off, valid, pids, access, reads, writes, weight)

    def _mark_seen(self, launch, st, region, off: np.ndarray, size: int, reads: bool, writes: bool) -> None:
        storage = region.storage
        itemsize = region.layout.itemsize
        if storage.nbytes > self.unique_limit:
            st["untracked"] = True
            return
        key = (id(storage), itemsize)
        seen = st["seen"].get(key)
        if seen is None:
            seen = st["seen"][key] = _Seen(storage.nbytes, itemsize)
        cells = off // itemsize
        if size > itemsize:
            cells = (cells[:, None] + np.arange(size // itemsize)[None, :]).reshape(-1)
        np.clip(cells, 0, seen.read.shape[0] - 1, out=cells)
        for flag, arr in ((reads, seen.read), (writes, seen.written)):
            if flag:
                old = arr[cells]
                if not old.all():
                    launch.on_undo(lambda a=arr, c=cells, o=old: a.__setitem__(c, o))
                    arr[cells] = True

    def _map(self, launch, st, region, off, valid, pids, access: Access, reads: bool, writes: bool,
             weight: int = 1) -> None:
        m = st["maps"].get(region.slot)
        if m is None:
            m = st["maps"][region.slot] = self._new_map(region)
        coords = region.layout.coords(off)
        if coords.shape[1] == 1:
            row, col = np.zeros(coords.shape[0], dtype=np.int64), coords[:, 0]
        else:
            lead = coords[:, :-1]
            shape = region.shape[:-1]
            row = np.zeros(coords.shape[0], dtype=np.int64)
            for d in range(lead.shape[1]):
                row = row * int(shape[d]) + lead[:, d]
            col = coords[:, -1]
        pids = np.broadcast_to(np.asarray(pids, dtype=np.int64), off.shape)
        if valid.any():
            b = (row[valid] // m.bin_rows) * m.reads.shape[1] + col[valid] // m.bin_cols
            p = pids[valid]
            for flag, count, last in ((reads, m.reads, m.read_program), (writes, m.writes, m.write_program)):
                if not flag:
                    continue
                flat_count, flat_last = count.reshape(-1), last.reshape(-1)
                add = np.bincount(b, minlength=flat_count.shape[0]) * weight
                flat_count += add
                uniq = np.flatnonzero(add)
                old = flat_last[uniq].copy()
                np.maximum.at(flat_last, b, p)  # the highest program id: the same whatever order programs ran in
                launch.on_undo(lambda fc=flat_count, a=add, fl=flat_last, u=uniq, o=old: _unmap(fc, a, fl, u, o))
        bad = ~valid
        if bad.any():
            n_bad = int(bad.sum()) * weight
            m.oob_lanes += n_bad
            keys, lanes = np.unique(np.stack([row[bad], col[bad]], axis=1), axis=0, return_counts=True)
            lanes = lanes * weight
            added = []
            for (r, c), k in zip(keys.tolist(), lanes.tolist()):
                key = (r, c, access.kind)
                if m.add_oob(key, k):
                    added.append((key, k))
            launch.on_undo(lambda mm=m, a=added, nb=n_bad: _unoob(mm, a, nb))

    def _new_map(self, region) -> _Map:
        rows, cols = canvas_of(region.shape)
        max_r, max_c = self.max_bins
        if rows == 1:  # a 1-D tensor is one long row: give it all the bins
            br, bc = 1, _bin_size(cols, max_r * max_c)
        else:
            br, bc = _bin_size(rows, max_r), _bin_size(cols, max_c)
        shape = (max(1, -(-rows // br)), max(1, -(-cols // bc)))
        return _Map(arg=region.name, shape=tuple(region.shape), dtype=region.dtype, strides=tuple(region.strides),
                    rows=rows, cols=cols, bin_rows=br, bin_cols=bc,
                    reads=np.zeros(shape, dtype=np.int64), writes=np.zeros(shape, dtype=np.int64),
                    read_program=np.full(shape, -1, dtype=np.int64), write_program=np.full(shape, -1, dtype=np.int64))


def _uncount(counts: List[int], moved: int, reads: bool, writes: bool) -> None:
    if reads:
        counts[0] -= moved
    if writes:
        counts[1] -= moved


def _unmap(flat_count: np.ndarray, add: np.ndarray, flat_last: np.ndarray, uniq: np.ndarray, old: np.ndarray) -> None:
    flat_count -= add
    flat_last[uniq] = old


def _unoob(m: _Map, added, n_bad: int) -> None:
    m.oob_lanes -= n_bad
    for key, k in added:
        left = m.oob.get(key, 0) - k
        if left > 0:
            m.oob[key] = left
        else:
            m.oob.pop(key, None)
