"""The one self-contained HTML page of ``tritonkit doctor``: findings, memory-access heatmaps, the
roofline and the tuning landscape.

Data first, then render: :func:`build_page` turns the doctor's report (a plain dict, every part
optional, see :func:`render_report`) into a :class:`Page` of plain view data, with every number
already formatted and every chart already drawn as a ``data:`` URI; the Jinja2 template
``templates/doctor.html.j2`` only lays that out. :func:`render_report` does both and
:func:`write_report` writes the page atomically.

The page needs nothing else: CSS is inline, charts are ``<img>`` elements with ``data:`` URIs (SVG
from matplotlib for the roofline, time breakdown and tuning landscapes, PNG for the heatmaps), it
uses no script, and no font, stylesheet or image comes from the network. Everything taken from the
report (names, paths, source lines, messages, config keys) goes through Jinja2's autoescaping: none
of it is ever marked safe, so a kernel named ``<script>`` stays text.
"""
from __future__ import annotations

import base64
import dataclasses
import io
import json
import math
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple
from .terminal import short_path

__all__ = ["MAX_FINDINGS", "MAX_MAP_LAUNCHES", "Page", "build_page", "render_report", "write_report"]

#: findings shown in full (the rest are counted in the summary and listed by one line each).
MAX_FINDINGS = 100
#: kernel launches whose access maps are drawn (launches with out-of-bounds lanes first).
MAX_MAP_LAUNCHES = 12
_SOURCE_CONTEXT = 4  # source lines shown before and after a finding's line
_MAX_EXAMPLES = 3  # examples of a finding shown (the JSON has them all)
_EXAMPLE_CHARS = 400  # one example's JSON, at most
_TOP_CONFIGS = 8
_SLOWEST = 5

#: kinds of findings with their own colour on the page (others are drawn as ``other``).
KIND_CLASSES = ("out_of_bounds", "data_race", "uninitialized_read", "int_overflow", "nan_inf", "assert_failed",
                "undefined_value", "kernel_error", "unsupported", "timeout")
_BOUNDS = ("memory", "compute", "latency", "host", "unknown")
_STEP_STATUSES = ("ran", "skipped", "failed")
_TRIAL_STATUSES = ("ok", "failed", "wrong", "crashed", "pruned")


# ------------------------------------------------------------------------------------------- view

@dataclass
class Step:
    """One step of the doctor's run: ``status`` ran / skipped / failed (``css`` its class), ``why``."""

    name: str
    status: str
    css: str
    why: str = ""
    seconds: str = ""
    json: str = ""


@dataclass
class SourceLine:
    """One line of kernel source: 1-based ``number``, ``text``, ``marked`` for the finding's line."""

    number: int
    text: str
    marked: bool = False


@dataclass
class Fact:
    """One row of a finding's facts: ``name``, ``value`` (text); ``code`` renders it monospaced,
    ``block`` as a preformatted block."""

    name: str
    value: str
    code: bool = False
    block: bool = False


@dataclass
class FindingView:
    """One finding as the page shows it (see :class:`~tritonkit.check.Finding` for the fields)."""

    anchor: str
    index: int
    kind: str
    kind_css: str
    message: str
    kernel: str
    location: str
    source: List[SourceLine]
    source_note: str
    facts: List[Fact]
    hint: str = ""


@dataclass
class Legend:
    """A heatmap legend swatch: ``label``, ``colors`` (``#rrggbb``, from the heatmap module's tables;
    several for the program palette)."""

    label: str
    colors: List[str]


@dataclass
class Panel:
    """One heatmap image: ``title``, ``uri`` (PNG data URI), size in CSS pixels, ``alt`` text."""

    title: str
    uri: str
    width: int
    height: int
    alt: str


@dataclass
class ArgMap:
    """The heatmaps of one tensor argument in one launch (``error`` where they could not be drawn)."""

    arg: str
    caption: str
    panels: List[Panel] = field(default_factory=list)
    legend: List[Legend] = field(default_factory=list)
    oob: bool = False
    error: str = ""


@dataclass
class LaunchView:
    """One kernel launch with access maps: its facts and one :class:`ArgMap` per tensor argument."""

    anchor: str
    kernel: str
    index: int
    facts: List[Fact]
    args: List[ArgMap]
    oob: bool = False


