"""host.events: machine checks, memory, PCIe, storage, filesystem, HCA/NIC and link events in the
kernel log, judged per class and component through the host-event policy
(``healthcheck/data/host_events.toml``, :mod:`healthcheck.policies.host_events`).

Events are acted on once, like Xid events: the hooks record the keys (:func:`gpu_xid.event_key`) of the
kernel events behind a drain and hand them back once it has ended (``Snapshot.acknowledged_events``);
this check passes over them.
"""
from __future__ import annotations

if False:  # annotations only
    from datetime import datetime  # noqa: F401

from ..core.model import Finding, KernelEvent, Snapshot, Status, normalize_pci_bus_id, parse_iso_utc, worst
from .gpu_inventory import ALL_CONTEXTS
from .gpu_xid import event_key
from .registry import check, finding

_SEVERITY = {"fail": Status.FAIL, "warn": Status.WARN, "note": Status.PASS}


@check("host.events", needs=("kernel_events",), contexts=ALL_CONTEXTS, fails_by_default=True,
       fails_on="an uncorrected machine check or memory error, an uncorrected PCIe error, an NVMe "
                "reset, a block I/O or filesystem error, an HCA health or module fault, a flapping link")
def host_events(snap: Snapshot, exp, t: dict) -> list[Finding]:
    """No machine-check, memory, PCIe, storage, filesystem, HCA or link event the host-event policy
    calls a failure.

    The kernel log's host events are grouped per class and component (the GPU, disk, interface, memory
    controller or PCI address the line names; else the node). Each group is judged by its class in
    the policy (``healthcheck/data/host_events.toml``, see docs/host-events.md): the events no older
    than its window (0 = the whole log) are counted (EDAC lines count the errors they report; link
    "up" lines count their repeats) and give the class's severity from ``min_count`` on, WARN from
    ``warn_count``; the severity is the class's in the context judged (``severity_by_context``, from the
    judge's ``"_context"`` threshold key), else its ``severity``. "Now" is the snapshot's time (a bundle's recording time), else the newest line of
    the log; an event of unknown age is counted. Events the hooks acknowledged after an ended drain are
    passed over. The device decides too (the class's ``device``): a block error on an optical, floppy,
    loop, RAM or virtual-media device is a line, never a drain, one on a disk the node shows unused
    WARNs; a module event or transmit timeout on an HCA port FAILs only where the class expects that
    port up (docs/host-events.md, "The device decides").
    """
    name = "host.events"
    policy = _policy(exp)
    context = t.get("_context")  # the judge's (checks.registry.CONTEXT_KEY); None in a direct call
    events = [ev for ev in (snap.kernel_events or []) if ev.kind == "host" and ev.event_class]
    acked = set(snap.acknowledged_events or ())
    n_acked = 0
    if acked:
        fresh = [ev for ev in events if event_key(ev, snap.boot_id) not in acked]
        n_acked, events = len(events) - len(fresh), fresh
    now_time, now_up = _reference(snap, events) if events else (None, None)  # (no datetime without events)
    gpus = {normalize_pci_bus_id(g.pci_bus_id): g.component for g in (snap.gpus or []) if g.pci_bus_id}

    groups: dict[tuple[str, str], list[KernelEvent]] = {}
    for ev in events:
        groups.setdefault((ev.event_class, _component(ev, gpus)), []).append(ev)
    _clear(groups, policy, events)

    per_component: dict[str, list[tuple[Status, str, str, int]]] = {}
    for (event_class, component), evs in groups.items():
        rule = policy.rule(event_class)
        severity = rule.severity_in(context) if rule is not None else "ignore"
        if severity == "ignore" or not evs:
            continue
        severity, why = device_severity(rule, severity, evs, snap, exp, policy)
        counted = [ev for ev in evs if _in_window(ev, rule.window_s, now_time, now_up)]
        if rule.count == "repeats":
            n = max(0, len(counted) - 1)
        elif rule.count == "sum":
            n = sum(max(1, ev.count) for ev in counted)
        else:
            n = len(counted)
        window = f" in {rule.window_s:g} s" if rule.window_s else ""
        label = f"{rule.what} x{n}{window}"
        if n >= rule.min_count:
            status = _SEVERITY[severity]
        elif rule.warn_count and n >= rule.warn_count and severity != "note":
            status = Status.WARN
        else:
            status = Status.PASS
        if status is Status.PASS and severity == "note" and n >= rule.min_count:
            text = f"{label} ({event_class}): {evs[-1].message}; not drained: {why}"
        elif status is Status.PASS:
            text = f"{label}, below {rule.warn_count or rule.min_count} ({len(evs)} line(s) in the log)"
        else:
            text = f"{label} ({event_class}): {evs[-1].message}" + (f" [{why}]" if why else "")
        per_component.setdefault(component, []).append((status, text, event_class, n))

    if not per_component:
        tail = (f" ({n_acked} already acted on: the node was drained for them and resumed since)"
                if n_acked else "")
        return [finding(name, Status.PASS, f"no host events in the kernel log{tail}", None,
                        host_events=0, host_events_acknowledged=n_acked)]
    findings = []
    for component in sorted(per_component):
        items = per_component[component]
        status = worst(s for s, _, _, _ in items)
        shown = [text for s, text, _, _ in items if s is not Status.PASS] or [t for _, t, _, _ in items]
        metrics: dict[str, float] = {"host_events": sum(n for _, _, _, n in items)}
        for _, _, event_class, n in items:
            metrics[f"host_{event_class}"] = metrics.get(f"host_{event_class}", 0) + n
        findings.append(finding(name, status, "; ".join(shown), component, **metrics))
    return findings


