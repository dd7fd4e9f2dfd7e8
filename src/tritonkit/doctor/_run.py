"""``tritonkit doctor -- python SCRIPT.py``: check (CPU interpreter, every check, access maps), then
where a GPU is present tune and profile, each as its own ``tritonkit`` command in a child process
that writes its JSON; then one self-contained HTML page (``report.html``) and ``doctor.json`` with
everything, in the output directory."""
from __future__ import annotations

import dataclasses
import datetime
import json
import os
import shlex
import subprocess
import sys
import time
from typing import Callable, Dict, List, Optional

from .._io import atomic_write_text

#: the steps, in the order the article's workflow takes them: correctness first
STEPS = ("check", "tune", "profile")
EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_SCRIPT_FAILED = 0, 1, 2, 3


@dataclasses.dataclass
class StepResult:
    """What one step of the doctor did.

    Attributes:
        name: ``"check"``, ``"tune"`` or ``"profile"``.
        status: ``"ran"`` (it finished; findings or a failing script are its results, not its
            status), ``"skipped"`` (not run: ``why`` says why) or ``"failed"`` (it ran but wrote no
            results: ``why`` has the exit status).
        why: the reason for ``skipped``/``failed``; "" when it ran.
        json: the path of the JSON it wrote, or None.
        seconds: wall time of the step, s.
        exit_code: the step's command's exit status (None when skipped).
        command: the command line it ran ("" when skipped).
    """

    name: str
    status: str
    why: str = ""
    json: Optional[str] = None
    seconds: float = 0.0
    exit_code: Optional[int] = None
    command: str = ""

    def to_dict(self) -> dict:
        """Plain JSON data."""
        return dataclasses.asdict(self)


def add_doctor_parser(sub) -> None:
    """Add the ``doctor`` subcommand to an argparse subparsers object."""
    p = sub.add_parser("doctor", help="check, then tune and profile (on a GPU), and write one HTML report",
                       usage="tritonkit doctor [--out DIR] [--skip STEPS] [--nan] [--access-maps N] "
                             "[--budget B] [--timeout S] -- python SCRIPT.py [ARGS...]",
                       description="Run SCRIPT (unchanged) three times, the way the article's workflow goes: "
                                   "tritonkit check (every launch in the checked CPU interpreter: findings and "
                                   "memory-access maps), then where a CUDA GPU is present tritonkit tune (its "
                                   "@triton.autotune kernels) and tritonkit profile --tuned (the tuned kernels' "
                                   "time, bound and % of peak). Writes DIR/report.html (one self-contained page: "
                                   "no server, no network), DIR/doctor.json and each step's JSON. Exit status: 0 "
                                   "no findings, 1 findings, 2 usage, 3 the script failed or a step gave no "
                                   "results.")
    p.add_argument("--out", default="tritonkit-doctor", metavar="DIR",
                   help="the directory for report.html and the JSON files (default ./tritonkit-doctor; created)")
    p.add_argument("--skip", default="", metavar="STEPS", help="steps to leave out, comma-separated: check, tune, "
                                                               "profile")
    p.add_argument("--nan", action="store_true", help="check: also find where NaN/Inf values are made")
    p.add_argument("--access-maps", type=int, default=2, metavar="N",
                   help="check: keep memory-access maps of the first N launches of each kernel (default 2)")
    p.add_argument("--budget", help="tune: configs per key, a share (20%%) or seconds (30s), as tritonkit tune")
    p.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                   help="stop a step that runs longer than this (its results are then missing; default none)")
    p.add_argument("target", nargs="*", help="python SCRIPT.py ARGS... | python -m MODULE ARGS...")


def _gpu_present() -> bool:
    try:
        import torch
        return bool(torch.cuda.is_available())
    except ImportError:  # pragma: no cover
        return False


def _step_command(step: str, ns, out_dir: str, target: List[str]) -> List[str]:
    base = [sys.executable, "-m", "tritonkit", step, "--json", os.path.join(out_dir, f"{step}.json")]
    if step == "check":
        base += ["--access-maps", str(ns.access_maps)] + (["--nan"] if ns.nan else [])
    elif step == "tune" and ns.budget:
        base += ["--budget", ns.budget]
    elif step == "profile":
        base += ["--tuned"]
    return base + ["--"] + list(target)


def _child_env() -> Dict[str, str]:
    """The steps' environment: where the doctor's output is not a terminal (a log, CI), a wide console
    for rich (the profile's table has 14 columns; rich would fold it into 80)."""
    env = dict(os.environ)
    if not sys.stdout.isatty() and "COLUMNS" not in env:
        env["COLUMNS"] = "200"
    return env


