"""A golden node passes the expectations generated from it, per HCA port, on real recorded ibstat
output; a node that differs from it in any recorded port fact fails; an expected-up port that is
down FAILs whatever its link layer (issue 14, items 1 and 2)."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from healthcheck.bundles.archive import snapshot_from_bundle
from healthcheck.checks.infiniband import ib_hca_firmware, ib_port_rate, ib_port_state
from healthcheck.config import loads
from healthcheck.core.expectations import Expectations, IbPortExpect
from healthcheck.config.generate import generate_toml
from healthcheck.core.model import IbPort, Snapshot, Status
from healthcheck.probes.infiniband import probe_ib_ports
from healthcheck.probes.pcie import probe_pcie_links
from healthcheck.pipeline.judge import judge
from tests.conftest import CORPUS
from tests.fixtures.sysfs_builder import SysfsFaults, build_sysfs

H100 = "ibstat-h100-cx7-some-ports-down.txt"  # 8x CX-7 NDR IB 28.39 + 4x CX-6 Dx Ethernet 22.38
A100 = "ibstat-a100-cx6-ibpanic-missing-device.txt"  # 8x CX-6 HDR IB 200, firmware 20.41


def _corpus(name: str) -> str:
    path = CORPUS / "infiniband" / name
    if not path.is_file():
        pytest.skip(f"corpus file {name} absent")
    return path.read_text()


def _blocks(text: str) -> dict[str, str]:
    """ibstat output -> device -> its "CA '...'" block (a trailing ibpanic line is dropped)."""
    parts = re.split(r"(?m)^(?=CA ')", text)
    return {re.match(r"CA '([^']+)'", p).group(1): re.sub(r"(?m)^ibpanic:.*\n?", "", p).rstrip("\n") + "\n"
            for p in parts if p.startswith("CA '")}


def _mixed_ib() -> str:
    """Eight ConnectX-7 NDR 400 ports (firmware 28.39) from one real node plus four ConnectX-6 HDR
    200 ports (firmware 20.41) from another, all InfiniBand: a node with two HCA generations."""
    cx7 = {d: b for d, b in _blocks(_corpus(H100)).items() if "Link layer: InfiniBand" in b}
    cx6 = _blocks(_corpus(A100))
    assert len(cx7) == 8 and all("Firmware version: 20.41.1000" in cx6[f"mlx5_{i}"] for i in range(4))
    # Renamed after the CX-7 ports, and indented with tabs like them (ibstat versions differ).
    renamed = [re.sub(r"(?m)^( {8})+", lambda m: "\t" * (len(m.group(0)) // 8),
                      cx6[f"mlx5_{i}"].replace(f"CA 'mlx5_{i}'", f"CA 'mlx5_{12 + i}'", 1)) for i in range(4)]
    return "".join(cx7.values()) + "".join(renamed)


def _bundle(tmp_path: Path, name: str, ibstat: str) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "ibstat.txt").write_text(ibstat)
    return folder


def _edit(ibstat: str, device: str, old: str, new: str) -> str:
    """ibstat with one fact of ``device``'s block changed."""
    blocks = _blocks(ibstat)
    assert old in blocks[device], (device, old)
    blocks[device] = blocks[device].replace(old, new, 1)
    return "".join(blocks.values())


def _generated(snap: Snapshot) -> Expectations:
    return loads(generate_toml(snap, "golden", "node[01-99]"), "generated.toml").expectations_for("node01")


def _ib_failures(snap: Snapshot, exp: Expectations) -> dict[tuple[str, str | None], str]:
    verdict = judge(snap, exp, only=["ib.*"])
    return {(f.check, f.component): f.message for f in verdict.findings if f.status is Status.FAIL}


# ------------------------------------------------------------------------- item 1: the golden node


@pytest.mark.corpus
def test_mixed_generation_golden_node_passes_its_own_expectations(tmp_path):
    snap = snapshot_from_bundle(_bundle(tmp_path, "golden", _mixed_ib()))
    assert {(p.hca_type, p.firmware, p.rate_gbps) for p in snap.ib_ports} == {
        ("MT4129", "28.39.1002", 400.0), ("MT4124", "20.41.1000", 200.0)}
    exp = _generated(snap)
    assert exp.ib_per_port["mlx5_0:1"] == IbPortExpect("MT4129", "28.39.1002", 400.0, "InfiniBand", True)
    assert exp.ib_per_port["mlx5_13:1"] == IbPortExpect("MT4124", "20.41.1000", 200.0, "InfiniBand", True)
    assert exp.ib_rate_gbps is None and exp.hca_firmware is None  # no single node-wide value
    assert _ib_failures(snap, exp) == {}


