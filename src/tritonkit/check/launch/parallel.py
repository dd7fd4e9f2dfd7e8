"""An autotuned kernel's configs checked at once, in worker processes forked from the checked one.

Under check, every config of an autotuned kernel runs once per new key, its side effects undone
before the next (:mod:`.autotune`); the configs after the first are independent of each other and
of what follows (their writes are undone, only their findings and launch records stay). They are
handed to up to ``workers`` processes forked from this one (copy on write: the tensors are not
copied), each of which runs its share one after another and sends back, per config, what it
added to the session: launch records, the violations of each, the text its ``device_print`` wrote,
and whether the config compiled. The parent then takes the configs in order, as if it had run them
itself: the findings, their order, the records and the printed text are those of a serial run.

Nothing is lost to a worker: a config whose worker died, hung (no progress for ``stall`` seconds),
raised something other than a finding, or could not send its result back is run again by the
parent, serially, in its place in the order. A worker never touches a GPU (a CUDA context does not
survive a fork): the storages of CUDA tensors are copied to the host before the fork, and a config
that still needs the GPU (a ``pre_hook`` zeroing a CUDA tensor) fails in its worker and is run by
the parent.

Nothing is lost to the parent's hard end either (an out-of-memory kill while the workers run):
where the session journals (``tritonkit check``, ``pytest --tritonkit``), each worker writes its
findings to a side journal the moment it makes them, and so does the parent for the kept config it
runs meanwhile with its findings held back; the parent settles each side journal once it has taken
its findings into its own (see :mod:`tritonkit.check.journal`).

Fork is Linux's and macOS's: elsewhere, with ``pdb``, or with one worker, configs run serially.
"""
from __future__ import annotations

import dataclasses
import io
import os
import pickle
import sys
import tempfile
import warnings
from typing import Dict, List, Optional, Sequence

from .. import forks
from ..forks import available_cores, can_fork, limit_threads

#: in a worker: host copies of the CUDA storages of the configs' tensors, by (device, data_ptr)
WORKER_HOST_STORAGES: Optional[Dict[tuple, object]] = None
@dataclasses.dataclass
class ConfigResult:
    """What one config added to the session in a worker.

    Attributes:
        outcome: ``"ok"``, ``"static_assert"`` (it would not compile: skipped, as Triton's autotuner
            skips it) or ``"aborted"`` (a finding stopped the program; ``message`` says why).
        records: the launch records it appended, in order.
        violations: ``(index into records, violation, grid ndim)`` in the order they were found.
        printed: what it wrote to ``sys.stdout`` (``device_print``).
    """

    outcome: str
    records: list
    violations: list
    printed: str
    message: str = ""


def _device_storages(tensors: Sequence) -> Dict[tuple, object]:
    """Host copies of the storages of the tensors on a device other than the CPU."""
    out = {}
    for t in tensors:
        if getattr(t, "device", None) is None or t.device.type in ("cpu", "meta"):
            continue
        st = t.untyped_storage()
        key = (str(t.device), st.data_ptr())
        if key not in out:
            out[key] = st.cpu()
    return out


def _fresh_host(key):
    """In a worker: a new host copy of a CUDA storage's bytes (each launch writes its own)."""
    return WORKER_HOST_STORAGES[key].clone() if WORKER_HOST_STORAGES and key in WORKER_HOST_STORAGES else None


class SideJournal:
    """Findings a process makes but its session's journal takes later (a config worker's, the held
    kept config's), written to a side journal of that journal as they are made (see
    :mod:`tritonkit.check.journal`), folded as the session folds them.

    Args:
        journal: the side :class:`~tritonkit.check.journal.Journal`.
    """

    def __init__(self, journal) -> None:
        from ..checks import KINDS
        from ..findings import FindingLog
        self.journal, self.log = journal, FindingLog(KINDS)

    @classmethod
    def of(cls, owner, path: Optional[str] = None) -> Optional["SideJournal"]:
        """A side journal of the journal ``owner`` (None: the session journals nothing) at ``path``
        (None: a new name); None where none can be made."""
        side = owner.side(path) if owner is not None else None
        return cls(side) if side is not None else None

    def add(self, v, launch) -> None:
        """A violation was just made by ``launch``."""
        index, new = self.log.add(v, id(launch.record), launch.grid_ndim)
        if new:
            self.journal.new_finding(index, self.log.finding(index))
        else:
            self.journal.findings(self.log, final=False)

    def launches(self, records) -> None:
        """Launches ended: their records, and the findings changed since the last snapshot."""
        for r in records:
            self.journal.launch(r)
        self.journal.findings(self.log, final=True)

    def close(self) -> None:
        """Close the file (the journal stays for readers)."""
        self.journal.close()


