"""InfiniBand / RoCE port checks: state, rate, error counters, HCA firmware.

Which ports are judged: every port named in ``exp.ib_per_port`` (what ``healthcheck config generate``
recorded per port: CA type, firmware, rate, link layer, whether it was active), whatever its link layer;
the other ports when their link layer is ``exp.ib_link_layer`` (when the node class sets it), else the
InfiniBand ports (a port with no ``link_layer`` file is taken as InfiniBand: old kernels). Ports of
another layer that no per-port expectation names (the Ethernet storage/management functions of an HGX
node, say) are only reported: a down Ethernet port WARNs when no layer is expected, and is SKIPped
when another layer is.

Counter meanings: Linux ``Documentation/infiniband/sysfs.txt`` (the ``counters/`` files carry the
port's PortCounters attribute) and NVIDIA UFM "Appendix - Supported Port Counters and Events"
(docs.nvidia.com/networking/display/ufmenterpriseumv6222/appendix+-+supported+port+counters+and+events):
symbol_error = minor link errors on any lane; link_error_recovery = link retrained after errors;
link_downed = link failed its recovery and went down; port_rcv_errors = received packets with errors
(local physical errors, malformed packets, buffer overruns); port_rcv_remote_physical_errors = packets
marked bad (EBP) upstream; local_link_integrity_errors = times the local physical errors exceeded the
LocalPhyErrors threshold; excessive_buffer_overrun_errors = consecutive flow-control update periods with
overruns. UFM raises its alarms on *rates* over a TTL; here the values are totals since the last reset
(or boot). WARN thresholds are totals; FAIL thresholds are counts *per 24 h of uptime*: a total at or
above ``fail * max(1, uptime / 24 h)`` (``snapshot.host.uptime_s``; unknown uptime judges the total).
The kernel never clears these counters (only ``perfquery -x``, a port reset or a driver reload do), so
the total since boot over the uptime is a lower bound of the port's average rate: a cleared counter
can only make it pass, never fail. The growth during a job is judged by ``job.counter_growth``.
"""
from __future__ import annotations


from ..core.expectations import Expectations, IbPortExpect
from ..core.model import Finding, IbPort, Snapshot, Status
from .registry import CONTEXTS, check, finding, skip

_RATE_EPS = 0.01

# Threshold keys: "<counter>_warn" / "<counter>_fail"; a counter reaching the value WARNs / FAILs.
# Any counter the probe reads (including "hw_*") can be given a threshold from the config.
ERROR_THRESHOLDS: dict[str, int | None] = {
    "symbol_error_warn": 10,
    "link_downed_warn": 1,
    "link_error_recovery_warn": 10,
    "port_rcv_errors_warn": 10,
    "excessive_buffer_overrun_errors_warn": 1,
    "local_link_integrity_errors_warn": 1,
    "port_rcv_remote_physical_errors_warn": 10,
    # FAIL: per 24 h of uptime (see the module docstring). link_downed: Azure's HPC health checks fail a
    # node whose IB link flapped 5 times in 24 h. symbol_error / port_rcv_errors: on HDR/NDR links the
    # symbol errors are what is left *after* FEC (NVIDIA ibdiagnet manual, "Bit Error Rate"), ~0 on a
    # good link; 10,000 a day is a sustained post-FEC BER of ~3e-13 at 400 Gb/s full load, i.e. a link
    # out of the 1e-12 class that shows as retransmissions and NCCL slowdowns. link_error_recovery:
    # each is a retrain that stalls the link; 25 a day is 5x the flap rule for a link that recovered.
    # local_link_integrity / excessive_buffer_overrun: each already means a threshold of physical
    # errors / overruns was passed; 10 a day is a failing link or HCA. port_rcv_remote_physical_errors
    # counts packets marked bad *upstream*: another link's fault, so it never fails this node.
    "symbol_error_fail": 10000,
    "link_downed_fail": 5,
    "link_error_recovery_fail": 25,
    "port_rcv_errors_fail": 10000,
    "excessive_buffer_overrun_errors_fail": 10,
    "local_link_integrity_errors_fail": 10,
    "port_rcv_remote_physical_errors_fail": None,
}
DAY_S = 86400.0
# Counters that are traffic volumes, not errors (kept out of the metrics).
_TRAFFIC = frozenset({"port_xmit_data", "port_rcv_data", "port_xmit_packets", "port_rcv_packets",
                      "unicast_xmit_packets", "unicast_rcv_packets", "multicast_xmit_packets",
                      "multicast_rcv_packets"})


