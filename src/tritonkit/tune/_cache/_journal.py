"""The crash journal: which configs are being timed right now, so that a config that takes its
process down is recorded as ``crashed`` and never tried again.

Before timing a config, a tuner writes an in-flight mark (:func:`in_flight_marker`: the config, its
pid, host and start time) into the cache file; once the config is decided the mark is cleared.
A mark left by a process that is gone (:func:`alive`) is a crash: :func:`recover_dead` turns it
into a ``crashed`` trial. Marks of live processes, and of other hosts sharing the directory, are
left alone.
"""
from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Tuple

from .._result import Trial
from .._space import Point
from ._format import KernelId, doc_kernel_id, drop_empty, json_safe, trial_record


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


def this_host() -> str:
    """The host name marks are made under (``socket.gethostname()``)."""
    return socket.gethostname()


def in_flight_marker(point: Point) -> Dict[str, Any]:
    """The mark this process leaves while it times ``point``: the config, pid, host, start time
    (Unix seconds) and the process's start time (clock ticks since boot, where ``/proc`` has it).

    Raises:
        TypeError: a value of the point cannot be written as JSON.
    """
    pid = os.getpid()
    return {"point": json_safe(dict(point), "point"), "pid": pid, "host": this_host(),
            "started": time.time(), "proc_start": proc_start_time(pid)}


def dead_markers(doc: Mapping[str, Any], host: str) -> List[Tuple[str, str, Dict[str, Any]]]:
    """The in-flight marks of a document made on ``host`` by processes that are gone.

    Returns:
        ``(key string, point key, mark)`` per dead mark.
    """
    out = []
    for k, bucket in doc["in_flight"].items():
        for pk, marker in bucket.items():
            if marker.get("host", host) != host:
                continue
            if not alive(marker.get("pid"), marker.get("proc_start")):
                out.append((k, pk, marker))
    return out


def recover_dead(doc: Dict[str, Any], host: str) -> List[RecoveredTrial]:
    """Replace, in ``doc``, every dead mark of ``host`` (:func:`dead_markers`) by a ``crashed`` trial.

    Returns:
        The recovered trials (empty where there was nothing to recover: the document is unchanged).
    """
    found: List[RecoveredTrial] = []
    kid = doc_kernel_id(doc)
    for k, pk, marker in dead_markers(doc, host):
        pid = marker.get("pid")
        trial = Trial(point=dict(marker.get("point") or {}), status="crashed",
                      error=f"the process died while this config ran (pid {pid})")
        doc["entries"].setdefault(k, {})[pk] = trial_record(trial)
        del doc["in_flight"][k][pk]
        drop_empty(doc, k)
        found.append(RecoveredTrial(kid, json.loads(k), trial, pid))
    return found


def alive(pid: Any, proc_start: Any = None) -> bool:
    """Whether process ``pid`` still runs (and is the one that made the mark).

    Args:
        pid: the mark's pid (anything but a positive int: no process can end the mark, so False).
        proc_start: the mark's process start time (clock ticks), or None where unknown; a
            process of that pid started at another time reused the pid.
    """
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


def proc_start_time(pid: int) -> Optional[int]:
    """When process ``pid`` started, in clock ticks since boot (``/proc/<pid>/stat``), or None."""
    state = _proc_stat(pid)
    return state[1] if state else None
