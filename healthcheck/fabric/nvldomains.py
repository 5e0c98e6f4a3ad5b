"""The declared NVLink domains against what the nodes' GPUs report (issue 33.6, commissioning as code).

Declared: ``[topology.<level>]`` groups (one group an NVL72 rack's 18 trays: ``nvl01 = "gb[001-018]"``),
the level the site uses for its domains (``[slurm] drain_cap_level``, else ``nvlink``). Seen: per node,
each GPU's fabric cluster UUID and clique id (NVML's GpuFabricInfo; ``nvidia-smi -q`` "Fabric"). Pure:
(declared, seen) -> deviations, each naming the node(s), the domain and what differs:

- ``no_reading``: a declared node with no reading given;
- ``no_domain``: a node whose GPUs report no domain (clique 0, cluster UUID unset or all zeros): the
  fabric manager / NVLink switches did not take it in;
- ``split_node``: a node whose GPUs report more than one (cluster UUID, clique);
- ``odd_member``: a node of a declared domain reporting another (UUID, clique) than the domain's majority;
- ``domains_merged``: two declared domains whose majorities are the same (UUID, clique): one NVLink domain
  declared as two (or two racks cabled as one);
- ``undeclared_member``: a node declared in no domain that reports the (UUID, clique) of a declared one.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

NO_UUID = "00000000-0000-0000-0000-000000000000"

Identity = tuple[str, int]  # (cluster UUID, clique id)


@dataclass
class Deviation:
    kind: str
    nodes: list[str]
    domain: str | None
    message: str


@dataclass
class DomainReport:
    domains: dict[str, dict] = field(default_factory=dict)  # name -> {"nodes", "identity", "agree"}
    deviations: list[Deviation] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.deviations

    def to_dict(self) -> dict:
        return {"ok": self.ok, "domains": self.domains, "deviations": [asdict(d) for d in self.deviations]}


def node_identity(gpus) -> tuple[set[Identity], int]:
    """The (cluster UUID, clique) pairs a node's GPUs report, and how many GPUs report none."""
    seen: set[Identity] = set()
    none = 0
    for gpu in gpus or []:
        uuid = (getattr(gpu, "fabric_cluster_uuid", None) or "").strip().lower()
        clique = getattr(gpu, "fabric_clique_id", None)
        if not uuid or uuid == NO_UUID or not clique:
            none += 1
        else:
            seen.add((uuid, int(clique)))
    return seen, none


def _show(identity: Identity) -> str:
    return f"cluster {identity[0]} clique {identity[1]}"


def compare(declared: dict[str, list[str]], seen: dict[str, list]) -> DomainReport:
    """``declared``: domain -> its nodes; ``seen``: node -> its GPUs (GpuInfo-like)."""
    report = DomainReport()
    identity_of: dict[str, Identity] = {}
    for node in sorted(seen):
        ids, none = node_identity(seen[node])
        if len(ids) > 1:
            report.deviations.append(Deviation("split_node", [node], None, f"{node}: its GPUs report "
                                               f"{len(ids)} NVLink domains ({'; '.join(map(_show, sorted(ids)))})"))
        elif ids:
            identity_of[node] = next(iter(ids))
        if none and not ids:
            identity_of.pop(node, None)
    where: dict[str, str] = {}
    majority: dict[str, Identity] = {}
    for name in sorted(declared):
        nodes = declared[name]
        for node in nodes:
            where[node] = name
        counts: dict[Identity, list[str]] = {}
        for node in nodes:
            if node not in seen:
                report.deviations.append(Deviation("no_reading", [node], name, f"{node} ({name}): no reading"))
            elif node in identity_of:
                counts.setdefault(identity_of[node], []).append(node)
            elif len(node_identity(seen[node])[0]) <= 1:
                report.deviations.append(Deviation("no_domain", [node], name, f"{node} ({name}): its GPUs "
                                                   "report no NVLink domain (clique 0 / no cluster UUID): the "
                                                   "fabric manager or the NVLink switches did not take it in"))
        if counts:
            best = max(counts, key=lambda i: (len(counts[i]), i))
            majority[name] = best
            for other, members in sorted(counts.items()):
                if other != best:
                    report.deviations.append(Deviation(
                        "odd_member", sorted(members), name,
                        f"{', '.join(sorted(members))} ({name}): {_show(other)}, the domain's other "
                        f"{len(counts[best])} nodes {_show(best)}"))
        report.domains[name] = {"nodes": len(nodes), "identity": list(majority[name]) if name in majority else None,
                                "agree": len(counts.get(majority.get(name), [])) if name in majority else 0}
    by_identity: dict[Identity, list[str]] = {}
    for name, identity in majority.items():
        by_identity.setdefault(identity, []).append(name)
    for identity, names in sorted(by_identity.items()):
        if len(names) > 1:
            report.deviations.append(Deviation("domains_merged", [], ", ".join(names),
                                               f"{' and '.join(names)} report one NVLink domain ({_show(identity)})"))
    owner = {identity: names[0] for identity, names in by_identity.items()}
    strays = {}
    for node, identity in sorted(identity_of.items()):
        if node not in where and identity in owner:
            strays.setdefault(owner[identity], []).append(node)
    for name, nodes in sorted(strays.items()):
        report.deviations.append(Deviation("undeclared_member", nodes, name,
                                           f"{', '.join(nodes)}: in the NVLink domain of {name}, declared in none"))
    return report