class Capture:
    """What a block adds to a session, taken aside as :class:`ConfigResult` parts: the launch
    records it appends, the violations of each (in order), what it prints.

    ``hold``: the violations are only taken (the launch is marked as having found something),
    not folded into the session's findings, and the records are taken out of ``session.launches``
    at the end, with the journal off meanwhile: the parent's run of the kept config while the
    workers run the others, handed to :meth:`~tritonkit.check.CheckSession.adopt` after theirs
    (then :meth:`settle`). Otherwise (a worker) they are also added as usual.

    ``side``: a :class:`SideJournal` each violation is written to as it is made (a worker's); with
    ``hold`` and no ``side``, one is made beside the session's journal, if it has one."""

    def __init__(self, session, hold: bool = False, side: Optional[SideJournal] = None) -> None:
        self.session, self.hold = session, hold
        self.records: list = []
        self.violations: list = []
        self.printed = ""
        self.side = side if side is not None or not hold else SideJournal.of(session.journal)

    def __enter__(self) -> "Capture":
        session = self.session
        self.mark = len(session.launches)
        self.found: list = []
        self.journal, self.stdout = session.journal, sys.stdout
        add = session.add_violation

        def add_violation(v, launch, frame=None):
            self.found.append((launch.record, v, launch.grid_ndim))
            if self.side is not None:
                self.side.add(v, launch)
            if self.hold:
                launch.found = True
                return None
            return add(v, launch, frame)
        session.add_violation = add_violation
        if self.hold:
            session.journal = None
        sys.stdout = self._buffer = io.StringIO()
        return self

    def __exit__(self, *exc) -> bool:
        session = self.session
        sys.stdout = self.stdout
        del session.add_violation  # the class's method again
        session.journal = self.journal
        self.printed = self._buffer.getvalue()
        self.records = session.launches[self.mark:]
        if self.hold:
            del session.launches[self.mark:]
        index = {id(r): k for k, r in enumerate(self.records)}
        self.violations = [(index[id(r)], v, nd) for r, v, nd in self.found if id(r) in index]
        if self.side is not None:
            self.side.launches(self.records)
        return False

    def settle(self) -> None:
        """The held findings were taken into the session (or dropped, as a serial run would never
        have made them): their side journal is the session journal's own now."""
        if self.hold and self.side is not None:
            self.session.settle_side_journals([self.side.journal.path])
            self.side.close()
            self.side = None

    def result(self, outcome: str, message: str = "") -> ConfigResult:
        """The block's additions as the :class:`ConfigResult` of a config that ended with ``outcome``."""
        return ConfigResult(outcome, self.records, self.violations, self.printed, message)


