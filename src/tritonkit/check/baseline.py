"""Baselines: accept the findings a codebase has today, and fail only on new ones.

A baseline is the set of findings a team has accepted (``tritonkit check --update-baseline FILE``
writes one; so does any earlier ``--json`` output of ``tritonkit check`` or ``pytest --tritonkit
--tritonkit-json``). A finding of a later run is **known** when one in the baseline has the same
kind, kernel, source file, line and argument; its elements and program ids are not compared, since
they move with the sizes a test uses. Known findings are still reported (in the JSON and SARIF,
marked), but do not change the exit status; new ones do.

Source files are compared by their path relative to the directory tritonkit runs in (the
repository's root in CI), so a baseline written on one machine matches on another with the
checkout elsewhere; a file outside that directory is compared by its absolute path.
"""
from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

#: the ``format`` of the file :func:`write_baseline` writes
BASELINE_FORMAT = "tritonkit-baseline"
BASELINE_VERSION = 1

#: what identifies a finding across runs: (kind, kernel, file relative to the root, line, argument)
Key = Tuple[str, str, str, int, str]


class BaselineError(ValueError):
    """A baseline file that cannot be used: missing, not JSON, or not a file tritonkit wrote.
    The message says what to do."""


def relative_source(path: str, root: Optional[str] = None) -> str:
    """``path`` (a kernel's source file, as Python named it; a relative one is taken from ``root``)
    relative to ``root`` (default: the current directory) with ``/`` separators when it lies under
    ``root``; else its absolute path. An empty path stays empty."""
    if not path:
        return ""
    root = os.path.abspath(root or os.getcwd())
    full = os.path.normpath(os.path.join(root, path))
    try:
        rel = os.path.relpath(full, root)
    except ValueError:  # another drive (Windows)
        return full.replace(os.sep, "/")
    if rel == os.pardir or rel.startswith(os.pardir + os.sep):
        return full.replace(os.sep, "/")
    return rel.replace(os.sep, "/")


def finding_key(finding: Any, root: Optional[str] = None) -> Key:
    """The :data:`Key` of a :class:`~tritonkit.check.Finding` or of its JSON dict."""
    get = finding.get if isinstance(finding, Mapping) else (lambda name, default=None: getattr(finding, name, default))
    try:
        line = int(get("line", 0) or 0)
    except (TypeError, ValueError):
        line = 0
    return (str(get("kind", "") or ""), str(get("kernel", "") or ""),
            relative_source(str(get("file", "") or ""), root), line, str(get("arg", "") or ""))


def _findings_of(data: Any) -> Optional[List[Mapping]]:
    """The finding dicts of a baseline file, a ``tritonkit check --json`` document or a ``pytest
    --tritonkit-json`` one (``{"tests": {node id: {"findings": [...]}}}``); None for anything else."""
    if not isinstance(data, Mapping):
        return None
    if isinstance(data.get("findings"), list):
        return [f for f in data["findings"] if isinstance(f, Mapping)]
    tests = data.get("tests")
    if isinstance(tests, Mapping):
        out: List[Mapping] = []
        for entry in tests.values():
            if isinstance(entry, Mapping) and isinstance(entry.get("findings"), list):
                out += [f for f in entry["findings"] if isinstance(f, Mapping)]
        return out
    return None


@dataclasses.dataclass
class Baseline:
    """The accepted findings of a baseline file.

    Attributes:
        path: the file it was read from.
        keys: the accepted findings' :data:`Key` s.
        root: the directory source paths are taken relative to (absolute).
    """

    path: str
    keys: Set[Key]
    root: str

    @classmethod
    def load(cls, path: str, root: Optional[str] = None) -> "Baseline":
        """Read a baseline: a file :func:`write_baseline` wrote, or the ``--json`` output of
        ``tritonkit check`` or of ``pytest --tritonkit --tritonkit-json``.

        Raises:
            BaselineError: the file is missing or unreadable, is not JSON, or holds no findings list.
        """
        root = os.path.abspath(root or os.getcwd())
        try:
            with open(path, encoding="utf-8") as fh:
                data = json.load(fh)
        except FileNotFoundError:
            raise BaselineError(f"{path}: no such file; write one with "
                                f"tritonkit check --update-baseline {path} -- python SCRIPT.py") from None
        except (OSError, UnicodeDecodeError) as e:
            raise BaselineError(f"{path}: cannot be read: {e}") from None
        except ValueError as e:
            raise BaselineError(f"{path}: not JSON ({e}); give a file written by --update-baseline or --json") from None
        findings = _findings_of(data)
        if findings is None:
            raise BaselineError(f"{path}: not a baseline (no findings list); give a file written by "
                                "tritonkit check --update-baseline or --json, or pytest --tritonkit-json")
        return cls(path=path, keys={finding_key(f, root) for f in findings}, root=root)

    def known(self, finding: Any) -> bool:
        """Whether ``finding`` (a Finding or its dict) matches one of the baseline's."""
        return finding_key(finding, self.root) in self.keys

    def split(self, findings: Iterable[Any]) -> Tuple[List[Any], List[Any]]:
        """``(new, known)``: ``findings`` in their order, split by :meth:`known`."""
        new, known = [], []
        for f in findings:
            (known if self.known(f) else new).append(f)
        return new, known


def baseline_document(findings: Sequence[Any], root: Optional[str] = None) -> dict:
    """The JSON document of a baseline of ``findings`` (Findings or their dicts): each one's
    :data:`Key` fields and message, sorted and without duplicates."""
    rows = {}
    for f in findings:
        key = finding_key(f, root)
        message = f.get("message", "") if isinstance(f, Mapping) else getattr(f, "message", "")
        rows.setdefault(key, str(message or ""))
    return {"format": BASELINE_FORMAT, "version": BASELINE_VERSION,
            "paths": "relative to the directory tritonkit ran in",
            "findings": [{"kind": k[0], "kernel": k[1], "file": k[2], "line": k[3], "arg": k[4] or None,
                          "message": rows[k]} for k in sorted(rows)]}


def write_baseline(path: str, findings: Sequence[Any], root: Optional[str] = None) -> int:
    """Write a baseline of ``findings`` to ``path`` atomically (a temporary file renamed over it);
    returns how many distinct findings it holds.

    Raises:
        OSError: the file cannot be written; an existing one is left as it was.
    """
    from .findings import write_json
    doc = baseline_document(findings, root)
    write_json(path, doc)
    return len(doc["findings"])
