"""Findings as SARIF 2.1.0 (the OASIS Static Analysis Results Interchange Format), for GitHub code
scanning and other CI viewers that show a result on the pull request's line.

One ``run`` with tritonkit as its tool: a rule per finding kind (its id is the kind, as in
``--checks``), and a result per finding with the rule, the level (``error`` for a memory or
correctness finding, ``warning`` for a launch that could not be checked), the message and the hint,
the source location (relative to ``%SRCROOT%``, the directory tritonkit ran in, where it lies under
it), the kernel, argument, elements and program ids as properties, and a stable fingerprint (kind,
kernel, file, line, argument: what a baseline matches). With a baseline, each result's
``baselineState`` is ``new`` or ``unchanged``.
"""
from __future__ import annotations

import hashlib
import os
from typing import Any, Dict, List, Optional, Sequence

from .._version import __version__

SARIF_VERSION = "2.1.0"
#: the schema's address (OASIS SARIF 2.1.0 errata 01, the version GitHub code scanning reads)
SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
#: ``%SRCROOT%``: the directory the run's relative paths start from
SRCROOT = "SRCROOT"


def _rules(kinds: Sequence[str]) -> List[Dict[str, Any]]:
    from ..check.checks import kind_of
    rules = []
    for kind in kinds:
        cls = kind_of(kind)
        title = getattr(cls, "title", "") or kind.replace("_", " ")
        rules.append({"id": kind, "name": "".join(w.capitalize() for w in kind.split("_")),
                      "shortDescription": {"text": title},
                      "fullDescription": {"text": f"tritonkit check: {title} ({kind})"},
                      "defaultConfiguration": {"level": cls.level}})
    return rules


def _uri(path: str, root: str) -> Dict[str, Any]:
    """An artifactLocation: relative to %SRCROOT% when ``path`` lies under ``root``, else a file URI."""
    from ..check.baseline import relative_source
    rel = relative_source(path, root)
    if rel and not os.path.isabs(rel):
        return {"uri": rel, "uriBaseId": SRCROOT}
    from pathlib import Path
    try:
        return {"uri": Path(path).absolute().as_uri()}
    except ValueError:
        return {"uri": rel or "unknown"}


def _fingerprint(key) -> str:
    return hashlib.sha256("\x1f".join(str(k) for k in key).encode("utf-8", "surrogatepass")).hexdigest()[:32]


def to_sarif(findings: Sequence[Any], root: Optional[str] = None, baseline=None,
             command: Optional[Sequence[str]] = None) -> Dict[str, Any]:
    """A SARIF 2.1.0 log (a JSON-ready dict) of ``findings``.

    Args:
        findings: :class:`~tritonkit.check.Finding` objects (a report's ``findings``).
        root: the directory source paths are made relative to (default: the current directory);
            it becomes the run's ``%SRCROOT%``.
        baseline: a :class:`~tritonkit.check.baseline.Baseline`: each result's ``baselineState``
            says whether it is ``new`` or ``unchanged``; None: no baseline state.
        command: the checked command line, recorded in the run's invocation.
    """
    from ..check.baseline import finding_key
    from ..check.checks import kind_of
    root = os.path.abspath(root or os.getcwd())
    kinds: List[str] = []
    for f in findings:
        if f.kind not in kinds:
            kinds.append(f.kind)
    results = []
    for f in findings:
        key = finding_key(f, root)
        text = f.message or f.kind
        if f.elements:
            text = f"{text} ({f.elements})"
        if f.hint:
            text = f"{text}. Hint: {f.hint}"
        result: Dict[str, Any] = {
            "ruleId": f.kind, "ruleIndex": kinds.index(f.kind),
            "level": kind_of(f.kind).level,
            "message": {"text": text},
            "locations": [{"physicalLocation": {"artifactLocation": _uri(f.file, root),
                                                "region": {"startLine": max(1, int(f.line or 1)),
                                                           **({"snippet": {"text": f.source}} if f.source else {})}},
                           "logicalLocations": [{"name": f.kernel, "kind": "function"}]}],
            "partialFingerprints": {"tritonkitFinding/v1": _fingerprint(key)},
            "properties": {"kernel": f.kernel, "arg": f.arg, "access": f.access, "reason": f.reason or None,
                           "elements": f.elements or None, "programIds": list(f.program_ids),
                           "numPrograms": f.num_programs, "lanes": f.count, "launches": f.launches},
        }
        if baseline is not None:
            result["baselineState"] = "unchanged" if baseline.known(f) else "new"
        results.append(result)
    run: Dict[str, Any] = {
        "tool": {"driver": {"name": "tritonkit", "version": __version__, "semanticVersion": __version__,
                            "rules": _rules(kinds)}},
        "originalUriBaseIds": {SRCROOT: {"uri": _dir_uri(root)}},
        "results": results,
        "columnKind": "unicodeCodePoints",
    }
    if command:
        run["invocations"] = [{"commandLine": " ".join(str(c) for c in command), "executionSuccessful": True}]
    return {"$schema": SARIF_SCHEMA, "version": SARIF_VERSION, "runs": [run]}


def _dir_uri(root: str) -> str:
    from pathlib import Path
    uri = Path(root).absolute().as_uri()
    return uri if uri.endswith("/") else uri + "/"


def write_sarif(path: str, findings: Sequence[Any], root: Optional[str] = None, baseline=None,
                command: Optional[Sequence[str]] = None) -> None:
    """Write :func:`to_sarif` of ``findings`` to ``path`` atomically (a temporary file renamed over it).

    Raises:
        OSError: the file cannot be written; an existing one is left as it was.
    """
    from ..check.findings import write_json
    write_json(path, to_sarif(findings, root, baseline, command))
