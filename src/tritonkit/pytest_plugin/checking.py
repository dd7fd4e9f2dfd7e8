"""The checking half of ``pytest --tritonkit`` (:mod:`tritonkit.pytest_plugin` registers it only when
``--tritonkit`` is given; this module imports the checked interpreter).

Per test: a check session from the start of its setup to the end of its body, then one for its
teardown. Each session's findings, with those of the Python child processes that came in meanwhile
(read from their journals), make a :class:`PhaseResult`; the phase fails where there are findings
and it did not fail already, and the result travels on the phase's report as plain data
(:data:`~tritonkit.pytest_plugin.options.REPORT_ATTR`), which pytest-xdist carries to the controller. The
process that reports (the only one, or the xdist controller) gathers them per test into a
:class:`TestResult`, prints the summary and writes the JSON.
"""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sys
import tempfile
from typing import Any, Dict, List, Optional, Set, Tuple

import pytest

from ..check.findings import Finding, to_json, write_json
from ..check.journal import Journal, RunWatcher, read_run
from ..check.process import CheckOptions, install, uninstall, watch_forks
from ..check.results import KernelSummary, LaunchRecord, kernel_summaries, summarize
from .options import REPORT_ATTR, marker_options

_RUN_DIR_KEY = "tritonkit_run_dir"
_BEFORE_KEY = "tritonkit_env_before"
_SUMMED = ("launches", "programs", "accesses", "lanes", "empty_grids", "captured", "seconds", "batched_launches",
           "gpu_launches")
_MAX_FALLBACKS = 20
#: resident memory a suite may gain between two garbage collections between tests where no test failed
_GARBAGE_MARGIN = 256 << 20
_SHOWN_TESTS = 30


@dataclasses.dataclass
class PhaseResult:
    """What one check session of a test found: ``when`` (``"call"``: setup and body; ``"setup"``
    where the setup failed; ``"teardown"``), its own findings and launch records, those of child
    processes (``processes``: the journals they came from); ``failed_it``: the phase failed because
    of these findings."""

    when: str
    checks: List[str]
    engine: str
    findings: List[Finding] = dataclasses.field(default_factory=list)
    records: List[LaunchRecord] = dataclasses.field(default_factory=list)
    child_findings: List[Finding] = dataclasses.field(default_factory=list)
    processes: Set[str] = dataclasses.field(default_factory=set)  # journals of the child processes heard from
    failed_it: bool = False

    @property
    def all_findings(self) -> List[Finding]:
        return self.findings + self.child_findings

    def to_data(self) -> Dict[str, Any]:
        """Plain JSON data (what crosses to the xdist controller): ``findings``, ``kernels``, ``summary``."""
        found = self.all_findings
        summary = summarize(self.records, found, self.checks, self.engine)
        summary["fallbacks"] = summary["fallbacks"][:_MAX_FALLBACKS]
        summary["processes"] = len(self.processes)
        data = {"findings": [f.to_dict() for f in found],
                "kernels": [k.to_dict() for k in kernel_summaries(self.records, found)], "summary": summary}
        return json.loads(to_json(data))  # numpy numbers as numbers: execnet carries only plain types


@dataclasses.dataclass
class TestResult:
    """One test's checking over its phases, as the reporting process gathers it from the reports."""

    outcome: str = "passed"
    findings: List[dict] = dataclasses.field(default_factory=list)
    kernels: Dict[str, KernelSummary] = dataclasses.field(default_factory=dict)
    summary: Dict[str, Any] = dataclasses.field(default_factory=dict)

    def add(self, data: Dict[str, Any]) -> None:
        """Fold in one phase's :meth:`PhaseResult.to_data`."""
        self.findings.extend(data.get("findings") or [])
        for d in data.get("kernels") or []:
            k = KernelSummary.from_dict(d)
            have = self.kernels.get(k.name)
            if have is None:
                self.kernels[k.name] = k
            else:
                have.launches += k.launches
                have.programs += k.programs
                have.findings += k.findings
                have.seconds += k.seconds
                have.configs += [c for c in k.configs if c not in have.configs]
        self.summary = merge_summaries(self.summary, data.get("summary") or {})

    def to_dict(self) -> Dict[str, Any]:
        """Plain JSON data: ``outcome``, ``findings``, ``kernels``, ``summary``."""
        return {"outcome": self.outcome, "findings": self.findings,
                "kernels": [k.to_dict() for k in self.kernels.values()], "summary": self.summary}


