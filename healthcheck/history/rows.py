"""Spool records -> table rows: validation and normalisation, pure (no I/O, no clock).

Accepted record shapes (written by healthcheck/slurm/actions.py and ``healthcheck check``):

    run:    {"kind":"run","record_id","run_id","node","context","job_id"|null,"job_nodes"|null (hostlist,
             optional),"started_at":ISO-8601,
             "duration_s","status","results":[{"check","status","message","component"|null,
             "metrics":{name: number}}],"config_hash"|null,"tool_version",
             "burnin": {"gemm_digests": {component: [fleet_key, hex digest]}, ...} (optional; burn-in runs)}
    action: {"kind":"action","record_id","run_id","node","time":ISO-8601,"action":"drain"|"resume",
             "reason","job_id"|null,"context","why","checks":[...]}

An optional ``"schema_version"`` (absent means 1) lets a future writer change the shape: a version this
code does not know is refused with that reason rather than half-understood. Timestamps without a zone
are taken as UTC ("2024-05-01T10:00:00Z", "+00:00" offsets and naive forms all occur). Non-finite metric
values (NaN/Infinity, which Python's json accepts) are dropped. Anything else wrong raises
``RecordInvalid`` naming the field.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from datetime import datetime, timezone
from typing import Any, Callable

from .schema import unit_of

_unit = lru_cache(maxsize=4096)(unit_of)  # metric names are few; their suffix scan is not free

KNOWN_SCHEMA_VERSIONS = (1,)
STATUSES = ("pass", "warn", "fail", "error", "skip")
FLAGGED = ("fail", "warn", "error")  # counted in runs.n_flagged
ACTIONS = ("drain", "resume")


class RecordInvalid(ValueError):
    """A record that cannot be stored; the message says which field and why."""


@dataclass
class RunRows:
    """One run record as rows, each a tuple: ``run`` in RUN_COLUMNS order (ending with the run's own
    counts: results, metrics, flagged results), results/metrics in RESULT_COLUMNS / METRIC_COLUMNS order,
    with started_at as an aware UTC datetime (or its ``stamp``)."""

    run: tuple
    results: list[tuple]
    metrics: list[tuple]
    digests: list[tuple] = field(default_factory=list)  # DIGEST_COLUMNS order

    @property
    def run_id(self) -> str:
        return self.run[0]

    def run_dict(self) -> dict[str, Any]:
        return dict(zip(RUN_COLUMNS, self.run))


RUN_COLUMNS = ("run_id", "record_id", "node", "context", "job_id", "started_at", "duration_s", "status",
               "config_hash", "tool_version", "ingested_at", "job_nodes", "n_results", "n_metrics", "n_flagged")
RESULT_COLUMNS = ("run_id", "seq", "node", "started_at", "check", "component", "status", "message")
METRIC_COLUMNS = ("run_id", "seq", "name", "node", "started_at", "check", "component", "value", "unit")
DIGEST_COLUMNS = ("run_id", "component", "fleet_key", "node", "started_at", "digest")
ACTION_COLUMNS = ("record_id", "run_id", "node", "time", "action", "reason", "job_id", "context", "why",
                  "checks")


def _str(rec: dict, key: str, limit: int, required: bool = True) -> str | None:
    value = rec.get(key)
    if value is None:
        if required:
            raise RecordInvalid(f"missing {key!r}")
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise RecordInvalid(f"{key!r} must be a string, got {type(value).__name__}")
    value = str(value)
    if required and not value:
        raise RecordInvalid(f"empty {key!r}")
    if len(value) > limit:
        raise RecordInvalid(f"{key!r} longer than {limit} characters")
    return value


def _time(rec: dict, key: str) -> datetime:
    value = rec.get(key)
    if not isinstance(value, str):
        raise RecordInvalid(f"{key!r} must be an ISO-8601 time, got {type(value).__name__}")
    try:
        when = datetime.fromisoformat(value.strip())
    except ValueError:
        raise RecordInvalid(f"{key!r} is not an ISO-8601 time: {value[:40]!r}") from None
    if when.tzinfo is None:
        return when.replace(tzinfo=timezone.utc)
    return when.astimezone(timezone.utc)


def _status(value: Any, where: str) -> str:
    if value not in STATUSES:
        raise RecordInvalid(f"{where}status {str(value)[:20]!r} is not one of {', '.join(STATUSES)}")
    return value


def check_version(rec: dict) -> None:
    version = rec.get("schema_version", 1)
    if version not in KNOWN_SCHEMA_VERSIONS:
        raise RecordInvalid(f"unknown schema_version {str(version)[:20]} (this healthcheck reads "
                            f"{', '.join(map(str, KNOWN_SCHEMA_VERSIONS))}; upgrade it)")


def run_rows(rec: dict, ingested_at: Any, stamp: Callable[[datetime], Any] | None = None) -> RunRows:
    """The rows of a "run" record; RecordInvalid when it cannot be stored. ``stamp`` (optional) turns
    the run's aware UTC start time into the value stored (SQLite: its text form), once per run."""
    check_version(rec)
    run_id = _str(rec, "run_id", 64)
    node = _str(rec, "node", 255)
    started = _time(rec, "started_at")
    if stamp is not None:
        started = stamp(started)
    duration = rec.get("duration_s")
    if duration is not None and (isinstance(duration, bool) or not isinstance(duration, (int, float))):
        raise RecordInvalid(f"'duration_s' must be a number, got {type(duration).__name__}")
    head = (run_id, _str(rec, "record_id", 64), node, _str(rec, "context", 32),
            _str(rec, "job_id", 64, required=False), started, float(duration) if duration is not None else None,
            _status(rec.get("status"), ""), _str(rec, "config_hash", 64, required=False),
            _str(rec, "tool_version", 64, required=False), ingested_at,
            _str(rec, "job_nodes", 65_536, required=False))
    findings = rec.get("results", [])
    if not isinstance(findings, list):
        raise RecordInvalid(f"'results' must be a list, got {type(findings).__name__}")
    results, metrics = [], []
    flagged = 0
    for seq, item in enumerate(findings):
        if type(item) is not dict:
            raise RecordInvalid(f"results[{seq}] must be an object")
        check, component, status, message = (item.get("check"), item.get("component"), item.get("status"),
                                             item.get("message"))
        # the common, well-formed case without a function call per field; anything else is re-checked
        # by the slow path, which names the bad field
        if not (type(check) is str and 0 < len(check) <= 128 and status in STATUSES
                and (component is None or (type(component) is str and len(component) <= 128))):
            try:
                check = _str(item, "check", 128)
                component = _str(item, "component", 128, required=False)
                status = _status(status, "")
            except RecordInvalid as exc:
                raise RecordInvalid(f"results[{seq}]: {exc}") from None
        if message is not None and type(message) is not str:
            message = str(message)
        results.append((run_id, seq, node, started, check, component, status, message))
        if status in FLAGGED:
            flagged += 1
        values = item.get("metrics")
        if not values:
            continue
        if not isinstance(values, dict):
            raise RecordInvalid(f"results[{seq}].metrics must be an object")
        for name, value in values.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or len(name) > 128:
                raise RecordInvalid(f"results[{seq}].metrics[{name[:40]!r}] is not a number")
            if math.isfinite(value):
                metrics.append((run_id, seq, name, node, started, check, component, float(value), _unit(name)))
    # the run's own row counts (rollups, see healthcheck.history.rollups): facts of the record itself
    return RunRows(head + (len(results), len(metrics), flagged), results, metrics,
                   digest_rows(rec, run_id, node, started))


