"""The script's side of ``tritonkit check --gpu``: every native launch of a ``@triton.jit`` kernel runs
its instrumented version (:mod:`.instrument`) instead, and what its record buffer holds after the
launch is appended to a JSON-lines file the command reads when the script has ended (flushed per
launch: it survives the script's crash).

A launch runs as it would without tritonkit where it cannot be instrumented (no CUDA tensor
argument, a source that cannot be read or rewritten, a CUDA graph being captured): the file says
which kernels, once each. Reading the record buffer waits for the launch to finish (one
synchronization per launch).
"""
from __future__ import annotations

import atexit
import json
import linecache
import os
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from . import device
from .instrument import REPLAY
from .launch_log import describe_tensor, launch_grid
from .report import element_index, make_report, program_id, wait

#: the environment variable naming the records file in the script's process
ENV = "TRITONKIT_GPU_RECORDS"
#: records kept per launch (a program and access site with offending lanes each); more are counted
CAPACITY = 4096

#: bytes of padding on either side of the record buffer
PADDING = 2 << 20

_state: Optional[dict] = None


def _is_cuda_tensor(v) -> bool:
    return hasattr(v, "untyped_storage") and getattr(getattr(v, "device", None), "type", None) == "cuda"


def cuda_arguments(named: Dict[str, object]) -> Tuple[frozenset, frozenset]:
    """A launch's arguments on a CUDA device (``named``: by parameter name): the names of its CUDA
    tensors, and ``(name, rank)`` of its host-side tensor descriptors over CUDA tensors."""
    from .instrument import is_descriptor
    tensors = frozenset(k for k, v in named.items() if _is_cuda_tensor(v))
    descriptors = frozenset((k, len(v.shape)) for k, v in named.items() if is_descriptor(v) and _is_cuda_tensor(v.base))
    return tensors, descriptors