def merge_summaries(a: Dict[str, Any], b: Dict[str, Any]) -> Dict[str, Any]:
    """Two :func:`~tritonkit.check.results.summarize` totals as one (counts and seconds added)."""
    if not a:
        return dict(b)
    out = dict(a)
    for key in _SUMMED + ("processes",):
        out[key] = (a.get(key) or 0) + (b.get(key) or 0)
    by_kind = dict(a.get("findings_by_kind") or {})
    for k, n in (b.get("findings_by_kind") or {}).items():
        by_kind[k] = by_kind.get(k, 0) + n
    out["findings_by_kind"] = by_kind
    out["fallbacks"] = ((a.get("fallbacks") or []) + (b.get("fallbacks") or []))[:_MAX_FALLBACKS]
    out["aborted"] = a.get("aborted") or b.get("aborted")
    return out


class _Running:
    """A check session in progress for one test."""

    def __init__(self, context, session, result: PhaseResult):
        self.context, self.session, self.result = context, session, result


class CheckingPlugin:
    """The hooks of ``pytest --tritonkit`` (see the module).

    Args:
        config: pytest's config; options: the run's :class:`~tritonkit.check.process.CheckOptions`.
    """

    def __init__(self, config, options: CheckOptions):
        self.config = config
        self.options = options
        workerinput = getattr(config, "workerinput", None)
        self.worker: Optional[str] = workerinput.get("workerid") if isinstance(workerinput, dict) else None
        given = workerinput.get(_RUN_DIR_KEY) if self.worker else None
        self.owns_run_dir = not given
        self.run_dir = given or tempfile.mkdtemp(prefix="tritonkit-pytest-")
        before = workerinput.get(_BEFORE_KEY) if self.worker else None
        self.env_before = before if isinstance(before, dict) else {"PYTHONPATH": os.environ.get("PYTHONPATH")}
        self.kinds = options.kinds()
        self.tests: Dict[str, TestResult] = {}
        self.runs_tests = True
        self.journal: Optional[Journal] = None
        self.watcher: Optional[RunWatcher] = None
        self._running: Dict[str, _Running] = {}
        self._pending: Dict[Tuple[str, str], PhaseResult] = {}
        self._child_seen: Dict[tuple, Tuple[Optional[PhaseResult], int]] = {}
        self._failed = False  # a phase failed since the last collection between tests
        self._rss_floor: Optional[int] = None  # resident bytes after the last collection between tests
        #: where the reporting process writes the JSON, the SARIF and the new baseline (absolute;
        #: set by the plugin's configure)
        self.json_path: Optional[str] = None
        self.sarif_path: Optional[str] = None
        self.update_baseline: Optional[str] = None
        #: ``--tritonkit-baseline``'s :class:`~tritonkit.check.baseline.Baseline` (known findings fail no test)
        self.baseline = None
        #: ``--tritonkit-update-baseline``: every finding is accepted, none fails a test
        self.accept_all = False

    # --- the run --------------------------------------------------------------------------------
    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node) -> None:
        """xdist controller: tell each worker the run's directory and the environment before tritonkit."""
        node.workerinput[_RUN_DIR_KEY] = self.run_dir
        node.workerinput[_BEFORE_KEY] = self.env_before

    def pytest_sessionstart(self, session) -> None:
        self.runs_tests = self.config.pluginmanager.getplugin("dsession") is None
        if not self.runs_tests:
            return
        proc_dir = os.path.join(self.run_dir, self.worker or "main")
        os.makedirs(proc_dir, exist_ok=True)
        self.journal = Journal(proc_dir, "root", self.kinds, self.options.engine, launches=False,
                               extra={"worker": self.worker or "main"})
        self.watcher = RunWatcher(proc_dir, exclude=[self.journal.path])
        if self.options.children:
            install(proc_dir, self.options, self.env_before)
        else:
            watch_forks(False)

    def pytest_sessionfinish(self, session) -> None:
        for nodeid in list(self._running):
            self._end(nodeid)
        if self.runs_tests and self.options.children:
            uninstall()
        if self.journal is not None:
            self.journal.close()
        if self.worker:
            return
        for option, path, write in (("--tritonkit-json", self.json_path, lambda p: write_json(p, self.json_data())),
                                    ("--tritonkit-sarif", self.sarif_path, self._write_sarif),
                                    ("--tritonkit-update-baseline", self.update_baseline, self._write_baseline)):
            if not path:
                continue
            try:
                write(path)
            except OSError as e:  # checked writable at the start; a full disk, a directory removed since
                self.config.get_terminal_writer().line(f"tritonkit: cannot write {option} {path}: {e}", red=True)
                if session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
                    session.exitstatus = pytest.ExitCode.INTERNAL_ERROR  # not a green run without its file

    def distinct_findings(self) -> List[Finding]:
        """Every test's findings, one per place (kind, kernel, file, line, argument: what a baseline
        matches), in the order of the tests."""
        from ..check.baseline import finding_key
        root = str(self.config.rootpath)
        seen, out = set(), []
        for t in self.tests.values():
            for data in t.findings:
                key = finding_key(data, root)
                if key not in seen:
                    seen.add(key)
                    out.append(Finding.from_dict(data))
        return out

    def _write_sarif(self, path: str) -> None:
        from ..report.sarif import write_sarif
        write_sarif(path, self.distinct_findings(), str(self.config.rootpath), self.baseline,
                    ["pytest", *self.config.invocation_params.args])

    def _write_baseline(self, path: str) -> None:
        from ..check.baseline import write_baseline
        write_baseline(path, self.distinct_findings(), str(self.config.rootpath))

    def new_findings(self, found: List[Finding]) -> List[Finding]:
        """The findings that fail a test: those not in the baseline (none with
        ``--tritonkit-update-baseline``)."""
        if self.accept_all:
            return []
        return self.baseline.split(found)[0] if self.baseline is not None else list(found)

    def pytest_unconfigure(self, config) -> None:
        if self.owns_run_dir:
            shutil.rmtree(self.run_dir, ignore_errors=True)

    # --- each test --------------------------------------------------------------------------------
    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_setup(self, item):
        self._collect_between_tests()
        bad = None
        try:
            self._begin(item, "call")
        except ValueError as e:  # a bad marker: the setup fails with it, once the other plugins' setup ran
            bad = str(e)
        outcome = yield
        if bad is not None:
            if outcome.excinfo is None:
                outcome.force_exception(pytest.fail.Exception(bad, pytrace=False))
            return
        if outcome.excinfo is not None:
            result = self._end(item.nodeid)
            if result is not None:
                result.when = "setup"
                self._pending[(item.nodeid, "setup")] = result
                if self.new_findings(result.all_findings) and _skipped(outcome.excinfo):
                    self._fail(result, outcome)

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_call(self, item):
        outcome = yield
        result = self._end(item.nodeid)
        if result is None:
            return
        self._pending[(item.nodeid, "call")] = result
        if self.new_findings(result.all_findings) and (outcome.excinfo is None or _skipped(outcome.excinfo)):
            self._fail(result, outcome)

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_teardown(self, item, nextitem):
        left = self._end(item.nodeid)  # the setup ran, the body did not (skipped, -x, an xfail with run=False)
        try:
            self._begin(item, "teardown")
        except ValueError:
            pass  # said at setup
        outcome = yield
        result = self._end(item.nodeid)
        if left is not None:
            result = left if result is None else _joined(left, result)
        if result is None:
            return
        result.when = "teardown"
        self._pending[(item.nodeid, "teardown")] = result
        if self.new_findings(result.all_findings) and (outcome.excinfo is None or _skipped(outcome.excinfo)):
            self._fail(result, outcome)

    def _fail(self, result: PhaseResult, outcome) -> None:
        """The phase fails with ``result``'s findings (it passed, or skipped after making them)."""
        result.failed_it = True
        outcome.force_exception(pytest.fail.Exception(self._text(result), pytrace=False))

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        result = self._pending.pop((item.nodeid, call.when), None)
        if result is None:
            return
        rep = outcome.get_result()
        setattr(rep, REPORT_ATTR, result.to_data())
        if result.all_findings and not result.failed_it:
            rep.sections.append(("tritonkit findings", self._text(result)))

    def pytest_runtest_logreport(self, report) -> None:
        self._failed = self._failed or report.failed
        data = getattr(report, REPORT_ATTR, None)
        test = self.tests.get(report.nodeid)
        if data is None and test is None:
            return
        if test is None:
            test = self.tests[report.nodeid] = TestResult()
        if data:
            test.add(data)
        test.outcome = _outcome(report, test.outcome)

    @pytest.hookimpl(optionalhook=True)
    def pytest_handlecrashitem(self, crashitem, report, sched) -> None:
        """xdist controller: a worker died running ``crashitem``; take its findings from the journals."""
        node = getattr(report, "node", None)
        workerinput = getattr(node, "workerinput", None) or {}
        worker = workerinput.get("workerid") or getattr(getattr(node, "gateway", None), "id", None)
        if not worker:
            return
        found = crash_findings(os.path.join(self.run_dir, worker), crashitem)
        if not found:
            return
        result = PhaseResult("call", self.kinds, self.options.engine, child_findings=found)
        setattr(report, REPORT_ATTR, result.to_data())
        report.longrepr = f"{report.longrepr}\n\n{self._text(result)}"

    # --- the summary ---------------------------------------------------------------------------------
    def pytest_terminal_summary(self, terminalreporter, exitstatus, config) -> None:
        if self.worker:
            return
        tr = terminalreporter
        tr.write_sep("=", "tritonkit")
        for line in summary_lines(self.tests, verbose=config.getoption("verbose") > 0):
            tr.write_line(line)
        if self.baseline is not None:
            found = self.distinct_findings()
            known = len(found) - len(self.baseline.split(found)[0])
            tr.write_line(f"{known} of {len(found)} distinct finding{'s' if len(found) != 1 else ''} known from the "
                          f"baseline {self.baseline.path}: they fail no test")

    def json_data(self) -> Dict[str, Any]:
        """The run as JSON data: ``tests`` (node id -> :meth:`TestResult.to_dict`), ``summary``,
        ``options``, ``versions``."""
        from .._version import __version__
        from ..check.journal import installed_version
        total: Dict[str, Any] = {}
        for t in self.tests.values():
            total = merge_summaries(total, t.summary)
        total.update(tests=len(self.tests), tests_with_findings=sum(bool(t.findings) for t in self.tests.values()),
                     kernels=sorted({k for t in self.tests.values() for k in t.kernels}))
        tests = {nodeid: t.to_dict() for nodeid, t in self.tests.items()}
        if self.baseline is not None:
            for t in tests.values():
                t["findings"] = [{**f, "baseline": "known" if self.baseline.known(f) else "new"} for f in t["findings"]]
        return {"tests": tests, "summary": total,
                "options": self.options.to_dict(),
                "versions": {"tritonkit": __version__, "triton": installed_version("triton"), "pytest": pytest.__version__}}

    # --- sessions -------------------------------------------------------------------------------------
    def _collect_between_tests(self) -> None:
        """Before a test's first check session, which freezes the heap: free what the tests before it
        left in reference cycles (see :func:`~tritonkit.check.memory.allocator.collect_garbage`; a
        collection inside the session would free none of it, and Python's own full collections are
        rare). The last failure is forgotten (:func:`_forget_last_failure`); the garbage is collected
        after a failed phase (its traceback keeps the test's frames) and where the process's resident
        memory grew by more than :data:`_GARBAGE_MARGIN` since the last collection (other cycles,
        such as a ``pytest.raises``'s), so that a suite's memory does not grow from test to test."""
        from ..check.memory.allocator import collect_garbage, resident_bytes
        forgot = _forget_last_failure()
        rss = resident_bytes()
        if forgot or self._failed or (rss is not None and self._rss_floor is not None
                                      and rss > self._rss_floor + _GARBAGE_MARGIN):
            collect_garbage()
            self._failed = False
            rss = resident_bytes()
        elif self._rss_floor is not None:
            return
        self._rss_floor = rss

    def _begin(self, item, when: str) -> None:
        """Start checking ``item`` (raises ValueError for a bad ``tritonkit`` marker)."""
        from ..check.session import checking
        self._poll_children(None)  # what came in between tests belongs to none of them
        options = marker_options(item, self.options)
        if options is None or self.journal is None:
            return
        self.journal.scope(f"{item.nodeid} ({when})")
        context = checking(journal=self.journal, **options.session_kwargs(child=True))
        session = context.__enter__()
        self._running[item.nodeid] = _Running(context, session,
                                              PhaseResult(when, [c.kind for c in session.checks], options.engine))

    def _end(self, nodeid: str) -> Optional[PhaseResult]:
        """Stop checking the test; what its session and the child processes found."""
        running = self._running.pop(nodeid, None)
        if running is None:
            return None
        running.context.__exit__(None, None, None)
        result = running.result
        result.findings = running.session.findings
        result.records = list(running.session.launches)
        self._poll_children(result)
        return result

    def _poll_children(self, result: Optional[PhaseResult]) -> None:
        if self.watcher is None:
            return
        found, records = self.watcher.poll()
        if result is not None:
            result.records.extend(r for _, r in records)
            result.processes |= {path for path, _, _ in found} | {path for path, _ in records}
        for path, key, f in found:
            seen = self._child_seen.get((path, key))
            if seen is None:
                index = -1
                if result is not None:
                    result.child_findings.append(f)
                    index = len(result.child_findings) - 1
                self._child_seen[(path, key)] = (result, index)
            elif seen[0] is result and result is not None:
                result.child_findings[seen[1]] = f  # written again, updated

    def _text(self, result: PhaseResult) -> str:
        from ..report.terminal import findings_text
        found = result.all_findings
        by_kind: Dict[str, int] = {}
        for f in found:
            by_kind[f.kind] = by_kind.get(f.kind, 0) + 1
        head = (f"tritonkit: {len(found)} finding{'s' if len(found) != 1 else ''} in this test's Triton launches ("
                + ", ".join(f"{n} {k}" for k, n in by_kind.items()) + ")")
        if self.baseline is not None:
            known = len(found) - len(self.baseline.split(found)[0])
            if known:
                head += f"; {known} known from the baseline {self.baseline.path}"
        try:
            width = self.config.get_terminal_writer().fullwidth
        except Exception:  # no terminal writer (a worker)
            width = 100
        return head + "\n" + findings_text(found, width=min(width, 140))


