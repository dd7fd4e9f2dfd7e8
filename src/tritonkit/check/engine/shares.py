"""A launch's programs shared out between worker processes forked from the checked one.

The batched engine runs a launch's programs in batches, one after another (:mod:`.batched`). Where
the programs left are worth more than a fork (an estimate from the launch's first batch, or from an
earlier launch of the same kernel specialization with the same integer arguments: see
:func:`processes_for`), they are
split into contiguous *shares*, one per process: this process runs the first share while forked
workers run the others, each in batches as the serial run would, with a guard over its whole share.
A worker sees the launch's memory as it was at the fork (copy on write) and sends back what its
programs changed:

* the bytes of every element they wrote (the guard's record of written cells);
* the findings and ``device_print`` lines it held back, with their programs' execution indices;
* its counts of work (programs, accesses, lanes, flops) and each check's state for the launch
  (:meth:`~tritonkit.check.checks.base.Check.share_export`).

This process then compares what each share touched: if no element that one share wrote was touched
by another (or, where the whole launch is guarded, by an earlier program), the programs are
independent across shares, so running them in separate processes gave what running them one after
another gives; the workers' writes, findings, counts and check states are merged in program order,
and the transaction commits as usual. Otherwise (an element shared across shares, a worker that
could not run its share batched, raised, died or hung) everything is undone and the launch runs
again in this process, serially, with no shares: the result is always the serial run's.

Memory: each worker holds its own copy of the pages it writes (copy on write) and its share's
batches, each within the batch budget, so a launch shared by ``k`` processes takes up to ``k``
batches' memory at once plus the written bytes once more while they come back.

Host copies of GPU storages in shared mappings (:mod:`..memory.host`) are the exception: the workers
write their elements there in place, nothing of theirs comes back through a file, and the
transaction undoes them from the value the storage held or the device's bytes
(:meth:`~.transaction.Transaction.hold`). A launch stopped while shared out (a time limit, Ctrl-C)
keeps there what the workers had written when they were stopped, as a GPU kernel stopped half way
leaves its outputs half written.
"""
from __future__ import annotations

import io
import os
import pickle
import sys
import tempfile
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np

from .. import forks
from ..errors import Unbatchable
from ..memory import interval_cells
from .transaction import ENGINE, WORK

#: what sharing a launch out costs, modelled (measured on the CPU machine, 2 cores of an Intel Xeon
#: VM, 2026-11-26, benchmarks/check_speed.py --shares and --fresh): a page fault takes about 4 us
#: there, and every page a worker writes is faulted about three times (the worker's copy on write,
#: this process's copy of the bytes back, its own first write after the fork): 3 ns a byte written,
#: taken as 4 because a process's first launch also first-touches its batches' memory; plus a fork, a
#: worker's start and its working set of batch temporaries, 50-100 ms a launch (100: a causal
#: attention of 0.16 s, bound by Triton's front end, is not halved by halving its programs)
SECONDS_PER_BYTE_WRITTEN = 4e-9
SECONDS_PER_LAUNCH = 0.1
#: what a byte written in place in a shared mapping costs, as a fraction of one written privately:
#: the worker's first touch of the page only (measured on the GPU machine's host, 2026-11-27: a forked
#: child wrote 268 MB of a shared mapping in 0.17 s, 0.6 ns a byte)
SHARED_BYTE_WEIGHT = 0.15
#: a launch is shared out only where the model says it saves this fraction of its serial time (its
#: serial time is estimated from one batch, which may have paid first calls the others do not)
MIN_SAVING = 0.15
#: a specialization whose shared launch took longer than this times its estimated serial time is not
#: shared out again (see ..engine.batched)
UNSHARE_SLOWER = 1.0
#: the launch's work counters a worker adds to (see Transaction's WORK and ENGINE)
_COUNTS = WORK[:4] + ENGINE
#: interval lists longer than this are copied by cell (an index array), shorter ones by slices
_SLICES = 4096


