"""The page's findings: one card per finding of the check's report (message, source around its
line, facts), the count by kind and the check's summary.

Reads a :class:`~tritonkit.check.CheckReport` (``CheckReport.from_dict`` of what ``tritonkit check
--json`` wrote: a field that was missing or malformed has its default). A kind's colour comes from
its declaration (:attr:`~tritonkit.check.checks.FindingKind.color`); nothing here names a kind.
"""
from __future__ import annotations

import os
import re
from typing import Any, Dict, List, Mapping, Tuple

from ...check import CheckReport, Finding
from ...check.checks import FINDING_KINDS, kind_of
from ...check.findings import process_label, short_path
from ._format import brief_json, css, programs_text
from ._view import MAX_FINDINGS, Fact, FindingView, Page, SourceLine

_SOURCE_CONTEXT = 4  # source lines shown before and after a finding's line
_MAX_EXAMPLES = 3  # examples of a finding shown (the JSON has them all)
_SUMMARY = (("launches", "launches"), ("programs", "programs"), ("seconds", "seconds interpreted"),
            ("engine", "engine"), ("checks", "checks"), ("aborted", "aborted"))


def kind_class(kind: str) -> str:
    """The CSS class suffix of a finding kind: the kind itself where the check's registry declares
    it (:data:`~tritonkit.check.checks.FINDING_KINDS`), else ``other``."""
    return css(kind, FINDING_KINDS, "other")


def kind_colors() -> List[Tuple[str, str]]:
    """(CSS class suffix, ``#rrggbb``) of every declared finding kind: the colour its kind declares
    for the page (:attr:`~tritonkit.check.checks.FindingKind.color`)."""
    return [(k, kind_of(k).color) for k in FINDING_KINDS
            if re.fullmatch(r"[a-z0-9_]+", k) and re.fullmatch(r"#[0-9a-fA-F]{6}", kind_of(k).color)]


def findings_section(page: Page, check: CheckReport) -> None:
    """Fill ``page``'s findings (at most :data:`MAX_FINDINGS` in full, the rest one line each), their
    count by kind and kernel, and the check's summary facts, from the check's report."""
    findings = check.findings
    counts: Dict[str, int] = {}
    for f in findings:
        kind = f.kind or "unknown"
        counts[kind] = counts.get(kind, 0) + 1
    page.kinds = [(k, n, kind_class(k)) for k, n in sorted(counts.items(), key=lambda x: -x[1])]
    page.findings_total = len(findings)
    page.findings_kernels = len({f.kernel for f in findings})
    views = [_finding_view(f, i) for i, f in enumerate(findings)]
    page.findings, page.findings_more = views[:MAX_FINDINGS], views[MAX_FINDINGS:]
    summary = check.summary
    for key, label in _SUMMARY:
        v = summary.get(key)
        if v in (None, "", []):
            continue
        if isinstance(v, float):
            v = f"{v:.3g}"
        elif isinstance(v, int):
            v = f"{v:,}"
        elif isinstance(v, (list, tuple)):
            v = ", ".join(str(x) for x in v)
        page.check_summary.append((label, str(v)))


def _source(f: Finding) -> Tuple[List[SourceLine], str]:
    """The source around a finding's line, read from its file; the finding's own line where not."""
    path, line = f.file, f.line
    if path and line > 0:
        for candidate in (path, os.path.abspath(path)):
            try:
                with open(candidate, encoding="utf-8", errors="replace") as fh:
                    lines = fh.read().splitlines()
            except (OSError, ValueError):  # ValueError: a path no file can have (a NUL byte, a lone
                continue                    # surrogate no file name decodes to), read back from JSON
            if line <= len(lines):
                lo, hi = max(1, line - _SOURCE_CONTEXT), min(len(lines), line + _SOURCE_CONTEXT)
                return [SourceLine(n, lines[n - 1], n == line) for n in range(lo, hi + 1)], ""
    if not f.source:
        return [], "no source: the file could not be read and the finding carries no source line"
    return [SourceLine(line, f.source, True)], "the file could not be read: the finding's own line"


def _finding_view(f: Finding, index: int) -> FindingView:
    kind = f.kind or "unknown"
    file = f.file or "?"
    location = f"{short_path(file)}:{f.line}" if f.line > 0 else short_path(file)
    facts: List[Fact] = []

    def add(name: str, value: Any, code: bool = False, block: bool = False) -> None:
        if value in (None, "", [], {}):
            return
        facts.append(Fact(name, str(value), code, block))

    stack = [s for s in f.call_stack if isinstance(s, Mapping)]
    if len(stack) > 1:
        add("call stack", " → ".join(f"{s.get('function', '?')} ({short_path(str(s.get('file', '?')))}:"
                                     f"{s.get('line', '?')})" for s in stack), code=True)
    tensor = f.tensor
    if f.arg or tensor:
        desc = f.arg or str(tensor.get("name") or "?")
        if tensor:
            desc += f": {tensor.get('dtype', '?')} {list(tensor.get('shape') or [])}"
            if tensor.get("strides") is not None:
                desc += f", strides {list(tensor.get('strides'))}"
        add("argument", desc, code=True)
    if f.access:
        add("access", f"{f.access}, " + ("masked" if f.masked else "unmasked"))
    lanes = f"{f.count:,} lanes"
    if f.occurrences:
        lanes += f" in {f.occurrences:,} accesses"
    if f.launches:
        lanes += f", {f.launches:,} launch{'es' if f.launches != 1 else ''}"
    add("lanes", lanes)
    add("programs", programs_text(f.program_ids, f.num_programs), code=True)
    if f.elements:
        add("elements", f.elements + (f" ({f.num_elements:,} distinct)" if f.num_elements else ""), code=True)
    reason = f.reason
    if len(f.reasons) > 1:
        reason += " (" + ", ".join(f"{k}: {v:,} lanes" if isinstance(v, int) else f"{k}: {v}"
                                   for k, v in f.reasons.items()) + ")"
    add("reason", reason)
    other = f.other
    if other:
        where = f"{short_path(str(other.get('file', '?')))}:{other.get('line', '?')}"
        text = f"{other.get('access', '?')} at {where}"
        if other.get("function"):
            text += f" in {other['function']}"
        if other.get("program_ids"):
            text += f", programs {programs_text(other.get('program_ids'))}"
        if other.get("source"):
            text += f"\n    {other['source']}"
        add("other side", text, block=True)
    if f.process:
        add("process", process_label(f.process), code=True)
    add("configs", ", ".join(str(c) for c in f.configs), code=True)
    examples = f.examples[:_MAX_EXAMPLES]
    if examples:
        text = "\n".join(brief_json(e) for e in examples)
        if len(f.examples) > len(examples):
            text += f"\n... {len(f.examples) - len(examples)} more in the check's JSON"
        add("examples", text, block=True)
    source, note = _source(f)
    return FindingView(anchor=f"finding-{index}", index=index, kind=kind,
                       kind_css=kind_class(kind), message=f.message or kind,
                       kernel=f.kernel or "?", location=location, source=source, source_note=note,
                       facts=facts, hint=f.hint)
