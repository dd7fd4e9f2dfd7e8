"""The persistent tuning cache: one JSON entry per config measured, kept across runs and processes.

Layout: one JSON file per kernel identity -- (kernel name, a hash of its source, Triton version,
device name) -- under the cache directory (``~/.cache/tritonkit/tune`` unless ``TRITONKIT_CACHE_DIR``
or the ``directory`` argument says otherwise). Entries are per config, so adding configs to a
search space keeps every earlier measurement. Times are in ms.

The package, by concept:

* :mod:`._format`: the file format and its codec (:class:`KernelId`, :class:`CacheEntry`, how keys,
  trials and winners are written, what makes a file unreadable);
* :mod:`._files`: the files on disk (a lock per file, atomic read-modify-writes, unreadable files
  moved aside with a :class:`TuneCacheWarning`, :class:`TuneCacheError`);
* :mod:`._journal`: the crash journal of in-flight configs: :meth:`TuneCache.begin` marks a config
  as being timed by this process; :meth:`TuneCache.end` (or :meth:`TuneCache.record`) clears the
  mark; :meth:`TuneCache.recover` turns the marks of processes that died into ``crashed`` trials,
  so a config that takes the process down is not tried again;
* :mod:`._store`: :class:`TuneCache`, the one object callers use.

filelock (the ``tune`` extra) is imported at the first lock, not with this package.
"""
from ._files import DEFAULT_LOCK_TIMEOUT_S, ENV_DIR, TuneCacheError, TuneCacheWarning, default_cache_dir
from ._format import FORMAT_VERSION, UNITS, CacheEntry, KernelId, source_hash
from ._journal import RecoveredTrial
from ._store import KernelSelector, TuneCache

__all__ = ["TuneCache", "KernelId", "CacheEntry", "RecoveredTrial", "KernelSelector", "TuneCacheError",
           "TuneCacheWarning", "source_hash", "default_cache_dir", "FORMAT_VERSION", "UNITS", "ENV_DIR",
           "DEFAULT_LOCK_TIMEOUT_S"]
