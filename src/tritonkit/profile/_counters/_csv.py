"""ncu's CSV output (``ncu --csv --print-units base``) as one :class:`CounterRecord` per profiled
launch, values converted to base units (ns, bytes, Hz, counts)."""
from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from ._metrics import (CLOCK_METRIC, DRAM_METRIC, DRAM_READ_METRIC, DRAM_WRITE_METRIC, FLOP_METRICS, TIME_METRIC,
                       _STAND_INS)


@dataclass
class CounterRecord:
    """One profiled kernel launch, from ncu's CSV.

    Attributes:
        name: the kernel's name as ncu printed it (a Triton kernel's function name, e.g. ``add_kernel``).
        launch_id: ncu's ``ID`` of the launch (0, 1, ... in profiling order).
        grid / block: launch dimensions (x, y, z); ``()`` where not printed.
        time_ns: GPU time of the launch (``gpu__time_duration.sum``), ns; None if not collected.
        dram_bytes: DRAM bytes read + written, bytes; None if not collected.
        flops: FLOP width in bits (8, 16, 32, 64) -> FLOPs of the launch, for each width whose
            counters were collected (0 where collected and zero).
        sm_clock_hz: mean SM clock during the launch (``sm__cycles_elapsed.avg.per_second``), Hz.
        metrics: every metric of the launch, converted to base units (ns, bytes, Hz, counts);
            None where ncu printed ``n/a``.
        units: metric -> the unit ncu printed.
        process_id / device: as printed (``""`` where absent).
    """

    name: str
    launch_id: int = 0
    grid: Tuple[int, ...] = ()
    block: Tuple[int, ...] = ()
    time_ns: Optional[float] = None
    dram_bytes: Optional[float] = None
    flops: Dict[int, float] = field(default_factory=dict)
    sm_clock_hz: Optional[float] = None
    metrics: Dict[str, Optional[float]] = field(default_factory=dict)
    units: Dict[str, str] = field(default_factory=dict)
    process_id: str = ""
    device: str = ""


_TIME_NS = {"ns": 1.0, "nsecond": 1.0, "nsec": 1.0, "us": 1e3, "usecond": 1e3, "usec": 1e3, "ms": 1e6,
            "msecond": 1e6, "msec": 1e6, "s": 1e9, "second": 1e9, "sec": 1e9}
_PREFIX = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_BINARY = {"KiB": 1024.0, "MiB": 1024.0 ** 2, "GiB": 1024.0 ** 3, "TiB": 1024.0 ** 4}
_PER = {"second": 1.0, "s": 1.0, "msecond": 1e3, "ms": 1e3, "usecond": 1e6, "us": 1e6, "nsecond": 1e9, "ns": 1e9}


def unit_factor(unit: str) -> float:
    """The factor that converts a value printed in ``unit`` to base units (ns, bytes, Hz, counts).

    Times go to nanoseconds (``us``/``usecond`` -> 1e3); bytes to bytes with ncu's decimal prefixes
    (``Kbyte`` = 1e3, ``Gbyte`` = 1e9; ``KiB`` = 1024); frequencies to Hz (``Mhz`` = 1e6,
    ``cycle/nsecond`` = 1e9, ``cycle/usecond`` = 1e6); counts with a prefix (``Kinst``) to counts;
    rates ``X/second`` likewise. Unknown units (``%``, ``inst``, ``""``) -> 1.

    Args:
        unit: the unit as printed by ncu.

    Returns:
        The factor (a float).
    """
    u = (unit or "").strip()
    if not u:
        return 1.0
    if u in _TIME_NS:
        return _TIME_NS[u]
    if u in _BINARY:
        return _BINARY[u]
    if "/" in u:  # a rate: <amount>/<time>
        num, den = u.split("/", 1)
        per = _PER.get(den.strip())
        if per is not None:
            return unit_factor(num) * per if num.strip() not in ("cycle", "") else per
        return 1.0
    low = u.lower()
    if low.endswith("hz"):
        return _PREFIX.get(u[:-2].upper(), 1.0)
    if len(u) > 1 and u[0] in _PREFIX and u[0] != "" and u[1:] in ("byte", "B", "inst", "op", "ops", "cycle",
                                                                  "warp", "thread", "request", "sector"):
        return _PREFIX[u[0]]
    return 1.0


def parse_value(text: str) -> Optional[float]:
    """A metric value as printed by ncu: thousands separators dropped (``"134,225,152"`` ->
    134225152.0); ``n/a`` or empty -> None.

    Raises:
        ValueError: text that is not a number.
    """
    t = (text or "").strip().replace(",", "").replace("\u202f", "").replace("\u00a0", "")
    if t.lower() in ("", "n/a", "nan", "-"):
        return None
    return float(t)


def _dims(text: str) -> Tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", text or ""))


def _flops(metrics: Dict[str, Optional[float]]) -> Dict[int, float]:
    out: Dict[int, float] = {}
    for m, width, per in FLOP_METRICS:
        if m in _STAND_INS and metrics.get(_STAND_INS[m]) is not None:
            continue
        if m in metrics and metrics[m] is not None:
            out[width] = out.get(width, 0.0) + per * float(metrics[m])
    return out