class Instrumenter:
    """Runs launches of ``@triton.jit`` kernels instrumented (see :mod:`.instrument`) and reads what
    they recorded. One per process and use: it keeps the instrumented kernels (once per kernel and
    set of tensor arguments) and one record buffer per device.

    Args:
        original: Triton's own ``JITFunction.run`` (not a patched one).
        unchecked: called with ``(kernel, why)`` for what a launch leaves unchecked, at most once per
            kernel and reason.
    """

    def __init__(self, original, unchecked: Callable[[object, str], None]) -> None:
        self.original = original
        self._unchecked = unchecked
        self._cache: Dict[tuple, tuple] = {}
        self._buffers: Dict[object, object] = {}

    def prepare(self, fn, named: Dict[str, object], cuda: Tuple[frozenset, frozenset]):
        """The instrumented version of the ``JITFunction`` ``fn`` for these arguments (``named``: the
        launch's arguments by parameter name; ``cuda``: :func:`cuda_arguments` of them) and its cache
        key, or ``(None, key)`` where there is none (no CUDA tensor argument, a source that cannot be
        rewritten, one that did not compile before: said through ``unchecked``)."""
        tensors, descriptors = cuda
        absent = frozenset(k for k, v in named.items() if v is None)
        key = (id(fn), tensors, absent, descriptors)
        if not tensors and not descriptors:
            return None, key
        got = self._cache.get(key)
        if got is not None:
            return got[1] or None, key
        try:
            from .instrument import instrumented
            inst = instrumented(fn, tensors, absent, descriptors)
        except Exception as e:  # the launch still runs, unchecked, and the report says so
            inst = False
            self._unchecked(fn, f"its source could not be instrumented ({type(e).__name__}: {e})")
        if inst and inst.no_overflow:
            self._unchecked(fn, f"the offsets of the accesses at lines {', '.join(str(n) for n in inst.no_overflow)} "
                                "could not be computed again in int64 (a load or a pointer cast inside them): their "
                                "bounds are checked from the addresses, their int32 overflow is not checked")
        if inst and inst.skipped:
            self._unchecked(fn, f"the accesses at lines {', '.join(str(n) for n in sorted(set(inst.skipped)))} "
                                "have no single tensor argument their pointer derives from (block pointers, tensor "
                                "descriptors, pointers from helpers): not checked")
        self._cache[key] = (fn, inst)  # keeps fn alive, so its id is not reused
        return inst or None, key

    @staticmethod
    def partial_views(inst, named: Dict[str, object]) -> List[str]:
        """The tensor arguments whose views have more gaps than the check tells apart (or overlapping
        elements): their accesses are checked against the view's extent and outer gaps only."""
        from .instrument import root_tensor, view_layout
        return [r for r in inst.roots if not view_layout(root_tensor(named[r]))[2]]

    def launch(self, fn, inst, key, named: Dict[str, object], args, kwargs, grid,
               keep: Callable[[dict], None]) -> Tuple[Any, bool]:
        """Run the launch ``fn[grid](*args, **kwargs)`` as ``inst`` (from :meth:`prepare`), replayed
        with its writes skipped where lanes counted in a loop offended; where lanes offended, call
        ``keep`` with the launch's record (what ``tritonkit check --gpu`` writes per launch: kernel,
        sites, tensors, records, grid, ...), even where the replay raises. Returns ``(what the launch
        returned, whether lanes offended)``. Waits for the launch (one synchronization).

        Raises:
            triton.compiler.errors.CompilationError: the instrumented version does not compile
                (raised before anything ran; :meth:`prepare` gives None for it from now on).
        """
        import torch
        from triton.compiler.errors import CompilationError

        from .instrument import extra_arguments, root_tensor
        tensors = sorted(key[1])
        first = named[tensors[0]] if tensors else named[sorted(key[3])[0][0]].base
        rec = self._buffers.get(first.device)
        if rec is None:  # one record buffer per device, zeroed once; take_records zeroes what it read
            # between 2 MiB on either side: a write running past a tensor of the script's (an unchecked
            # access's) meets the padding before it meets the records
            size, pad = device.HEADER + CAPACITY * device.RECORD, PADDING // 8
            whole = torch.zeros(pad + size + pad, dtype=torch.int64, device=first.device)
            rec = self._buffers[first.device] = whole[pad:pad + size]
        extra = extra_arguments(inst, named, rec, CAPACITY)
        try:
            out = self.original(inst.jit, *args, grid=grid, warmup=False, **kwargs, **extra)
        except CompilationError:
            self._cache[key] = (fn, False)
            raise
        count, rows, cells = take_records(rec, CAPACITY)
        counted, stray = split_counters(cells, inst.sites)
        if stray:
            self._unchecked(fn, "an access tritonkit did not check wrote into its record buffer's counters: "
                                "they were left out")
        replayed = False
        try:
            if counted:  # counted sites (in loops) offended: a replay, writes skipped, makes their records
                extra[REPLAY] = 1
                try:
                    self.original(inst.jit, *args, grid=grid, warmup=False, **kwargs, **extra)
                except CompilationError as e:  # the first run's counts are reported, without programs
                    self._unchecked(fn, "its replay (which finds the programs of lanes counted in loops) did not "
                                        f"compile ({str(e).strip().splitlines()[-1][:300]})")
                else:
                    more, again, _ = take_records(rec, CAPACITY)
                    rows += [r for r in again if r[0] in counted]
                    count += more
                    replayed = True
        finally:  # kept before anything the replay raises goes on: the first run's findings stand
            if rows or counted:
                meta = {k: v for k, v in kwargs.items() if isinstance(v, (int, float, str, bool))}
                keep({"t": "launch", "kernel": fn.__name__, "file": inst.file, "count": count,
                      "sites": {str(k): [s.line, s.access, s.arg, s.ptr_line, s.masked]
                                for k, s in inst.sites.items()},
                      "tensors": {s.arg: describe_tensor(s.arg, root_tensor(named[s.root]))
                                  for s in inst.sites.values()},
                      "records": rows, "meta": meta, "grid": launch_grid(grid, named),
                      "counted": {str(k): n for k, n in counted.items()}, "replayed": replayed})
        return out, bool(rows or counted)


