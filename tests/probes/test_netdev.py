"""Issue 32: the Ethernet/RoCE ports' sysfs counters (probes.netdev) and ``ethtool -S`` through the
subprocess seam for the drivers that keep counters only there (probes.ethtool), on fixture trees."""
from __future__ import annotations

import os
from pathlib import Path

from healthcheck.core.model import NetEthtool
from healthcheck.probes.ethtool import probe_ethtool, targets
from healthcheck.probes.netdev import probe_net_ports
from healthcheck.safeio.subproc import Result


def _link(link: Path, target: Path) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(os.path.relpath(target, link.parent), link)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def add_netdev(root: Path, name: str, *, addr: str | None = "0000:1a:00.0", driver: str | None = "mlx5_core",
               rdma: str | None = "mlx5_0", kind: str = "1", dev_port: int = 0, stats: dict | None = None,
               carrier_down: int | None = 2, operstate: str = "up") -> Path:
    """class/net/<name> as the kernel lays it out (a link into devices/...; ``addr`` None: virtual)."""
    if addr is None:
        folder = root / "devices" / "virtual" / "net" / name
    else:
        pci = root / "devices" / "pci0000:15" / "0000:15:01.0" / addr
        folder = pci / "net" / name
        _link(folder / "device", pci)
        if driver:
            drv = root / "bus" / "pci" / "drivers" / driver
            drv.mkdir(parents=True, exist_ok=True)
            if not (pci / "driver").is_symlink():
                _link(pci / "driver", drv)
        if rdma:
            (pci / "infiniband" / rdma).mkdir(parents=True, exist_ok=True)
    _write(folder / "type", kind)
    _write(folder / "dev_port", str(dev_port))
    _write(folder / "operstate", operstate)
    if carrier_down is not None:
        _write(folder / "carrier_down_count", str(carrier_down))
    for counter, value in (stats or {}).items():
        _write(folder / "statistics" / counter, str(value))
    _link(root / "class" / "net" / name, folder)
    return folder


def test_physical_ethernet_ports_with_their_counters_and_rdma_port(tmp_path):
    add_netdev(tmp_path, "ens4np0", stats={"rx_crc_errors": 7, "rx_frame_errors": 0, "rx_bytes": 99,
                                           "rx_dropped": 5})
    add_netdev(tmp_path, "eno1", addr="0000:a0:00.0", driver="igb", rdma=None, stats={"rx_crc_errors": 0},
               carrier_down=None, operstate="down")
    add_netdev(tmp_path, "lo", addr=None, stats={"rx_crc_errors": 0})  # virtual: left out
    add_netdev(tmp_path, "ib0", addr="0000:3c:00.0", kind="32", rdma="mlx5_1")  # IPoIB: an RDMA port's business
    ports = {p.name: p for p in probe_net_ports(str(tmp_path))}
    assert set(ports) == {"ens4np0", "eno1"}
    roce = ports["ens4np0"]
    assert (roce.driver, roce.pci_bus_id, roce.rdma, roce.operstate) == ("mlx5_core", "0000:1a:00.0", "mlx5_0:1", "up")
    # only the counters the checks keep: not the traffic, not the software drops
    assert roce.counters == {"rx_crc_errors": 7, "rx_frame_errors": 0, "carrier_down_count": 2}
    other = ports["eno1"]
    assert (other.driver, other.rdma, other.operstate, other.counters) == ("igb", None, "down", {"rx_crc_errors": 0})


def test_the_hooks_read_only_the_roce_ports_before_and_after_a_job(tmp_path):
    add_netdev(tmp_path, "ens4np0", stats={"rx_crc_errors": 7})
    add_netdev(tmp_path, "eno1", addr="0000:a0:00.0", driver="igb", rdma=None, stats={"rx_crc_errors": 3})
    assert [p.name for p in probe_net_ports(str(tmp_path), rdma_only=True)] == ["ens4np0"]
    assert sorted(p.name for p in probe_net_ports(str(tmp_path))) == ["eno1", "ens4np0"]


