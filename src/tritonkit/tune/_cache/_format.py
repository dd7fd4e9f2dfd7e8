"""The tuning cache's file format: one JSON document per kernel identity, and its codec.

A document (``FORMAT_VERSION`` 1, every time in ``UNITS`` = ms)::

    {"format": 1, "units": "ms", "tritonkit": "0.1.0",
     "kernel": "matmul", "source_hash": "3f2a...", "triton": "3.6.0", "device": "NVIDIA H100 80GB HBM3",
     "created": 1700000000.0, "updated": 1700000000.0,
     "entries":   {"[\\"1024\\",\\"torch.float16\\"]": {"BM=64,BN=64,num_stages=3,num_warps=4": {trial dict}}},
     "winners":   {json key -> {"point_key": ..., "point": ..., "ms": ..., "time": ...}},
     "in_flight": {json key -> {point_key -> {"point": ..., "pid": ..., "host": ..., "started": ...,
                                              "proc_start": ...}}}}

A tuning key is written as the compact JSON list of its values as strings (:func:`key_str`); a
config as its :func:`~tritonkit.tune.point_key`; a trial as :meth:`Trial.to_dict` with non-finite
floats as null and the time it was recorded (:func:`trial_record`), read back with
:func:`cached_trial`. :func:`validate` says what is wrong with a document that cannot be used.
"""
from __future__ import annotations

import hashlib
import json
import math
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from .._result import STATUSES, Trial
from .._space import Point, point_key

#: the on-disk format this package reads and writes.
FORMAT_VERSION = 1
#: the unit of every time in the cache.
UNITS = "ms"

_HEADER_STRINGS = ("kernel", "source_hash", "triton", "device")


@dataclass(frozen=True)
class KernelId:
    """The identity a cache file is kept under; the caller computes each part.

    Attributes:
        name: the kernel's name (``fn.__name__``).
        source_hash: a hash of the kernel's source, e.g. :func:`source_hash` of it, so an edited
            kernel starts a fresh cache.
        triton_version: ``triton.__version__``.
        device: the device's name (``torch.cuda.get_device_name()``).

    Raises:
        ValueError: a part is not a non-empty string.
    """

    name: str
    source_hash: str
    triton_version: str
    device: str

    def __post_init__(self):
        for f in ("name", "source_hash", "triton_version", "device"):
            if not isinstance(getattr(self, f), str) or not getattr(self, f):
                raise ValueError(f"KernelId.{f} must be a non-empty string, got {getattr(self, f)!r}")


def source_hash(text: str) -> str:
    """A short hash of a kernel's source text.

    Args:
        text: the source (``inspect.getsource`` of the kernel, or Triton's ``fn.src``).

    Returns:
        The first 16 hex digits of the text's SHA-256.
    """
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def identity_digest(kernel_id: KernelId) -> str:
    """12 hex digits of a hash of every part of ``kernel_id`` (the cache file's name ends with it)."""
    ident = json.dumps([kernel_id.name, kernel_id.source_hash, kernel_id.triton_version, kernel_id.device])
    return hashlib.sha256(ident.encode("utf-8")).hexdigest()[:12]


@dataclass(frozen=True)
class CacheEntry:
    """A summary of one (kernel identity, tuning key) in the cache, for listings.

    Attributes:
        kernel / source_hash / triton / device: the kernel identity.
        key: the tuning key's values.
        configs: number of configs cached for this key (every status).
        failures: how many of them are not ``ok`` (failed, wrong, crashed, pruned).
        in_flight: configs marked as being timed now (or by a process that died, until recovered).
        winner: the winning config's :func:`point_key` (the stored winner where one was set, else
            the fastest ``ok`` config), or None when no config ran correctly.
        winner_ms: the winner's time in ms, or None.
        path: the cache file.
        trials: the cached trials, fastest ``ok`` first, then the others by status and config.
    """

    kernel: str
    source_hash: str
    triton: str
    device: str
    key: Tuple[str, ...]
    configs: int
    failures: int
    in_flight: int
    winner: Optional[str]
    winner_ms: Optional[float]
    path: str
    trials: Tuple[Trial, ...] = field(default=(), repr=False, compare=False)

    @property
    def kernel_id(self) -> KernelId:
        """The entry's kernel identity."""
        return KernelId(self.kernel, self.source_hash, self.triton, self.device)


