"""Small file helpers shared by the parts: writes that never leave a half-written file, and never
replace what is not a regular file (a device, a FIFO, a symlink)."""
from __future__ import annotations

import errno
import os
import stat
import tempfile
from typing import IO, Callable, Optional, Tuple

#: file names that are Python source: an output path ending so is refused where it exists
PYTHON_SUFFIXES = (".py", ".pyi", ".pyw")


def atomic_write(path: str, write: Callable[[IO], None], binary: bool = False, durable: bool = False,
                 own: bool = False) -> None:
    """Call ``write(fh)`` on a temporary file in ``path``'s directory, then ``os.replace`` it onto
    ``path``, so a crash or a full disk leaves either the old file or the new one, never a mix.

    Only a regular file (or a new one) is ever replaced (:func:`output_target`): a symlink's target
    is written the same way, atomically, and the link stays; a character device or a FIFO
    (``/dev/null``, ``/dev/stdout``, a named pipe) is opened and written in place, the way a shell's
    ``>`` would (a FIFO's open waits for its reader).

    The new file gets the old one's permission bits, or for a new file the usual ones (0666 less
    the umask), not the 0600 of a temporary file.

    Args:
        path: the file to write.
        write: writes the whole content to the open file it is given.
        binary: open the temporary file in binary mode (else text, UTF-8).
        durable: also fsync the file and its directory, so the write survives a crash of the
            machine (a crashed process never leaves a half-written file either way).
        own: ``path`` is in a directory of tritonkit's own (a cache): whatever is there (a FIFO,
            a link) is damage, replaced like a regular file, never written through.

    Raises:
        IsADirectoryError: ``path`` is a directory.
        OSError: ``path`` is a socket or a block device (``EINVAL``, nothing written), a symlink
            loop, or its directory cannot be written (the temporary file is removed; an existing
            ``path`` is left as it was); and whatever ``write`` raises, after the same clean-up.
    """
    target, in_place = (path, False) if own else output_target(path)
    text = {} if binary else {"encoding": "utf-8", "errors": "backslashreplace"}
    if in_place:
        _write_in_place(target, write, "wb" if binary else "w", text)
        return
    directory = os.path.dirname(os.path.abspath(target)) or "."
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(target) + ".tmp-", dir=directory)
    try:
        # text: UTF-8; a character it cannot encode (a file name's undecodable byte, held as a lone
        # surrogate) is written as a \udcXX escape rather than failing the whole write
        with os.fdopen(fd, "wb" if binary else "w", **text) as fh:
            if hasattr(os, "fchmod"):
                os.fchmod(fh.fileno(), file_mode(target))
            write(fh)
            fh.flush()
            if durable:
                os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    if durable:
        fsync_dir(directory)


def atomic_write_text(path: str, text: str) -> None:
    """:func:`atomic_write` of a string."""
    atomic_write(path, lambda fh: fh.write(text))


def output_target(path: str) -> Tuple[str, bool]:
    """Where a write of ``path`` lands: ``(the path to write, whether it is written in place)``.

    A regular file or a new one: itself, replaced atomically. A symlink to one (or a dangling
    symlink): the link's resolved target, so the link stays a link. A character device or a FIFO,
    or a link through ``/proc`` or ``/dev/fd`` (``/dev/stdout`` redirected to a file, whose open
    file a replace would not reach): the path, written in place.

    Raises:
        IsADirectoryError: ``path`` is a directory.
        OSError: ``path`` is a socket or a block device (``EINVAL``), or a symlink loop.
    """
    try:
        st: Optional[os.stat_result] = os.stat(path)
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        if stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode):
            return path, True
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, "it is a directory", path)
        raise OSError(errno.EINVAL, "not a regular file, character device or FIFO (a socket or block device): "
                                    "not written", path)
    if not os.path.islink(path):
        return path, False
    if _through_proc(path):
        if st is None:
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
        return path, True
    return os.path.realpath(path), False


def output_problem(path: str) -> Optional[str]:
    """Why ``path`` cannot be written now as an output (None where it can), found by trying: for a
    regular file or a new one a temporary file is made (and removed) in its directory, which is
    what :func:`atomic_write` needs; a device or a FIFO must be writable; an existing regular file
    must be writable (a read-only file is the user's sign to keep it).

    Raises:
        nothing: every problem is the returned sentence.
    """
    try:
        target, in_place = output_target(path)
    except OSError as e:
        return e.strerror or str(e)
    if in_place:
        return None if os.access(target, os.W_OK) else "it cannot be opened for writing (permission denied)"
    directory = os.path.dirname(os.path.abspath(target)) or "."
    if not os.path.isdir(directory):
        return f"no directory {directory}"
    if os.path.exists(target) and not os.access(target, os.W_OK):
        return "it is read-only"
    try:
        fd, probe = tempfile.mkstemp(prefix=".tritonkit-probe-", dir=directory)
    except OSError as e:
        return f"cannot write in its directory {directory}: {e.strerror or e}"
    os.close(fd)
    try:
        os.unlink(probe)
    except OSError:
        pass
    return None


def python_source(path: str) -> bool:
    """Whether ``path`` is an existing file of Python source that an output must not replace: a
    name ending ``.py``/``.pyi``/``.pyw`` (any case), or a file whose first line is a ``python``
    shebang (an executable script). Nothing is raised (an unreadable file is judged by its name)."""
    if not os.path.exists(path) or os.path.isdir(path):
        return False
    if path.lower().endswith(PYTHON_SUFFIXES):
        return True
    if not os.path.isfile(path):
        return False  # a device or a FIFO: reading it would consume or block
    return python_shebang(path)


def python_shebang(path: str) -> bool:
    """Whether the file at ``path`` starts with a ``#!`` line that names ``python`` (an executable
    Python script). Nothing is raised: an unreadable file is not one."""
    try:
        with open(path, "rb") as fh:
            first = fh.readline(256)
    except OSError:
        return False
    return first.startswith(b"#!") and b"python" in first


def file_mode(path: str) -> int:
    """The permission bits for a new version of ``path``: the old version's, else 0666 less the umask."""
    try:
        return os.stat(path).st_mode & 0o777
    except OSError:
        pass
    mask = os.umask(0o022)  # reading the umask means setting it; put it straight back
    os.umask(mask)
    return 0o666 & ~mask


def fsync_dir(directory: str) -> None:
    """Persist a rename in ``directory`` (POSIX; a no-op where directories cannot be opened)."""
    if not hasattr(os, "O_DIRECTORY"):
        return
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _write_in_place(path: str, write: Callable[[IO], None], mode: str, text: dict) -> None:
    """Open ``path`` (a device, a FIFO, a link through /proc) for writing without creating or
    replacing it, and ``write`` to it; a regular file reached that way is truncated first."""
    fd = os.open(path, os.O_WRONLY | getattr(os, "O_NOCTTY", 0))
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            os.ftruncate(fd, 0)
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, mode, **text) as fh:
        write(fh)
        fh.flush()


def _through_proc(path: str) -> bool:
    """Whether the symlink ``path`` resolves through ``/proc`` or ``/dev/fd`` (``/dev/stdout`` is a
    link to ``/proc/self/fd/1``): such a link names an open file, not a place to put a new one."""
    p = os.path.abspath(path)
    for _ in range(40):
        if p.startswith(("/proc/", "/dev/fd/")):
            return True
        try:
            link = os.readlink(p)
        except OSError:
            return False
        p = os.path.normpath(os.path.join(os.path.dirname(p), link))
    return False