def plan(session, others: List[int]):
    """How an autotuned kernel's configs are shared out: ``(mine, theirs, workers, overlap)``: the
    other configs this process runs itself first (the earliest, so that their findings come first
    as in a serial run), those the ``workers`` workers run, and whether this process runs the kept
    config meanwhile. Every process, this one included, gets about as many configs (the kept one
    counts); one worker or no fork: this process runs everything, in order."""
    processes = session.workers if can_fork(session) else 1
    if processes < 2 or not others:
        return list(others), [], 0, False
    overlap = can_overlap_kept(session)
    if not overlap:  # this process waits: the workers share the others
        return [], list(others), min(processes, len(others)), False
    per = -(-(len(others) + 1) // processes)
    mine = list(others[:per - 1])
    theirs = list(others[len(mine):])
    return mine, theirs, min(processes - 1, len(theirs)), True


def can_overlap_kept(session) -> bool:
    """Whether the kept config may run in this process while the workers run the others: not
    where a finding stops the program at once (``stop_on_first``, ``pdb``), which must happen in
    the configs' order."""
    return not session.stop_on_first and not session.pdb


class Pool:
    """Workers running a share each of an autotuned kernel's configs (see the module); made by
    :func:`start`, collected by :meth:`finish`."""

    def __init__(self, shares, children, folder, threads: int, session=None, sides=()) -> None:
        self.shares, self.children, self.folder = shares, children, folder
        #: BLAS threads each process (this one too, meanwhile) runs
        self.threads = threads
        self.session, self.sides = session, list(sides)
        self._running = True
        forks.pools(+1)

    def _ended(self) -> None:
        if self._running:
            self._running = False
            forks.pools(-1)

    def settle(self) -> None:
        """The workers' findings were taken into the session (or dropped): their side journals are
        the session journal's own now."""
        if self.sides and self.session is not None:
            self.session.settle_side_journals(self.sides)
        self.sides = []

    def abandon(self) -> None:
        """Stop the workers and forget their results (this process raised before taking them)."""
        self._ended()
        self.settle()
        for pid, r in self.children.values():
            forks.kill(pid)
            try:
                os.close(r)
            except OSError:
                pass
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:  # pragma: no cover
                pass
        self.folder.cleanup()

    def finish(self) -> Dict[int, ConfigResult]:
        """Wait for the workers. Returns the results of the configs that finished in a worker, by
        index; the others are the caller's to run itself."""
        try:
            done = forks.wait(self.children)
            self._ended()
            results: Dict[int, ConfigResult] = {}
            for w, share in enumerate(self.shares):
                got = forks.read_result(os.path.join(self.folder.name, f"{w}.pickle")) if done.get(w) else None
                for i in share:
                    if got is None or i not in got:
                        break  # from here on, the parent runs this worker's configs itself
                    results[i] = got[i]
            return results
        finally:
            self._ended()
            self.folder.cleanup()


def start(run_one, indices: List[int], session, tensors: Sequence, workers: int) -> Optional[Pool]:
    """Start up to ``workers`` workers running ``run_one(i)`` for the config indices ``indices``
    (contiguous shares, in order), or None where there is nothing to run or no fork.

    ``run_one(i)`` runs config ``i`` under check in the worker's copy of the session, undoing its
    side effects, and raises what a serial run would (``StaticAssertFailed``, ``CheckAborted``, or
    anything else).
    """
    workers = min(workers, len(indices))
    if workers < 1 or not can_fork(session):
        return None
    size = -(-len(indices) // workers)
    shares = [indices[k:k + size] for k in range(0, len(indices), size)]
    hosts = _device_storages(tensors)
    folder = tempfile.TemporaryDirectory(prefix="tritonkit-workers-")
    threads = max(1, available_cores() // (len(shares) + 1))
    sides = [session.journal.side_path() if session.journal is not None else None for _ in shares]
    children = _start(run_one, shares, session, hosts, folder.name, threads, sides)
    return Pool(shares, children, folder, threads, session, [p for p in sides if p])


def _start(run_one, shares, session, hosts, folder, threads, sides):
    """Fork one worker per share (``sides``: the path of each one's side journal, or None);
    returns ``{worker: (pid, read end of its progress pipe)}``."""
    children = {}
    sys.stdout.flush()
    sys.stderr.flush()
    for w, share in enumerate(shares):
        r, wfd = os.pipe()
        forks.IN_WORKER_FORK = True
        try:
            with warnings.catch_warnings():
                # Python 3.12 warns of fork in a process with threads (CUDA's, torch's): a worker runs
                # only tritonkit's code, and one that deadlocks is killed and its configs rerun here
                warnings.simplefilter("ignore", DeprecationWarning)
                pid = os.fork()
        except OSError:
            os.close(r)
            os.close(wfd)
            forks.IN_WORKER_FORK = False
            continue
        if pid == 0:  # the worker
            os.close(r)
            code = 1
            try:
                limit_threads(threads).__enter__()  # for the worker's life
                _worker(run_one, share, session, hosts, os.path.join(folder, f"{w}.pickle"), wfd, sides[w])
                code = 0
            finally:
                os._exit(code)
        forks.IN_WORKER_FORK = False
        os.close(wfd)
        children[w] = (pid, r)
    return children


def _worker(run_one, share, session, hosts, path, progress, side_path=None) -> None:
    """In a worker: run the configs of ``share``, write their results to ``path`` (pickled), and
    send a byte on ``progress`` after each config; its findings go to the side journal at
    ``side_path`` as they are made (None: the session journals nothing)."""
    global WORKER_HOST_STORAGES
    from ..errors import CheckAborted, StaticAssertFailed
    forks.IN_WORKER = True
    try:
        import torch
        torch.set_num_threads(1)  # a forked OpenMP pool is not usable in the child
    except Exception:  # pragma: no cover
        pass
    WORKER_HOST_STORAGES = hosts
    owner, session.journal = session.journal, None  # the parent journals what it takes
    side = SideJournal.of(owner, side_path) if side_path else None
    results: Dict[int, ConfigResult] = {}
    for i in share:
        outcome, message = "ok", ""
        try:
            with Capture(session, side=side) as capture:
                try:
                    run_one(i)
                except StaticAssertFailed:
                    outcome = "static_assert"
                except CheckAborted as e:
                    outcome, message = "aborted", str(e)
        except BaseException:
            break  # the parent runs it again, and meets what it raises itself
        results[i] = capture.result(outcome, message)
        os.write(progress, b".")
        if outcome == "aborted":
            break
    data = pickle.dumps(results, protocol=pickle.HIGHEST_PROTOCOL)
    with open(path + ".tmp", "wb") as f:
        f.write(data)
    os.replace(path + ".tmp", path)
