"""The one self-contained HTML page of ``tritonkit doctor``: findings, memory-access heatmaps, the
roofline and the tuning landscape.

Data first, then render: :func:`build_page` turns the doctor's :class:`~tritonkit.doctor.DoctorReport`
into a :class:`Page` of plain view data, with every number already formatted and every chart already
drawn as a ``data:`` URI; the Jinja2 template ``templates/doctor.html.j2`` only lays that out.
:func:`render_report` does both and :func:`write_report` writes the page atomically.

The package, by concept: :mod:`._view` (the view model), :mod:`._format` (numbers, CSS classes,
charts as images), one builder per section (:mod:`._findings` and :mod:`._access_maps` read the
check's JSON, :mod:`._profile` a :class:`~tritonkit.profile.ProfileReport`, :mod:`._tuning` a
:class:`~tritonkit.tune.TuneReport`), :mod:`._page` (the whole page) and :mod:`._render`.

The page needs nothing else: CSS is inline, charts are ``<img>`` elements with ``data:`` URIs (SVG
from matplotlib for the roofline, time breakdown and tuning landscapes, PNG for the heatmaps), it
uses no script, and no font, stylesheet or image comes from the network. Everything taken from the
report (names, paths, source lines, messages, config keys) goes through Jinja2's autoescaping: none
of it is ever marked safe, so a kernel named ``<script>`` stays text.
"""
from ._page import build_page
from ._render import render_report, write_report
from ._view import MAX_FINDINGS, MAX_MAP_LAUNCHES, Page

__all__ = ["MAX_FINDINGS", "MAX_MAP_LAUNCHES", "Page", "build_page", "render_report", "write_report"]
