"""nvlink.imex: the IMEX daemon of a multi-node NVLink domain is ready and connected (issue 33).

IMEX (the NVIDIA Internode Memory Exchange service) lets the GPUs of an NVLink domain (a GB200/GB300 NVL72
rack) import each other's memory; a node whose daemon is not READY, or that lost its connection to a peer,
fails multi-node NVLink jobs. Judged only where the node class declares an NVLink domain
(``nvlink_domain = { ... }``): elsewhere IMEX is not part of the node (tools that judged it on every node
raised false alarms), and the check SKIPs saying so.

The states as data: the daemon's (``nvidia-imex-ctl -q``; the list DCGM's ``DCGM_FI_IMEX_DAEMON_STATUS``
documents), the domain's (``-N -j`` ``status``: UP, DEGRADED, DOWN as DCGM's ``DCGM_FI_IMEX_DOMAIN_STATUS``
documents) and the connections' (the ``-N`` legend: C connected, N never connected, R recovering, D
disconnected, A authenticating, I invalid).

The domain's size: ``-N`` lists every node of the IMEX domain's ``nodes_config.cfg``, up or not. NVIDIA's
IMEX guide ("Deployment Models") documents the domain-wide deployment (every compute node of the NVLink
domain listed) and smaller ones (the nodes of one job, a partition); an IMEX domain can only span GPUs
that share the NVLink fabric. So against the class's ``nvlink_domain.size`` (GPUs) / GPUs per node:
more IMEX nodes than the NVLink domain holds FAIL (this node's configuration lists nodes its GPUs cannot
reach over NVLink, or the declared size is wrong); fewer WARN (a per-job or partial deployment, a partly
filled rack, or a tray left out of ``nodes_config.cfg``: memory sharing stops at the listed nodes).
"""
from __future__ import annotations

from ..core.expectations import Expectations
from ..core.model import Finding, ImexPeer, Snapshot, Status
from .registry import check, finding

CONTEXTS = ("check", "slurm-check", "burnin")  # a subprocess: never the prolog's or the epilog's budget

# daemon state -> status; a state missing here FAILs (unknown to this table)
DAEMON_STATES = {"READY": "pass", "INITIALIZING": "warn", "STARTING_AUTH_SERVER": "warn", "INIT_GPU": "warn",
                 "WAITING_FOR_PEERS": "fail", "WAITING_FOR_RECOVERY": "fail", "SHUTTING_DOWN": "fail",
                 "UNAVAILABLE": "fail"}
DOMAIN_STATES = {"UP": "pass", "DEGRADED": "warn", "DOWN": "fail"}
# the IMEX domain's node count against the NVLink domain's (nvlink_domain.size / GPUs per node)
NODE_COUNT = {"more": "fail", "fewer": "warn"}
_STATUS = {"pass": Status.PASS, "warn": Status.WARN, "fail": Status.FAIL}


@check("nvlink.imex", needs=("imex",), contexts=CONTEXTS, handles_missing=True, fails_by_default=False,
       fails_on="a class with nvlink_domain: IMEX daemon not READY, domain DOWN, this node not connected, or "
                "more IMEX nodes than the NVLink domain holds")
def nvlink_imex(snap: Snapshot, exp: Expectations, t: dict) -> list[Finding]:
    """IMEX is READY and this node is connected to every peer of its domain, where the class declares an
    NVLink domain (``nvlink_domain``); SKIP elsewhere.

    FAIL when the daemon (``nvidia-imex-ctl -q``) is not READY (WAITING_FOR_PEERS, UNAVAILABLE, ...;
    WARN while it starts), when ``nvidia-imex-ctl`` does not answer or is not installed, when the domain
    (``-N -j``) is DOWN (DEGRADED: WARN), and when this node's own entry is not READY or not CONNECTED to
    a peer (either way). Other peers' problems (not READY, a connection between two of them down) WARN,
    naming them (their own nodes FAIL for them: a single bad node does not drain its whole rack). This
    node is found among the peers by its host name; where it cannot be, every unconnected pair WARNs.
    The IMEX domain's node count against ``nvlink_domain.size`` / the class's ``gpu_count``: more nodes
    than the NVLink domain holds FAIL, fewer WARN (a per-job or partial IMEX domain is a documented
    deployment); not judged where either number is unknown.
    """
    name = "nvlink.imex"
    if exp.nvlink_domain is None:
        return [finding(name, Status.SKIP, "the class declares no NVLink domain (nvlink_domain): IMEX not judged",
                        None)]
    info = snap.imex
    if info is None:
        if "imex" in snap.probe_errors:
            err = snap.probe_errors["imex"]
            return [finding(name, Status.FAIL, f"nvidia-imex-ctl did not answer ({err.kind}: {err.message})",
                            None)]
        if snap.source.startswith("bundle:"):
            return [finding(name, Status.SKIP, "no IMEX output recorded in the bundle", None)]
        return [finding(name, Status.FAIL, "nvidia-imex-ctl not installed (or not probed), but the class "
                        "declares an NVLink domain: install and start nvidia-imex", None)]
    problems: list[tuple[str, str]] = []
    if info.daemon_status is None:
        problems.append(("fail", "the IMEX daemon's status could not be read"))
    else:
        state = DAEMON_STATES.get(info.daemon_status, "fail")
        if state != "pass":
            problems.append((state, f"IMEX daemon {info.daemon_status}"))
    if info.domain_status is not None:
        state = DOMAIN_STATES.get(info.domain_status, "fail")
        if state != "pass":
            problems.append((state, f"IMEX domain {info.domain_status}"))
    problems += _peer_problems(info.peers or [], snap.node)
    expected = domain_nodes(exp, snap)
    if info.peers is not None and expected is not None:
        problems += _count_problems(len(info.peers), expected, exp)
    if info.error:
        problems.append(("fail", f"nvidia-imex-ctl: {info.error}"))
    ready = sum(1 for p in info.peers or [] if p.status == "READY")
    metrics = {"imex_ready": int(info.daemon_status == "READY"), "imex_peers": len(info.peers or []),
               "imex_peers_ready": ready}
    if expected is not None:
        metrics["imex_nodes_expected"] = expected
    if not problems:
        return [finding(name, Status.PASS, f"IMEX READY, domain {info.domain_status or 'not reported'}, "
                        f"{ready}/{len(info.peers or [])} peers READY and connected", None, **metrics)]
    status = Status.FAIL if any(s == "fail" for s, _ in problems) else Status.WARN
    return [finding(name, status, "; ".join(why for _, why in problems), None, **metrics)]


