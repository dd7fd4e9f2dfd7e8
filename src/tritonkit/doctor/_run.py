"""``tritonkit doctor -- python SCRIPT.py``: check (CPU interpreter, every check, access maps), then
where a GPU is present tune and profile, each as its own ``tritonkit`` command in a child process
that writes its JSON; then one self-contained HTML page (``report.html``) and ``doctor.json`` with
everything, in the output directory."""
from __future__ import annotations

import datetime
import json
import os
import shlex
import subprocess
import sys
import time
from typing import Callable, Dict, List, Optional

from ._report import DoctorReport, StepResult, read_parts

#: the steps, in the order the article's workflow takes them: correctness first
STEPS = ("check", "tune", "profile")


def gpu_present() -> bool:
    """Whether a CUDA GPU is present (``torch.cuda.is_available()``; False without torch)."""
    try:
        import torch
        return bool(torch.cuda.is_available())
    except ImportError:  # pragma: no cover
        return False


def _step_command(step: str, ns, out_dir: str, target: List[str]) -> List[str]:
    base = [sys.executable, "-m", "tritonkit", step, "--json", os.path.join(out_dir, f"{step}.json")]
    if step == "check":
        base += ["--access-maps", str(ns.access_maps)] + (["--nan"] if ns.nan else []) \
            + (["--no-children"] if getattr(ns, "no_children", False) else [])
    elif step == "tune" and ns.budget:
        base += ["--budget", ns.budget]
    elif step == "profile":
        base += ["--tuned"]
    return base + ["--"] + list(target)


def _child_env(width: Optional[int] = None) -> Dict[str, str]:
    """The steps' environment: the doctor's own, with ``COLUMNS`` set to ``width`` (the doctor's
    ``--width``, columns) where given, so that the steps' tables are as wide as the doctor's output.
    Otherwise each step finds its width as the doctor does: ``COLUMNS``, the terminal's, or 80 for a
    file or a pipe (their tables fit it: :mod:`tritonkit.report.fit`)."""
    env = dict(os.environ)
    if width is not None:
        env["COLUMNS"] = str(width)
    return env


#: a step's exit status when Ctrl-C ended it (128 + SIGINT, as a shell reports it)
INTERRUPTED = 130


def run_doctor(ns, target: List[str], gpu: Optional[bool] = None,
               run: Callable[..., subprocess.CompletedProcess] = subprocess.run, log=print) -> List[StepResult]:
    """Run the steps of the doctor; returns what each did.

    Args:
        ns: the parsed ``doctor`` arguments (``out``, ``skip``, ``nan``, ``no_children``, ``access_maps``,
            ``budget``, ``timeout``, and ``width``: the steps' console width in columns, None for theirs).
        target: the script and its arguments (``["python", "x.py", ...]`` or ``["python", "-m", "m"]``).
        gpu: whether a CUDA GPU is present (None: ask torch).
        run: runs one step's command, called as ``run(cmd, timeout=seconds or None, env=dict)``
            (``subprocess.run``; tests pass a fake).
        log: prints a line of progress.

    Returns:
        One :class:`~tritonkit.doctor.StepResult` per step of :data:`STEPS`, in order (times in s).
        A Ctrl-C ends the running step (its ``why`` starts with ``interrupted``) and skips the rest.
    """
    gpu = gpu_present() if gpu is None else gpu
    skip = {s.strip() for s in ns.skip.split(",") if s.strip()}
    out: List[StepResult] = []
    interrupted = False
    for step in STEPS:
        if interrupted:
            out.append(StepResult(step, "skipped", why="not run: the doctor was interrupted (Ctrl-C)"))
            continue
        if step in skip:
            out.append(StepResult(step, "skipped", why="left out with --skip"))
            continue
        if step != "check" and not gpu:
            out.append(StepResult(step, "skipped", why="no CUDA GPU here (torch.cuda.is_available() is False): "
                                                        f"{step} measures kernels on a GPU; run the doctor on a "
                                                        "machine with one for this part"))
            continue
        cmd = _step_command(step, ns, ns.out, target)
        path = os.path.join(ns.out, f"{step}.json")
        if os.path.exists(path):
            os.unlink(path)  # never report an older run's results as this one's
        log(f"== tritonkit doctor: {step} ==")
        t0 = time.perf_counter()
        try:
            proc = run(cmd, timeout=ns.timeout, env=_child_env(getattr(ns, "width", None)))
            code = proc.returncode
        except subprocess.TimeoutExpired:
            code = None
        except KeyboardInterrupt:  # the step (same process group) got the Ctrl-C too and has ended
            interrupted, code = True, INTERRUPTED
        secs = time.perf_counter() - t0
        command = shlex.join(["tritonkit", *cmd[3:]])
        if interrupted:
            done = os.path.exists(path)
            out.append(StepResult(step, "ran" if done else "failed", json=path if done else None, seconds=secs,
                                  exit_code=code, command=command,
                                  why="interrupted (Ctrl-C)" + (": its results until then" if done else "")))
        elif code is None:
            out.append(StepResult(step, "failed", why=f"stopped after --timeout {ns.timeout:g} s", seconds=secs,
                                  command=command))
        elif not os.path.exists(path):
            out.append(StepResult(step, "failed", why=f"exit status {code} and no results (its output above "
                                                      "says why)", seconds=secs, exit_code=code, command=command))
        else:
            out.append(StepResult(step, "ran", json=path, seconds=secs, exit_code=code, command=command))
    return out


def _load(path: Optional[str]) -> Optional[dict]:
    if not path:
        return None
    try:
        with open(path) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def build_report(steps: List[StepResult], target: List[str], device: Optional[str] = None) -> DoctorReport:
    """The doctor's report (what ``report.html`` renders and ``doctor.json`` holds).

    Args:
        steps: what :func:`run_doctor` returned; each ``ran`` step's JSON file is read back (one
            that cannot be read or parsed counts as no results: None).
        target: the script and its arguments, as given after ``--``.
        device: the GPU's name, or None without one.

    Returns:
        A :class:`~tritonkit.doctor.DoctorReport`: the run's facts, the steps, and each step's own
        JSON read through its ``from_dict`` (None where it did not run).

    Raises:
        ImportError: triton is not installed (its version is part of the report).
    """
    import triton

    from .. import __version__
    versions = {"tritonkit": __version__, "triton": triton.__version__, "python": sys.version.split()[0]}
    try:
        import torch
        versions["torch"] = torch.__version__
    except ImportError:  # pragma: no cover
        pass
    results = {s.name: _load(s.json) if s.status == "ran" else None for s in steps}
    return DoctorReport(command=shlex.join(target), created=datetime.datetime.now().isoformat(timespec="seconds"),
                        versions=versions, device=device, steps=list(steps), **read_parts(results))
