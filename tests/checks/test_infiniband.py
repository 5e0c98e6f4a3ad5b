"""InfiniBand checks: port state, rate, error counters, HCA firmware."""
from __future__ import annotations

import pytest

from healthcheck.checks import registry
from healthcheck.checks.infiniband import (
    ERROR_THRESHOLDS,
    ib_hca_firmware,
    ib_port_errors,
    ib_port_rate,
    ib_port_state,
)
from healthcheck.core.expectations import Expectations
from healthcheck.core.model import IbPort, ProbeError, Snapshot, Status
from healthcheck.probes.infiniband import probe_ib_ports
from tests.fixtures.sysfs_builder import SysfsFaults, build_sysfs

NDR8 = Expectations(ib_port_count=8, ib_rate_gbps=400, ib_link_layer="InfiniBand",
                    ib_devices=tuple(f"mlx5_{i}" for i in range(8)), hca_firmware="28.39.1002")


def _port(i, *, state="ACTIVE", phys="LinkUp", rate=400.0, layer="InfiniBand", fw="28.39.1002",
          hca="MT4129", counters=None) -> IbPort:
    return IbPort(f"mlx5_{i}", 1, state, phys, rate, layer, fw, hca, f"0000:{0x1a + i:02x}:00.0",
                  dict({"symbol_error": 0, "link_downed": 0} if counters is None else counters))


def _snap(ports) -> Snapshot:
    return Snapshot(node="gpu01", taken_at="2025-01-01T00:00:00Z", ib_ports=ports)


def _by(findings):
    return {f.component: f for f in findings}


def _statuses(findings):
    return {f.component: f.status for f in findings}


# ------------------------------------------------------------------------------ ib.port.state


def test_state_all_active_passes():
    out = ib_port_state(_snap([_port(i) for i in range(8)]), NDR8, {})
    assert all(f.status is Status.PASS for f in out)
    assert len(out) == 9  # 8 ports + the count
    assert _by(out)[None].metrics == {"active_ports": 8.0, "expected_ports": 8.0}
    assert _by(out)["mlx5_0:1"].metrics["rate_gbps"] == 400.0


@pytest.mark.parametrize("state, phys, words", [
    ("DOWN", "Polling", "no link partner"),
    ("DOWN", "Disabled", "disabled"),
    ("INIT", "LinkUp", "subnet manager"),
    ("ARMED", "LinkUp", "subnet manager"),
    ("ACTIVE", "LinkErrorRecovery", "LinkErrorRecovery"),
])
def test_state_port_not_active_fails(state, phys, words):
    ports = [_port(i) for i in range(8)]
    ports[3] = _port(3, state=state, phys=phys)
    out = _by(ib_port_state(_snap(ports), NDR8, {}))
    assert out["mlx5_3:1"].status is Status.FAIL and words in out["mlx5_3:1"].message
    assert out[None].status is Status.FAIL and "7 of 8" in out[None].message
    assert out["mlx5_2:1"].status is Status.PASS


def test_state_without_expectations_warns_for_a_down_port():
    """A dual-port HCA's uncabled port must not drain a node that declared nothing."""
    ports = [_port(0), _port(1, state="DOWN", phys="Polling")]
    out = _by(ib_port_state(_snap(ports), Expectations(), {}))
    assert {k: f.status for k, f in out.items()} == {"mlx5_0:1": Status.PASS, "mlx5_1:1": Status.WARN}
    assert "[class.NAME.ib.per_port]" in out["mlx5_1:1"].message
    assert "to make this a failure" in out["mlx5_1:1"].message


def test_state_down_port_of_an_expected_hca_fails():
    ports = [_port(0), _port(1, state="DOWN", phys="Polling")]
    out = _statuses(ib_port_state(_snap(ports), Expectations(ib_devices=("mlx5_0", "mlx5_1")), {}))
    assert out == {"mlx5_0:1": Status.PASS, "mlx5_1:1": Status.FAIL}


def test_state_ethernet_ports():
    ports = [_port(0), _port(8, layer="Ethernet", state="DOWN", phys="Disabled", hca="MT4125"),
             _port(9, layer="Ethernet", hca="MT4125")]
    # No layer expected: IB judged, a down Ethernet port only WARNs.
    assert _statuses(ib_port_state(_snap(ports), Expectations(), {})) == {
        "mlx5_0:1": Status.PASS, "mlx5_8:1": Status.WARN, "mlx5_9:1": Status.PASS}
    # InfiniBand expected: the Ethernet ports are not judged.
    out = _by(ib_port_state(_snap(ports), Expectations(ib_link_layer="InfiniBand", ib_port_count=1), {}))
    assert out["mlx5_8:1"].status is Status.SKIP and out[None].status is Status.PASS
    # RoCE node: Ethernet is the judged layer; the InfiniBand port is not counted.
    roce = Expectations(ib_link_layer="Ethernet", ib_port_count=2)
    out = _by(ib_port_state(_snap(ports), roce, {}))
    assert out["mlx5_8:1"].status is Status.WARN  # the count below fails the node, once
    assert out[None].status is Status.FAIL and "1 of 2 expected Ethernet" in out[None].message


