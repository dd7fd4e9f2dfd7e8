"""What a checked run produced, as plain data that crosses processes and files: one
:class:`LaunchRecord` per launch, one :class:`KernelSummary` per kernel, and the whole run as a
:class:`CheckReport` (what ``tritonkit check --json`` writes and the doctor reads back)."""
from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Mapping, Optional, Tuple

from .findings import Finding, read_fields


@dataclasses.dataclass
class LaunchRecord:
    """What one checked launch did.

    Attributes:
        kernel: the kernel's name.
        grid: the grid, as (x, y, z) program counts.
        programs: programs run (the product of the grid unless stopped early).
        config: the autotune config, or None.
        accesses: memory operations checked (one per op per program).
        lanes: active lanes checked.
        seconds: wall time of the launch in the interpreter, in seconds.
        status: ``"ok"``, ``"empty_grid"``, ``"aborted"``, ``"captured"`` (launched while a CUDA
            graph was being captured, so run natively and not checked), or ``"unfinished"`` (the
            process ended in the middle of the launch: ``programs`` is how many it had checked;
            see :mod:`tritonkit.check.launch.progress`).
        outputs: where the launch's tensors got their results: ``"checked"`` (the interpreter's) or
            ``"gpu"`` (checked, then run natively: ``outputs="gpu"`` and no finding).
        engine: which engine ran it: ``"batched"`` (many programs per execution of the kernel's
            body), ``"sequential"`` (one program at a time: forced, or after ``fallback``) or
            ``"gpu"``: too large for the interpreter (``gpu_above``), run natively as its instrumented
            version, checked for out-of-bounds accesses and int32 overflow only (see
            :mod:`tritonkit.check.launch.on_gpu`); ``seconds`` is then its time on the GPU.
        fallback: why the batched engine gave the launch to the sequential one, or None.
        batches: executions of the kernel's body for a batch of programs (0 when sequential).
        groups: extra batches made where control flow diverged between programs.
        masked_loops: executions of a loop whose trip count differed between the programs of a
            batch, run once for the batch: a ``range`` loop's finished programs leave the batch
            (see ``interp.compact``), a ``while`` loop masks them off (see ``interp.simt``).
        masked_branches: executions of an ``if`` whose condition differed between the programs of
            a batch, each branch run once for the batch with its programs active (see
            ``interp.simt``) instead of splitting it into groups.
        processes: processes that ran the launch's programs: 1, or more where the batched engine
            shared them out with forked workers (see :mod:`tritonkit.check.engine.shares`).
            ``batches``, ``groups``, ``masked_loops`` and ``masked_branches`` then count every
            process's.
        flops: floating-point operations the launch's programs executed, counted like Nsight
            Compute counts them: 1 per element of an add, subtract, multiply or divide, 2 of an
            fma, ``2*M*N*K`` per ``tl.dot``; every lane of the block, masked or not (what the
            hardware executes); special functions (exp, sqrt, ...) not counted.
        flops_by_width: the same by the operands' width, as Proton names them: ``{"flops16": n,
            "flops32": m}`` (a ``tl.dot`` on bf16 is ``flops16``).
        bytes_read, bytes_written: bytes the active, in-bounds lanes of loads / stores moved (an
            atomic counts as both); None unless the :class:`~tritonkit.check.checks.AccessMap` check ran.
        unique_bytes_read, unique_bytes_written: bytes of the distinct elements read / written
            (what a perfect cache fetches from DRAM); None where not tracked (see ``AccessMap``).
        access_maps: binned maps of which elements each tensor argument had read and written, by
            which program, and the lanes outside it (``AccessMap``; empty when not kept).
    """

    kernel: str
    grid: Tuple[int, int, int]
    programs: int = 0
    config: Optional[str] = None
    accesses: int = 0
    lanes: int = 0
    seconds: float = 0.0
    status: str = "ok"
    outputs: str = "checked"
    engine: str = "sequential"
    fallback: Optional[str] = None
    batches: int = 0
    groups: int = 0
    masked_loops: int = 0
    masked_branches: int = 0
    processes: int = 1
    flops: int = 0
    flops_by_width: Dict[str, int] = dataclasses.field(default_factory=dict)
    bytes_read: Optional[int] = None
    bytes_written: Optional[int] = None
    unique_bytes_read: Optional[int] = None
    unique_bytes_written: Optional[int] = None
    access_maps: List[dict] = dataclasses.field(default_factory=list)

    def to_dict(self) -> dict:
        """Plain JSON data (every attribute; ``grid`` as a list)."""
        out = dataclasses.asdict(self)
        out["grid"] = list(self.grid)
        return out

    @classmethod
    def from_dict(cls, d: dict) -> "LaunchRecord":
        """The inverse of :meth:`to_dict`, tolerant (see :func:`~tritonkit.check.findings.read_fields`):
        unknown keys are ignored, a missing or malformed field takes its default (``kernel`` ``"?"``,
        ``grid`` ``()``: unknown).

        Raises:
            TypeError: ``d`` is not a mapping.
        """
        return cls(**read_fields(cls, d, kernel="?", grid=()))


