"""Issue 21, point 2: EDAC and PCIe AER counters from sysfs (host.edac, pcie.aer), the IB port counters'
FAIL defaults (ib.port.errors), their growth during a job (job.counter_growth), the prolog's share,
and the bundle round trip."""
from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from healthcheck.bundles.archive import snapshot_from_bundle, write_bundle
from healthcheck.checks import registry
from healthcheck.checks.host_counters import AER_THRESHOLDS, EDAC_THRESHOLDS, host_edac, pcie_aer
from healthcheck.checks.infiniband import ERROR_THRESHOLDS, ib_port_errors
from healthcheck.checks.job import counter_growth
from healthcheck.config import default_expectations
from healthcheck.core.expectations import Expectations
from healthcheck.core.model import (EdacController, HostInfo, IbPort, JobInfo, PcieAer, Snapshot, Status)
from healthcheck.parsers import ParseError
from healthcheck.probes.host_counters import parse_aer, pci_kind, probe_edac, probe_pcie_aer
from healthcheck.pipeline.judge import judge, sources_needed
from healthcheck.slurm.baseline import counters_of, growth
from tests.fixtures.host_counters_builder import add_aer, add_edac, add_pci_function, aer_text
from tests.fixtures.sysfs_builder import GPU_ADDRS, HCA_ADDRS, build_sysfs

NVME = "0000:c1:00.0"
ROOT_PORT = "0000:17:01.0"


def _snap(**kw) -> Snapshot:
    return Snapshot(node="gpu01", taken_at="2026-12-01T00:00:00Z", **kw)


def _by(findings):
    return {f.component: f for f in findings}


# ----------------------------------------------------------------------------------- parsers


def test_parse_aer_reads_every_type_and_the_total():
    counts = parse_aer(aer_text("fatal", {"DLP": 2, "SDES": 1}))
    assert counts["DLP"] == 2 and counts["SDES"] == 1 and counts["TOTAL_ERR_FATAL"] == 3
    assert parse_aer(aer_text("correctable", {"RxErr": 7}))["TOTAL_ERR_COR"] == 7


@pytest.mark.parametrize("bad", ["", "DLP", "DLP x", "DLP 1 2", "DLP -1"])
def test_parse_aer_refuses_what_is_not_a_counter_file(bad):
    with pytest.raises(ParseError):
        parse_aer(bad)


@pytest.mark.parametrize("vendor, klass, kind", [
    ("0x10de", "0x030200", "gpu"), ("0x15b3", "0x020700", "hca"), ("0x144d", "0x010802", "nvme"),
    ("0x8086", "0x060400", "bridge"), ("0x10de", "0x068000", "nvswitch"), ("0x14e4", "0x020000", "nic"),
    ("0x8086", "0xff0000", None)])
def test_pci_kind_from_the_class(vendor, klass, kind):
    assert pci_kind(vendor, klass) == kind


# ------------------------------------------------------------------------------------ EDAC


def test_edac_probe_and_check_over_a_fixture_tree(tmp_path):
    add_edac(tmp_path, 0)  # clean, 10 days
    add_edac(tmp_path, 1, ue=1, ce=3, dimms={"CPU_SrcID#0_MC#1_Chan#2_DIMM#0": (3, 1)})
    add_edac(tmp_path, 2, ce=50, seconds=3600)  # 50 corrected in the first hour: >= 10 per day
    add_edac(tmp_path, 3, ce=50, seconds=86400 * 30)  # 50 over 30 days: under 2 a day
    add_edac(tmp_path, 10, ce=2500, seconds=86400 * 5)  # 500 a day
    controllers = probe_edac(str(tmp_path))
    assert [mc.name for mc in controllers] == ["mc0", "mc1", "mc2", "mc3", "mc10"]
    assert controllers[1].dimms[0].label == "CPU_SrcID#0_MC#1_Chan#2_DIMM#0"
    out = _by(host_edac(_snap(edac=controllers), Expectations(), dict(EDAC_THRESHOLDS)))
    assert out["mc0"].status is Status.PASS
    assert out["mc1"].status is Status.FAIL and "1 uncorrected" in out["mc1"].message
    assert "CPU_SrcID#0_MC#1_Chan#2_DIMM#0 1" in out["mc1"].message  # the DIMM is named
    assert out["mc2"].status is Status.WARN and "warn at 10" in out["mc2"].message
    assert out["mc3"].status is Status.PASS
    assert out["mc10"].status is Status.FAIL and "500 per 24 h" in out["mc10"].message