def install(path: str) -> None:
    """Instrument every launch of this process from now on; records go to ``path``.

    Raises:
        OSError: the file cannot be opened.
    """
    global _state
    from triton.compiler.errors import CompilationError
    from triton.runtime import jit as _jit
    if _state is not None:
        return
    fh = open(path, "a", encoding="utf-8")
    original = _jit.JITFunction.run
    told: set = set()
    clean: Dict[str, int] = {}  # launches without a record, by kernel: written at most once a second
    last = [time.monotonic()]

    def write(rec: dict) -> None:
        fh.write(json.dumps(rec) + "\n")
        fh.flush()

    def write_clean(force: bool = False) -> None:
        if clean and (force or time.monotonic() - last[0] > 1.0):
            write({"t": "clean", "counts": dict(clean)})
            clean.clear()
            last[0] = time.monotonic()

    def unchecked(fn, why: str) -> None:
        key = (id(fn), why)
        if key not in told:
            told.add(key)
            write({"t": "unchecked", "kernel": getattr(fn, "__name__", "kernel"), "why": why})

    instrumenter = Instrumenter(original, unchecked)

    def run(self, *args, grid, warmup, **kwargs):
        if warmup or getattr(self, "_tritonkit_instrumented", False):
            return original(self, *args, grid=grid, warmup=warmup, **kwargs)
        named = dict(zip(self.arg_names, args))
        named.update(kwargs)
        cuda = cuda_arguments(named)
        if not cuda[0] and not cuda[1]:
            return original(self, *args, grid=grid, warmup=warmup, **kwargs)
        import torch
        if torch.cuda.is_current_stream_capturing():
            unchecked(self, "launched while a CUDA graph was captured")
            return original(self, *args, grid=grid, warmup=warmup, **kwargs)
        inst, key = instrumenter.prepare(self, named, cuda)
        if inst is None:
            return original(self, *args, grid=grid, warmup=warmup, **kwargs)
        partial = Instrumenter.partial_views(inst, named)
        if partial:
            unchecked(self, f"the views of {', '.join(partial)} have more gaps than "
                            "the check tells apart (or overlapping elements): accesses through them are checked "
                            "against the view's extent and outer gaps only")
        try:
            out, found = instrumenter.launch(self, inst, key, named, args, kwargs, grid, keep=write)
        except CompilationError as e:  # raised before anything ran: the kernel runs as written, unchecked
            unchecked(self, f"its instrumented version did not compile ({str(e).strip().splitlines()[-1][:300]})")
            return original(self, *args, grid=grid, warmup=warmup, **kwargs)
        if not found:
            clean[self.__name__] = clean.get(self.__name__, 0) + 1
            write_clean()
        return out

    try:
        import torch
        write({"t": "start", "cuda": bool(torch.cuda.is_available())})
    except Exception:  # pragma: no cover - a script without torch: its launches say what they use
        pass
    _jit.JITFunction.run = run
    atexit.register(lambda: _state is not None and not fh.closed and write_clean(True))
    _state = {"cls": _jit.JITFunction, "run": original, "fh": fh, "flush": write_clean}


