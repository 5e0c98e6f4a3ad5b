"""The readiness report as JSON: ``Report.to_dict()`` (plain types, ISO times) serialised."""
from __future__ import annotations

import json

from .model import Report


def render_json(report: Report, indent: int | None = 2) -> str:
    """JSON text; strict (no NaN/Infinity), non-ASCII kept as \\u escapes so any terminal shows it."""
    return json.dumps({"schema_version": 1, **report.to_dict()}, indent=indent, allow_nan=False, sort_keys=False) + "\n"
