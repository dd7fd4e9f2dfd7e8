"""Check sessions: while one is active, every Triton kernel launch runs in the checked interpreter."""
from __future__ import annotations

import contextlib
import functools
import sys
from typing import Dict, Iterator, List, Optional

from .checks import KINDS, Check, Hooks, default_checks, kind_of, make_checks
from .errors import CheckAborted, InternalError, launch_timeout
from .findings import Finding, FindingLog, Violation
from .launch import intercept
from .memory.allocator import frozen_heap, keep_freed_memory, no_huge_pages
from .launch.active import activate, active_session, deactivate
from .results import CheckReport, KernelSummary, LaunchRecord, kernel_summaries, summarize

__all__ = ["CheckSession", "checking", "check_launch", "active_session", "ENGINES"]

ENGINES = ("auto", "sequential")
#: polls of one address with no write in between, while no other program can run, after which a
#: program counts as stalled: nothing can change what it polls then, so the count is only a margin.
#: A spin on ``tl.atomic_add(flag, 0)`` polls about every 0.5 ms (measured on the 2-core CPU machine,
#: 2026-11-29: 100,000 polls took 51 s), so a hang is reported after about 5 s
DEFAULT_STALL_POLLS = 10_000
#: where a launch's tensors get their results from (see :class:`CheckSession`'s ``outputs``)
OUTPUTS = ("checked", "gpu")


