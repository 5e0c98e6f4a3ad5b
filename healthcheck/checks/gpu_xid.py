"""gpu.xid: NVIDIA driver errors in the kernel log (Xid, "fallen off the bus", RmInitAdapter failed).

What counts as a node problem is policy, kept as data: :class:`~healthcheck.core.expectations.XidPolicy`
(per Xid: action fail/warn/ignore, time window, minimum count), loaded from the packaged
``healthcheck/data/xid_policy.toml`` (classified after NVIDIA's Xid catalog, sources per entry) with the
site config's ``[xid]`` overrides; an Xid it does not list gets the policy's ``unknown_action``.

Events are acted on once: each has a key (:func:`event_key`: boot id, kernel time stamp, PCI address,
kind, Xid); the hooks record the keys behind a drain and, once that drain has ended (the node was
resumed), hand them back as ``Snapshot.acknowledged_events`` (``slurm/ledger.py``), and this check passes
over them. New events, or the same Xid at another time stamp or in another boot, count as usual.
"""
from __future__ import annotations

if False:  # annotations only
    from datetime import datetime  # noqa: F401

from ..core.expectations import Expectations, XidRule
from ..core.model import Finding, KernelEvent, Snapshot, Status, normalize_pci_bus_id, parse_iso_utc, worst
from .gpu_inventory import ALL_CONTEXTS
from .registry import check, finding


_ACTION_STATUS = {"fail": Status.FAIL, "warn": Status.WARN, "ignore": Status.PASS}
_OTHER_KINDS = {
    "fallen_off_bus": "GPU has fallen off the bus",
    "rm_init_failed": "RmInitAdapter failed: GPU could not be initialised",
}