def run_doctor(ns, target: List[str], gpu: Optional[bool] = None,
               run: Callable[..., subprocess.CompletedProcess] = subprocess.run, log=print) -> List[StepResult]:
    """Run the steps of the doctor; returns what each did.

    Args:
        ns: the parsed ``doctor`` arguments (``out``, ``skip``, ``nan``, ``access_maps``, ``budget``,
            ``timeout``).
        target: the script and its arguments (``["python", "x.py", ...]`` or ``["python", "-m", "m"]``).
        gpu: whether a CUDA GPU is present (None: ask torch).
        run: runs one step's command, called as ``run(cmd, timeout=seconds or None, env=dict)``
            (``subprocess.run``; tests pass a fake).
        log: prints a line of progress.
    """
    gpu = _gpu_present() if gpu is None else gpu
    skip = {s.strip() for s in ns.skip.split(",") if s.strip()}
    out: List[StepResult] = []
    for step in STEPS:
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
            proc = run(cmd, timeout=ns.timeout, env=_child_env())
            code = proc.returncode
        except subprocess.TimeoutExpired:
            code = None
        secs = time.perf_counter() - t0
        command = shlex.join(["tritonkit", *cmd[3:]])
        if code is None:
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


def build_report(steps: List[StepResult], target: List[str], device: Optional[str] = None) -> dict:
    """The doctor's report data (what ``report.html`` renders and ``doctor.json`` holds).

    Args:
        steps: what :func:`run_doctor` returned; each ``ran`` step's JSON file is read back (one
            that cannot be read or parsed counts as no results: None).
        target: the script and its arguments, as given after ``--``.
        device: the GPU's name, or None without one.

    Returns:
        ``{"command", "created", "versions", "device", "steps": [StepResult dicts], "check",
        "tune", "profile"}``: each step's own JSON (None where it did not run).
    """
    import triton

    from .. import __version__
    versions = {"tritonkit": __version__, "triton": triton.__version__, "python": sys.version.split()[0]}
    try:
        import torch
        versions["torch"] = torch.__version__
    except ImportError:  # pragma: no cover
        pass
    data = {"command": shlex.join(target), "created": datetime.datetime.now().isoformat(timespec="seconds"),
            "versions": versions, "device": device, "steps": [s.to_dict() for s in steps]}
    for s in steps:
        data[s.name] = _load(s.json) if s.status == "ran" else None
    return data


def run_doctor_command(ns, resolve_target: Callable, console=None) -> int:
    """Run ``tritonkit doctor``; returns the exit status (0 no findings, 1 findings, 2 usage,
    3 the script failed under check, or a step failed to give results)."""
    from rich.console import Console
    console = console or Console()

    def error(msg: str) -> int:
        print(f"tritonkit doctor: error: {msg}", file=sys.stderr)
        return EXIT_USAGE

    if not ns.target:
        return error("nothing to examine: give a script (`tritonkit doctor -- python my_script.py`)")
    resolve_target(ns.target)  # a missing script is a usage error now, not three failed steps
    unknown = [s for s in ns.skip.split(",") if s.strip() and s.strip() not in STEPS]
    if unknown:
        return error(f"--skip: unknown step {', '.join(unknown)}; choose from {', '.join(STEPS)}")
    if ns.access_maps < 0:
        return error("--access-maps N: N is a number of launches per kernel, 0 or more")
    if ns.timeout is not None and ns.timeout <= 0:
        return error("--timeout must be a positive number of seconds")
    try:
        os.makedirs(ns.out, exist_ok=True)
    except OSError as e:
        return error(f"cannot create --out {ns.out}: {e}")
    gpu = _gpu_present()
    steps = run_doctor(ns, list(ns.target), gpu=gpu, log=lambda m: console.print(f"[bold]{m}[/bold]"))
    device = None
    if gpu:
        import torch
        device = torch.cuda.get_device_name()
    report = build_report(steps, list(ns.target), device)
    from ..report.html import write_report
    html = os.path.join(ns.out, "report.html")
    atomic_write_text(os.path.join(ns.out, "doctor.json"), json.dumps(report, indent=1, default=str) + "\n")
    write_report(report, html)
    console.print(_summary(steps, report))
    console.print(f"report: {html}")
    check = report.get("check")
    if check and check.get("findings"):
        return EXIT_FINDINGS
    if check and (check.get("script") or {}).get("failed"):
        return EXIT_SCRIPT_FAILED
    if any(s.status == "failed" for s in steps):
        return EXIT_SCRIPT_FAILED
    return EXIT_OK


def _summary(steps: List[StepResult], report: dict) -> str:
    """One line per step for the terminal."""
    lines = []
    for s in steps:
        what = f"{s.name}: {s.status}"
        if s.status == "ran":
            what += f" in {s.seconds:.1f} s"
            data: Dict = report.get(s.name) or {}
            if s.name == "check":
                what += f", {len(data.get('findings', []))} finding(s), {data.get('launches', 0)} launch(es)"
            elif s.name == "tune":
                what += f", {len(data.get('results', []))} kernel/key pair(s) tuned"
            elif s.name == "profile":
                what += f", {len(data.get('kernels', []))} kernel(s) profiled"
        else:
            what += f" ({s.why})"
        lines.append(what)
    return "\n".join(lines)
