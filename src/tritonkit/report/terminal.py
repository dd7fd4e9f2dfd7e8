"""Terminal rendering of check results with rich, in the spirit of a pytest failure.

Each finding: a rule naming the kind and kernel, the location, the source around the line with
the line marked, then the facts (argument, access, programs, elements, configs) and a hint.
Then a summary of the run. Renderers take plain data (:class:`~tritonkit.check.Finding` and the
session's ``summary()``/``kernels``) and never compute anything themselves.
"""
from __future__ import annotations

import linecache
from typing import Iterable, List, Optional

from rich.console import Console, Group, RenderableType
from rich.padding import Padding
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

from ..check.findings import process_label, program_label, short_path
from .fit import Column, FitTable

__all__ = ["print_report", "render_finding", "render_summary", "findings_text", "short_path"]

_CONTEXT_BEFORE = 3
_CONTEXT_AFTER = 1

#: control characters (C0 but tab and newline, DEL, C1) shown as escapes: a kernel's assert message,
#: a file name or a source line must not move the cursor, clear lines or retitle the terminal
_CONTROLS = {c: f"\\x{c:02x}" for c in (*range(0x00, 0x09), *range(0x0b, 0x20), 0x7f, *range(0x80, 0xa0))}
#: lone surrogates (a file name's undecodable byte held under surrogateescape, a "\ud800" in a
#: kernel's assert message) shown as \uXXXX escapes: written raw, they make a UTF-8 stdout raise
#: UnicodeEncodeError in the middle of the report
_CONTROLS.update({c: f"\\u{c:04x}" for c in range(0xD800, 0xE000)})


def safe(text) -> str:
    """``text`` (any object, as ``str``) with its control characters written as ``\\xNN`` escapes,
    so that printing it cannot send the terminal a command (ESC sequences), and its lone
    surrogates as ``\\uXXXX`` escapes, so that printing it to a UTF-8 stream cannot fail."""
    return str(text).translate(_CONTROLS)


def _source_block(file: str, line: int) -> Text:
    text = Text()
    try:
        lines = linecache.getlines(file)
    except (OSError, ValueError):
        # a path the OS cannot take (a NUL byte, a lone surrogate that no file name decodes to:
        # data read back from JSON) has no source to show, rather than no report at all
        lines = []
    if not lines or line <= 0:
        return text
    lo, hi = max(1, line - _CONTEXT_BEFORE), min(len(lines), line + _CONTEXT_AFTER)
    width = len(str(hi))
    for n in range(lo, hi + 1):
        src = safe(lines[n - 1].rstrip("\n"))
        if n == line:
            text.append(f">{n:>{width}}  ", style="bold red")
            text.append(src + "\n", style="bold")
        else:
            text.append(f" {n:>{width}}  ", style="dim")
            text.append(src + "\n")
    return text




def _fact(table: Table, name: str, value, style: Optional[str] = None) -> None:
    if value in (None, "", []):
        return
    table.add_row(name, value if isinstance(value, Text) else Text(safe(value), style=style or ""))


