"""Bytes and FLOPs from hardware counters, through Nsight Compute (``tritonkit profile --counters``).

A kernel with no ``launch_metadata`` has a time in Proton's profile but no bytes or FLOPs, so no
roofline. ``--counters`` runs the program again under ``ncu`` for the kernels that lack them, reads
DRAM bytes and executed floating-point operations from the hardware counters, and fills them in
(``work_source="ncu"``) as a per-launch average times Proton's launch count.

The ``ncu`` run:

* ``--clock-control none``: ncu locks the GPU clocks to base by default (1.59 GHz on an H100
  whose kernels otherwise run at 1.98 GHz), which makes kernel times, and so anything compared
  with Proton's times, wrong for the program as it normally runs.
* ``--cache-control none``: by default ncu flushes the caches before every kernel. Measured on the
  H100: the workload's vector add took 62.5 us under ncu's default and 65.9 us with
  ``--cache-control none``. Proton, in the program's own run, measured 64.7 us. So the caches are
  left as the program leaves them, as Proton sees them; DRAM bytes are then what the kernel really
  moved in the program.
* ``--csv --print-units base``: one row per (launch, metric), values in base units (ns, bytes,
  Hz, counts); :func:`parse_ncu_csv` also converts scaled units (``usecond``, ``Mbyte``, ``Ghz``,
  ``cycle/nsecond``...) and thousands separators (``"134,225,152"``).
* ``--kernel-name-base mangled -k regex:^(name|...)$`` and ``--print-kernel-base mangled``: kernels
  selected and printed by symbol, as Proton names them (a Triton kernel's symbol is its function
  name; a CUDA C++ kernel's is mangled, ``_ZN2at6native...``), regex-escaped and anchored (so
  ``add_kernel`` does not also select ``add_kernel_plain``).
* kernel replay with ncu's default cache control (caches flushed before each launch): DRAM bytes
  are the launch's own traffic from a cold L2.

FLOP counting (:data:`FLOP_METRICS`, summed per operand width in bits; the widths match Proton's
``flops8/16/32/64``). Checked on an H100 with ncu 2025.3.1 (``--clock-control none``): Triton
kernels over 2**20 elements and M=N=K=1024 matmuls, counts in ``tests/test_profile_counters.py``.

* CUDA cores: ``sm__sass_thread_inst_executed_op_{d,f,h}{add,mul,fma}_pred_on.sum`` count
  executed (predicated-on) SASS instructions per thread. 32- and 64-bit: an add or a multiply is
  1 FLOP, a fused multiply-add 2, as in Nsight Compute's own roofline sections
  (``derived__sm__sass_thread_inst_executed_op_ffma_pred_on_x2`` = FFMA count x 2; NVIDIA developer
  forum, "About the flops in ncu report",
  https://forums.developer.nvidia.com/t/about-the-flops-in-ncu-report/215350/6). Measured: fp32
  ``x * y + z`` over n elements -> n FFMA, fp64 -> n DFMA. 16-bit: the instructions are packed
  (HADD2/HMUL2/HFMA2, fp16 and bf16 alike), each counted once for two lanes: fp16 and bf16
  ``x * y + z`` over n elements -> n/2 HFMA. So an HADD/HMUL counts 2 FLOPs and an HFMA 4 (Nsight
  Compute's half-precision roofline weighs HFMA by 2 only, which halves such kernels' FLOPs; a
  scalar half instruction, one lane used, is over-counted by 2 here).
* Tensor cores: ``sm__ops_path_tensor_src_<type>[_dst_<type>].sum`` count the "math ops executed in
  Tensor path" by source type; NVIDIA's answer to "How many FLOPs does one tensor_op_hmma instruction
  do?" (https://forums.developer.nvidia.com/t/how-many-flops-does-one-tensor-op-hmma-instruction-do/285256)
  points to them instead of per-instruction factors, which differ per MMA shape and architecture.
  One op is one FLOP, a multiply-add two. Measured: a 1024^3 matmul counts exactly 2 * 1024**3 =
  2,147,483,648 with bf16 (``src_bf16_dst_fp32``), fp16 (``src_fp16``), tf32
  (``src_tf32_dst_fp32``), fp8 e4m3 (``src_fp8``) in Triton (wgmma) and fp64 in cuBLAS (``src_fp64``).
  Widths: TF32 -> 32, FP8 -> 8, FP64 (DMMA) -> 64, fp16/bf16 -> 16.

The older way, ``sm__inst_executed_pipe_tensor_op_hmma.sum`` times a per-architecture factor (512
on Volta, 2048/4096 on Ampere by MMA shape), is not used: the factor depends on the instruction
shape, which the counter does not say, and Hopper's ``wgmma`` has counters of its own
(``sm__ops_path_tensor_op_hgmma_*``).

Metrics a device does not have are left out of the command (``ncu --query-metrics``, see
:func:`available_metrics`), so older or newer GPUs still give time and bytes.
"""
from __future__ import annotations

