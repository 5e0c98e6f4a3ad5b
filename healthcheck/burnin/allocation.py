"""The allocation step of a multi-node burn-in (runs once per job, after every node's own burn-in):
gather the nodes' results, run the collective across the allocation, find who is slow when it is
below its threshold (parallel rounds of pairs, then bisection), decide what to drain within the blast
radius, and act through the Slurm backend under the ownership rules.

Pure decisions (``plan_drains``) are kept apart from the I/O (``run_allocation``).
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ..core.model import Finding, Status, Verdict, worst
from .judge_nccl import fabric_gpu_mismatch, judge_fit, judge_run, large_busbw
from ..policies.references import References
from .settings import BurninSettings

LOCALISE = "burnin.localise"
RESULT = "burnin.result"
RDMA = "burnin.rdma"
COUNTERS = "fabric.counters"
CONSISTENCY = "fabric.consistency"  # the allocation's software facts compared (fabric/software.py)
PAIR = "fabric.rdma.pair"  # one bandwidth pair run of the RDMA phase, for the report's heatmap
MAX_PAIR_FINDINGS = 4096  # the latest run per (test, rail, pair) only; beyond this many, the rest is counted
RDMA_LINK_LAYERS = ("InfiniBand", "Ethernet")  # IB, and RoCE on an Ethernet port


@dataclass
class NodeOutcome:
    node: str
    status: Status
    findings: list[Finding]
    record: dict[str, Any] | None  # the node's own record (None: it left none)


@dataclass
class AllocationOutcome:
    job_id: str | None
    nodes: list[str]
    per_node: dict[str, NodeOutcome]
    collective: list[Finding] = field(default_factory=list)
    localisation: dict[str, Any] | None = None
    drain: list[str] = field(default_factory=list)
    suspect_shared_cause: str | None = None
    actions: list[dict[str, Any]] = field(default_factory=list)
    rdma: dict[str, Any] | None = None  # RdmaPhaseResult.to_dict() when the phase ran
    train: dict[str, Any] | None = None  # the training smoke test's curves and figures when it ran
    domain_faults: list[dict[str, Any]] = field(default_factory=list)  # burnin/nvldomain.py: a rack's shared cause

    @property
    def status(self) -> Status:
        return worst([o.status for o in self.per_node.values()] + [f.status for f in self.collective])

    def to_dict(self) -> dict[str, Any]:
        return {"job_id": self.job_id, "nodes": self.nodes, "status": self.status.value,
                "drain": self.drain, "suspect_shared_cause": self.suspect_shared_cause,
                "collective": [f.to_dict() for f in self.collective], "localisation": self.localisation,
                "actions": self.actions, "rdma": self.rdma, "train": self.train,
                "domain_faults": self.domain_faults,
                "per_node": {n: {"status": o.status.value, "findings": [f.to_dict() for f in o.findings]}
                             for n, o in self.per_node.items()}}


def read_results(results_dir: str, nodes: list[str]) -> dict[str, NodeOutcome]:
    """Each node's ``<node>.json``; a node without one (its step died, or never ran) is an ERROR of the
    burn-in, not a proven fault: it is named, never drained for that alone."""
    out = {}
    for node in nodes:
        path = os.path.join(results_dir, f"{node}.json")
        try:
            with open(path, encoding="utf-8") as fh:
                record = json.load(fh)
            findings = [Finding.from_dict(r) for r in record.get("results", [])]
            out[node] = NodeOutcome(node, worst(f.status for f in findings), findings, record)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
            f = Finding(RESULT, Status.ERROR, f"no burn-in result from {node} ({why})")
            out[node] = NodeOutcome(node, Status.ERROR, [f], None)
    return out


def compare_digests(per_node: dict[str, NodeOutcome]) -> None:
    """Silent data corruption across the job: every GPU of one model computed the same product from the
    same inputs, so their result digests must agree across nodes too. A node whose device disagrees
    with the majority of its fleet key (model, backend, dtype, n) gets a FAIL; no majority (a tie) is
    reported as a WARN on every node of the key, since nobody can say which side is right."""
    from collections import Counter

    by_key: dict[str, list[tuple[str, str, str]]] = {}
    for node, o in per_node.items():
        digests = ((o.record or {}).get("burnin") or {}).get("gemm_digests") or {}
        for component, pair in digests.items():
            if isinstance(pair, list) and len(pair) == 2 and all(isinstance(x, str) for x in pair):
                by_key.setdefault(pair[0], []).append((node, component, pair[1]))
    for key, entries in by_key.items():
        counts = Counter(d for _n, _c, d in entries).most_common()
        if len(counts) < 2 or len({n for n, _c, _d in entries}) < 2:
            continue
        top, top_n = counts[0]
        tie = counts[1][1] == top_n
        for node, component, digest in entries:
            if digest == top and not tie:
                continue
            status = Status.WARN if tie else Status.FAIL
            msg = (f"{component}: GEMM result differs from the job's other {key.split('|')[0]} devices "
                   f"({digest[:12]} vs majority {top[:12]}, {top_n} of {len(entries)}): silent data corruption"
                   if not tie else f"{component}: GEMM results of {key.split('|')[0]} disagree across the job "
                   f"with no majority")
            per_node[node].findings.append(Finding("burnin.gemm.fleet", status, msg, component))
            per_node[node].status = worst([per_node[node].status, status])


def plan_drains(per_node: dict[str, NodeOutcome], settings: BurninSettings,
                domain_faults: Sequence[dict[str, Any]] = ()) -> tuple[list[str], str | None]:
    """Which nodes to drain: those with a FAIL, unless more fail than the blast radius allows, in which
    case none (a shared cause — a wrong reference, the fabric, a bad deploy — is more likely than many
    broken nodes at once, and draining them would empty the partition). ``domain_faults``
    (burnin/nvldomain.py): a fabric cause most trays of an NVLink domain share is the domain's; a tray is
    drained only for FAILs of its own. Returns (nodes, flag)."""
    from .nvldomain import own_failures

    shared = "; ".join(d["text"] for d in domain_faults) or None
    failing = sorted(n for n, o in per_node.items()
                     if o.status is Status.FAIL and own_failures(n, o.findings, domain_faults))
    total = len(per_node)
    cap = max(1, math.floor(settings.max_drain_fraction * total))
    if settings.max_drain_nodes:
        cap = min(cap, settings.max_drain_nodes)
    if len(failing) > cap:
        checks = sorted({f.check for n in failing for f in own_failures(n, per_node[n].findings, domain_faults)})
        flag = (f"{len(failing)} of {total} nodes failed ({', '.join(checks[:4])}), more than the blast-radius "
                f"cap of {cap}: suspect check or shared cause; nothing drained")
        return [], flag + (f"; {shared}" if shared else "")
    return failing, (f"{shared}: its trays not drained for it" if shared else None)


def _localise(nodes: list[str], settings: BurninSettings, tasks_per_node: int, threshold: float,
              full_value: float | None, log: Callable[[str], None]):
    from .localize import localise
    from .nccl_run import Sweep, run_groups

    sweep = Sweep(min_bytes=64 << 20, max_bytes=min(settings.nccl_max_bytes, 1 << 30), iters=settings.nccl_iters)

    def measure(groups):
        log(f"localisation round: {len(groups)} groups")
        runs = run_groups(list(settings.launcher), settings.nccl_dir, "all_reduce", list(groups), tasks_per_node,
                          sweep, settings.nccl_timeout_s, "pair")
        return {g: (large_busbw(r) if r.result is not None and not r.result.errors and r.error is None else None)
                for g, r in runs.items()}

    # bisection for faults that only show in larger groups needs ~log2(N) rounds on top of the pairs
    rounds = 4 + max(2, math.ceil(math.log2(max(2, len(nodes)))))
    return localise(nodes, measure, threshold, seed=settings.seed, full_group_value=full_value, max_rounds=rounds,
                    known_good=known_good_in(settings.known_good, nodes))


def known_good_in(hostlist: str, nodes: list[str]) -> list[str]:
    """The ``known_good`` nodes that are part of the job (a job step can only run on its own nodes)."""
    if not hostlist:
        return []
    from ClusterShell.NodeSet import NodeSet

    trusted = set(NodeSet(hostlist))
    return [n for n in nodes if n in trusted]


def _attribute(outcome: AllocationOutcome, loc) -> None:
    """The localisation's verdict on the nodes: the slow ones FAIL, the unconfirmed ones WARN."""
    outcome.localisation = loc.to_dict()
    for node in loc.bad:
        lines = loc.evidence.get(node, [])
        msg = f"slow in the cross-node all_reduce: {lines[-1] if lines else 'attributed by localisation'}"
        o = outcome.per_node[node]
        o.findings.append(Finding(LOCALISE, Status.FAIL, msg[:300]))
        o.status = Status.FAIL
    for node in loc.suspects:
        o = outcome.per_node[node]
        o.findings.append(Finding(LOCALISE, Status.WARN, "suspect in the cross-node all_reduce, not confirmed "
                                  "within the rounds allowed"))
        o.status = worst([o.status, Status.WARN])


