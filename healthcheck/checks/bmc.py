"""BMC checks: the System Event Log (``bmc.sel``) and the power-supply and fan sensors (``bmc.sdr``).

Pure: judge ``snapshot.bmc``. What counts is policy kept as data: :data:`SEL_RULES` (event class,
words of the event, action, and for correctable memory errors a count that makes them a failure),
each with its reason in docs/storage-bmc.md.

SEL events are acted on once, like Xid events: each has a key (:func:`event_key`: record id, BMC time
stamp, sensor, event, direction); the hooks record the keys of :func:`event_keys` behind a drain and,
once that drain has ended, hand them back as ``Snapshot.acknowledged_events``; ``bmc.sel`` passes over
them. An event followed later in the log by its own deassertion has cleared and does not count.
"""
from __future__ import annotations

import re
from collections import defaultdict

from ..core.expectations import Expectations
from ..core.model import BmcEvent, BmcInfo, BmcSensor, Finding, Snapshot, Status, worst
from .registry import check, finding

CONTEXTS = ("check", "slurm-check")

# IPMI sensor type -> event class judged here (the list: power, fans, temperature, memory,
# processor). Types not listed (firmware progress, OS boot, chassis intrusion, ...) are not judged.
TYPE_CLASS = {
    "Power Supply": "psu", "Power Unit": "psu",
    "Fan": "fan", "Cooling Device": "fan",
    "Temperature": "temperature",
    "Memory": "memory",
    "Processor": "processor",
}

# (class, words of the event (lower case, substring), action, escalating threshold or ""), first match
# wins; order matters ("non-critical" before "critical", "uncorrectable" before "correctable").
# Actions: fail, warn, ignore. A rule with a threshold name WARNs below that count of events on one
# component and FAILs at it.
SEL_RULES: tuple[tuple[str, str, str, str], ...] = (
    ("psu", "presence detected", "ignore", ""),
    ("psu", "fully redundant", "ignore", ""),
    ("psu", "power off", "ignore", ""),
    ("psu", "power cycle", "ignore", ""),
    ("psu", "failure", "fail", ""),  # "Failure detected", "Predictive failure", "Power Supply Failure detected"
    ("psu", "ac lost", "fail", ""),
    ("psu", "input lost", "fail", ""),
    ("psu", "out-of-range", "fail", ""),
    ("psu", "redundancy lost", "fail", ""),
    ("psu", "non-redundant", "fail", ""),
    ("psu", "redundancy degraded", "warn", ""),
    ("psu", "config error", "warn", ""),
    ("fan", "presence detected", "ignore", ""),
    ("fan", "device inserted", "ignore", ""),
    ("fan", "transition to running", "ignore", ""),
    ("fan", "fully redundant", "ignore", ""),
    ("fan", "non-critical", "warn", ""),
    ("fan", "critical", "fail", ""),  # lower critical going low: the fan stopped or is failing
    ("fan", "non-recoverable", "fail", ""),
    ("fan", "redundancy lost", "fail", ""),
    ("fan", "non-redundant", "fail", ""),
    ("fan", "device removed", "fail", ""),
    ("fan", "device absent", "fail", ""),
    ("fan", "failure", "fail", ""),
    ("temperature", "non-critical", "warn", ""),
    ("temperature", "critical", "fail", ""),
    ("temperature", "non-recoverable", "fail", ""),
    ("memory", "presence detected", "ignore", ""),
    ("memory", "uncorrectable", "fail", ""),
    ("memory", "logging limit", "fail", ""),  # "Correctable ECC logging limit reached"
    ("memory", "logging disabled", "fail", ""),  # "Correctable memory error logging disabled"
    ("memory", "correctable", "warn", "memory_ce_fail_count"),
    ("memory", "parity", "fail", ""),
    ("memory", "device disabled", "fail", ""),
    ("memory", "critical overtemperature", "fail", ""),
    ("memory", "spare", "warn", ""),
    ("memory", "throttled", "warn", ""),
    ("memory", "configuration error", "warn", ""),
    ("processor", "presence detected", "ignore", ""),
    ("processor", "ierr", "fail", ""),
    ("processor", "thermal trip", "fail", ""),
    ("processor", "frb", "fail", ""),  # FRB1/BIST, FRB2/hang in POST, FRB3/processor startup failure
    ("processor", "uncorrectable machine check", "fail", ""),
    ("processor", "machine check exception", "fail", ""),
    ("processor", "configuration error", "fail", ""),
    ("processor", "correctable machine check", "warn", ""),
    ("processor", "throttled", "warn", ""),
    ("processor", "disabled", "warn", ""),
)
# An asserted event of a judged class that no rule names
UNLISTED_ACTION = "warn"
_CLASS_NAMES = {"psu": "power supply", "fan": "fan", "temperature": "temperature", "memory": "memory",
                "processor": "processor"}