import csv
import dataclasses
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple

from ._proton import KernelStats, match_name

#: GPU time of one launch (ns).
TIME_METRIC = "gpu__time_duration.sum"
#: DRAM bytes read / written by one launch.
DRAM_READ_METRIC = "dram__bytes_read.sum"
DRAM_WRITE_METRIC = "dram__bytes_write.sum"
#: DRAM bytes read + written (used only when the read/write pair is absent).
DRAM_METRIC = "dram__bytes.sum"
#: the SM clock during the launch (Hz): shows whether the clocks were locked.
CLOCK_METRIC = "sm__cycles_elapsed.avg.per_second"

#: (metric, FLOP width in bits, FLOPs per count). See the module docstring for the sources.
FLOP_METRICS: Tuple[Tuple[str, int, int], ...] = (
    ("sm__sass_thread_inst_executed_op_dadd_pred_on.sum", 64, 1),
    ("sm__sass_thread_inst_executed_op_dmul_pred_on.sum", 64, 1),
    ("sm__sass_thread_inst_executed_op_dfma_pred_on.sum", 64, 2),
    ("sm__sass_thread_inst_executed_op_fadd_pred_on.sum", 32, 1),
    ("sm__sass_thread_inst_executed_op_fmul_pred_on.sum", 32, 1),
    ("sm__sass_thread_inst_executed_op_ffma_pred_on.sum", 32, 2),
    # 16-bit SASS instructions are packed (HADD2/HMUL2/HFMA2, fp16 and bf16 alike): 2 lanes each
    ("sm__sass_thread_inst_executed_op_hadd_pred_on.sum", 16, 2),
    ("sm__sass_thread_inst_executed_op_hmul_pred_on.sum", 16, 2),
    ("sm__sass_thread_inst_executed_op_hfma_pred_on.sum", 16, 4),
    ("sm__ops_path_tensor_src_fp64.sum", 64, 1),
    ("sm__ops_path_tensor_src_tf32_dst_fp32.sum", 32, 1),
    ("sm__ops_path_tensor_src_fp16.sum", 16, 1),
    ("sm__ops_path_tensor_src_bf16_dst_fp32.sum", 16, 1),
    ("sm__ops_path_tensor_src_fp8.sum", 8, 1),
    # GPUs without the fp16 roll-up (it covers both accumulator types on the H100)
    ("sm__ops_path_tensor_src_fp16_dst_fp16.sum", 16, 1),
    ("sm__ops_path_tensor_src_fp16_dst_fp32.sum", 16, 1),
)

#: a metric -> the metrics that stand in for it where a GPU lacks it (never collected or counted
#: together with it, which would count the same operations twice).
ALTERNATIVES: Dict[str, Tuple[str, ...]] = {
    "sm__ops_path_tensor_src_fp16.sum": ("sm__ops_path_tensor_src_fp16_dst_fp16.sum",
                                         "sm__ops_path_tensor_src_fp16_dst_fp32.sum"),
}
_STAND_INS = {alt: main for main, alts in ALTERNATIVES.items() for alt in alts}

#: what every ``--counters`` run asks for: time, DRAM bytes, the SM clock, then the FLOP counters
#: (all present on the H100 with ncu 2025.3; stand-ins come in only through :func:`select_metrics`).
DEFAULT_METRICS: Tuple[str, ...] = (TIME_METRIC, DRAM_READ_METRIC, DRAM_WRITE_METRIC, CLOCK_METRIC) + tuple(
    m for m, _, _ in FLOP_METRICS if m not in _STAND_INS)

