"""A checked run's per-process journals: nothing a process found is lost when it ends hard.

Every checked process of a run (the program ``tritonkit check`` runs, and each of its Python child
processes) appends to its own journal in the run's directory (``TRITONKIT_RUN_DIR``), one JSON
object a line, flushed after each: a ``process`` line when it starts, a ``finding`` line the moment
a finding is made (and again, updated, at the end of a launch at most once a second, and when the
session ends), a ``scope`` line where a new session starts in the same process (``pytest
--tritonkit``: one per test), a ``launch`` line per launch record, ``running`` lines with the record so far of a
launch that runs long (:mod:`tritonkit.check.launch.progress`), an ``end`` line when its session ends and an
``exit`` line with the program's outcome. The command that started the run reads every journal
(:func:`read_run`) and builds one report (:func:`merge`), whether the processes ended normally,
called ``os._exit``, were killed, or crashed.

*Side journals* (``s*.jsonl``) hold what a process finds but does not own yet: the findings of the
config workers it forks for an autotuned kernel, and of the kept config it runs meanwhile with its
findings held back (see :mod:`tritonkit.check.launch.parallel`), each written the moment it is
made. When the owning process has taken them into its own journal (in the configs' order), it
writes a ``settled`` line naming the side journal, which readers then leave out. A side journal
its owner never settled (the owner was killed meanwhile) is read as part of the owner's journal,
after the owner's own findings of the same scope.
"""
from __future__ import annotations

import dataclasses
import glob
import itertools
import json
import os
import sys
import threading
import time
from typing import Any, Dict, Iterable, List, Optional, Tuple

from .findings import Finding, to_json
from .results import CheckReport, LaunchRecord, kernel_summaries, summarize

#: the environment variable that names a run's directory
RUN_DIR_ENV = "TRITONKIT_RUN_DIR"
#: seconds between two snapshots of the changed findings at the end of a launch
SNAPSHOT_INTERVAL_S = 1.0
#: an empty file ``w<journal's name>`` in the run's directory: that journal could not be written whole
WRITE_FAILED_PREFIX = "w"
#: past this many bytes waiting to be written, launch records are dropped (findings are always kept)
BACKLOG_BYTES = 16 << 20
_WARNED = False  # a failed write was said on stderr (once a process)


