"""The readiness report's "Commissioning" section: the latest fabric results and the fault drills'
timings of the window, from the same history the rest of the report reads.

- Fabric: per (check, node) of the ``fabric.*`` results (``fabric check|node|consistency --spool``,
  the burn-in's ``fabric.counters``), the latest run's results of that check: its status and every
  result that is not a pass, named (component and message).
- Drills: per ``drill.NAME`` (``healthcheck drill run``), the number of runs, how many failed, and the
  mean of each stage (``detect_s``, ``drain_s``, ``requeue_s``, ``resume_s``) over the runs that reached
  it; ``detect_runs`` gives "time to detect: N prolog(s)" (HealthCheckProgram runs for ctld-restart,
  which detects through it).

- RDMA pairs: the latest run's ``fabric.rdma.pair`` cells (the burn-in's RDMA phase): per test and rail,
  node x node GB/s, low pairs marked (the heatmap).
- P2P: per node, the latest ``fabric node`` run's ``fabric.node.p2p.pair`` cells (nvbandwidth GPU x GPU
  GB/s, slow pairs marked).
- Consistency: the latest ``fabric.consistency`` run (``fabric consistency --spool`` or a burn-in job):
  per item the majority and the odd values with their folded nodes (read back from the finding's message,
  the format of ``fabric/runrecord.py``).
- Drill failures: per node, the drills whose latest run there failed.
- Readiness (``report/readiness.py``, set by ``build_report``): one verdict per node and for the cluster.

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
RDMA_PAIR = "fabric.rdma.pair"
P2P_PAIR = "fabric.node.p2p.pair"
CONSISTENCY = "fabric.consistency"
CELL_CHECKS = (RDMA_PAIR, P2P_PAIR)  # drawn as matrices, not listed in the fabric table
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
class PairMap:
    """Cells of one run: RDMA pairs (key ``TEST rail N DEVICE``, a/b nodes) or one node's P2P matrices
    (key the nvbandwidth test, a/b ``GPUr``/``GPUc``)."""
    node: str          # the node judged (P2P) or the batch host that ran the phase (RDMA)
    run_id: str
    started_at: str
    cells: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # key -> [{a, b, gbyte_s, low}]


@dataclass
class ConsistencyItem:
    item: str
    status: str
    majority: str
    odd: list[list[str]] = field(default_factory=list)  # [value, folded nodes]


@dataclass
class Commissioning:
    fabric: list[FabricLatest] = field(default_factory=list)
    drills: list[DrillTiming] = field(default_factory=list)
    rdma: PairMap | None = None
    p2p: list[PairMap] = field(default_factory=list)
    consistency: list[ConsistencyItem] = field(default_factory=list)
    consistency_from: str = ""  # "node at time" of the consistency run shown
    drill_failures: dict[str, list[str]] = field(default_factory=dict)  # node -> drills whose latest run failed
    readiness: Any = None  # report.readiness.Readiness (build_report)

    @property
    def empty(self) -> bool:
        return not self.fabric and not self.drills and self.rdma is None and not self.p2p

    def to_dict(self) -> dict[str, Any]:
        return {"fabric": [asdict(f) for f in self.fabric],
                "drills": [{**asdict(d), "detect_text": d.detect_text} for d in self.drills],
                "rdma": asdict(self.rdma) if self.rdma is not None else None,
                "p2p": [asdict(m) for m in self.p2p],
                "consistency": [asdict(i) for i in self.consistency], "consistency_from": self.consistency_from,
                "drill_failures": {k: list(v) for k, v in self.drill_failures.items()},
                "readiness": self.readiness.to_dict() if self.readiness is not None else None}


def _iso(ts: Any) -> str:
    return pd.Timestamp(ts).tz_convert("UTC").strftime("%Y-%m-%dT%H:%M:%SZ") if pd.notna(ts) else ""


def _text(value: Any) -> str:
    return "" if value is None or (isinstance(value, float) and value != value) else str(value)


def _fabric(results: pd.DataFrame) -> list[FabricLatest]:
    checks = results["check"].astype(str)
    fab = results[checks.str.startswith(FABRIC_PREFIX) & ~checks.isin(CELL_CHECKS)]
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


def _latest_runs(rows: pd.DataFrame, by: str | None) -> pd.DataFrame:
    """The rows of the latest run (per ``by`` when given: one latest run per value of that column)."""
    rows = rows.assign(run_id=rows["run_id"].astype(str), node=rows["node"].astype(str))
    order = rows.sort_values(["started_at", "run_id"], kind="stable")
    last = order.drop_duplicates([by] if by else ["check"], keep="last")[["run_id"] + ([by] if by else [])]
    return rows[rows["run_id"].isin(set(last["run_id"]))]


def _cells(results: pd.DataFrame, metrics: pd.DataFrame | None, check: str, per_node: bool) -> list[PairMap]:
    res = results[results["check"].astype(str) == check]
    if res.empty:
        return []
    res = _latest_runs(res, "node" if per_node else None)
    values: dict[tuple[str, str], float] = {}
    if metrics is not None and len(metrics):
        met = metrics[(metrics["check"].astype(str) == check) & (metrics["name"].astype(str) == "gbyte_s")
                      & metrics["run_id"].astype(str).isin(set(res["run_id"]))]
        values = {(str(r.run_id), _text(r.component)): float(r.value) for r in met.itertuples(index=False)
                  if pd.notna(r.value)}
    maps: dict[str, PairMap] = {}
    for r in res.sort_values(["run_id", "component"], key=lambda c: c.map(_text)).itertuples(index=False):
        comp = _text(r.component)
        m = maps.setdefault(str(r.run_id), PairMap(str(r.node), str(r.run_id), _iso(r.started_at)))
        if check == RDMA_PAIR:  # TEST/DEVICE/A,B
            parts = comp.split("/")
            if len(parts) != 3 or "," not in parts[2]:
                continue
            key, (a, b) = f"{parts[0]} {parts[1]}", parts[2].split(",", 1)  # the device names the rail
        else:  # TEST/GPUr>GPUc
            test, _, pair = comp.rpartition("/")
            if not test or ">" not in pair:
                continue
            key, (a, b) = test, pair.split(">", 1)
        value = values.get((str(r.run_id), comp))
        m.cells.setdefault(key, []).append({"a": a, "b": b, "gbyte_s": value,
                                            "low": str(r.status) != "pass"})
    return sorted((m for m in maps.values() if m.cells), key=lambda m: m.node)


def _consistency(results: pd.DataFrame) -> tuple[list[ConsistencyItem], str]:
    res = results[results["check"].astype(str) == CONSISTENCY]
    if res.empty:
        return [], ""
    res = _latest_runs(res, None)
    first = res.iloc[0]
    items = []
    for r in res.sort_values("component", key=lambda c: c.map(_text)).itertuples(index=False):
        item, status, msg = _text(r.component), str(r.status), _text(r.message)
        if not item:
            continue
        rest = msg[len(item) + 2:] if msg.startswith(f"{item}: ") else msg
        if status == "pass":
            items.append(ConsistencyItem(item, status, rest.rsplit(" on ", 1)[0]))
            continue
        odd_text, base = rest, ""
        if rest.endswith(")") and " (" in rest:
            odd_text, base = rest[:-1].rsplit(" (", 1)
        majority = base[len("majority "):].rsplit(" on ", 1)[0] if base.startswith("majority ") else base
        odd = [list(part.rsplit(" on ", 1)) if " on " in part else [part, ""] for part in odd_text.split("; ")]
        items.append(ConsistencyItem(item, status, majority, odd))
    return items, f"{first.node} at {_iso(res['started_at'].max())}"


def _drill_failures(results: pd.DataFrame) -> dict[str, list[str]]:
    res = results[results["check"].astype(str).str.startswith(DRILL_PREFIX)]
    if res.empty:
        return {}
    res = res.assign(check=res["check"].astype(str), node=res["node"].astype(str), run_id=res["run_id"].astype(str))
    latest = res.sort_values(["started_at", "run_id"], kind="stable").drop_duplicates(["check", "node"], keep="last")
    out: dict[str, list[str]] = {}
    for r in latest.itertuples(index=False):
        if str(r.status) in ("fail", "error"):
            out.setdefault(r.node, []).append(r.check[len(DRILL_PREFIX):])
    return {k: sorted(v) for k, v in sorted(out.items())}


def from_frames(results: pd.DataFrame | None, metrics: pd.DataFrame | None) -> Commissioning:
    """The section from the window's results and metrics frames (``load_frames`` columns)."""
    if results is None or results.empty:
        return Commissioning()
    rdma = _cells(results, metrics, RDMA_PAIR, per_node=False)
    items, source = _consistency(results)
    return Commissioning(_fabric(results), _drills(results, metrics), rdma[0] if rdma else None,
                         _cells(results, metrics, P2P_PAIR, per_node=True), items, source, _drill_failures(results))


def load_sql(conn, sqlite: bool, since: Any, now: Any) -> Commissioning:
    """The same section from the database: only the ``fabric.*`` and ``drill.*`` rows of the window."""
    from sqlalchemy import or_

    from ..history import schema
    from .sqlwindow import metric_names, result_checks, window_frame

    def frame(table, columns, where):
        return window_frame(conn, sqlite, table, columns, where, since, now)

    r, m = schema.results, schema.metrics
    checks = result_checks(conn, lambda c: c.startswith((FABRIC_PREFIX, DRILL_PREFIX)))
    if not checks:
        return Commissioning()
    results = frame(r, ["run_id", "node", "started_at", "check", "component", "status", "message"],
                    r.c.check.in_(checks))
    def cells(t):
        return or_(t.c.check.startswith(DRILL_PREFIX, autoescape=True), t.c.check.in_(CELL_CHECKS))

    names = metric_names(conn, cells)  # through the (name, started_at) index, not a scan for the check
    metrics = frame(m, ["run_id", "node", "started_at", "check", "component", "name", "value"],
                    m.c.name.in_(names) & cells(m)) if names else None
    return from_frames(results, metrics)