def device_severity(rule, severity: str, evs: list[KernelEvent], snap: Snapshot, exp, policy) -> tuple[str, str]:
    """The severity of a group of events once the device they name has had its say (the rule's
    ``device``), and why, for the finding: docs/host-events.md "The device decides"."""
    if rule.device == "block":
        return _block_severity(rule, severity, evs[-1], exp, policy)
    if rule.device == "hca_port":
        return _port_severity(rule, severity, evs, snap, exp)
    return severity, ""


def _block_severity(rule, severity: str, ev: KernelEvent, exp, policy) -> tuple[str, str]:
    info = ev.device_info or {}
    never = policy.devices.never_drained(info.get("disk") or ev.device, info.get("vendor_model"))
    if never is None and info.get("disk") and info.get("disk") != ev.device:
        never = policy.devices.never_drained(ev.device)
    if never:
        return "note", never
    used = info.get("used_by") or []
    if used:
        return severity, f"backs {', '.join(used)}"
    disk = info.get("disk") or ev.device or ""
    if disk.startswith("nvme") and getattr(exp, "nvme_count", None):
        return severity, "an NVMe device the class expects (storage.nvme_count)"
    if info.get("pooled") and not info.get("removable"):
        return severity, "backs no mount we can see, but ZFS pools are mounted: it may be a member disk"
    if info.get("present") and "used_by" in info:
        return rule.by_device.get("unused", severity), "backs no mount or swap, and the class does not expect it"
    return severity, ""


def _port_severity(rule, severity: str, evs: list[KernelEvent], snap: Snapshot, exp) -> tuple[str, str]:
    ports = snap.ib_ports
    pcis = {normalize_pci_bus_id(ev.pci_bus_id) for ev in evs if ev.pci_bus_id}
    if ports is None or not pcis:
        return severity, ""  # no port readings, or a line that names no PCI function: as the class says
    mine = [p for p in ports if p.pci_bus_id and normalize_pci_bus_id(p.pci_bus_id) in pcis]
    expected = [p.component for p in mine if _expected_up(p, exp)]
    if expected:
        return rule.by_device.get("expected", severity), f"port {', '.join(expected)} is expected up"
    what = (f"port {', '.join(p.component for p in mine)} is not expected up (no [class.NAME.ib.per_port] "
            "active, not in ib.devices)") if mine else "not an HCA port of this node's RDMA devices"
    return rule.by_device.get("unexpected", severity), what


def _expected_up(port, exp) -> bool:
    """Whether the class expects ``port`` up, as ``ib.port.state`` judges it: recorded active in
    ``ib.per_port``, else a port of an HCA named in ``ib.devices``."""
    want = (getattr(exp, "ib_per_port", None) or {}).get(port.component)
    if want is not None:
        return bool(want.active)
    return port.device in (getattr(exp, "ib_devices", None) or ())


def _policy(exp):
    """The site's policy where the expectations carry one, else the packaged default."""
    policy = getattr(exp, "host_event_policy", None)
    if policy is None:
        from ..policies.host_events import load_host_event_policy

        policy = load_host_event_policy()
    return policy


def _component(ev: KernelEvent, gpus: dict[str, str]) -> str:
    pci = normalize_pci_bus_id(ev.pci_bus_id) if ev.pci_bus_id else None
    if pci and pci in gpus:
        return gpus[pci]
    if ev.device and not ev.device.startswith("module"):
        return ev.device
    if pci:
        return f"{pci} {ev.device}" if ev.device else pci
    return ev.device or "node"


def _clear(groups: dict, policy, events: list[KernelEvent]) -> None:
    """Drop the events of a class with ``cleared_by`` that a later clearing event on the same
    component follows (a module unplugged, then plugged again)."""
    order = {id(ev): i for i, ev in enumerate(events)}
    for (event_class, component), evs in groups.items():
        rule = policy.rule(event_class)
        if rule is None or not rule.cleared_by:
            continue
        clearing = groups.get((rule.cleared_by, component))
        if not clearing:
            continue
        last_clear = max(order[id(ev)] for ev in clearing)
        evs[:] = [ev for ev in evs if order[id(ev)] > last_clear]



def _reference(snap: Snapshot, events: list[KernelEvent]) -> tuple[datetime | None, float | None]:
    """'Now' as a wall time and as seconds since boot: the snapshot's time and the host's uptime; a
    recorded log without them is judged as of its newest line."""
    times = [t for t in (parse_iso_utc(ev.time) for ev in events) if t is not None]
    now_time = parse_iso_utc(snap.taken_at) or (max(times) if times else None)
    ups = [ev.uptime_s for ev in events if ev.uptime_s is not None]
    newest_up = max(ups) if ups else None
    host_up = snap.host.uptime_s if snap.host else None
    if host_up is not None and (newest_up is None or host_up >= newest_up):
        return now_time, host_up
    return now_time, newest_up  # no host uptime, or one from another boot/machine than the log's


def _in_window(ev: KernelEvent, window_s: float, now_time, now_up) -> bool:
    if not window_s:
        return True
    age = None
    if ev.time and now_time is not None:
        when = parse_iso_utc(ev.time)
        if when is not None:
            age = (now_time - when).total_seconds()
    if age is None and ev.uptime_s is not None and now_up is not None:
        age = now_up - ev.uptime_s
    return age is None or age <= window_s