def _own(off: int) -> int:
    """A recorded offset as the kernel computed it: with :data:`.device.POISON` added for each term
    that wrapped (see :func:`.device.term`), the exact offset wrapped to int32."""
    poison = int(device.POISON.value)
    k = (off + poison // 2) // poison
    if k == 0:
        return off
    exact = off - k * poison
    return (exact + (1 << 31)) % (1 << 32) - (1 << 31)


def split_counters(cells: Dict[int, int], sites: Dict[int, object]) -> Tuple[Dict[int, int], Dict[int, int]]:
    """The header's nonzero lane counters (``cells``: site -> lanes) split into those of the kernel's
    counted sites (``sites``: site -> :class:`~.instrument.Site`) and the rest, which only a write
    tritonkit did not check can have put there: ``(counted, stray)``."""
    counted = {k: n for k, n in cells.items() if k in sites and getattr(sites[k], "counted", False)}
    return counted, {k: n for k, n in cells.items() if k not in counted}


def take_records(rec, cap: int) -> Tuple[int, List[list], Dict[int, int]]:
    """Read a launch's record buffer (see :mod:`.device`) and zero what was used, for the next
    launch: ``(slots taken, records, offending lanes of each counted site)``. Records are lists
    ``[site, x, y, z, lanes, lowest, highest, what]`` (offsets in elements from the root's first
    element, as the kernel computed them: see :func:`_own`; ``what``: 1 where some lane's offset
    wrapped); a record whose site field lacks the magic number (an unchecked access wrote over it)
    gets site -1. Waits for the launch (one synchronization)."""
    header = rec[:device.HEADER].tolist()
    count = int(header[0])
    counted = {i - 1: int(n) for i, n in enumerate(header) if i and n}
    rows: List[list] = []
    if count:
        used = min(count, cap) * device.RECORD
        body = rec[device.HEADER:device.HEADER + used]
        raw = body.view(-1, device.RECORD).tolist()
        body.zero_()
        magic, c = int(device.MAGIC.value), int(device.C.value)
        for r in raw:
            site = r[0] - magic if r[0] >> 32 == magic >> 32 else -1
            lo, hi = _own(c - r[5]), _own(r[6] - c)
            rows.append([site, r[1], r[2], r[3], r[4], min(lo, hi), max(lo, hi), r[7]])
    if count or counted:
        rec[:device.HEADER].zero_()
    return count, rows, counted


def uninstall() -> None:
    """Launch natively again (the records file stays)."""
    global _state
    if _state is None:
        return
    _state["flush"](True)
    _state["cls"].run = _state["run"]
    _state["fh"].close()
    _state = None


def read(path: str) -> Tuple[List[dict], Dict[str, int], List[dict]]:
    """The records file: ``(launches with records, clean launches by kernel, kernels left unchecked
    and why)``; lines that cannot be read (the last one, cut by a crash) are skipped. A script
    process without a CUDA device is one ``unchecked`` entry."""
    launches, clean, unchecked = [], {}, []
    try:
        fh = open(path, encoding="utf-8", errors="replace")
    except OSError:
        return launches, clean, unchecked
    with fh:
        for line in fh:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if not isinstance(rec, dict):
                continue
            if rec.get("t") == "launch" and isinstance(rec.get("records"), list):
                kept = [r for r in rec["records"] if _valid(r, rec)]
                if len(kept) < len(rec["records"]):
                    unchecked.append({"kernel": rec.get("kernel"), "why": f"{len(rec['records']) - len(kept)} "
                                      "record(s) were overwritten (an access tritonkit did not check wrote into "
                                      "its record buffer): left out"})
                rec["records"] = kept
                launches.append(rec)
            elif rec.get("t") == "clean" and isinstance(rec.get("counts"), dict):
                for k, n in rec["counts"].items():
                    clean[str(k)] = clean.get(str(k), 0) + int(n)
            elif rec.get("t") == "unchecked":
                unchecked.append(rec)
            elif rec.get("t") == "start" and rec.get("cuda") is False:
                unchecked.append({"kernel": "every kernel", "why": "the script's process has no CUDA device "
                                                                   "(torch.cuda.is_available() is False)"})
    return launches, clean, unchecked


def _valid(row, rec: dict) -> bool:
    """Whether a record can be one the guard made (its site field carries the magic number; the
    rows read back have it taken off: see :func:`install`): a known site, a program inside the
    grid, at least one offending lane, a known kind of record."""
    if not isinstance(row, list) or len(row) != device.RECORD or str(row[0]) not in (rec.get("sites") or {}):
        return False
    grid = rec.get("grid")
    if grid and not all(0 <= int(p) < int(g) for p, g in zip(row[1:4], grid)):
        return False
    return int(row[4]) >= 1 and int(row[7]) in (device.OUT_OF_BOUNDS, device.OVERFLOW)


def _reason(t: Optional[dict], lowest: int, highest: int) -> str:
    """Where offending offsets (elements from the view's first element) fall: before the start of the
    tensor's storage, past its end, or inside it but outside the view."""
    if t is None:
        return "past_end" if highest >= 0 else "before_start"
    size = max(1, int(t["itemsize"]))
    start = (int(t["base"]) - int(t["ptr"])) // size
    end = (int(t["base"]) + int(t["nbytes"]) - int(t["ptr"])) // size
    if lowest < start:
        return "before_start"
    if highest >= end:
        return "past_end"
    return "outside_view"


def _outside(t: Optional[dict], lowest: int, highest: int) -> bool:
    """Whether offsets (elements from the view's first element) reach outside the view's extent."""
    if t is None:
        return True
    from .instrument import extent
    return lowest < 0 or highest >= extent(t.get("shape") or [], t.get("strides") or [])


def to_findings(launches: List[dict]):
    """The records of the launches folded into findings, in the order they were first recorded:
    ``out_of_bounds`` ones per kernel line, access, argument and reason (outside the storage or only
    outside the view), ``int_overflow`` ones per line where the access's pointer was formed."""
    from ..checks.bounds import REASON_TEXT, BoundsCheck
    from ..checks.overflow import OverflowCheck
    from ..findings import Finding
    folds: Dict[tuple, dict] = {}

    def fold(key: tuple, rec: dict, t: Optional[dict], site: list) -> dict:
        return folds.setdefault(key, {"t": t, "masked": len(site) < 5 or bool(site[4]), "count": 0, "seen": set(),
                                      "lo": None, "hi": None, "launches": set()})

    for rec in launches:
        sites, tensors = rec.get("sites") or {}, rec.get("tensors") or {}
        where = (rec.get("kernel"), rec.get("file"))
        recorded = {str(r[0]) for r in rec["records"]}
        for site_id, lanes in (rec.get("counted") or {}).items():
            site = sites.get(str(site_id))
            if site is None or str(site_id) in recorded:
                continue
            # lanes counted in a loop that the replay did not find again (the launch changed what its
            # addresses depend on): the finding, without its programs and elements
            line, access, root = site[:3]
            f = fold(where + (line, access, root, "unreplayed", line), rec, tensors.get(root), site)
            f["count"] += int(lanes)
            f["launches"].add(id(rec))
        for row in rec["records"]:
            site = sites.get(str(row[0]))
            if site is None:
                continue
            line, access, root = site[:3]
            t = tensors.get(root)
            lowest, highest = int(row[5]), int(row[6])
            keys = []
            if int(row[7]) == device.OVERFLOW:
                keys.append(where + (int(site[3]) if len(site) > 3 else line, access, root, "overflow", line))
            if int(row[7]) != device.OVERFLOW or _outside(t, lowest, highest):  # the wrapped lanes fall outside
                keys.append(where + (line, access, root, _reason(t, lowest, highest), line))
            for key in keys:
                f = fold(key, rec, t, site)
                f["count"] += int(row[4])
                f["launches"].add(id(rec))
                f["seen"].add(tuple(program_id(row[1:4], rec.get("grid"))))
                f["lo"] = lowest if f["lo"] is None else min(f["lo"], lowest)
                f["hi"] = highest if f["hi"] is None else max(f["hi"], highest)
    out = []
    for (kernel, file, line, access, root, reason, at), f in folds.items():
        t = f["t"]
        programs = [list(p) for p in sorted(f["seen"])]  # the order the CPU check runs programs in
        shape = "x".join(str(s) for s in (t or {}).get("shape", []))
        if f["lo"] is None:
            elements = ""
        elif f["lo"] == f["hi"]:
            elements = f"{root}[{f['lo']}]"
        else:
            elements = f"{root}[{f['lo']}:{f['hi'] + 1}] (flat, the range)"
        common = dict(kernel=str(kernel), file=str(file), line=int(line),
                      source=linecache.getline(str(file), int(line)).strip(), arg=root, masked=f["masked"],
                      tensor={"shape": t["shape"], "dtype": t["dtype"], "strides": t["strides"]} if t else None,
                      access=access, count=f["count"], program_ids=programs[:8], num_programs=len(programs),
                      occurrences=f["count"], launches=len(f["launches"]))
        if reason == "overflow":
            finding = Finding(
                kind=OverflowCheck.kind, reason="int32", elements="", element_indices=[],
                message=f"int32 offset arithmetic overflows: computed in int64, the {access} at "
                        f"{os.path.basename(str(file))}:{at} reaches {elements} of {root} ({shape} "
                        f"{(t or {}).get('dtype', '')}), which the kernel's own int32 offsets wrapped: {f['count']} "
                        f"lanes in {len(programs)} program(s), checked on the GPU",
                facts=[["feeds", f"the {access} at {os.path.basename(str(file))}:{at}"],
                       ["found by", "the instrumented kernel on the GPU (offsets computed again in int64)"]],
                **common)
        elif reason == "unreplayed":
            finding = Finding(
                kind=BoundsCheck.kind, elements="", reason="outside", element_indices=[],
                message=f"{access} outside {root} ({shape} {(t or {}).get('dtype', '')}): {f['count']} lanes, counted "
                        "in a loop on the GPU; the replay of the launch that finds their programs and elements found "
                        "none (the launch changed what the addresses are computed from)",
                facts=[["found by", "the instrumented kernel on the GPU (the lanes were not performed)"]], **common)
        else:
            finding = Finding(
                kind=BoundsCheck.kind, elements=elements, reason=reason,
                element_indices=[element_index(t, f["lo"]), element_index(t, f["hi"])] if t and f["lo"] is not None
                else [],
                message=f"{access} {REASON_TEXT[reason]} {root} ({shape} {(t or {}).get('dtype', '')}): "
                        f"{f['count']} lanes in {len(programs)} program(s), checked on the GPU",
                facts=[["found by", "the instrumented kernel on the GPU (the lanes were not performed)"]], **common)
        finding.hint = (OverflowCheck if reason == "overflow" else BoundsCheck).hint(finding)  # the CPU check's hints
        out.append(finding)
    return out


def report(target) -> Tuple[Any, int]:
    """Run ``target`` (a :class:`~tritonkit.cli._target.Target`) with every launch instrumented and
    build its :class:`~tritonkit.check.CheckReport`. Returns ``(report, the script's exit status)``."""
    import os
    import shutil
    import subprocess
    import sys
    import tempfile

    from ..checks.bounds import BoundsCheck
    from ..results import LaunchRecord
    work = tempfile.mkdtemp(prefix="tritonkit-gpu-")
    try:
        path = os.path.join(work, "records.jsonl")
        env = dict(os.environ, **{ENV: path})
        env.pop("TRITON_INTERPRET", None)
        code = wait(subprocess.Popen([sys.executable, "-m", "tritonkit.cli._child", "gpu", *target.words()], env=env))
        launches, clean, unchecked = read(path)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    findings = to_findings(launches)
    # a record per launch that found something; the clean ones are counted per kernel (a native run
    # may make millions of launches)
    records = [LaunchRecord(kernel=str(rec.get("kernel")), grid=tuple(rec.get("grid") or (0, 0, 0)), engine="gpu")
               for rec in launches]
    gpu = {"mode": "instrumented", "unchecked": [f"{u.get('kernel')}: {u.get('why')}" for u in unchecked],
           "races": "data races: not checked in this mode: the CPU check finds them"}
    from ..checks.overflow import OverflowCheck
    return make_report(target, code, findings, records, gpu, counted=clean,
                       kinds=[BoundsCheck.kind, OverflowCheck.kind]), code
