"""InfiniBand sysfs probe: value parsers and the class/infiniband walk over fixture trees."""
from __future__ import annotations

import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from healthcheck.core.model import Snapshot
from healthcheck.parsers import ParseError
from healthcheck.probes.infiniband import (
    parse_counter,
    parse_phys_state,
    parse_port_state,
    parse_rate,
    probe_ib_ports,
)
from tests.fixtures.sysfs_builder import (
    CX7_BOARD,
    CX7_FW,
    CX7_TYPE,
    HCA_ADDRS,
    HW_COUNTERS,
    IB_COUNTERS,
    SysfsFaults,
    build_sysfs,
)
from tests.fuzzing import spliced

# ------------------------------------------------------------------------------- value parsers


@pytest.mark.parametrize("text, expected", [
    ("4: ACTIVE\n", "ACTIVE"), ("1: DOWN", "DOWN"), ("2: INIT", "INIT"), ("3: ARMED", "ARMED"),
    ("5: ACTIVE_DEFER", "ACTIVE_DEFER"), ("ACTIVE", "ACTIVE"), ("active", "ACTIVE"),
])
def test_parse_port_state(text, expected):
    assert parse_port_state(text) == expected


@pytest.mark.parametrize("text, expected", [
    ("5: LinkUp\n", "LinkUp"), ("2: Polling", "Polling"), ("3: Disabled", "Disabled"),
    ("1: Sleep", "Sleep"), ("4: PortConfigurationTraining", "PortConfigurationTraining"),
    ("6: LinkErrorRecovery", "LinkErrorRecovery"), ("7: Phy Test", "Phy Test"),
])
def test_parse_phys_state(text, expected):
    assert parse_phys_state(text) == expected


@pytest.mark.parametrize("parser", [parse_port_state, parse_phys_state])
@pytest.mark.parametrize("text", ["", "4:", ":", "4: ", "42", "?!"])
def test_state_parsers_reject(parser, text):
    with pytest.raises(ParseError):
        parser(text)


@pytest.mark.parametrize("text, expected", [
    ("400 Gb/sec (4X NDR)\n", 400.0), ("200 Gb/sec (4X HDR)", 200.0), ("100 Gb/sec (4X EDR)", 100.0),
    ("56 Gb/sec (4X FDR)", 56.0), ("40 Gb/sec (4X QDR)", 40.0), ("10 Gb/sec (4X)", 10.0),
    ("2.5 Gb/sec (1X SDR)", 2.5), ("25 Gb/sec (1X EDR)", 25.0), ("800 Gb/sec (4X XDR)", 800.0),
    ("400 Gb/sec", 400.0),
])
def test_parse_rate(text, expected):
    assert parse_rate(text) == expected


@pytest.mark.parametrize("text", ["", "Gb/sec", "fast (4X NDR)", "400 GB/s", "400"])
def test_parse_rate_rejects(text):
    with pytest.raises(ParseError):
        parse_rate(text)


def test_parse_counter():
    assert parse_counter("0\n") == 0
    assert parse_counter("18446744073709551615") == 2**64 - 1
    for bad in ("", "-1", "1e3", "0x10", "N/A"):
        with pytest.raises(ParseError):
            parse_counter(bad)


_REAL = ["4: ACTIVE\n", "5: LinkUp\n", "7: Phy Test", "400 Gb/sec (4X NDR)\n", "10 Gb/sec (4X)", "65535\n"]


def _mutated():
    return spliced(_REAL)


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.text(), _mutated()))
def test_parsers_only_raise_parse_error(text):
    for parser in (parse_port_state, parse_phys_state, parse_rate, parse_counter):
        try:
            parser(text)
        except ParseError:
            pass


# ------------------------------------------------------------------------------- tree walking


def test_probe_healthy_cx7_node(tmp_path):
    layout = build_sysfs(tmp_path)
    ports = probe_ib_ports(str(tmp_path))
    assert [p.component for p in ports] == [f"mlx5_{i}:1" for i in range(8)]
    for port in ports:
        assert (port.state, port.phys_state, port.rate_gbps, port.link_layer) == (
            "ACTIVE", "LinkUp", 400.0, "InfiniBand")
        assert (port.firmware, port.hca_type, port.board_id) == (CX7_FW, CX7_TYPE, CX7_BOARD)
        assert port.pci_bus_id == layout.hcas[port.device]
        assert set(IB_COUNTERS) <= set(port.counters)
        assert {"hw_" + c for c in HW_COUNTERS} <= set(port.counters)
        assert "hw_lifespan" not in port.counters  # a setting, not a counter
        assert port.counters["symbol_error"] == 0
        assert port.counters["port_xmit_data"] == 918273611220
    assert ports[0].pci_bus_id == HCA_ADDRS[0] == "0000:1a:00.0"


def test_probe_without_counters(tmp_path):
    build_sysfs(tmp_path, hcas=2, faults=SysfsFaults(symbol_errors={0: 5}))
    ports = probe_ib_ports(str(tmp_path), counters=False)
    assert [p.counters for p in ports] == [{}, {}]
    assert [p.state for p in ports] == ["ACTIVE", "ACTIVE"] and ports[1].pci_bus_id == HCA_ADDRS[1]