# ------------------------------------------------------------------------------ the document


def key_str(key: Sequence[Any]) -> str:
    """The document's name of a tuning key: the compact JSON list of its values as strings.

    Raises:
        TypeError: ``key`` is a single string (or bytes), not a list of values.
    """
    if isinstance(key, (str, bytes)):
        raise TypeError(f"a tuning key is a list of values, not a single string: {key!r}")
    return json.dumps([str(v) for v in key], separators=(",", ":"))


def new_doc(kernel_id: KernelId) -> Dict[str, Any]:
    """An empty document for ``kernel_id`` (header, no entries), created now."""
    from ..._version import __version__
    now = time.time()
    return {"format": FORMAT_VERSION, "units": UNITS, "tritonkit": __version__, "kernel": kernel_id.name,
            "source_hash": kernel_id.source_hash, "triton": kernel_id.triton_version, "device": kernel_id.device,
            "created": now, "updated": now, "entries": {}, "winners": {}, "in_flight": {}}


def doc_kernel_id(doc: Mapping[str, Any]) -> KernelId:
    """The kernel identity in a (validated) document's header."""
    return KernelId(doc["kernel"], doc["source_hash"], doc["triton"], doc["device"])


def validate(doc: Any) -> Optional[str]:
    """What is wrong with a parsed cache file, or None where it can be used. Fills in the optional
    sections (``entries``, ``winners``, ``in_flight``) where they are missing.

    Args:
        doc: the parsed JSON.

    Returns:
        A sentence for the warning (``"it has format version 2 ..."``), or None.
    """
    if not isinstance(doc, dict):
        return f"it holds a JSON {type(doc).__name__}, not a tuning cache object"
    fmt = doc.get("format")
    if fmt != FORMAT_VERSION:
        if isinstance(fmt, int) and not isinstance(fmt, bool) and fmt > FORMAT_VERSION:
            return (f"it has format version {fmt} (written by a newer tritonkit?); this tritonkit reads format "
                    f"{FORMAT_VERSION}")
        return f"it has format version {fmt!r}; this tritonkit reads format {FORMAT_VERSION}"
    if doc.get("units") != UNITS:
        return f"its times are in {doc.get('units')!r}, not {UNITS!r}"
    for name in _HEADER_STRINGS:
        if not isinstance(doc.get(name), str) or not doc[name]:
            return f"its header has no valid {name!r}"
    for section in ("entries", "winners", "in_flight"):
        doc.setdefault(section, {})
        if not isinstance(doc[section], dict):
            return f"its {section!r} is not an object"
    for section in ("entries", "in_flight"):
        for k, bucket in doc[section].items():
            problem = _check_key(k)
            if problem or not isinstance(bucket, dict):
                return problem or f"{section}[{k}] is not an object"
            for pk, rec in bucket.items():
                if not isinstance(rec, dict) or not isinstance(rec.get("point"), dict):
                    return f"{section}[{k}][{pk}] is not a config record"
                if section == "entries":
                    if rec.get("status") not in STATUSES:
                        return f"{section}[{k}][{pk}] has an unknown status {rec.get('status')!r}"
                    ms = rec.get("ms")
                    # a time that is not a number ("1.5") would reach winner_key's min() next to
                    # floats and raise TypeError in ``tritonkit cache list``; tritonkit writes a number or null
                    if ms is not None and (isinstance(ms, bool) or not isinstance(ms, (int, float))):
                        return f"{section}[{k}][{pk}] has a time {ms!r} that is not a number"
                    try:
                        Trial.from_dict(rec)
                    except Exception as e:  # noqa: BLE001 - any field of the wrong type
                        return f"{section}[{k}][{pk}] is not a trial ({e})"
    for k, w in doc["winners"].items():
        if _check_key(k) or not isinstance(w, dict) or not isinstance(w.get("point_key"), str):
            return f"winners[{k}] is not a winner record"
    return None


