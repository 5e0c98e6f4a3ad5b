"""A rack-level NVLink fault blamed on the rack (issue 33.5), as data: which findings are the NVLink
fabric's, and when one NVLink domain shares them.

An NVL72 rack's 18 compute trays reach each other only through its NVLink switch trays and backplane:
a fault there shows on most trays at once (fabric health Unhealthy, links down, the IMEX domain DOWN,
NVSwitch SXids), and draining 17 trays for it repairs nothing. So a fabric cause that more than half of
one declared domain's nodes fail together (``DOMAIN_SHARE``) is named once, as the domain's, and its
trays are not drained for it; a tray whose own fault stands apart (a cause its domain does not share,
or the other checks) is judged as ever.

The domains are the config's ``[topology.<level>]`` groups (``healthcheck.config.topology.nvlink_domains``).
Pure: used by the burn-in's allocation step, the sweep and the report's shared-cause table.
"""
from __future__ import annotations

from typing import Iterable, Mapping

# the NVLink fabric's checks, by name or prefix ("gpu.nvlink." covers every gpu.nvlink.* check); an NVSwitch
# SXid is a gpu.xid finding whose metrics count "sxid_<code>" events
FABRIC_CHECKS = ("gpu.fabric", "nvlink.imex")
FABRIC_PREFIXES = ("gpu.nvlink.",)
SXID_CAUSE = "SXid"
SXID_METRIC = "sxid_"
DOMAIN_SHARE = 0.5  # a cause shared by MORE than this share of a domain's nodes is the domain's
WHY = "a switch tray or the backplane"


def fabric_cause(check: str | None, metrics: Mapping[str, float] | None = None) -> str | None:
    """The NVLink-fabric cause a finding (or a report's evidence row) stands for: the check's name, or
    ``SXid`` for a gpu.xid finding that counts SXid events; None for every other finding."""
    if not check:
        return None
    if check in FABRIC_CHECKS or check.startswith(FABRIC_PREFIXES):
        return check
    if check == "gpu.xid" and any(str(k).startswith(SXID_METRIC) for k in (metrics or {})):
        return SXID_CAUSE
    return None


def shared_by_domain(n_nodes: int, domain_size: int) -> bool:
    """More than ``DOMAIN_SHARE`` of the domain's nodes (at least 2: one node's fault is its own)."""
    return n_nodes >= 2 and domain_size > 0 and n_nodes > DOMAIN_SHARE * domain_size


def domain_text(domain: str, cause: str, n_nodes: int, domain_size: int, how: str = "failing") -> str:
    return (f"NVLink domain {domain}: {cause} {how} on {n_nodes} of {domain_size} trays: {WHY}, "
            f"not {n_nodes} node faults")


def domain_faults(causes: Mapping[str, Iterable[str]], domain_of: Mapping[str, str],
                  domain_sizes: Mapping[str, int]) -> list[dict]:
    """``causes``: node -> the fabric causes it fails; ``domain_of``: node -> its declared domain;
    ``domain_sizes``: domain -> its declared node count. One row per (domain, cause) shared by more than
    half of the domain: {domain, cause, nodes, n_nodes, domain_size, text}, sorted by domain then cause."""
    members: dict[tuple[str, str], set[str]] = {}
    for node, found in causes.items():
        domain = domain_of.get(node)
        if domain is None:
            continue
        for cause in set(found):
            members.setdefault((domain, cause), set()).add(node)
    out = []
    for (domain, cause), nodes in sorted(members.items()):
        size = int(domain_sizes.get(domain) or 0)
        if shared_by_domain(len(nodes), size):
            out.append({"domain": domain, "cause": cause, "nodes": sorted(nodes), "n_nodes": len(nodes),
                        "domain_size": size, "text": domain_text(domain, cause, len(nodes), size)})
    return out