def run_allocation(nodes: list[str], settings: BurninSettings, refs: References, job_id: str | None,
                   log: Callable[[str], None] = lambda _m: None, *, rdma_settings: Any = None,
                   pair_runner: Any = None, counter_runner: Any = None,
                   counter_settings: Any = None, software_settings: Any = None,
                   nvlink_domains: tuple[dict[str, str], dict[str, int]] | None = None) -> AllocationOutcome:
    """Everything but the Slurm actions (see apply_drains). ``rdma_settings`` (a ``[burnin.rdma]``
    :class:`~healthcheck.burnin.rdma.RdmaSettings`; default the packaged one), ``pair_runner`` (perftest)
    and ``counter_runner`` (perfquery) are the RDMA phase's; tests inject recorded outputs.
    ``software_settings``: the declared software set (:func:`healthcheck.fabric.software.validate`).
    ``nvlink_domains``: (node -> domain, domain -> node count), :func:`healthcheck.burnin.nvldomain.declared`."""
    from .nccl_run import Sweep, run_across

    per_node = read_results(settings.results_dir, nodes) if settings.results_dir else {
        n: NodeOutcome(n, Status.PASS, [], None) for n in nodes}
    outcome = AllocationOutcome(job_id, nodes, per_node)
    compare_digests(per_node)
    outcome.collective.extend(compare_software(per_node, software_settings))
    if len(nodes) >= 2 and settings.phase_on("nccl"):
        gpn = [(o.record or {}).get("burnin", {}).get("gpu_count") or 0 for o in per_node.values()]
        tasks = max(1, min([g for g in gpn if g] or [1]))
        fabric = refs.fabrics.get(settings.fabric) if settings.fabric else None
        # a domain's figure (a [fabric.*] with `match`, e.g. nvl72_gb200) applies only to its GPU model
        mismatch = fabric_gpu_mismatch(fabric, settings.fabric, [
            ((o.record or {}).get("burnin") or {}).get("gpu_name") for o in per_node.values()]) if fabric else None
        fabric = None if mismatch else fabric
        line = fabric.get("line_rate_gbps") if fabric else None
        sweep = Sweep(max_bytes=settings.nccl_max_bytes, iters=settings.nccl_iters)
        unjudged = mismatch or (None if fabric else (
            f"not judged and no slow node searched: set [burnin] fabric to one of "
            f"{', '.join(sorted(refs.fabrics)) or 'the references file fabrics'}"))
        # all_reduce always, first: the fabric reference and the localisation are built on it
        for collective in ["all_reduce"] + [c for c in settings.nccl_collectives if c != "all_reduce"]:
            ref = fabric.get(f"nccl_{collective}_busbw_gbps") if fabric else None
            log(f"{collective} across {len(nodes)} nodes")
            run = run_across(list(settings.launcher), settings.nccl_dir, collective, nodes, tasks, sweep,
                             settings.nccl_timeout_s)
            finding = judge_run(run, ref, line, f"fabric {settings.fabric}" if fabric else None, unjudged,
                                section=fabric)
            outcome.collective.append(finding)
            fitted = judge_fit(run, fabric, f"fabric {settings.fabric}" if fabric else None)
            if fitted is not None:  # the latency of the fabric: a job finding, not a node's
                outcome.collective.append(fitted)
            if collective == "all_reduce" and finding.status is Status.FAIL and ref is not None \
                    and ref.low_bound and settings.localise and not run.missing:
                _attribute(outcome, _localise(nodes, settings, tasks, ref.low_bound, large_busbw(run), log))
    if settings.phase_on("rdma"):
        run_rdma(outcome, settings, rdma_settings, pair_runner, counter_runner, counter_settings, log)
    if settings.phase_on("train"):
        run_train(outcome, settings, log)
    attribute_domains(outcome, *(nvlink_domains or ({}, {})))
    outcome.drain, outcome.suspect_shared_cause = plan_drains(per_node, settings, outcome.domain_faults)
    return outcome


