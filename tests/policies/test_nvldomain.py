"""Issue 33.5: which findings are the NVLink fabric's, and when one NVLink domain shares them (pure), and
the declared domains read from [topology] as the drain cap reads them."""
from __future__ import annotations

from healthcheck.config.topology import nvlink_domains
from healthcheck.policies.nvldomain import domain_faults, domain_text, fabric_cause, shared_by_domain

TRAYS = [f"gb{i:03d}" for i in range(1, 19)]
DOMAIN_OF = {n: "nvl01" for n in TRAYS} | {f"gb{i:03d}": "nvl02" for i in range(19, 37)}
SIZES = {"nvl01": 18, "nvl02": 18}


def test_the_fabric_causes():
    assert fabric_cause("gpu.fabric") == "gpu.fabric" and fabric_cause("nvlink.imex") == "nvlink.imex"
    assert fabric_cause("gpu.nvlink.errors") == "gpu.nvlink.errors"
    assert fabric_cause("gpu.nvlink.speed") == "gpu.nvlink.speed"
    assert fabric_cause("gpu.xid", {"xid_events": 2, "sxid_12028": 1}) == "SXid"
    assert fabric_cause("gpu.xid", {"xid_events": 1, "xid_79": 1}) is None  # a GPU's own Xid: the tray's
    for other in ("gpu.ecc", "gpu.pcie.link", "ib.port.state", "gpu.nvlinkish", "", None):
        assert fabric_cause(other) is None


def test_more_than_half_of_a_domain():
    assert shared_by_domain(10, 18) and shared_by_domain(17, 18) and shared_by_domain(2, 2)
    assert not shared_by_domain(9, 18) and not shared_by_domain(1, 1) and not shared_by_domain(3, 0)


def test_a_switch_tray_fault_is_the_domains_not_17_node_faults():
    causes = {n: ["gpu.fabric"] for n in TRAYS[:17]}
    causes["gb018"] = []  # the 18th tray shows no fabric failure
    causes["gb019"] = ["gpu.fabric"]  # one tray of the next rack: its own fault
    (row,) = domain_faults(causes, DOMAIN_OF, SIZES)
    assert (row["domain"], row["cause"], row["n_nodes"], row["domain_size"]) == ("nvl01", "gpu.fabric", 17, 18)
    assert row["nodes"] == TRAYS[:17]
    assert row["text"] == ("NVLink domain nvl01: gpu.fabric failing on 17 of 18 trays: a switch tray or the "
                           "backplane, not 17 node faults") == domain_text("nvl01", "gpu.fabric", 17, 18)


def test_half_a_domain_or_an_undeclared_node_is_no_domain_fault():
    assert domain_faults({n: ["gpu.fabric"] for n in TRAYS[:9]}, DOMAIN_OF, SIZES) == []
    assert domain_faults({f"x{i}": ["gpu.fabric"] for i in range(18)}, DOMAIN_OF, SIZES) == []
    assert domain_faults({n: ["gpu.fabric"] for n in TRAYS}, {}, {}) == []


def test_each_cause_counts_apart_and_sxids_too():
    causes = {n: ["nvlink.imex", "SXid"] for n in TRAYS[:12]} | {n: ["SXid"] for n in TRAYS[12:]}
    rows = domain_faults(causes, DOMAIN_OF, SIZES)
    assert [(r["cause"], r["n_nodes"]) for r in rows] == [("SXid", 18), ("nvlink.imex", 12)]


def test_the_declared_domains_follow_the_drain_cap_level():
    table = {"nvlink": {"nvl01": "gb[001-018]", "nvl02": "gb[019-036]"}, "rack": {"r1": "gb[001-036]"}}
    level, of, sizes = nvlink_domains(table)
    assert level == "nvlink" and of == DOMAIN_OF and sizes == SIZES
    level, of, sizes = nvlink_domains(table, "rack")
    assert level == "rack" and sizes == {"r1": 36} and of["gb036"] == "r1"
    assert nvlink_domains({"rack": {"r1": "gb[001-002]"}}) == ("nvlink", {}, {})
    assert nvlink_domains(None, "") == ("nvlink", {}, {})