def _skipped(excinfo) -> bool:
    """Whether a phase ended by skipping (``pytest.skip()``, ``importorskip``): a test that made
    findings and then skipped fails with them, as one that passed does (an ``xfail`` still applies)."""
    exc = excinfo[1] if isinstance(excinfo, tuple) else excinfo
    return isinstance(exc, pytest.skip.Exception)


def _forget_last_failure() -> bool:
    """What pytest does as the next test's body starts (it keeps the last failure in ``sys.last_*``
    for post-mortem debugging until then), as its setup starts: the failure's traceback keeps its
    frames, and their tensors, in reference cycles that Python frees only at a collection, which must
    come before the test's check session freezes the heap. Returns whether there was one."""
    if getattr(sys, "last_traceback", None) is None and getattr(sys, "last_value", None) is None:
        return False
    for name in ("last_type", "last_value", "last_traceback", "last_exc"):
        if hasattr(sys, name):
            delattr(sys, name)
    return True


def _joined(a: PhaseResult, b: PhaseResult) -> PhaseResult:
    return PhaseResult(b.when, a.checks, a.engine, a.findings + b.findings, a.records + b.records,
                       a.child_findings + b.child_findings, a.processes | b.processes)


def _outcome(report, before: str) -> str:
    """A test's outcome so far, given one more of its reports."""
    if report.when in ("setup", "teardown", "???"):
        if report.failed:
            return "error" if report.when != "???" else "crashed"
        if report.skipped and report.when == "setup":
            return "xfailed" if hasattr(report, "wasxfail") else "skipped"
        return before
    if hasattr(report, "wasxfail"):
        return "xfailed" if report.skipped else "xpassed"
    return report.outcome