def test_probe_faults(tmp_path):
    faults = SysfsFaults(port_down=frozenset({1}), port_init=frozenset({2}), port_disabled=frozenset({3}),
                         rate_200=frozenset({4}), unreadable_rate=frozenset({5}),
                         symbol_errors={6: 1234}, firmware={7: "28.36.1010"},
                         counters={0: {"link_downed": 3, "hw_out_of_buffer": 77}})
    build_sysfs(tmp_path, faults=faults)
    ports = {p.device: p for p in probe_ib_ports(str(tmp_path))}
    assert (ports["mlx5_1"].state, ports["mlx5_1"].phys_state) == ("DOWN", "Polling")
    assert (ports["mlx5_2"].state, ports["mlx5_2"].phys_state) == ("INIT", "LinkUp")
    assert (ports["mlx5_3"].state, ports["mlx5_3"].phys_state) == ("DOWN", "Disabled")
    assert ports["mlx5_4"].rate_gbps == 200.0
    assert ports["mlx5_5"].rate_gbps is None and ports["mlx5_5"].state == "ACTIVE"
    assert ports["mlx5_6"].counters["symbol_error"] == 1234
    assert ports["mlx5_7"].firmware == "28.36.1010"
    assert ports["mlx5_0"].counters["link_downed"] == 3
    assert ports["mlx5_0"].counters["hw_out_of_buffer"] == 77


def test_probe_missing_hca_and_natural_order(tmp_path):
    layout = build_sysfs(tmp_path, eth_ports=4, faults=SysfsFaults(missing_hca=frozenset({2})))
    ports = probe_ib_ports(str(tmp_path))
    names = [p.device for p in ports]
    assert names == ["mlx5_0", "mlx5_1", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7",
                     "mlx5_8", "mlx5_9", "mlx5_10", "mlx5_11"]
    eth = [p for p in ports if p.link_layer == "Ethernet"]
    assert len(eth) == 4 and all(p.hca_type == "MT4125" for p in eth)
    assert {p.device: p.pci_bus_id for p in eth} == layout.eth


def test_probe_no_infiniband_class(tmp_path):
    assert probe_ib_ports(str(tmp_path)) == []
    build_sysfs(tmp_path / "sys", hcas=0)  # class/infiniband exists but is empty
    assert probe_ib_ports(str(tmp_path / "sys")) == []


def test_probe_unreadable_and_junk_files(tmp_path):
    build_sysfs(tmp_path, hcas=1, gpus=0, nvswitches=0)
    port = tmp_path / "class" / "infiniband" / "mlx5_0" / "ports" / "1"
    (port / "counters" / "symbol_error").write_text("garbage\n")
    (port / "state").write_text("weird state value 42\n")
    os.remove(port / "phys_state")
    (port / "counters" / "port_rcv_errors").unlink()
    (port / "counters" / "port_rcv_errors").mkdir()  # EISDIR on read
    (port.parent / "not-a-port").mkdir()
    dev = tmp_path / "class" / "infiniband" / "mlx5_0"
    (dev / "fw_ver").unlink()
    (dev / "board_id").unlink()
    [p] = probe_ib_ports(str(tmp_path))
    assert p.state is None and p.phys_state is None and p.firmware is None and p.board_id is None
    assert "symbol_error" not in p.counters and "port_rcv_errors" not in p.counters
    assert p.counters["link_downed"] == 0
    assert p.rate_gbps == 400.0 and p.pci_bus_id == "0000:1a:00.0"


def test_pci_address_from_uevent_when_link_is_a_folder(tmp_path):
    build_sysfs(tmp_path, hcas=1, gpus=0, nvswitches=0)
    dev = (tmp_path / "class" / "infiniband" / "mlx5_0").resolve()
    (dev / "device").unlink()
    (dev / "device").mkdir()
    (dev / "device" / "uevent").write_text("DRIVER=mlx5_core\nPCI_SLOT_NAME=0000:1A:00.0\n")
    assert probe_ib_ports(str(tmp_path))[0].pci_bus_id == "0000:1a:00.0"


def test_probe_over_bundle_copy(tmp_path):
    """Bundles hold plain files, no `device` link: the PCI address comes from bus/pci/devices/*/infiniband."""
    bundle_files = pytest.importorskip("healthcheck.bundles.files")
    faults = SysfsFaults(port_down=frozenset({5}), symbol_errors={2: 99})
    build_sysfs(tmp_path / "live", eth_ports=2, faults=faults)
    bundle_files.copy_sys(tmp_path / "live", tmp_path / "bundle")
    live = probe_ib_ports(str(tmp_path / "live"))
    assert probe_ib_ports(str(tmp_path / "bundle")) == live
    assert live[5].state == "DOWN" and live[2].counters["symbol_error"] == 99
    assert live[0].board_id == "MT_0000000838"  # copied with the bundle, read back the same


def test_board_id_round_trips_through_snapshot_json(tmp_path):
    build_sysfs(tmp_path, hcas=2, gpus=0, nvswitches=0)
    board = tmp_path / "class" / "infiniband" / "mlx5_1" / "board_id"
    board.write_text("MT_0000000970\n")  # a different PSID on one HCA (e.g. an OEM variant)
    snap = Snapshot(node="n", taken_at="2024-01-01T00:00:00Z", ib_ports=probe_ib_ports(str(tmp_path)))
    back = Snapshot.from_dict(json.loads(json.dumps(snap.to_dict())))
    assert back == snap
    assert [p.board_id for p in back.ib_ports] == ["MT_0000000838", "MT_0000000970"]


def test_ibstat_has_no_board_id_sysfs_has(tmp_path):
    """ibstat prints no PSID line: ports parsed from it keep board_id None; sysfs fills it."""
    from healthcheck.parsers.ibstat import parse_ibstat
    from tests.conftest import FIXTURES

    parsed = parse_ibstat((FIXTURES / "ibstat" / "ibstat-8x-cx7-ndr-healthy.txt").read_text())
    assert len(parsed) == 8 and all(p.board_id is None for p in parsed)
    build_sysfs(tmp_path, hcas=1, gpus=0, nvswitches=0)
    assert probe_ib_ports(str(tmp_path))[0].board_id == CX7_BOARD