def judged_layer(exp: Expectations) -> str:
    return exp.ib_link_layer or "InfiniBand"


def port_layer(port: IbPort) -> str:
    return port.link_layer or "InfiniBand"


def is_judged(port: IbPort, exp: Expectations) -> bool:
    return port_layer(port).lower() == judged_layer(exp).lower()


def is_active(port: IbPort) -> bool:
    return port.state == "ACTIVE" and port.phys_state in (None, "LinkUp")


def _why_down(port: IbPort) -> str:
    """What a state / physical state pair usually means on a compute node."""
    phys = port.phys_state or ""
    if phys == "Polling":
        return "no link partner: cable, transceiver or switch port"
    if phys == "Disabled":
        return "port disabled"
    if phys == "LinkUp" and port.state in ("INIT", "ARMED"):
        return "physical link up but not configured by the subnet manager"
    if phys in ("LinkErrorRecovery", "Sleep", "PortConfigurationTraining"):
        return f"physical layer in {phys}"
    return "link not active"


def _state_text(port: IbPort) -> str:
    return f"{port.state or '?'}/{port.phys_state or '?'}"


# Said in every finding of a down port that no expectation requires up, and in `healthcheck checks`.
MAKE_IT_FAIL = ("informational: no expectation says this port must be up; record the node with "
                "`healthcheck config generate` ([class.NAME.ib.per_port]) or list its HCA in "
                "[class.NAME.ib] devices to make this a failure")


def _recorded_facts(port: IbPort, want: IbPortExpect) -> list[str]:
    """How ``port`` differs from its recorded CA type and link layer (a different card, or a port
    switched between InfiniBand and Ethernet)."""
    problems = []
    if want.ca_type and port.hca_type and port.hca_type != want.ca_type:
        problems.append(f"CA type {port.hca_type}, expected {want.ca_type} (a different card)")
    elif want.ca_type and not port.hca_type:
        problems.append(f"CA type unreadable, expected {want.ca_type}")
    if want.link_layer and port_layer(port).lower() != want.link_layer.lower():
        problems.append(f"link layer {port_layer(port)}, expected {want.link_layer}")
    return problems


def _state_per_port(name: str, port: IbPort, want: IbPortExpect, judged: bool) -> tuple[Finding, bool]:
    """The finding for a port with a recorded expectation, and whether it counts as an active port of
    the judged layer."""
    metrics = {"rate_gbps": port.rate_gbps}
    problems = _recorded_facts(port, want)
    up = is_active(port)
    if port.state is None:
        return finding(name, Status.ERROR, "port state unreadable", port.component, **metrics), False
    if want.active and not up:
        problems.insert(0, f"{port_layer(port)} port {_state_text(port)}: {_why_down(port)} "
                           "(recorded active)")
    if problems:
        return finding(name, Status.FAIL, "; ".join(problems), port.component, **metrics), up and judged
    if up:
        return finding(name, Status.PASS, f"{_state_text(port)} ({port_layer(port)})", port.component,
                       **metrics), judged
    return finding(name, Status.SKIP, f"{port_layer(port)} port {_state_text(port)}, as recorded "
                   "(not expected up)", port.component, **metrics), False


@check("ib.port.state", needs=("ib_ports",), contexts=CONTEXTS, handles_missing=True, fails_by_default=False,
       fails_on="expectations that a port is up ([class.NAME.ib.per_port], written by `config generate`; "
                "ib.devices; ib.ports): FAIL for a recorded-active port Down/Polling/Disabled/Init on any link "
                "layer, a recorded port or HCA missing, a different CA type or link layer; without them a down "
                "port only WARNs")