def crash_findings(proc_dir: str, nodeid: str) -> List[Finding]:
    """The findings journaled in ``proc_dir`` (one pytest process's) while ``nodeid`` ran: its own
    sessions' (each ``scope`` line names the test), and those of child processes that started after
    the test did."""
    runs = read_run(proc_dir)
    root = next((r for r in runs if r.role == "root"), None)
    if root is None:
        return []
    mine = [i for i, name in enumerate(root.scopes) if name.startswith(nodeid + " (")]
    if not mine:
        return []
    since = root.scope_started[mine[0]]
    out = [f for key, f in sorted(root.findings.items()) if key[0] in mine]
    for run in runs:
        if run.role != "root" and run.started >= since:
            for key in sorted(run.findings):
                f = run.findings[key]
                f.process = run.process
                out.append(f)
    return out


def summary_lines(tests: Dict[str, TestResult], verbose: bool = False) -> List[str]:
    """The terminal summary: totals, then per test with findings (every checked test with ``verbose``)
    its kernels, launches and findings."""
    launches = sum(t.summary.get("launches", 0) for t in tests.values())
    kernels = {k for t in tests.values() for k in t.kernels}
    found = sum(len(t.findings) for t in tests.values())
    bad = [n for n, t in tests.items() if t.findings]
    by_kind: Dict[str, int] = {}
    for t in tests.values():
        for k, n in (t.summary.get("findings_by_kind") or {}).items():
            by_kind[k] = by_kind.get(k, 0) + n
    lines = [f"{len(tests)} test{'s' if len(tests) != 1 else ''} checked: {launches} launch"
             f"{'es' if launches != 1 else ''} of {len(kernels)} kernel{'s' if len(kernels) != 1 else ''}; "
             + (f"{found} finding{'s' if found != 1 else ''} (" + ", ".join(f"{n} {k}" for k, n in by_kind.items())
                + f") in {len(bad)} test{'s' if len(bad) != 1 else ''}" if found else "no findings")]
    on_gpu = sum(t.summary.get("gpu_launches", 0) for t in tests.values())
    if on_gpu:
        lines.append(f"{on_gpu} launch{'es' if on_gpu != 1 else ''} larger than --tritonkit-gpu-above checked on the "
                     "GPU instead: out-of-bounds accesses and int32 overflow only")
    shown = [n for n, t in tests.items() if t.findings or (verbose and t.summary.get("launches"))]
    if not shown:
        return lines
    rows = [(n, ", ".join(tests[n].kernels) or "-", str(tests[n].summary.get("launches", 0)),
             str(len(tests[n].findings)), tests[n].outcome) for n in shown[:None if verbose else _SHOWN_TESTS]]
    head = ("test", "kernels", "launches", "findings", "outcome")
    widths = [min(max(len(r[i]) for r in rows + [head]), 70 if i < 2 else 12) for i in range(5)]

    def row(cells) -> str:
        return "  ".join((c if len(c) <= w else c[:w - 1] + "…").ljust(w) if i < 2 else c.rjust(w) if i < 4 else c
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()
    lines += [row(head)] + [row(r) for r in rows]
    if len(shown) > len(rows):
        lines.append(f"... and {len(shown) - len(rows)} more (-v lists every one; --tritonkit-json has them all)")
    return lines
