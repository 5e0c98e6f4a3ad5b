"""The fleet digests file: the fleet's majority GEMM digest per fleet key, written from the history by
``healthcheck burnin fleet-digests`` (or by the sweep before it submits) and read by each node's burn-in,
which has no database access. Lean on purpose: json and os only.

Shape (``schema`` 1)::

    {"schema": 1, "generated_at": ISO-8601, "since": ISO-8601 | null,
     "digests": {fleet_key: {"digest": hex, "gpus": int, "votes": int, "nodes": int}}}

Only decided keys are written (see ``healthcheck.analysis.digests``).
"""
from __future__ import annotations

import json
from typing import Any, Mapping

SCHEMA = 1
MAX_BYTES = 16 << 20
_HEX = frozenset("0123456789abcdef")


class FleetFileError(ValueError):
    """The file cannot be used; the message says which file and why."""


def write(path: str, keys: Mapping[str, Mapping[str, Any]], generated_at: str, since: str | None) -> int:
    """Write the decided keys atomically (readable by the jobs: digests are not secret); their count."""
    decided = {k: dict(v) for k, v in sorted(keys.items()) if v.get("digest")}
    doc = {"schema": SCHEMA, "generated_at": generated_at, "since": since, "digests": decided}
    from ..safeio.atomic import atomic_write

    try:
        atomic_write(path, json.dumps(doc, indent=1, sort_keys=True) + "\n", 0o644)
    except OSError as exc:
        raise FleetFileError(f"{path}: cannot write: {exc.strerror or exc}") from None
    return len(decided)


def read(path: str) -> dict[str, str]:
    """fleet key -> majority digest (lower-case hex); FleetFileError when the file is unusable."""
    from ..safeio.trust import NotARegularFile, read_regular

    try:  # a regular file only: a FIFO put at the path must not hang the burn-in
        raw = read_regular(path, "fleet digests file", MAX_BYTES)
    except NotARegularFile as exc:
        raise FleetFileError(f"{path}: {exc}") from None
    except OSError as exc:
        raise FleetFileError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise FleetFileError(f"{path}: not JSON ({exc})") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA or not isinstance(doc.get("digests"), dict):
        raise FleetFileError(f"{path}: not a fleet digests file of schema {SCHEMA} "
                             "(write it with `healthcheck burnin fleet-digests`)")
    out = {}
    for key, entry in doc["digests"].items():
        digest = entry.get("digest") if isinstance(entry, dict) else None
        if not isinstance(digest, str) or not 12 <= len(digest) <= 64 or not _HEX.issuperset(digest.lower()):
            raise FleetFileError(f"{path}: entry {str(key)[:60]!r} has no hex digest")
        out[str(key)] = digest.lower()
    return out