class CheckSession:
    """Collects the launches and findings of a checked run.

    Create it with :func:`checking` rather than directly.

    Args:
        checks: the checks to run, as finding kinds (``"out_of_bounds"``, ``"undefined_value"``,
            ``"data_race"``, ``"uninitialized_read"``, ``"int_overflow"``, ``"nan_inf"``) or
            :class:`~tritonkit.check.checks.Check` instances; None for the defaults (all but
            ``nan_inf``). An empty list runs the interpreter with only the safety net (lanes outside a
            storage are dropped unreported).
        nan: add the ``nan_inf`` check to the defaults (ignored when ``checks`` is given).
        stop_on_first: stop the program (raise :class:`CheckAborted`) at the first finding.
        timeout: seconds one launch may run before it is stopped and reported, None for no limit
            (ignored with ``pdb``: time spent in the debugger is not the kernel's).
        pdb: open the Python debugger at the first finding, in the kernel frame of the offending
            program and line (launches then run one program at a time).
        engine: ``"auto"`` (the default: the batched engine, which runs many programs per execution
            of the kernel's body, falling back to one program at a time per launch where it must) or
            ``"sequential"`` (one program at a time, like Triton's interpreter).
        batch_memory: the most bytes one value of a batch may take (None: 4 MiB); smaller batches
            use less memory and run slower.
        outputs: ``"checked"`` (the default: a launch's tensors get the interpreter's results) or
            ``"gpu"``: a launch whose tensors are all on a CUDA device, of a compiled kernel, and that
            had no finding is checked in the interpreter and then run natively, and its tensors get
            the GPU's results (bit for bit what the program gets without tritonkit); a launch with
            findings keeps the interpreter's results, where the offending lanes were dropped.
        stall_polls: a program that makes the same load or atomic at the same addresses this many
            times in a row while nothing writes to memory, and that no other program can unblock, is
            stopped with a ``timeout`` finding (``reason="stalled"``): it waits for a value no
            program will write (a program that waits for another one gives way to it first, see
            :mod:`tritonkit.check.engine.cooperative`). 0 turns it off.
        journal: a :class:`~tritonkit.check.journal.Journal` that every finding is written to as it
            is found (and launch records as they end), so that another process can report them
            even if this one ends hard; None for none.
        workers: processes that check an autotuned kernel's configs at once (see
            :mod:`~tritonkit.check.launch.parallel`) and that a long launch's programs are shared
            out between (:mod:`~tritonkit.check.engine.shares`); None: ``TRITONKIT_WORKERS`` if set,
            else the cores this process may use (``os.sched_getaffinity``); 1: everything in this
            process.
        gpu_above: a launch whose tensor arguments are all on a CUDA device and view storages of
            more than this many elements in all is checked on the GPU instead, by its instrumented version, for
            out-of-bounds accesses and int32 offset overflow only, at native speed (see
            :mod:`~tritonkit.check.launch.on_gpu`); None (the default): every launch in the
            interpreter.

    Raises:
        ValueError: an unknown ``engine`` or ``outputs``, a ``batch_memory`` that is not a positive integer,
            a ``timeout`` that is not a positive number (``inf`` means no limit), ``workers`` (or
            ``TRITONKIT_WORKERS``) that is not a positive integer, or a ``gpu_above`` that is not a
            number of elements, 0 or more.
    """

    def __init__(self, checks: Optional[List[Check]] = None, stop_on_first: bool = False,
                 timeout: Optional[float] = None, pdb: bool = False, nan: bool = False, engine: str = "auto",
                 batch_memory: Optional[int] = None, journal=None, outputs: str = "checked",
                 stall_polls: int = DEFAULT_STALL_POLLS, workers: Optional[int] = None,
                 gpu_above: Optional[int] = None) -> None:
        if engine not in ENGINES:
            raise ValueError(f"engine must be one of {', '.join(ENGINES)}, not {engine!r}")
        if outputs not in OUTPUTS:
            raise ValueError(f"outputs must be one of {', '.join(OUTPUTS)}, not {outputs!r}")
        try:
            timeout = launch_timeout(timeout)
        except ValueError as e:
            raise ValueError(f"timeout {e}") from None
        self.outputs = outputs
        if not isinstance(stall_polls, int) or stall_polls < 0:
            raise ValueError(f"stall_polls must be a number of polls, 0 or more, not {stall_polls!r}")
        self.stall_polls = stall_polls
        if batch_memory is not None and (not isinstance(batch_memory, int) or batch_memory <= 0):
            raise ValueError(f"batch_memory must be a positive number of bytes, not {batch_memory!r}")
        self.engine = engine
        self.batch_memory = batch_memory
        if gpu_above is not None and (not isinstance(gpu_above, int) or isinstance(gpu_above, bool) or gpu_above < 0):
            raise ValueError(f"gpu_above must be a number of elements, 0 or more (or None), not {gpu_above!r}")
        self.gpu_above = gpu_above
        self._gpu_records: Dict[tuple, List[dict]] = {}  # the GPU's records of launches, by finding
        self._gpu_more: Dict[tuple, List[int]] = {}  # [lanes, launches] of the records past the kept ones
        from .forks import resolve_workers
        self.workers = resolve_workers(workers)
        self.checks: List[Check] = default_checks(nan=nan) if checks is None else make_checks(checks)
        #: the checks' hooks by event (what the builder calls)
        self.hooks = Hooks(self.checks)
        self.stop_on_first = stop_on_first
        self.timeout = None if pdb else timeout
        self.pdb = pdb
        self.pdb_done = False
        self.launches: List[LaunchRecord] = []
        self._log = FindingLog(KINDS)
        self.journal = journal
        self.aborted: Optional[str] = None
        # (id(autotuner), key) -> autotuner: keys already checked under every config in this session
        self.autotuned_keys: Dict[tuple, object] = {}
        # (specialization, call site) of static_print/static_assert already run: once per compilation
        self.static_sites: set = set()

    # --- results ----------------------------------------------------------------------------------
    @property
    def findings(self) -> List[Finding]:
        """The findings so far, folded by (kind, kernel, file, line, argument), in order of discovery."""
        return self._log.findings()

    @property
    def kernels(self) -> List[KernelSummary]:
        """One summary per kernel launched, in order of first launch."""
        return kernel_summaries(self.launches, self.findings)

    def summary(self) -> dict:
        """Totals: launches, programs run, accesses and lanes checked, findings by kind, fallbacks
        (see :func:`~tritonkit.check.results.summarize`)."""
        return summarize(self.launches, self.findings, [c.kind for c in self.checks], self.engine, self.aborted)

    def report(self, script: Optional[dict] = None) -> CheckReport:
        """The session as a :class:`~tritonkit.check.CheckReport` (``script``: what the command line
        ran, ``{"target": argv, "failed": bool}``, or None)."""
        import triton

        from .._version import __version__
        return CheckReport(findings=self.findings, launches=len(self.launches), kernels=self.kernels,
                           launch_records=list(self.launches), summary=self.summary(),
                           versions={"tritonkit": __version__, "triton": triton.__version__}, script=script)

    def to_dict(self) -> dict:
        """The session as JSON-ready data: ``{"findings", "launches", "kernels", "launch_records",
        "summary", "versions"}`` (:meth:`report`'s ``to_dict``)."""
        return self.report().to_dict()

    def close_journal(self) -> None:
        """Write the findings changed since the last snapshot and the session's end to the journal
        (if any); the journal stays open for the program's exit line."""
        if self.journal is not None:
            self.journal.findings(self._log, final=True)
            self.journal.end(self.aborted)

    # --- called by launches ----------------------------------------------------------------------
    def begin_launch(self, launch) -> None:
        """A launch starts (``launch``: a :class:`~tritonkit.check.launch.Launch`): record it, start
        the checks' per-launch state."""
        self.launches.append(launch.record)
        for check in self.checks:
            check.begin_launch(launch)

    def end_launch(self, launch) -> None:
        """A launch ended: end the checks' per-launch state; journal its record (and the findings it
        changed, at most once a second)."""
        for check in self.checks:
            check.end_launch(launch)
        if self.journal is not None:
            self.journal.launch(launch.record)
            self.journal.findings(self._log, final=False)

    def adopt(self, records: List[LaunchRecord], violations: list, printed: str = "") -> None:
        """Take what a config's worker process added to its copy of the session, as if this
        process had run the config (see :mod:`~tritonkit.check.launch.parallel`): its launch
        records, and ``violations`` as ``(index into records, violation, grid ndim)`` in the
        order they were found, and the text it printed.

        Raises:
            CheckAborted: ``stop_on_first``, at the first violation of a kind that does not stop its
                launch itself (the ones after it are not taken, as a serial run never made them).
        """
        if printed:
            sys.stdout.write(printed)
        by_record: Dict[int, list] = {}
        for k, v, ndim in violations:
            by_record.setdefault(k, []).append((v, ndim))
        for k, record in enumerate(records):
            self.launches.append(record)
            for v, ndim in by_record.get(k, ()):
                index, new = self._log.add(v, id(record), ndim)
                if new and self.journal is not None:
                    self.journal.new_finding(index, self._log.finding(index))
                if self.stop_on_first and not kind_of(v.kind).aborts_launch:
                    self.aborted = "stopped at the first finding (--stop-on-first)"
                    raise CheckAborted(self.aborted)
            if self.journal is not None:
                self.journal.launch(record)
                self.journal.findings(self._log, final=False)

    def add_gpu_launch(self, record: LaunchRecord, found: List[dict]) -> None:
        """A launch checked on the GPU ended (see :mod:`~tritonkit.check.launch.on_gpu`): record it, and
        fold what its instrumented kernel recorded (``found``: the records of
        :meth:`~tritonkit.check.gpu.runtime.Instrumenter.launch`) into the findings.

        Raises:
            CheckAborted: ``stop_on_first`` and the launch had a finding.
        """
        from .gpu.runtime import to_findings
        self.launches.append(record)
        new_found = False
        for rec in found:
            rec["config"] = record.config
            for f in to_findings([rec]):
                key = _gpu_key(f)
                recs = self._gpu_records.setdefault(key, [])
                more = self._gpu_more.setdefault(key, [0, 0])
                if recs and recs[-1] is rec:
                    pass
                elif len(recs) < _GPU_RECORDS_KEPT:
                    recs.append(rec)
                else:  # a launch made again and again: its lanes and launches counted, its records dropped
                    more[0] += f.count
                    more[1] += 1
                index, new = self._log.add_given(key, functools.partial(_gpu_finding, recs, key, more))
                if new and self.journal is not None:
                    self.journal.new_finding(index, self._log.finding(index))
                new_found = True
        if self.journal is not None:
            self.journal.launch(record)
            self.journal.findings(self._log, final=False)
        if new_found and self.stop_on_first:
            self.aborted = "stopped at the first finding (--stop-on-first)"
            raise CheckAborted(self.aborted)

    def settle_side_journals(self, paths: List[str]) -> None:
        """The findings of the side journals at ``paths`` (config workers', the held kept config's:
        see :mod:`~tritonkit.check.launch.parallel`) were taken into this session, or dropped: the
        journal gets every finding changed since its last snapshot, then a ``settled`` line for
        each, after which readers leave those side journals out."""
        if self.journal is None:
            return
        self.flush_journal()
        for p in paths:
            self.journal.settled(p)

    def flush_journal(self) -> None:
        """Journal every finding changed since the last snapshot now (snapshots at a launch's end
        are at most once a second), as before a stretch in which this process may be killed with
        work of others pending (config workers)."""
        if self.journal is not None:
            self.journal.findings(self._log, final=True)

    def add_violation(self, v: Violation, launch, frame=None) -> None:
        """Fold a violation of ``launch`` into the findings; open pdb at ``frame`` (a kernel frame)
        for the first one with ``pdb``.

        Raises:
            CheckAborted: ``stop_on_first``, for a kind that does not stop its launch itself.
        """
        launch.found = True
        index, new = self._log.add(v, id(launch.record), launch.grid_ndim)
        if new and self.journal is not None:
            self.journal.new_finding(index, self._log.finding(index))
        if self.pdb and not self.pdb_done and frame is not None:
            self.pdb_done = True
            _debug_at(frame, v)
        if self.stop_on_first and not kind_of(v.kind).aborts_launch:
            self.aborted = "stopped at the first finding (--stop-on-first)"
            raise CheckAborted(self.aborted)