def render_finding(f) -> RenderableType:
    """A renderable for one :class:`~tritonkit.check.Finding`: the kind and kernel, the location and
    the source around it with the line marked, the message, the facts (the generic ones, then those
    its kind declared, ``f.facts``), the process that made it where not the checked program's own,
    configs and the hint."""
    header = Rule(Text(safe(f" {f.kind}: {f.kernel} "), style="bold red"), style="red", align="left")
    loc = Text(safe(f"{short_path(f.file)}:{f.line}"), style="bold cyan")
    if len(f.call_stack) > 1:
        chain = " → ".join(fr["function"] for fr in f.call_stack)
        loc.append(safe(f"  ({chain})"), style="dim")
    facts = Table.grid(padding=(0, 2))
    facts.add_column(style="dim", no_wrap=True)
    facts.add_column()
    if f.arg:
        t = f.tensor or {}
        shape = "x".join(str(s) for s in t.get("shape", [])) or "scalar"
        _fact(facts, "argument", f"{f.arg}: {t.get('dtype', '?')}[{shape}], strides "
                                 f"({', '.join(str(s) for s in t.get('strides', []))})")
    if f.access:
        _fact(facts, "access", f"{f.access}, " + ("masked" if f.masked else "no mask"))
    if f.program_ids:
        progs = ", ".join(program_label(p) for p in f.program_ids)
        more = f"  … {f.num_programs} programs in all" if f.num_programs > len(f.program_ids) else \
            f"  ({f.num_programs} program{'s' if f.num_programs != 1 else ''})"
        _fact(facts, "programs", progs + more)
    if f.elements:
        n = f" ({f.num_elements} element{'s' if f.num_elements != 1 else ''})" if f.num_elements else ""
        _fact(facts, "elements", f.elements + n)
    for label, text in f.facts:
        _fact(facts, label, text)
    if f.process:
        _fact(facts, "process", process_label(f.process))
    if f.configs:
        _fact(facts, "configs", "\n".join(f.configs))
    _fact(facts, "hint", f.hint, style="yellow")
    message = Text("E   ", style="bold red")
    message.append(safe(f.message), style="bold red")
    return Group(header, loc, Text(), _source_block(f.file, f.line), message, Padding(facts, (0, 0, 0, 4)), Text())


_SHOWN_FALLBACKS = 5


