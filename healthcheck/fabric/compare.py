"""Compare a parsed fabric with its declared design: every deviation named, and a per-tier summary.
Pure: (Design, Fabric) -> CheckResult.

Deviation kinds (each names the HCA -- node, HCA, port -- and the switch and port on both ends):

- ``missing_link``: a declared cable whose HCA is not in the fabric, or whose port (HCA or switch end) has
  no link; ``missing_switch``: a declared switch not in the fabric (matched by GUID when the design
  gives one, else by a description no other switch has).
- ``swapped``: two declared cables each found where the other should be (two nodes' cables, or two
  HCAs of one node): one deviation names both.
- ``wrong_port`` (right switch, other port), ``wrong_rail`` (a switch of another rail: both switches
  declare ``rail``), ``wrong_switch`` (any other switch or device).
- ``degraded_width`` / ``degraded_speed``: a declared link present (in place or not) but trained below
  its tier's width ("2x" instead of "4x") or speed ("HDR" instead of "NDR", or unknown).
- ``unexpected_device``: a switch or host CA the design does not declare (SHARP aggregation nodes are
  part of their switch and never reported); ``unexpected_link``: a link between declared devices that
  no declared cable explains.
- ``too_few_uplinks``: a switch with fewer links to higher tiers than its declared ``uplinks``.

Per-tier summary (a link's tier is its upper end's: HCA-leaf links are "leaf", leaf-spine "spine"):
``expected`` declared links; ``found`` present where declared; ``misplaced`` present elsewhere;
``missing``; ``degraded`` present (in place or misplaced) below the tier's width or speed.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from .design import Design, HostCable, Tier, hca_identity
from ..core.fabricgraph import SPEED_RANK, End, Fabric, Link

_SWITCH_KINDS = ("switch", "router")


@dataclass(frozen=True)
class Deviation:
    kind: str
    message: str
    tier: str | None = None
    node: str | None = None
    hca: str | None = None
    hca_port: int | None = None
    switch: str | None = None       # the declared switch end (or the switch concerned)
    port: int | None = None
    peer: str | None = None         # uplinks: the declared other switch
    peer_port: int | None = None
    found_switch: str | None = None  # where the cable really goes
    found_port: int | None = None
    with_node: str | None = None     # swapped: the other HCA of the pair
    with_hca: str | None = None
    with_hca_port: int | None = None

    def to_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass
class TierSummary:
    tier: str
    level: int
    expected: int = 0
    found: int = 0
    misplaced: int = 0
    missing: int = 0
    degraded: int = 0


@dataclass
class CheckResult:
    deviations: list[Deviation] = field(default_factory=list)
    tiers: list[TierSummary] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.deviations

    def to_dict(self) -> dict:
        return {"ok": self.ok, "deviations": [d.to_dict() for d in self.deviations],
                "tiers": [asdict(t) for t in self.tiers]}

    def to_text(self) -> str:
        head = "fabric matches the design" if self.ok else f"{len(self.deviations)} deviations from the design"
        rows = [head, f"{'tier':<10} {'level':>5} {'expected':>8} {'found':>7} {'misplaced':>9} {'missing':>7} "
                      f"{'degraded':>8}"]
        for t in self.tiers:
            rows.append(f"{t.tier:<10} {t.level:>5} {t.expected:>8} {t.found:>7} {t.misplaced:>9} {t.missing:>7} "
                        f"{t.degraded:>8}")
        rows += [f"{d.kind}: {d.message}" for d in self.deviations]
        return "\n".join(rows)


class _Compare:
    def __init__(self, design: Design, fabric: Fabric) -> None:
        self.design, self.fabric = design, fabric
        self.out: list[Deviation] = []
        self.explained: set[int] = set()  # id() of the fabric links a declared cable accounts for
        self.summary = {name: TierSummary(name, tier.level) for name, tier in
                        sorted(design.tiers.items(), key=lambda item: (item[1].level, item[0]))}
        self.guid_of: dict[str, str] = {}  # declared switch name -> fabric GUID
        self.name_of: dict[str, str] = {}  # fabric switch GUID -> declared name
        self.hca_of: dict[tuple, str] = {}  # ("name", node, hca) / ("guid", guid) -> fabric GUID
        self.declared_hcas: set[tuple] = set()

    # ------------------------------------------------------------------ naming
    def where(self, end: End) -> str:
        if end.guid in self.name_of:
            return f"{self.name_of[end.guid]} port {end.port}"
        device = self.fabric.devices.get(end.guid)
        if device is None:
            return f"0x{end.guid} port {end.port}"
        what = "switch" if device.kind in _SWITCH_KINDS else "CA"
        desc = f"{device.description!r} " if device.description else ""
        return f"{what} {desc}(0x{end.guid}) port {end.port}"

    def found_name(self, end: End) -> str:
        return self.name_of.get(end.guid) or self.fabric.devices.get(end.guid, None) and (
            self.fabric.devices[end.guid].description or f"0x{end.guid}") or f"0x{end.guid}"

    # ------------------------------------------------------------------ matching
    def match_switches(self) -> None:
        fabric_switches = {d.guid: d for d in self.fabric.devices.values() if d.kind in _SWITCH_KINDS}
        by_desc: dict[str, list[str]] = {}
        for device in fabric_switches.values():
            by_desc.setdefault(device.description, []).append(device.guid)
        for name, decl in self.design.switches.items():
            if decl.guid is not None:
                guid = decl.guid if decl.guid in fabric_switches else None
            else:
                candidates = by_desc.get(decl.description or "", [])
                guid = candidates[0] if len(candidates) == 1 else None
            if guid is None or guid in self.name_of:
                how = f"GUID 0x{decl.guid}" if decl.guid else f"description {decl.description!r}"
                self.out.append(Deviation("missing_switch", f"switch {name} ({how}) is not in the fabric",
                                          tier=decl.tier, switch=name))
                continue
            self.guid_of[name], self.name_of[guid] = guid, name
        for guid, device in sorted(fabric_switches.items()):
            if guid not in self.name_of:
                links = self.fabric.links_of(guid)
                peers = ", ".join(self.where(link.other(end)) for end, link in links[:4])
                more = f" and {len(links) - 4} more" if len(links) > 4 else ""
                self.out.append(Deviation(
                    "unexpected_device", f"switch {device.description!r} (0x{guid}) is not in the design; "
                    f"{len(links)} links" + (f" (to {peers}{more})" if links else ""), found_switch=device.description
                    or f"0x{guid}"))

    def match_hcas(self) -> None:
        pattern = self.design.pattern
        for cable in self.design.hosts:
            self.declared_hcas.add(_key(cable))
        for device in sorted(self.fabric.hosts(), key=lambda d: d.guid):
            ident = hca_identity(device, pattern)
            keys = [("guid", device.guid)] + ([("name",) + ident] if ident else [])
            if not any(k in self.declared_hcas for k in keys):
                links = self.fabric.links_of(device.guid)
                at = "; ".join(f"port {end.port} -> {self.where(link.other(end))}" for end, link in links)
                self.out.append(Deviation(
                    "unexpected_device", f"CA {device.description!r} (0x{device.guid}) is not in the design"
                    + (f": {at}" if at else ""), node=ident[0] if ident else None, hca=ident[1] if ident else None))
                continue
            for k in keys:
                if k in self.hca_of and k[0] == "name":
                    self.out.append(Deviation(
                        "unexpected_device", f"CA {device.description!r} (0x{device.guid}): a second CA with the "
                        f"node description of 0x{self.hca_of[k]}", node=k[1], hca=k[2]))
                self.hca_of.setdefault(k, device.guid)

    # ------------------------------------------------------------------ judging
    def degraded(self, link: Link, tier: Tier, subject: str, **names) -> bool:
        found = False
        if tier.lanes and (link.lanes is None or link.lanes < tier.lanes):
            self.out.append(Deviation("degraded_width", f"{subject}: trained {link.width} instead of {tier.lanes}x "
                                      f"({link.rate})", tier=tier.name, **names))
            found = True
        if tier.speed and (link.speed is None or SPEED_RANK.get(link.speed, -1) < SPEED_RANK[tier.speed]):
            self.out.append(Deviation("degraded_speed", f"{subject}: trained at {link.speed or 'an unknown speed'} "
                                      f"instead of {tier.speed} ({link.rate})", tier=tier.name, **names))
            found = True
        if found:
            self.summary[tier.name].degraded += 1
        return found

    def hosts(self) -> None:
        design = self.design
        mismatched: dict[int, tuple[End, Link]] = {}
        for i, cable in enumerate(design.hosts):
            tier = design.tiers[design.switches[cable.switch].tier]
            self.summary[tier.name].expected += 1
            names = dict(node=cable.node, hca=cable.hca or (f"0x{cable.guid}" if cable.guid else None),
                         hca_port=cable.hca_port, switch=cable.switch, port=cable.port)
            subject = f"{cable.hca_name} port {cable.hca_port} -> {cable.switch} port {cable.port}"
            ca = self.hca_of.get(_key(cable))
            if ca is None:
                self.summary[tier.name].missing += 1
                self.out.append(Deviation("missing_link", f"{subject}: {cable.hca_name} is not in the fabric",
                                          tier=tier.name, **names))
                continue
            end = End(ca, cable.hca_port)
            links = self.fabric.links_at(end)
            if not links:
                self.summary[tier.name].missing += 1
                switch_end = self.guid_of.get(cable.switch)
                other = self.fabric.links_at(End(switch_end, cable.port)) if switch_end else []
                taken = f"; {cable.switch} port {cable.port} goes to {self.where(other[0].other(End(switch_end, cable.port)))}" \
                    if other else ""
                self.out.append(Deviation("missing_link", f"{subject}: the HCA port has no link{taken}",
                                          tier=tier.name, **names))
                continue
            link = links[0]
            self.explained.add(id(link))
            peer = link.other(end)
            self.degraded(link, tier, subject, **names)
            if peer == End(self.guid_of.get(cable.switch, ""), cable.port):
                self.summary[tier.name].found += 1
            else:
                self.summary[tier.name].misplaced += 1
                mismatched[i] = (peer, link)
        self.misplaced(mismatched)

    def misplaced(self, mismatched: dict[int, tuple[End, Link]]) -> None:
        design = self.design
        place = {(self.guid_of[c.switch], c.port): i for i, c in enumerate(design.hosts) if c.switch in self.guid_of}
        done: set[int] = set()
        for i, (peer, _link) in mismatched.items():
            if i in done:
                continue
            cable = design.hosts[i]
            tier = design.tiers[design.switches[cable.switch].tier].name
            names = dict(node=cable.node, hca=cable.hca or (f"0x{cable.guid}" if cable.guid else None),
                         hca_port=cable.hca_port, switch=cable.switch, port=cable.port,
                         found_switch=self.found_name(peer), found_port=peer.port)
            j = place.get((peer.guid, peer.port))
            if j is not None and j in mismatched and j not in done and j != i:
                other, other_peer = design.hosts[j], mismatched[j][0]
                if (other_peer.guid, other_peer.port) == (self.guid_of.get(cable.switch), cable.port):
                    done |= {i, j}
                    self.out.append(Deviation(
                        "swapped", f"{cable.hca_name} port {cable.hca_port} and {other.hca_name} port "
                        f"{other.hca_port}: cables swapped ({cable.hca_name} is on {other.switch} port {other.port}, "
                        f"{other.hca_name} is on {cable.switch} port {cable.port})", tier=tier,
                        with_node=other.node, with_hca=other.hca or (f"0x{other.guid}" if other.guid else None),
                        with_hca_port=other.hca_port, **names))
                    continue
            expected = design.switches[cable.switch]
            found = design.switches.get(self.name_of.get(peer.guid, ""))
            if peer.guid == self.guid_of.get(cable.switch):
                kind = "wrong_port"
            elif found is not None and expected.rail and found.rail and found.rail != expected.rail:
                kind = "wrong_rail"
            else:
                kind = "wrong_switch"
            rail = f" (rail {found.rail}, expected rail {expected.rail})" if kind == "wrong_rail" else ""
            self.out.append(Deviation(
                kind, f"{cable.hca_name} port {cable.hca_port}: goes to {self.where(peer)}{rail}, declared "
                f"{cable.switch} port {cable.port}", tier=tier, **names))

    def upper_tier(self, one: str, two: str) -> Tier:
        tiers = [self.design.tiers[self.design.switches[n].tier] for n in (one, two)]
        return max(tiers, key=lambda t: t.level)

    def uplinks(self) -> None:
        for uplink in self.design.uplinks:
            tier = self.upper_tier(uplink.switch, uplink.peer)
            summary = self.summary[tier.name]
            summary.expected += 1
            names = dict(switch=uplink.switch, port=uplink.port, peer=uplink.peer, peer_port=uplink.peer_port)
            subject = f"{uplink.switch} port {uplink.port} -> {uplink.peer} port {uplink.peer_port}"
            one, two = self.guid_of.get(uplink.switch), self.guid_of.get(uplink.peer)
            if one is None or two is None:
                summary.missing += 1
                absent = uplink.switch if one is None else uplink.peer
                self.out.append(Deviation("missing_link", f"{subject}: switch {absent} is not in the fabric",
                                          tier=tier.name, **names))
                continue
            ends = (End(one, uplink.port), End(two, uplink.peer_port))
            at = [(end, self.fabric.links_at(end)) for end in ends]
            link = next((k for k in at[0][1] if k.other(ends[0]) == ends[1]), None)
            if link is not None:
                summary.found += 1
                self.explained.add(id(link))
                self.degraded(link, tier, subject, **names)
                continue
            elsewhere = [(end, links[0]) for end, links in at if links]
            if not elsewhere:
                summary.missing += 1
                self.out.append(Deviation("missing_link", f"{subject}: no link at either end", tier=tier.name, **names))
                continue
            summary.misplaced += 1
            for _, wrong in elsewhere:
                self.explained.add(id(wrong))
            text = "; ".join(f"{self.where(end)} goes to {self.where(wrong.other(end))}" for end, wrong in elsewhere)
            peer = elsewhere[0][1].other(elsewhere[0][0])
            same = {e.guid for e in ends}
            kind = "wrong_port" if all(w.other(e).guid in same for e, w in elsewhere) else "wrong_switch"
            self.out.append(Deviation(kind, f"{subject}: {text}", tier=tier.name, found_switch=self.found_name(peer),
                                      found_port=peer.port, **names))

    def few_uplinks(self) -> None:
        design = self.design
        for name, decl in design.switches.items():
            if not decl.uplinks or name not in self.guid_of:
                continue
            level = design.tiers[decl.tier].level
            count = 0
            for _end, link in self.fabric.links_of(self.guid_of[name]):
                other = self.name_of.get(link.other(_end).guid)
                if other is not None and design.tiers[design.switches[other].tier].level > level:
                    count += 1
            if count < decl.uplinks:
                self.out.append(Deviation("too_few_uplinks", f"switch {name}: {count} uplinks to higher tiers, "
                                          f"declared {decl.uplinks}", tier=decl.tier, switch=name))

    def unexpected_links(self) -> None:
        known_hcas = set(self.hca_of.values())
        for link in self.fabric.links:
            if id(link) in self.explained:
                continue
            devices = [self.fabric.devices.get(e.guid) for e in (link.a, link.b)]
            if any(d is None or d.aggregation for d in devices):
                continue
            if all(e.guid in self.name_of or e.guid in known_hcas for e in (link.a, link.b)):
                self.out.append(Deviation("unexpected_link", f"{self.where(link.a)} <-> {self.where(link.b)} "
                                          f"({link.rate}) is not declared", found_switch=self.found_name(link.a),
                                          found_port=link.a.port))


def _key(cable: HostCable) -> tuple:
    return ("guid", cable.guid) if cable.guid else ("name", cable.node, cable.hca)


def compare(design: Design, fabric: Fabric) -> CheckResult:
    """Every deviation of ``fabric`` from ``design``, and the per-tier summary."""
    run = _Compare(design, fabric)
    run.match_switches()
    run.match_hcas()
    run.hosts()
    run.uplinks()
    run.few_uplinks()
    run.unexpected_links()
    return CheckResult(run.out, list(run.summary.values()))
