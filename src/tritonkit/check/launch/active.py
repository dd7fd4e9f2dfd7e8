"""The session that is checking launches now: at most one per process (sessions do not nest)."""
from __future__ import annotations

import threading

_active = None
_lock = threading.Lock()


def active_session():
    """The :class:`~tritonkit.check.CheckSession` checking launches now, or None."""
    return _active


def activate(session) -> None:
    """Make ``session`` the active one.

    Raises:
        RuntimeError: a session is already active (sessions do not nest).
    """
    global _active
    with _lock:
        if _active is not None:
            raise RuntimeError("a tritonkit check session is already active: sessions do not nest")
        _active = session


def deactivate() -> None:
    """No session is active any more."""
    global _active
    with _lock:
        _active = None
