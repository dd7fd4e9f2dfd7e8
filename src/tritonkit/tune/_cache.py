"""The persistent tuning cache: one JSON entry per config measured, kept across runs and processes.

Layout: one JSON file per kernel identity -- (kernel name, a hash of its source, Triton version,
device name) -- under the cache directory (``~/.cache/tritonkit/tune`` unless ``TRITONKIT_CACHE_DIR``
or the ``directory`` argument says otherwise)::

    {"format": 1, "units": "ms", "tritonkit": "0.1.0",
     "kernel": "matmul", "source_hash": "3f2a...", "triton": "3.6.0", "device": "NVIDIA H100 80GB HBM3",
     "entries":   {"[\\"1024\\",\\"torch.float16\\"]": {"BM=64,BN=64,num_stages=3,num_warps=4": {trial dict}}},
     "winners":   {json key -> {"point_key": ..., "ms": ..., "time": ...}},
     "in_flight": {json key -> {point_key -> {"point": ..., "pid": ..., "host": ..., "started": ...}}}}

Entries are per config, so adding configs to a search space keeps every earlier measurement.
Every write is a read-modify-write under a :class:`filelock.FileLock` on ``<file>.lock`` and lands
through an atomic replace, so concurrent tuners merge their entries and a crash (of the process,
or in the middle of a write) loses nothing recorded before it. A file that cannot be read (bad
JSON, another format version, a wrong structure) is moved aside to ``<file>.corrupt-<timestamp>``
with a :class:`TuneCacheWarning` and started afresh; other files are never touched.

The *journal* of in-flight configs isolates crashes: :meth:`TuneCache.begin` marks a config as
being timed by this process; :meth:`TuneCache.end` (or :meth:`TuneCache.record`) clears the mark.
:meth:`TuneCache.recover` turns the marks of processes that died into ``crashed`` trials, so a
config that takes the process down is not tried again.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import re
import socket
import threading
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import filelock

from .._io import atomic_write
from ._result import STATUSES, Trial
from ._space import Point, point_key

#: the on-disk format this module reads and writes.
FORMAT_VERSION = 1
#: the unit of every time in the cache.
UNITS = "ms"
#: environment variable that overrides the default cache directory.
ENV_DIR = "TRITONKIT_CACHE_DIR"
#: how long a write waits for another process's lock on the same file, in seconds.
DEFAULT_LOCK_TIMEOUT_S = 60.0

_HEADER_STRINGS = ("kernel", "source_hash", "triton", "device")


class TuneCacheWarning(UserWarning):
    """A cache file could not be read and was moved aside (the warning says which, why and where)."""


class TuneCacheError(OSError):
    """The cache directory or one of its files cannot be used (permissions, a full disk, a lock
    held too long); the message says how to choose another directory."""


@dataclass(frozen=True)
class KernelId:
    """The identity a cache file is kept under; the caller computes each part.

    Attributes:
        name: the kernel's name (``fn.__name__``).
        source_hash: a hash of the kernel's source, e.g. :func:`source_hash` of it, so an edited
            kernel starts a fresh cache.
        triton_version: ``triton.__version__``.
        device: the device's name (``torch.cuda.get_device_name()``).
    """

    name: str
    source_hash: str
    triton_version: str
    device: str

    def __post_init__(self):
        for f in ("name", "source_hash", "triton_version", "device"):
            if not isinstance(getattr(self, f), str) or not getattr(self, f):
                raise ValueError(f"KernelId.{f} must be a non-empty string, got {getattr(self, f)!r}")


def source_hash(text: str) -> str:
    """A short hash of a kernel's source text.

    Args:
        text: the source (``inspect.getsource`` of the kernel, or Triton's ``fn.src``).

    Returns:
        The first 16 hex digits of the text's SHA-256.
    """
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def default_cache_dir() -> str:
    """The cache directory used when none is given.

    Returns:
        ``$TRITONKIT_CACHE_DIR`` where set (``~`` expanded), else ``~/.cache/tritonkit/tune``.
    """
    env = os.environ.get(ENV_DIR, "").strip()
    if env:
        return os.path.abspath(os.path.expanduser(env))
    return os.path.join(os.path.expanduser("~"), ".cache", "tritonkit", "tune")


@dataclass(frozen=True)
class CacheEntry:
    """A summary of one (kernel identity, tuning key) in the cache, for listings.

    Attributes:
        kernel / source_hash / triton / device: the kernel identity.
        key: the tuning key's values.
        configs: number of configs cached for this key (every status).
        failures: how many of them are not ``ok`` (failed, wrong, crashed, pruned).
        in_flight: configs marked as being timed now (or by a process that died, until recovered).
        winner: the winning config's :func:`point_key` (the stored winner where one was set, else
            the fastest ``ok`` config), or None when no config ran correctly.
        winner_ms: the winner's time in ms, or None.
        path: the cache file.
        trials: the cached trials, fastest ``ok`` first, then the others by status and config.
    """

    kernel: str
    source_hash: str
    triton: str
    device: str
    key: Tuple[str, ...]
    configs: int
    failures: int
    in_flight: int
    winner: Optional[str]
    winner_ms: Optional[float]
    path: str
    trials: Tuple[Trial, ...] = field(default=(), repr=False, compare=False)

    @property
    def kernel_id(self) -> KernelId:
        return KernelId(self.kernel, self.source_hash, self.triton, self.device)


@dataclass(frozen=True)
class RecoveredTrial:
    """A config whose process died while timing it, as recorded by :meth:`TuneCache.recover`.

    Attributes:
        kernel_id: the kernel identity.
        key: the tuning key's values.
        trial: the ``crashed`` trial now in the cache.
        pid: the process that died.
    """

    kernel_id: KernelId
    key: List[str]
    trial: Trial
    pid: int


KernelSelector = Union[None, str, KernelId]


class TuneCache:
    """The persistent tuning cache (see the module docstring for the layout).

    Args:
        directory: where the cache files live; default :func:`default_cache_dir` (read once, here).
            Nothing is created until the first write.
        lock_timeout: seconds a write waits for another process's lock on the same file before
            raising :class:`TuneCacheError`.
        durable: fsync every write (and its directory). Off by default: a write is an atomic
            rename either way, so a crashed *process* never leaves a half-written file; fsync only
            adds safety against a crash of the whole machine, at 5-20 ms per write (the tuner
            writes two journal markers and a result per config).

    Every method is safe to call from several processes and threads at once.
    """

    def __init__(self, directory: Optional[Union[str, os.PathLike]] = None, *,
                 lock_timeout: float = DEFAULT_LOCK_TIMEOUT_S, durable: bool = False):
        self.durable = durable
        self.directory = os.path.abspath(os.fspath(directory)) if directory is not None else default_cache_dir()
        self.lock_timeout = float(lock_timeout)
        self._memo: Dict[str, Tuple[Tuple[int, int, int], Dict[str, Any]]] = {}
        self._memo_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"TuneCache({self.directory!r})"

    # ----------------------------------------------------------------------------------- paths

    def path_for(self, kernel_id: KernelId) -> str:
        """The file that holds ``kernel_id``'s entries.

        Args:
            kernel_id: the kernel identity.

        Returns:
            ``<directory>/<sanitized name>-<12 hex digits of a hash of the identity>.json``.
        """
        ident = json.dumps([kernel_id.name, kernel_id.source_hash, kernel_id.triton_version, kernel_id.device])
        digest = hashlib.sha256(ident.encode("utf-8")).hexdigest()[:12]
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", kernel_id.name).strip("._-")[:64] or "kernel"
        return os.path.join(self.directory, f"{safe}-{digest}.json")

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
        records = [(t.key, _trial_record(t)) for t in trials]
        if not records:
            return
        k = _key_str(key)
        pid = os.getpid()

        def update(doc):
            bucket = doc["entries"].setdefault(k, {})
            flying = doc["in_flight"].get(k, {})
            for pk, rec in records:
                bucket[pk] = rec
                if flying.get(pk, {}).get("pid") == pid:
                    del flying[pk]
            _prune(doc, k)
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
            TuneCacheError: the cache directory or file cannot be written.
        """
        k = _key_str(key)
        winner = {"point_key": point_key(point), "point": _json_safe(dict(point), "point"),
                  "ms": ms if ms is not None and math.isfinite(ms) else None, "time": time.time()}

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
        k, pk = _key_str(key), point_key(point)
        pid = os.getpid()
        marker = {"point": _json_safe(dict(point), "point"), "pid": pid, "host": socket.gethostname(),
                  "started": time.time(), "proc_start": _proc_start_time(pid)}

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
        k, pk = _key_str(key), point_key(point)
        rec = (trial.key, _trial_record(trial)) if trial is not None else None

        def update(doc):
            changed = doc["in_flight"].get(k, {}).pop(pk, None) is not None
            if rec is not None:
                doc["entries"].setdefault(k, {})[rec[0]] = rec[1]
                changed = True
            _prune(doc, k)
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
        paths = [self.path_for(kernel_id)] if kernel_id is not None else self._files()
        host = socket.gethostname()
        out: List[RecoveredTrial] = []
        for path in paths:
            doc = self._read(path)
            if doc is None or not _dead_markers(doc, host):
                continue
            found: List[RecoveredTrial] = []

            def update(doc):
                found.clear()
                kid = _doc_kernel_id(doc)
                for k, pk, marker in _dead_markers(doc, host):
                    pid = marker.get("pid")
                    trial = Trial(point=dict(marker.get("point") or {}), status="crashed",
                                  error=f"the process died while this config ran (pid {pid})")
                    doc["entries"].setdefault(k, {})[pk] = _trial_record(trial)
                    del doc["in_flight"][k][pk]
                    _prune(doc, k)
                    found.append(RecoveredTrial(kid, json.loads(k), trial, pid))
                return bool(found)

            self._update_path(path, update, create=False)
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
            TuneCacheError: the cache directory or a file cannot be read or written.
        """
        removed = 0
        for path in self._select(kernel):
            count = [0]

            def update(doc):
                if failures_only:
                    for k in list(doc["entries"]):
                        bucket = doc["entries"][k]
                        for pk in [pk for pk, rec in bucket.items() if rec.get("status") != "ok"]:
                            del bucket[pk]
                            count[0] += 1
                        _prune(doc, k)
                    return count[0] > 0
                count[0] = sum(len(b) for b in doc["entries"].values())
                return "remove"

            self._update_path(path, update, create=False)
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
        doc = self._read(self.path_for(kernel_id))
        if doc is None:
            return None
        rec = doc["entries"].get(_key_str(key), {}).get(point_key(point))
        return _cached_trial(rec) if rec is not None else None

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
        doc = self._read(self.path_for(kernel_id))
        if doc is None:
            return []
        return [_cached_trial(rec) for rec in doc["entries"].get(_key_str(key), {}).values()]

    def keys(self, kernel_id: KernelId) -> List[List[str]]:
        """The tuning keys with at least one cached trial.

        Args:
            kernel_id: the kernel identity.

        Returns:
            The keys, each a list of strings, in the order first recorded.

        Raises:
            TuneCacheError: the cache file exists but cannot be read (permissions).
        """
        doc = self._read(self.path_for(kernel_id))
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
        doc = self._read(self.path_for(kernel_id))
        if doc is None:
            return None
        pk = _winner_key(doc, _key_str(key))
        return _cached_trial(doc["entries"][_key_str(key)][pk]) if pk else None

    def entries(self) -> Iterator[CacheEntry]:
        """Summaries of every (kernel identity, key) in the cache, sorted by kernel, device,
        Triton version and key.

        Returns:
            An iterator of :class:`CacheEntry`.

        Raises:
            TuneCacheError: the cache directory cannot be listed or a file cannot be read.
        """
        out: List[CacheEntry] = []
        for path in self._files():
            doc = self._read(path)
            if doc is not None:
                out.extend(_summaries(doc, path))
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
            TuneCacheError: the cache directory cannot be listed or a file cannot be read.
        """
        out: List[CacheEntry] = []
        for path in self._select(kernel):
            doc = self._read(path)
            if doc is not None:
                out.extend(_summaries(doc, path))
        out.sort(key=lambda e: (e.kernel, e.device, e.triton, e.source_hash, e.key))
        return out

    # ------------------------------------------------------------------------------ internals

    def _files(self) -> List[str]:
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return []
        except OSError as e:
            raise self._dir_error("cannot list", e) from e
        return sorted(os.path.join(self.directory, n) for n in names if n.endswith(".json"))

    def _select(self, kernel: KernelSelector) -> List[str]:
        if isinstance(kernel, KernelId):
            path = self.path_for(kernel)
            return [path] if os.path.exists(path) else []
        files = self._files()
        if kernel is None:
            return files
        named = []
        for path in files:
            doc = self._read(path)
            if doc is not None:
                named.append((doc["kernel"], path))
        exact = [p for n, p in named if n == kernel]
        return exact or [p for n, p in named if n.startswith(kernel)]

    def _dir_error(self, what: str, e: OSError, path: Optional[str] = None) -> TuneCacheError:
        where = path or self.directory
        return TuneCacheError(f"tuning cache: {what} {where}: {e.strerror or e}. Choose another cache directory "
                              f"with the {ENV_DIR} environment variable (or the cache directory argument).")

    def _read(self, path: str) -> Optional[Dict[str, Any]]:
        """The parsed, validated document at ``path`` (None when there is none); a corrupt file is
        moved aside (under the lock) and None returned."""
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return None
        except OSError as e:
            raise self._dir_error("cannot read", e, path) from e
        sig = (st.st_ino, st.st_mtime_ns, st.st_size)
        with self._memo_lock:
            hit = self._memo.get(path)
        if hit is not None and hit[0] == sig:
            return hit[1]
        doc, problem = self._load(path)
        if problem is None:
            if doc is not None:
                with self._memo_lock:
                    self._memo[path] = (sig, doc)
            return doc
        with self._lock(path):  # re-check under the lock: a writer may have replaced it meanwhile
            doc, problem = self._load(path)
            if problem is not None:
                self._quarantine(path, problem)
                return None
        return doc

    def _load(self, path: str) -> Tuple[Optional[Dict[str, Any]], Optional[str]]:
        """(document, None), (None, None) when missing, or (None, what is wrong)."""
        try:
            with open(path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return None, None
        except OSError as e:
            raise self._dir_error("cannot read", e, path) from e
        try:
            doc = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            return None, f"it is not valid JSON ({e})"
        return doc, _validate(doc)

    def _quarantine(self, path: str, problem: str) -> None:
        stamp = time.strftime("%Y%m%dT%H%M%S")
        dest, n = f"{path}.corrupt-{stamp}", 1
        while os.path.exists(dest):
            n += 1
            dest = f"{path}.corrupt-{stamp}.{n}"
        try:
            os.replace(path, dest)
        except OSError as e:
            raise self._dir_error("cannot move aside the unreadable file", e, path) from e
        with self._memo_lock:
            self._memo.pop(path, None)
        warnings.warn(f"tuning cache file {path} could not be used: {problem}. The file was moved to {dest} and "
                      f"that kernel's cache starts afresh (other cache files are untouched).",
                      TuneCacheWarning, stacklevel=4)

    def _lock(self, path: str) -> filelock.FileLock:
        return filelock.FileLock(path + ".lock", timeout=self.lock_timeout)

    def _update(self, kernel_id: KernelId, fn, create: bool = True) -> None:
        path = self.path_for(kernel_id)
        self._update_path(path, fn, create=create, kernel_id=kernel_id)

    def _update_path(self, path: str, fn, create: bool, kernel_id: Optional[KernelId] = None) -> None:
        """Read-modify-write ``path`` under its lock. ``fn(doc)`` edits the document in place and
        returns True (write it), False (leave the file) or ``"remove"`` (delete the file)."""
        if not os.path.exists(path) and not create:
            return
        try:
            os.makedirs(self.directory, exist_ok=True)
        except OSError as e:
            raise self._dir_error("cannot create", e) from e
        try:
            with self._lock(path):
                doc, problem = self._load(path)
                if problem is not None:
                    self._quarantine(path, problem)
                    doc = None
                if doc is None:
                    if kernel_id is None:
                        return
                    doc = _new_doc(kernel_id)
                action = fn(doc)
                if action == "remove":
                    try:
                        os.remove(path)
                    except FileNotFoundError:
                        pass
                    with self._memo_lock:
                        self._memo.pop(path, None)
                elif action:
                    doc["updated"] = time.time()
                    self._write(path, doc)
        except filelock.Timeout as e:
            raise TuneCacheError(f"tuning cache: waited {self.lock_timeout:g} s for the lock {path}.lock held by "
                                 f"another process; if no tuner is running, delete the lock file, or choose "
                                 f"another cache directory with {ENV_DIR}") from e
        except PermissionError as e:
            raise self._dir_error("cannot write", e, path) from e

    def _write(self, path: str, doc: Dict[str, Any]) -> None:
        """Atomically replace ``path`` with ``doc`` (:func:`tritonkit._io.atomic_write`, fsync where
        ``durable``)."""
        def write(f) -> None:
            json.dump(doc, f, indent=1, allow_nan=False)
            f.write("\n")

        try:
            atomic_write(path, write, durable=self.durable)
        except OSError as e:
            raise self._dir_error("cannot write", e, path) from e
        try:
            st = os.stat(path)
        except OSError:
            return
        with self._memo_lock:
            self._memo[path] = ((st.st_ino, st.st_mtime_ns, st.st_size), doc)


# ------------------------------------------------------------------------------------ helpers


def _key_str(key: Sequence[Any]) -> str:
    if isinstance(key, (str, bytes)):
        raise TypeError(f"a tuning key is a list of values, not a single string: {key!r}")
    return json.dumps([str(v) for v in key], separators=(",", ":"))


def _new_doc(kernel_id: KernelId) -> Dict[str, Any]:
    from .._version import __version__
    now = time.time()
    return {"format": FORMAT_VERSION, "units": UNITS, "tritonkit": __version__, "kernel": kernel_id.name,
            "source_hash": kernel_id.source_hash, "triton": kernel_id.triton_version, "device": kernel_id.device,
            "created": now, "updated": now, "entries": {}, "winners": {}, "in_flight": {}}


def _doc_kernel_id(doc: Mapping[str, Any]) -> KernelId:
    return KernelId(doc["kernel"], doc["source_hash"], doc["triton"], doc["device"])


def _validate(doc: Any) -> Optional[str]:
    """What is wrong with a parsed cache file, or None. Fills in the optional sections."""
    if not isinstance(doc, dict):
        return f"it holds a JSON {type(doc).__name__}, not a tuning cache object"
    fmt = doc.get("format")
    if fmt != FORMAT_VERSION:
        if isinstance(fmt, int) and not isinstance(fmt, bool) and fmt > FORMAT_VERSION:
            return (f"it has format version {fmt} (written by a newer tritonkit?); this tritonkit reads format "
                    f"{FORMAT_VERSION}")
        return f"it has format version {fmt!r}; this tritonkit reads format {FORMAT_VERSION}"
    if doc.get("units") != UNITS:
        return f"its times are in {doc.get('units')!r}, not {UNITS!r}"
    for name in _HEADER_STRINGS:
        if not isinstance(doc.get(name), str) or not doc[name]:
            return f"its header has no valid {name!r}"
    for section in ("entries", "winners", "in_flight"):
        doc.setdefault(section, {})
        if not isinstance(doc[section], dict):
            return f"its {section!r} is not an object"
    for section in ("entries", "in_flight"):
        for k, bucket in doc[section].items():
            problem = _check_key(k)
            if problem or not isinstance(bucket, dict):
                return problem or f"{section}[{k}] is not an object"
            for pk, rec in bucket.items():
                if not isinstance(rec, dict) or not isinstance(rec.get("point"), dict):
                    return f"{section}[{k}][{pk}] is not a config record"
                if section == "entries":
                    if rec.get("status") not in STATUSES:
                        return f"{section}[{k}][{pk}] has an unknown status {rec.get('status')!r}"
                    try:
                        Trial.from_dict(rec)
                    except Exception as e:  # noqa: BLE001 - any field of the wrong type
                        return f"{section}[{k}][{pk}] is not a trial ({e})"
    for k, w in doc["winners"].items():
        if _check_key(k) or not isinstance(w, dict) or not isinstance(w.get("point_key"), str):
            return f"winners[{k}] is not a winner record"
    return None


def _check_key(k: str) -> Optional[str]:
    try:
        v = json.loads(k)
    except ValueError:
        v = None
    if not isinstance(v, list) or not all(isinstance(s, str) for s in v):
        return f"key {k!r} is not a JSON list of strings"
    return None


def _json_safe(value: Any, what: str) -> Any:
    """``value`` with non-finite floats as None; raises TypeError where JSON cannot hold it."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _json_safe(v, what) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v, what) for v in value]
    if value is None or isinstance(value, (str, int, bool)):
        return value
    raise TypeError(f"the tuning cache cannot store the {what} value {value!r} of type {type(value).__name__}: "
                    f"use plain ints, floats, strings, booleans or None")


def _trial_record(trial: Trial) -> Dict[str, Any]:
    d = trial.to_dict()
    if d.get("ci_ms") and not all(isinstance(x, (int, float)) and math.isfinite(x) for x in d["ci_ms"]):
        d["ci_ms"] = None
    d = _json_safe(d, "trial")
    d["recorded"] = time.time()
    return d


def _cached_trial(rec: Mapping[str, Any]) -> Trial:
    t = Trial.from_dict(dict(rec))
    t.source = "cache"
    return t


def _prune(doc: Dict[str, Any], k: str) -> None:
    for section in ("entries", "in_flight"):
        if k in doc[section] and not doc[section][k]:
            del doc[section][k]


def _winner_key(doc: Mapping[str, Any], k: str) -> Optional[str]:
    bucket = doc["entries"].get(k, {})
    stored = doc["winners"].get(k)
    if stored and bucket.get(stored["point_key"], {}).get("status") == "ok":
        return stored["point_key"]
    ok = [(rec["ms"], pk) for pk, rec in bucket.items() if rec.get("status") == "ok" and rec.get("ms") is not None]
    return min(ok)[1] if ok else None


def _summaries(doc: Mapping[str, Any], path: str) -> List[CacheEntry]:
    out = []
    keys = list(doc["entries"]) + [k for k in doc["in_flight"] if k not in doc["entries"]]
    for k in keys:
        bucket = doc["entries"].get(k, {})
        trials = [_cached_trial(rec) for rec in bucket.values()]
        trials.sort(key=lambda t: (not t.ok, t.ms if t.ok else 0.0, STATUSES.index(t.status), t.key))
        win = _winner_key(doc, k)
        out.append(CacheEntry(kernel=doc["kernel"], source_hash=doc["source_hash"], triton=doc["triton"],
                              device=doc["device"], key=tuple(json.loads(k)), configs=len(bucket),
                              failures=sum(1 for t in trials if t.status != "ok"),
                              in_flight=len(doc["in_flight"].get(k, {})), winner=win,
                              winner_ms=bucket[win].get("ms") if win else None, path=path, trials=tuple(trials)))
    return out


def _dead_markers(doc: Mapping[str, Any], host: str) -> List[Tuple[str, str, Dict[str, Any]]]:
    out = []
    for k, bucket in doc["in_flight"].items():
        for pk, marker in bucket.items():
            if marker.get("host", host) != host:
                continue
            if not _alive(marker.get("pid"), marker.get("proc_start")):
                out.append((k, pk, marker))
    return out


def _alive(pid: Any, proc_start: Any = None) -> bool:
    """Whether process ``pid`` still runs (and is the one that made the mark)."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False  # a mark without a usable pid: no process can end it
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by another user
    except OSError:
        return True
    state = _proc_stat(pid)
    if state is not None:
        if state[0] in ("Z", "X"):
            return False  # exited, not yet reaped by its parent
        if proc_start is not None and state[1] is not None and state[1] != proc_start:
            return False  # the pid was reused by a process started later
    return True


def _proc_stat(pid: int) -> Optional[Tuple[str, Optional[int]]]:
    """(state letter, start time in clock ticks) from ``/proc/<pid>/stat``; None where unavailable."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return None
    fields = text[text.rfind(")") + 2:].split()
    if not fields:
        return None
    try:
        start = int(fields[19])  # field 22 of stat(5); fields here start at field 3
    except (IndexError, ValueError):
        start = None
    return fields[0], start


def _proc_start_time(pid: int) -> Optional[int]:
    state = _proc_stat(pid)
    return state[1] if state else None


