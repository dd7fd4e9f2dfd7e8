"""``tritonkit check --gpu=sanitizer``: the script on the GPU under ``compute-sanitizer --tool memcheck``,
its reports mapped to tritonkit's findings.

memcheck instruments every kernel the script launches and reports each thread's access outside an
allocation: the kernel, the source file and line (Triton keeps line info in its kernels), the
thread and block, the address and the nearest allocation. PyTorch's caching allocator serves
tensors from large blocks it keeps, so an overrun of a small tensor usually stays inside one of
them and memcheck sees nothing (0 errors for 64 Ki elements stored into a 1000-element tensor on
the H100); the script therefore runs with ``PYTORCH_NO_CUDA_MEMORY_CACHING=1``, each tensor its own
allocation. A log of every launch's tensor arguments (:mod:`.launch_log`) then names what memcheck
cannot: the argument whose storage the allocation is, the elements, and the program ids (a
Triton program is a CUDA block: memcheck's block coordinates are the program id).

What it does not see: an access inside another tensor's allocation (a wrong offset that lands in
a live tensor) and data races (Triton's GSan, ``triton.experimental.gsan``, checks races on the
GPU where the installed Triton has it; tritonkit does not run it yet, and the report says whether it
is there). The CPU check (``tritonkit check`` without ``--gpu``) sees both, at interpreter speed.
"""
from __future__ import annotations

import dataclasses
import linecache
import os
import re
import shutil
import subprocess
import sys
import tempfile
from typing import Any, Dict, List, Optional, Tuple

from ..checks.bounds import BoundsCheck
from ..findings import Finding
from . import launch_log
from .report import element_index, make_report, program_id, wait

#: memcheck errors printed at most (each is one thread's access; the summary counts them all)
PRINT_LIMIT = 10000
_SHOWN = 8  # program ids and element indices a finding lists

_PREFIX = re.compile(r"^=+ ?(.*)$")
_TITLE = re.compile(r"^Invalid (__global__|__shared__|__local__|__generic__)? ?(read|write|atomic)\w* of size (\d+) "
                    r"bytes?$")
_MISALIGNED = re.compile(r"^(?:Misaligned|Invalid) .*(?:address|Address)", re.IGNORECASE)
_AT = re.compile(r"^at (.+?)\+0x[0-9a-fA-F]+(?: in (.+):(\d+))?$")
_THREAD = re.compile(r"^by thread \((\d+),(\d+),(\d+)\) in block \((\d+),(\d+),(\d+)\)")
_ADDRESS = re.compile(r"^(?:Access to|Address) (0x[0-9a-fA-F]+) is (out of bounds|misaligned)")
_NEAREST = re.compile(r"^and is ([\d,]+) bytes? (after|before) the nearest allocation at (0x[0-9a-fA-F]+) of size "
                      r"([\d,]+) bytes?")
_SUMMARY = re.compile(r"ERROR SUMMARY: ([\d,]+) errors?")


