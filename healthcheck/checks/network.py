"""Network error counters judged as growth over a window, and link downs as strikes (issue 32).

The hooks keep the counters between runs (``hook.net_window``: ``Snapshot.net_window``); these checks
only add up that memory's growth records inside their window, counted back from the newest reading
(``NetWindow.now_s``): pure, no clock. A growth record spans the interval between two readings of a
counter; only records wholly inside the window count towards a FAIL (one that started before it, after a
long gap between readings, only WARNs), so a count can be short, never inflated. The memory rebases on a
reboot, a driver reload or a new card, so none of them is counted.

Thresholds are data with their sources: ``healthcheck/policies/netcounters.py`` (why each value),
docs/network.md. Without a memory (``healthcheck check`` at a terminal, a bundle) they SKIP: the totals
since boot are ``ib.port.errors``' business.
"""
from __future__ import annotations

from ..core.expectations import Expectations
from ..core.model import CONTEXTS, Finding, NetSeries, NetWindow, Snapshot, Status
from ..policies import netcounters as policy
from .registry import check, finding, skip

ERROR_THRESHOLDS = {"window_h": policy.ERROR_WINDOW_H, **policy.thresholds(("rdma", "netdev"))}
ETHTOOL_THRESHOLDS = {"window_h": policy.ERROR_WINDOW_H, **policy.thresholds(("ethtool",))}
FLAP_THRESHOLDS = {"warn_strikes": policy.LINK_DOWN_WARN, "fail_strikes": policy.LINK_DOWN_FAIL,
                   "window_h": policy.LINK_DOWN_WINDOW_H}