class Journal:
    """The append-only journal of one process (``RUN_DIR/p<pid>-<ns>.jsonl``).

    Args:
        run_dir: the run's directory (it must exist).
        role: ``"root"`` for the program the command runs, ``"child"`` for a child process of it.
        checks: the kinds of the checks the process runs; engine: its engine option.
        fork_of: the pid of the process this one was forked from (a fork without exec), or None.
        extra: more fields of the ``process`` line (``pytest --tritonkit``: the xdist ``worker``).
        launches: write a line per launch (False: findings only; a process that reports its own
            launches itself, like pytest's, journals only what a hard exit would lose).

    Raises:
        OSError: the journal cannot be created.
    """

    def __init__(self, run_dir: str, role: str, checks: List[str], engine: str, fork_of: Optional[int] = None,
                 extra: Optional[Dict[str, Any]] = None, launches: bool = True, path: Optional[str] = None):
        self.path = path or os.path.join(run_dir, f"p{os.getpid()}-{time.time_ns()}.jsonl")
        self.run_dir, self.checks, self.engine = run_dir, list(checks), engine
        self.launches = launches
        self.scopes = 0  # the scope lines written so far
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0), 0o644)
        self._lock = threading.Lock()  # a launch's progress thread writes too
        self._last_snapshot = time.monotonic()
        #: why a write failed (a full disk), or None: what could not be written waits in memory
        self.write_error: Optional[str] = None
        self._unwritten = b""  # bytes not written yet, whole lines but maybe the first (cut by a short write)
        self._dropped = 0  # launch records dropped while the backlog was over its bound
        self._noted = False
        self.write({"t": "process", "pid": os.getpid(), "ppid": os.getppid(), "argv": command_line(), "role": role,
                    "fork_of": fork_of, "checks": list(checks), "engine": engine, "started": time.time(),
                    **(extra or {})})

    def write(self, record: Dict[str, Any]) -> None:
        """Append one record and hand it to the operating system (it survives the process). Never
        raises for a write that fails (a full disk, a file-size limit): the first failure is said
        once on stderr and marked in the run's directory (:data:`WRITE_FAILED_PREFIX`); what could
        not be written is kept in memory (launch records beyond :data:`BACKLOG_BYTES` are dropped,
        findings never) and written before the next record, as soon as it can be."""
        data = (to_json(record) + "\n").encode("utf-8")
        with self._lock:
            if self._unwritten and len(self._unwritten) > BACKLOG_BYTES and record.get("t") in ("launch", "running"):
                self._dropped += 1
                data = b""
            self._put(data)

    def _put(self, data: bytes) -> None:
        """Write what waits, then ``data`` (the lock held)."""
        if self._fd < 0:  # closed: the process is exiting
            return
        data = self._unwritten + data
        try:
            while data:
                data = data[os.write(self._fd, data):]
        except OSError as e:
            self._unwritten = data
            self._failed(e)
            return
        self._unwritten = b""
        if self.write_error is not None and not self._noted:  # written again: say what happened
            self._noted = True
            note = to_json({"t": "write_failed", "error": self.write_error, "dropped": self._dropped}) + "\n"
            try:
                os.write(self._fd, note.encode("utf-8"))
            except OSError:
                pass

    def _failed(self, e: OSError) -> None:
        global _WARNED
        if self.write_error is not None:
            return
        self.write_error = e.strerror or str(e)
        try:  # an empty file: a name needs no room for data
            os.close(os.open(os.path.join(self.run_dir, WRITE_FAILED_PREFIX + os.path.basename(self.path)),
                             os.O_CREAT | os.O_WRONLY | getattr(os, "O_CLOEXEC", 0), 0o644))
        except OSError:
            pass
        if not _WARNED:
            _WARNED = True
            try:
                sys.stderr.write(f"tritonkit: warning: cannot write the run's journal ({self.write_error}): what "
                                 f"pid {os.getpid()} finds is kept in memory and written when it can be; the report "
                                 "may be incomplete\n")
                sys.stderr.flush()
            except (OSError, ValueError, AttributeError):
                pass

    def scope(self, name: str) -> None:
        """A new session starts (``pytest --tritonkit``: one per test phase, ``name`` the test's node
        id): the finding indices that follow are its own."""
        self.write({"t": "scope", "id": name, "at": time.time()})
        self.scopes += 1

    def side_path(self) -> str:
        """A new side journal's path for this journal (see the module): pick it before a fork, so
        that the owner knows the name of its worker's side journal."""
        name = os.path.basename(self.path)[1:-len(".jsonl")]
        return os.path.join(self.run_dir, f"s{name}-{os.getpid()}-{time.time_ns()}-{next(_sides)}.jsonl")

    def side(self, path: Optional[str] = None) -> Optional["Journal"]:
        """A side journal of this one (see the module) at ``path`` (None: a new one), for findings
        this process or a worker forked from it makes but this journal takes later; None where it
        cannot be created (nothing else is lost: the owner journals what it takes)."""
        try:
            return Journal(self.run_dir, "side", self.checks, self.engine, launches=self.launches,
                           path=path or self.side_path(),
                           extra={"owner": os.path.basename(self.path), "scope": self.scopes})
        except OSError:
            return None

    def settled(self, side_path: str) -> None:
        """What the side journal at ``side_path`` holds is now this journal's own (or was dropped,
        as a serial run would never have made it): readers leave that side journal out."""
        self.write({"t": "settled", "journal": os.path.basename(side_path)})

    def new_finding(self, index: int, finding: Finding) -> None:
        """A finding was just made (``index``: its place in the process's order of discovery)."""
        self.write({"t": "finding", "i": index, "f": finding.to_dict()})

    def launch(self, record: LaunchRecord) -> None:
        """A launch ended (written where :attr:`launches` says so)."""
        if self.launches:
            self.write({"t": "launch", "r": record.to_dict()})

    def running(self, record: Dict[str, Any]) -> None:
        """The running launch's record so far (``status`` ``"unfinished"``; see
        :mod:`tritonkit.check.launch.progress`): what a reader reports of it if no ``launch`` line
        follows (the process was killed in the middle of it)."""
        self.write({"t": "running", "r": record})

    def not_running(self) -> None:
        """The launch whose :meth:`running` lines were written ended (its ``launch`` line, where
        this journal writes those, may follow)."""
        self.write({"t": "running", "r": None})

    def findings(self, log, final: bool) -> None:
        """Write the findings of ``log`` (a :class:`~tritonkit.check.findings.FindingLog`) changed since
        the last time: always when ``final``, else at most once every :data:`SNAPSHOT_INTERVAL_S`."""
        now = time.monotonic()
        if not final and now - self._last_snapshot < SNAPSHOT_INTERVAL_S:
            return
        self._last_snapshot = now
        for index in log.take_changed():
            self.new_finding(index, log.finding(index))

    def end(self, aborted: Optional[str]) -> None:
        """The process's session ended (``aborted``: why it stopped early, or None)."""
        self.write({"t": "end", "aborted": aborted})

    def exit(self, status: int, failed: bool, interrupted: bool = False, internal: Optional[str] = None) -> None:
        """The program ended: its exit ``status``, whether it ``failed`` (raised or exited non-zero),
        was ``interrupted``, or tritonkit failed (``internal``: the error)."""
        self.write({"t": "exit", "status": status, "failed": failed, "interrupted": interrupted,
                    "internal": internal})

    def close(self) -> None:
        """Close the file (the journal stays), after a last try at what could not be written."""
        with self._lock:
            if self._unwritten:
                self._put(b"")
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1