@pytest.mark.corpus
@pytest.mark.parametrize("device, old, new, check", [
    ("mlx5_13", "Firmware version: 20.41.1000", "Firmware version: 20.39.1002", "ib.hca.firmware"),
    ("mlx5_3", "Firmware version: 28.39.1002", "Firmware version: 28.36.1010", "ib.hca.firmware"),
    ("mlx5_14", "Rate: 200", "Rate: 100", "ib.port.rate"),
    ("mlx5_0", "Rate: 400", "Rate: 200", "ib.port.rate"),
    ("mlx5_15", "CA type: MT4124", "CA type: MT4123", "ib.port.state"),
    ("mlx5_12", "State: Active", "State: Down", "ib.port.state"),
])
def test_mixed_generation_sibling_that_differs_fails(tmp_path, device, old, new, check):
    golden = _mixed_ib()
    exp = _generated(snapshot_from_bundle(_bundle(tmp_path, "golden", golden)))
    sibling = snapshot_from_bundle(_bundle(tmp_path, "sibling", _edit(golden, device, old, new)))
    failures = _ib_failures(sibling, exp)
    component = device if check == "ib.hca.firmware" else f"{device}:1"
    assert (check, component) in failures, failures


@pytest.mark.corpus
def test_h100_with_ethernet_functions_records_every_port(tmp_path):
    """The real H100 node: 8 CX-7 IB ports + 4 CX-6 Dx Ethernet ports, three of them Disabled."""
    snap = snapshot_from_bundle(_bundle(tmp_path, "golden", _corpus(H100)))
    exp = _generated(snap)
    assert len(exp.ib_per_port) == 12
    assert exp.ib_per_port["mlx5_1:1"] == IbPortExpect("MT4125", "22.38.1002", 100.0, "Ethernet", True)
    assert exp.ib_per_port["mlx5_2:1"] == IbPortExpect("MT4125", "22.38.1002", None, "Ethernet", False)
    assert _ib_failures(snap, exp) == {}
    states = {f.component: f.status for f in judge(snap, exp, only=["ib.port.state"]).findings}
    assert states["mlx5_2:1"] is Status.SKIP  # down on the golden node too: not expected up


@pytest.mark.corpus
@pytest.mark.parametrize("old, new, check", [
    ("Firmware version: 22.38.1002", "Firmware version: 22.36.1004", "ib.hca.firmware"),
    ("Rate: 100", "Rate: 25", "ib.port.rate"),
    ("CA type: MT4125", "CA type: MT4119", "ib.port.state"),
    ("Link layer: Ethernet", "Link layer: InfiniBand", "ib.port.state"),
])
def test_h100_sibling_differing_on_its_ethernet_function_fails(tmp_path, old, new, check):
    """Before per-port expectations the Ethernet function's facts were recorded nowhere."""
    golden = _corpus(H100)
    exp = _generated(snapshot_from_bundle(_bundle(tmp_path, "golden", golden)))
    sibling = snapshot_from_bundle(_bundle(tmp_path, "sibling", _edit(golden, "mlx5_1", old, new)))
    component = "mlx5_1" if check == "ib.hca.firmware" else "mlx5_1:1"
    assert (check, component) in _ib_failures(sibling, exp)


@pytest.mark.corpus
def test_missing_recorded_port_fails(tmp_path):
    golden = _corpus(H100)
    exp = _generated(snapshot_from_bundle(_bundle(tmp_path, "golden", golden)))
    blocks = _blocks(golden)
    del blocks["mlx5_8"]  # a down Ethernet function: recorded, so its absence is a deviation too
    sibling = snapshot_from_bundle(_bundle(tmp_path, "sibling", "".join(blocks.values())))
    failures = _ib_failures(sibling, exp)
    assert ("ib.port.state", "mlx5_8:1") in failures and "recorded but not present" in \
        failures[("ib.port.state", "mlx5_8:1")]


