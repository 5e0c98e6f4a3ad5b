"""The wall clock as every layer writes it: now in UTC, ISO 8601 to the second, without datetime (the
hot path's records and the CLI's alike)."""
from __future__ import annotations

import time


def utc_now_iso() -> str:
    """Now in UTC, ISO 8601 to the second (``2026-12-03T10:00:00+00:00``), without importing datetime."""
    return time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())
