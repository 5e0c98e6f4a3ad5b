"""The cluster readiness report: from the history's DataFrames to HTML, Markdown or JSON.

API::

    from healthcheck.report import build_report, render_html, render_markdown, render_json
    from healthcheck.report.dbsummary import load_summary
    report = build_report(load_summary(engine, since, now), since, now)   # the database, via its rollups
    report = build_report(frames, since, now, node_class=None, slurm_states=None, progress=None)
    render_html(report) -> str      # one self-contained page, plots as inline SVG
    render_markdown(report) -> str
    render_json(report) -> str      # report.to_dict() as JSON

``frames`` are the four DataFrames of ``healthcheck.history.queries.load_frames`` (runs, results,
metrics, actions); both inputs become a ``summary.Summary`` of the window, the same for the same history.
The figures are computed by :mod:`healthcheck.analysis`; :mod:`healthcheck.report.inputs` says which
analysis and with which settings.
pandas is imported by this package; the plots are plain SVG drawn by :mod:`healthcheck.report.plots`.
"""
from __future__ import annotations

from .build import build_report
from .html import render_html
from .jsonout import render_json
from .markdown import render_markdown
from .model import Report

__all__ = ["Report", "build_report", "render_html", "render_json", "render_markdown"]
