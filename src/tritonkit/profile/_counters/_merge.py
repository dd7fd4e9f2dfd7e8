"""Counters merged into Proton's kernels: per-kernel totals over ncu's launches, bytes and FLOPs
filled in for kernels without ``launch_metadata``, and Proton's kernel times against ncu's."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, NamedTuple, Optional

from .._proton import KernelStats, match_name
from ._csv import CounterRecord
from ._ncu import function_name

#: the accuracy check: Proton's mean kernel time within this share of ncu's, for kernels of at
#: least :data:`ACCURACY_MIN_US`.
ACCURACY_TOLERANCE = 0.03
ACCURACY_MIN_US = 50.0


@dataclass
class CounterTotals:
    """One kernel's counters summed over its profiled launches.

    Attributes:
        name: the kernel's name as ncu printed it.
        launches: launches profiled.
        time_ns: GPU time summed over them, ns.
        bytes: DRAM bytes summed over them (None where never collected).
        flops: width -> FLOPs summed over them.
        timed / measured_bytes: how many launches had a time / DRAM bytes (the per-launch means divide by these).
    """

    name: str
    launches: int = 0
    time_ns: float = 0.0
    bytes: Optional[float] = None
    flops: Dict[int, float] = field(default_factory=dict)
    timed: int = 0
    measured_bytes: int = 0

    @property
    def mean_us(self) -> Optional[float]:
        """Mean GPU time per launch, microseconds (None where no launch was timed)."""
        return self.time_ns / self.timed / 1e3 if self.timed else None

    @property
    def bytes_per_launch(self) -> Optional[float]:
        """Mean DRAM bytes per launch (None where not collected)."""
        return self.bytes / self.measured_bytes if self.bytes is not None and self.measured_bytes else None

    @property
    def flops_per_launch(self) -> Dict[int, float]:
        """Width -> mean FLOPs per launch."""
        return {w: v / max(self.launches, 1) for w, v in self.flops.items()}


class TimeComparison(NamedTuple):
    """Proton's mean time of a kernel next to ncu's (``rel_diff`` = proton / ncu - 1)."""

    name: str
    proton_mean_us: float
    ncu_mean_us: float
    rel_diff: float


def aggregate(records: Iterable[CounterRecord]) -> Dict[str, CounterTotals]:
    """Sum the launches of each kernel.

    Args:
        records: from :func:`parse_ncu_csv` / :func:`run_ncu`.

    Returns:
        Kernel name (as ncu printed it) -> :class:`CounterTotals` (launches, time in ns, DRAM bytes,
        FLOPs by width, each summed over the launches).
    """
    out: Dict[str, CounterTotals] = {}
    for r in records:
        t = out.setdefault(r.name, CounterTotals(r.name))
        t.launches += 1
        if r.time_ns is not None:
            t.time_ns += r.time_ns
            t.timed += 1
        if r.dram_bytes is not None:
            t.bytes = (t.bytes or 0.0) + r.dram_bytes
            t.measured_bytes += 1
        for w, v in r.flops.items():
            t.flops[w] = t.flops.get(w, 0.0) + v
    return out


def match_totals(name: str, totals: Dict[str, CounterTotals]) -> Optional[CounterTotals]:
    """The counters of a Proton kernel name: the same name, else the longest ncu name that the Proton
    name starts with as a whole word (``"add_kernel n=4096"`` -> ``add_kernel``, never
    ``add_kernel_plain`` -> ``add_kernel``).

    Args:
        name: a Proton kernel name.
        totals: from :func:`aggregate`.

    Returns:
        The matching totals, or None.
    """
    key = match_name(name, totals)
    return None if key is None else totals[key]


def kernels_needing_counters(kernels: Iterable[KernelStats]) -> List[str]:
    """Function names of the kernels with no bytes or FLOPs yet (``work_source`` None), in order,
    without repeats: what to pass as ``kernels`` to :func:`ncu_command`/:func:`run_ncu`."""
    return list(dict.fromkeys(function_name(k.name) for k in kernels if k.work_source is None and k.name.strip()))


def apply_counters(kernels: List[KernelStats], totals: Dict[str, CounterTotals]) -> List[KernelStats]:
    """Fill in bytes and FLOPs from counters for the kernels that have none.

    A kernel whose ``work_source`` is None and whose name matches (:func:`match_totals`) gets
    ``bytes`` = ncu's mean DRAM bytes per launch x its Proton launch count, ``flops`` = ncu's mean FLOPs
    per launch x its launch count (zero widths dropped), ``work_source="ncu"``. Kernels with
    ``launch_metadata`` (or scope metrics) are left as they are: what the author declared wins. The
    same kernel in several scopes gets the same per-launch figures in each (ncu's launches are not told
    apart by scope).

    Args:
        kernels: Proton's kernels (not modified).
        totals: from :func:`aggregate`.

    Returns:
        A new list, the same length and order; changed kernels are copies.
    """
    out = []
    for k in kernels:
        t = match_totals(k.name, totals) if k.work_source is None else None
        if t is None or not t.launches:
            out.append(k)
            continue
        per_bytes = t.bytes_per_launch
        flops = {w: v * k.launches for w, v in t.flops_per_launch.items() if v}
        if per_bytes is None and not flops:
            out.append(k)
            continue
        out.append(dataclasses.replace(k, bytes=None if per_bytes is None else per_bytes * k.launches,
                                       flops=flops, work_source="ncu"))
    return out


def time_accuracy(proton_kernels: Iterable[KernelStats], ncu_records: Iterable[CounterRecord],
                  min_us: float = ACCURACY_MIN_US) -> List[TimeComparison]:
    """Proton's mean kernel times next to ncu's ``gpu__time_duration.sum``, per kernel.

    Proton's kernels of one function (several scopes, several ``launch_metadata`` names) are pooled;
    the pooled mean is compared with ncu's mean over its launches of that kernel. Only meaningful
    when ncu ran with ``--clock-control none`` (as :func:`ncu_command` does): with locked base clocks
    ncu's times are those of a slower GPU.

    Args:
        proton_kernels: Proton's kernels.
        ncu_records: ncu's launches.
        min_us: leave out kernels whose ncu mean is below this, microseconds (short kernels carry
            launch-to-launch noise beyond the tolerance; 0 keeps all).

    Returns:
        ``(name, proton_mean_us, ncu_mean_us, rel_diff)`` for every kernel timed by both, ncu's name,
        slowest first; ``rel_diff`` = proton / ncu - 1 (the issue's check: ``abs(rel_diff) <=``
        :data:`ACCURACY_TOLERANCE` for kernels of at least :data:`ACCURACY_MIN_US`).
    """
    totals = aggregate(ncu_records)
    pooled: Dict[str, List[float]] = {}
    for k in proton_kernels:
        t = match_totals(k.name, totals)
        if t is None or not k.launches:
            continue
        acc = pooled.setdefault(t.name, [0.0, 0.0])
        acc[0] += k.time_ns
        acc[1] += k.launches
    out = []
    for name, (time_ns, launches) in pooled.items():
        ncu_us = totals[name].mean_us
        if ncu_us is None or ncu_us <= 0 or ncu_us < min_us or not launches:
            continue
        proton_us = time_ns / launches / 1e3
        out.append(TimeComparison(name, proton_us, ncu_us, proton_us / ncu_us - 1.0))
    return sorted(out, key=lambda c: -c.ncu_mean_us)