@check("gpu.xid", needs=("kernel_events",), contexts=ALL_CONTEXTS)
def gpu_xid(snap: Snapshot, exp: Expectations, t: dict) -> list[Finding]:
    """No Xid the policy calls a failure, no GPU fallen off the bus, no RmInitAdapter failure, no fatal
    NVSwitch SXid.

    Events are grouped per PCI address and Xid; each group is judged by its rule: the events no
    older than the rule's window (0 = all) are counted and, when at least ``min_count``, give the
    rule's action (fail -> FAIL, warn -> WARN, ignore -> PASS). An event's age comes from its wall
    clock time (an ISO time without offset is taken as UTC) or, failing that, from its uptime
    stamp against the host's uptime; an event of unknown age is counted (conservative).
    "fallen off the bus" and "RmInitAdapter failed" lines FAIL always. An NVLink5 Xid (144-150) is judged
    by the severity its message states (the rule's ``fatal_action`` / ``nonfatal_action``); an Xid known
    only from a later one's "caused by previous Xid N" counts as an event of Xid N. An NVSwitch SXid line
    gets the policy's ``sxid_fatal_action`` (fail) or ``sxid_nonfatal_action`` (warn) by the severity it
    states, one finding per switch ("nvswitch3"). One finding per component: ``gpuN`` when the address
    belongs to a GPU, else the PCI address, else "node". In HealthCheckProgram and ``check`` the NVSwitch
    errors the fabric manager logged in this boot join the kernel's SXids (as a bundle's copy of its log
    does; no log, nothing said); a log there that cannot be read or, as root, is not root's alone is
    ERROR ("fabricmanager"), the kernel's events judged all the same.
    """
    name = "gpu.xid"
    events = snap.kernel_events or []
    acked = set(snap.acknowledged_events or ())
    if acked:
        fresh = [ev for ev in events if event_key(ev, snap.boot_id) not in acked]
        n_acked, events = len(events) - len(fresh), fresh
    else:
        n_acked = 0
    policy = exp.xid_policy
    now = parse_iso_utc(snap.taken_at) if events else None  # (datetime only when there is an event to age)
    by_pci = _gpu_components(snap)

    # plain dicts: collections (defaultdict) costs the prolog ~1 ms to import
    groups: dict[str, list[tuple[Status, str, str, int]]] = {}
    xid_events: dict[tuple[str | None, int], list[KernelEvent]] = {}
    other: dict[tuple[str | None, str], int] = {}
    sxids: dict[tuple[str, int, str], int] = {}
    for ev in events:
        pci = normalize_pci_bus_id(ev.pci_bus_id)
        if ev.kind == "xid" and ev.xid is not None:
            xid_events.setdefault((pci, ev.xid), []).append(ev)
        elif ev.kind == "sxid" and ev.xid is not None:
            switch = ev.device or pci or "nvswitch"
            key = (switch, ev.xid, ev.event_class or "nonfatal")
            sxids[key] = sxids.get(key, 0) + 1
        elif ev.kind in _OTHER_KINDS:
            other[(pci, ev.kind)] = other.get((pci, ev.kind), 0) + 1

    implied = _implied(xid_events)
    for (pci, xid), evs in sorted(xid_events.items(), key=lambda kv: (kv[0][0] or "", kv[0][1])):
        rule = policy.rule(xid)
        counted_events = [ev for ev in evs if _in_window(ev, rule.window_s, now, snap)]
        counted = len(counted_events)
        action, severity = _action(rule, counted_events)
        where = f" on {pci}" if pci else ""
        label = f"Xid {xid} ({_xid_name(rule)}){severity} x{counted}{where}"
        if (pci, xid) in implied:
            label += f" (named by Xid {implied[(pci, xid)]}: 'caused by previous Xid {xid}')"
        window = f" in {rule.window_s:g}s" if rule.window_s else ""
        if action == "ignore":
            status, text = Status.PASS, f"{label} (ignored by policy)"
        elif counted >= max(rule.min_count, 1):
            status = _ACTION_STATUS.get(action, Status.WARN)
            text = label + (window if window else "")
        else:
            status = Status.PASS
            text = f"{label}{window}, below {rule.min_count} (seen {len(evs)} in log)"
        groups.setdefault(_component(pci, by_pci), []).append((status, text, f"xid_{xid}", counted))

    for (pci, kind), count in sorted(other.items(), key=lambda kv: (kv[0][0] or "", kv[0][1])):
        where = f" ({pci})" if pci else ""
        groups.setdefault(_component(pci, by_pci), []).append(
            (Status.FAIL, f"{_OTHER_KINDS[kind]}{where} x{count}", kind, count))

    for (switch, sxid, severity), count in sorted(sxids.items()):
        action = policy.sxid_fatal_action if severity == "fatal" else policy.sxid_nonfatal_action
        words = "Fatal" if severity == "fatal" else "Non-fatal"
        groups.setdefault(switch, []).append(
            (_ACTION_STATUS.get(action, Status.WARN), f"SXid {sxid} ({words}) x{count} on {switch}", f"sxid_{sxid}",
             count))

    unread = _fabricmanager_unread(name, snap)
    if not groups:
        if n_acked:
            return [finding(name, Status.PASS, f"no new NVIDIA Xid events in the kernel log ({n_acked} "
                            "already acted on: the node was drained for them and resumed since)", None,
                            xid_events=0, xid_acknowledged=n_acked)] + unread
        return [finding(name, Status.PASS, "no NVIDIA Xid events in the kernel log", None,
                        xid_events=0)] + unread
    findings = unread
    for component in sorted(groups):
        items = groups[component]
        status = worst(s for s, _, _, _ in items)
        shown = [text for s, text, _, _ in items if s is not Status.PASS]
        shown = shown or [text for _, text, _, _ in items]
        metrics: dict[str, float] = {"xid_events": sum(c for _, _, _, c in items)}
        for _, _, key, c in items:
            metrics[key] = metrics.get(key, 0) + c
        findings.append(finding(name, status, "; ".join(shown), component, **metrics))
    return findings


# probe_errors' key for a fabric manager log that is there but could not be read (probes.live, issue 33)
_FABRICMANAGER_ERROR = "kernel_events.fabricmanager"


def _fabricmanager_unread(name: str, snap: Snapshot) -> list[Finding]:
    """ERROR when the fabric manager's log is there and was not read: its SXids cannot be judged."""
    err = snap.probe_errors.get(_FABRICMANAGER_ERROR)
    if err is None:
        return []
    return [finding(name, Status.ERROR, f"cannot judge the fabric manager's NVSwitch errors: {err.message}",
                    "fabricmanager")]