def test_edac_without_window_warns_on_corrected_errors_but_never_fails_on_them():
    mc = EdacController("mc0", ce_count=10 ** 6, ue_count=0)
    (f,) = host_edac(_snap(edac=[mc]), Expectations(), dict(EDAC_THRESHOLDS))
    assert f.status is Status.WARN and "window unknown" in f.message


def test_edac_absent_or_unreadable():
    assert host_edac(_snap(edac=[]), Expectations(), dict(EDAC_THRESHOLDS))[0].status is Status.SKIP
    (f,) = host_edac(_snap(edac=[EdacController("mc0")]), Expectations(), dict(EDAC_THRESHOLDS))
    assert f.status is Status.ERROR
    assert probe_edac("/nonexistent-sysfs") == []


# ------------------------------------------------------------------------------------- AER


def _aer_tree(tmp_path: Path) -> Path:
    build_sysfs(tmp_path, gpus=2, hcas=2, nvswitches=0)
    add_pci_function(tmp_path, NVME, vendor="0x144d", klass="0x010802", name=("nvme", "nvme0"))
    add_pci_function(tmp_path, ROOT_PORT, vendor="0x8086", klass="0x060400")
    add_aer(tmp_path, GPU_ADDRS[0], fatal={"SDES": 1})  # a GPU whose link went down: surprise down
    add_aer(tmp_path, GPU_ADDRS[1])  # clean
    add_aer(tmp_path, HCA_ADDRS[0], correctable={"RxErr": 3})  # noise
    add_aer(tmp_path, HCA_ADDRS[1])
    add_aer(tmp_path, NVME, correctable={"BadTLP": 120, "RxErr": 30})
    add_aer(tmp_path, ROOT_PORT, nonfatal={"ACSViol": 1})
    return tmp_path


def test_aer_probe_names_and_classifies_every_function(tmp_path):
    found = {d.pci_bus_id: d for d in probe_pcie_aer(str(_aer_tree(tmp_path)))}
    assert set(found) == {GPU_ADDRS[0], GPU_ADDRS[1], HCA_ADDRS[0], HCA_ADDRS[1], NVME, ROOT_PORT}
    assert found[GPU_ADDRS[0]].kind == "gpu" and found[GPU_ADDRS[0]].fatal["SDES"] == 1
    assert (found[HCA_ADDRS[0]].kind, found[HCA_ADDRS[0]].name) == ("hca", "mlx5_0")
    assert (found[NVME].kind, found[NVME].name) == ("nvme", "nvme0")
    assert found[ROOT_PORT].kind == "bridge"


def test_aer_check_fails_uncorrectable_naming_the_device_and_warns_corrected_bursts(tmp_path):
    snap = _snap(pcie_aer=probe_pcie_aer(str(_aer_tree(tmp_path))))
    out = _by(pcie_aer(snap, Expectations(), dict(AER_THRESHOLDS)))
    gpu = out[GPU_ADDRS[0]]
    assert gpu.status is Status.FAIL and gpu.message.startswith(f"GPU at {GPU_ADDRS[0]}: 1 uncorrectable fatal")
    assert "SDES 1" in gpu.message
    port = out[ROOT_PORT]
    assert port.status is Status.FAIL and "PCIe root/switch port" in port.message and "non-fatal" in port.message
    nvme = out[NVME]
    assert nvme.status is Status.WARN and nvme.message.startswith("NVMe drive nvme0") and "150 corrected" in nvme.message
    assert HCA_ADDRS[0] not in out  # 3 corrected errors: noise, summed up in the PASS line
    assert out[None].status is Status.PASS and out[None].metrics["functions"] == 3