def _gpu_key(f: Finding) -> tuple:
    """What a finding of the GPU's records is folded by across launches (as within one: see
    :func:`~tritonkit.check.gpu.runtime.to_findings`)."""
    return (f.kind, f.kernel, f.file, f.line, f.access, f.arg, f.reason, tuple(map(tuple, f.facts)))


#: launches' records kept per finding checked on the GPU; later ones add their lanes and launch count only
#: (a buggy kernel launched in a loop would otherwise keep up to 4096 records per launch for the session)
_GPU_RECORDS_KEPT = 32


def _gpu_finding(recs: List[dict], key: tuple, more: List[int]) -> Finding:
    """The finding ``key`` (see :meth:`CheckSession.add_gpu_launch`) of the GPU's records ``recs``, as
    they stand now, with the configs they ran under, and ``more``: ``[lanes, launches]`` of the
    launches past those kept."""
    from .gpu.runtime import to_findings
    for f in to_findings(recs):
        if _gpu_key(f) == key:
            f.configs = list(dict.fromkeys(r["config"] for r in recs if r.get("config")))
            if more[1]:
                f.count += more[0]
                f.occurrences += more[0]
                f.launches += more[1]
                f.message += f"; {more[0]} more lanes in {more[1]} later launches (their programs not kept)"
            return f
    raise InternalError(f"a finding of the GPU's records is lost: {key}")  # pragma: no cover


