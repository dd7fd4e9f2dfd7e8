"""What the GPU modes share: a program id from CUDA block coordinates, an element's coordinates, the
wait for the script's process, and the :class:`~tritonkit.check.CheckReport` of a GPU run."""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence


def program_id(block: Sequence[int], grid: Optional[Sequence[int]]) -> List[int]:
    """A CUDA block's coordinates ``(x, y, z)`` as the Triton program id with as many axes as the
    launch's ``grid`` (three program counts; trailing axes of one program dropped); where the grid
    is unknown (None), trailing zero coordinates are dropped."""
    n = 3
    if grid:
        while n > 1 and grid[n - 1] == 1:
            n -= 1
    else:
        while n > 1 and block[n - 1] == 0:
            n -= 1
    return [int(b) for b in block[:n]]


def element_index(t: dict, flat: int) -> List[int]:
    """An element of the logged tensor ``t`` (see :func:`.launch_log.describe_tensor`) given as
    ``flat`` elements from its first one: its coordinates in ``t``'s shape where ``t`` is contiguous
    and the element inside it, else ``[flat]`` (past an end, before the start, or a strided view)."""
    shape = [int(s) for s in t.get("shape") or []]
    strides = [int(s) for s in t.get("strides") or []]
    numel, contiguous, expect = 1, True, 1
    for s, st in zip(reversed(shape), reversed(strides)):
        if s != 1 and st != expect:
            contiguous = False
        expect *= s
        numel *= s
    if not shape or not contiguous or flat < 0 or flat >= numel:
        return [flat]
    out = []
    for s in reversed(shape):
        out.append(flat % s)
        flat //= s
    return list(reversed(out))


def wait(proc) -> int:
    """Wait for the script's process and return its exit status; Ctrl-C reaches it too (one process
    group), so this process waits on for it to end."""
    while True:
        try:
            return proc.wait()
        except KeyboardInterrupt:
            continue


def make_report(target, code: int, findings: list, records: list, gpu: Dict, counted: Optional[Dict[str, int]] = None,
                kinds: Optional[List[str]] = None):
    """The :class:`~tritonkit.check.CheckReport` of a GPU run of ``target`` (a
    :class:`~tritonkit.cli._target.Target`) that exited with ``code``: its ``findings``, the
    :class:`~tritonkit.check.results.LaunchRecord` kept (``records``), more launches per kernel
    ``counted`` but not kept (a native run may make millions), the summary's ``gpu`` entry, and the
    kinds of finding the mode checks (``kinds``; None: out of bounds only).
    No interpreter ran: the summary's ``engine`` is None."""
    from ..._version import __version__
    from ..checks.bounds import BoundsCheck
    from ..journal import installed_version
    from ..results import CheckReport, KernelSummary, kernel_summaries, summarize
    kernels = kernel_summaries(records, findings)
    by_name = {k.name: k for k in kernels}
    for name, n in (counted or {}).items():
        if name not in by_name:
            by_name[name] = KernelSummary(name)
            kernels.append(by_name[name])
        by_name[name].launches += n
    for k in kernels:
        k.findings = sum(f.kernel == k.name for f in findings)
    summary = summarize(records, findings, kinds or [BoundsCheck.kind], "gpu")
    summary["launches"] = len(records) + sum((counted or {}).values())
    summary["engine"] = None
    summary["gpu"] = gpu
    return CheckReport(findings=findings, launches=summary["launches"], kernels=kernels, launch_records=records,
                       summary=summary, versions={"tritonkit": __version__, "triton": installed_version("triton")},
                       script={"target": target.argv, "failed": code != 0})