def domain_nodes(exp: Expectations, snap: Snapshot) -> int | None:
    """Nodes in one NVLink domain: ``nvlink_domain.size`` (GPUs) / the class's GPUs per node (its
    ``gpu_count``, else the GPUs this snapshot shows); None when either is unknown or they do not divide."""
    size = exp.nvlink_domain.size if exp.nvlink_domain is not None else None
    per_node = exp.gpu_count or len(snap.gpus or [])
    if not size or not per_node or size % per_node:
        return None
    return size // per_node


def _count_problems(listed: int, expected: int, exp: Expectations) -> list[tuple[str, str]]:
    if listed == expected:
        return []
    size = exp.nvlink_domain.size if exp.nvlink_domain is not None else None
    declared = f"the class's NVLink domain of {size} GPUs = {expected} nodes"
    if listed > expected:
        return [(NODE_COUNT["more"], f"IMEX domain lists {listed} nodes, more than {declared}: nodes_config.cfg "
                 "names nodes outside this NVLink domain (or nvlink_domain.size is wrong)")]
    return [(NODE_COUNT["fewer"], f"IMEX domain lists {listed} of {declared} (a per-job or partial IMEX domain, "
             "or trays missing from nodes_config.cfg)")]


def _is_self(peer: ImexPeer, node: str) -> bool:
    short = node.split(".")[0].lower()
    for name in (peer.hostname, peer.host):
        if name and name.split(".")[0].lower() == short:
            return True
    return False


def _peer_problems(peers: list[ImexPeer], node: str) -> list[tuple[str, str]]:
    me = next((p for p in peers if _is_self(p, node)), None)
    out: list[tuple[str, str]] = []
    if me is not None:
        if me.status != "READY":
            out.append(("fail", f"this node's IMEX entry is {me.status or 'unknown'}"))
        mine = str(me.index)
        lost = sorted({p.index for p in peers if p.index != me.index
                       and (me.connections.get(str(p.index), "CONNECTED") != "CONNECTED"
                            or p.connections.get(mine, "CONNECTED") != "CONNECTED")})
        if lost:
            out.append(("fail", "not connected to IMEX peer(s) " + ", ".join(_label(peers, i) for i in lost)))
        others = [p for p in peers if p.index != me.index and p.status != "READY"]
        if others:
            out.append(("warn", "IMEX peer(s) not READY: " + ", ".join(
                f"{_label(peers, p.index)} {p.status or 'unknown'}" for p in others)))
        # connections between two other peers: theirs to fail, named here
        pairs = sorted({(p.index, j) for p in peers for i, c in p.connections.items()
                        if c != "CONNECTED" and (j := _int(i)) is not None and me.index not in (p.index, j)
                        and j != p.index})
        if pairs:
            out.append(("warn", "IMEX connections down between other peers: " + ", ".join(
                f"{a}->{b}" for a, b in pairs[:16]) + (f" (+{len(pairs) - 16} more)" if len(pairs) > 16 else "")))
        return out
    bad = [p for p in peers if p.status != "READY"]
    if bad:
        out.append(("warn", "IMEX peer(s) not READY: " + ", ".join(
            f"{_label(peers, p.index)} {p.status or 'unknown'}" for p in bad)))
    pairs = sorted({(p.index, int(i)) for p in peers for i, c in p.connections.items() if c != "CONNECTED"})
    if pairs:
        out.append(("warn", "IMEX connections down (this node not identified among the peers): " + ", ".join(
            f"{a}->{b}" for a, b in pairs[:16])))
    return out


def _int(text: str) -> int | None:
    return int(text) if text.isdigit() else None


def _label(peers: list[ImexPeer], index: int) -> str:
    peer = next((p for p in peers if p.index == index), None)
    if peer is None:
        return f"#{index}"
    return f"#{index} ({peer.hostname or peer.host})" if (peer.hostname or peer.host) else f"#{index}"