def attribute_domains(outcome: AllocationOutcome, domain_of: dict[str, str], sizes: dict[str, int]) -> None:
    """The NVLink-fabric FAILs most trays of one declared domain share, as job findings of the domain."""
    from .nvldomain import faults, findings

    outcome.domain_faults = faults(outcome.per_node, domain_of, sizes)
    outcome.collective.extend(findings(outcome.domain_faults))


def run_train(outcome: AllocationOutcome, settings: BurninSettings, log: Callable[[str], None] = lambda _m: None,
              local_ranks: int = 0, **faults: Any) -> Any:
    """The training smoke test across the allocation (burnin/train/, docs/train.md): its findings become
    the job's, a rank that disagreed is a FAIL of its node (silent data corruption: drained like any
    other node FAIL, within the blast radius). ``faults``: TrainSpec fields the tests inject
    (``lr_scale``, ``corrupt_rank``, ``corrupt_step``); ``local_ranks``: that many ranks on this host instead
    of the launcher. Returns the :class:`~.train.phase.TrainOutcome` (its record is ``outcome.train``)."""
    from .train.setup import run_for_allocation

    result = run_for_allocation(outcome.nodes, settings, outcome.job_id, log, local_ranks=local_ranks, **faults)
    outcome.collective.extend(result.findings)
    for node, found in result.node_findings.items():
        o = outcome.per_node.get(node)
        if o is not None:
            o.findings.extend(found)
            o.status = worst([o.status] + [f.status for f in found])
    outcome.train = result.record
    return result


