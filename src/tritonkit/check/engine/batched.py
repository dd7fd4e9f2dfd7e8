"""Running a launch's programs in batches, with the one-at-a-time engine as the fallback.

The batched engine runs the kernel's body once for a batch of programs (its builder,
:class:`~tritonkit.check.interp.batched.BatchedBuilder`, gives every value a program axis). This
module decides which programs form a batch and makes the result the same as running them one
after another (the sequential engine, which stays the oracle):

* **One transaction per launch.** A launch runs as a series of *batches*: contiguous ranges of
  programs (in the order the sequential engine runs them), sized so that no single value exceeds
  the memory budget: the bytes per program come from an earlier launch of the kernel (this
  process's or the disk cache's) or from a *probe*, a run of the first ``_PROBE`` programs with
  every loop cut to one iteration, undone at once (:func:`_probe`). While they run, every byte written
  (stores, atomics) and every change of the checks' state is journaled, and findings and
  ``device_print`` lines are held back. At the end the findings are released in program order,
  exactly as the sequential engine makes them; or everything is undone and the launch runs one
  program at a time.
* **Divergence.** Python control flow on a value that differs between programs (``if pid == 0``,
  a loop bound that depends on the row, a ``while`` on loaded data) stops the batch; what it did
  is undone and each group of programs that agree runs again as its own batch, in order. Nothing
  is executed twice with a visible effect.
* **Independence.** A batch runs its programs' operations interleaved, which equals running them
  one after another only if no program reads or writes what another one of the batch writes. A
  :class:`~.guard.Guard` watches every element the batch touches; when two programs share an element that
  one of them writes (other than with atomics, which are applied in program order), the launch is
  undone. While a check that asks for it runs (``Check.guards_whole_launch``: ``data_race``), the
  guard watches the whole launch instead of one batch: two programs of a launch that share an
  element one of them writes either race or are ordered by atomics, and both are decided by the
  race check's vector clocks, one program at a time. A launch the guard lets through has no race,
  so the race check's per-element shadow is not kept while the batched engine runs.
* **Fallback.** A launch that is undone (a conflict, or what the batched engine cannot do:
  :class:`~tritonkit.check.errors.Unbatchable`, such as spin polls) runs again from its first
  program one at a time, and its record says why (``LaunchRecord.fallback``).
"""
from __future__ import annotations

import hashlib
import os
import sys
import time
import traceback
from typing import Any, Dict, Optional, Tuple

import numpy as np

from ..errors import CheckAborted, Divergence, LaunchTimeout, Unbatchable, UsageError
from ..interp import disk_cache
from ..interp.batched import BatchedBuilder
from ..interp.kernels import rewritten
from ..triton_hooks import patched_language
from . import shares
from .base import Engine
from .guard import Guard, NeedPrecise
from .transaction import Transaction

#: bytes: the largest single value a batch may make. Chosen with benchmarks/batch_memory.py on the
#: CPU machine (2 cores, 2026-11-24; results/batch_memory_2_16_cpu.json, and batch_memory_cpu.json
#: for 8-64 MiB): 4 MiB gave the fastest first launch in a fresh process on 9 of the 10 kernels of
#: check_speed.py or tied (vector add 4M 0.07 s against 0.09 s with 16 MiB, softmax 16384x1024 0.16
#: against 0.19 s: a smaller batch first-touches less new memory, and its temporaries stay in cache),
#: warm launches within 10% of 16 MiB's (layer norm 16384x1024 0.20 against 0.18 s, the one slower),
#: and a softmax of 8192x8192 fp32 in 0.46 s at 0.93 GiB peak (16 MiB: 0.56 s, 0.98 GiB; the plain
#: interpreter 0.79 GiB). (Earlier, 64 MiB against 256 MiB: on a 8192x32000 fp32 cross-entropy
#: launch 39 s instead of 69 s, +3.2 GiB instead of +5.8.)
DEFAULT_BATCH_MEMORY = 4 << 20
_PROBE = 4  # programs in the first batch, which measures the values' size per program
# the largest value (bytes per program) seen for a compiled kernel's specialization (``Launch.spec_key``):
# its values are block-shaped, so later launches of it size their first batch from this, without a probe
_PER_PROGRAM: Dict[tuple, float] = {}
_MAX_BATCH = 1 << 16
# seconds a program took and bytes it wrote, by ``Launch.work_key``: whether a launch is worth sharing
# out between processes (see .shares) is decided from it before its first batch
_SECONDS: Dict[tuple, Tuple[float, float]] = {}
_UNSHARED: Dict[tuple, bool] = {}  # specializations (or work keys) not to share out (see _unshare)
_DEBUGGER_NAMES = frozenset({"breakpoint", "set_trace"})
_debugs: Dict[Any, bool] = {}


