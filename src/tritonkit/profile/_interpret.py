"""Bytes and FLOPs of small launches, counted by running them in tritonkit's checked interpreter.

The last source of a kernel's work figures, after ``launch_metadata`` and Nsight Compute: while
the profiled script runs, the first launches of each kernel with no ``launch_metadata`` are
captured (each distinct signature of argument shapes, strides, dtypes, scalar values, meta-
parameters and grid, once; tensor arguments copied to host memory before the launch, so in-place
kernels are counted on their inputs); after the script, each is replayed on the CPU with only the
:class:`~tritonkit.check.checks.AccessMap` check, which counts the bytes of the distinct elements
read and written (what a perfect cache fetches from DRAM) and the FLOPs executed (see
``LaunchRecord.flops``). A kernel's figures are the counts of its signatures weighted by how many of
its first ``SIGNED_LAUNCHES`` launches had each.

What it costs the profile: one device-to-host copy of the arguments per captured signature (a
``cudaMemcpy``, which synchronizes the stream: the script's host timeline shifts there, the
kernels' GPU times do not) and the CPU time of the replay, after the script.
"""
from __future__ import annotations

import dataclasses
import time
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ._plain import integer, number, numbers, require_mapping, text

#: signatures of one kernel captured at most
MAX_SIGNATURES = 4
#: launches of each kernel whose signature is computed (a few us each); the weights of the
#: signatures come from these, later launches only count (so a long run costs nothing more)
SIGNED_LAUNCHES = 16
#: bytes of tensor arguments one captured launch may have (default; ``tritonkit profile --interpret-limit``)
LAUNCH_LIMIT = 64 << 20
#: bytes of host copies kept in all
TOTAL_LIMIT = 512 << 20
#: seconds one replay may take before it is given up
REPLAY_TIMEOUT_S = 30.0


@dataclasses.dataclass
class _Captured:
    jit: Any
    grid: Any
    args: tuple
    kwargs: dict
    launches: int = 1