def _check_key(k: str) -> Optional[str]:
    try:
        v = json.loads(k)
    except ValueError:
        v = None
    if not isinstance(v, list) or not all(isinstance(s, str) for s in v):
        return f"key {k!r} is not a JSON list of strings"
    return None


def json_safe(value: Any, what: str) -> Any:
    """``value`` with non-finite floats as None, for strict JSON.

    Args:
        value: plain data (dicts, lists, tuples, str, int, float, bool, None).
        what: what the value is, for the message (``"point"``, ``"trial"``).

    Raises:
        TypeError: JSON cannot hold a value in it (the message says which).
    """
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): json_safe(v, what) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v, what) for v in value]
    if value is None or isinstance(value, (str, int, bool)):
        return value
    raise TypeError(f"the tuning cache cannot store the {what} value {value!r} of type {type(value).__name__}: "
                    f"use plain ints, floats, strings, booleans or None")


def trial_record(trial: Trial) -> Dict[str, Any]:
    """A trial as the document stores it: :meth:`Trial.to_dict`, a confidence interval with a
    non-finite end dropped, non-finite floats as None, and ``recorded`` (Unix seconds, now).

    Raises:
        TypeError: a value of the trial cannot be written as JSON.
    """
    d = trial.to_dict()
    if d.get("ci_ms") and not all(isinstance(x, (int, float)) and math.isfinite(x) for x in d["ci_ms"]):
        d["ci_ms"] = None
    d = json_safe(d, "trial")
    d["recorded"] = time.time()
    return d


def cached_trial(rec: Mapping[str, Any]) -> Trial:
    """The :class:`Trial` of a stored record, with ``source="cache"``."""
    t = Trial.from_dict(dict(rec))
    t.source = "cache"
    return t


def winner_record(point: Point, ms: Optional[float]) -> Dict[str, Any]:
    """A stored winner: the config's key and values, its time in ms (None where unknown or not
    finite) and when it was chosen (Unix seconds, now).

    Raises:
        TypeError: a value of the point cannot be written as JSON.
    """
    return {"point_key": point_key(point), "point": json_safe(dict(point), "point"),
            "ms": ms if ms is not None and math.isfinite(ms) else None, "time": time.time()}


def drop_empty(doc: Dict[str, Any], k: str) -> None:
    """Remove key ``k``'s sections (entries, in-flight marks) where they hold nothing."""
    for section in ("entries", "in_flight"):
        if k in doc[section] and not doc[section][k]:
            del doc[section][k]


def winner_key(doc: Mapping[str, Any], k: str) -> Optional[str]:
    """The winning config of key ``k``: the stored winner where it is cached as ``ok``, else the
    fastest ``ok`` config; None when no config ran correctly."""
    bucket = doc["entries"].get(k, {})
    stored = doc["winners"].get(k)
    if stored and bucket.get(stored["point_key"], {}).get("status") == "ok":
        return stored["point_key"]
    ok = [(rec["ms"], pk) for pk, rec in bucket.items() if rec.get("status") == "ok" and rec.get("ms") is not None]
    return min(ok)[1] if ok else None


def summaries(doc: Mapping[str, Any], path: str) -> List[CacheEntry]:
    """One :class:`CacheEntry` per tuning key of a document (with its trials, fastest ``ok``
    first), including keys that only have in-flight marks."""
    out = []
    keys = list(doc["entries"]) + [k for k in doc["in_flight"] if k not in doc["entries"]]
    for k in keys:
        bucket = doc["entries"].get(k, {})
        trials = [cached_trial(rec) for rec in bucket.values()]
        trials.sort(key=lambda t: (not t.ok, t.ms if t.ok else 0.0, STATUSES.index(t.status), t.key))
        win = winner_key(doc, k)
        out.append(CacheEntry(kernel=doc["kernel"], source_hash=doc["source_hash"], triton=doc["triton"],
                              device=doc["device"], key=tuple(json.loads(k)), configs=len(bucket),
                              failures=sum(1 for t in trials if t.status != "ok"),
                              in_flight=len(doc["in_flight"].get(k, {})), winner=win,
                              winner_ms=bucket[win].get("ms") if win else None, path=path, trials=tuple(trials)))
    return out
