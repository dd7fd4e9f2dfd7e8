"""What a launch learns that holds for the next process too, kept on disk: the rewritten code of
each ``@triton.jit`` function (the interpreter's AST rewrite: reading the source, parsing,
transforming and compiling it took 5-12 ms per kernel on a fresh process's first launch), and
the bytes per program of a kernel's largest value (which sizes the batched engine's batches: not
knowing it, a first launch runs a probe batch of 4 programs first, one more execution of the
kernel's body).

Entries are keyed by the function's compiled Python code (``marshal`` of its code object, which
holds its file, lines, names and constants: an edited kernel gets new entries) and by the versions
of Python, Triton and tritonkit, and the files of the rewriters (path, size and modification time).
They live under ``$TRITONKIT_CACHE_DIR``'s parent directory when that is set (the tuning cache's
setting), else ``~/.cache/tritonkit``, in ``check/``. ``TRITONKIT_CHECK_CACHE=0`` turns the cache off.

Several processes may share the directory: an entry is written to a temporary file and renamed
over its name (atomic on POSIX), so a reader sees a whole entry or none. An entry that cannot be
read back (truncated, garbage, written by another Python) is a miss and is written again; a
directory that cannot be written leaves the cache off for the process, silently (the check runs
the same, only without the saving). A cached code object is executed like a ``.pyc`` file: the
directory must be as trusted as Python's own caches.
"""
from __future__ import annotations

import hashlib
import json
import marshal
import os
import stat
import sys
import types
from typing import Callable, Optional

from ..._env import switched_off
from ..._io import atomic_write

ENV_OFF = "TRITONKIT_CHECK_CACHE"
_ENV_DIR = "TRITONKIT_CACHE_DIR"  # the tuning cache's directory; the check cache sits beside it
_salt: Optional[bytes] = None
_broken_dirs: set = set()


def cache_dir() -> Optional[str]:
    """The check cache's directory, or None when ``TRITONKIT_CHECK_CACHE`` turns it off."""
    if switched_off(ENV_OFF):
        return None
    base = os.environ.get(_ENV_DIR, "").strip()
    root = (os.path.dirname(os.path.abspath(os.path.expanduser(base))) if base
            else os.path.join(os.path.expanduser("~"), ".cache", "tritonkit"))
    return os.path.join(root, "check")


def _salt_bytes() -> bytes:
    """Python, Triton and tritonkit versions, and the rewriters' files and their runtime's (path,
    size, mtime)."""
    global _salt
    if _salt is None:
        import triton
        from triton.runtime import interpreter

        import tritonkit
        here = os.path.dirname(os.path.abspath(__file__))
        parts = [sys.version, triton.__version__, tritonkit.__version__]
        for path in (interpreter.__file__, os.path.join(here, "simt.py"), os.path.join(here, "rewrite.py"),
                     os.path.join(here, "kernels.py"), __file__):
            try:
                st = os.stat(path)
                parts.append(f"{path}:{st.st_size}:{st.st_mtime_ns}")
            except OSError:
                parts.append(path)
        _salt = "\n".join(parts).encode()
    return _salt


def code_key(pyfn, variant: str) -> Optional[str]:
    """The cache key of a Python function's rewrite (``variant``: which rewrite), or None if its
    code cannot be marshalled."""
    try:
        code = marshal.dumps(pyfn.__code__)
    except (AttributeError, ValueError):
        return None
    h = hashlib.sha256(_salt_bytes())
    h.update(variant.encode())
    h.update(code)
    return h.hexdigest()[:40]


def _path(kind: str, key: str) -> Optional[str]:
    d = cache_dir()
    if d is None or d in _broken_dirs:
        return None
    return os.path.join(d, f"{kind}-{key}")


#: bytes: an entry larger than this is not read (a kernel's code is some KiB)
_MAX_ENTRY = 1 << 24


def _read(path: Optional[str]) -> Optional[bytes]:
    """The bytes of the entry at ``path``, or None (none, unreadable, not a file, too large). Sized
    from ``fstat``: ``read(limit)`` would allocate the whole limit for every entry."""
    if path is None:
        return None
    try:  # non-blocking: a FIFO by the entry's name must not hang the check
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > _MAX_ENTRY:
            return None
        with os.fdopen(fd, "rb") as f:
            fd = -1
            return f.read(st.st_size)
    except OSError:
        return None
    finally:
        if fd >= 0:
            os.close(fd)


def _write(path: Optional[str], data: bytes) -> None:
    """Write ``data`` to ``path`` atomically; a directory that cannot be written is not tried again."""
    if path is None:
        return
    d = os.path.dirname(path)
    try:
        os.makedirs(d, exist_ok=True)
        atomic_write(path, lambda fh: fh.write(data), binary=True, own=True)
    except OSError:
        _broken_dirs.add(d)


def _load(kind: str, key: Optional[str], decode: Callable[[bytes], object], errors) -> Optional[object]:
    """The entry ``(kind, key)`` decoded, or None where there is none or it does not decode."""
    data = _read(_path(kind, key)) if key else None
    if not data:
        return None
    try:
        return decode(data)
    except errors:
        return None


def load_code(key: Optional[str]):
    """The code object cached under ``key``, or None (no entry, or one that does not read back)."""
    code = _load("code", key, marshal.loads, (EOFError, ValueError, TypeError))
    return code if isinstance(code, types.CodeType) else None


def store_code(key: Optional[str], code) -> None:
    """Cache the code object ``code`` under ``key``."""
    if key:
        _write(_path("code", key), marshal.dumps(code))


def load_number(kind: str, key: Optional[str]) -> Optional[float]:
    """A positive finite number cached under ``(kind, key)``, or None."""
    value = _load(kind, key, json.loads, (ValueError, UnicodeDecodeError, RecursionError))
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < float("inf"):
        return float(value)
    return None


def store_number(kind: str, key: Optional[str], value: float) -> None:
    """Cache a number under ``(kind, key)``."""
    if key:
        _write(_path(kind, key), json.dumps(float(value)).encode())