def render_summary(summary: dict, kernels: Iterable, findings: List) -> RenderableType:
    """The end-of-run summary: per kernel launches/programs/findings/time, then totals by kind. The
    table has one line per kernel at any width of 40 columns or more: numbers whole, a long kernel
    name cut in the middle (:class:`~tritonkit.report.fit.FitTable`)."""
    table = FitTable(Column("kernel", shorten=True, key=True, min_width=16),
                     *(Column(name, justify="right") for name in ("launches", "programs", "configs", "findings",
                                                                  "seconds")),
                     title=None, show_edge=False, header_style="bold")
    for k in kernels:
        table.add_row(Text(safe(k.name)), str(k.launches), str(k.programs), str(len(k.configs)) if k.configs else "-",
                      Text(str(k.findings), style="bold red" if k.findings else "green"), f"{k.seconds:.2f}")
    by_kind = summary.get("findings_by_kind", {})
    total = sum(by_kind.values())
    line = Text()
    if total:
        line.append(f"{total} finding{'s' if total != 1 else ''}", style="bold red")
        line.append(" (" + ", ".join(f"{n} {k}" for k, n in by_kind.items()) + ")")
    else:
        line.append("no findings", style="bold green")
    if summary.get("gpu"):  # no interpreter: no accesses counted, no interpreter time
        line.append(f" in {summary['launches']} launch{'es' if summary['launches'] != 1 else ''} on the GPU")
    else:
        line.append(f" in {summary['launches']} launch{'es' if summary['launches'] != 1 else ''}, "
                    f"{summary['programs']} programs, {summary['accesses']} accesses "
                    f"({summary['lanes']} lanes) checked in {summary['seconds']:.2f} s")
    parts: List[RenderableType] = [Rule("tritonkit check summary"), table, line]
    if summary.get("checks") is not None:
        parts.append(Text("checks: " + (", ".join(summary["checks"]) or "none (--no-checks)"), style="dim"))
    if summary.get("engine") is not None:
        n, batched = summary["launches"], summary.get("batched_launches", 0)
        parts.append(Text(f"engine: {summary['engine']}; {batched} of {n} launch{'es' if n != 1 else ''} "
                          "ran fully batched", style="dim"))
    if summary.get("gpu_launches"):
        n = summary["gpu_launches"]
        parts.append(Text(f"{n} launch{'es' if n != 1 else ''} larger than --gpu-above checked on the GPU instead: "
                          "out-of-bounds accesses and int32 overflow only", style="yellow"))
    gpu = summary.get("gpu")
    if gpu and gpu.get("mode") == "sanitizer":
        shown = gpu.get("memcheck_errors_shown", 0)
        more = f" ({shown} of them read)" if shown != gpu.get("memcheck_errors", 0) else ""
        parts.append(Text(safe(f"on the GPU: compute-sanitizer memcheck, {gpu.get('memcheck_errors', 0)} error "
                               f"report(s){more}; {gpu.get('races', '')}"), style="dim"))
    elif gpu:
        parts.append(Text(safe(f"on the GPU: instrumented kernels; {gpu.get('races', '')}"), style="dim"))
        for line in gpu.get("unchecked") or []:
            parts.append(Text(safe(f"not checked: {line}"), style="yellow"))
    fallbacks = summary.get("fallbacks") or []
    for fb in fallbacks[:_SHOWN_FALLBACKS]:
        grid = "x".join(str(g) for g in fb["grid"])
        parts.append(Text(safe(f"one program at a time: {fb['kernel']} (grid {grid}, {fb['engine']}): "
                               f"{fb['reason']}"), style="dim"))
    if len(fallbacks) > _SHOWN_FALLBACKS:
        parts.append(Text(f"... and {len(fallbacks) - _SHOWN_FALLBACKS} more launches ran one program at a time "
                          "(see the JSON summary)", style="dim"))
    if summary.get("empty_grids"):
        parts.append(Text(f"note: {summary['empty_grids']} launch(es) had a grid of 0 programs; "
                          "nothing ran in them", style="yellow"))
    if summary.get("captured"):
        parts.append(Text(f"note: {summary['captured']} launch(es) made while a CUDA graph was being captured ran "
                          "natively, unchecked (the graph runs them at replay)", style="yellow"))
    for u in summary.get("unfinished") or []:
        grid = "x".join(str(g) for g in u["grid"])
        total = 1
        for g in u["grid"]:
            total *= int(g)
        parts.append(Text(safe(f"unfinished: {u['kernel']} (grid {grid}): the process ended in the middle of this "
                               f"launch; {u['programs']:,} of {total:,} programs checked in {u['seconds']:.0f} s"),
                          style="bold yellow"))
    if summary.get("processes", 1) > 1:
        parts.append(Text(f"checked in {summary['processes']} processes (the program and its Python child "
                          "processes)", style="dim"))
    if summary.get("aborted"):
        parts.append(Text(safe(f"stopped: {summary['aborted']}"), style="bold yellow"))
    if summary.get("error"):
        parts.append(Text(safe(f"error: {summary['error']}: checking stopped there; the findings made before it are "
                               "reported"), style="bold red"))
    if summary.get("terminated"):
        parts.append(Text(safe(f"terminated ({summary['terminated']}): the report has what was checked until then"),
                          style="bold yellow"))
    elif summary.get("interrupted"):
        parts.append(Text("interrupted (Ctrl-C): the report has what was checked until then", style="bold yellow"))
    for note in summary.get("incomplete") or []:
        parts.append(Text(safe(f"may be incomplete: {note}"), style="bold yellow"))
    return Group(*parts)


def print_report(report, console: Optional[Console] = None) -> None:
    """Print every finding of a :class:`~tritonkit.check.CheckReport` (a session's
    :meth:`~tritonkit.check.CheckSession.report`), then its summary."""
    console = console or Console(stderr=False)
    for f in report.findings:
        console.print(render_finding(f))
    console.print(render_summary(report.summary, report.kernels, report.findings))


def findings_text(findings: List, width: int = 100) -> str:
    """The findings as plain text (no colour), as :func:`render_finding` draws them, ``width``
    columns wide: for reports that are text, like a pytest failure's."""
    import io
    buf = io.StringIO()
    console = Console(file=buf, width=max(60, width), color_system=None, force_terminal=False, highlight=False)
    for f in findings:
        console.print(render_finding(f))
    return "\n".join(line.rstrip() for line in buf.getvalue().splitlines()) + "\n"