#: the accuracy check: Proton's mean kernel time within this share of ncu's, for kernels of at
#: least :data:`ACCURACY_MIN_US`.
ACCURACY_TOLERANCE = 0.03
ACCURACY_MIN_US = 50.0

_HOW_TO_GET_NCU = ("--counters runs the program under Nsight Compute (ncu) to read DRAM bytes and FLOPs from the "
                   "GPU's hardware counters. Install Nsight Compute (it comes with the CUDA toolkit as "
                   "<cuda>/bin/ncu, or from https://developer.nvidia.com/nsight-compute) and put ncu on PATH, "
                   "or give the kernels a launch_metadata with 'bytes'/'flops16' instead.")
_FALLBACK = "tritonkit falls back to launch_metadata (kernels without it get no bytes/FLOPs and bound 'unknown')."
_PERMISSION = ("ncu cannot read the GPU's performance counters (ERR_NVGPUCTRPERM): the driver lets only "
               "administrators read them. Run as root (sudo, or a container started with --cap-add=SYS_ADMIN), "
               "or let all users read them: put 'options nvidia NVreg_RestrictProfilingToAdminUsers=0' in "
               "/etc/modprobe.d/nvidia-profiling.conf, rebuild the initramfs and reboot (see "
               "https://developer.nvidia.com/ERR_NVGPUCTRPERM). ")
_NO_GPU_PATTERNS = ("no cuda-capable device", "cuda_error_no_device", "no cuda gpus are available",
                    "no supported gpu", "found no nvidia driver", "nvidia driver on your system is too old",
                    "no nvidia gpu", "cuda driver initialization failed")


class CountersUnavailable(RuntimeError):
    """Hardware counters could not be read (no ncu, no permission, no GPU, ncu failed); the message
    says why and what to do."""


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


# ----------------------------------------------------------------------------------------------- command line


def function_name(name: str) -> str:
    """The kernel function's name in a Proton kernel name: ``"add_kernel n=4096"`` -> ``"add_kernel"``
    (a ``launch_metadata`` name starts with it by convention)."""
    return name.strip().split(None, 1)[0] if name.strip() else ""


def kernel_regex(kernels: Iterable[str]) -> str:
    """ncu's ``-k`` argument selecting exactly these kernels (function names, regex-escaped, anchored).

    Args:
        kernels: kernel names; a Proton ``launch_metadata`` name (``"add_kernel n=4096"``) is reduced to
            its function name.

    Returns:
        ``"regex:^(add_kernel|softmax_kernel)$"``.

    Raises:
        ValueError: no names.
    """
    names = list(dict.fromkeys(n for n in (function_name(k) for k in kernels) if n))
    if not names:
        raise ValueError("no kernel names to select")
    return "regex:^(" + "|".join(re.escape(n) for n in names) + ")$"


def _program(script_argv: Sequence[str]) -> List[str]:
    argv = [str(a) for a in script_argv]
    if not argv:
        raise ValueError("no program to profile")
    if argv[0].endswith(".py"):
        argv = [sys.executable] + argv
    return argv


def ncu_command(script_argv: Sequence[str], kernels: Optional[Sequence[str]] = None,
                launch_count: Optional[int] = None, output_csv: Optional[str] = None,
                metrics: Optional[Sequence[str]] = None, ncu: str = "ncu") -> List[str]:
    """The ncu command line that reads the counters of ``script_argv``'s kernels.

    ``ncu --clock-control none --cache-control none --csv --print-units base --print-kernel-base mangled --metrics <list>
    [--kernel-name-base mangled -k regex:^(...)$] [--launch-count N] [--log-file CSV] <program>``.

    Kernels are named by their symbol (``mangled``), as Proton names them: a Triton kernel's symbol
    is its function name (``add_kernel``), a CUDA C++ kernel's the mangled one (``_ZN2at6native...``),
    so both select and print names that match Proton's.

    Args:
        script_argv: the program: ``["python", "run.py", "--size", "4096"]``; a first element ending in
            ``.py`` is run with this Python (``sys.executable``).
        kernels: kernel names to profile (Proton names allowed: reduced to function names, escaped);
            None or empty: every kernel.
        launch_count: profile at most this many launches in all (``--launch-count``); None: all.
        output_csv: write ncu's output (the CSV, with its ``==PROF==`` lines) to this file
            (``--log-file``) instead of stdout, apart from the program's own output.
        metrics: the metrics (default :data:`DEFAULT_METRICS`).
        ncu: the ncu executable.

    Returns:
        The argv list (``shlex.join`` it to show it).

    Raises:
        ValueError: an empty program, an empty metric list or a launch_count below 1.
    """
    mets = list(metrics if metrics is not None else DEFAULT_METRICS)
    if not mets:
        raise ValueError("no metrics to collect")
    cmd = [ncu, "--clock-control", "none", "--cache-control", "none", "--csv", "--print-units", "base", "--print-kernel-base", "mangled",
           "--metrics", ",".join(mets)]
    if kernels:
        cmd += ["--kernel-name-base", "mangled", "-k", kernel_regex(kernels)]
    if launch_count is not None:
        if int(launch_count) < 1:
            raise ValueError(f"launch_count must be at least 1, got {launch_count}")
        cmd += ["--launch-count", str(int(launch_count))]
    if output_csv:
        cmd += ["--log-file", str(output_csv)]
    return cmd + _program(script_argv)


