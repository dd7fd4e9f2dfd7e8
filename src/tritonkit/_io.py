"""Small file helpers shared by the parts: writes that never leave a half-written file."""
from __future__ import annotations

import os
import tempfile
from typing import IO, Callable


def atomic_write(path: str, write: Callable[[IO], None], binary: bool = False, durable: bool = False) -> None:
    """Call ``write(fh)`` on a temporary file in ``path``'s directory, then ``os.replace`` it onto
    ``path``, so a crash or a full disk leaves either the old file or the new one, never a mix.

    The new file gets the old one's permission bits, or for a new file the usual ones (0666 less
    the umask), not the 0600 of a temporary file.

    Args:
        path: the file to write.
        write: writes the whole content to the open file it is given.
        binary: open the temporary file in binary mode (else text, UTF-8).
        durable: also fsync the file and its directory, so the write survives a crash of the
            machine (a crashed process never leaves a half-written file either way).

    Raises:
        OSError: the directory cannot be written (the temporary file is removed; an existing
            ``path`` is left as it was); and whatever ``write`` raises, after the same clean-up.
    """
    directory = os.path.dirname(os.path.abspath(path)) or "."
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".tmp-", dir=directory)
    try:
        # text: UTF-8; a character it cannot encode (a file name's undecodable byte, held as a lone
        # surrogate) is written as a \udcXX escape rather than failing the whole write
        with os.fdopen(fd, "wb" if binary else "w",
                       **({} if binary else {"encoding": "utf-8", "errors": "backslashreplace"})) as fh:
            if hasattr(os, "fchmod"):
                os.fchmod(fh.fileno(), file_mode(path))
            write(fh)
            fh.flush()
            if durable:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
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
