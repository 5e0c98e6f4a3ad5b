"""Every check says whether it can FAIL by default and on what (issue 14, item 3): the claim is in
the registry, in `healthcheck checks` (a column) and in docs/checks.md (a generated table), and it
holds: an informational check gives no FAIL on a bad node with the defaults; a fails-by-default check
fails on the fault it names; `config generate` writes what makes the informational ones real."""
from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from healthcheck.checks.catalog_doc import FAIL_MODES, fail_mode
from healthcheck.checks.registry import load_all
from healthcheck.cli import cli
from healthcheck.config import default_expectations, loads
from healthcheck.config.generate import generate_toml
from healthcheck.core.model import GpuInfo, HostInfo, IbPort, Mount, PcieLink, Snapshot, Status
from healthcheck.pipeline.judge import judge

ROOT = Path(__file__).resolve().parents[2]
# The checks of this examples: informational until configured.
INFORMATIONAL = {"sw.versions", "ib.port.state", "ib.port.rate", "ib.hca.firmware",
                 "host.cpu", "host.memory", "host.swap", "host.load", "host.services",
                 "gpu.persistence", "gpu.power", "gpu.processes", "gpu.memory_used",
                 "gpu.ecc.corrected", "gpu.nvlink.errors", "gpu.pcie.replays",
                 "storage.count", "gpu.stalled",
                 # GPUDirect readiness FAILs only where the class declares gpudirect = true (issue 32.5)
                 "gpudirect.peermem", "gpudirect.acs", "gpudirect.iommu",
                 # IMEX is judged only where the class declares an NVLink domain (issue 33)
                 "nvlink.imex"}


def test_every_check_says_whether_it_can_fail():
    specs = load_all()
    for name, spec in specs.items():
        can, on_what = fail_mode(spec)  # raises for a check that says nothing
        assert isinstance(can, bool) and len(on_what) > 20, name
    assert {n for n, s in specs.items() if not fail_mode(s)[0]} == INFORMATIONAL
    assert set(FAIL_MODES) <= set(specs), "FAIL_MODES names a check that does not exist"