def command_line() -> List[str]:
    """This process's command line as it was started (``/proc/self/cmdline`` where there is one: with
    ``python -c CODE`` whole), else the interpreter and ``sys.argv``. In the process ``tritonkit
    check`` runs the program in (``python -m tritonkit.cli._child ...``), and in a fork of it, the
    program's own command: the interpreter and ``sys.argv`` as the program sees it, not tritonkit's
    internal command line and options."""
    try:
        with open("/proc/self/cmdline", "rb") as fh:
            words = [w.decode("utf-8", errors="replace") for w in fh.read().split(b"\0") if w]
        if words and not (len(words) >= 3 and words[1:3] == ["-m", "tritonkit.cli._child"]):
            return words
    except OSError:
        pass
    return [sys.executable, *sys.argv]


@dataclasses.dataclass
class ProcessRun:
    """What one process's journal holds.

    Attributes:
        pid, ppid, argv, role, fork_of: the process (see :class:`Journal`).
        checks, engine: what it checked with.
        started: when it started (seconds since the epoch).
        extra: the ``process`` line's other fields (e.g. ``worker``).
        findings: its findings by ``(scope number, index)``, each as last written.
        scopes: the names of its scopes by number (0: ``""``, before any ``scope`` line).
        scope_started: when each scope started (seconds since the epoch; 0 for scope 0).
        launch_records: its launches, in the order they ended.
        running: the record so far of a launch that had not ended at the journal's last line (a
            ``running`` line with no ``launch`` line after it: the process ended in the middle of
            it), with ``status`` ``"unfinished"``; None otherwise.
        ended: its (last) session ended (an ``end`` line); aborted: why it stopped early, or None.
        exit: the ``exit`` line (``status``, ``failed``, ``interrupted``, ``internal``), or None where the
            process ended before writing it (``os._exit``, a signal, a crash).
    """

    pid: int = 0
    ppid: int = 0
    argv: List[str] = dataclasses.field(default_factory=list)
    role: str = "child"
    fork_of: Optional[int] = None
    checks: List[str] = dataclasses.field(default_factory=list)
    engine: str = "auto"
    started: float = 0.0
    extra: Dict[str, Any] = dataclasses.field(default_factory=dict)
    findings: Dict[Tuple[int, int], Finding] = dataclasses.field(default_factory=dict)
    scopes: List[str] = dataclasses.field(default_factory=lambda: [""])
    scope_started: List[float] = dataclasses.field(default_factory=lambda: [0.0])
    launch_records: List[LaunchRecord] = dataclasses.field(default_factory=list)
    running: Optional[LaunchRecord] = None
    ended: bool = False
    aborted: Optional[str] = None
    exit: Optional[Dict[str, Any]] = None
    #: the names of the side journals this process settled (see the module)
    settled: set = dataclasses.field(default_factory=set)
    #: why some of what the process wrote may be missing (its journal could not be written whole), or None
    write_error: Optional[str] = None

    @property
    def process(self) -> Dict[str, Any]:
        """The process as a finding names it: ``{"pid", "argv"}`` and ``"fork_of"`` for a fork."""
        out: Dict[str, Any] = {"pid": self.pid, "argv": list(self.argv)}
        if self.fork_of:
            out["fork_of"] = self.fork_of
        return out

    def apply(self, rec: Any) -> Optional[Tuple[int, int]]:
        """Take one journal record; returns the key of the finding it wrote, if it wrote one.
        Records that cannot be read are skipped."""
        if not isinstance(rec, dict):
            return None
        t = rec.get("t")
        try:
            if t == "process":
                self.pid, self.ppid = int(rec.get("pid") or 0), int(rec.get("ppid") or 0)
                self.argv = [str(a) for a in rec.get("argv") or []]
                self.role, self.fork_of = str(rec.get("role") or "child"), rec.get("fork_of")
                self.checks, self.engine = list(rec.get("checks") or []), str(rec.get("engine") or "auto")
                self.started = float(rec.get("started") or 0.0)
                self.extra = {k: v for k, v in rec.items() if k not in _PROCESS_FIELDS}
            elif t == "scope":
                self.scopes.append(str(rec.get("id") or ""))
                self.scope_started.append(float(rec.get("at") or 0.0))
            elif t == "finding":
                key = (len(self.scopes) - 1, int(rec["i"]))
                self.findings[key] = Finding.from_dict(rec["f"])
                return key
            elif t == "launch":
                self.launch_records.append(LaunchRecord.from_dict(rec["r"]))
                self.running = None
            elif t == "running":
                self.running = LaunchRecord.from_dict(rec["r"]) if rec.get("r") else None
            elif t == "end":
                self.ended, self.aborted = True, rec.get("aborted")
            elif t == "exit":
                self.exit = rec
            elif t == "settled":
                self.settled.add(str(rec.get("journal") or ""))
            elif t == "write_failed":
                self.write_error = str(rec.get("error") or "a write failed")
        except (KeyError, TypeError, ValueError):
            pass
        return None

    def scope_of(self, key: Tuple[int, int]) -> str:
        """The name of the scope a finding's key belongs to."""
        return self.scopes[key[0]]