def test_aer_a_function_with_unparsable_files_is_left_out(tmp_path):
    build_sysfs(tmp_path, gpus=1, hcas=0, nvswitches=0)
    dev = add_aer(tmp_path, GPU_ADDRS[0])
    for kind in ("fatal", "nonfatal", "correctable"):
        (dev / f"aer_dev_{kind}").write_text("garbage here\x00\n")
    assert probe_pcie_aer(str(tmp_path)) == []
    assert pcie_aer(_snap(pcie_aer=[]), Expectations(), dict(AER_THRESHOLDS))[0].status is Status.SKIP


# ------------------------------------------------------------------- IB counters: FAIL defaults


def _port(counters) -> IbPort:
    return IbPort("mlx5_0", 1, "ACTIVE", "LinkUp", 400.0, "InfiniBand", counters=counters)


@pytest.mark.parametrize("counters, uptime_s, status", [
    ({"link_downed": 5}, 3600.0, Status.FAIL),  # Azure's flap rule: 5 in 24 h
    ({"link_downed": 5}, 86400.0 * 10, Status.WARN),  # 5 over 10 days: under the rate
    ({"link_downed": 60}, 86400.0 * 10, Status.FAIL),
    ({"link_downed": 5}, None, Status.FAIL),  # unknown uptime: the total is judged
    ({"symbol_error": 20000}, 86400.0, Status.FAIL),
    ({"local_link_integrity_errors": 10}, 3600.0, Status.FAIL),
    ({"port_rcv_remote_physical_errors": 10 ** 9}, 3600.0, Status.WARN),  # upstream: never fails this node
    ({"symbol_error": 0, "link_downed": 0}, 3600.0, Status.PASS),
])
def test_ib_port_errors_fail_by_default_at_a_rate_per_day_of_uptime(counters, uptime_s, status):
    snap = _snap(ib_ports=[_port(counters)], host=HostInfo(uptime_s=uptime_s) if uptime_s else None)
    (f,) = ib_port_errors(snap, Expectations(), dict(ERROR_THRESHOLDS))
    assert f.status is status, f.message


# --------------------------------------------------------------- growth during a job (epilog)


def test_epilog_attributes_counter_growth_to_the_job(tmp_path):
    """The prolog's baseline and the epilog's reading of the same node, counters grown in between: the
    growth is the job's, FAIL where a default amount is reached, WARN below."""
    def node(link_downed, symbol, ue, ce, fatal, corr):
        return _snap(
            ib_ports=[_port({"link_downed": link_downed, "symbol_error": symbol})],
            edac=[EdacController("mc0", ce_count=ce, ue_count=ue, seconds_since_reset=86400 * 3)],
            pcie_aer=[PcieAer(GPU_ADDRS[0], kind="gpu", fatal={"TOTAL_ERR_FATAL": fatal}, nonfatal={"TOTAL_ERR_NONFATAL": 0},
                              correctable={"TOTAL_ERR_COR": corr})])

    before = counters_of(node(0, 0, 0, 5, 0, 0))
    assert before["mc0.ue_count"] == 0 and before[f"{GPU_ADDRS[0]}.aer_dev_fatal"] == 0
    after = counters_of(node(1, 5, 1, 30, 1, 2))
    snap = _snap(job=JobInfo("777", counter_growth=growth(before, after)))
    spec = registry.spec("job.counter_growth")
    out = _by(counter_growth(snap, Expectations(), dict(spec.thresholds)))
    assert out["mlx5_0:1"].status is Status.FAIL and "during job 777" in out["mlx5_0:1"].message
    assert "link_downed +1 (fail at +1)" in out["mlx5_0:1"].message and "symbol_error +5" in out["mlx5_0:1"].message
    assert out["mc0"].status is Status.FAIL and "ue_count +1" in out["mc0"].message
    assert out[GPU_ADDRS[0]].status is Status.FAIL and "aer_dev_fatal +1" in out[GPU_ADDRS[0]].message


