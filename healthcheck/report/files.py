"""Write the HTML report and its full tables as CSV beside it (I/O; the rendering is pure).

``write_html(report, path)`` writes ``path`` and ``<stem>.<table>.csv`` for every table of
``tables.NAMES`` in the same folder, each atomically (``safeio.atomic.atomic_write``: a unique temporary, then
renamed; mode 0644), the CSVs first so the page never links a file that is not there yet. Returns the
paths written. An existing file of those names is replaced whole, never appended to or truncated in place.
"""
from __future__ import annotations

import os
from typing import Callable

from .model import Report


def csv_base(html_path: str) -> str:
    """The CSVs' file name stem: the page's name without its extension (``readiness.html`` ->
    ``readiness``)."""
    name = os.path.basename(os.fspath(html_path))
    stem, ext = os.path.splitext(name)
    if not stem:
        raise ValueError(f"not a file name for the HTML report: {html_path!r}")
    return stem if ext else name


def write_html(report: Report, html_path: str, plots: bool = True,
               step: Callable[[str], None] | None = None) -> list[str]:
    """Write the page and its CSVs (see the module docstring); the paths written, page last."""
    from ..safeio.atomic import atomic_write
    from .html import render_html
    from .tables import csv_name, csv_tables

    base = csv_base(html_path)
    folder = os.path.dirname(os.fspath(html_path))
    written = []
    for name, text in csv_tables(report).items():
        path = os.path.join(folder, csv_name(base, name))
        atomic_write(path, text, 0o644)
        written.append(path)
    atomic_write(html_path, render_html(report, plots=plots, step=step, csv_base=base), 0o644)
    return written + [os.fspath(html_path)]