def test_state_down_port_of_an_expected_hca_fails_on_the_other_layer_too():
    """`devices` names the HCA: its down Ethernet port fails even when InfiniBand is the judged layer."""
    ports = [_port(0), _port(8, layer="Ethernet", state="DOWN", phys="Disabled", hca="MT4125")]
    exp = Expectations(ib_link_layer="InfiniBand", ib_devices=("mlx5_0", "mlx5_8"))
    out = _by(ib_port_state(_snap(ports), exp, {}))
    assert out["mlx5_8:1"].status is Status.FAIL and "port disabled" in out["mlx5_8:1"].message
    assert out["mlx5_0:1"].status is Status.PASS


def test_state_missing_hca():
    ports = [_port(i) for i in range(8) if i != 5]
    out = _by(ib_port_state(_snap(ports), NDR8, {}))
    assert out["mlx5_5"].status is Status.FAIL and "HCA missing" in out["mlx5_5"].message
    assert out[None].status is Status.FAIL


def test_state_absent_source():
    snap = Snapshot(node="n", taken_at="t", ib_ports=None,
                    probe_errors={"ib_ports": ProbeError("error", "PermissionError: /sys/class/infiniband")})
    [f] = ib_port_state(snap, NDR8, {})
    assert f.status is Status.FAIL and "PermissionError" in f.message
    assert ib_port_state(snap, Expectations(), {})[0].status is Status.SKIP
    # Probed, none present, none expected: skip; expected: fail.
    assert ib_port_state(_snap([]), Expectations(), {})[0].status is Status.SKIP
    out = ib_port_state(_snap([]), Expectations(ib_port_count=8), {})
    assert [f.status for f in out] == [Status.FAIL] and "0 of 8" in out[0].message


def test_state_unreadable_is_error():
    out = _by(ib_port_state(_snap([_port(0, state=None, phys=None)]), Expectations(), {}))
    assert out["mlx5_0:1"].status is Status.ERROR


# ------------------------------------------------------------------------------- ib.port.rate


def test_rate_against_expectation():
    ports = [_port(i) for i in range(8)]
    ports[4] = _port(4, rate=200.0)
    out = _by(ib_port_rate(_snap(ports), NDR8, {}))
    assert out["mlx5_4:1"].status is Status.FAIL and "200 Gb/s, expected 400" in out["mlx5_4:1"].message
    assert out["mlx5_4:1"].metrics == {"rate_gbps": 200.0, "expected_gbps": 400.0}
    assert out["mlx5_0:1"].status is Status.PASS


def test_rate_against_peers_without_expectation():
    ports = [_port(0), _port(1, rate=200.0), _port(2, state="DOWN", phys="Polling", rate=None),
             _port(8, layer="Ethernet", hca="MT4125", rate=100.0), _port(9, rate=None)]
    out = _by(ib_port_rate(_snap(ports), Expectations(), {}))
    assert out["mlx5_1:1"].status is Status.WARN and "slower than 400" in out["mlx5_1:1"].message
    assert out["mlx5_0:1"].status is Status.PASS
    assert out["mlx5_2:1"].status is Status.SKIP
    assert out["mlx5_8:1"].status is Status.PASS  # its own group (MT4125, Ethernet)
    assert out["mlx5_9:1"].status is Status.ERROR


def test_rate_expectation_ignores_other_layer():
    ports = [_port(0), _port(8, layer="Ethernet", hca="MT4125", rate=100.0)]
    out = _statuses(ib_port_rate(_snap(ports), Expectations(ib_rate_gbps=400), {}))
    assert out == {"mlx5_0:1": Status.PASS, "mlx5_8:1": Status.PASS}


# ----------------------------------------------------------------------------- ib.port.errors


def test_errors_defaults():
    ports = [_port(0), _port(1, counters={"symbol_error": 12, "link_downed": 0}),
             _port(2, counters={"symbol_error": 9, "link_downed": 1, "port_xmit_data": 10**12}),
             _port(3, counters={})]
    out = _by(ib_port_errors(_snap(ports), Expectations(), dict(ERROR_THRESHOLDS)))
    assert out["mlx5_0:1"].status is Status.PASS
    assert out["mlx5_0:1"].metrics == {"symbol_error": 0.0, "link_downed": 0.0}
    assert out["mlx5_1:1"].status is Status.WARN and "symbol_error=12 (warn at 10)" in out["mlx5_1:1"].message
    assert out["mlx5_2:1"].status is Status.WARN and "link_downed=1" in out["mlx5_2:1"].message
    assert "symbol_error" not in out["mlx5_2:1"].message
    assert "port_xmit_data" not in out["mlx5_2:1"].metrics  # traffic, not an error
    assert out["mlx5_3:1"].status is Status.SKIP


