"""Renderers: terminal (rich) now; HTML and charts as later parts land. They draw plain result objects."""
from .terminal import print_report, render_finding, render_summary

__all__ = ["print_report", "render_finding", "render_summary"]
