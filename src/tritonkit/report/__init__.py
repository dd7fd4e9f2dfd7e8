"""Renderers of tritonkit's plain result objects: the terminal (rich: :mod:`.terminal` for the check,
:mod:`.profile` and :mod:`.tune`), the charts (:mod:`.charts`, one module per chart) and the doctor's
HTML page (:mod:`.html`)."""
from .terminal import print_report, render_finding, render_summary

__all__ = ["print_report", "render_finding", "render_summary"]