def compare_software(per_node: dict[str, NodeOutcome], settings: Any = None) -> list[Finding]:
    """Item 5 across the allocation: the nodes' software facts (``burnin.versions`` of their records, the
    ``sw.versions`` results) compared item by item (fabric/software.py): one job finding per item,
    WARN naming the odd nodes and their values (never a drain on its own: which side is right is the
    admin's call), PASS with the majority. None when fewer than two nodes reported facts."""
    from ..fabric.runrecord import consistency_findings
    from ..fabric.software import ConsistencyError, check_consistency, node_facts

    facts, bad = [], []
    for node, o in sorted(per_node.items()):
        if o.record is None:
            continue
        try:
            f = node_facts({**o.record, "node": node}, f"{node}.json")
        except ConsistencyError as exc:
            bad.append(str(exc))
            continue
        if f.facts:
            facts.append(f)
    out = [Finding(CONSISTENCY, Status.WARN, f"software facts unreadable: {why}"[:300]) for why in bad[:4]]
    if len(facts) < 2:
        return out
    for f in consistency_findings(check_consistency(facts, settings)):
        status = Status.WARN if f.status is Status.FAIL else f.status
        out.append(Finding(f.check, status, f.message, f.component, dict(f.metrics)))
    return out


def pair_findings(pairs: list[dict[str, Any]], threshold_gbps: float | None) -> list[Finding]:
    """The RDMA phase's bandwidth pair runs (``RdmaPhaseResult.to_dict()["pairs"]``) as findings for the
    history (check ``fabric.rdma.pair``, component ``TEST/DEVICE/SERVER,CLIENT``, metrics ``gbyte_s``
    (GB/s: perftest's Gb/s / 8), ``rail``, ``low``): WARN for a pair below the phase's threshold or
    without a result (who is to blame is the phase's own ``burnin.rdma`` finding), else PASS. The
    latest run per (test, rail, pair) only; latency runs are left out."""
    latest: dict[tuple, dict[str, Any]] = {}
    for p in pairs:
        if not isinstance(p, dict) or str(p.get("test", "")).endswith("_lat"):
            continue
        key = (p.get("test"), p.get("rail"), tuple(sorted((str(p.get("server")), str(p.get("client"))))))
        latest[key] = p
    out = []
    for (test, rail, _pair), p in sorted(latest.items(), key=lambda kv: (str(kv[0][0]), kv[0][1] or 0, kv[0][2])):
        comp = f"{test}/{p.get('device')}/{p.get('server')},{p.get('client')}"
        value = p.get("value")
        if not isinstance(value, (int, float)):
            out.append(Finding(PAIR, Status.WARN, f"{comp}: no result ({p.get('error') or 'no value'})"[:300], comp,
                               {"rail": float(rail or 0), "low": 1.0}))
            continue
        low = threshold_gbps is not None and value < threshold_gbps
        msg = f"{comp}: {value:.1f} Gb/s" + (f", below {threshold_gbps:g} Gb/s" if low else "")
        out.append(Finding(PAIR, Status.WARN if low else Status.PASS, msg, comp,
                           {"gbyte_s": round(value / 8.0, 3), "rail": float(rail or 0), "low": float(low)}))
    if len(out) > MAX_PAIR_FINDINGS:
        extra = len(out) - MAX_PAIR_FINDINGS
        out = out[:MAX_PAIR_FINDINGS] + [Finding(PAIR, Status.SKIP, f"{extra} more pair run(s) not recorded")]
    return out