def _debug_at(frame, v: Violation) -> None:
    """Open pdb on a kernel frame. A live frame (the program is still running) can be stepped with
    ``n``/``s`` and resumed with ``c``; a frame that raised is inspected post mortem."""
    import pdb

    pid = ", ".join(str(i) for i in v.program_id)
    sys.stdout.write(f"\ntritonkit: {v.kind} in {v.kernel}, program ({pid}), line {frame.f_lineno}"
                     f"{': ' + v.message if v.message else ''}\n"
                     "tritonkit: tensors print as numpy arrays (p offsets, p mask; np.asarray(x) gives one); "
                     "'c' goes on checking\n")
    sys.stdout.flush()
    debugger = pdb.Pdb()
    debugger.reset()
    f = frame
    while f is not None:
        debugger.botframe = f
        f = f.f_back
    debugger.interaction(frame, None)
    if debugger.quitting:
        raise CheckAborted("quit from pdb")
    if debugger.stoplineno != -1 and _on_stack(frame):
        # n / s / until / return: trace from the kernel frame, as pdb.set_trace does, to stop there
        f = frame
        while f is not None:
            f.f_trace = debugger.trace_dispatch
            f = f.f_back
        sys.settrace(debugger.trace_dispatch)


def _on_stack(frame) -> bool:
    f = sys._getframe()
    while f is not None:
        if f is frame:
            return True
        f = f.f_back
    return False