def test_the_prolog_and_epilog_ask_for_roce_ports_only_and_healthcheckprogram_for_all(monkeypatch):
    from healthcheck.config import default_expectations
    from healthcheck.hook import run as hook
    from healthcheck.pipeline import acquire

    asked: list[bool] = []
    monkeypatch.setattr(acquire, "snapshot_for", lambda *args, **kw: asked.append(kw["net_rdma_only"]))
    for context in ("prolog", "epilog", "slurm-check"):
        hook.snapshot(context, "n1", default_expectations(), "/nonexistent", "2026-01-01T00:00:00Z", 10.0)
    assert asked == [True, True, False]


def test_the_second_port_of_a_device_maps_to_rdma_port_2(tmp_path):
    add_netdev(tmp_path, "eth1", dev_port=1, rdma="mlx4_0", driver="mlx4_en")
    assert probe_net_ports(str(tmp_path))[0].rdma == "mlx4_0:2"


def test_no_class_net_and_unreadable_files(tmp_path):
    assert probe_net_ports(str(tmp_path)) == []
    folder = add_netdev(tmp_path, "eth0", stats={"rx_crc_errors": "garbage"})
    (folder / "statistics" / "rx_frame_errors").mkdir(parents=True)  # unreadable: EISDIR
    assert probe_net_ports(str(tmp_path))[0].counters == {"carrier_down_count": 2}


MLX5_OUTPUT = ("NIC statistics:\n     rx_packets: 10\n     rx_crc_errors_phy: 4\n     link_down_events_phy: 3\n"
               "     tx_pause_storm_error_events: 1\n     rx0_packets: 10\n")


def _fake_run(outputs, calls):
    def run(argv, timeout, deadline=None, max_output=None, env=None):
        calls.append(argv)
        rc, out, err = outputs[argv[-1]]
        return Result(argv, rc, out, err, 0.01)
    return run


def test_ethtool_runs_only_for_the_drivers_that_keep_counters_only_there(tmp_path):
    add_netdev(tmp_path, "ens4np0")
    add_netdev(tmp_path, "ens5np0", addr="0000:3c:00.0", rdma="mlx5_1")
    add_netdev(tmp_path, "eno1", addr="0000:a0:00.0", driver="igb", rdma=None)
    assert targets(str(tmp_path)) == ["ens4np0", "ens5np0"]
    calls: list = []
    run = _fake_run({"ens4np0": (0, MLX5_OUTPUT, ""), "ens5np0": (94, "", "Cannot get stats strings\n")}, calls)
    got = probe_ethtool(str(tmp_path), run=run, which=lambda tool: "/usr/sbin/ethtool")
    assert calls == [["ethtool", "-S", "ens4np0"], ["ethtool", "-S", "ens5np0"]]  # no shell, no igb port
    assert got[0] == NetEthtool("ens4np0", {"rx_crc_errors_phy": 4, "link_down_events_phy": 3,
                                            "tx_pause_storm_error_events": 1})
    assert got[1].name == "ens5np0" and "exit 94: Cannot get stats strings" in got[1].error


def test_no_ethtool_is_an_absent_source_and_no_target_starts_nothing(tmp_path):
    add_netdev(tmp_path, "eno1", driver="igb", rdma=None)
    calls: list = []
    assert probe_ethtool(str(tmp_path), run=_fake_run({}, calls), which=lambda tool: None) == []
    add_netdev(tmp_path, "ens4np0", addr="0000:3c:00.0")
    assert probe_ethtool(str(tmp_path), run=_fake_run({}, calls), which=lambda tool: None) is None
    assert calls == []


def test_unparsable_ethtool_output_is_an_error_of_that_port(tmp_path):
    add_netdev(tmp_path, "ens4np0")
    calls: list = []
    got = probe_ethtool(str(tmp_path), run=_fake_run({"ens4np0": (0, "no stats available\n", "")}, calls),
                        which=lambda tool: "/usr/sbin/ethtool")
    assert got[0].counters == {} and "no 'name: value' counter line" in got[0].error