@dataclass
class KernelRow:
    """One profiled kernel, formatted; ``label`` its name shortened for the table (mangled C++ names
    as ``function<Arg>``, :func:`~tritonkit.report.charts.short_name`), ``name`` in full;
    ``bound_css`` the bound's class; ``pct`` the headline % of peak
    (of the FLOP/s peak for a compute-bound kernel or one without bytes, else of the bandwidth peak),
    ``pct_what`` which peak, ``pct_ceiling`` the same as % of the measured ceiling."""

    name: str
    label: str
    scope: str
    launches: str
    total_ms: str
    share: str
    mean_us: str
    host_us: str
    gbps: str
    tflops: str
    pct_peak_bw: str
    pct_peak_flops: str
    pct_ceiling: str
    pct: str
    pct_what: str
    bound: str
    bound_css: str
    bound_reason: str
    work_source: str
    resources: str
    total_ms_value: float = 0.0


@dataclass
class Chart:
    """A chart as an image: ``title``, ``uri`` (``data:`` URI), ``alt``; ``error`` where not drawn."""

    title: str
    uri: str = ""
    alt: str = ""
    error: str = ""


@dataclass
class ConfigRow:
    """One config of a tuning run: rank (``-`` without a time), key, ms, x slower than the winner."""

    rank: str
    key: str
    ms: str
    vs_winner: str
    status: str
    status_css: str
    winner: bool = False
    note: str = ""


@dataclass
class TuneView:
    """One (kernel, key) tuning run: chart, gain sentence, top configs and the configs that gave no time.

    ``gain_x`` / ``gain_worst`` / ``gain_first``: the median / slowest / first-tried correct config's
    time over the winner's (``1.21x``), ``-`` with fewer than two correct configs."""

    anchor: str
    kernel: str
    key: str
    strategy: str
    tuning_s: str
    counts: List[Tuple[str, int, str]]
    winner: str
    winner_ms: str
    gain: str
    gain_x: str
    gain_worst: str
    gain_first: str
    chart: Chart
    top: List[ConfigRow]
    misses: List[ConfigRow]
    more_ok: int = 0


@dataclass
class Section:
    """A part of the page: ``present`` when it has data, else ``why`` it is missing."""

    present: bool
    why: str = ""


@dataclass
class Page:
    """Everything the template shows, formatted. Built by :func:`build_page`.

    Attributes:
        title / command / created / device / versions: the run's facts.
        steps: the doctor's steps; kinds: (kind, count, css) of findings, most first;
        findings_total / findings_kernels: counts; findings: shown in full (at most
        :data:`MAX_FINDINGS`); findings_more: one-line rows of the rest.
        check / tune / profile: :class:`Section` (present, or why not).
        launches: launches with heatmaps (at most :data:`MAX_MAP_LAUNCHES`); launches_more: launches
            with access maps not drawn; launches_total: launches with access maps.
        slowest / kernels: profiled kernels (the slowest few; all, slowest first); has_scope: any
            kernel ran in a named scope; total_ms: their GPU time, ms.
        roofline / breakdown: charts; peaks / ceiling: one line each; profile_files: chart files
            the profile step wrote.
        tunes: tuning runs; gain_note: what "gained" compares.
        check_summary: (name, value) facts of the check session.
    """

    title: str
    command: str
    created: str
    device: str
    versions: List[Tuple[str, str]]
    steps: List[Step]
    check: Section
    tune: Section
    profile: Section
    kinds: List[Tuple[str, int, str]] = field(default_factory=list)
    findings_total: int = 0
    findings_kernels: int = 0
    findings: List[FindingView] = field(default_factory=list)
    findings_more: List[FindingView] = field(default_factory=list)
    check_summary: List[Tuple[str, str]] = field(default_factory=list)
    launches: List[LaunchView] = field(default_factory=list)
    launches_more: int = 0
    launches_total: int = 0
    slowest: List[KernelRow] = field(default_factory=list)
    kernels: List[KernelRow] = field(default_factory=list)
    total_ms: str = ""
    has_scope: bool = False
    roofline: Optional[Chart] = None
    breakdown: Optional[Chart] = None
    peaks: str = ""
    ceiling: str = ""
    profile_files: List[str] = field(default_factory=list)
    tunes: List[TuneView] = field(default_factory=list)
    gain_note: str = ""

    def to_dict(self) -> dict:
        """Plain JSON data (the charts' data URIs included)."""
        return dataclasses.asdict(self)