@dataclasses.dataclass
class MemcheckError:
    """One memcheck report (one thread's access).

    Attributes:
        access: ``"read"``, ``"write"`` or ``"atomic"``; size: bytes of the access.
        kernel: the kernel's name; file, line: its source position as memcheck printed it (the
            file's base name), or "" and 0 without line info.
        thread, block: memcheck's coordinates (a Triton program is a block).
        address: the address accessed; reason: ``"out of bounds"`` or ``"misaligned"``.
        alloc: the nearest allocation's address and size in bytes, and the distance to it in bytes
            (``relation``: ``"after"`` its end or ``"before"`` its start), where memcheck gave them.
    """

    access: str
    size: int
    kernel: str = ""
    file: str = ""
    line: int = 0
    thread: Tuple[int, int, int] = (0, 0, 0)
    block: Tuple[int, int, int] = (0, 0, 0)
    address: Optional[int] = None
    reason: str = "out of bounds"
    alloc: Optional[int] = None
    alloc_size: Optional[int] = None
    distance: Optional[int] = None
    relation: Optional[str] = None


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def parse_memcheck(text: str) -> Tuple[List[MemcheckError], int]:
    """memcheck's text output: ``(its errors, in order; the error count of its summary, or the
    number of errors parsed where it printed none)``. Lines it does not know are skipped."""
    errors: List[MemcheckError] = []
    total = None
    cur: Optional[MemcheckError] = None
    for raw in text.splitlines():
        m = _PREFIX.match(raw.rstrip())
        if m is None:
            continue
        body = m.group(1)
        s = _SUMMARY.search(body)
        if s is not None:
            total = _int(s.group(1)) if total is None else total  # the first summary line counts them all
            continue
        stripped = body.strip()
        if not stripped:
            cur = None
            continue
        if not body.startswith(" "):  # a record's title
            t = _TITLE.match(stripped)
            if t is not None:
                cur = MemcheckError(access=t.group(2), size=int(t.group(3)))
                errors.append(cur)
            elif _MISALIGNED.match(stripped):
                cur = MemcheckError(access="read", size=0, reason="misaligned")
                errors.append(cur)
            else:
                cur = None
            continue
        if cur is None:
            continue
        a = _AT.match(stripped)
        if a is not None:
            cur.kernel = a.group(1)
            cur.file, cur.line = (a.group(2) or ""), int(a.group(3) or 0)
            continue
        th = _THREAD.match(stripped)
        if th is not None:
            v = [int(x) for x in th.groups()]
            cur.thread, cur.block = tuple(v[:3]), tuple(v[3:])
            continue
        ad = _ADDRESS.match(stripped)
        if ad is not None:
            cur.address = int(ad.group(1), 16)
            cur.reason = ad.group(2)
            continue
        ne = _NEAREST.match(stripped)
        if ne is not None:
            cur.distance, cur.relation = _int(ne.group(1)), ne.group(2)
            cur.alloc, cur.alloc_size = int(ne.group(3), 16), _int(ne.group(4))
    return errors, (total if total is not None else len(errors))


def _launch_of(err: MemcheckError, launches: List[Dict[str, Any]]) -> Optional[dict]:
    """The logged launch of ``err``'s kernel: the latest one with a tensor on the allocation memcheck
    named, else the latest one of that kernel (memcheck does not say which launch), else None."""
    same = [rec for rec in reversed(launches) if rec.get("kernel") == err.kernel]
    for rec in same:
        if any(err.alloc is not None and t.get("base") == err.alloc for t in rec["tensors"]):
            return rec
    return same[0] if same else None


def _owner(err: MemcheckError, rec: Optional[dict]) -> Optional[dict]:
    """The tensor argument an out-of-bounds address most likely belongs to: the one whose storage it
    lies past the end of by the least, or (below every storage) the one it lies before; None where
    memcheck's nearest allocation is nearer and is none of the launch's tensors.

    memcheck names only the *nearest* allocation: an overrun of ``x`` that reaches almost to the next
    tensor ``y`` is reported as "before ``y``"; the access ran past ``x``."""
    if rec is None or err.address is None:
        return None
    addr = err.address
    past = [(addr - (int(t["base"]) + int(t["nbytes"])), t) for t in rec["tensors"]
            if addr >= int(t["base"]) + int(t["nbytes"])]
    if past:
        dist, best = min(past, key=lambda x: x[0])
    else:
        before = [(int(t["base"]) - addr, t) for t in rec["tensors"] if addr < int(t["base"])]
        if not before:
            return None
        dist, best = min(before, key=lambda x: x[0])
    logged = any(int(t["base"]) == err.alloc for t in rec["tensors"])
    if err.alloc is not None and not logged and err.distance is not None and err.distance < dist:
        return None  # nearer to an allocation that is none of the launch's arguments
    return best


def _element(t: dict, address: int) -> int:
    """The flat element index (in the tensor's own view: from its first element) of ``address``."""
    return (address - int(t["ptr"])) // max(1, int(t.get("itemsize") or 1))


def _full_path(name: str, rec: Optional[dict]) -> str:
    """memcheck prints a source file's base name: the logged kernel's file where they agree."""
    logged = (rec or {}).get("file") or ""
    if logged and (not name or os.path.basename(logged) == os.path.basename(name)):
        return logged
    return name


