"""Running the profiled program under Nsight Compute (``ncu``) for ``tritonkit profile --counters``.

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
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from typing import Iterable, List, Optional, Sequence

from ._csv import CounterRecord, parse_ncu_csv
from ._metrics import DEFAULT_METRICS, parse_query_metrics, select_metrics

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