# ------------------------------------------------------------------------------------- formatting

def _num(x: Any) -> Optional[float]:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    return float(x) if math.isfinite(x) else None


def _f(x: Any, fmt: str, suffix: str = "") -> str:
    v = _num(x)
    return "-" if v is None else format(v, fmt) + suffix


def _ms(x: Any) -> str:
    v = _num(x)
    if v is None:
        return "-"
    return f"{v:.4g} ms" if v >= 0.001 else f"{v * 1e3:.3g} us"


def _bytes(x: Any) -> str:
    v = _num(x)
    if v is None:
        return "-"
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if v >= size:
            return f"{v / size:.3g} {unit}"
    return f"{v:.0f} B"


def _program(p: Any) -> str:
    if isinstance(p, (list, tuple)):
        return "(" + ", ".join(str(i) for i in p) + ("," if len(p) == 1 else "") + ")"
    return str(p)


def _programs(ids: Any, total: Any = None) -> str:
    ids = list(ids or [])
    text = ", ".join(_program(p) for p in ids[:8])
    n = _num(total)
    if n is not None and n > len(ids):
        text += f" ... ({int(n):,} programs in all)"
    elif n is not None:
        text += f" ({int(n):,} program{'s' if n != 1 else ''})"
    return text


def _brief_json(value: Any, limit: int = _EXAMPLE_CHARS) -> str:
    try:
        text = json.dumps(value, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _css(value: Any, allowed: Sequence[str], default: str) -> str:
    """A CSS class from a closed list (user data never becomes a class name of its own)."""
    return value if value in allowed else default


def _step_why(report: Mapping[str, Any], part: str) -> str:
    for s in report.get("steps") or []:
        if isinstance(s, Mapping) and s.get("name") == part:
            status = s.get("status") or "?"
            why = s.get("why") or ""
            return f"{part} {status}" + (f": {why}" if why else "")
    return f"{part} is not in the report (the step did not run)"


# ------------------------------------------------------------------------------------------ charts

def _figure_uri(fig) -> str:
    """A matplotlib figure as a ``data:image/svg+xml;base64`` URI (text kept as text, no date)."""
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "tritonkit"}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    return "data:image/svg+xml;base64," + base64.b64encode(buf.getvalue().encode("utf-8")).decode("ascii")


def _chart(title: str, alt: str, draw) -> Chart:
    try:
        return Chart(title, _figure_uri(draw()), alt)
    except Exception as e:  # a chart that cannot be drawn must not take the page down
        return Chart(title, "", alt, f"{type(e).__name__}: {e}")


# ----------------------------------------------------------------------------------------- findings

def _source(f: Mapping[str, Any]) -> Tuple[List[SourceLine], str]:
    """The source around a finding's line, read from its file; the finding's own line where not."""
    path, line = f.get("file"), f.get("line")
    line = int(line) if isinstance(line, int) else 0
    if path and line > 0:
        for candidate in (path, os.path.abspath(path)):
            try:
                with open(candidate, encoding="utf-8", errors="replace") as fh:
                    lines = fh.read().splitlines()
            except OSError:
                continue
            if line <= len(lines):
                lo, hi = max(1, line - _SOURCE_CONTEXT), min(len(lines), line + _SOURCE_CONTEXT)
                return [SourceLine(n, lines[n - 1], n == line) for n in range(lo, hi + 1)], ""
    text = f.get("source") or ""
    if not text:
        return [], "no source: the file could not be read and the finding carries no source line"
    return [SourceLine(line, str(text), True)], "the file could not be read: the finding's own line"