def _finish(rec: CounterRecord) -> CounterRecord:
    m = rec.metrics
    rec.time_ns = m.get(TIME_METRIC)
    if m.get(DRAM_READ_METRIC) is not None or m.get(DRAM_WRITE_METRIC) is not None:
        rec.dram_bytes = (m.get(DRAM_READ_METRIC) or 0.0) + (m.get(DRAM_WRITE_METRIC) or 0.0)
    elif m.get(DRAM_METRIC) is not None:
        rec.dram_bytes = m[DRAM_METRIC]
    rec.sm_clock_hz = m.get(CLOCK_METRIC)
    rec.flops = _flops(m)
    return rec


def _csv_lines(text: str) -> List[str]:
    """The CSV part of ncu's output: from the header (``"ID",...``) on, only quoted rows (ncu's
    ``==PROF==``/``==WARNING==`` lines and the program's own output are dropped)."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.lstrip().startswith(('"ID"', "ID,"))), None)
    if start is None:
        return []
    return [lines[start]] + [ln for ln in lines[start + 1:] if ln.lstrip().startswith('"')]


def parse_ncu_csv(text: str) -> List[CounterRecord]:
    """Parse the output of ``ncu --csv --metrics ...``.

    Reads both of ncu's CSV layouts: the default one (``--page details``: one row per launch and
    metric with ``"Metric Name","Metric Unit","Metric Value"``) and ``--page raw`` (one row per
    launch, a column per metric, units in the row under the header). Lines before the header
    (``==PROF== Connected...``, ``==WARNING==``, the program's output) and non-CSV lines after it are
    skipped. Values are converted to base units (see :func:`unit_factor`).

    Args:
        text: ncu's output.

    Returns:
        One :class:`CounterRecord` per profiled launch, in ncu's order; ``[]`` where no kernel was
        profiled (no header).

    Raises:
        ValueError: a header without the columns ncu writes (``Kernel Name`` and ``Metric Name``/
            ``Metric Value`` or metric columns), or a value that is not a number.
    """
    lines = _csv_lines(text)
    if not lines:
        return []
    rows = list(csv.reader(lines))
    header = [h.strip() for h in rows[0]]
    if "Kernel Name" not in header:
        raise ValueError(f"not ncu CSV output: no 'Kernel Name' column in the header {header[:8]}")
    col = {h: i for i, h in enumerate(header)}

    def get(row: List[str], name: str) -> str:
        i = col.get(name)
        return row[i] if i is not None and i < len(row) else ""

    records: Dict[Tuple[str, str], CounterRecord] = {}
    if "Metric Name" in col and "Metric Value" in col:
        for row in rows[1:]:
            if len(row) < len(header):
                continue
            key = (get(row, "Process ID"), get(row, "ID"))
            rec = records.get(key)
            if rec is None:
                rec = records[key] = CounterRecord(
                    get(row, "Kernel Name"), int(get(row, "ID") or len(records)), _dims(get(row, "Grid Size")),
                    _dims(get(row, "Block Size")), process_id=get(row, "Process ID"), device=get(row, "Device"))
            metric, unit = get(row, "Metric Name").strip(), get(row, "Metric Unit").strip()
            try:
                value = parse_value(get(row, "Metric Value"))
            except ValueError:
                raise ValueError(f"ncu CSV: {metric} of launch {rec.launch_id} ({rec.name}) is not a number: "
                                 f"{get(row, 'Metric Value')!r}") from None
            rec.metrics[metric] = None if value is None else value * unit_factor(unit)
            rec.units[metric] = unit
        return [_finish(r) for r in records.values()]
    # --page raw: a column per metric, the units in the first row under the header
    metric_cols = [h for h in header if re.match(r"^[a-z0-9]+__", h)]
    if not metric_cols:
        raise ValueError("not ncu CSV output: neither 'Metric Name'/'Metric Value' columns nor metric columns")
    body = rows[1:]
    units: Dict[str, str] = {}
    if body and not get(body[0], "ID").strip():
        units = {m: get(body[0], m).strip() for m in metric_cols}
        body = body[1:]
    out = []
    for n, row in enumerate(body):
        if len(row) < len(header):
            continue
        rec = CounterRecord(get(row, "Kernel Name"), int(get(row, "ID") or n), _dims(get(row, "Grid Size")),
                            _dims(get(row, "Block Size")), process_id=get(row, "Process ID"),
                            device=get(row, "Device"))
        for m in metric_cols:
            try:
                value = parse_value(get(row, m))
            except ValueError:
                raise ValueError(f"ncu CSV: {m} of launch {rec.launch_id} ({rec.name}) is not a number: "
                                 f"{get(row, m)!r}") from None
            rec.metrics[m] = None if value is None else value * unit_factor(units.get(m, ""))
            rec.units[m] = units.get(m, "")
        out.append(_finish(rec))
    return out