_ACTION_STATUS = {"fail": Status.FAIL, "warn": Status.WARN}


def event_class(ev: BmcEvent) -> str | None:
    """The judged class of an event (``psu``, ``fan``, ``temperature``, ``memory``, ``processor``) or None."""
    kind = TYPE_CLASS.get(ev.sensor_type or "")
    if kind is None and ev.sensor_type == "Event Logging Disabled" and "memory" in ev.description.lower():
        return "memory"
    return kind


def rule_for(ev: BmcEvent) -> tuple[str, str, str, str] | None:
    """The rule that classes ``ev``: (class, words, action, threshold name); None when its class is not
    judged. An event of a judged class that no rule names gets :data:`UNLISTED_ACTION`."""
    kind = event_class(ev)
    if kind is None:
        return None
    text = ev.description.lower()
    for rule in SEL_RULES:
        if rule[0] == kind and rule[1] in text:
            return rule
    return (kind, "", UNLISTED_ACTION, "")


def event_key(ev: BmcEvent) -> str:
    """The identity of one SEL record: ``sel|id|date time|sensor|event|direction``. Record ids are
    reused after the SEL is cleared; the BMC's time stamp tells those apart."""
    return "|".join(("sel", ev.record_id, f"{ev.date or '-'} {ev.time or '-'}", ev.sensor, ev.description,
                     ev.direction or "-"))


def event_keys(bmc: BmcInfo | None) -> list[str]:
    """Keys of the SEL events ``bmc.sel`` judges (warn or fail): what the hooks record behind a drain."""
    return [event_key(ev) for ev in _active(bmc.events or []) if _judged(ev)] if bmc else []


def _judged(ev: BmcEvent) -> bool:
    rule = rule_for(ev)
    return rule is not None and rule[2] != "ignore"


def _active(events: list[BmcEvent]) -> list[BmcEvent]:
    """Asserted events (or events without a direction: FreeIPMI) not deasserted later in the log."""
    out: list[BmcEvent] = []
    for ev in events:
        if ev.direction == "Deasserted":
            ident = (ev.sensor, ev.description.lower(), ev.detail)
            out = [e for e in out if (e.sensor, e.description.lower(), e.detail) != ident]
        else:
            out.append(ev)
    return out


@check("bmc.sel", needs=("bmc",), contexts=CONTEXTS, thresholds={"memory_ce_fail_count": 4},
       fails_by_default=True,
       fails_on="an asserted SEL event of a power supply (failure, AC lost, redundancy lost), fan (critical), "
                "temperature (critical), memory (uncorrectable, logging limit, correctable ECC "
                "memory_ce_fail_count times on one DIMM) or processor (IERR, thermal trip, machine check) "
                "not yet acted on")
def sel(snap: Snapshot, exp: Expectations, t: dict) -> list[Finding]:
    """No asserted power-supply, fan, temperature, memory or processor event in the BMC's event log
    that the policy calls a failure, and that the node was not already drained and resumed for.

    Events are grouped per class and component (the SEL's detail column, else its sensor); a group's
    status is its rule's action, a correctable memory error FAILing once ``memory_ce_fail_count`` of
    them are logged on one component. Deasserted events, and events acted on before, do not count."""
    bmc = snap.bmc
    if bmc.unavailable:
        return [finding("bmc.sel", Status.SKIP, bmc.unavailable)]
    if bmc.events is None:
        if bmc.sel_error:
            return [finding("bmc.sel", Status.ERROR, f"cannot judge: {bmc.sel_error}")]
        return [finding("bmc.sel", Status.SKIP, "the SEL was not read")]
    acked = set(snap.acknowledged_events or ())
    active = _active(bmc.events)
    fresh = [ev for ev in active if event_key(ev) not in acked] if acked else active
    n_acked = len(active) - len(fresh)
    groups: dict[tuple[str, str], list[tuple[BmcEvent, tuple]]] = defaultdict(list)
    for ev in fresh:
        rule = rule_for(ev)
        if rule is not None and rule[2] != "ignore":
            groups[(rule[0], ev.detail or ev.sensor)].append((ev, rule))
    acked_note = f"; {n_acked} already acted on" if n_acked else ""
    if not groups:
        return [finding("bmc.sel", Status.PASS,
                        f"no power-supply, fan, temperature, memory or processor event in the SEL "
                        f"({len(bmc.events)} records{acked_note})", None, sel_records=len(bmc.events),
                        sel_acknowledged=n_acked)]
    findings = []
    for (kind, component), items in sorted(groups.items()):
        by_words: dict[str, list] = defaultdict(list)
        for ev, rule in items:
            by_words[ev.description].append(rule)
        parts: list[tuple[Status, str]] = []
        for words, rules in by_words.items():
            rule = rules[0]
            status = _ACTION_STATUS.get(rule[2], Status.WARN)
            if rule[3] and len(rules) >= int(t[rule[3]]):
                status = Status.FAIL
            label = f"{words} x{len(rules)}"
            if rule[3] and status is not Status.FAIL:
                label += f" (FAIL at {int(t[rule[3]])})"
            parts.append((status, label))
        status = worst(s for s, _ in parts)
        text = "; ".join(p for s, p in parts if s is status) + \
            "".join(f"; {p}" for s, p in parts if s is not status)
        findings.append(finding("bmc.sel", status, f"{_CLASS_NAMES[kind]} {component}: {text}",
                                f"bmc:{component}", sel_events=len(items)))
    return findings


