"""The fleet view of one sweep's results: version drift across the nodes of a class, thermal or
power events that hit nodes of one rack/chassis/power group together (a facility issue, not N node
faults), and NVLink-fabric failures shared by most trays of one declared NVLink domain (the domain's
fault: a switch tray or the backplane; healthcheck/policies/nvldomain.py). Pure apart from pandas; fed
with the nodes' burn-in records and the config."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

FACILITY_CHECKS = frozenset({"gpu.temperature", "gpu.throttle", "gpu.power", "burnin.telemetry"})


@dataclass
class FleetView:
    drift: list[str] = field(default_factory=list)         # one line per (class, item) that drifts
    drift_fail: list[str] = field(default_factory=list)    # nodes off an explicit expectation
    facility: list[dict[str, Any]] = field(default_factory=list)
    facility_nodes: set[str] = field(default_factory=set)
    domain_faults: list[dict[str, Any]] = field(default_factory=list)  # policies.nvldomain.domain_faults rows

    def to_dict(self) -> dict[str, Any]:
        return {"drift": self.drift, "drift_fail": sorted(self.drift_fail), "facility": self.facility,
                "facility_nodes": sorted(self.facility_nodes), "domain_faults": self.domain_faults}


def fleet_view(records: dict[str, dict[str, Any]], config) -> FleetView:
    import pandas as pd

    from ..analysis.correlated import correlated_events, events_from_results, facility_nodes
    from ..analysis.drift import drift_summary, version_drift
    from ..config.topology import node_groups

    view = FleetView()
    rows, expected = [], {}
    for node, rec in records.items():
        b = rec.get("burnin") or {}
        cls = b.get("node_class") or "-"
        for item, value in (b.get("versions") or {}).items():
            if isinstance(value, str) and value:
                rows.append({"node": node, "node_class": cls, "item": item, "value": value})
        if cls != "-" and cls not in expected and config is not None:
            try:
                expected[cls] = dict(config.expectations_for(node).versions)
            except Exception:  # noqa: BLE001 - a class without expectations: the majority alone judges
                expected[cls] = {}
    if rows:
        drift = version_drift(pd.DataFrame(rows), expected)
        view.drift = drift_summary(drift)
        view.drift_fail = sorted(set(drift.loc[drift["severity"] == "fail", "node"]))
    topology = getattr(config, "topology", None) or {}
    results = [{"run_id": rec.get("run_id"), "node": node, "started_at": rec.get("started_at"),
                "check": r.get("check"), "component": r.get("component"), "status": r.get("status"),
                "message": r.get("message") or ""}
               for node, rec in records.items() for r in rec.get("results", [])
               if r.get("check") in FACILITY_CHECKS and r.get("status") in ("warn", "fail")]
    if topology and results:
        frame = pd.DataFrame(results)
        frame["started_at"] = pd.to_datetime(frame["started_at"], utc=True, format="ISO8601")
        events = events_from_results(frame)
        corr = correlated_events(events, node_groups(topology), window=pd.Timedelta("2h"))
        view.facility = [{k: (str(v) if k in ("start", "end") else v) for k, v in row.items()}
                         for row in corr.to_dict("records")]
        view.facility_nodes = set(facility_nodes(corr))
    view.domain_faults = nvlink_domain_faults(records, config)
    return view


def nvlink_domain_faults(records: dict[str, dict[str, Any]], config) -> list[dict[str, Any]]:
    """The NVLink-fabric FAILs (gpu.fabric, gpu.nvlink.*, nvlink.imex, SXid) that more than half of one
    declared domain's trays share ([topology.<level>], the level [slurm] drain_cap_level names, else
    nvlink); none without a config that declares domains."""
    from ..config.topology import nvlink_domains
    from ..policies.nvldomain import domain_faults, fabric_cause

    table = getattr(config, "topology", None) or {}
    slurm = getattr(config, "slurm", None)
    _level, domain_of, sizes = nvlink_domains(table, getattr(slurm, "drain_cap_level", "") or "")
    if not domain_of:
        return []
    causes = {node: [c for r in rec.get("results", []) if r.get("status") == "fail"
                     and (c := fabric_cause(r.get("check"), r.get("metrics")))]
              for node, rec in records.items()}
    return domain_faults(causes, domain_of, sizes)
