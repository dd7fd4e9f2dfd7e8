"""The page's view model: plain dataclasses of already formatted text, lists and chart images that
the template ``doctor.html.j2`` lays out (it computes nothing). Built by the section builders of
this package (findings, access maps, profile, tuning) and :func:`~tritonkit.report.html.build_page`."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import List, Optional, Tuple

#: findings shown in full (the rest are counted in the summary and listed by one line each).
MAX_FINDINGS = 100
#: kernel launches whose access maps are drawn (launches with out-of-bounds lanes first).
MAX_MAP_LAUNCHES = 12


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
    as ``function<Arg>``, :func:`~tritonkit.report.names.short_name`), ``name`` in full;
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
        kind_colors: (CSS class suffix, ``#rrggbb``) of every finding kind, from the check's registry.
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
    kind_colors: List[Tuple[str, str]] = field(default_factory=list)

    def to_dict(self) -> dict:
        """Plain JSON data (the charts' data URIs included)."""
        return dataclasses.asdict(self)
