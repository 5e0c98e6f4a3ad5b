"""Issue 33.5 in the readiness report: an NVLink-fabric cause shared by more than half of one declared
NVLink domain's trays is one row naming the domain; other causes group by rack (or adjacent names) as
before, and without declared domains nothing changes."""
from __future__ import annotations

from healthcheck.report.model import NodeRisk
from healthcheck.report.shared import MIN_NODES, risk_rows, shared_causes

TRAYS = [f"gb{i:03d}" for i in range(1, 19)]
NVLINK_OF = {n: "nvl01" for n in TRAYS} | {f"gb{i:03d}": "nvl02" for i in range(19, 37)}
RACK_OF = {n: "r01" for n in TRAYS} | {f"gb{i:03d}": "r02" for i in range(19, 37)}


def risk(node: str, check: str | None, score: float = 10.0, metric: str | None = None) -> NodeRisk:
    why = [{"kind": "check", "check": check, "metric": metric, "persistent": True, "text": f"{check} failing"}]
    return NodeRisk(node, score, "idle", "gb200", [f"{check} failing"], why if check or metric else [])


def test_a_fabric_cause_of_most_of_a_domain_is_the_domains_row():
    risks = [risk(n, "gpu.fabric", 20.0 - i * 0.1) for i, n in enumerate(TRAYS[:17])] + [risk("gb018", None, 1.0)]
    (row,) = shared_causes(risks, RACK_OF, NVLINK_OF)
    assert (row["group"], row["level"], row["subject"], row["n_nodes"], row["group_size"]) == (
        "nvl01", "nvlink", "gpu.fabric", 17, 18)
    assert row["text"] == ("NVLink domain nvl01: check gpu.fabric on 17 of 18 trays: a switch tray or the backplane, "
                           "not 17 node faults")
    assert row["nodes"] == TRAYS[:17] and row["score"] == 20.0


def test_without_declared_domains_the_rack_row_is_as_before():
    risks = [risk(n, "gpu.fabric") for n in TRAYS[:17]]
    (row,) = shared_causes(risks, RACK_OF)
    assert row["group"] == "r01" and "level" not in row
    assert row["text"].startswith("check gpu.fabric on 17 of 18 nodes of rack r01: one shared cause")
    (adjacent,) = shared_causes(risks)
    assert adjacent["group"] == "gb[001-017]" and "level" not in adjacent


def test_other_causes_keep_their_rack_grouping_beside_a_domain_row():
    risks = [risk(n, "gpu.nvlink.errors") for n in TRAYS[:10]] + [risk(n, "gpu.pcie.link") for n in TRAYS[10:18]]
    risks += [risk(f"gb{i:03d}", "gpu.pcie.link") for i in range(19, 29)]  # 10 of 18 of the next rack
    rows = {(r["group"], r["subject"]): r for r in shared_causes(risks, RACK_OF, NVLINK_OF)}
    assert rows[("nvl01", "gpu.nvlink.errors")]["level"] == "nvlink"
    assert rows[("r02", "gpu.pcie.link")]["text"].startswith("check gpu.pcie.link on 10 of 18 nodes of rack r02")
    assert ("r01", "gpu.pcie.link") not in rows  # 8 of 18: not more than half of rack r01


def test_half_a_domain_or_a_non_fabric_cause_is_no_domain_row():
    half = [risk(n, "nvlink.imex") for n in TRAYS[:9]]
    assert all(r.get("level") != "nvlink" for r in shared_causes(half, RACK_OF, NVLINK_OF))
    ecc = [risk(n, "gpu.ecc") for n in TRAYS[:17]]
    (row,) = shared_causes(ecc, RACK_OF, NVLINK_OF)
    assert row["group"] == "r01" and "level" not in row  # a shared ECC cause is the rack's, as before


def test_sxid_rows_and_the_risk_table_show_the_domain_once():
    risks = [risk(n, "gpu.xid", metric="sxid_12028") for n in TRAYS[:12]] + [risk("gb030", "gpu.ecc", 5.0)]

    class Report:
        shared_causes = None

    rep = Report()
    rep.risks = risks
    rep.shared_causes = shared_causes(risks, RACK_OF, NVLINK_OF)
    assert [(r["subject"], r["n_nodes"]) for r in rep.shared_causes] == [("SXid", 12)]
    table = risk_rows(rep)
    assert [(t["node"], t["group"]) for t in table] == [("gb[001-012]", True), ("gb030", False)]
    assert table[0]["text"].startswith("NVLink domain nvl01: check SXid on 12 of 18 trays")
    assert MIN_NODES == 4  # the rack rule's floor is unchanged


def _domain_frames(fabric_nodes: list[str]):
    """18 trays x 5 health checks; the trays of ``fabric_nodes`` fail gpu.fabric in every run."""
    import pandas as pd

    now = pd.Timestamp("2026-06-01T00:00:00Z")
    runs, results = [], []
    for n, node in enumerate(TRAYS):
        for k in range(5):
            t = now - pd.Timedelta(hours=6 * (4 - k), minutes=n)
            run_id = f"{n:02d}{k:030d}"
            bad = node in fabric_nodes
            runs.append((run_id, node, "slurm-check", None, t, 0.05, "fail" if bad else "pass"))
            results.append((run_id, node, t, "gpu.fabric", "gpu0", "fail" if bad else "pass",
                            "fabric health Unhealthy" if bad else "fabric completed"))
    frames = {"runs": pd.DataFrame(runs, columns=["run_id", "node", "context", "job_id", "started_at", "duration_s",
                                                   "status"]),
              "results": pd.DataFrame(results, columns=["run_id", "node", "started_at", "check", "component", "status",
                                                         "message"]),
              "metrics": pd.DataFrame(columns=["run_id", "node", "started_at", "check", "component", "name", "value"]),
              "actions": pd.DataFrame(columns=["record_id", "run_id", "node", "time", "action", "reason", "job_id",
                                               "context"])}
    return frames, now - pd.Timedelta(days=7), now


def test_the_report_names_the_domain_declared_at_the_configs_level(tmp_path):
    """build_report reads the domains from [topology.<level>] (``nvlink_level``: [slurm] drain_cap_level,
    which report.load.nvlink_level reads from the config); without that level the trays group by rack."""
    from healthcheck.report import build_report
    from healthcheck.report.load import nvlink_level

    frames, since, now = _domain_frames(TRAYS[:16])
    topology = {"rack": {"r01": TRAYS}, "nvl": {"nvl01": TRAYS}}
    rep = build_report(frames, since, now, topology=topology, nvlink_level="nvl")
    (row,) = [c for c in rep.shared_causes if c.get("level") == "nvlink"]
    assert row["group"] == "nvl01" and row["n_nodes"] == 16 and row["text"].startswith("NVLink domain nvl01:")
    plain = build_report(frames, since, now, topology={"rack": {"r01": TRAYS}})
    assert plain.shared_causes and all("level" not in c for c in plain.shared_causes)
    cfg = tmp_path / "healthcheck.toml"
    cfg.write_text('[slurm]\ndrain_cap_level = "nvl"\n')
    assert nvlink_level(str(cfg)) == "nvl" and nvlink_level(None) == ""
