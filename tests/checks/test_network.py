"""Issue 32, point 4: network error counters as growth over a window and link downs as strikes, kept
between the hooks' runs (hook.net_window) and judged by pure checks (net.errors, net.ethtool,
net.link.flaps); a reboot, a counter reset or a new card never FAILs."""
from __future__ import annotations

import pytest

from healthcheck.checks import registry
from healthcheck.checks.network import (ERROR_THRESHOLDS, ETHTOOL_THRESHOLDS, FLAP_THRESHOLDS, net_errors,
                                        net_ethtool, net_link_flaps)
from healthcheck.config import default_expectations
from healthcheck.core.model import IbPort, NetEthtool, NetPort, Snapshot, Status
from healthcheck.hook import net_window
from healthcheck.pipeline.judge import judge, sources_needed
from healthcheck.policies import netcounters

EXP = default_expectations()
H = 3600.0
T0 = 1_780_000_000.0


class Node:
    """A node whose counters the test moves, read by the hooks' keeper at chosen times."""

    def __init__(self, tmp_path, boot="boot-a"):
        self.state = str(tmp_path / "state")
        self.proc = tmp_path / "proc"
        self.set_boot(boot)
        self.ib = {"symbol_error": 0, "link_downed": 0, "hw_out_of_sequence": 0, "hw_np_cnp_sent": 0}
        self.eth = {"rx_crc_errors": 0, "carrier_down_count": 1}
        self.ethtool: dict | None = None
        self.pci = "0000:1a:00.0"

    def set_boot(self, boot):
        path = self.proc / "sys" / "kernel" / "random" / "boot_id"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(boot + "\n")

    def read(self, at_s) -> Snapshot:
        snap = Snapshot(node="n1", taken_at="2026-06-01T00:00:00Z")
        snap.ib_ports = [IbPort("mlx5_0", 1, "ACTIVE", "LinkUp", 400.0, "InfiniBand", pci_bus_id=self.pci,
                                counters=dict(self.ib), board_id="MT_0000000838")]
        snap.net_ports = [NetPort("ens4np0", "mlx5_core", "0000:3c:00.0", "mlx5_1:1", "up", dict(self.eth))]
        if self.ethtool is not None:
            snap.net_ethtool = [NetEthtool("ens4np0", dict(self.ethtool))]
        assert net_window.keep_readings(self.state, snap, now_s=at_s, proc_root=str(self.proc)) is None
        return snap


def _by(findings):
    return {f.component: f for f in findings}


def _flaps(snap, **t):
    return _by(net_link_flaps(snap, EXP, {**FLAP_THRESHOLDS, **t}))


def test_three_link_downs_in_three_hours_fail(tmp_path):
    node = Node(tmp_path)
    node.read(T0)
    for i in range(1, 4):
        node.ib["link_downed"] += 1
        snap = node.read(T0 + i * 50 * 60)
    found = _flaps(snap)
    assert found["mlx5_0:1"].status is Status.FAIL and "went down 3 times in 3 h" in found["mlx5_0:1"].message
    assert found["mlx5_0:1"].metrics["link_downs"] == 3
    assert found[None].status is Status.PASS  # the Ethernet port stayed up


def test_two_warn_and_one_passes_and_old_downs_leave_the_window(tmp_path):
    node = Node(tmp_path)
    node.read(T0)
    node.eth["carrier_down_count"] += 1
    assert _flaps(node.read(T0 + 600))["ens4np0"].status is Status.PASS  # once: a re-cabling
    node.eth["carrier_down_count"] += 1
    assert _flaps(node.read(T0 + 1200))["ens4np0"].status is Status.WARN
    node.eth["carrier_down_count"] += 1
    assert _flaps(node.read(T0 + 1800))["ens4np0"].status is Status.FAIL
    # four hours later none of them is in the 3 h window
    assert "ens4np0" not in _flaps(node.read(T0 + 1800 + 4 * H))


def test_one_link_down_in_a_month_passes(tmp_path):
    node = Node(tmp_path)
    node.read(T0)
    for day in range(1, 31):  # a HealthCheckProgram reading a day for a month (gaps of a day)
        if day == 12:
            node.ib["link_downed"] += 1
        found = _flaps(node.read(T0 + day * 24 * H))
        assert all(f.status is Status.PASS for f in found.values()), day


def test_downs_across_a_long_gap_only_warn(tmp_path):
    node = Node(tmp_path)
    node.read(T0)
    node.ib["link_downed"] += 5  # five downs somewhere in the last 10 h: not known to be in the last 3 h
    found = _flaps(node.read(T0 + 10 * H), window_h=24.0)
    assert found["mlx5_0:1"].status is Status.FAIL  # ... but all within a 24 h window
    node2 = Node(tmp_path / "b")
    node2.read(T0)
    node2.ib["link_downed"] += 5
    node2.read(T0 + 2.5 * H)
    found = _flaps(node2.read(T0 + 3.5 * H))
    assert found["mlx5_0:1"].status is Status.WARN and "counting a reading from before the window" in found[
        "mlx5_0:1"].message