def _calls_debugger(pyfn) -> bool:
    """Whether a kernel's code calls ``breakpoint()`` or ``pdb.set_trace()`` (cached): a name its
    code, or code nested in it, loads. (Reading its source for this took 0.7 ms of each process's
    first launch.)"""
    got = _debugs.get(pyfn)
    if got is None:
        got = _debugs[pyfn] = _names_debugger(getattr(pyfn, "__code__", None))
    return got


def _names_debugger(code) -> bool:
    if code is None:
        return False
    if _DEBUGGER_NAMES.intersection(code.co_names):
        return True
    return any(_names_debugger(c) for c in code.co_consts if hasattr(c, "co_names"))


class BatchedEngine(Engine):
    """Runs a launch's programs in batches, in one transaction (see the module).

    Args:
        budget: bytes the largest single value of a batch may take (None: 4 MiB).
    """

    name = "batched"

    def __init__(self, budget: Optional[int] = None) -> None:
        self.budget = budget or DEFAULT_BATCH_MEMORY

    def run(self, launch, call_args):
        """Run the launch batched (see :meth:`Engine.run`); declines where a debugger needs one
        program at a time (``--pdb``, ``breakpoint()`` in the kernel) or the batch cannot be run as
        one (:class:`~tritonkit.check.errors.Unbatchable`, a conflict, the kernel raising in a batch)."""
        if launch.session.pdb:
            return "--pdb: the debugger stops in one program"
        if _calls_debugger(launch.pyfn):
            return "the kernel calls breakpoint(): the debugger stops in one program"
        sequential = launch.builder
        launch.builder = BatchedBuilder(launch)
        launch.builder.set_grid_dim(*launch.grid)
        try:
            with patched_language(launch.builder):
                return self._run(launch, rewritten(launch.pyfn, simt=True), call_args)
        finally:
            launch.builder = sequential
            launch.batch = None

    def _run(self, launch, fn, call_args, precise: frozenset = frozenset(), share: bool = True) -> Optional[str]:
        total = launch.grid[0] * launch.grid[1] * launch.grid[2]
        builder = launch.builder
        whole = launch.hooks.whole_launch  # e.g. data_race runs: one guard over the launch
        why = ("they are checked for data races one program at a time" if whole
               else "they are run one at a time, in order")
        stored = _known_per_program(launch)
        probe = total > _PROBE and _loops(fn)
        known = stored or (_probe(launch, fn, call_args, _PROBE, why, precise) if probe else 0.0)
        tx = Transaction(launch, Guard(why, precise))
        sizing = {"per_program": known, "size": int(max(1, min(_MAX_BATCH, self.budget // known))) if known else _PROBE}
        share = share and not _unshared(launch)
        seconds = _known_seconds(launch) if share else None  # per program, for sharing the launch out

        def run_range(lo: int, hi: int) -> None:  # in batches, all under tx.guard as it is
            first = lo
            while first < hi:
                n = min(sizing["size"], hi - first)
                builder.max_bytes = 0
                _run_groups(launch, tx, fn, call_args, np.arange(first, first + n, dtype=np.int64))
                first += n
                per = sizing["per_program"] = max(sizing["per_program"], builder.max_bytes / max(1, n))
                sizing["size"] = int(max(1, min(_MAX_BATCH, self.budget // max(1.0, per))))
                if builder.max_bytes:
                    _PER_PROGRAM[launch.spec_key] = per

        try:
            first, batches, shared, began = 0, 0, False, time.perf_counter()
            while first < total:
                if seconds is not None:
                    left = total - first
                    k = shares.processes_for(launch.session, seconds[0] * left, seconds[1] * left, left)
                    if k > 1:
                        start = time.perf_counter()
                        shares.run_shared(launch, tx, run_range, first, total, k, lambda: Guard(why, precise), whole)
                        if (time.perf_counter() - start) / left > shares.UNSHARE_SLOWER * seconds[0]:
                            _unshare(launch, slower=True)  # slower than serially: one process from now on
                        shared = True
                        break
                n = min(sizing["size"], total - first)
                if not whole and first:
                    tx.guard = Guard(why, precise)
                start = time.perf_counter()
                run_range(first, first + n)
                # with no estimate yet, the first batch that is not the probe measures what a program
                # costs (a probe pays the launch's fixed costs for a few programs); whole: the guard
                # holds every program so far
                if share and seconds is None and (first or known or n == total):
                    wrote = shares.written_bytes(launch, tx.guard) / (first + n if whole else n)
                    seconds = _note_seconds(launch, ((time.perf_counter() - start) / n, wrote))
                first += n
                batches += 1
            if seconds is not None and not shared and batches > 1:  # the whole launch's time per program
                _note_seconds(launch, ((time.perf_counter() - began) / total, seconds[1]))
            if sizing["per_program"] > stored:
                disk_cache.store_number("batch", _disk_key(launch), sizing["per_program"])
        except NeedPrecise as e:  # a write where the guard kept only the range of the loads: again, precisely
            tx.rollback()
            return self._run(launch, fn, call_args, precise | {e.key}, share)
        except shares.SharesDeclined as e:  # the serial run decides
            tx.rollback()
            _unshare(launch)  # not tried again
            if os.environ.get("TRITONKIT_DEBUG_ENGINE"):
                print(f"tritonkit: {launch.kernel}: not shared out: {e.reason}", file=sys.stderr)
            return self._run(launch, fn, call_args, precise, share=False)
        except Unbatchable as e:
            tx.rollback()
            return e.reason
        except (CheckAborted, UsageError, KeyboardInterrupt, LaunchTimeout):
            tx.commit()
            raise
        except Exception as e:
            tx.rollback()
            if os.environ.get("TRITONKIT_DEBUG_ENGINE"):
                traceback.print_exc()
            return f"the kernel raised {type(e).__name__} in a batch: the programs are replayed one at a time"
        tx.commit()
        return None


def _disk_key(launch, work: bool = False) -> Optional[str]:
    """The key of a kernel specialization's figures in the disk cache (``work``: of its launches with
    these integer arguments, ``Launch.work_key``), or None where its constexprs have no stable
    description (an object's repr with its address)."""
    code, items = launch.spec_key
    text = repr(items) + (repr(launch.work_key[2:]) if work else "")
    if " at 0x" in text:
        return None
    base = disk_cache.code_key(launch.pyfn, "batch")
    return None if base is None else hashlib.sha256((base + text).encode()).hexdigest()[:40]


def _probe(launch, fn, call_args, n: int, why: str, precise: frozenset) -> float:
    """The largest value's bytes per program of a run of the launch's first ``n`` programs with
    every loop cut to its first iteration (``BatchedBuilder.probing``, see :mod:`..interp.simt`), in
    a transaction of its own that is undone at once: memory, the checks' state, findings, prints
    and counts are as before it. A loop's iterations make values of the same shapes, so one of each
    sizes the batches; the run costs the kernel's body once instead of once per iteration (a cold
    first launch of a 512^3 matmul, whose programs loop 16 times, paid its probe of 4 whole programs
    24 of its 71 ms on the CPU machine). A kernel without a loop of its own is not probed (see
    :func:`_loops`): its first batch of ``n`` programs runs for good and measures.

    Returns 0.0 where the run raised: then the first batch measures, as without a probe, and what
    the probe met (a finding, an exception) is met again there or not at all. A later batch that
    makes a larger value resizes the next ones, as always. ``KeyboardInterrupt`` and a launch's
    time limit are raised, after the undo."""
    builder = launch.builder
    written = [(st, st.written) for st in launch.space.storages.values()]  # (the undo leaves the flags)
    probe = Transaction(launch, Guard(why, precise))
    builder.max_bytes = 0
    builder.probing = True
    try:
        _run_groups(launch, probe, fn, call_args, np.arange(n, dtype=np.int64))
        return builder.max_bytes / n
    except (KeyboardInterrupt, LaunchTimeout):
        raise
    except BaseException:  # anything else (a conflict, a failed static_assert, a cut loop's results
        return 0.0  # that make no sense to what follows): the launch's own run meets it, or does not
    finally:
        builder.probing = False
        probe.rollback()
        for st, was in written:
            st.written = was


def _loops(fn) -> bool:
    """Whether the rewritten kernel ``fn`` runs a loop of its own (one in a function it calls is not
    seen): only then does a probe with its loops cut cost less than its first programs run for good."""
    names = fn.__code__.co_names
    return "loop_range" in names or "loop_while" in names


def _known_per_program(launch) -> float:
    """The largest value's bytes per program known for this launch's specialization: from an
    earlier launch of this process, else from an earlier process (the disk cache), else 0."""
    per = _PER_PROGRAM.get(launch.spec_key)
    if per is None:
        per = disk_cache.load_number("batch", _disk_key(launch)) or 0.0
        if per:
            _PER_PROGRAM[launch.spec_key] = per
    return per


def _cost_keys(launch):
    key = _disk_key(launch, work=True)
    return (None, None) if key is None else (key + "-seconds", key + "-written")


def _unshared(launch) -> bool:
    """Whether this launch is not to be shared out (see :func:`_unshare`): its specialization's shares
    could not stand for the serial run, or a launch with its integer arguments was not faster shared."""
    return _unshared_by(launch, launch.spec_key, False) or _unshared_by(launch, launch.work_key, True)


def _unshared_by(launch, key: tuple, work: bool) -> bool:
    """The :func:`_unshare` mark of ``key`` (``launch``'s specialization, or with ``work`` its work
    key): this process's, else the disk cache's."""
    got = _UNSHARED.get(key)
    if got is None:
        disk = _disk_key(launch, work=work)
        got = _UNSHARED[key] = bool(disk is not None and disk_cache.load_number("batch", disk + "-unshared"))
    return got


def _unshare(launch, slower: bool = False) -> None:
    """Share out no more this launch's specialization (its shares could not stand for the serial run)
    or, where they only were ``slower`` than the serial run, its launches with these integer
    arguments (a row count gives another launch another cost); remembered by this process and,
    through the disk cache, by the next."""
    key = launch.work_key if slower else launch.spec_key
    _UNSHARED[key] = True
    disk = _disk_key(launch, work=slower)
    if disk is not None:
        disk_cache.store_number("batch", disk + "-unshared", 1.0)


def _known_seconds(launch) -> Optional[Tuple[float, float]]:
    """``(seconds, bytes written)`` per program of this launch's specialization with its integer
    arguments (``Launch.work_key``: a kernel looping over rows per program costs per program what its
    arguments say) in an earlier launch (of this process, else of an earlier one: the disk cache), or
    None."""
    got = _SECONDS.get(launch.work_key)
    if got is None:
        keys = _cost_keys(launch)
        seconds = disk_cache.load_number("batch", keys[0])
        if seconds is not None:
            got = _SECONDS[launch.work_key] = (seconds, disk_cache.load_number("batch", keys[1]) or 0.0)
    return got


def _note_seconds(launch, cost: Tuple[float, float]) -> Tuple[float, float]:
    """Remember ``(seconds, bytes written)`` per program of this launch's work key, from a batch just
    run (the latest measure stands, here and in the disk cache: an earlier process's first launch paid
    first calls a later launch does not)."""
    old = _SECONDS.get(launch.work_key)
    if old is None or not 0.8 < cost[0] / max(old[0], 1e-12) < 1.25:  # a new figure, not noise
        for key, value in zip(_cost_keys(launch), cost):
            if value > 0:
                disk_cache.store_number("batch", key, value)
    _SECONDS[launch.work_key] = cost
    return cost


def _over_group(launch, values: np.ndarray, group: np.ndarray) -> np.ndarray:
    """A divergent value per program of ``group`` (the batch begun), from ``values`` per program of
    the batch running when it diverged: inside a compacted loop (:mod:`~..interp.compact`) that is
    a sub-batch, and the programs that left it go along with its first program.

    Raises:
        Unbatchable: values of neither batch (not expected).
    """
    if values.shape[0] == group.shape[0]:
        return values
    running = launch.batch.order if launch.batch is not None else None
    if running is None or values.shape[0] != running.shape[0] or not running.shape[0]:
        raise Unbatchable("control flow on a value of unexpected shape")
    out = np.full(group.shape[0], values[0], dtype=values.dtype)
    out[np.searchsorted(group, running)] = values
    return out


def _run_groups(launch, tx: Transaction, fn, call_args, order: np.ndarray) -> None:
    """Run the programs ``order`` (execution indices), splitting them where control flow diverges."""
    pending = [order]
    runs, limit = 0, 2 * order.shape[0] + 16
    while pending:
        group = pending.pop(0)
        mark = tx.mark()
        launch.begin_batch(group)
        launch.builder.work = 0
        try:
            fn(**call_args)
        except Divergence as d:
            tx.rollback_to(mark)
            runs += 1
            if runs > limit:
                raise Unbatchable("control flow diverges between too many groups of programs") from None
            values = _over_group(launch, d.values, group)
            _, inv = np.unique(values, return_inverse=True)
            groups = [group[inv.reshape(-1) == k] for k in range(int(inv.max()) + 1)]
            groups.sort(key=lambda g: int(g[0]))
            pending = groups + pending
            launch.record.groups += len(groups) - 1
            continue
        finally:
            launch.end_batch()
        tx.settle()
        launch.record.programs += int(group.shape[0])