def _finding_view(f: Mapping[str, Any], index: int) -> FindingView:
    kind = str(f.get("kind") or "unknown")
    file, line = str(f.get("file") or "?"), f.get("line")
    location = f"{short_path(file)}:{line}" if line is not None else short_path(file)
    facts: List[Fact] = []

    def add(name: str, value: Any, code: bool = False, block: bool = False) -> None:
        if value in (None, "", [], {}):
            return
        facts.append(Fact(name, str(value), code, block))

    stack = f.get("call_stack") or []
    if len(stack) > 1:
        add("call stack", " → ".join(f"{s.get('function', '?')} ({short_path(str(s.get('file', '?')))}:"
                                     f"{s.get('line', '?')})" for s in stack if isinstance(s, Mapping)), code=True)
    tensor = f.get("tensor") if isinstance(f.get("tensor"), Mapping) else None
    if f.get("arg") or tensor:
        desc = str(f.get("arg") or (tensor or {}).get("name") or "?")
        if tensor:
            desc += f": {tensor.get('dtype', '?')} {list(tensor.get('shape') or [])}"
            if tensor.get("strides") is not None:
                desc += f", strides {list(tensor.get('strides'))}"
        add("argument", desc, code=True)
    if f.get("access"):
        add("access", f"{f.get('access')}, " + ("masked" if f.get("masked") else "unmasked"))
    if _num(f.get("count")) is not None:
        lanes = f"{int(f['count']):,} lanes"
        if _num(f.get("occurrences")):
            lanes += f" in {int(f['occurrences']):,} accesses"
        if _num(f.get("launches")):
            lanes += f", {int(f['launches']):,} launch{'es' if f['launches'] != 1 else ''}"
        add("lanes", lanes)
    add("programs", _programs(f.get("program_ids"), f.get("num_programs")), code=True)
    if f.get("elements"):
        n = _num(f.get("num_elements"))
        add("elements", str(f["elements"]) + (f" ({int(n):,} distinct)" if n else ""), code=True)
    reason = str(f.get("reason") or "")
    reasons = f.get("reasons") if isinstance(f.get("reasons"), Mapping) else {}
    if len(reasons) > 1:
        reason += " (" + ", ".join(f"{k}: {v:,} lanes" if isinstance(v, int) else f"{k}: {v}"
                                   for k, v in reasons.items()) + ")"
    add("reason", reason)
    other = f.get("other") if isinstance(f.get("other"), Mapping) else None
    if other:
        where = f"{short_path(str(other.get('file', '?')))}:{other.get('line', '?')}"
        text = f"{other.get('access', '?')} at {where}"
        if other.get("function"):
            text += f" in {other['function']}"
        if other.get("program_ids"):
            text += f", programs {_programs(other.get('program_ids'))}"
        if other.get("source"):
            text += f"\n    {other['source']}"
        add("other side", text, block=True)
    add("configs", ", ".join(str(c) for c in f.get("configs") or []), code=True)
    examples = [e for e in (f.get("examples") or [])][:_MAX_EXAMPLES]
    if examples:
        text = "\n".join(_brief_json(e) for e in examples)
        n = len(f.get("examples") or [])
        if n > len(examples):
            text += f"\n... {n - len(examples)} more in the check's JSON"
        add("examples", text, block=True)
    source, note = _source(f)
    return FindingView(anchor=f"finding-{index}", index=index, kind=kind,
                       kind_css=_css(kind, KIND_CLASSES, "other"), message=str(f.get("message") or kind),
                       kernel=str(f.get("kernel") or "?"), location=location, source=source, source_note=note,
                       facts=facts, hint=str(f.get("hint") or ""))


# ----------------------------------------------------------------------------------------- heatmaps

_PANEL_TITLES = {"reads": "reads, by program", "writes": "writes, by program",
                 "density": "lanes per element (reads + writes)"}


def _arg_map(m: Mapping[str, Any]) -> ArgMap:
    from .heatmap import heatmap_data, heatmap_data_uri, heatmap_rgba

    name = str(m.get("arg") or "?")
    try:
        data = heatmap_data(m)
        panels = []
        for panel in data.panels():
            img = heatmap_rgba(data, panel)
            uri = heatmap_data_uri(data, panel)
            h, w = img.shape[:2]
            panels.append(Panel(_PANEL_TITLES[panel], uri, w, h, f"{name}: {_PANEL_TITLES[panel]}"))
        drawn = set(data.panels())
        legend = [Legend(e.label, list(e.colors or (e.color,))) for e in data.legend if drawn & set(e.panels)]
        return ArgMap(name, data.caption, panels, legend, data.has_oob)
    except Exception as e:  # a malformed map is reported, not fatal
        return ArgMap(name, "", error=f"could not draw this access map: {type(e).__name__}: {e}")


