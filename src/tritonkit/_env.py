"""Reading tritonkit's own environment variables."""
from __future__ import annotations

import os

_OFF = ("0", "false", "no", "off")


def switched_off(name: str) -> bool:
    """Whether the environment variable ``name`` turns something off: ``0``, ``false``, ``no`` or
    ``off`` (any case, surrounding spaces ignored). Unset or any other value: on."""
    return os.environ.get(name, "").strip().lower() in _OFF