_ACCESS = {"read": "load", "write": "store", "atomic": "atomic"}


def to_findings(errors: List[MemcheckError], launches: List[Dict[str, Any]]) -> List[Finding]:
    """memcheck's errors folded into findings (by kernel, line and access), in the order their first
    error came, named with the launch log's tensor arguments: a line's errors are given to the
    argument most of them belong to (see :func:`_owner`; one access is one pointer expression)."""
    sites: Dict[tuple, List[MemcheckError]] = {}
    for err in errors:
        sites.setdefault((err.kernel, err.file, err.line, err.access, err.reason), []).append(err)
    found = []
    for errs in sites.values():
        rec = _launch_of(errs[0], launches)
        votes: Dict[Any, list] = {}
        for err in errs:
            t = _owner(err, rec)
            votes.setdefault(None if t is None else t["name"], [t, 0])[1] += 1
        t = max(votes.values(), key=lambda v: v[1])[0]
        found.append(_finding(errs, rec, t))
    return found


def _finding(errs: List[MemcheckError], rec: Optional[dict], t: Optional[dict]) -> Finding:
    """One site's errors (one kernel line and access) as a finding on the tensor ``t`` (or none)."""
    err = errs[0]
    file = _full_path(err.file, rec)
    access = _ACCESS.get(err.access, err.access)
    programs: List[List[int]] = []
    seen = set()
    elements = set()
    for e in errs:
        pid = tuple(program_id(e.block, (rec or {}).get("grid")))
        if pid not in seen:
            seen.add(pid)
            programs.append(list(pid))
        if t is not None and e.address is not None:
            elements.add(_element(t, e.address))
    threads = [f"thread {e.thread} of block {e.block}" for e in errs[:_SHOWN]]
    elements = sorted(elements)
    if err.reason == "misaligned":
        reason = "misaligned"
    elif t is not None and elements and elements[0] < 0:
        reason = "before_start"
    else:
        reason = "past_end"
    name = t["name"] if t else None
    described = ""
    if t is not None and elements:
        lo, hi = elements[0], elements[-1]
        described = f"{name}[{lo}]" if lo == hi else f"{name}[{lo}:{hi + 1}] (flat)"
    where = {"past_end": "past the end of", "before_start": "before the start of",
             "misaligned": "misaligned in"}[reason]
    target = (f"{name} ({'x'.join(str(s) for s in t['shape'])} {t['dtype']}, storage {t['nbytes']} bytes)" if t
              else "an allocation no argument of the launch owns")
    message = f"{access} of {err.size} bytes {where} {target}"
    facts = [["found by", "compute-sanitizer memcheck (one report per thread; the elements are those of each "
                          "thread's first byte, counted from the tensor's first element)"],
             ["threads", "; ".join(threads) + (" ..." if len(errs) > len(threads) else "")]]
    if err.alloc is not None:
        facts.append(["nearest allocation", f"{err.alloc:#x}, {err.alloc_size} bytes (memcheck's first report: "
                                            f"{err.distance} bytes {err.relation} it)"])
    return Finding(
        kind=BoundsCheck.kind, kernel=err.kernel or (rec or {}).get("kernel", ""), file=file, line=err.line,
        source=linecache.getline(file, err.line).strip() if file and err.line else "",
        arg=name, tensor=({"shape": t["shape"], "dtype": t["dtype"], "strides": t["strides"]} if t else None),
        access=access, count=len(errs), program_ids=programs[:_SHOWN], num_programs=len(programs),
        elements=described, element_indices=[element_index(t, e) for e in elements[:_SHOWN]] if t else [],
        num_elements=len(elements), reason=reason, occurrences=len(errs), launches=1, facts=facts, message=message,
        hint="the access needs a mask that keeps its lanes inside the tensor (offsets < n), or a smaller grid")