# ----------------------------------------------------------------------------------------------- units, parsing

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


# ----------------------------------------------------------------------------------------------- merging


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


# ----------------------------------------------------------------------------------------------- running ncu


def _tail(text: str, n: int = 8) -> str:
    keep = [ln for ln in text.splitlines() if ln.strip()]
    errs = [ln for ln in keep if "==ERROR==" in ln]
    return "\n".join((errs or keep)[-n:])


def _available_kernels(text: str, limit: int = 30) -> List[str]:
    """The names under ncu's ``Available Kernels:`` (printed when ``-k`` matched nothing)."""
    lines = text.splitlines()
    at = next((i for i, ln in enumerate(lines) if ln.strip().startswith("Available Kernels")), None)
    if at is None:
        return []
    names = []
    for ln in lines[at + 1:]:
        m = re.match(r"^\s*\d+\.\s+(\S.*)$", ln)
        if not m:
            break
        names.append(m.group(1).strip())
    return names[:limit]


def _find_ncu(ncu: Optional[str]) -> str:
    path = shutil.which(ncu or os.environ.get("TRITONKIT_NCU", "") or "ncu")
    if path is None:
        raise CountersUnavailable(f"Nsight Compute's ncu was not found ({ncu or 'ncu'} is not on PATH). "
                                  f"{_HOW_TO_GET_NCU}")
    return path


def _check_output(out: str, returncode: Optional[int]) -> None:
    low = out.lower()
    if "err_nvgpuctrperm" in low:
        raise CountersUnavailable(_PERMISSION + _FALLBACK)
    if any(p in low for p in _NO_GPU_PATTERNS):
        raise CountersUnavailable("ncu found no GPU to profile (no CUDA device or driver on this machine): hardware "
                                  f"counters need an NVIDIA GPU. {_FALLBACK}\n{_tail(out)}")
    if returncode:
        raise CountersUnavailable(f"ncu exited with status {returncode}, so the counters could not be read. "
                                  f"{_FALLBACK}\nncu said:\n{_tail(out)}")


def available_metrics(ncu: Optional[str] = None, timeout_s: float = 120.0) -> Optional[set]:
    """The base metric names (``dram__bytes_read``, no ``.sum``) this GPU's ncu knows
    (``ncu --query-metrics``).

    Args:
        ncu: the ncu executable (default: ``ncu`` on PATH).
        timeout_s: seconds to wait.

    Returns:
        The names, or None where ncu could not list them (no GPU, no permission, an old ncu).
    """
    try:
        proc = subprocess.run([ncu or _find_ncu(None), "--query-metrics"], capture_output=True, text=True,
                              timeout=timeout_s)
    except (CountersUnavailable, OSError, subprocess.SubprocessError):
        return None
    if proc.returncode:
        return None
    return parse_query_metrics(proc.stdout) or None


def parse_query_metrics(text: str) -> set:
    """The metric names in ``ncu --query-metrics`` output (the first word of each table row)."""
    names = set()
    for ln in text.splitlines():
        word = ln.strip().split(None, 1)[0] if ln.strip() else ""
        if re.match(r"^[a-z0-9]+__[A-Za-z0-9_]+$", word):
            names.add(word)
    return names