_HEX = frozenset("0123456789abcdef")


def digest_rows(rec: dict, run_id: str, node: str, started: Any) -> list[tuple]:
    """The GEMM result digests of a burn-in run (``burnin.gemm_digests``: component -> [fleet key, hex
    digest]) as DIGEST_COLUMNS rows; [] for other runs. RecordInvalid names a malformed entry."""
    burnin = rec.get("burnin")
    if not isinstance(burnin, dict) or not burnin.get("gemm_digests"):
        return []
    digests = burnin["gemm_digests"]
    if not isinstance(digests, dict):
        raise RecordInvalid("'burnin.gemm_digests' must be an object")
    rows = []
    for component, pair in digests.items():
        where = f"burnin.gemm_digests[{str(component)[:40]!r}]"
        if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(x, str) for x in pair)):
            raise RecordInvalid(f"{where} must be [fleet key, hex digest]")
        key, digest = pair[0], pair[1].lower()
        if not 0 < len(component) <= 128 or not 0 < len(key) <= 255:
            raise RecordInvalid(f"{where}: component or fleet key empty or too long")
        if not 12 <= len(digest) <= 64 or not _HEX.issuperset(digest):
            raise RecordInvalid(f"{where}: digest must be 12 to 64 hex digits")
        rows.append((run_id, component, key, node, started, digest))
    return rows


def action_row(rec: dict, stamp: Callable[[datetime], Any] | None = None) -> tuple:
    """The row of an "action" record (ACTION_COLUMNS order); RecordInvalid when it cannot be stored."""
    check_version(rec)
    action = rec.get("action")
    if action not in ACTIONS:
        raise RecordInvalid(f"action {str(action)[:20]!r} is not one of {', '.join(ACTIONS)}")
    checks = rec.get("checks") or []
    if not isinstance(checks, list) or not all(isinstance(c, str) for c in checks):
        raise RecordInvalid("'checks' must be a list of check names")
    return (_str(rec, "record_id", 64), _str(rec, "run_id", 64, required=False), _str(rec, "node", 255),
            stamp(_time(rec, "time")) if stamp else _time(rec, "time"), action, _str(rec, "reason", 10_000, required=False),
            _str(rec, "job_id", 64, required=False), _str(rec, "context", 32, required=False),
            _str(rec, "why", 10_000, required=False), ",".join(checks) or None)