def test_checks_command_shows_the_column():
    result = CliRunner().invoke(cli, ["checks"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split() == ["CHECK", "FAILS", "BY", "DEFAULT", "CONTEXTS"]
    rows = {line.split()[0]: line for line in lines if line and not line.startswith(" ")}
    for name in load_all():
        expected = "informational until configured" if name in INFORMATIONAL else "yes"
        assert expected in rows[name], rows[name]
    # And it says, per check, what would make it fail.
    assert "fails only with: versions (written by `config generate`)" in result.output


def test_docs_carry_the_generated_fail_table():
    doc = (ROOT / "docs" / "checks.md").read_text()
    table = doc.split("## Can it fail, and on what", 1)[1].split("\n## ", 1)[0]
    for name, spec in load_all().items():
        can = "yes" if fail_mode(spec)[0] else "no"
        assert f"| `{name}` | {can} |" in table, name


# ----------------------------------------------------------------- the claims hold for the checks


def _bad_node() -> Snapshot:
    """Everything an informational check looks at is wrong, as far as defaults can tell."""
    host = HostInfo(cpu_sockets=1, cpu_cores=2, cpu_threads=2, mem_total_kib=1024, mem_available_kib=1,
                    swap_total_kib=1 << 30, swap_free_kib=0, load_1m=500.0, services={"slurmd": False},
                    mounts=[Mount("/dev/sda1", "/", "ext4", ["rw"], 100 << 30, 50 << 30, 1000, 500)])
    ports = [IbPort("mlx5_0", 1, "ACTIVE", "LinkUp", 400.0, "InfiniBand", "28.39.1002", "MT4129",
                    counters={"symbol_error": 10 ** 6, "link_downed": 255, "port_rcv_errors": 10 ** 6}),
             IbPort("mlx5_1", 1, "ACTIVE", "LinkUp", 100.0, "InfiniBand", "28.1.1", "MT4129"),
             IbPort("mlx5_2", 1, "DOWN", "Polling", 10.0, "InfiniBand", "28.39.1002", "MT4129"),
             IbPort("mlx5_3", 1, "DOWN", "Disabled", 10.0, "Ethernet", "22.38.1002", "MT4125")]
    gpus = [GpuInfo(0, "0000:07:00.0", name="NVIDIA H100 80GB HBM3", persistence_mode=False,
                    power_draw_w=900.0, power_limit_w=100.0, ecc_corrected_volatile=10 ** 9,
                    pcie_replay_count=10 ** 6, memory_used_mib=80000.0)]
    return Snapshot(node="n", taken_at="2026-12-01T00:00:00Z", host=host, ib_ports=ports, gpus=gpus,
                    versions={"driver": "1.0"})


def test_informational_checks_do_not_fail_with_the_defaults():
    verdict = judge(_bad_node(), default_expectations(), only=sorted(INFORMATIONAL))
    judged = {f.check for f in verdict.findings if f.status is not Status.SKIP}
    assert {"host.cpu", "host.memory", "host.swap", "host.load", "sw.versions", "ib.port.state",
            "ib.port.rate", "ib.hca.firmware"} <= judged
    assert [f for f in verdict.findings if f.status is Status.FAIL] == []
    assert {f.check for f in verdict.findings if f.status is Status.WARN} >= {
        "host.memory", "host.swap", "host.load", "ib.port.state", "ib.port.rate",
        "ib.hca.firmware"}


@pytest.mark.parametrize("check, snap", [
    ("pcie.hca.link", Snapshot(node="n", taken_at="t", pcie_links=[
        PcieLink("0000:1a:00.0", "hca", speed_current_gts=32.0, speed_max_gts=32.0, width_current=8,
                 width_max=16)])),
    ("host.mounts", Snapshot(node="n", taken_at="t", host=HostInfo(mounts=[Mount("/dev/sda1", "/", "ext4", ["ro"])]))),
    ("host.disk", Snapshot(node="n", taken_at="t", host=HostInfo(mounts=[
        Mount("/dev/sda1", "/", "ext4", ["rw"], 100 << 30, 1 << 29, 1000, 500)]))),
])
def test_fails_by_default_checks_fail_on_their_fault(check, snap):
    assert fail_mode(load_all()[check])[0]
    verdict = judge(snap, default_expectations(), only=[check])
    assert any(f.status is Status.FAIL for f in verdict.findings), verdict.findings


# --------------------------------------------------------- config generate makes them real


def _golden() -> Snapshot:
    host = HostInfo(cpu_sockets=2, cpu_cores=96, cpu_threads=192, mem_total_kib=2 * 1024 ** 3,
                    mem_available_kib=1024 ** 3, swap_total_kib=0, swap_free_kib=0, load_1m=1.0,
                    services={"slurmd": True, "munged": True},
                    mounts=[Mount("/dev/sda1", "/", "ext4", ["rw"], 100 << 30, 50 << 30, 1000, 500)])
    gpus = [GpuInfo(i, f"0000:{0x18 + i:02x}:00.0", name="NVIDIA H100 80GB HBM3", persistence_mode=True,
                    power_limit_w=700.0, power_draw_w=90.0) for i in range(8)]
    return Snapshot(node="gpu01", taken_at="2026-12-01T00:00:00Z", host=host, gpus=gpus,
                    versions={"driver": "550.90.07", "kernel": "5.15.0-105-generic"})


def _sibling(**changes) -> Snapshot:
    snap = _golden()
    for key, value in changes.items():
        if key.startswith("host_"):
            setattr(snap.host, key[5:], value)
        elif key.startswith("gpu_"):
            setattr(snap.gpus[3], key[4:], value)
        else:
            setattr(snap, key, value)
    return snap


@pytest.mark.parametrize("check, changes", [
    ("host.cpu", {"host_cpu_threads": 96}),  # SMT off
    ("host.memory", {"host_mem_total_kib": int(1.8 * 1024 ** 3)}),  # a lost DIMM
    ("host.services", {"host_services": {"slurmd": True, "munged": False}}),
    ("host.swap", {"host_swap_total_kib": 8 << 20, "host_swap_free_kib": 8 << 20}),
    ("sw.versions", {"versions": {"driver": "535.161.08", "kernel": "5.15.0-105-generic"}}),
    ("gpu.persistence", {"gpu_persistence_mode": False}),
    ("gpu.power", {"gpu_power_limit_w": 300.0}),  # a GPU capped at 300 W of 700
])
def test_generated_expectations_make_informational_checks_fail_on_a_deviating_sibling(check, changes):
    text = generate_toml(_golden(), "h100", "gpu[01-99]")
    exp = loads(text, "generated.toml").expectations_for("gpu01")
    assert not [f for f in judge(_golden(), exp, only=[check]).findings if f.status is Status.FAIL]
    failing = [f for f in judge(_sibling(**changes), exp, only=[check]).findings if f.status is Status.FAIL]
    assert failing, check
    # Without the generated file the same deviation does not fail: it was informational.
    assert not [f for f in judge(_sibling(**changes), default_expectations(), only=[check]).findings
                if f.status is Status.FAIL]


def test_generated_file_names_what_stays_informational():
    text = generate_toml(_golden(), "h100", "gpu[01-99]")
    tail = text.split("# Still informational", 1)[1]
    for name in ("host.load", "gpu.ecc.corrected", "gpu.nvlink.errors", "gpu.pcie.replays"):
        assert name in tail
    for made_real in ("host.cpu", "host.memory", "host.swap", "sw.versions", "gpu.persistence", "gpu.power"):
        assert made_real not in tail