def _launch_views(records: Sequence[Mapping[str, Any]]) -> Tuple[List[LaunchView], int, int]:
    with_maps = [(i, r) for i, r in enumerate(records) if isinstance(r, Mapping) and r.get("access_maps")]
    oob = [x for x in with_maps if any((a or {}).get("oob") or (a or {}).get("oob_lanes")
                                       for a in x[1]["access_maps"])]
    chosen = oob[:MAX_MAP_LAUNCHES]
    chosen += [x for x in with_maps if x not in chosen][:MAX_MAP_LAUNCHES - len(chosen)]
    chosen.sort(key=lambda x: x[0])
    views = []
    for i, r in chosen:
        facts = []
        grid = r.get("grid")
        if grid:
            facts.append(Fact("grid", "(" + ", ".join(str(g) for g in grid) + ")" +
                              (f", {int(r['programs']):,} programs" if _num(r.get("programs")) else ""), code=True))
        if r.get("config"):
            facts.append(Fact("config", str(r["config"]), code=True))
        for name, key in (("status", "status"), ("engine", "engine")):
            if r.get(key):
                facts.append(Fact(name, str(r[key])))
        if _num(r.get("seconds")) is not None:
            facts.append(Fact("interpreted in", f"{r['seconds']:.3g} s"))
        io_text = []
        for label, key, ukey in (("read", "bytes_read", "unique_bytes_read"),
                                 ("written", "bytes_written", "unique_bytes_written")):
            if _num(r.get(key)) is not None:
                io_text.append(f"{_bytes(r[key])} {label}" +
                               (f" ({_bytes(r[ukey])} unique)" if _num(r.get(ukey)) is not None else ""))
        if io_text:
            facts.append(Fact("memory traffic", ", ".join(io_text)))
        if _num(r.get("flops")) is not None:
            facts.append(Fact("FLOPs", f"{int(r['flops']):,}"))
        args = [_arg_map(m) for m in r["access_maps"] if isinstance(m, Mapping)]
        views.append(LaunchView(f"launch-{i}", str(r.get("kernel") or "?"), i, facts, args,
                                any(a.oob for a in args)))
    return views, len(with_maps) - len(views), len(with_maps)


# ----------------------------------------------------------------------------------------- profile

def _kernel_objects(kernels: Sequence[Mapping[str, Any]]) -> list:
    from ..profile import KernelReport

    names = {f.name for f in dataclasses.fields(KernelReport)}
    out = []
    for d in kernels:
        kw = {k: v for k, v in d.items() if k in names}
        kw.setdefault("name", "?")
        kw.setdefault("scope", [])
        kw.setdefault("launches", 0)
        kw.setdefault("total_ms", 0.0)
        kw.setdefault("mean_us", 0.0)
        kw["scope"] = list(kw.get("scope") or [])
        kw["resources"] = dict(kw.get("resources") or {})
        out.append(KernelReport(**kw))
    return out


def _peaks_object(d: Mapping[str, Any]):
    """A :class:`~tritonkit.profile.DevicePeaks` from its ``to_dict()`` (unknown keys dropped)."""
    from ..profile import DevicePeaks

    names = {f.name for f in dataclasses.fields(DevicePeaks)}
    kw = {k: v for k, v in d.items() if k in names}
    kw["tflops"] = dict(kw.get("tflops") or {})
    return DevicePeaks(**kw)


def _ceiling_object(d: Optional[Mapping[str, Any]]):
    if not d:
        return None
    from ..profile import Ceiling

    names = {f.name for f in dataclasses.fields(Ceiling)}
    kw = {k: v for k, v in d.items() if k in names}
    kw["tflops"] = dict(kw.get("tflops") or {})
    return Ceiling(**kw)