def ib_port_state(snap: Snapshot, exp: Expectations, t: dict) -> list[Finding]:
    """Every InfiniBand port (or every port of the expected link layer) is ACTIVE/LinkUp, the expected
    HCAs exist and at least the expected number of ports is active.

    FAIL: a port that ``ib.per_port`` records as active is not ACTIVE/LinkUp (Down, Polling, Disabled,
    Init, Armed), whatever its link layer (InfiniBand or Ethernet/RoCE); a recorded port is missing, or
    its CA type or link layer differs from the record; an HCA of ``ib.devices`` missing or one of its
    ports not active (unless ``per_port`` records that port as down); fewer active ports than
    ``ib.ports``. A down port that no expectation requires up only WARNs, and says what would make it
    a failure: a dual-port HCA's uncabled second port is normal, and draining for it would be wrong.
    ``healthcheck config generate`` records every port of a known-good node.
    Runs in the prolog too: it reads a few sysfs files per port.
    """
    name = "ib.port.state"
    ports = snap.ib_ports
    if ports is None:
        if exp.ib_port_count or exp.ib_devices:
            err = snap.probe_errors.get("ib_ports")
            detail = f": {err.message}" if err else ""
            return [finding(name, Status.FAIL,
                            f"InfiniBand ports expected but none could be read{detail}")]
        return skip(name, "InfiniBand/RoCE ports not probed")
    per_port = exp.ib_per_port
    if not ports and not exp.ib_port_count and not exp.ib_devices and not per_port:
        return skip(name, "no InfiniBand/RoCE device and none expected")
    layer = judged_layer(exp)
    out: list[Finding] = []
    present = {p.device for p in ports}
    missing_hcas = [dev for dev in exp.ib_devices or () if dev not in present]
    for dev in missing_hcas:
        out.append(finding(name, Status.FAIL, f"HCA missing: {dev} expected but not present", dev))
    seen = {p.component for p in ports}
    for key, want in sorted(per_port.items()):
        if key not in seen and key.rsplit(":", 1)[0] not in missing_hcas:
            what = " ".join(v for v in (want.ca_type, want.link_layer) if v) or "HCA"
            out.append(finding(name, Status.FAIL, f"port missing: {key} ({what}) recorded but not present",
                               key))
    active = 0
    for port in ports:
        metrics = {"rate_gbps": port.rate_gbps}
        up = is_active(port)
        want = per_port.get(port.component)
        if want is not None:
            result, counted = _state_per_port(name, port, want, is_judged(port, exp))
            out.append(result)
            active += counted
            continue
        if is_judged(port, exp):
            if port.state is None:
                out.append(finding(name, Status.ERROR, "port state unreadable", port.component, **metrics))
            elif up:
                active += 1
                out.append(finding(name, Status.PASS, f"{_state_text(port)} ({port_layer(port)})",
                                   port.component, **metrics))
            else:
                # FAIL only what the node is known to need up: a port of an expected HCA. Without
                # expectations a dual-port card's uncabled second port would drain the node.
                expected = port.device in (exp.ib_devices or ())
                status = Status.FAIL if expected else Status.WARN
                hint = "" if expected else f" ({MAKE_IT_FAIL})"
                out.append(finding(name, status,
                                   f"{port_layer(port)} port {_state_text(port)}: {_why_down(port)}{hint}",
                                   port.component, **metrics))
        elif up:
            out.append(finding(name, Status.PASS, f"{_state_text(port)} ({port_layer(port)}, not judged)",
                               port.component, **metrics))
        elif port.device in (exp.ib_devices or ()):  # an expected HCA's port, whatever its layer
            out.append(finding(name, Status.FAIL, f"{port_layer(port)} port {_state_text(port)}: "
                               f"{_why_down(port)}", port.component, **metrics))
        elif exp.ib_link_layer:
            out.append(finding(name, Status.SKIP, f"{port_layer(port)} port {_state_text(port)} not "
                               f"judged (expected link layer {layer})", port.component, **metrics))
        else:
            out.append(finding(name, Status.WARN,
                               f"{port_layer(port)} port {_state_text(port)}: {_why_down(port)} "
                               f"({MAKE_IT_FAIL})", port.component, **metrics))
    if exp.ib_port_count is not None:
        status = Status.FAIL if active < exp.ib_port_count else Status.PASS
        out.append(finding(name, status, f"{active} of {exp.ib_port_count} expected {layer} ports active",
                           None, active_ports=active, expected_ports=exp.ib_port_count))
    return out


@check("ib.port.rate", needs=("ib_ports",), contexts=CONTEXTS, fails_by_default=False,
       fails_on="a port's recorded rate (ib.per_port, written by `config generate`) or ib.rate_gbps: FAIL "
                "below it (cable, transceiver, switch port trained slower); without them a port slower than "
                "its peers only WARNs")