_PROCESS_FIELDS = {"t", "pid", "ppid", "argv", "role", "fork_of", "checks", "engine", "started"}
_sides = itertools.count()
#: a side journal's findings are keyed after its owner's: (scope, SIDE_KEY * (n + 1) + index) for its n-th
SIDE_KEY = 1 << 32


class JournalTail:
    """Reads a journal as it grows: each :meth:`poll` takes the lines completed since the last one
    (a line still being written, or cut by a hard exit, waits or is never taken)."""

    def __init__(self, path: str):
        self.path = path
        self.run = ProcessRun()
        self._offset = 0
        self._partial = b""

    def poll(self) -> Tuple[List[Tuple[int, int]], List[LaunchRecord]]:
        """Read what was added: ``(keys of the findings written, in order; new launch records)``."""
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self._offset)
                data = fh.read()
        except OSError:
            return [], []
        self._offset += len(data)
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()
        keys: List[Tuple[int, int]] = []
        before = len(self.run.launch_records)
        for line in lines:
            try:
                rec = json.loads(line.decode("utf-8", errors="replace"))
            except ValueError:
                continue
            key = self.run.apply(rec)
            if key is not None and key not in keys:
                keys.append(key)
        return keys, self.run.launch_records[before:]


def read_journal(path: str) -> ProcessRun:
    """Read one journal; lines that cannot be read (the last one, cut by a hard exit) are skipped."""
    tail = JournalTail(path)
    tail.poll()
    return tail.run


class RunWatcher:
    """Follows the journals of a run's directory as processes write them (``pytest --tritonkit``:
    the child processes of the tests), leaving out ``exclude`` (the watching process's own).

    Args:
        run_dir: the directory; exclude: journal paths to leave out.
    """

    def __init__(self, run_dir: str, exclude: Iterable[str] = ()):
        self.run_dir = run_dir
        self.exclude = {os.path.abspath(p) for p in exclude}
        self.tails: Dict[str, JournalTail] = {}

    def poll(self) -> Tuple[List[Tuple[str, Tuple[int, int], Finding]], List[Tuple[str, LaunchRecord]]]:
        """What the processes wrote since the last call: ``([(journal path, key, finding)], [(journal
        path, launch record)])``, each finding marked with its process (a finding written again,
        updated, comes again with the same path and key)."""
        for path in sorted(glob.glob(os.path.join(self.run_dir, "p*.jsonl"))):
            path = os.path.abspath(path)
            if path not in self.exclude and path not in self.tails:
                self.tails[path] = JournalTail(path)
        found, records = [], []
        for path, tail in self.tails.items():
            keys, new = tail.poll()
            records.extend((path, r) for r in new)
            for key in keys:
                f = tail.run.findings[key]
                f.process = tail.run.process
                found.append((path, key, f))
        return found, records