def rdma_targets(per_node: dict[str, NodeOutcome]) -> tuple[list[str], list[str], dict[str, list[tuple[str, int]]]]:
    """From the nodes' own records (``burnin.hcas``: the checks phase's IB ports): the nodes with an
    active IB or RoCE port, the rails (HCAs active on every one of those nodes, sorted) and each node's
    active (HCA, port) pairs on those rails."""
    active: dict[str, list[tuple[str, int]]] = {}
    for node, o in per_node.items():
        hcas = ((o.record or {}).get("burnin") or {}).get("hcas") or []
        ports = sorted({(h["device"], int(h.get("port") or 1)) for h in hcas if isinstance(h, dict)
                        and isinstance(h.get("device"), str) and h["device"] and not h["device"].startswith("-")
                        and str(h.get("state") or "").upper() == "ACTIVE"
                        and (h.get("link_layer") or "InfiniBand") in RDMA_LINK_LAYERS})
        if ports:
            active[node] = ports
    if not active:
        return [], [], {}
    rails = sorted(set.intersection(*({d for d, _p in ports} for ports in active.values())))
    return sorted(active), rails, {n: [(d, p) for d, p in ports if d in rails] for n, ports in active.items()}


def run_rdma(outcome: AllocationOutcome, settings: BurninSettings, rdma_settings: Any, pair_runner: Any,
             counter_runner: Any, counter_settings: Any, log: Callable[[str], None]) -> None:
    """The RDMA pair phase across the allocation (perftest per rail, burnin/rdma.py) with the port
    counters read before and after its rounds (fabric/sampler.py). Node and HCA attributions and
    ports whose counters grew join their node's findings (so they drain under the blast radius like
    the other phases' FAILs); the phase's verdict, path warnings and unread counters are job findings."""
    from .rdma import defaults, run_rdma_phase

    nodes, rails, ports = rdma_targets(outcome.per_node)
    if len(nodes) < 2 or not rails:
        why = (f"{len(nodes)} node(s) with an active IB/RoCE port" if len(nodes) < 2
               else "no HCA active on every node with one")
        outcome.collective.append(Finding(RDMA, Status.SKIP, f"RDMA pairs not run: {why} (2 needed)"))
        return
    rs = rdma_settings or defaults()
    from ..fabric.sampler import CounterSampler

    sampler = CounterSampler([(n, d, p) for n in nodes for d, p in ports[n]], rs.launcher, counter_runner)
    log(f"RDMA pairs across {len(nodes)} nodes on {len(rails)} rail(s): {', '.join(rails)}")
    try:
        result = run_rdma_phase(nodes, rails, rs, pair_runner, known_good=known_good_in(settings.known_good, nodes),
                                seed=settings.seed, counter_sampler=sampler, counter_settings=counter_settings)
    except ValueError as exc:  # a setting that cannot schedule this allocation (ports): the phase's error
        outcome.collective.append(Finding(RDMA, Status.ERROR, f"RDMA pairs not run: {exc}"))
        return
    outcome.rdma = result.to_dict()
    outcome.rdma["pair_findings"] = [f.to_dict() for f in pair_findings(outcome.rdma.get("pairs") or [],
                                                                        rs.threshold_gbps)]
    by_node = {a.component: a for a in result.attributions}
    for f in result.findings():
        node = _owner(f, by_node, nodes)
        if f.check == COUNTERS and not sampler.read:
            continue  # nothing was read: no verdict on the counters (said below)
        if node is None:
            outcome.collective.append(f)
            continue
        o = outcome.per_node[node]
        o.findings.append(Finding(f.check, f.status, f.message, f.component, dict(f.metrics)))
        o.status = worst([o.status, f.status])
    if sampler.errors:
        shown = "; ".join(sampler.errors[:4]) + (f"; {len(sampler.errors) - 4} more" if len(sampler.errors) > 4 else "")
        what = "could not be read on any port" if not sampler.read else "not read on every port"
        outcome.collective.append(Finding(COUNTERS, Status.WARN, f"port counters {what}: {shown}"[:300]))


