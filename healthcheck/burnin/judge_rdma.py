"""Judge the RDMA pair phase (pure: pair runs + per-rail localisations -> attributions and findings).

A pair's bandwidth is the client's ``BW average`` at its largest message size (Gb/s); it is judged
against ``efficiency x line rate`` (twice the line rate for a bidirectional test). A run that failed
(``Failed to modify QP to RTR``, no connection, a timeout) counts as below threshold and keeps its
reason. Latency is judged as a score, ``reference / measured typical latency`` (>= 1 passes), so the
same elimination applies.

Attribution, from the per-rail localisations (:func:`healthcheck.burnin.localize.localise`, a node is
*bad* on a rail only when it was low with partners that passed elsewhere):
- bad on every rail (two or more): the **node** (PCIe, NUMA/CPU placement, memory, a host setting);
- bad on some rails: that **HCA or its link** (node, HCA, port, and the switch port when a mapping
  is given);
- a pair below threshold whose two nodes both cleared with other partners: the **path** between them
  (the switches and cables on that route, not the nodes);
- unresolved after the rounds: a **suspect** (WARN).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

CHECK = "burnin.rdma"


@dataclass
class PairRun:
    """One perftest run between two nodes on one rail."""

    rail: int
    device: str
    test: str
    server: str
    client: str
    port: int
    round: int
    value: float | None = None        # Gb/s for bandwidth, microseconds for latency
    error: str | None = None
    warnings: list[str] = field(default_factory=list)
    server_argv: list[str] = field(default_factory=list)
    client_argv: list[str] = field(default_factory=list)
    duration_s: float = 0.0

    @property
    def nodes(self) -> tuple[str, str]:
        return self.server, self.client

    def to_dict(self) -> dict:
        return {"rail": self.rail, "device": self.device, "test": self.test, "server": self.server,
                "client": self.client, "port": self.port, "round": self.round, "value": self.value,
                "error": self.error, "warnings": list(self.warnings), "server_argv": list(self.server_argv),
                "client_argv": list(self.client_argv), "duration_s": round(self.duration_s, 3)}


@dataclass
class Attribution:
    kind: str                 # "node" | "hca" | "path" | "suspect"
    status: str               # "fail" | "warn"
    nodes: list[str]
    rails: list[int]
    devices: list[str]
    message: str
    evidence: list[str] = field(default_factory=list)

    @property
    def component(self) -> str:
        if self.kind == "node":
            return self.nodes[0]
        if self.kind == "path":
            return f"{self.nodes[0]}<->{self.nodes[1]}/{','.join(self.devices)}"
        return f"{self.nodes[0]}/{','.join(self.devices)}"

    def to_dict(self) -> dict:
        return {"kind": self.kind, "status": self.status, "nodes": list(self.nodes), "rails": list(self.rails),
                "devices": list(self.devices), "component": self.component, "message": self.message,
                "evidence": list(self.evidence)}


def expected_gbps(line_rate_gbps: float, bidirectional: bool) -> float:
    return line_rate_gbps * (2.0 if bidirectional else 1.0)


def pair_value(client, server) -> tuple[float | None, str | None, list[str]]:
    """(Gb/s or us, error, warnings) of one bandwidth or latency run from its two parsed sides
    (:class:`healthcheck.parsers.perftest.PerftestResult`, either may be None: not run / no output)."""
    warnings = [w for side in (client, server) if side is not None for w in side.warnings][:5]
    errors = [f"{name}: {side.error}" for side, name in ((client, "client"), (server, "server"))
              if side is not None and side.error]
    best = next((side for side in (client, server) if side is not None and side.ok), None)
    if best is None:
        return None, errors[0] if errors else "no output from either side", warnings
    value = best.bw_avg_gbps() if best.kind == "bw" else best.latency_us()
    return value, errors[0] if errors else None, warnings


def attribute(rails: Mapping[int, str], bw: Mapping[int, object], lat: Mapping[int, object] | None = None,
              pairs: list[PairRun] | None = None, peers: Mapping[tuple[str, str], str] | None = None,
              threshold_gbps: float = 0.0, margin: float = 0.0) -> list[Attribution]:
    """``rails``: rail -> device; ``bw``/``lat``: rail -> Localisation (bandwidth in Gb/s against
    ``threshold_gbps``, latency as a score against 1.0, both with localise's ``margin``); ``peers``:
    (node, device) -> the switch port at the other end of that HCA's link. See the module docstring."""
    peers = peers or {}
    out: list[Attribution] = []
    reasons: dict[tuple[int, str], list[str]] = {}
    for p in pairs or []:
        if p.error:
            for n in p.nodes:
                reasons.setdefault((p.rail, n), []).append(f"{p.test} {p.server}->{p.client}: {p.error}")
    for what, locs in (("bandwidth", bw), ("latency", lat or {})):
        bad_rails: dict[str, list[int]] = {}
        for rail, loc in sorted(locs.items()):
            for node in loc.bad:
                bad_rails.setdefault(node, []).append(rail)
        for node, bad in sorted(bad_rails.items()):
            evidence = [line for rail in bad for line in locs[rail].evidence.get(node, [])]
            evidence += [r for rail in bad for r in reasons.get((rail, node), [])][:5]
            devices = [rails[r] for r in bad]
            if len(bad) == len(locs) and len(locs) > 1:
                out.append(Attribution("node", "fail", [node], bad, devices,
                                       f"{node}: low RDMA {what} on every rail ({', '.join(devices)}) with partners "
                                       "that passed: the node (PCIe, NUMA/CPU placement, memory), not one link",
                                       evidence))
                continue
            for rail in bad:
                dev = rails[rail]
                far = peers.get((node, dev))
                out.append(Attribution("hca", "fail", [node], [rail], [dev],
                                       f"{node} {dev} (rail {rail}{', -> ' + far if far else ''}): low RDMA {what} "
                                       "with partners that passed: its HCA or its link",
                                       list(locs[rail].evidence.get(node, [])) + reasons.get((rail, node), [])[:3]))
        for rail, loc in sorted(locs.items()):
            for node in loc.suspects:
                out.append(Attribution("suspect", "warn", [node], [rail], [rails[rail]],
                                       f"{node} {rails[rail]} (rail {rail}): low RDMA {what}, not resolved within "
                                       "the rounds (suspect)", list(loc.evidence.get(node, []))))
            good = set(loc.good)
            for rnd in loc.rounds:
                for group, value in rnd.results.items():
                    limit = threshold_gbps if what == "bandwidth" else 1.0
                    failed = value is None or value < limit * (1 - margin)
                    if failed and len(group) == 2 and set(group) <= good:
                        shown = "failed to run" if value is None else f"{value:.1f}"
                        out.append(Attribution("path", "warn", list(group), [rail], [rails[rail]],
                                               f"{group[0]} <-> {group[1]} on {rails[rail]} (rail {rail}): low RDMA "
                                               f"{what} ({shown}) while both passed with other partners: the path "
                                               "between them (switches, cables on that route)", []))
    return _dedupe(out)


def _dedupe(items: list[Attribution]) -> list[Attribution]:
    seen, out = set(), []
    for a in items:
        key = (a.kind, tuple(sorted(a.nodes)), tuple(a.rails), a.message.split(":")[0])
        if key not in seen:
            seen.add(key)
            out.append(a)
    return out


def findings(attributions: list[Attribution], pairs: list[PairRun], ran: bool, skipped: str | None = None) -> list:
    """:class:`healthcheck.core.model.Finding` list, check ``burnin.rdma``."""
    from ..core.model import Finding, Status

    if skipped:
        return [Finding(CHECK, Status.SKIP, skipped)]
    if not attributions:
        runs = len(pairs)
        return [Finding(CHECK, Status.PASS if ran else Status.SKIP,
                        f"{runs} pair runs: every node passed on every rail" if ran else "no pair run",
                        None, {"pair_runs": float(runs)})]
    return [Finding(CHECK, Status.FAIL if a.status == "fail" else Status.WARN, a.message, a.component)
            for a in attributions]