# ---------------------------------------------------------------------------------------- SDR

# ipmitool status codes: ok, ns (no reading / disabled), nc/lnc/unc (non-critical), cr/lcr/ucr
# (critical), nr/lnr/unr (non-recoverable)
_CRITICAL = ("cr", "lcr", "ucr", "nr", "lnr", "unr")
_NON_CRITICAL = ("nc", "lnc", "unc")
_PSU_NAME = re.compile(r"^(?:ps|psu|pws|pwr)[ _-]?\d|power ?supply|\bpsu", re.IGNORECASE)
# asserted states a discrete power-supply or fan sensor lists in its reading while its status says ok
FAULT_READINGS = ("failure", "ac lost", "input lost", "out-of-range", "predictive", "redundancy lost",
                  "non-redundant", "device absent", "config error")


def sensor_class(sensor: BmcSensor) -> str | None:
    """``psu`` or ``fan`` from the sensor's name (the SDR listing carries no type), else None."""
    if _PSU_NAME.search(sensor.name):
        return "psu"
    if "fan" in sensor.name.lower():
        return "fan"
    return None


@check("bmc.sdr", needs=("bmc",), contexts=CONTEXTS, fails_by_default=True,
       fails_on="a power-supply or fan sensor at a critical or non-recoverable status, or a discrete one "
                "reading a failure (AC lost, predictive failure, redundancy lost)")
def sdr(snap: Snapshot, exp: Expectations, t: dict) -> list[Finding]:
    """Power-supply and fan sensors are ok: a critical or non-recoverable status (cr, lcr, ucr, nr,
    lnr, unr) or a discrete reading of a failure (Failure detected, AC lost, Predictive failure,
    redundancy lost) is FAIL; non-critical (nc, lnc, unc) is WARN, as is a critical status of any
    other sensor. ``ns`` (no reading: an empty fan header or socket) passes."""
    bmc = snap.bmc
    if bmc.unavailable:
        return [finding("bmc.sdr", Status.SKIP, bmc.unavailable)]
    if bmc.sensors is None:
        if bmc.sdr_error:
            return [finding("bmc.sdr", Status.ERROR, f"cannot judge: {bmc.sdr_error}")]
        return [finding("bmc.sdr", Status.SKIP, "the sensor list was not read")]
    findings = []
    judged = 0
    for sensor in bmc.sensors:
        kind = sensor_class(sensor)
        judged += kind is not None
        reading = sensor.reading.lower()
        if kind and sensor.status in _CRITICAL:
            status = Status.FAIL
        elif kind and any(word in reading for word in FAULT_READINGS):
            status = Status.FAIL
        elif sensor.status in _NON_CRITICAL or sensor.status in _CRITICAL:
            status = Status.WARN
        else:
            continue
        what = {"psu": "power supply", "fan": "fan"}.get(kind or "", "sensor")
        findings.append(finding("bmc.sdr", status, f"{what} {sensor.name}: {sensor.status} "
                                f"({sensor.reading or 'no reading'})", f"bmc:{sensor.name}"))
    if not findings:
        return [finding("bmc.sdr", Status.PASS, f"{judged} power-supply and fan sensors ok "
                        f"({len(bmc.sensors)} sensors)", None, sdr_sensors=len(bmc.sensors),
                        sdr_judged=judged)]
    return findings
