"""`--since` values: a duration back from now ("30d", "12h", "30m", "2w", "90s") or an ISO-8601 time."""
from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_since(text: str, now: datetime) -> datetime:
    """The UTC time ``text`` names: ``now`` minus a duration, or an ISO-8601 time (UTC when zoneless).
    Raises ValueError with the accepted forms."""
    value = text.strip()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([smhdw])", value)
    if match:
        return now - timedelta(seconds=float(match.group(1)) * _UNITS[match.group(2)])
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"--since {text!r}: expected a duration like 30d, 12h, 30m, 2w or an ISO-8601 "
                         "time like 2024-05-01 or 2024-05-01T08:00:00Z") from None
    return when.replace(tzinfo=timezone.utc) if when.tzinfo is None else when.astimezone(timezone.utc)