def test_epilog_growth_below_the_amounts_only_warns():
    before = {"mlx5_0:1.symbol_error": 0.0, "mc0.ce_count": 0.0, "0000:18:00.0.aer_dev_correctable": 0.0}
    after = {"mlx5_0:1.symbol_error": 999.0, "mc0.ce_count": 99.0, "0000:18:00.0.aer_dev_correctable": 40.0}
    snap = _snap(job=JobInfo("8", counter_growth=growth(before, after)))
    out = counter_growth(snap, Expectations(), dict(registry.spec("job.counter_growth").thresholds))
    assert {f.status for f in out} == {Status.WARN} and len(out) == 3


# ---------------------------------------------------------------------- contexts, the prolog


def test_cheap_sysfs_checks_run_in_the_prolog_and_mlxlink_does_not():
    specs = registry.load_all()
    for name in ("ib.port.state", "ib.port.rate", "pcie.hca.link", "host.edac"):
        assert {"prolog", "epilog"} <= specs[name].contexts, name
    # AER: a few hundred reads, after each job (epilog) and between jobs (HealthCheckProgram)
    assert "prolog" not in specs["pcie.aer"].contexts and {"epilog", "slurm-check"} <= specs["pcie.aer"].contexts
    assert not {"prolog", "epilog"} & specs["ib.mlxlink"].contexts
    prolog = sources_needed(default_expectations(), "prolog")
    assert {"ib_ports", "pcie_links", "edac"} <= prolog and not {"mlxlink", "pcie_aer"} & prolog
    assert {"mlxlink", "pcie_aer", "edac"} <= sources_needed(default_expectations(), "slurm-check")
    assert {"pcie_aer", "edac"} <= sources_needed(default_expectations(), "epilog")


def test_epilog_fails_a_node_with_a_fatal_aer_error_before_the_next_job(tmp_path):
    snap = _snap(pcie_aer=probe_pcie_aer(str(_aer_tree(tmp_path))))
    verdict = judge(snap, default_expectations(), "epilog", only=["pcie.aer"])
    assert verdict.status is Status.FAIL


# ---------------------------------------------------------------------------------- bundles


def test_bundle_records_and_reads_back_edac_aer_and_mlxlink(tmp_path, fixtures_dir):
    sys_root = _aer_tree(tmp_path / "sys")
    add_edac(sys_root, 0, ue=2, dimms={"DIMM_A1": (0, 2)})
    proc = tmp_path / "proc"
    proc.mkdir()
    live = _snap(edac=probe_edac(str(sys_root)), pcie_aer=probe_pcie_aer(str(sys_root)))
    raw = {"mlxlink-mlx5_0.txt": (fixtures_dir / "mlxlink" / "ndr-high-ber-hot-module.txt").read_text()}
    out = write_bundle(live, tmp_path / "bundle", raw, str(sys_root), str(proc))
    back = snapshot_from_bundle(out)
    assert back.edac == live.edac
    assert sorted(back.pcie_aer, key=lambda d: d.pci_bus_id) == sorted(live.pcie_aer, key=lambda d: d.pci_bus_id)
    assert [p.component for p in back.mlxlink] == ["mlx5_0:1"] and back.mlxlink[0].effective_ber == 4e-11
    statuses = {f.check: f.status for f in judge(back, default_expectations(), "check",
                                                  only=["host.edac", "pcie.aer", "ib.mlxlink"]).findings
                if f.status is Status.FAIL}
    assert statuses == {"host.edac": Status.FAIL, "pcie.aer": Status.FAIL, "ib.mlxlink": Status.FAIL}


def test_snapshot_json_round_trip_keeps_the_new_sources():
    snap = _snap(edac=[EdacController("mc0", ce_count=1, ue_count=0, seconds_since_reset=5)],
                 pcie_aer=[PcieAer("0000:18:00.0", kind="gpu", fatal={"DLP": 1, "TOTAL_ERR_FATAL": 1})])
    assert Snapshot.from_dict(snap.to_dict()) == snap


