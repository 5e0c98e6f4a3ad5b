"""The burn-in's rack-level localisation (issue 33.5): NVLink-fabric FAILs (gpu.fabric, gpu.nvlink.*,
nvlink.imex, NVSwitch SXids) that more than half of one declared NVLink domain's trays share are one
fault of the domain (a switch tray, the backplane), named by a job finding ``burnin.nvlink_domain``;
its trays are not drained for that cause (the rule: ``healthcheck.policies.nvldomain``). Pure."""
from __future__ import annotations

from typing import Any, Iterable, Mapping

from ..core.model import Finding, Status
from ..policies.nvldomain import domain_faults, fabric_cause

CHECK = "burnin.nvlink_domain"


def declared(config: Any) -> tuple[dict[str, str], dict[str, int]]:
    """(node -> NVLink domain, domain -> node count) from a loaded config's ``[topology]`` (the level
    ``[slurm] drain_cap_level`` names, else ``nvlink``); empty without a config or such a level."""
    if config is None:
        return {}, {}
    from ..config.topology import nvlink_domains

    slurm = getattr(config, "slurm", None)
    _level, of, sizes = nvlink_domains(config.section("topology"), getattr(slurm, "drain_cap_level", "") or "")
    return of, sizes


def faults(per_node: Mapping[str, Any], domain_of: Mapping[str, str], sizes: Mapping[str, int]) -> list[dict]:
    """The shared domain causes among the nodes' FAIL findings (``per_node``: node -> an outcome with
    ``findings``)."""
    if not domain_of:
        return []
    causes = {n: [c for f in o.findings if f.status is Status.FAIL and (c := fabric_cause(f.check, f.metrics))]
              for n, o in per_node.items()}
    return domain_faults(causes, domain_of, sizes)


def findings(rows: Iterable[dict]) -> list[Finding]:
    """One job finding per shared domain cause, the domain as its component."""
    return [Finding(CHECK, Status.FAIL, r["text"][:300], r["domain"],
                    {"n_nodes": float(r["n_nodes"]), "domain_size": float(r["domain_size"])}) for r in rows]


def own_failures(node: str, found: Iterable[Finding], rows: Iterable[dict]) -> list[Finding]:
    """The node's FAIL findings that are not its domain's shared cause."""
    held = {r["cause"] for r in rows if node in r["nodes"]}
    return [f for f in found if f.status is Status.FAIL and fabric_cause(f.check, f.metrics) not in held]