def test_a_reboot_is_no_strike_and_no_error_growth(tmp_path):
    node = Node(tmp_path)
    node.ib.update(link_downed=4, symbol_error=60000)
    node.eth["carrier_down_count"] = 9
    node.read(T0)
    node.set_boot("boot-b")  # the counters restart; the link came up (and went down once) while booting
    node.ib.update(link_downed=1, symbol_error=30)
    node.eth["carrier_down_count"] = 3
    snap = node.read(T0 + 300)
    assert all(f.status is Status.PASS for f in _flaps(snap).values())
    assert all(f.status is Status.PASS for f in net_errors(snap, EXP, dict(ERROR_THRESHOLDS)))
    series = {s.component: s for s in snap.net_window.series}
    assert "rebooted" in series["mlx5_0:1"].notes[-1]
    # counted again from the new boot's values
    node.ib["link_downed"] += 3
    assert _flaps(node.read(T0 + 900))["mlx5_0:1"].status is Status.FAIL


def test_a_counter_reset_rebases_the_port_without_a_failure(tmp_path):
    node = Node(tmp_path)
    node.ib["symbol_error"] = 5000
    node.read(T0)
    node.ib["symbol_error"] = 450  # perfquery -R, then 450 errors: unknown whether before or after
    snap = node.read(T0 + 600)
    assert _by(net_errors(snap, EXP, dict(ERROR_THRESHOLDS)))[None].status is Status.PASS
    assert "went down" in {s.component: s for s in snap.net_window.series}["mlx5_0:1"].notes[-1]
    node.ib["symbol_error"] = 900  # +450 after the reset: counted
    assert _by(net_errors(node.read(T0 + 1200), EXP, dict(ERROR_THRESHOLDS)))["mlx5_0:1"].status is Status.FAIL


def test_a_new_card_starts_afresh(tmp_path):
    node = Node(tmp_path)
    node.read(T0)
    node.pci = "0000:9c:00.0"  # another HCA now named mlx5_0
    node.ib["link_downed"] = 7
    snap = node.read(T0 + 60)
    assert _flaps(snap)[None].status is Status.PASS
    assert "another device" in {s.component: s for s in snap.net_window.series}["mlx5_0:1"].notes[-1]


def test_error_growth_fails_warns_and_loss_only_warns(tmp_path):
    node = Node(tmp_path)
    node.read(T0)
    node.ib["symbol_error"] += 500
    node.ib["hw_out_of_sequence"] += 10 ** 7
    node.ib["hw_np_cnp_sent"] += 10 ** 9  # congestion notifications: never judged
    node.eth["rx_crc_errors"] += 20
    found = _by(net_errors(node.read(T0 + 1800), EXP, dict(ERROR_THRESHOLDS)))
    ib = found["mlx5_0:1"]
    assert ib.status is Status.FAIL and "symbol_error +500 in 1 h (fail at 400" in ib.message
    assert "hw_out_of_sequence +10000000" in ib.message and "np_cnp" not in ib.message
    assert ib.metrics["growth_symbol_error"] == 500
    assert found["ens4np0"].status is Status.WARN and "rx_crc_errors +20" in found["ens4np0"].message
    assert "(readings cover 0.5 h of it)" in found["ens4np0"].message
    # loss alone never fails
    other = Node(tmp_path / "loss")
    other.read(T0)
    other.ib["hw_out_of_sequence"] += 10 ** 9
    found = _by(net_errors(other.read(T0 + 600), EXP, dict(ERROR_THRESHOLDS)))
    assert found["mlx5_0:1"].status is Status.WARN


def test_ethtool_counters_pause_storm_fails_and_a_failed_ethtool_is_an_error(tmp_path):
    node = Node(tmp_path)
    node.ethtool = {"tx_pause_storm_error_events": 0, "rx_discards_phy": 0, "link_down_events_phy": 0}
    node.read(T0)
    node.read(T0 + 300)  # a prolog reads no ethtool: the counters keep their last value
    node.ethtool = {"tx_pause_storm_error_events": 1, "rx_discards_phy": 5 * 10 ** 6, "link_down_events_phy": 0}
    snap = node.read(T0 + 600)
    found = _by(net_ethtool(snap, EXP, dict(ETHTOOL_THRESHOLDS)))
    assert found["ens4np0"].status is Status.FAIL and "tx_pause_storm_error_events +1" in found["ens4np0"].message
    snap.net_ethtool = [NetEthtool("ens4np0", error="ethtool -S ens4np0: exited 94")]
    assert [f.status for f in net_ethtool(snap, EXP, dict(ETHTOOL_THRESHOLDS))] == [Status.ERROR]


def test_a_saturated_port_counter_warns(tmp_path):
    node = Node(tmp_path)
    node.ib["link_downed"] = 255  # 8 bits: stopped counting
    snap = node.read(T0)
    assert _flaps(snap)["mlx5_0:1"].status is Status.WARN