def _owner(f: Finding, attributions: dict[str, Any], nodes: list[str]) -> str | None:
    """The node a finding of the RDMA phase belongs to (None: the job's, e.g. a path between two nodes)."""
    if f.check == COUNTERS:
        node = (f.component or "").split("/")[0]
        return node if node in nodes and f.status is not Status.PASS else None
    a = attributions.get(f.component or "")
    if a is None or a.kind == "path":
        return None
    return a.nodes[0] if a.nodes and a.nodes[0] in nodes else None


def job_verdict(outcome: AllocationOutcome, host: str, started_at: str) -> Verdict:
    """The job step's own findings as a verdict (context ``burnin-job``): the collective(s), and the
    job-level findings it attached to nodes (localisation, fleet digests), component = the node."""
    findings = list(outcome.collective)
    for d in (outcome.rdma or {}).get("pair_findings") or []:
        findings.append(Finding.from_dict(d))
    for node, o in outcome.per_node.items():
        for f in o.findings:
            if f.check in (LOCALISE, "burnin.gemm.fleet", RESULT, RDMA, COUNTERS):
                findings.append(Finding(f.check, f.status, f"{node}: {f.message}", node, dict(f.metrics)))
    if outcome.suspect_shared_cause:
        findings.append(Finding("burnin.blast_radius", Status.WARN, outcome.suspect_shared_cause))
    if not findings:
        findings.append(Finding("burnin.job", Status.PASS, f"{len(outcome.nodes)} nodes, nothing to judge "
                                "across them"))
    return Verdict.of(host, findings, started_at, 0.0, "burnin-job")


def apply_drains(outcome: AllocationOutcome, slurm_settings, backend, run_id: str,
                 log: Callable[[str], None]) -> None:
    """Drain the planned nodes, each under the ownership rules (never over an admin's reason)."""
    from ..core.clock import utc_now_iso
    from ..slurm.backend import SlurmError
    from ..slurm.policy import decide

    for node in outcome.drain:
        o = outcome.per_node[node]
        verdict = Verdict.of(node, o.findings, utc_now_iso(), 0.0, "burnin")
        try:
            state = backend.node(node)
        except SlurmError as exc:
            log(f"{node}: state unreadable ({exc}); not drained")
            outcome.actions.append({"node": node, "action": "none", "why": f"state unreadable: {exc}"})
            continue
        decision = decide("burnin", verdict, state, slurm_settings, run_id)
        entry = {"node": node, "action": decision.action, "reason": decision.reason, "why": decision.why}
        if decision.action == "drain":
            try:
                backend.drain(node, decision.reason)
                log(f"{node}: drained: {decision.reason}")
            except SlurmError as exc:
                entry.update(action="none", why=f"drain refused: {exc}")
                log(f"{node}: drain refused: {exc}")
        outcome.actions.append(entry)