_CAUSED_BY = "caused by previous Xid "


def _implied(xid_events: dict[tuple[str | None, int], list[KernelEvent]]) -> dict[tuple[str | None, int], int]:
    """Xids known only from a later Xid's words ("45, ... Ch 00000001 caused by previous Xid 149": the
    Xid 149 line itself rotated out of the log or was not captured): each such message counts as an
    event of the named Xid on the same GPU, where the log holds no line of that Xid there. Returns
    (pci, named Xid) -> the Xid that named it. ``xid_events`` gains the implied groups."""
    found: dict[tuple[str | None, int], tuple[int, list[KernelEvent]]] = {}
    for (pci, xid), evs in xid_events.items():
        for ev in evs:
            at = (ev.message or "").find(_CAUSED_BY)
            if at < 0:
                continue
            digits = (ev.message[at + len(_CAUSED_BY):].split(None, 1) or [""])[0].rstrip(".,;")
            if digits.isdigit() and len(digits) <= 6 and (pci, int(digits)) not in xid_events:
                found.setdefault((pci, int(digits)), (xid, []))[1].append(ev)
    for key, (_, evs) in found.items():
        xid_events[key] = evs
    return {key: by for key, (by, _) in found.items()}


def _action(rule: XidRule, events: list[KernelEvent]) -> tuple[str, str]:
    """The group's action and a label for it: the rule's action, or for an Xid whose message states its
    severity (NVLink5, ``fatal_action`` / ``nonfatal_action``) the gravest action of its events."""
    if rule.fatal_action is None and rule.nonfatal_action is None:
        return rule.action, ""
    from ..core.expectations import message_severity  # noqa: PLC0415 - NVLink5 Xids only

    severities = {message_severity(ev.message) for ev in events}
    actions = {rule.action_for(ev.message) for ev in events} or {rule.action}
    action = next(a for a in ("fail", "warn", "ignore") if a in actions) if actions <= set(_ACTION_STATUS) \
        else rule.action
    words = sorted(s for s in severities if s)
    return action, (f" [{', '.join(words)}]" if words else "")


def event_key(ev: KernelEvent, boot_id: str | None) -> str:
    """The identity of one kernel-log event: ``boot|time stamp|PCI address|kind|Xid``. The time stamp is
    the kernel's (seconds since boot), else the wall clock time, else a checksum of the line."""
    if ev.uptime_s is not None:
        stamp = f"{ev.uptime_s:.6f}"
    elif ev.time:
        stamp = ev.time
    else:
        import zlib  # a line with neither time stamp: rare

        stamp = f"crc{zlib.crc32(ev.line.encode('utf-8', 'replace')):08x}"
    xid = "-" if ev.xid is None else str(ev.xid)
    return f"{boot_id or '-'}|{stamp}|{normalize_pci_bus_id(ev.pci_bus_id) or '-'}|{ev.kind}|{xid}"


def _xid_name(rule: XidRule) -> str:
    return rule.name or "no name"


def _gpu_components(snap: Snapshot) -> dict[str, str]:
    return {normalize_pci_bus_id(g.pci_bus_id): g.component
            for g in (snap.gpus or []) if g.pci_bus_id}


def _component(pci: str | None, by_pci: dict[str, str]) -> str:
    if pci is None:
        return "node"
    return by_pci.get(pci, pci)



def _age_s(ev: KernelEvent, now: datetime | None, snap: Snapshot) -> float | None:
    if ev.time and now is not None:
        when = parse_iso_utc(ev.time)
        if when is not None:
            return (now - when).total_seconds()
    host_uptime = snap.host.uptime_s if snap.host else None
    if ev.uptime_s is not None and host_uptime is not None:
        return host_uptime - ev.uptime_s
    return None


def _in_window(ev: KernelEvent, window_s: float, now: datetime | None, snap: Snapshot) -> bool:
    if not window_s or window_s <= 0:
        return True
    age = _age_s(ev, now, snap)
    return age is None or age <= window_s