@pytest.mark.corpus
def test_cli_generate_then_check_the_same_bundle_passes(tmp_path):
    """The issue's own steps: `config generate --bundle GOLDEN` then `check --config ... --bundle GOLDEN`."""
    bundle = _bundle(tmp_path, "golden", _mixed_ib())
    run = [sys.executable, "-m", "healthcheck.cli"]
    gen = subprocess.run([*run, "config", "generate", "--bundle", str(bundle), "--nodes", "golden"],
                         capture_output=True, text=True, timeout=120)
    assert gen.returncode == 0, gen.stderr
    assert '"mlx5_12:1" = { ca_type = "MT4124", firmware = "20.41.1000"' in gen.stdout
    config = tmp_path / "generated.toml"
    config.write_text(gen.stdout)
    proc = subprocess.run([*run, "check", "--config", str(config), "--bundle", str(bundle), "--node", "golden",
                           "--only", "ib.*"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    sibling = _bundle(tmp_path, "sibling", _edit(_mixed_ib(), "mlx5_14", "Rate: 200", "Rate: 100"))
    proc = subprocess.run([*run, "check", "--config", str(config), "--bundle", str(sibling), "--node", "golden",
                           "--only", "ib.*"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "100 Gb/s, expected 200" in proc.stdout, proc.stdout + proc.stderr


# --------------------------------------------------------------- item 2: expected-up ports that are down


def _port(device: str, layer: str, state: str, phys: str) -> IbPort:
    return IbPort(device, 1, state, phys, 100.0 if state == "ACTIVE" else 40.0, layer, "22.38.1002", "MT4125")


@pytest.mark.parametrize("layer", ["InfiniBand", "Ethernet"])
@pytest.mark.parametrize("state, phys", [("DOWN", "Polling"), ("DOWN", "Disabled"), ("INIT", "LinkUp"),
                                         ("DOWN", "Sleep")])
def test_recorded_active_port_down_fails_on_any_link_layer(layer, state, phys):
    snap = Snapshot(node="n", taken_at="t", ib_ports=[_port("mlx5_0", layer, "ACTIVE", "LinkUp"),
                                                      _port("mlx5_1", layer, state, phys)])
    # Even with the node-wide layer set to the other one: the port's own record decides.
    other = "Ethernet" if layer == "InfiniBand" else "InfiniBand"
    want = IbPortExpect("MT4125", "22.38.1002", 100.0, layer, True)
    exp = Expectations(ib_link_layer=other, ib_per_port={"mlx5_0:1": want, "mlx5_1:1": want})
    out = {f.component: f for f in ib_port_state(snap, exp, {})}
    assert out["mlx5_1:1"].status is Status.FAIL and "recorded active" in out["mlx5_1:1"].message
    assert out["mlx5_0:1"].status is Status.PASS


@pytest.mark.parametrize("layer", ["InfiniBand", "Ethernet"])
def test_down_port_without_expectation_warns_and_says_what_makes_it_fail(layer):
    snap = Snapshot(node="n", taken_at="t", ib_ports=[_port("mlx5_0", "InfiniBand", "ACTIVE", "LinkUp"),
                                                      _port("mlx5_1", layer, "DOWN", "Disabled")])
    [down] = [f for f in ib_port_state(snap, Expectations(), {}) if f.component == "mlx5_1:1"]
    assert down.status is Status.WARN
    assert "informational" in down.message and "config generate" in down.message
    assert "[class.NAME.ib.per_port]" in down.message


def test_recorded_down_port_with_dual_port_hca_listed_in_devices_passes():
    """A dual-port HCA's second port, down on the golden node: `devices` lists the HCA, yet the port's
    own record (not expected up) wins, so the golden node passes its own file."""
    up = IbPort("mlx5_0", 1, "ACTIVE", "LinkUp", 400.0, "InfiniBand", "28.39.1002", "MT4129")
    down = IbPort("mlx5_0", 2, "DOWN", "Polling", 10.0, "InfiniBand", "28.39.1002", "MT4129")
    exp = Expectations(ib_devices=("mlx5_0",), ib_port_count=1, ib_per_port={
        "mlx5_0:1": IbPortExpect("MT4129", "28.39.1002", 400.0, "InfiniBand", True),
        "mlx5_0:2": IbPortExpect("MT4129", "28.39.1002", None, "InfiniBand", False)})
    snap = Snapshot(node="n", taken_at="t", ib_ports=[up, down])
    statuses = {f.component: f.status for f in ib_port_state(snap, exp, {})}
    assert statuses == {"mlx5_0:1": Status.PASS, "mlx5_0:2": Status.SKIP, None: Status.PASS}
    assert all(f.status is Status.PASS for f in ib_port_rate(snap, exp, {}) if f.component == "mlx5_0:1")
    assert [f.status for f in ib_hca_firmware(snap, exp, {})] == [Status.PASS]


# ------------------------------------------------------------------------- the same on a sysfs tree


def _sysfs_node(root: Path, faults: SysfsFaults | None = None) -> Snapshot:
    """Eight ConnectX-7 NDR ports (Gen5 x16) and four ConnectX-6 Dx Ethernet functions (Gen4 x16)."""
    build_sysfs(root, gpus=0, nvswitches=0, eth_ports=4, faults=faults)
    return Snapshot(node="node01", taken_at="t", ib_ports=probe_ib_ports(str(root)),
                    pcie_links=probe_pcie_links(str(root)))


def test_sysfs_mixed_node_passes_its_own_expectations_and_a_deviating_sibling_fails(tmp_path):
    golden = _sysfs_node(tmp_path / "golden")
    exp = _generated(golden)
    assert {p.hca_type for p in golden.ib_ports} == {"MT4129", "MT4125"}
    only = ["ib.*", "pcie.hca.link"]
    assert [f for f in judge(golden, exp, only=only).findings if f.status is Status.FAIL] == []
    sibling = _sysfs_node(tmp_path / "sibling", SysfsFaults(eth_port_down=frozenset({1}),
                                                            firmware={2: "28.36.1010"}))
    failing = {(f.check, f.component) for f in judge(sibling, exp, only=only).findings
               if f.status is Status.FAIL}
    assert failing == {("ib.port.state", "mlx5_9:1"), ("ib.hca.firmware", "mlx5_2")}