def ib_port_rate(snap: Snapshot, exp: Expectations, t: dict) -> list[Finding]:
    """Active ports run at least at their expected rate: the port's own recorded rate
    (``ib.per_port``), else ``ib.rate_gbps`` for ports of the judged link layer (FAIL below it: a
    cable, transceiver or switch port that trained at a lower speed). Without an expectation, a port
    slower than the fastest active port of the same HCA type and link layer only WARNs. Runs in the
    prolog and epilog too (one sysfs file per port, already read for ib.port.state)."""
    name = "ib.port.rate"
    ports = snap.ib_ports or []
    if not ports:
        return skip(name, "no InfiniBand/RoCE ports")
    fastest: dict[tuple, float] = {}
    for port in ports:
        if is_active(port) and port.rate_gbps is not None:
            key = (port.hca_type, port_layer(port))
            fastest[key] = max(fastest.get(key, 0.0), port.rate_gbps)
    out: list[Finding] = []
    for port in ports:
        rate = port.rate_gbps
        if not is_active(port):
            out.append(finding(name, Status.SKIP, f"port {_state_text(port)} (judged by ib.port.state)",
                               port.component))
            continue
        if rate is None:
            out.append(finding(name, Status.ERROR, "rate unreadable", port.component))
            continue
        want = exp.ib_per_port.get(port.component)
        expected = want.rate_gbps if want is not None and want.rate_gbps is not None else \
            exp.ib_rate_gbps if is_judged(port, exp) else None
        if expected is not None:
            if rate < expected - _RATE_EPS:
                out.append(finding(name, Status.FAIL, f"{rate:g} Gb/s, expected {expected:g} Gb/s",
                                   port.component, rate_gbps=rate, expected_gbps=expected))
            else:
                out.append(finding(name, Status.PASS, f"{rate:g} Gb/s", port.component, rate_gbps=rate,
                                   expected_gbps=expected))
            continue
        best = fastest.get((port.hca_type, port_layer(port)), rate)
        if rate < best - _RATE_EPS:
            out.append(finding(name, Status.WARN, f"{rate:g} Gb/s, slower than {best:g} Gb/s on other "
                               f"{port.hca_type or 'HCA'} {port_layer(port)} ports", port.component,
                               rate_gbps=rate, peer_gbps=best))
        else:
            out.append(finding(name, Status.PASS, f"{rate:g} Gb/s", port.component, rate_gbps=rate))
    return out


def _limits(t: dict) -> dict[str, tuple[int | None, int | None]]:
    """threshold keys -> counter -> (warn, fail)."""
    limits: dict[str, list] = {}  # (no collections on the prolog's path)
    for key, value in t.items():
        if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if key.endswith("_warn"):
            limits.setdefault(key[:-5], [None, None])[0] = value
        elif key.endswith("_fail"):
            limits.setdefault(key[:-5], [None, None])[1] = value
    return {k: (v[0], v[1]) for k, v in limits.items()}


@check("ib.port.errors", needs=("ib_ports",), thresholds=ERROR_THRESHOLDS, fails_by_default=True,
       fails_on="a port error counter at or above its <counter>_fail rate per 24 h of uptime (link_downed 5, "
                "link_error_recovery 25, symbol_error and port_rcv_errors 10000, local_link_integrity_errors and "
                "excessive_buffer_overrun_errors 10); lower totals WARN")