def _kernel_row(d: Mapping[str, Any], total_ms: float) -> KernelRow:
    bound = str(d.get("bound") or "unknown")
    if bound == "compute" or d.get("pct_peak_bw") is None:
        pct, ceil = d.get("pct_peak_flops"), d.get("pct_ceiling_flops")
        what = f"{d.get('flops_dtype') or ''} FLOP/s".strip()
    else:
        pct, ceil = d.get("pct_peak_bw"), d.get("pct_ceiling_bw")
        what = "bandwidth"
    pct_s = "-" if _num(pct) is None else f"{pct:.0f}%"
    res = d.get("resources") if isinstance(d.get("resources"), Mapping) else {}
    res_parts = []
    if res.get("registers") is not None:
        res_parts.append(f"{res['registers']} regs" + (f" ({res['spills']} spills)" if res.get("spills") else ""))
    if _num(res.get("shared")) is not None:
        res_parts.append(f"{res['shared'] / 1024:.0f} KiB smem" if res["shared"] else "no smem")
    if res.get("num_warps") is not None:
        res_parts.append(f"{res['num_warps']} warps" +
                         (f" x {res['num_stages']} stages" if res.get("num_stages") is not None else ""))
    if _num(res.get("occupancy")) is not None:
        res_parts.append(f"occupancy {res['occupancy'] * 100:.0f}%")
    ms = _num(d.get("total_ms")) or 0.0
    flops = _f(d.get("tflops"), ".3g")
    if d.get("flops_dtype") and flops != "-":
        flops += f" {d['flops_dtype']}"
    from .charts import short_name

    name = str(d.get("name") or "?")
    return KernelRow(
        name=name, label=short_name(name, 56), scope="/".join(str(s) for s in d.get("scope") or []) or "-",
        launches=_f(d.get("launches"), ",.0f"), total_ms=_f(d.get("total_ms"), ".4g"),
        share=f"{100 * ms / total_ms:.1f}%" if total_ms > 0 else "-", mean_us=_f(d.get("mean_us"), ".4g"),
        host_us=_f(d.get("host_us"), ".3g"), gbps=_f(d.get("gbps"), ".4g"), tflops=flops,
        pct_peak_bw=_f(d.get("pct_peak_bw"), ".0f", "%"), pct_peak_flops=_f(d.get("pct_peak_flops"), ".0f", "%"),
        pct_ceiling=_f(ceil, ".0f", "%"), pct=pct_s, pct_what=what if pct_s != "-" else "", bound=bound, bound_css=_css(bound, _BOUNDS, "unknown"),
        bound_reason=str(d.get("bound_reason") or ""), work_source=str(d.get("work_source") or ""),
        resources=", ".join(res_parts) or "-", total_ms_value=ms)


def _profile(page: Page, prof: Mapping[str, Any]) -> None:
    kernels = [k for k in (prof.get("kernels") or []) if isinstance(k, Mapping)]
    kernels.sort(key=lambda k: -(_num(k.get("total_ms")) or 0.0))
    total = sum(_num(k.get("total_ms")) or 0.0 for k in kernels)
    page.total_ms = _f(total, ".4g") if kernels else ""
    page.kernels = [_kernel_row(k, total) for k in kernels]
    page.slowest = page.kernels[:_SLOWEST]
    page.has_scope = any(k.scope != "-" for k in page.kernels)
    peaks_d = prof.get("peaks") if isinstance(prof.get("peaks"), Mapping) else None
    ceiling_d = prof.get("ceiling") if isinstance(prof.get("ceiling"), Mapping) else None
    if peaks_d:
        tf = ", ".join(f"{k} {v:g}" for k, v in (peaks_d.get("tflops") or {}).items() if _num(v) is not None)
        page.peaks = (f"{peaks_d.get('name', '?')}: {_f(peaks_d.get('bandwidth_gbps'), '.0f')} GB/s"
                      + (f", {tf} TFLOP/s" if tf else "") + (f" ({peaks_d['source']})" if peaks_d.get("source") else ""))
    if ceiling_d:
        tf = ", ".join(f"{k} {v:g}" for k, v in (ceiling_d.get("tflops") or {}).items() if _num(v) is not None)
        page.ceiling = (f"measured {_f(ceiling_d.get('bandwidth_gbps'), '.0f')} GB/s" + (f", {tf} TFLOP/s" if tf else "")
                        + (f" ({ceiling_d['source']})" if ceiling_d.get("source") else ""))
    if not kernels:
        page.roofline = Chart("Roofline", error="the profile has no kernels")
    elif not peaks_d:
        page.roofline = Chart("Roofline", error="the profile has no device peaks: no roofline to draw")
    else:
        from .charts import roofline_chart

        def roofline():
            return roofline_chart(_kernel_objects(kernels), _peaks_object(peaks_d), _ceiling_object(ceiling_d))

        page.roofline = _chart("Roofline", "roofline: arithmetic intensity (FLOP/byte) against TFLOP/s, one point "
                                           "per kernel", roofline)
    if kernels:
        from .charts import time_breakdown_chart

        page.breakdown = _chart("GPU time by kernel", "GPU time per kernel, slowest first",
                                lambda: time_breakdown_chart(_kernel_objects(kernels)))
    page.profile_files = [str(p) for p in prof.get("charts") or []]


