"""The whole page as view data: :func:`build_page` reads a :class:`~tritonkit.doctor.DoctorReport`
(the run's facts, its steps, and each step's results) and fills a :class:`~._view.Page` through the
section builders (findings, access maps, profile, tuning)."""
from __future__ import annotations

from typing import Any, List, Mapping

from ._access_maps import launch_views
from ._findings import findings_section, kind_colors
from ._format import css, fmt
from ._profile import profile_section
from ._tuning import tuning_section
from ._view import Page, Section, Step

_STEP_STATUSES = ("ran", "skipped", "failed")
#: what a report must have to be drawn (a :class:`~tritonkit.doctor.DoctorReport`'s attributes)
_REPORT_ATTRIBUTES = ("command", "created", "versions", "device", "steps", "check", "tune", "profile")


def _step_why(report: Any, part: str) -> str:
    for s in report.steps:
        if s.name == part:
            status = s.status or "?"
            why = s.why or ""
            return f"{part} {status}" + (f": {why}" if why else "")
    return f"{part} is not in the report (the step did not run)"


def _steps(report: Any) -> List[Step]:
    steps = []
    for s in report.steps:
        status = s.status or "?"
        steps.append(Step(s.name or "?", status, css(status, _STEP_STATUSES, "other"), s.why or "",
                          fmt(s.seconds, ".3g", " s") if s.seconds is not None else "", s.json or ""))
    if not steps:  # an older or partial report: say what is there
        for part in ("check", "tune", "profile"):
            ran = getattr(report, part) is not None
            steps.append(Step(part, "ran" if ran else "skipped", "ran" if ran else "skipped",
                              "" if ran else "not in the report"))
    return steps


def build_page(report: Any) -> Page:
    """The doctor's report as formatted view data, charts drawn (see :class:`~._view.Page`).

    Args:
        report: a :class:`~tritonkit.doctor.DoctorReport` (``DoctorReport.from_dict`` reads
            ``doctor.json``); any of its parts may be None.

    Returns:
        A :class:`~._view.Page`. Parts that are missing are ``Section(present=False, why=...)``, the
        reason taken from the report's steps.

    Raises:
        TypeError: ``report`` is not a DoctorReport (a dict: read it with ``DoctorReport.from_dict``).
    """
    if isinstance(report, Mapping) or not all(hasattr(report, a) for a in _REPORT_ATTRIBUTES):
        raise TypeError(f"report must be a tritonkit.doctor.DoctorReport (DoctorReport.from_dict reads doctor.json), "
                        f"got {type(report).__name__}")

    def section(part: str) -> Section:
        return Section(True) if getattr(report, part) is not None else Section(False, _step_why(report, part))

    page = Page(title="tritonkit doctor", command=report.command or "", created=report.created or "",
                device=report.device or "", versions=[(str(k), str(v)) for k, v in report.versions.items()
                                                      if v is not None],
                steps=_steps(report), check=section("check"), tune=section("tune"), profile=section("profile"),
                kind_colors=kind_colors())
    if not page.device:
        page.device = "no GPU"
    if report.check is not None:
        findings_section(page, report.check)
        page.launches, page.launches_more, page.launches_total = launch_views(report.check.launch_records)
    if report.profile is not None:
        profile_section(page, report.profile)
    if report.tune is not None:
        tuning_section(page, report.tune)
    return page