def ib_port_errors(snap: Snapshot, exp: Expectations, t: dict) -> list[Finding]:
    """Port error counters (totals since the last counter reset) stay below their thresholds.

    FAIL: a counter at or above ``<counter>_fail`` per 24 h of uptime (the total against
    ``fail * max(1, uptime days)``): link_downed 5 (Azure's flap rule, 5 in 24 h), link_error_recovery
    25, symbol_error 10000 and port_rcv_errors 10000 (post-FEC errors on HDR/NDR: ~0 on a good link),
    local_link_integrity_errors 10, excessive_buffer_overrun_errors 10; remote physical errors never
    fail (another link's fault). WARN on totals: symbol_error >= 10, link_downed >= 1,
    link_error_recovery >= 10, port_rcv_errors >= 10, excessive_buffer_overrun_errors >= 1,
    local_link_integrity_errors >= 1, port_rcv_remote_physical_errors >= 10. The epilog's
    ``job.counter_growth`` judges the growth during a job.

    Where the hooks keep the counters' growth (``Snapshot.net_window``), link downs are strikes in a
    window, judged by ``net.link.flaps`` (3 in 3 h), not a rate over the uptime: this check then leaves
    ``link_downed`` out. The rate remains for a reading with no such memory (a bundle, a terminal)."""
    name = "ib.port.errors"
    ports = snap.ib_ports or []
    if not ports:
        return skip(name, "no InfiniBand/RoCE ports")
    limits = _limits(t)
    if snap.net_window is not None:
        limits.pop("link_downed", None)  # strikes in a window: net.link.flaps
    uptime = snap.host.uptime_s if snap.host is not None else None
    days = max(1.0, uptime / DAY_S) if isinstance(uptime, (int, float)) and uptime > 0 else 1.0
    per = f" per 24 h over {days:.1f} days of uptime" if days > 1.0 else " in 24 h"
    out: list[Finding] = []
    for port in ports:
        if not port.counters:
            out.append(finding(name, Status.SKIP, "no counters readable", port.component))
            continue
        status = Status.PASS
        notes: list[str] = []
        for counter in sorted(limits):
            value = port.counters.get(counter)
            warn, fail = limits[counter]
            if value is None:
                continue
            if fail is not None and value >= fail * days:
                status = Status.FAIL
                notes.append(f"{counter}={value} (fail at {fail:g}{per})")
            elif warn is not None and value >= warn:
                if status is Status.PASS:
                    status = Status.WARN
                notes.append(f"{counter}={value} (warn at {warn:g})")
        metrics = {k: v for k, v in port.counters.items()
                   if (not k.startswith("hw_") and k not in _TRAFFIC) or k in limits}
        message = ", ".join(notes) if notes else "error counters below thresholds"
        out.append(Finding(name, status, message, port.component,
                           {k: float(v) for k, v in metrics.items()}))
    return out


@check("ib.hca.firmware", needs=("ib_ports",), fails_by_default=False,
       fails_on="the recorded firmware (ib.per_port, written by `config generate`) or ib.firmware: FAIL "
                "when an HCA runs another version; without them an odd version out only WARNs")
def ib_hca_firmware(snap: Snapshot, exp: Expectations, t: dict) -> list[Finding]:
    """HCAs run the expected firmware: the one recorded for their ports (``ib.per_port``), else
    ``ib.firmware`` for HCAs of the judged link layer (FAIL otherwise: a card flashed differently
    from the rest of the class). Without an expectation, HCAs of the same type agree on one version
    (WARN for the odd ones out)."""
    name = "ib.hca.firmware"
    hcas: dict[str, IbPort] = {}
    for port in snap.ib_ports or []:
        hcas.setdefault(port.device, port)
    if not hcas:
        return skip(name, "no InfiniBand/RoCE devices")
    by_type: dict[str | None, dict[str, int]] = {}  # HCA type -> firmware -> ports
    for port in hcas.values():
        if port.firmware:
            counts = by_type.setdefault(port.hca_type, {})
            counts[port.firmware] = counts.get(port.firmware, 0) + 1
    recorded: dict[str, str] = {}
    for key, want in sorted(exp.ib_per_port.items()):
        if want.firmware:
            recorded.setdefault(key.rsplit(":", 1)[0], want.firmware)
    out: list[Finding] = []
    for dev, port in hcas.items():
        fw = port.firmware
        expected = recorded.get(dev) or (exp.hca_firmware if is_judged(port, exp) else None)
        if fw is None:
            out.append(finding(name, Status.ERROR, "firmware version unreadable", dev))
        elif expected:
            if fw != expected:
                out.append(finding(name, Status.FAIL, f"firmware {fw}, expected {expected}", dev))
            else:
                out.append(finding(name, Status.PASS, f"firmware {fw}", dev))
        else:
            versions = by_type[port.hca_type]
            top = max(versions.values())
            majority = [v for v, n in versions.items() if n == top]
            if len(versions) > 1 and (fw not in majority or len(majority) > 1):
                others = ", ".join(f"{v} x{n}" for v, n in sorted(versions.items()))
                out.append(finding(name, Status.WARN, f"firmware {fw}; {port.hca_type or 'HCAs'} on this "
                                   f"node run {others}", dev))
            else:
                out.append(finding(name, Status.PASS, f"firmware {fw}", dev))
    return out