@dataclasses.dataclass
class KernelSummary:
    """Per kernel: launches and programs checked, configs seen, findings made, seconds in the interpreter."""

    name: str
    launches: int = 0
    programs: int = 0
    configs: List[str] = dataclasses.field(default_factory=list)
    findings: int = 0
    seconds: float = 0.0

    def to_dict(self) -> dict:
        """Plain JSON data."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "KernelSummary":
        """The inverse of :meth:`to_dict`, tolerant like :meth:`LaunchRecord.from_dict` (``name`` ``"?"``).

        Raises:
            TypeError: ``d`` is not a mapping.
        """
        return cls(**read_fields(cls, d, name="?"))


def kernel_summaries(records: List[LaunchRecord], findings: List[Finding]) -> List[KernelSummary]:
    """One :class:`KernelSummary` per kernel of ``records``, in order of first launch: its launches,
    programs, configs (in order of first use), seconds in the interpreter, and how many of
    ``findings`` are its."""
    out: Dict[str, KernelSummary] = {}
    for r in records:
        k = out.setdefault(r.kernel, KernelSummary(r.kernel))
        k.launches += 1
        k.programs += r.programs
        k.seconds += r.seconds
        if r.config is not None and r.config not in k.configs:
            k.configs.append(r.config)
    for f in findings:
        if f.kernel in out:
            out[f.kernel].findings += 1
    return list(out.values())


def summarize(records: List[LaunchRecord], findings: List[Finding], checks: List[str], engine: str,
              aborted: Optional[str] = None, interrupted: bool = False) -> Dict[str, Any]:
    """A checked run's totals (``CheckReport.summary``): ``launches``, ``programs`` run, ``accesses``
    and ``lanes`` checked, ``empty_grids``, ``seconds`` in the interpreter, ``findings_by_kind``,
    the launches ``captured`` in a CUDA graph (run natively, unchecked), the ``checks`` that ran, the
    ``engine`` asked for, ``batched_launches``, ``gpu_launches`` (checked on the GPU: ``gpu_above``),
    the ``fallbacks`` (kernel, grid, engine, reason of each launch that did not run batched), the
    ``unfinished`` launches (kernel, grid, programs checked, seconds: the process ended in the
    middle of them), why the run was ``aborted`` (or None) and whether it was ``interrupted``
    (Ctrl-C)."""
    by_kind: Dict[str, int] = {}
    for f in findings:
        by_kind[f.kind] = by_kind.get(f.kind, 0) + 1
    return {
        "launches": len(records),
        "programs": sum(r.programs for r in records),
        "accesses": sum(r.accesses for r in records),
        "lanes": sum(r.lanes for r in records),
        "empty_grids": sum(r.status == "empty_grid" for r in records),
        "captured": sum(r.status == "captured" for r in records),
        "unfinished": [{"kernel": r.kernel, "grid": list(r.grid), "programs": r.programs, "seconds": r.seconds}
                       for r in records if r.status == "unfinished"],
        "seconds": sum(r.seconds for r in records),
        "findings_by_kind": by_kind,
        "checks": list(checks),
        "engine": engine,
        "batched_launches": sum(r.engine == "batched" for r in records),
        "gpu_launches": sum(r.engine == "gpu" for r in records),
        "fallbacks": [{"kernel": r.kernel, "grid": list(r.grid), "engine": r.engine, "reason": r.fallback}
                      for r in records if r.fallback],
        "aborted": aborted,
        "interrupted": interrupted,
    }


@dataclasses.dataclass
class CheckReport:
    """A whole checked run: what ``tritonkit check --json FILE`` writes
    (:meth:`~tritonkit.check.CheckSession.report` makes one).

    Attributes:
        findings: the folded findings, in order of discovery.
        launches: how many launches were checked.
        kernels: one summary per kernel.
        launch_records: one record per launch.
        summary: totals (see :meth:`~tritonkit.check.CheckSession.summary`).
        versions: ``{"tritonkit": ..., "triton": ...}``.
        script: ``{"target": [argv...], "failed": bool}`` when the command line ran a script, else None.
    """

    findings: List[Finding] = dataclasses.field(default_factory=list)
    launches: int = 0
    kernels: List[KernelSummary] = dataclasses.field(default_factory=list)
    launch_records: List[LaunchRecord] = dataclasses.field(default_factory=list)
    summary: Dict[str, Any] = dataclasses.field(default_factory=dict)
    versions: Dict[str, str] = dataclasses.field(default_factory=dict)
    script: Optional[Dict[str, Any]] = None

    def to_dict(self) -> dict:
        """Plain JSON data (``script`` left out when None)."""
        out = {"findings": [f.to_dict() for f in self.findings], "launches": self.launches,
               "kernels": [k.to_dict() for k in self.kernels],
               "launch_records": [r.to_dict() for r in self.launch_records], "summary": dict(self.summary),
               "versions": dict(self.versions)}
        if self.script is not None:
            out["script"] = dict(self.script)
        return out

    @classmethod
    def from_dict(cls, d: dict) -> "CheckReport":
        """The inverse of :meth:`to_dict`, tolerant: items of a list that are not objects are left
        out, every other field reads as :func:`~tritonkit.check.findings.read_fields` does.

        Raises:
            TypeError: ``d`` is not a mapping.
        """
        kw = read_fields(cls, d)
        for name, item in (("findings", Finding), ("kernels", KernelSummary), ("launch_records", LaunchRecord)):
            kw[name] = [item.from_dict(x) for x in kw.get(name, []) if isinstance(x, Mapping)]
        return cls(**kw)