# --------------------------------------------------------------------------------------------------
# running the script
# --------------------------------------------------------------------------------------------------
def find_sanitizer() -> Optional[str]:
    """The ``compute-sanitizer`` executable: on ``PATH``, else under ``$CUDA_HOME`` or
    ``/usr/local/cuda``; None where there is none."""
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root:
            path = os.path.join(root, "bin", "compute-sanitizer")
            if os.path.isfile(path) and os.access(path, os.X_OK):
                return path
    return None


def gpu_visible() -> Optional[bool]:
    """Whether ``nvidia-smi -L`` lists a GPU; None where there is no ``nvidia-smi`` to ask."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and "GPU" in out.stdout


def gsan_note() -> str:
    """What the report says of data races in this mode: whether Triton's GSan is installed."""
    import importlib.util
    try:
        import triton
        version = triton.__version__
        has = importlib.util.find_spec("triton.experimental.gsan") is not None
    except Exception:
        version, has = "?", False
    if has:
        return (f"data races: not checked (Triton {version} has GSan, triton.experimental.gsan; tritonkit does not "
                "run it yet): the CPU check finds them")
    return (f"data races: not checked (Triton {version} has no GSan, triton.experimental.gsan, which arrived in "
            "Triton 3.9): the CPU check finds them")


class SanitizerUnavailable(Exception):
    """``--gpu=sanitizer`` cannot run here; the message says why and what to do instead."""


def preflight() -> str:
    """The ``compute-sanitizer`` to run.

    Raises:
        SanitizerUnavailable: it is not installed, or no GPU is visible.
    """
    tool = find_sanitizer()
    if tool is None:
        raise SanitizerUnavailable(
            "compute-sanitizer was not found (it comes with the CUDA toolkit: put its bin directory on PATH or "
            "set CUDA_HOME). Without it, check on the CPU: tritonkit check -- python SCRIPT.py")
    if gpu_visible() is False:
        raise SanitizerUnavailable(
            "no GPU is visible here (nvidia-smi -L lists none, or is not permitted): --gpu needs a CUDA GPU. "
            "Check on the CPU instead: tritonkit check -- python SCRIPT.py")
    return tool


def run_sanitized(target, tool: str, work: str) -> Tuple[int, List[MemcheckError], int, List[Dict[str, Any]], str]:
    """Run ``target`` (a :class:`~tritonkit.cli._target.Target`) under memcheck with the launch log
    on, in ``work`` (a directory for the logs). Returns ``(the script's exit status, memcheck's
    errors, their total count, the launches logged, memcheck's text)``."""
    log = os.path.join(work, "memcheck.log")
    launches = os.path.join(work, "launches.jsonl")
    cmd = [tool, "--tool", "memcheck", "--print-limit", str(PRINT_LIMIT), "--show-backtrace", "no",
           "--log-file", log, sys.executable, "-m", "tritonkit.cli._child", "gpu-log", *target.words()]
    env = dict(os.environ, PYTORCH_NO_CUDA_MEMORY_CACHING="1", **{launch_log.ENV: launches})
    env.pop("TRITON_INTERPRET", None)
    proc = subprocess.Popen(cmd, env=env)
    code = wait(proc)
    try:
        with open(log, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
    except OSError:
        text = ""
    errors, total = parse_memcheck(text)
    return code, errors, total, launch_log.read(launches), text


def report(target, tool: str) -> Tuple[Any, int, str]:
    """Run the script under memcheck and build its :class:`~tritonkit.check.CheckReport`. Returns
    ``(report, the script's exit status, memcheck's text)``."""
    from ..results import LaunchRecord
    work = tempfile.mkdtemp(prefix="tritonkit-gpu-")
    try:
        code, errors, total, launches, text = run_sanitized(target, tool, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    findings = to_findings(errors, launches)
    records = []
    for rec in launches:
        grid = tuple(rec["grid"]) if rec.get("grid") else (0, 0, 0)
        records.append(LaunchRecord(kernel=str(rec.get("kernel", "")), grid=grid,
                                    programs=grid[0] * grid[1] * grid[2], engine="gpu"))
    gpu = {"mode": "sanitizer", "tool": tool, "memcheck_errors": total, "memcheck_errors_shown": len(errors),
           "races": gsan_note()}
    return make_report(target, code, findings, records, gpu), code, text