@contextlib.contextmanager
def checking(checks: Optional[List[Check]] = None, stop_on_first: bool = False,
             timeout: Optional[float] = None, pdb: bool = False, nan: bool = False, engine: str = "auto",
             batch_memory: Optional[int] = None, journal=None, outputs: str = "checked",
             stall_polls: Optional[int] = None, workers: Optional[int] = None,
             gpu_above: Optional[int] = None) -> Iterator[CheckSession]:
    """Check every Triton kernel launched inside the ``with`` block on the CPU.

    Every ``@triton.jit`` launch (plain, through ``@triton.autotune`` or ``@triton.heuristics``)
    runs in tritonkit's checked interpreter, whatever ``TRITON_INTERPRET`` says; tensors on a GPU
    are copied to the host and back. An autotuned kernel runs under every config once per
    distinct key (outputs are restored after each but the first config, which is the one kept).

    Args:
        checks: the checks to run, as finding kinds or Check instances (None: the defaults, every
            kind but ``nan_inf``).
        stop_on_first: raise :class:`CheckAborted` at the first finding.
        timeout: seconds a launch may run before it is stopped and reported (None: no limit).
        pdb: open pdb at the first finding, in the kernel frame of the offending program.
        nan: also report where NaN/Inf values that reach memory were made (``nan_inf``).
        engine: ``"auto"`` (batched, with a per-launch fallback to one program at a time) or
            ``"sequential"`` (always one program at a time).
        batch_memory: the most bytes one value of a batch may take (None: 4 MiB).
        outputs: ``"checked"`` (tensors get the interpreter's results) or ``"gpu"`` (a launch on CUDA
            tensors with no finding also runs natively, and its tensors get the GPU's results).
        stall_polls: polls of one address with no write in between after which a program that no
            other program can unblock is stopped as stalled (None: 100000; 0: never).
        journal: a :class:`~tritonkit.check.journal.Journal` to write every finding to as it is
            found (None: none; ``tritonkit check`` and its child processes journal).
        workers: processes that check an autotuned kernel's configs at once, and that a long
            launch's programs are shared out between (see :mod:`tritonkit.check.engine.shares`; None:
            as many as the cores this process may use, or ``TRITONKIT_WORKERS``; 1: everything in
            this process).
        gpu_above: a launch whose tensor arguments are all on a CUDA device and view storages of
            more than this many elements in all is checked on the GPU instead, by its instrumented version, for
            out-of-bounds accesses and int32 offset overflow only, at native speed (see
            :mod:`~tritonkit.check.launch.on_gpu`); None (the default): every launch in the
            interpreter.

    Yields:
        the :class:`CheckSession`; read ``session.findings`` after the block.

    Raises:
        RuntimeError: if a session is already active (sessions do not nest).
        ValueError: an unknown check kind in ``checks``, an unknown ``engine`` or ``outputs``, a bad
            ``batch_memory``, ``workers`` or ``gpu_above``, or an unknown device model in ``TRITONKIT_DEVICE_MODEL``.
        CheckAborted: out of the block, when a kernel could not finish or ``stop_on_first`` fired;
            the reason is in ``session.findings``.

    Example::

        with tritonkit.checking() as session:
            add_kernel[(4,)](x, y, out, 1000, BLOCK_SIZE=256)
        assert not session.findings
    """
    from .launch.cpu_driver import device_model
    device_model()  # a bad TRITONKIT_DEVICE_MODEL is refused before anything is patched
    session = CheckSession(checks=checks, stop_on_first=stop_on_first, timeout=timeout, pdb=pdb, nan=nan,
                           engine=engine, batch_memory=batch_memory, journal=journal, outputs=outputs,
                           stall_polls=DEFAULT_STALL_POLLS if stall_polls is None else stall_polls,
                           workers=workers, gpu_above=gpu_above)
    activate(session)
    started: List[Check] = []
    keep_freed_memory()
    pages = no_huge_pages().__enter__()
    heap = frozen_heap().__enter__()
    try:
        intercept.install()
        for check in session.checks:
            check.begin_session(session)
            started.append(check)
        yield session
    except CheckAborted as e:
        if session.aborted is None:
            session.aborted = str(e)
        raise
    finally:
        for check in reversed(started):
            check.end_session(session)
        intercept.uninstall()
        deactivate()
        heap.__exit__(None, None, None)
        pages.__exit__(None, None, None)
        session.close_journal()


def check_launch(kernel, grid, *args, checks: Optional[List[Check]] = None, nan: bool = False,
                 engine: str = "auto", **kwargs) -> CheckSession:
    """Check one launch of one kernel: ``kernel[grid](*args, **kwargs)`` in the checked interpreter.

    Args:
        kernel: a ``@triton.jit`` function, possibly wrapped by ``@triton.autotune`` or
            ``@triton.heuristics``.
        grid: the launch grid (tuple of program counts, or a callable of the arguments).
        *args, **kwargs: the kernel's arguments, as for ``kernel[grid](...)``.
        checks: the checks to run (None: the defaults).
        nan: also run the ``nan_inf`` check.
        engine: ``"auto"`` or ``"sequential"`` (see :func:`checking`).

    Returns:
        the :class:`CheckSession` with the findings and the launch record. A launch that could
        not finish is reported as a finding (``unsupported``, ``kernel_error``, ``timeout``), not
        raised.
    """
    try:
        with checking(checks=checks, nan=nan, engine=engine) as session:
            kernel[grid](*args, **kwargs)
    except InternalError:
        raise
    except CheckAborted:
        pass
    return session