def select_metrics(available: Optional[set], metrics: Sequence[str] = DEFAULT_METRICS) -> List[str]:
    """``metrics`` narrowed to what a GPU has.

    Args:
        available: base metric names (before the first ``.``) the GPU has (:func:`available_metrics`);
            None: unknown, keep ``metrics`` as they are.
        metrics: the wanted metrics.

    Returns:
        The wanted metrics the GPU has, in order; one it lacks is replaced by its
        :data:`ALTERNATIVES` that it has (or dropped).
    """
    if available is None:
        return list(metrics)
    out: List[str] = []
    for m in metrics:
        for cand in ((m,) if m.split(".", 1)[0] in available else ALTERNATIVES.get(m, ())):
            if cand.split(".", 1)[0] in available and cand not in out:
                out.append(cand)
    return out


def run_ncu(script_argv: Sequence[str], kernels: Optional[Sequence[str]] = None, timeout_s: float = 1800.0,
            launch_count: Optional[int] = None, metrics: Optional[Sequence[str]] = None,
            ncu: Optional[str] = None, cwd: Optional[str] = None) -> List[CounterRecord]:
    """Run the program under ncu and read its kernels' counters.

    The metrics (default :data:`DEFAULT_METRICS`) are first narrowed to those this GPU has
    (:func:`available_metrics`; skipped when ``metrics`` is given). ncu's output goes to a temporary
    ``--log-file`` so the program's own printing cannot get into the CSV.

    Args:
        script_argv: the program (see :func:`ncu_command`).
        kernels: kernel names to profile (None: all; see :func:`kernels_needing_counters`).
        timeout_s: seconds before the run is abandoned (ncu replays each kernel once per counter pass,
            so a profiled program runs many times slower).
        launch_count: profile at most this many launches.
        metrics: metrics to collect (default: :data:`DEFAULT_METRICS` that this GPU has).
        ncu: the ncu executable (default ``$TRITONKIT_NCU`` or ``ncu`` on PATH).
        cwd: the program's working directory.

    Returns:
        One :class:`CounterRecord` per profiled launch.

    Raises:
        CountersUnavailable: ncu is not installed; it may not read the counters
            (``ERR_NVGPUCTRPERM``); there is no GPU; it or the program exited non-zero; it timed
            out; or it profiled no kernel (names that match nothing: the message lists the kernels
            ncu saw). The message says what to do. (A metric ncu does not know is not an error:
            ncu 2025.3 leaves it out of its output.)
    """
    exe = _find_ncu(ncu)
    if metrics is None:
        metrics = select_metrics(available_metrics(exe))
    fd, log = tempfile.mkstemp(prefix="tritonkit-ncu-", suffix=".csv")
    os.close(fd)
    try:
        cmd = ncu_command(script_argv, kernels, launch_count, log, metrics, ncu=exe)
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, cwd=cwd)
        except subprocess.TimeoutExpired:
            raise CountersUnavailable(f"ncu did not finish within {timeout_s:.0f} s ({shlex.join(cmd)}); profile "
                                      f"fewer launches (launch_count) or give a longer timeout. {_FALLBACK}") from None
        except OSError as e:
            raise CountersUnavailable(f"ncu could not be started ({e}). {_HOW_TO_GET_NCU}") from None
        try:
            with open(log, encoding="utf-8", errors="replace") as fh:
                logged = fh.read()
        except OSError:
            logged = ""
    finally:
        try:
            os.unlink(log)
        except OSError:
            pass
    text = logged + "\n" + (proc.stdout or "") + "\n" + (proc.stderr or "")
    _check_output(text, proc.returncode)
    records = parse_ncu_csv(logged) or parse_ncu_csv(proc.stdout or "")
    if not records:
        which = f" matching {', '.join(function_name(k) for k in kernels)}" if kernels else ""
        seen = _available_kernels(text)
        hint = (f"ncu saw these kernels: {', '.join(seen)}." if seen else f"ncu said:\n{_tail(text)}")
        raise CountersUnavailable(f"ncu profiled no kernel{which}: check the names (a kernel is selected by its "
                                  f"symbol: a Triton kernel's function name, a CUDA C++ kernel's mangled name) and "
                                  f"that the program launches them. {_FALLBACK} {hint}")
    return records
