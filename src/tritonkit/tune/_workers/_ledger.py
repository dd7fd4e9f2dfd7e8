"""The ledger: an append-only journal of finished measurements, one line per config measured.

Rewriting the cache's JSON file for every measurement would serialise a sweep's workers behind
its lock (each write re-encodes every entry of the kernel, megabytes after a few keys). So the
process that finishes a measurement appends one line to its own ledger file (one ``write`` of a
few hundred bytes, no lock), and the driver records a whole key in the cache once it is tuned
(:meth:`~tritonkit.tune.TuneCache.record_many`). Ledger files live under the cache directory
(``<cache>/ledger/<host>-<pid>-<start>.jsonl``); :func:`merge` records the files of writers that
are gone into the cache, so a sweep whose driver was killed loses nothing that was finished: the
next sweep on the same cache merges them before it starts, and every config measured then is a
cache hit.

A line: ``{"kernel_id": {name, source_hash, triton_version, device}, "key": [...], "trial": {...},
"worker": "..."}`` with the trial as the cache stores it (times in ms).
"""
from __future__ import annotations

import json
import os
import re
from collections import defaultdict
from dataclasses import asdict
from typing import Dict, Iterator, List, Optional, Tuple

from .._result import Trial
from .._space import point_key
from .._cache import KernelId, TuneCache
from .._cache._format import cached_trial, trial_record
from .._cache._journal import alive, proc_start_time, this_host

#: the ledger directory's name under the cache directory.
LEDGER_DIR = "ledger"
_NAME = re.compile(r"(?P<host>.+)-(?P<pid>\d+)-(?P<start>\d+|x)\.jsonl")


def ledger_dir(cache: TuneCache) -> str:
    """The ledger directory of ``cache`` (``<cache directory>/ledger``), created with the cache's
    marker so the directory stays a recognised tuning cache.

    Raises:
        TuneCacheError: the cache directory is not a tuning cache or cannot be written.
    """
    cache.prepare()
    path = os.path.join(cache.directory, LEDGER_DIR)
    os.makedirs(path, exist_ok=True)
    return path


def ledger_file(directory: str, pid: Optional[int] = None, host: Optional[str] = None,
                start: Optional[int] = None) -> str:
    """The ledger file a process writes in ``directory``: ``<host>-<pid>-<process start>.jsonl``.

    Args:
        directory: the ledger directory.
        pid: the writer (default this process).
        host: its host (default this host).
        start: its start time in clock ticks (default: read from ``/proc`` for this process).
    """
    if pid is None:
        pid = os.getpid()
        start = proc_start_time(pid)
    safe = re.sub(r"[^A-Za-z0-9_.]+", "_", host or this_host())
    return os.path.join(directory, f"{safe}-{int(pid)}-{'x' if start is None else start}.jsonl")


def append(path: str, kernel_id: KernelId, key: List[str], trial: Trial, worker: str = "") -> None:
    """Append one finished measurement to the ledger file ``path`` (one ``write`` call, so a line is
    whole or absent even when the process is killed).

    Raises:
        OSError: the file cannot be written.
        TypeError: a value of the trial cannot be written as JSON.
    """
    line = json.dumps({"kernel_id": asdict(kernel_id), "key": [str(k) for k in key],
                       "trial": trial_record(trial), "worker": worker}, allow_nan=False) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, line.encode("utf-8"))
    finally:
        os.close(fd)


def read(path: str) -> Iterator[Tuple[KernelId, List[str], Trial, str]]:
    """The entries of one ledger file, in order: ``(kernel id, key, trial, worker)``; lines that
    cannot be read (cut by a crash of the machine) are skipped. The trials keep their ``source``."""
    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.readlines()
    except FileNotFoundError:
        return
    for line in lines:
        try:
            d = json.loads(line)
            trial = Trial.from_dict(d["trial"])
            yield KernelId(**d["kernel_id"]), [str(k) for k in d["key"]], trial, str(d.get("worker", ""))
        except (ValueError, KeyError, TypeError):
            continue


def find(path: str, key: List[str], point: Dict) -> Optional[Trial]:
    """The last trial of ``point`` at ``key`` in the ledger file ``path`` (``source="cache"``), or None."""
    pk = point_key(point)
    found = None
    for _, k, trial, _ in read(path):
        if k == list(key) and trial.key == pk:
            found = trial
    if found is not None:
        found = cached_trial(trial_record(found))
    return found


def writer_gone(path: str) -> bool:
    """Whether the process that writes ledger file ``path`` is gone (a file of another host, or
    named otherwise, counts as still written)."""
    m = _NAME.fullmatch(os.path.basename(path))
    if not m:
        return False
    host = re.sub(r"[^A-Za-z0-9_.]+", "_", this_host())
    if m.group("host") != host:
        return False
    start = None if m.group("start") == "x" else int(m.group("start"))
    return not alive(int(m.group("pid")), start)


def merge(cache: TuneCache, keep: bool = False, only: Optional[List[str]] = None) -> int:
    """Record into ``cache`` the ledger files whose writers are gone, then remove them.

    Args:
        cache: the cache whose ledger directory is merged.
        keep: rename merged files to ``<file>.merged`` instead of removing them (an audit trail:
            the benchmark counts measurements from them); ``.merged`` files are never merged again.
        only: merge these files (whose writers the caller stopped) instead of every file of a
            writer that is gone.

    Returns:
        The number of entries recorded (those the cache did not hold already).

    Raises:
        TuneCacheError: the cache cannot be written.
    """
    directory = os.path.join(cache.directory, LEDGER_DIR)
    if only is None:
        try:
            names = sorted(os.listdir(directory))
        except FileNotFoundError:
            return 0
        only = [os.path.join(directory, n) for n in names if n.endswith(".jsonl")]
        only = [p for p in only if writer_gone(p)]
    groups: Dict[Tuple[KernelId, Tuple[str, ...]], List[Trial]] = defaultdict(list)
    done = []
    for path in only:
        if not os.path.exists(path):
            continue
        for kid, key, trial, _ in read(path):
            groups[(kid, tuple(key))].append(trial)
        done.append(path)
    n = 0
    for (kid, key), trials in groups.items():
        have = {t.key: t for t in cache.trials(kid, list(key))}
        new = [t for t in trials if not _same(have.get(t.key), t)]
        if new:
            cache.record_many(kid, list(key), new)
        n += len(new)
    for path in done:
        try:
            if keep:
                os.replace(path, path + ".merged")
            else:
                os.remove(path)
        except FileNotFoundError:
            pass
    return n


def _same(cached: Optional[Trial], trial: Trial) -> bool:
    """Whether the cache already holds ``trial`` (same status and time)."""
    return cached is not None and cached.status == trial.status and \
        (cached.ms == trial.ms or (not cached.ok and not trial.ok))
