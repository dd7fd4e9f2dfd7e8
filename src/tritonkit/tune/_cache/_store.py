"""The tuning cache's public face, :class:`TuneCache`: record, look up, list and clear trials, and
the crash journal's begin/end/recover (see the package's docstring for the layout)."""
from __future__ import annotations

import json
import os
import re
from typing import Any, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

from .._result import Trial
from .._space import Point, point_key
from ._files import DEFAULT_LOCK_TIMEOUT_S, ENTRY_NAME, CacheFiles, TuneCacheError, default_cache_dir
from ._format import (CacheEntry, KernelId, cached_trial, drop_empty, identity_digest, key_str, new_doc, summaries,
                      trial_record, winner_key, winner_record)
from ._journal import RecoveredTrial, dead_markers, in_flight_marker, recover_dead, this_host

#: what :meth:`TuneCache.clear` and :meth:`TuneCache.show` take: a :class:`KernelId`, a kernel
#: name (or a prefix of names), or None for every kernel.
KernelSelector = Union[None, str, KernelId]


class TuneCache:
    """The persistent tuning cache: one JSON file per kernel identity, one entry per config measured.

    Args:
        directory: where the cache files live; default :func:`default_cache_dir` (read once, here).
            Nothing is created until the first write.
        lock_timeout: seconds a write waits for another process's lock on the same file before
            raising :class:`TuneCacheError`.
        durable: fsync every write (and its directory). Off by default: a write is an atomic
            rename either way, so a crashed *process* never leaves a half-written file; fsync only
            adds safety against a crash of the whole machine, at 5-20 ms per write (the tuner
            writes two journal markers and a result per config).

    Raises:
        ValueError: ``directory`` is an empty or blank path (it would be the working directory).

    Every method is safe to call from several processes and threads at once. Writing needs
    filelock (``pip install 'tritonkit[tune]'``; without it a write raises
    :class:`~tritonkit._imports.MissingDependency`). Times are in ms.

    Attributes:
        skipped: after :meth:`entries`, :meth:`show` or :meth:`clear`, the files they could not use,
            as ``(path, why)`` (a corrupt file, a directory named like a cache file, a lock that
            cannot be taken): listing and showing change nothing on disk, and one bad file does not
            stop the others from being listed or cleared.
        left_alone: after :meth:`clear`, the files it did not touch because they are not provably
            tritonkit's (``*.json`` named otherwise than :meth:`path_for` names files, holding no
            valid cache document), as ``(path, why)``.

    Every method raises :class:`TuneCacheError` for an existing directory that is not a tuning
    cache (no marker of tritonkit's, and files tritonkit did not write: a project folder, a
    mistyped ``TRITONKIT_CACHE_DIR``), before reading, locking or writing anything in it; see
    :mod:`tritonkit.tune._cache._files`.
    """

    def __init__(self, directory: Optional[Union[str, os.PathLike]] = None, *,
                 lock_timeout: float = DEFAULT_LOCK_TIMEOUT_S, durable: bool = False):
        if directory is not None and not str(os.fspath(directory)).strip():
            raise ValueError("the cache directory is empty (it would be the working directory): give a directory, "
                             "or None for the default one")
        where = os.path.abspath(os.fspath(directory)) if directory is not None else default_cache_dir()
        self._disk = CacheFiles(where, lock_timeout, durable)
        self.skipped: List[Tuple[str, str]] = []
        self.left_alone: List[Tuple[str, str]] = []

    @property
    def directory(self) -> str:
        """The cache directory (absolute)."""
        return self._disk.directory

    @property
    def lock_timeout(self) -> float:
        """Seconds a write waits for another process's lock."""
        return self._disk.lock_timeout

    @property
    def durable(self) -> bool:
        """Whether every write is fsync'ed."""
        return self._disk.durable

    def __repr__(self) -> str:
        return f"TuneCache({self.directory!r})"

    def check(self) -> None:
        """Say now whether the directory can be used: it is a tuning cache, is empty, or does not
        exist yet (nothing is created or changed).

        Raises:
            TuneCacheError: the directory cannot be listed, or it is not a tuning cache (a project
                folder, a mistyped ``TRITONKIT_CACHE_DIR``: it holds files tritonkit did not write
                and no marker of tritonkit's).
        """
        self._disk.check()

    def prepare(self) -> None:
        """Create the directory (where missing) and tritonkit's marker in it, so that files other
        than entries (the tuning pool's ledger, :mod:`tritonkit.tune._workers._ledger`) may be put
        in it; nothing else is written.

        Raises:
            TuneCacheError: the directory is not a tuning cache, or cannot be created or written.
        """
        self._disk.check()
        try:
            os.makedirs(self.directory, exist_ok=True)
        except OSError as e:
            raise self._disk.error("cannot create", e) from e
        self._disk.mark()

    # ----------------------------------------------------------------------------------- paths

    def path_for(self, kernel_id: KernelId) -> str:
        """The file that holds ``kernel_id``'s entries.

        Args:
            kernel_id: the kernel identity.

        Returns:
            ``<directory>/<sanitized name>-<12 hex digits of a hash of the identity>.json``.
        """
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", kernel_id.name).strip("._-")[:64] or "kernel"
        return os.path.join(self.directory, f"{safe}-{identity_digest(kernel_id)}.json")

    # --------------------------------------------------------------------------------- writing

    def record(self, kernel_id: KernelId, key: Sequence[Any], trial: Trial) -> None:
        """Persist one config's trial at once (any status: a crashing config is not retried).

        Replaces an earlier trial of the same config and clears this process's in-flight mark of it.

        Args:
            kernel_id: the kernel identity.
            key: the tuning key's values (each turned into a string).
            trial: the measurement; its ``point`` names the config.

        Raises:
            TypeError: a value of the trial cannot be written as JSON (nothing is written).
            TuneCacheError: the cache directory or file cannot be written.
        """
        self.record_many(kernel_id, key, [trial])

    def record_many(self, kernel_id: KernelId, key: Sequence[Any], trials: Iterable[Trial]) -> None:
        """Persist several trials of one key in one locked write.

        Args:
            kernel_id: the kernel identity.
            key: the tuning key's values.
            trials: the measurements (a later trial of the same config wins).

        Raises:
            TypeError: a value of a trial cannot be written as JSON (nothing is written).
            TuneCacheError: the cache directory or file cannot be written.
        """
        records = [(t.key, trial_record(t)) for t in trials]
        if not records:
            return
        k = key_str(key)
        pid = os.getpid()

        def update(doc):
            bucket = doc["entries"].setdefault(k, {})
            flying = doc["in_flight"].get(k, {})
            for pk, rec in records:
                bucket[pk] = rec
                if flying.get(pk, {}).get("pid") == pid:
                    del flying[pk]
            drop_empty(doc, k)
            return True

        self._update(kernel_id, update)

    def set_winner(self, kernel_id: KernelId, key: Sequence[Any], point: Point, ms: Optional[float] = None) -> None:
        """Store the config chosen for ``key`` (for example after a confirming re-measurement);
        listings show it instead of the fastest cached config.

        Args:
            kernel_id: the kernel identity.
            key: the tuning key's values.
            point: the chosen config.
            ms: its time in ms, where known.

        Raises:
            TypeError: a value of the point cannot be written as JSON.
            TuneCacheError: the cache directory or file cannot be written.
        """
        k = key_str(key)
        winner = winner_record(point, ms)

        def update(doc):
            doc["winners"][k] = winner
            return True

        self._update(kernel_id, update)

    def begin(self, kernel_id: KernelId, key: Sequence[Any], point: Point) -> None:
        """Journal that this process is about to time ``point`` (persisted before returning).

        Args:
            kernel_id: the kernel identity.
            key: the tuning key's values.
            point: the config about to run.

        Raises:
            TypeError: a value of the point cannot be written as JSON.
            TuneCacheError: the cache directory or file cannot be written.
        """
        k, pk = key_str(key), point_key(point)
        marker = in_flight_marker(point)

        def update(doc):
            doc["in_flight"].setdefault(k, {})[pk] = marker
            return True

        self._update(kernel_id, update)

    def end(self, kernel_id: KernelId, key: Sequence[Any], point: Point, trial: Optional[Trial] = None) -> None:
        """Clear the in-flight mark of ``point`` and, when given, record its trial in the same write.

        Args:
            kernel_id: the kernel identity.
            key: the tuning key's values.
            point: the config that ran.
            trial: its measurement, or None to only clear the mark (the trial recorded separately).

        Raises:
            TypeError: a value of the trial cannot be written as JSON.
            TuneCacheError: the cache directory or file cannot be written.
        """
        k, pk = key_str(key), point_key(point)
        rec = (trial.key, trial_record(trial)) if trial is not None else None

        def update(doc):
            changed = doc["in_flight"].get(k, {}).pop(pk, None) is not None
            if rec is not None:
                doc["entries"].setdefault(k, {})[rec[0]] = rec[1]
                changed = True
            drop_empty(doc, k)
            return changed

        self._update(kernel_id, update, create=rec is not None)

    def recover(self, kernel_id: Optional[KernelId] = None) -> List[RecoveredTrial]:
        """Turn the in-flight marks of processes that died into ``crashed`` trials.

        A mark is recovered when it was made on this host and its process is gone (``os.kill(pid,
        0)`` fails with ``ProcessLookupError``, the process is a zombie, or its pid now belongs to a
        process started later). Marks of live processes, and of other hosts sharing the directory,
        are left alone. Call it when a tuner starts, or after a worker process died.

        Args:
            kernel_id: only this kernel's file; default every file in the directory.

        Returns:
            The recovered trials (already recorded), for the caller to report.

        Raises:
            TuneCacheError: the cache directory or a file cannot be read or written.
        """
        paths = [self.path_for(kernel_id)] if kernel_id is not None else self._disk.list()
        host = this_host()
        out: List[RecoveredTrial] = []
        for path in paths:
            if not ENTRY_NAME.fullmatch(os.path.basename(path)):  # not tritonkit's name: read only, if at all
                try:
                    doc = self._disk.read(path, repair=False)
                except TuneCacheError:
                    continue
            else:
                doc = self._disk.read(path)
            if doc is None or not dead_markers(doc, host):
                continue
            found: List[RecoveredTrial] = []

            def update(doc):
                found[:] = recover_dead(doc, host)
                return bool(found)

            self._disk.update(path, update, create=False)
            out.extend(found)
        return out

    def clear(self, kernel: KernelSelector = None, failures_only: bool = False) -> int:
        """Forget cached trials.

        Args:
            kernel: a :class:`KernelId` (that identity only), a kernel name (every file of that
                name; where no kernel has that exact name, every kernel whose name starts with it),
                or None for the whole cache.
            failures_only: forget only trials that are not ``ok`` (failed, wrong, crashed,
                pruned), so they are tried again; ``ok`` trials and winners stay.

        Returns:
            The number of trials removed.

        Raises:
            TuneCacheError: the cache directory cannot be read or written, or is not a tuning cache
                (nothing in it is touched).
            ValueError: ``kernel`` is an empty or blank name (it would be a prefix of every name).

        Files the cache cannot clear are in :attr:`skipped`; ``*.json`` files that are not provably
        tritonkit's (named otherwise than :meth:`path_for` names them, and not a valid cache
        document) are never moved or removed, and are in :attr:`left_alone`.
        """
        removed = 0
        self.skipped = []
        self.left_alone = []
        for path in self._select(kernel):
            if os.path.isdir(path):
                self.skipped.append((path, "a directory, not a cache file"))
                continue
            if not ENTRY_NAME.fullmatch(os.path.basename(path)):
                try:
                    if self._disk.read(path, repair=False) is None:
                        continue
                except TuneCacheError as e:
                    self.left_alone.append((path, f"{_why(e, path)}; it is not named like a tritonkit cache "
                                                  f"file (<kernel>-<12 hex digits>.json), so it is not tritonkit's "
                                                  f"to clear"))
                    continue
            count = [0]

            def update(doc):
                if failures_only:
                    for k in list(doc["entries"]):
                        bucket = doc["entries"][k]
                        for pk in [pk for pk, rec in bucket.items() if rec.get("status") != "ok"]:
                            del bucket[pk]
                            count[0] += 1
                        drop_empty(doc, k)
                    return count[0] > 0
                count[0] = sum(len(b) for b in doc["entries"].values())
                return "remove"

            try:
                self._disk.update(path, update, create=False)
            except TuneCacheError as e:  # the others are still cleared; the caller says which was not
                self.skipped.append((path, str(e)))
                continue
            removed += count[0]
        return removed

    # --------------------------------------------------------------------------------- reading

    def lookup(self, kernel_id: KernelId, key: Sequence[Any], point: Point) -> Optional[Trial]:
        """The cached trial of one config.

        Args:
            kernel_id: the kernel identity.
            key: the tuning key's values.
            point: the config.

        Returns:
            The trial, with ``source="cache"``, or None when this config was not measured.

        Raises:
            TuneCacheError: the cache file exists but cannot be read (permissions).
        """
        doc = self._disk.read(self.path_for(kernel_id))
        if doc is None:
            return None
        rec = doc["entries"].get(key_str(key), {}).get(point_key(point))
        return cached_trial(rec) if rec is not None else None

    def trials(self, kernel_id: KernelId, key: Sequence[Any]) -> List[Trial]:
        """Every cached trial of one key, in the order first recorded.

        Args:
            kernel_id: the kernel identity.
            key: the tuning key's values.

        Returns:
            The trials, each with ``source="cache"`` (empty when none).

        Raises:
            TuneCacheError: the cache file exists but cannot be read (permissions).
        """
        doc = self._disk.read(self.path_for(kernel_id))
        if doc is None:
            return []
        return [cached_trial(rec) for rec in doc["entries"].get(key_str(key), {}).values()]

    def keys(self, kernel_id: KernelId) -> List[List[str]]:
        """The tuning keys with at least one cached trial.

        Args:
            kernel_id: the kernel identity.

        Returns:
            The keys, each a list of strings, in the order first recorded.

        Raises:
            TuneCacheError: the cache file exists but cannot be read (permissions).
        """
        doc = self._disk.read(self.path_for(kernel_id))
        if doc is None:
            return []
        return [json.loads(k) for k, bucket in doc["entries"].items() if bucket]

    def winner(self, kernel_id: KernelId, key: Sequence[Any]) -> Optional[Trial]:
        """The winning config of one key: the stored winner where one was set (and is cached as
        ``ok``), else the fastest ``ok`` trial.

        Args:
            kernel_id: the kernel identity.
            key: the tuning key's values.

        Returns:
            Its trial (``source="cache"``), or None when no config ran correctly.

        Raises:
            TuneCacheError: the cache file exists but cannot be read (permissions).
        """
        doc = self._disk.read(self.path_for(kernel_id))
        if doc is None:
            return None
        pk = winner_key(doc, key_str(key))
        return cached_trial(doc["entries"][key_str(key)][pk]) if pk else None

    def entries(self) -> Iterator[CacheEntry]:
        """Summaries of every (kernel identity, key) in the cache, sorted by kernel, device,
        Triton version and key.

        Returns:
            An iterator of :class:`CacheEntry`.

        Raises:
            TuneCacheError: the cache directory cannot be listed or a file cannot be read.
        """
        out: List[CacheEntry] = []
        self.skipped = []
        for path in self._disk.list():
            doc = self._read_only(path)
            if doc is not None:
                out.extend(summaries(doc, path))
        out.sort(key=lambda e: (e.kernel, e.device, e.triton, e.source_hash, e.key))
        return iter(out)

    def show(self, kernel: Union[str, KernelId]) -> List[CacheEntry]:
        """The entries of one kernel, with their trials.

        Args:
            kernel: a :class:`KernelId`, a kernel name, or a prefix of names (used where no kernel
                has that exact name).

        Returns:
            The matching :class:`CacheEntry` items (``trials`` filled, fastest first); empty when
            nothing matches.

        Raises:
            TuneCacheError: the cache directory cannot be listed or is not a tuning cache.
            ValueError: ``kernel`` is an empty or blank name.
        """
        out: List[CacheEntry] = []
        self.skipped = []
        for path in self._select(kernel):
            doc = self._read_only(path)
            if doc is not None:
                out.extend(summaries(doc, path))
        out.sort(key=lambda e: (e.kernel, e.device, e.triton, e.source_hash, e.key))
        return out

    # ------------------------------------------------------------------------------ internals

    def _select(self, kernel: KernelSelector) -> List[str]:
        """The files of ``kernel`` (see :meth:`clear`).

        Raises:
            ValueError: ``kernel`` is an empty or blank string.
        """
        if isinstance(kernel, str) and not kernel.strip():
            raise ValueError(f"a kernel name cannot be empty or blank ({kernel!r}): as a prefix it would select "
                             f"every kernel; give a name, or None for the whole cache")
        if isinstance(kernel, KernelId):
            path = self.path_for(kernel)
            return [path] if os.path.exists(path) else []
        files = self._disk.list()
        if kernel is None:
            return files
        named = []
        for path in files:
            doc = self._read_only(path)
            if doc is not None:
                named.append((doc["kernel"], path))
        exact = [p for n, p in named if n == kernel]
        return exact or [p for n, p in named if n.startswith(kernel)]

    def _read_only(self, path: str):
        """The document at ``path`` for a command that only reads (list, show, selecting what to
        clear): nothing is moved, renamed or locked; a file that cannot be used is skipped and
        noted in :attr:`skipped` as ``(path, why)``."""
        try:
            return self._disk.read(path, repair=False)
        except TuneCacheError as e:
            if (path, str(e)) not in self.skipped:
                self.skipped.append((path, str(e)))
            return None

    def _update(self, kernel_id: KernelId, fn, create: bool = True) -> None:
        """Read-modify-write ``kernel_id``'s file (a new document where there is none)."""
        self._disk.update(self.path_for(kernel_id), fn, create=create, new=lambda: new_doc(kernel_id))


def _why(e: TuneCacheError, path: str) -> str:
    """The message of ``e`` without the ``"<path>: "`` it starts with."""
    text = str(e)
    return text[len(path) + 2:] if text.startswith(path + ": ") else text