def _num(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def window_s(t: dict) -> float:
    """The window in seconds; ValueError (the finding says it) when it is not in (0, 24] hours."""
    hours = _num(t.get("window_h"))
    if hours is None or not 0 < hours <= policy.MAX_WINDOW_H:
        raise ValueError(f"window_h must be a number of hours in (0, {policy.MAX_WINDOW_H:g}] (the memory "
                         f"keeps {policy.MAX_WINDOW_H:g} h), got {t.get('window_h')!r}")
    return hours * 3600.0


def growth(series: NetSeries, now_s: float, span_s: float, names) -> tuple[dict[str, int], dict[str, int]]:
    """(growth wholly inside the window, growth of records that began before it) per counter."""
    start = now_s - span_s
    inside: dict[str, int] = {}
    straddling: dict[str, int] = {}
    for record in series.growth:
        if record.at_s <= start or record.at_s > now_s:
            continue
        into = inside if record.from_s >= start else straddling
        for name, inc in record.counters.items():
            if name in names and inc > 0:
                into[name] = into.get(name, 0) + inc
    return inside, straddling


def _covered(series: NetSeries, now_s: float, span_s: float) -> str:
    hours = max(0.0, now_s - max(series.since_s, now_s - span_s)) / 3600.0
    return "" if hours >= span_s / 3600.0 - 1e-9 else f" (readings cover {hours:.1f} h of it)"


def _series_of(window: NetWindow, components) -> list[NetSeries]:
    return [s for s in window.series if s.component in components]


def _judge_errors(name: str, window: NetWindow, components, t: dict, groups) -> list[Finding]:
    try:
        span = window_s(t)
    except ValueError as exc:
        return [finding(name, Status.ERROR, str(exc))]
    rules = {c: (_num(t.get(c + "_warn")), _num(t.get(c + "_fail")), rule[3])
             for c, rule in policy.RULES.items() if rule[0] in groups}
    hours = span / 3600.0
    out: list[Finding] = []
    clean = 0
    for series in _series_of(window, components):
        inside, straddling = growth(series, window.now_s, span, rules)
        status, notes = Status.PASS, []
        for counter in sorted(set(inside) | set(straddling)):
            warn, fail, reason = rules[counter]
            n, m = inside.get(counter, 0), straddling.get(counter, 0)
            if fail is not None and n >= fail:
                status = Status.FAIL
                notes.append(f"{counter} +{n} in {hours:g} h (fail at {fail:g}: {reason})")
            elif (warn is not None and n >= warn) or (fail is not None and n + m >= fail):
                status = Status.WARN if status is Status.PASS else status
                more = f", +{m} more since a reading before the window" if m else ""
                notes.append(f"{counter} +{n} in {hours:g} h{more} (warn at {warn:g}: {reason})"
                             if warn is not None else f"{counter} +{n}{more} (fail at {fail:g} in {hours:g} h)")
        stuck = [c for c in series.saturated if c in rules]
        if stuck:
            status = Status.WARN if status is Status.PASS else status
            notes.append(f"{', '.join(stuck)} at the counter's maximum: growth unknown until cleared "
                         "(perfquery -x -R, or a port reset)")
        if status is Status.PASS:
            clean += 1
            continue
        metrics = {f"growth_{c}": float(v) for c, v in inside.items()}
        out.append(Finding(name, status, "; ".join(notes) + _covered(series, window.now_s, span),
                           series.component, metrics))
    if clean or not out:
        out.append(finding(name, Status.PASS, f"{clean} ports: no error counter grew to a threshold in the "
                                              f"last {hours:g} h", None, ports=clean))
    return out


@check("net.errors", needs=("ib_ports", "net_ports", "net_window"), contexts=CONTEXTS,
       thresholds=ERROR_THRESHOLDS, fails_by_default=True,
       fails_on="growth within window_h (1 h) of a port's error counters: symbol_error, port_rcv_errors, "
                "rx_crc_errors, rx_frame_errors 400; link_error_recovery 3; local_link_integrity_errors, "
                "excessive_buffer_overrun_errors 2; hw_local_ack_timeout_err 1000; hw_rx_icrc_encapsulated 400; "
                "smaller growth WARNs (loss and congestion counters only WARN)")
def net_errors(snap: Snapshot, exp: Expectations, t: dict) -> list[Finding]:
    """Error counters of the RDMA ports (IB PortCounters and driver ``hw_counters``, InfiniBand and
    RoCE) and of the Ethernet ports (sysfs ``statistics``) did not grow past their thresholds within the
    last ``window_h`` hours (1 h), as kept between the hooks' runs.

    FAIL at a growth within the window of: symbol_error, port_rcv_errors, rx_crc_errors, rx_frame_errors
    400 (a link out of the 1e-12 BER class at 100 Gb/s); link_error_recovery 3; local_link_integrity_errors
    and excessive_buffer_overrun_errors 2; hw_local_ack_timeout_err 1000; hw_rx_icrc_encapsulated 400.
    WARN from 10 (1 for the retrain and integrity counters); loss and congestion that another node or
    the job can cause (out_of_sequence, packet_seq_err, rnr_nak_retry_err, roce_adp_retrans, discards,
    out-of-buffer) only WARN (1000). Congestion notifications are never judged. A counter stuck at its
    maximum WARNs. Reads ~25 sysfs files per port: runs in the prolog and epilog too."""
    name = "net.errors"
    components = {p.component for p in snap.ib_ports or []} | {p.name for p in snap.net_ports or []}
    if not components:
        return skip(name, "no RDMA or physical Ethernet port")
    return _judge_errors(name, snap.net_window, components, t, ("rdma", "netdev"))


@check("net.ethtool", needs=("net_ethtool", "net_window"), thresholds=ETHTOOL_THRESHOLDS, fails_by_default=True,
       fails_on="growth within window_h (1 h) of the counters mlx5 keeps only in ethtool -S: "
                "tx_pause_storm_error_events 1; rx_crc_errors_phy, rx_symbol_err_phy, rx_pcs_symbol_err_phy 400; "
                "smaller growth and discards WARN")
def net_ethtool(snap: Snapshot, exp: Expectations, t: dict) -> list[Finding]:
    """The counters a driver keeps only in ``ethtool -S`` (mlx5's physical-layer and pause counters) did
    not grow past their thresholds within the last ``window_h`` hours (1 h).

    FAIL at: tx_pause_storm_error_events 1 (the port stopped sending pauses after a storm: this host's
    receive stalled); rx_crc_errors_phy, rx_symbol_err_phy, rx_pcs_symbol_err_phy 400 (errors FEC did
    not correct). WARN from 10; tx_pause_storm_warning_events 1; rx_pci_signal_integrity 10;
    rx_discards_phy and rx_out_of_buffer 100,000 (congestion or a lagging host: only WARN). ERROR for a
    port whose ethtool failed. HealthCheckProgram only: it starts one ethtool per mlx5 port."""
    name = "net.ethtool"
    ports = snap.net_ethtool or []
    if not ports:
        return skip(name, "no port whose driver keeps counters only in ethtool (mlx5)")
    out = [finding(name, Status.ERROR, p.error, p.name) for p in ports if p.error]
    read = {p.name for p in ports if not p.error}
    if read:
        out += _judge_errors(name, snap.net_window, read, t, ("ethtool",))
    return out


@check("net.link.flaps", needs=("ib_ports", "net_ports", "net_window"), contexts=CONTEXTS,
       thresholds=FLAP_THRESHOLDS, fails_by_default=True,
       fails_on="a port that went down fail_strikes (3) times within window_h (3 h): link_downed (RDMA), "
                "carrier_down_count (sysfs), link_down_events_phy (ethtool); 2 WARN, 1 passes")
def net_link_flaps(snap: Snapshot, exp: Expectations, t: dict) -> list[Finding]:
    """No port went down again and again: link downs counted as strikes within the last ``window_h``
    hours (3 h), not as a rate over the uptime.

    FAIL at ``fail_strikes`` (3) link downs within the window: a port that went down three times in three
    hours has a bad cable, transceiver or switch port; WARN at ``warn_strikes`` (2); one passes (a switch
    reboot, a re-cabling; once in a month is nothing). The downs are the growth of ``link_downed`` (RDMA
    port), ``carrier_down_count`` (sysfs, Ethernet) or ``link_down_events_phy`` (mlx5's ethtool), the
    largest where a port has more than one. A reboot or driver reload rebases the memory: never a strike."""
    name = "net.link.flaps"
    try:
        span = window_s(t)
    except ValueError as exc:
        return [finding(name, Status.ERROR, str(exc))]
    warn, fail = _num(t.get("warn_strikes")), _num(t.get("fail_strikes"))
    window = snap.net_window
    components = {p.component for p in snap.ib_ports or []} | {p.name for p in snap.net_ports or []}
    if not components:
        return skip(name, "no RDMA or physical Ethernet port")
    names = frozenset(policy.LINK_DOWN.values())
    hours = span / 3600.0
    out: list[Finding] = []
    quiet = 0
    for series in _series_of(window, components):
        inside, straddling = growth(series, window.now_s, span, names)
        strikes = max(inside.values(), default=0)
        earlier = max((inside.get(c, 0) + v for c, v in straddling.items()), default=0)
        which = ", ".join(f"{c} +{v}" for c, v in sorted(inside.items()))
        covered = _covered(series, window.now_s, span)
        if fail is not None and strikes >= fail:
            out.append(finding(name, Status.FAIL, f"went down {strikes} times in {hours:g} h ({which}; fail at "
                               f"{fail:g}): cable, transceiver or switch port", series.component, link_downs=strikes))
        elif (warn is not None and strikes >= warn) or (fail is not None and earlier >= fail):
            since = f"; {earlier} counting a reading from before the window" if earlier > strikes else ""
            out.append(finding(name, Status.WARN, f"went down {strikes} times in {hours:g} h ({which or 'none'}"
                               f"{since}; warn at {warn if warn is None else format(warn, 'g')}){covered}",
                               series.component, link_downs=strikes))
        elif any(c in names for c in series.saturated):
            out.append(finding(name, Status.WARN, "link-down counter at its maximum: downs cannot be counted "
                               "until it is cleared (perfquery -x -R)", series.component))
        elif strikes:
            out.append(finding(name, Status.PASS, f"went down once in {hours:g} h ({which})", series.component,
                               link_downs=strikes))
        else:
            quiet += 1
    if quiet or not out:
        out.append(finding(name, Status.PASS, f"{quiet} ports: no link down in the last {hours:g} h", None,
                           ports=quiet))
    return out
