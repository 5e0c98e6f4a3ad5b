"""The readiness report's "Commissioning" section: the latest fabric results and the fault drills'
timings of the window, from the same history the rest of the report reads.

- Fabric: per (check, node) of the ``fabric.*`` results (``fabric check|node|consistency --spool``,
  the burn-in's ``fabric.counters``), the latest run's results of that check: its status and every
  result that is not a pass, named (component and message).
- Drills: per ``drill.NAME`` (``healthcheck drill run``), the number of runs, how many failed, and the
  mean of each stage (``detect_s``, ``drain_s``, ``requeue_s``, ``resume_s``) over the runs that reached
  it; ``detect_runs`` gives "time to detect: N prolog(s)" (HealthCheckProgram runs for ctld-restart,
  which detects through it).

Two producers, one reduction: :func:`from_frames` (the ``load_frames`` results and metrics frames)
and :func:`load_sql` (the same rows selected from the database, then :func:`from_frames`), so both
report paths give equal sections. Plain values only (times as ISO text, means rounded to the
millisecond): ``Summary`` equality holds across the paths.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import pandas as pd

FABRIC_PREFIX = "fabric."
DRILL_PREFIX = "drill."
STAGES = ("detect_s", "drain_s", "requeue_s", "resume_s")
DETECT_RUNS = "detect_runs"
DETECT_HOOK = {"ctld-restart": "HealthCheckProgram run"}  # else: the prolog detects
MAX_NAMED = 50  # deviations named per fabric check (the count says how many there were)
_ORDER = {"fail": 0, "error": 1, "warn": 2, "skip": 3, "pass": 4}


@dataclass
class FabricLatest:
    check: str
    node: str
    started_at: str
    status: str
    results: int
    deviations: list[dict[str, str]] = field(default_factory=list)  # component, status, message
    more: int = 0  # deviations beyond MAX_NAMED


@dataclass
class DrillTiming:
    drill: str
    runs: int
    failed: int
    mean_s: dict[str, float]       # stage -> mean seconds over the runs that reached it
    reached: dict[str, int]        # stage -> runs that reached it
    detect_runs: float | None      # mean hook runs up to the detecting one
    last_at: str

    @property
    def detect_text(self) -> str:
        if self.detect_runs is None:
            return ""
        n = round(self.detect_runs, 1)
        shown = f"{n:g}"
        hook = DETECT_HOOK.get(self.drill, "prolog")
        return f"time to detect: {shown} {hook}{'' if n == 1 else 's'}"


@dataclass
class Commissioning:
    fabric: list[FabricLatest] = field(default_factory=list)
    drills: list[DrillTiming] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.fabric and not self.drills

    def to_dict(self) -> dict[str, Any]:
        return {"fabric": [asdict(f) for f in self.fabric],
                "drills": [{**asdict(d), "detect_text": d.detect_text} for d in self.drills]}


def _iso(ts: Any) -> str:
    return pd.Timestamp(ts).tz_convert("UTC").strftime("%Y-%m-%dT%H:%M:%SZ") if pd.notna(ts) else ""


def _text(value: Any) -> str:
    return "" if value is None or (isinstance(value, float) and value != value) else str(value)


def _fabric(results: pd.DataFrame) -> list[FabricLatest]:
    fab = results[results["check"].astype(str).str.startswith(FABRIC_PREFIX)]
    if fab.empty:
        return []
    fab = fab.assign(check=fab["check"].astype(str), node=fab["node"].astype(str), run_id=fab["run_id"].astype(str))
    latest = fab.sort_values(["started_at", "run_id"], kind="stable").drop_duplicates(["check", "node"], keep="last")
    out = []
    for key in latest.itertuples(index=False):
        rows = fab[(fab["check"] == key.check) & (fab["node"] == key.node) & (fab["run_id"] == key.run_id)]
        rows = rows.assign(status=rows["status"].astype(str), component=rows["component"].map(_text),
                           message=rows["message"].map(_text))
        status = min(rows["status"], key=lambda s: _ORDER.get(s, 5))
        bad = rows[rows["status"] != "pass"].sort_values(["status", "component", "message"],
                                                         key=lambda c: c.map(_ORDER) if c.name == "status" else c)
        named = [{"component": r.component, "status": r.status, "message": r.message}
                 for r in bad.head(MAX_NAMED).itertuples(index=False)]
        out.append(FabricLatest(key.check, key.node, _iso(key.started_at), status, int(len(rows)), named,
                                max(0, len(bad) - MAX_NAMED)))
    out.sort(key=lambda f: (_ORDER.get(f.status, 5), f.check, f.node))
    return out


def _drills(results: pd.DataFrame, metrics: pd.DataFrame) -> list[DrillTiming]:
    res = results[results["check"].astype(str).str.startswith(DRILL_PREFIX)]
    met = metrics[metrics["check"].astype(str).str.startswith(DRILL_PREFIX)] if metrics is not None and len(metrics) \
        else None
    if res.empty:
        return []
    out = []
    for check, rows in res.groupby(res["check"].astype(str), sort=True):
        name = check[len(DRILL_PREFIX):]
        runs = rows.drop_duplicates("run_id")
        m = met[met["check"].astype(str) == check] if met is not None and len(met) else None
        mean, reached, detect = {}, {}, None
        if m is not None and len(m):
            for stage, vals in m.groupby(m["name"].astype(str), sort=True):
                values = sorted(float(v) for v in vals["value"] if pd.notna(v))
                if not values:
                    continue
                avg = round(sum(values) / len(values), 3)
                if stage in STAGES:
                    mean[stage], reached[stage] = avg, len(values)
                elif stage == DETECT_RUNS:
                    detect = avg
        out.append(DrillTiming(name, int(len(runs)), int((runs["status"].astype(str) != "pass").sum()), mean, reached,
                               detect, _iso(rows["started_at"].max())))
    return out


def from_frames(results: pd.DataFrame | None, metrics: pd.DataFrame | None) -> Commissioning:
    """The section from the window's results and metrics frames (``load_frames`` columns)."""
    if results is None or results.empty:
        return Commissioning()
    return Commissioning(_fabric(results), _drills(results, metrics))


def load_sql(conn, sqlite: bool, since: Any, now: Any) -> Commissioning:
    """The same section from the database: only the ``fabric.*`` and ``drill.*`` rows of the window."""
    from sqlalchemy import String, or_, select, type_coerce

    from ..history import schema

    def when(col):
        return type_coerce(col, String()).label(col.name) if sqlite else col

    def frame(table, columns, where):
        cols = [when(table.c[c]) if c == "started_at" else table.c[c] for c in columns]
        rows = conn.execute(select(*cols).where(where & (table.c.started_at >= since) & (table.c.started_at <= now))
                            ).all()
        df = pd.DataFrame.from_records([tuple(r) for r in rows], columns=columns)
        df["started_at"] = pd.to_datetime(df["started_at"], utc=True, format="ISO8601")
        return df.astype({"value": "float64"}) if "value" in df.columns else df

    since, now = pd.Timestamp(since).to_pydatetime(), pd.Timestamp(now).to_pydatetime()
    r, m = schema.results, schema.metrics
    results = frame(r, ["run_id", "node", "started_at", "check", "component", "status", "message"],
                    or_(r.c.check.startswith(FABRIC_PREFIX, autoescape=True),
                        r.c.check.startswith(DRILL_PREFIX, autoescape=True)))
    metrics = frame(m, ["run_id", "node", "started_at", "check", "component", "name", "value"],
                    m.c.check.startswith(DRILL_PREFIX, autoescape=True))
    return from_frames(results, metrics)
