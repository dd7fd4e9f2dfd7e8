"""The tuning cache's files on disk: the directory, one lock per file, atomic read-modify-writes,
and files that cannot be read moved aside.

Every write is a read-modify-write under a :class:`filelock.FileLock` on ``<file>.lock`` (filelock
is imported when the first lock is taken, through :func:`tritonkit._imports.require`: without it,
:class:`~tritonkit._imports.MissingDependency` names ``pip install 'tritonkit[tune]'``) and lands
through an atomic replace, so concurrent tuners merge their entries and a crash (of the process,
or in the middle of a write) loses nothing recorded before it. A file that cannot be read (bad
JSON, another format version, a wrong structure: :func:`~._format.validate`) is moved aside to
``<file>.corrupt-<timestamp>`` with a :class:`TuneCacheWarning` and started afresh; other files are
never touched.

Only what is provably tritonkit's is ever moved aside, removed or locked. A cache directory is
marked by a ``CACHEDIR.TAG`` file of tritonkit's (:data:`MARKER`, written with the first entry; the
cache-directory tag that backup tools skip); one made by an older tritonkit, without it, is known
by its names (every entry named the way this module names its files). Any other existing directory
(a project folder, a mistyped ``TRITONKIT_CACHE_DIR``) is refused with :class:`TuneCacheError`
before anything is read, locked or written in it. In a cache, only a file named the way
:meth:`~tritonkit.tune.TuneCache.path_for` names them (``<name>-<12 hex digits>.json``) is ever moved
aside; a file named otherwise is removed only where its content is a valid cache document.
"""
from __future__ import annotations

import json
import os
import re
import stat
import threading
import time
import warnings
from types import ModuleType
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

from ..._imports import require
from ..._io import atomic_write, atomic_write_text
from ._format import validate

#: environment variable that overrides the default cache directory.
ENV_DIR = "TRITONKIT_CACHE_DIR"
#: how long a write waits for another process's lock on the same file, in seconds.
DEFAULT_LOCK_TIMEOUT_S = 60.0

#: the file that marks a directory as tritonkit's tuning cache (a cache-directory tag,
#: https://bford.info/cachedir/, whose text names tritonkit)
MARKER = "CACHEDIR.TAG"
_SIGNATURE = "Signature: 8a477f597d28d172789f06886806bc55"
MARKER_TEXT = (f"{_SIGNATURE}\n# This directory is the tuning cache of tritonkit (tritonkit.tune): one JSON file per\n"
               f"# kernel. `tritonkit cache list|show|clear` reads and clears it. For information about cache\n"
               f"# directory tags see https://bford.info/cachedir/\n")
#: the name of an entry file (``TuneCache.path_for``)
ENTRY_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}-[0-9a-f]{12}\.json")
# every name this module makes in a cache: entries, their locks, moved-aside copies, temporary files
_OWN_NAME = re.compile(r"(?P<base>[A-Za-z0-9_.-]{1,64}-[0-9a-f]{12}\.json)(\.lock|\.corrupt-[0-9T]+(\.[0-9]+)?)?"
                       r"|\.(?P<tmp>[A-Za-z0-9_.-]{1,64}-[0-9a-f]{12}\.json|CACHEDIR\.TAG)\.tmp-\w+")

#: what an update function returns: True (write the document), False (leave the file), or
#: ``"remove"`` (delete the file).
Action = Union[bool, str]


class TuneCacheWarning(UserWarning):
    """A cache file could not be read and was moved aside (the warning says which, why and where)."""


class TuneCacheError(OSError):
    """The cache directory or one of its files cannot be used (permissions, a full disk, a lock
    held too long); the message says how to choose another directory."""


def default_cache_dir() -> str:
    """The cache directory used when none is given.

    Returns:
        ``$TRITONKIT_CACHE_DIR`` where set (``~`` expanded), else ``~/.cache/tritonkit/tune``.
    """
    env = os.environ.get(ENV_DIR, "").strip()
    if env:
        return os.path.abspath(os.path.expanduser(env))
    return os.path.join(os.path.expanduser("~"), ".cache", "tritonkit", "tune")