class SharesDeclined(Exception):
    """The launch could not be shared out as it ran (see the module): it runs again serially.

    Attributes:
        reason: what happened, for the launch record's note.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def processes_for(session, seconds: float, written: float, programs: int) -> int:
    """How many processes (this one included) share out a launch's ``programs`` left, estimated to
    take ``seconds`` serially and to write ``written`` bytes: the count the cost model (see
    :data:`SECONDS_PER_BYTE_WRITTEN`) says is fastest, 1 (no sharing) where none saves
    :data:`MIN_SAVING`, and 1 where there are no workers, no fork, a debugger, or this process is a
    worker (of configs or of shares) or runs beside config workers."""
    if forks.IN_SHARE_WORKER or forks.IN_WORKER or forks.POOLS_RUNNING or not forks.can_fork(session):
        return 1
    best, best_time = 1, seconds
    for k in range(2, int(min(session.workers, programs)) + 1):
        t = seconds / k + SECONDS_PER_LAUNCH + SECONDS_PER_BYTE_WRITTEN * written * (k - 1) / k
        if t < best_time:
            best, best_time = k, t
    return best if best_time < (1.0 - MIN_SAVING) * seconds else 1


def written_bytes(launch, guard) -> float:
    """Bytes of the elements ``guard`` (a :class:`~.guard.Guard`) saw written so far, those of host
    copies in shared mappings (written in place, see :mod:`..memory.host`) weighted by
    :data:`SHARED_BYTE_WEIGHT`."""
    storages, cells = _storages(launch.space)
    return sum(int((hi - lo).sum()) * cells[key] * (SHARED_BYTE_WEIGHT if storages[key].shared else 1.0)
               for key, ((lo, hi), _) in guard.footprint(cells).items())


def _storages(space):
    """The storages a launch's arguments map (``space``: its address space), by ``id`` (the keys of a
    guard's footprint, the same in a forked worker), and each one's cell size in bytes."""
    storages = {id(r.storage): r.storage for r in space.regions}
    return storages, {key: space.cell_bytes(st) for key, st in storages.items()}


def run_shared(launch, tx, run_range: Callable[[int, int], None], first: int, total: int, k: int,
               new_guard: Callable[[], object], whole: bool) -> None:
    """Run the programs ``[first, total)`` (execution indices) of ``launch`` in ``k`` contiguous
    shares: the first here, the others in forked workers; merge what the workers did into the
    running transaction ``tx`` (see the module).

    Args:
        run_range: runs the programs ``[lo, hi)`` in batches into ``tx`` with ``tx.guard`` as it is.
        new_guard: a guard over no program yet (each worker's; this process's too unless ``whole``).
        whole: the whole launch is guarded: this process's share goes on with ``tx.guard``, which
            holds the programs before ``first``.
    Raises:
        SharesDeclined: the shares could not stand for the serial run (everything must be undone).
        whatever this process's share raises (the workers are stopped first).
    """
    bounds = [first + (total - first) * i // k for i in range(k + 1)]
    folder = tempfile.mkdtemp(prefix="tritonkit-shares-")
    threads = max(1, forks.available_cores() // k)
    children = {}
    try:
        for storage in _storages(launch.space)[0].values():
            if storage.shared:  # written in place by the workers: undone without a journal
                tx.hold(storage)
        for check in launch.checks:
            check.share_prepare(launch)
        children = _fork(launch, tx, run_range, bounds, folder, threads, new_guard)
        if not whole:
            tx.guard = new_guard()
        # the launch's progress (launch.progress) counts this process's share for the whole launch's
        launch.share = (launch.record.programs, bounds[1] - bounds[0], total - first)
        try:
            with forks.limit_threads(threads):
                run_range(bounds[0], bounds[1])
        except Unbatchable as e:
            if whole:
                raise  # two programs of the launch share an element: the serial run finds it too
            raise SharesDeclined(f"this process's share: {e}") from None
        done = forks.wait(children)
        children = {}
        parts = []
        for w in range(1, k):
            part = forks.read_result(os.path.join(folder, f"{w}.pickle")) if done.get(w) else None
            if part is None:
                raise SharesDeclined(f"the worker of programs {bounds[w]}-{bounds[w + 1] - 1} ended without a result")
            if part["declined"]:
                raise SharesDeclined(part["declined"])
            parts.append(part)
        _merge(launch, tx, parts, folder)
    finally:
        launch.share = None
        for pid, r in children.values():
            forks.kill(pid)
            try:
                os.close(r)
                os.waitpid(pid, 0)
            except (OSError, ChildProcessError):
                pass
        for name in os.listdir(folder):
            os.unlink(os.path.join(folder, name))
        os.rmdir(folder)


def _fork(launch, tx, run_range, bounds, folder, threads, new_guard) -> Dict[int, Tuple[int, int]]:
    """Fork a worker for each share after the first; ``{share: (pid, read end of its progress pipe)}``.

    The workers start their shares together, once all are forked (each waits for a byte on a pipe):
    a fork made while earlier workers run and fault in their pages took five times as long (50 ms
    against 10 on the GPU machine's host, 16 workers of a 2^31-element launch), and the first
    worker forked then started the better part of a second before the last."""
    children = {}
    sys.stdout.flush()
    sys.stderr.flush()
    go_r, go_w = os.pipe()
    try:
        for w in range(1, len(bounds) - 1):
            r, wfd = os.pipe()
            forks.IN_WORKER_FORK = True  # the session's fork hook leaves this child's journal alone
            try:
                pid = os.fork()
            except OSError as e:
                os.close(r)
                os.close(wfd)
                for pid, fd in children.values():
                    forks.kill(pid)
                    os.close(fd)
                    os.waitpid(pid, 0)
                raise SharesDeclined(f"no worker could be forked ({e})") from None
            finally:
                forks.IN_WORKER_FORK = False
            if pid == 0:
                code = 1
                try:
                    os.close(r)
                    os.close(go_w)
                    if os.read(go_r, 1) != b"g":  # this process ended or gave up before all were forked
                        os._exit(1)
                    os.close(go_r)
                    _worker(launch, tx, run_range, bounds[w], bounds[w + 1], os.path.join(folder, f"{w}.pickle"),
                            wfd, threads, new_guard)
                    code = 0
                finally:
                    os._exit(code)
            os.close(wfd)
            children[w] = (pid, r)
        os.write(go_w, b"g" * len(children))
    finally:
        os.close(go_r)
        os.close(go_w)
    return children


def _worker(launch, tx, run_range, lo: int, hi: int, path: str, progress: int, threads: int, new_guard) -> None:
    """In a worker: run the programs ``[lo, hi)`` and write what they changed to ``path``."""
    forks.IN_SHARE_WORKER = True
    try:
        import torch
        torch.set_num_threads(1)  # a forked OpenMP pool is not usable in the child
    except Exception:  # pragma: no cover
        pass
    forks.limit_threads(threads).__enter__()  # for the worker's life
    launch.session.journal = None  # held findings go back to the parent, which journals them
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = io.StringIO(), io.StringIO()
    record = launch.record
    start = {n: getattr(record, n) for n in _COUNTS}
    flops_by_width = dict(record.flops_by_width)
    mark = tx.mark()
    tx.guard = new_guard()
    for check in launch.checks:
        check.share_begin(launch)
    part: dict = {"declined": None}
    try:
        orig_settle = tx.settle

        def settle():  # a byte on the progress pipe after each batch: the parent's stall watch
            orig_settle()
            os.write(progress, b".")
        tx.settle = settle
        run_range(lo, hi)
    except BaseException as e:  # anything: the parent runs the launch again serially and meets it itself
        part["declined"] = f"the worker of programs {lo}-{hi - 1}: {type(e).__name__}: {e}"
    if part["declined"] is None:
        storages, cells = _storages(launch.space)
        foot = tx.guard.footprint(cells)
        writes = []
        with open(path + ".bytes", "wb") as f:
            for key, ((wlo, whi), _) in foot.items():
                if wlo.shape[0]:
                    if not storages[key].shared:  # a shared mapping's bytes are written in place
                        _copy_out(storages[key], cells[key], wlo, whi, f)
                    writes.append((key, cells[key], wlo, whi))
        part.update(
            footprint=foot, writes=writes, reports=tx.reports[mark.reports:], prints=tx.prints[mark.prints:],
            counts={n: getattr(record, n) - start[n] for n in _COUNTS},
            flops_by_width={k: v - flops_by_width.get(k, 0) for k, v in record.flops_by_width.items()},
            checks=[check.share_export(launch) for check in launch.checks],
            stdout=sys.stdout.getvalue(), stderr=sys.stderr.getvalue(),
            max_bytes=getattr(launch.builder, "max_bytes", 0))
    sys.stdout, sys.stderr = out, err
    try:
        data = pickle.dumps(part, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as e:  # a finding that does not pickle: the parent runs the share itself
        data = pickle.dumps({"declined": f"the worker's result does not pickle: {e}"})
    with open(path + ".tmp", "wb") as f:
        f.write(data)
    os.replace(path + ".tmp", path)


def _copy_out(storage, g: int, lo: np.ndarray, hi: np.ndarray, f) -> None:
    """Write the bytes of cells ``[lo, hi)`` of ``storage`` (``g`` bytes a cell) to the file ``f``."""
    buf = storage.buf
    n = buf.shape[0]
    if lo.shape[0] <= _SLICES:
        for a, b in zip((lo * g).tolist(), np.minimum(hi * g, n).tolist()):
            f.write(memoryview(buf[a:b]))
        return
    cells = interval_cells(lo, hi)
    whole = n // g
    inside = cells[cells < whole]
    f.write(memoryview(buf[: whole * g].view(np.dtype((np.void, g)))[inside]))
    for c in cells[cells >= whole].tolist():  # a last, partial cell
        f.write(memoryview(buf[c * g:n]))


def _copy_in(storage, g: int, lo: np.ndarray, hi: np.ndarray, f) -> None:
    """Read the bytes of cells ``[lo, hi)`` of ``storage`` from ``f`` (as :func:`_copy_out` wrote them)."""
    buf = storage.buf
    n = buf.shape[0]
    if lo.shape[0] <= _SLICES:
        for a, b in zip((lo * g).tolist(), np.minimum(hi * g, n).tolist()):
            _read_into(f, buf[a:b])
        return
    cells = interval_cells(lo, hi)
    whole = n // g
    inside = cells[cells < whole]
    vals = np.empty(inside.shape[0], dtype=np.dtype((np.void, g)))
    _read_into(f, vals.view(np.uint8))
    buf[: whole * g].view(np.dtype((np.void, g)))[inside] = vals
    for c in cells[cells >= whole].tolist():
        _read_into(f, buf[c * g:n])


def _read_into(f, arr: np.ndarray) -> None:
    view = memoryview(arr).cast("B")
    got = 0
    while got < len(view):
        n = f.readinto(view[got:])
        if not n:
            raise SharesDeclined("a worker's written bytes were cut short")
        got += n


def _overlaps(a: Tuple[np.ndarray, np.ndarray], b: Tuple[np.ndarray, np.ndarray]) -> bool:
    """Whether two sorted, disjoint interval lists share a cell."""
    (alo, ahi), (blo, bhi) = a, b
    if not alo.shape[0] or not blo.shape[0]:
        return False
    i = np.searchsorted(bhi, alo, side="right")  # the first interval of b that ends after a's start
    inside = i < blo.shape[0]
    return bool((blo[i[inside]] < ahi[inside]).any())


def conflict(footprints: List[Dict[int, tuple]]) -> Optional[int]:
    """The ``id`` of a storage with an element that one footprint (a :meth:`Guard.footprint`) wrote
    and another touched, or None where the footprints are independent."""
    from .guard import _union
    keys = set().union(*footprints)
    for key in keys:
        have = [fp[key] for fp in footprints if key in fp]
        if len(have) < 2:
            continue
        for i, (written, _) in enumerate(have):
            if not written[0].shape[0]:
                continue
            others = _union([t for j, (_, t) in enumerate(have) if j != i])
            if _overlaps(written, others):
                return key
    return None


def _merge(launch, tx, parts: List[dict], folder: str) -> None:
    """Check the shares' independence and take the workers' changes into ``tx`` (see the module).

    Raises:
        SharesDeclined: an element one share wrote was touched by another.
    """
    space = launch.space
    storages, cells = _storages(space)
    mine = tx.guard.footprint(cells)
    key = conflict([mine] + [p["footprint"] for p in parts])
    if key is not None:
        name = next((r.name for r in space.regions if id(r.storage) == key), "?")
        raise SharesDeclined(f"programs of different shares share elements of `{name}` that one of them writes")
    for w, part in enumerate(parts, start=1):
        with open(os.path.join(folder, f"{w}.pickle.bytes"), "rb") as f:
            for key, g, lo, hi in part["writes"]:
                storage = storages[key]
                storage.written = True
                if not storage.shared:
                    _journal(space, tx, storage, g, lo, hi)
                    _copy_in(storage, g, lo, hi, f)
    record = launch.record
    for part in parts:
        for n, v in part["counts"].items():
            setattr(record, n, getattr(record, n) + v)
        for k, v in part["flops_by_width"].items():
            record.flops_by_width[k] = record.flops_by_width.get(k, 0) + v
        tx.reports.extend(part["reports"])
        tx.prints.extend(part["prints"])
        if launch.builder is not None and hasattr(launch.builder, "max_bytes"):
            launch.builder.max_bytes = max(launch.builder.max_bytes, part["max_bytes"])
        written = [(storages[key], g, lo, hi) for key, g, lo, hi in part["writes"]]
        for check, state in zip(launch.checks, part["checks"]):
            check.share_merge(launch, state, written)
        if part["stdout"]:
            sys.stdout.write(part["stdout"])
        if part["stderr"]:
            sys.stderr.write(part["stderr"])
    record.processes = len(parts) + 1


def _journal(space, tx, storage, g: int, lo: np.ndarray, hi: np.ndarray) -> None:
    """Keep what the cells ``[lo, hi)`` of ``storage`` hold before a worker's bytes land there, so
    that the transaction can still be undone (not needed where it keeps a snapshot of the storage)."""
    if id(storage) in tx.snapshots:
        return
    buf = storage.buf
    n = buf.shape[0]
    if lo.shape[0] <= _SLICES:
        for a, b in zip((lo * g).tolist(), np.minimum(hi * g, n).tolist()):
            space._journal(storage, buf, slice(a, b))
        return
    cells = interval_cells(lo, hi)
    whole = n // g
    space._journal(storage, buf[: whole * g].view(np.dtype((np.void, g))), cells[cells < whole])
    for c in cells[cells >= whole].tolist():  # a last, partial cell
        space._journal(storage, buf, slice(c * g, n))