def test_pci_probes_follow_an_absolute_link_inside_the_root(tmp_path):
    """A tree copied with absolute ``/sys/devices/...`` links: the fast path re-roots them, as before."""
    import os

    from healthcheck.probes.pcie import probe_pcie_links

    build_sysfs(tmp_path, gpus=0, hcas=1, nvswitches=0)
    entry = tmp_path / "bus" / "pci" / "devices" / HCA_ADDRS[0]
    real = entry.resolve()
    add_aer(tmp_path, HCA_ADDRS[0], fatal={"DLP": 1})
    entry.unlink()
    os.symlink("/sys/" + str(real.relative_to(tmp_path)), entry)
    (link,) = probe_pcie_links(str(tmp_path))
    assert link.pci_bus_id == HCA_ADDRS[0] and link.kind == "hca" and link.width_current == 16
    (aer,) = probe_pcie_aer(str(tmp_path))
    assert aer.kind == "hca" and aer.fatal["DLP"] == 1


# ------------------------------------------------------------------- the fast readings are the same


def _parse_aer_line_by_line(text):
    """parse_aer's line-by-line reading alone (its answer for any text, the kernel's form included)."""
    from healthcheck.probes import host_counters

    saved = host_counters._AER_FILE
    host_counters._AER_FILE = type(saved)(r"(?!)")  # matches nothing: every text takes the slow path
    try:
        return parse_aer(text)
    finally:
        host_counters._AER_FILE = saved


_AER_ALPHABET = st.sampled_from(list("ABZaz_09 \t\r\n\x0b\x0c\x1c\x85\xa0-é٣") + ["TOTAL_ERR_COR", "DLP", "1" * 25])


@settings(max_examples=400, deadline=None)
@given(st.one_of(
    st.lists(st.tuples(st.from_regex(r"[!-~]{1,12}", fullmatch=True), st.integers(0, 10 ** 24 - 1)), min_size=1,
             max_size=20).map(lambda rows: "\n".join(f"{n} {c}" for n, c in rows)),
    st.lists(_AER_ALPHABET, max_size=40).map("".join)))
def test_parse_aer_fast_path_answers_as_the_line_by_line_reading(text):
    try:
        expected = _parse_aer_line_by_line(text)
    except ParseError as exc:
        with pytest.raises(ParseError):
            parse_aer(text)
        assert str(exc)
        return
    assert parse_aer(text) == expected


@pytest.mark.parametrize("content", [b"0x10de\n", b"", b"a\r\nb\rc\n", b"\xff\xfeinvalid utf-8 \xe2\x82\n",
                                     "ü".encode() * 3000, b"x" * 5000, b"  spaced  \n\n"])
def test_read_text_gives_what_a_text_mode_read_of_4096_characters_gives(tmp_path, content):
    from healthcheck.probes.pcie import read_text

    path = tmp_path / "attr"
    path.write_bytes(content)
    with open(path, encoding="utf-8", errors="replace") as handle:
        expected = handle.read(4096).strip()
    assert read_text(str(path)) == expected
    assert read_text(str(tmp_path / "missing")) is None and read_text(str(tmp_path)) is None
    assert read_text(str(tmp_path) + "/\0") is None


def test_the_kernels_form_takes_the_fast_path():
    from healthcheck.probes import host_counters

    for kind in ("fatal", "nonfatal", "correctable"):
        assert host_counters._AER_FILE.fullmatch(aer_text(kind, {"DLP": 3}).strip())


def test_with_the_hooks_counter_memory_link_downs_are_left_to_the_strike_check():
    from healthcheck.core.model import NetWindow

    counters = {"link_downed": 60, "symbol_error": 20000}
    snap = _snap(ib_ports=[_port(counters)], host=HostInfo(uptime_s=3600.0), net_window=NetWindow(now_s=1.0))
    (f,) = ib_port_errors(snap, Expectations(), dict(ERROR_THRESHOLDS))
    assert f.status is Status.FAIL and "symbol_error" in f.message and "link_downed" not in f.message
    snap = _snap(ib_ports=[_port({"link_downed": 60})], host=HostInfo(uptime_s=3600.0), net_window=NetWindow(now_s=1.0))
    assert ib_port_errors(snap, Expectations(), dict(ERROR_THRESHOLDS))[0].status is Status.PASS