# ------------------------------------------------------------------------------------------- tuning

def _tune_view(result: Mapping[str, Any], index: int) -> TuneView:
    from .charts import tuning_landscape_chart, tuning_landscape_data

    data = tuning_landscape_data(result)
    key = ", ".join(data.key)
    gain_worst = gain_first = "-"
    if data.winner_ms is None:
        gain, gain_x = "no config ran correctly: nothing was gained", "-"
    elif len(data.bars) == 1:
        gain, gain_x = "only one config ran correctly: nothing to compare it with", "-"
    else:
        w = data.winner_ms
        parts = [f"{data.median_ms / w:.2f}x faster than the median correct config ({_ms(data.median_ms)})",
                 f"{data.worst_ms / w:.2f}x faster than the slowest ({_ms(data.worst_ms)})",
                 f"{data.first_ms / w:.2f}x faster than the first config tried ({_ms(data.first_ms)})"]
        gain = "; ".join(parts)
        gain_x = f"{data.median_ms / w:.2f}x"
        gain_worst, gain_first = f"{data.worst_ms / w:.2f}x", f"{data.first_ms / w:.2f}x"
    top = []
    for b in data.bars[:_TOP_CONFIGS]:
        top.append(ConfigRow(str(b.rank), b.label, _ms(b.ms),
                             "winner" if b.winner else (f"{b.ms / data.winner_ms:.2f}x" if data.winner_ms else "-"),
                             "ok", "ok", b.winner, "from the cache" if b.cached else ""))
    misses = [ConfigRow("-", m.label, "-", "-", m.status, _css(m.status, _TRIAL_STATUSES, "other"), False,
                        m.error) for m in data.misses]
    counts = [(s, n, _css(s, _TRIAL_STATUSES, "other")) for s, n in sorted(data.counts.items(), key=lambda x: -x[1])]
    chart = _chart(f"Tuning landscape: {data.kernel}", f"time per config of {data.kernel}, fastest first",
                   lambda: tuning_landscape_chart(result))
    return TuneView(anchor=f"tune-{index}", kernel=data.kernel, key=key or "-", strategy=data.strategy or "-",
                    tuning_s=_f(data.tuning_s, ".3g", " s"), counts=counts, winner=data.winner or "-",
                    winner_ms=_ms(data.winner_ms), gain=gain, gain_x=gain_x, gain_worst=gain_worst,
                    gain_first=gain_first, chart=chart, top=top, misses=misses,
                    more_ok=max(0, len(data.bars) - len(top)))


# --------------------------------------------------------------------------------------------- page

def _steps(report: Mapping[str, Any]) -> List[Step]:
    steps = []
    for s in report.get("steps") or []:
        if not isinstance(s, Mapping):
            continue
        status = str(s.get("status") or "?")
        steps.append(Step(str(s.get("name") or "?"), status, _css(status, _STEP_STATUSES, "other"),
                          str(s.get("why") or ""), _f(s.get("seconds"), ".3g", " s") if s.get("seconds") is not None
                          else "", str(s.get("json") or "")))
    if not steps:  # an older or partial report: say what is there
        for part in ("check", "tune", "profile"):
            ran = report.get(part) is not None
            steps.append(Step(part, "ran" if ran else "skipped", "ran" if ran else "skipped",
                              "" if ran else "not in the report"))
    return steps


