"""Small file helpers shared by the parts: writes that never leave a half-written file."""
from __future__ import annotations

import os
import tempfile
from typing import IO, Callable


def atomic_write(path: str, write: Callable[[IO], None], binary: bool = False) -> None:
    """Call ``write(fh)`` on a temporary file in ``path``'s directory, then ``os.replace`` it onto
    ``path``, so a crash or a full disk leaves either the old file or the new one, never a mix.

    Raises:
        OSError: the directory cannot be written (the temporary file is removed; an existing
            ``path`` is left as it was); and whatever ``write`` raises, after the same clean-up.
    """
    directory = os.path.dirname(os.path.abspath(path)) or "."
    fd, tmp = tempfile.mkstemp(prefix=".tritonkit-", suffix=os.path.splitext(path)[1] + ".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb" if binary else "w", **({} if binary else {"encoding": "utf-8"})) as fh:
            write(fh)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def atomic_write_text(path: str, text: str) -> None:
    """:func:`atomic_write` of a string."""
    atomic_write(path, lambda fh: fh.write(text))