@dataclasses.dataclass
class Counted:
    """One kernel's work as the interpreter counted it.

    Attributes:
        kernel: the Triton function's name.
        launches_seen: launches of it the capture saw (all of them unless the profile stopped
            timing launches, see :data:`tritonkit.profile._child.MAX_TIMED`).
        counted: launches whose signature was replayed, among the first ``SIGNED_LAUNCHES`` of
            it: the per-launch figures are their weighted mean, taken to hold for every launch.
        bytes: unique bytes read + written per launch, bytes (weighted mean over signatures), or None.
        requested_bytes: bytes all active lanes moved per launch (a load of an element by two
            programs counts twice), or None.
        flops: FLOP width name (``"flops16"``, ``"flops32"``) -> FLOPs per launch.
        why_not: when nothing could be counted, why (too big, replay failed, timed out).
    """

    kernel: str
    launches_seen: int = 0
    counted: int = 0
    bytes: Optional[float] = None
    requested_bytes: Optional[float] = None
    flops: Dict[str, float] = dataclasses.field(default_factory=dict)
    why_not: str = ""

    def to_dict(self) -> dict:
        """Plain JSON data (the attributes above; bytes and FLOPs per launch)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Counted":
        """The inverse of :meth:`to_dict`; missing or malformed fields take their defaults (nothing
        counted), unknown keys are ignored.

        Raises:
            TypeError: ``d`` is not a mapping.
        """
        d = require_mapping(d, "an interpreter count")
        return cls(text(d.get("kernel")), integer(d.get("launches_seen")), integer(d.get("counted")),
                   number(d.get("bytes")), number(d.get("requested_bytes")), numbers(d.get("flops")),
                   text(d.get("why_not")))


def _tensor_signature(t) -> tuple:
    return ("T", str(t.dtype), tuple(t.shape), tuple(t.stride()), t.storage_offset(),
            t.untyped_storage().nbytes())


def _signature(args, kwargs, grid) -> tuple:
    import torch

    def item(v):
        if isinstance(v, torch.Tensor):
            return _tensor_signature(v)
        if isinstance(v, (int, float, bool, str, type(None))):
            return v
        if isinstance(v, (tuple, list)):
            return tuple(item(x) for x in v)
        return type(v).__name__  # descriptors and other objects: by type (their tensors are not copied)

    g = grid if not callable(grid) else getattr(grid, "__code__", None) or id(grid)
    return (tuple(item(a) for a in args), tuple(sorted((k, item(v)) for k, v in kwargs.items())), g)


class LaunchCapture:
    """Captures the first launches of each kernel without ``launch_metadata`` for :meth:`count`.

    Args:
        launch_limit: bytes of tensor arguments (their whole storages) a launch may have to be
            captured; 0 captures nothing.
        total_limit: bytes of host copies kept in all.
    """

    def __init__(self, launch_limit: int = LAUNCH_LIMIT, total_limit: int = TOTAL_LIMIT):
        self.launch_limit = launch_limit
        self.total_limit = total_limit
        self.kept_bytes = 0
        self.seen: Dict[str, int] = {}
        self.captured: Dict[str, Dict[tuple, _Captured]] = {}
        self.skipped: Dict[str, str] = {}

    def on_launch(self, jit, args: tuple, kwargs: dict, grid) -> None:
        """Note one launch of ``jit`` (a ``JITFunction``) before it runs; copy its arguments to the
        host when its signature is new and small enough. Never raises."""
        if self.launch_limit <= 0 or getattr(jit, "launch_metadata", None) is not None:
            return
        name = jit.fn.__name__
        seen = self.seen[name] = self.seen.get(name, 0) + 1
        if seen > SIGNED_LAUNCHES:
            return
        try:
            sig = _signature(args, kwargs, grid)
            mine = self.captured.setdefault(name, {})
            if sig in mine:
                mine[sig].launches += 1
                return
            if len(mine) >= MAX_SIGNATURES:
                return
            size = _storage_bytes(args)
            if size > self.launch_limit:
                self.skipped.setdefault(name, f"its arguments take {size / 2**20:.0f} MiB, over the "
                                              f"{self.launch_limit / 2**20:.0f} MiB limit of --interpret-limit")
                return
            if self.kept_bytes + size > self.total_limit:
                self.skipped.setdefault(name, "the host copies of other launches already fill "
                                              f"{self.total_limit / 2**20:.0f} MiB")
                return
            mine[sig] = _Captured(jit=jit, grid=grid, args=_host_copies(args), kwargs=dict(kwargs))
            self.kept_bytes += size
        except Exception as e:  # never break the profiled script
            self.skipped.setdefault(name, f"its arguments could not be copied ({type(e).__name__}: {e})")

    def count(self, timeout_s: float = REPLAY_TIMEOUT_S) -> Dict[str, Counted]:
        """Replay every captured launch in the checked interpreter; returns the counts by kernel name."""
        out: Dict[str, Counted] = {}
        for name, seen in self.seen.items():
            c = out[name] = Counted(kernel=name, launches_seen=seen)
            per_sig: List[Tuple[int, Any]] = []
            for cap in self.captured.get(name, {}).values():
                record, why = _replay(cap, timeout_s)
                if record is None:
                    c.why_not = c.why_not or why
                    continue
                per_sig.append((cap.launches, record))
            if not per_sig:
                c.why_not = c.why_not or self.skipped.get(name, "no launch was captured")
                continue
            n = sum(w for w, _ in per_sig)
            c.counted = n
            if all(r.unique_bytes_read is not None for _, r in per_sig):
                c.bytes = sum(w * (r.unique_bytes_read + r.unique_bytes_written) for w, r in per_sig) / n
            c.requested_bytes = sum(w * ((r.bytes_read or 0) + (r.bytes_written or 0)) for w, r in per_sig) / n
            widths = {k for _, r in per_sig for k in r.flops_by_width}
            c.flops = {k: sum(w * r.flops_by_width.get(k, 0) for w, r in per_sig) / n for k in sorted(widths)}
        return out


def _storage_bytes(args) -> int:
    seen = {}
    for a in _tensors(args):
        s = a.untyped_storage()
        seen[(a.device, s.data_ptr())] = s.nbytes()
    return sum(seen.values())


def _tensors(args):
    import torch
    for a in args:
        if isinstance(a, torch.Tensor):
            yield a
        elif isinstance(a, (tuple, list)):
            yield from _tensors(a)


def _host_copies(args) -> tuple:
    """The arguments with every tensor replaced by a host copy of its whole storage, viewed the same
    way (tensors sharing a storage share the copy)."""
    import torch
    storages: Dict[tuple, Any] = {}

    def copy(v):
        if isinstance(v, torch.Tensor):
            s = v.untyped_storage()
            key = (v.device, s.data_ptr())
            host = storages.get(key)
            if host is None:
                host = storages[key] = torch.empty(s.nbytes(), dtype=torch.uint8).untyped_storage()
                host.copy_(s)
            return torch.empty(0, dtype=v.dtype).set_(host, v.storage_offset(), v.shape, v.stride())
        if isinstance(v, tuple):
            return tuple(copy(x) for x in v)
        if isinstance(v, list):
            return [copy(x) for x in v]
        return v
    return tuple(copy(a) for a in args)


def _replay(cap: _Captured, timeout_s: float):
    """Run one captured launch in the checked interpreter; returns ``(LaunchRecord, "")`` or
    ``(None, why)``."""
    from ..check import CheckAborted, checking
    from ..check.checks import AccessMap
    start = time.perf_counter()
    session = None
    try:
        with checking(checks=[AccessMap(maps_per_kernel=0)], timeout=timeout_s) as session:
            cap.jit[cap.grid](*cap.args, **cap.kwargs)
    except CheckAborted:
        pass
    except Exception as e:
        return None, f"the interpreter could not replay it ({type(e).__name__}: {e})"
    if session is None or not session.launches:
        return None, "the interpreter ran no launch"
    record = session.launches[-1]
    if record.status != "ok":
        kinds = ", ".join(sorted({f.kind for f in session.findings})) or record.status
        return None, f"the replay did not finish ({kinds}, {time.perf_counter() - start:.1f} s)"
    return record, ""


def apply_interpreted(kernels: list, counted: Dict[str, Counted]) -> list:
    """Fill in bytes and FLOPs counted by the interpreter for the kernels that have none.

    Args:
        kernels: :class:`~tritonkit.profile._proton.KernelStats` (not modified).
        counted: kernel name (as in ``kernels``) -> its :class:`Counted`.

    Returns:
        A new list in the same order; a kernel with ``work_source`` None and a count gets
        ``bytes`` = unique bytes per launch x its Proton launches, ``flops`` = per launch x launches
        (by width in bits), ``work_source="interpreter"``.
    """
    out = []
    for k in kernels:
        c = counted.get(k.name) if k.work_source is None else None
        if c is None or not c.counted:
            out.append(k)
            continue
        per_bytes = c.bytes
        flops = {int(w.replace("flops", "")): v * k.launches for w, v in c.flops.items() if v}
        if per_bytes is None and not flops:
            out.append(k)
            continue
        out.append(dataclasses.replace(k, bytes=None if per_bytes is None else per_bytes * k.launches, flops=flops,
                                       work_source="interpreter"))
    return out
