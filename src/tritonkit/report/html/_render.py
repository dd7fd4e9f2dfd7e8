"""The page rendered: :func:`render_report` lays a :func:`~._page.build_page` page out with the
Jinja2 template ``templates/doctor.html.j2`` (autoescaped), :func:`write_report` writes it atomically."""
from __future__ import annotations

import os
from typing import Any

from ..._imports import require
from ._page import build_page

#: the template folder: ``tritonkit/report/templates``
TEMPLATES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "templates")


def _environment():
    jinja2 = require("jinja2", "the doctor's HTML page")
    return jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                              undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)


def render_report(report: Any) -> str:
    """The whole HTML page of a ``tritonkit doctor`` run, self-contained.

    Args:
        report: a :class:`~tritonkit.doctor.DoctorReport`: the run's facts (command, created,
            versions, device), its steps, and each step's results, any of them None (shown as
            skipped, with the reason from the steps): the check's JSON as a dict (findings,
            launch_records with access maps, summary), the :class:`~tritonkit.tune.TuneReport` and
            the :class:`~tritonkit.profile.ProfileReport`. ``DoctorReport.from_dict`` reads
            ``doctor.json``.

    Returns:
        The page as one string (UTF-8 when written): inline CSS, charts as ``data:`` URIs, no script,
        nothing loaded from the network. Its size grows with the heatmaps drawn (at most
        :data:`~._view.MAX_MAP_LAUNCHES` launches) and the findings (at most
        :data:`~._view.MAX_FINDINGS` in full).

    Raises:
        TypeError: ``report`` is not a DoctorReport.
        MissingDependency: Jinja2 is not installed (``pip install 'tritonkit[report]'``); without
            matplotlib or Pillow the page is still written, each chart saying what is missing.
    """
    page = build_page(report)
    return _environment().get_template("doctor.html.j2").render(page=page)


def write_report(report: Any, path: str) -> None:
    """Write :func:`render_report`'s page to ``path`` atomically (a reader never sees half a page).

    Args:
        report: as :func:`render_report`.
        path: the HTML file to write; its directory must exist.

    Raises:
        OSError: the file cannot be written (an existing file is left as it was).
        TypeError / MissingDependency: as :func:`render_report`.
    """
    from ..._io import atomic_write_text

    atomic_write_text(path, render_report(report))