def build_page(report: Mapping[str, Any]) -> Page:
    """The doctor's report as formatted view data, charts drawn (see :class:`Page`).

    Args:
        report: the doctor's report (see :func:`render_report`); any part may be missing or None.

    Returns:
        A :class:`Page`. Parts that are missing are ``Section(present=False, why=...)``, the reason
        taken from the report's steps.

    Raises:
        TypeError: ``report`` is not a mapping.
    """
    if not isinstance(report, Mapping):
        raise TypeError(f"report must be a dict, got {type(report).__name__}")
    versions = report.get("versions") if isinstance(report.get("versions"), Mapping) else {}

    def section(part: str) -> Section:
        value = report.get(part)
        return Section(True) if isinstance(value, Mapping) else Section(False, _step_why(report, part))

    page = Page(title="tritonkit doctor", command=str(report.get("command") or ""),
                created=str(report.get("created") or ""), device=str(report.get("device") or ""),
                versions=[(str(k), str(v)) for k, v in versions.items() if v is not None], steps=_steps(report),
                check=section("check"), tune=section("tune"), profile=section("profile"))
    if not page.device:
        page.device = "no GPU"

    check = report.get("check")
    if isinstance(check, Mapping):
        findings = [f for f in (check.get("findings") or []) if isinstance(f, Mapping)]
        counts: Dict[str, int] = {}
        for f in findings:
            kind = str(f.get("kind") or "unknown")
            counts[kind] = counts.get(kind, 0) + 1
        page.kinds = [(k, n, _css(k, KIND_CLASSES, "other")) for k, n in sorted(counts.items(), key=lambda x: -x[1])]
        page.findings_total = len(findings)
        page.findings_kernels = len({str(f.get("kernel")) for f in findings})
        views = [_finding_view(f, i) for i, f in enumerate(findings)]
        page.findings, page.findings_more = views[:MAX_FINDINGS], views[MAX_FINDINGS:]
        summary = check.get("summary") if isinstance(check.get("summary"), Mapping) else {}
        for key, label in (("launches", "launches"), ("programs", "programs"), ("seconds", "seconds interpreted"),
                           ("engine", "engine"), ("checks", "checks"), ("aborted", "aborted")):
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
        records = [r for r in (check.get("launch_records") or []) if isinstance(r, Mapping)]
        page.launches, page.launches_more, page.launches_total = _launch_views(records)

    prof = report.get("profile")
    if isinstance(prof, Mapping):
        _profile(page, prof)

    tune = report.get("tune")
    if isinstance(tune, Mapping):
        results = [r for r in (tune.get("results") or []) if isinstance(r, Mapping) and "kernel" in r]
        page.tunes = [_tune_view(r, i) for i, r in enumerate(results)]
        page.gain_note = ("\"Gained\" compares the winner's median time with the other configs that ran correctly "
                          "in the same tuning run: the median and the slowest of them, and the first config "
                          "tried. It is not a comparison with an untuned kernel or with another implementation.")
    return page


def _environment():
    try:
        import jinja2
    except ImportError as e:  # pragma: no cover - jinja2 is a dependency
        raise ImportError("the HTML report needs jinja2: pip install 'jinja2>=3.1'") from e
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(os.path.join(os.path.dirname(__file__), "templates")),
                             autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True,
                             lstrip_blocks=True)
    return env


def render_report(report: Mapping[str, Any]) -> str:
    """The whole HTML page of a ``tritonkit doctor`` run, self-contained.

    Args:
        report: a dict, every part optional (missing or None parts are shown as skipped, with the
            reason from ``steps``)::

                {"command": str, "created": str (ISO 8601), "versions": {name: version},
                 "device": str | None,
                 "steps": [{"name": "check" | "tune" | "profile", "status": "ran" | "skipped" | "failed",
                            "why": str, "json": path | None, "seconds": float}],
                 "check": CheckSession.to_dict() (findings, launch_records with access_maps, summary),
                 "tune": {"results": [TuneResult.to_dict()]},
                 "profile": {"peaks": DevicePeaks.to_dict(), "ceiling": dict | None,
                             "kernels": [KernelReport.to_dict()], "charts": [paths]}}

    Returns:
        The page as one string (UTF-8 when written): inline CSS, charts as ``data:`` URIs, no script,
        nothing loaded from the network. Its size grows with the heatmaps drawn (at most
        :data:`MAX_MAP_LAUNCHES` launches) and the findings (at most :data:`MAX_FINDINGS` in full).

    Raises:
        TypeError: ``report`` is not a mapping.
        ImportError: jinja2 is not installed.
    """
    page = build_page(report)
    return _environment().get_template("doctor.html.j2").render(page=page)


def write_report(report: Mapping[str, Any], path: str) -> None:
    """Write :func:`render_report`'s page to ``path`` atomically (a reader never sees half a page).

    Args:
        report: as :func:`render_report`.
        path: the HTML file to write; its directory must exist.

    Raises:
        OSError: the file cannot be written (an existing file is left as it was).
        TypeError / ImportError: as :func:`render_report`.
    """
    from .._io import atomic_write_text

    atomic_write_text(path, render_report(report))