@pytest.mark.parametrize("window", [0, -1, 25, "3", None])
def test_a_window_the_memory_cannot_cover_is_a_clear_error(tmp_path, window):
    snap = Node(tmp_path).read(T0)
    for fn, t in ((net_errors, ERROR_THRESHOLDS), (net_link_flaps, FLAP_THRESHOLDS)):
        found = fn(snap, EXP, {**t, "window_h": window})
        assert [f.status for f in found] == [Status.ERROR] and "window_h must be" in found[0].message


def test_the_file_round_trips_and_a_bad_file_is_replaced_not_trusted(tmp_path):
    node = Node(tmp_path)
    node.read(T0)
    node.ib["link_downed"] += 1
    node.read(T0 + 60)
    path = net_window.window_path(node.state)
    text = open(path).read()
    boot, ports = net_window.parse(text)
    assert boot == "boot-a" and net_window.render(boot, ports) == text
    assert ports["mlx5_0:1"].growth == [("link_downed", T0, T0 + 60, 1)]
    open(path, "w").write(text.replace("v link_downed 1", "v link_downed one"))
    snap = Snapshot(node="n1", taken_at="x", ib_ports=[], net_ports=[])
    note = net_window.keep_readings(node.state, snap, now_s=T0 + 120, proc_root=str(node.proc))
    assert "bad count 'one'" in note and "started afresh" in note
    assert open(path).read().startswith(net_window.MAGIC)


def test_the_judge_skips_without_a_memory_and_the_prolog_reads_the_ports():
    snap = Snapshot(node="n1", taken_at="x", ib_ports=[], net_ports=[], net_ethtool=[])
    verdict = judge(snap, EXP, "check", only=["net.*"])
    assert {f.check: f.status for f in verdict.findings} == {"net.errors": Status.SKIP, "net.ethtool": Status.SKIP,
                                                             "net.link.flaps": Status.SKIP}
    assert "the hooks keep one" in verdict.findings[0].message
    for context in ("prolog", "epilog"):
        needed = sources_needed(EXP, context)
        assert {"net_ports", "net_window"} <= needed and "net_ethtool" not in needed  # no process before a job
    assert "net_ethtool" in sources_needed(EXP, "slurm-check")


def test_snapshot_json_round_trip_keeps_the_network_sources(tmp_path):
    node = Node(tmp_path)
    node.ethtool = {"rx_crc_errors_phy": 1}
    node.read(T0)
    node.ethtool = {"rx_crc_errors_phy": 3}
    snap = node.read(T0 + 60)
    again = Snapshot.from_dict(snap.to_dict())
    assert again.net_ports == snap.net_ports and again.net_ethtool == snap.net_ethtool
    series = {s.component: s for s in again.net_window.series}
    assert again.net_window == snap.net_window and series["ens4np0"].growth[0].counters == {"rx_crc_errors_phy": 2}


def test_thresholds_are_data_with_a_reason_and_congestion_is_never_judged():
    for counter, (group, warn, fail, reason) in netcounters.RULES.items():
        assert group in netcounters.GROUPS and reason.strip(), counter
        assert warn is None or fail is None or warn <= fail, counter
    assert not netcounters.INFORMATIONAL & set(netcounters.RULES)
    specs = registry.load_all()
    assert specs["net.errors"].fails_by_default and specs["net.link.flaps"].thresholds == {
        "warn_strikes": 2, "fail_strikes": 3, "window_h": 3.0}


def test_a_quiet_reading_leaves_the_file_a_change_or_ten_minutes_rewrite_it(tmp_path):
    node = Node(tmp_path)
    node.read(T0)
    path = net_window.window_path(node.state)
    first = open(path).read()
    node.read(T0 + 120)  # nothing moved: the prolog only reads the file
    assert open(path).read() == first
    node.read(T0 + 120 + net_window.REFRESH_S)  # the read times are refreshed every REFRESH_S
    assert open(path).read() != first
    refreshed = open(path).read()
    node.ib["symbol_error"] += 1
    node.read(T0 + 180 + net_window.REFRESH_S)
    assert "g symbol_error" in open(path).read() and open(path).read() != refreshed


def test_a_node_without_ports_writes_its_memory_once_not_every_run(tmp_path):
    import os

    proc = tmp_path / "proc" / "sys" / "kernel" / "random"
    proc.mkdir(parents=True)
    (proc / "boot_id").write_text("boot-a\n")
    stamps = []
    for i in range(3):
        snap = Snapshot(node="n1", taken_at="2026-06-01T00:00:00Z", ib_ports=[], net_ports=[])
        net_window.keep_readings(str(tmp_path / "state"), snap, now_s=T0 + i, proc_root=str(tmp_path / "proc"))
        stamps.append(os.stat(net_window.window_path(str(tmp_path / "state"))).st_mtime_ns)
    assert stamps[0] == stamps[1] == stamps[2]