def read_run(run_dir: str) -> List[ProcessRun]:
    """Every process journal of a run, in the order the processes started, with the side journals
    their owners did not settle read into them (see the module)."""
    owners = {os.path.basename(p): read_journal(p) for p in glob.glob(os.path.join(run_dir, "p*.jsonl"))}
    sides = sorted((os.path.basename(p), read_journal(p)) for p in glob.glob(os.path.join(run_dir, "s*.jsonl")))
    failed = {os.path.basename(p)[len(WRITE_FAILED_PREFIX):]
              for p in glob.glob(os.path.join(run_dir, WRITE_FAILED_PREFIX + "*.jsonl"))}
    for name, run in list(owners.items()) + sides:
        if name in failed and run.write_error is None:
            run.write_error = "a write failed"
    taken: Dict[int, int] = {}
    for name, side in sorted(sides, key=lambda x: (x[1].started, x[0])):
        owner = owners.get(str(side.extra.get("owner") or ""))
        if owner is None:  # its owner's journal is gone: the side journal stands for a process itself
            owners[name] = side
            continue
        if name in owner.settled:
            continue
        owner.write_error = owner.write_error or side.write_error
        n = taken[id(owner)] = taken.get(id(owner), 0) + 1
        try:
            scope = min(int(side.extra.get("scope") or 0), len(owner.scopes) - 1)
        except (TypeError, ValueError):
            scope = 0
        for (_, index), f in sorted(side.findings.items()):
            owner.findings[(scope, SIDE_KEY * n + index)] = f
        owner.launch_records.extend(side.launch_records)
    runs = list(owners.values())
    return sorted(runs, key=lambda r: (r.role != "root", r.started, r.pid))


def merge(runs: List[ProcessRun], interrupted: bool = False, script: Optional[Dict[str, Any]] = None) -> CheckReport:
    """One :class:`~tritonkit.check.CheckReport` of a run's processes: the root process's findings
    first, then each child's, marked with its ``process``; every launch record; kernel summaries
    and totals over all of them.

    Args:
        runs: what :func:`read_run` returned.
        interrupted: the run was interrupted (Ctrl-C).
        script: ``{"target": argv, "failed": bool}`` for the report, or None.
    """
    from .._version import __version__
    findings: List[Finding] = []
    records: List[LaunchRecord] = []
    aborted = None
    for run in runs:
        for key in sorted(run.findings):
            f = run.findings[key]
            if run.role != "root":
                f.process = run.process
            findings.append(f)
        records.extend(run.launch_records)
        if run.running is not None:  # killed in the middle of a launch: what it checked until then
            records.append(run.running)
        if run.role == "root":
            aborted = run.aborted
    root = next((r for r in runs if r.role == "root"), runs[0] if runs else ProcessRun())
    summary = summarize(records, findings, root.checks, root.engine, aborted, interrupted)
    summary["processes"] = len(runs)
    summary["incomplete"] = incomplete(runs)
    return CheckReport(findings=findings, launches=len(records), kernels=kernel_summaries(records, findings),
                       launch_records=records, summary=summary,
                       versions={"tritonkit": __version__, "triton": installed_version("triton")}, script=script)


def incomplete(runs: List[ProcessRun]) -> List[str]:
    """Why a report of ``runs`` may lack findings: the journals that could not be written whole (a
    full disk), each a sentence."""
    out = []
    for run in runs:
        if run.write_error:
            who = "the script's process" if run.role == "root" else f"pid {run.pid} ({' '.join(run.argv)})"
            out.append(f"the journal of {who} could not be written whole ({run.write_error}): what it found after "
                       "that may be missing")
    return out


def installed_version(dist: str) -> str:
    """An installed distribution's version, without importing it (the reporting process stays light)."""
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version(dist)
    except PackageNotFoundError:
        return "?"