def _filelock() -> ModuleType:
    """The filelock module.

    Raises:
        MissingDependency: filelock is not installed (``pip install 'tritonkit[tune]'``).
    """
    return require("filelock", "the tuning cache")


class CacheFiles:
    """The JSON documents of one cache directory, read and written safely from several processes
    and threads at once.

    Args:
        directory: the cache directory (absolute); nothing is created until the first write.
        lock_timeout: seconds a write waits for another process's lock on the same file before
            raising :class:`TuneCacheError`.
        durable: fsync every write (and its directory); see :class:`~tritonkit.tune.TuneCache`.
    """

    def __init__(self, directory: str, lock_timeout: float, durable: bool):
        self.directory = directory
        self.lock_timeout = float(lock_timeout)
        self.durable = durable
        self._memo: Dict[str, Tuple[Tuple[int, int, int], Dict[str, Any]]] = {}
        self._memo_lock = threading.Lock()

    def list(self) -> List[str]:
        """Every ``*.json`` file of the directory, sorted (empty when the directory does not exist).

        Raises:
            TuneCacheError: the directory cannot be listed, or is not a tuning cache (:meth:`names`).
        """
        return sorted(os.path.join(self.directory, n) for n in self.names() if n.endswith(".json"))

    def names(self) -> List[str]:
        """The names in the cache directory (empty when it does not exist), once it is known to be
        a tuning cache: marked (:data:`MARKER`), or every name one this module makes (a cache of an
        older tritonkit), or empty.

        Raises:
            TuneCacheError: the directory cannot be listed, or it is not a tuning cache (it holds
                other files and no marker): nothing in it is read, locked or written.
        """
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return []
        except OSError as e:
            raise self.error("cannot list", e) from e
        if self.marked():
            return names
        foreign = sorted(n for n in names if not _OWN_NAME.fullmatch(n))
        if foreign:
            more = f" and {len(foreign) - 3} more" if len(foreign) > 3 else ""
            shown = ", ".join(repr(n) for n in foreign[:3]) + more
            raise TuneCacheError(
                f"tuning cache: {self.directory} is not a tritonkit tuning cache: it has no {MARKER} of tritonkit's "
                f"and holds files tritonkit did not write ({shown}); nothing in it was read, moved or deleted. Give "
                f"the cache directory with {ENV_DIR} (or the cache directory argument, --dir); the default is "
                f"~/.cache/tritonkit/tune. (A cache of an older tritonkit with other files put in it: move "
                f"those out.)")
        return names

    def check(self) -> None:
        """Raise unless the directory is a tuning cache, is empty, or does not exist (:meth:`names`;
        a marked one is known by one small read, without listing it).

        Raises:
            TuneCacheError: as :meth:`names`.
        """
        if not self.marked():
            self.names()

    def marked(self) -> bool:
        """Whether the directory holds tritonkit's :data:`MARKER` (a regular file starting with the
        cache-directory tag's signature and naming tritonkit)."""
        try:
            fd = os.open(os.path.join(self.directory, MARKER), os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)
                         | getattr(os, "O_NOFOLLOW", 0))
        except OSError:
            return False
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return False
            head = os.read(fd, 1024)
        except OSError:
            return False
        finally:
            os.close(fd)
        return head.startswith(_SIGNATURE.encode()) and b"tritonkit" in head

    def mark(self) -> None:
        """Write :data:`MARKER` into the (recognised, existing) directory where it is missing; a file
        of that name that is not tritonkit's is left as it is.

        Raises:
            TuneCacheError: the directory cannot be written.
        """
        path = os.path.join(self.directory, MARKER)
        if os.path.lexists(path):
            return
        try:
            atomic_write_text(path, MARKER_TEXT)
        except OSError as e:
            raise self.error("cannot write", e, path) from e

    def owned(self, path: str) -> Optional[str]:
        """Why ``path`` is not provably tritonkit's to move aside (None where it is): its name is not
        one :meth:`~tritonkit.tune.TuneCache.path_for` gives, or its directory is not a cache.

        Raises:
            TuneCacheError: the directory cannot be listed.
        """
        if not ENTRY_NAME.fullmatch(os.path.basename(path)):
            return "it is not named like a tritonkit cache file (<kernel>-<12 hex digits>.json)"
        try:
            self.check()
        except TuneCacheError as e:
            if not os.path.isdir(self.directory):
                raise
            return str(e)
        return None

    def error(self, what: str, e: OSError, path: Optional[str] = None) -> TuneCacheError:
        """A :class:`TuneCacheError` for ``what`` failed on ``path`` (default the directory), saying
        how to choose another directory."""
        where = path or self.directory
        return TuneCacheError(f"tuning cache: {what} {where}: {e.strerror or e}. Choose another cache directory "
                              f"with the {ENV_DIR} environment variable (or the cache directory argument).")

    def read(self, path: str, repair: bool = True) -> Optional[Dict[str, Any]]:
        """The parsed, validated document at ``path`` (None when there is none). A corrupt file is
        moved aside (under the lock, with a :class:`TuneCacheWarning`) and None returned; with
        ``repair=False`` (what read-only commands use) nothing is touched: the file is left where it
        is and :class:`TuneCacheError` says what is wrong with it. Documents are remembered until
        the file changes (inode, mtime, size).

        Raises:
            TuneCacheError: the file exists but cannot be read (a directory, no permission), or is
                corrupt and ``repair`` is False.
            MissingDependency: the file is corrupt and filelock, needed to move it aside, is missing.
        """
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return None
        except OSError as e:
            raise self.error("cannot read", e, path) from e
        sig = (st.st_ino, st.st_mtime_ns, st.st_size)
        with self._memo_lock:
            hit = self._memo.get(path)
        if hit is not None and hit[0] == sig:
            return hit[1]
        doc, problem = self.load(path)
        if problem is None:
            if doc is not None:
                with self._memo_lock:
                    self._memo[path] = (sig, doc)
            return doc
        if not repair:
            raise TuneCacheError(f"{path}: {problem}")
        not_ours = self.owned(path)
        if not_ours is not None:  # not even a lock file made beside it
            raise TuneCacheError(f"{path}: {problem}; {not_ours}, so it was left as it is")
        with self.lock(path):  # re-check under the lock: a writer may have replaced it meanwhile
            doc, problem = self.load(path)
            if problem is not None:
                self.quarantine(path, problem)
                return None
        return doc

    def load(self, path: str) -> Tuple[Optional[Dict[str, Any]], Optional[str]]:
        """Parse ``path`` without a lock: (document, None), (None, None) when missing, or (None, what
        is wrong with it).

        Raises:
            TuneCacheError: the file exists but cannot be read, or is not a regular file.
        """
        try:
            # O_NONBLOCK, then fstat: a FIFO named like a cache file would block open() and read()
            # forever (``tritonkit cache list`` hung); only a regular file is read
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        except FileNotFoundError:
            return None, None
        except IsADirectoryError:
            raise TuneCacheError(f"{path}: a directory, not a cache file") from None
        except OSError as e:
            raise self.error("cannot read", e, path) from e
        try:
            mode = os.fstat(fd).st_mode
            if stat.S_ISDIR(mode):
                raise TuneCacheError(f"{path}: a directory, not a cache file")
            if not stat.S_ISREG(mode):
                raise TuneCacheError(f"{path}: not a regular file (a FIFO, socket or device), not a cache file")
            try:
                with os.fdopen(fd, "rb", closefd=False) as f:
                    raw = f.read()
            except OSError as e:
                raise self.error("cannot read", e, path) from e
        finally:
            os.close(fd)
        try:
            doc = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            return None, f"it is not valid JSON ({e})"
        except RecursionError:  # "[[[[..." nested deeper than the parser's recursion limit
            return None, "it is not valid JSON (nested too deeply to parse)"
        return doc, validate(doc)

    def quarantine(self, path: str, problem: str) -> None:
        """Move the unusable ``path`` to ``<path>.corrupt-<timestamp>`` and warn
        (:class:`TuneCacheWarning`, naming the file, ``problem`` and where it went).

        Raises:
            TuneCacheError: the file cannot be moved, or it is not provably tritonkit's
                (:meth:`owned`): it is left as it is.
        """
        not_ours = self.owned(path)
        if not_ours is not None:
            raise TuneCacheError(f"{path}: {problem}; {not_ours}, so it was left as it is")
        stamp = time.strftime("%Y%m%dT%H%M%S")
        dest, n = f"{path}.corrupt-{stamp}", 1
        while os.path.exists(dest):
            n += 1
            dest = f"{path}.corrupt-{stamp}.{n}"
        try:
            os.replace(path, dest)
        except OSError as e:
            raise self.error("cannot move aside the unreadable file", e, path) from e
        with self._memo_lock:
            self._memo.pop(path, None)
        warnings.warn(f"tuning cache file {path} could not be used: {problem}. The file was moved to {dest} and "
                      f"that kernel's cache starts afresh (other cache files are untouched).",
                      TuneCacheWarning, stacklevel=4)

    def lock(self, path: str):
        """The inter-process lock of ``path`` (a ``filelock.FileLock`` on ``<path>.lock``).

        Raises:
            MissingDependency: filelock is not installed.
        """
        return _filelock().FileLock(path + ".lock", timeout=self.lock_timeout)

    def update(self, path: str, fn: Callable[[Dict[str, Any]], Action], create: bool,
               new: Optional[Callable[[], Dict[str, Any]]] = None) -> None:
        """Read-modify-write ``path`` under its lock.

        Args:
            path: the document's file.
            fn: edits the document in place and returns True (write it), False (leave the file)
                or ``"remove"`` (delete the file).
            create: whether to go on where the file does not exist (else nothing happens).
            new: makes the document to edit where there is none (None: nothing happens then).

        Raises:
            TuneCacheError: the directory or the file cannot be written, or another process held
                the lock longer than ``lock_timeout``.
            MissingDependency: filelock is not installed.
            TypeError: from ``fn``, where a value cannot be written as JSON (nothing is written).
        """
        if not os.path.exists(path) and not create:
            return
        filelock = _filelock()
        self.check()  # a directory that is not a cache: refused before anything is made in it
        try:
            os.makedirs(self.directory, exist_ok=True)
        except OSError as e:
            raise self.error("cannot create", e) from e
        if create and new is not None:
            self.mark()
        try:
            with filelock.FileLock(path + ".lock", timeout=self.lock_timeout):
                doc, problem = self.load(path)
                if problem is not None:
                    self.quarantine(path, problem)
                    doc = None
                if doc is None:
                    if new is None:
                        return
                    doc = new()
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
                    self.write(path, doc)
        except filelock.Timeout as e:
            raise TuneCacheError(f"tuning cache: waited {self.lock_timeout:g} s for the lock {path}.lock held by "
                                 f"another process; if no tuner is running, delete the lock file, or choose "
                                 f"another cache directory with {ENV_DIR}") from e
        except TuneCacheError:
            raise
        except OSError as e:  # a lock file that is a symlink (ELOOP), a read-only directory, ...
            raise self.error("cannot lock or write", e, path + (".lock" if e.filename == path + ".lock" else "")) \
                from e

    def write(self, path: str, doc: Dict[str, Any]) -> None:
        """Atomically replace ``path`` with ``doc`` as strict JSON (:func:`tritonkit._io.atomic_write`,
        fsync where ``durable``); call it under the file's lock.

        Raises:
            TuneCacheError: the file cannot be written (the old one is left as it was).
        """
        def write(f) -> None:
            json.dump(doc, f, indent=1, allow_nan=False)
            f.write("\n")

        try:
            atomic_write(path, write, durable=self.durable, own=True)
        except OSError as e:
            raise self.error("cannot write", e, path) from e
        try:
            st = os.stat(path)
        except OSError:
            return
        with self._memo_lock:
            self._memo[path] = ((st.st_ino, st.st_mtime_ns, st.st_size), doc)