def test_errors_configured_fail_and_extra_counter():
    t = Expectations(thresholds={"ib.port.errors": {"symbol_error_fail": 1000, "hw_out_of_buffer_warn": 50}}
                     ).thresholds_for("ib.port.errors", ERROR_THRESHOLDS)
    ports = [_port(0, counters={"symbol_error": 65535}), _port(1, counters={"hw_out_of_buffer": 51}),
             _port(2, counters={"hw_rnr_nak_retry_err": 7})]
    out = _by(ib_port_errors(_snap(ports), Expectations(), t))
    assert out["mlx5_0:1"].status is Status.FAIL and "fail at 1000" in out["mlx5_0:1"].message
    assert out["mlx5_1:1"].status is Status.WARN and out["mlx5_1:1"].metrics["hw_out_of_buffer"] == 51.0
    assert out["mlx5_2:1"].status is Status.PASS and out["mlx5_2:1"].metrics == {}


def test_errors_no_ports():
    assert ib_port_errors(_snap([]), Expectations(), dict(ERROR_THRESHOLDS))[0].status is Status.SKIP


# ---------------------------------------------------------------------------- ib.hca.firmware


def test_firmware_expected():
    ports = [_port(i) for i in range(8)]
    ports[7] = _port(7, fw="28.36.1010")
    out = _by(ib_hca_firmware(_snap(ports), NDR8, {}))
    assert out["mlx5_7"].status is Status.FAIL and "expected 28.39.1002" in out["mlx5_7"].message
    assert out["mlx5_0"].status is Status.PASS and len(out) == 8


def test_firmware_consistency_without_expectation():
    ports = [_port(i) for i in range(4)] + [_port(4, fw="28.36.1010"), _port(5, fw=None),
                                             _port(8, layer="Ethernet", hca="MT4125", fw="22.38.1002")]
    out = _by(ib_hca_firmware(_snap(ports), Expectations(), {}))
    assert out["mlx5_4"].status is Status.WARN and "28.39.1002 x4" in out["mlx5_4"].message
    assert out["mlx5_0"].status is Status.PASS
    assert out["mlx5_5"].status is Status.ERROR
    assert out["mlx5_8"].status is Status.PASS  # other HCA type, own group


def test_firmware_tie_warns_both():
    out = _statuses(ib_hca_firmware(_snap([_port(0), _port(1, fw="28.36.1010")]), Expectations(), {}))
    assert out == {"mlx5_0": Status.WARN, "mlx5_1": Status.WARN}


# ------------------------------------------------------------------------ end to end, registry


def test_end_to_end_over_fixture_tree(tmp_path):
    faults = SysfsFaults(port_down=frozenset({1}), rate_200=frozenset({2}), symbol_errors={3: 50},
                         firmware={4: "28.36.1010"})
    build_sysfs(tmp_path, faults=faults)
    snap = _snap(probe_ib_ports(str(tmp_path)))
    assert _statuses(ib_port_state(snap, NDR8, {}))["mlx5_1:1"] is Status.FAIL
    assert _statuses(ib_port_rate(snap, NDR8, {}))["mlx5_2:1"] is Status.FAIL
    assert _statuses(ib_port_errors(snap, NDR8, dict(ERROR_THRESHOLDS)))["mlx5_3:1"] is Status.WARN
    fw = _statuses(ib_hca_firmware(snap, NDR8, {}))
    assert fw["mlx5_4"] is Status.FAIL and fw["mlx5_0"] is Status.PASS


def test_registered_with_contexts():
    specs = registry._REGISTRY
    assert specs["ib.port.state"].contexts == frozenset(registry.CONTEXTS)
    assert specs["ib.port.state"].handles_missing and specs["ib.port.state"].needs == ("ib_ports",)
    # the cheap sysfs reads run in the prolog and epilog too (issue 21): state, rate
    assert specs["ib.port.rate"].contexts == frozenset(registry.CONTEXTS)
    for name in ("ib.port.rate", "ib.port.errors", "ib.hca.firmware"):
        assert specs[name].contexts == registry.DEFAULT_CONTEXTS or name == "ib.port.rate"
        assert not specs[name].handles_missing
    assert specs["ib.port.errors"].thresholds["symbol_error_warn"] == 10
