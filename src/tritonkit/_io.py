"""Small file helpers shared by the parts: writes that never leave a half-written file."""
from __future__ import annotations

import os
import tempfile


def atomic_write_text(path: str, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same directory and ``os.replace``,
    so a crash or a full disk leaves either the old file or the new one, never a mix.

    Raises:
        OSError: the directory cannot be written (the temporary file is removed; an existing
            ``path`` is left as it was).
    """
    directory = os.path.dirname(os.path.abspath(path)) or "."
    fd, tmp = tempfile.mkstemp(prefix=".tritonkit-", suffix=os.path.splitext(path)[1], dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
