"""GPUDirect RDMA readiness (issue 32.5): the probe over a fixture tree, the config-space parser, the
three checks with and without ``gpudirect = true`` in the node class, the live run and the config."""
from __future__ import annotations

import pytest

from healthcheck.checks.gpudirect import dmabuf_missing, gpudirect_acs, gpudirect_iommu, gpudirect_peermem
from healthcheck.config.loading import loads
from healthcheck.config.model import ConfigError
from healthcheck.core.expectations import Expectations
from healthcheck.core.model import GpuDirectInfo, Snapshot, Status
from healthcheck.parsers import ParseError
from healthcheck.parsers.pci_config import acs_control, port_type
from healthcheck.probes.gpudirect import probe_gpudirect
from healthcheck.probes.live import LiveOptions, snapshot_live
from tests.fixtures.gpudirect_builder import DOWN_GPU, DOWN_HCA, GPU, HCA, UPSTREAM, build, config_space

DECLARED, PLAIN = Expectations(node_class="h100", gpudirect=True), Expectations(node_class="h100")


def _snap(tmp_path, **kw) -> Snapshot:
    sys_root, proc_root = build(tmp_path, **kw)
    return Snapshot("n1", "2026-01-01T00:00:00Z", gpu_pci_devices=[GPU],
                    gpudirect=probe_gpudirect(str(sys_root), str(proc_root)))


def test_config_space_parser_reads_port_type_and_acs_bits():
    data = config_space("downstream", ("SrcValid", "ReqRedir", "CmpltRedir"))
    assert port_type(data) == "downstream"
    ctl = acs_control(data)
    assert ctl["SrcValid"] and ctl["ReqRedir"] and ctl["CmpltRedir"] and not ctl["EgressCtrl"]
    assert acs_control(config_space("upstream", None)) == {}  # no ACS capability
    assert acs_control(config_space("upstream", ("ReqRedir",), full=False)) is None  # unprivileged: 64 bytes
    assert port_type(config_space("root_port", ())) == "root_port"
    with pytest.raises(ParseError):
        acs_control("not bytes")
    with pytest.raises(ParseError):
        port_type(b"\0" * 5000)


def test_probe_finds_the_switch_between_the_gpu_and_its_hca(tmp_path):
    info = _snap(tmp_path).gpudirect
    assert info.peermem_module == "nvidia_peermem" and info.nvidia_open is True
    assert info.cmdline_iommu == ["iommu=pt", "intel_iommu=on"] and info.iommu_units == 1
    assert info.iommu_group_types == {GPU: "identity", HCA: "identity"}
    (path,) = info.paths
    assert (path.gpu, path.hca, path.hca_pci, path.common) == (GPU, "mlx5_0", HCA, UPSTREAM)
    assert [b.pci_bus_id for b in path.bridges] == [UPSTREAM, DOWN_GPU, DOWN_HCA]
    assert {b.port_type for b in path.bridges} == {"upstream", "downstream"}


def test_acs_redirect_fails_only_where_the_class_declares_gpudirect(tmp_path):
    snap = _snap(tmp_path, acs=("SrcValid", "ReqRedir", "CmpltRedir"))
    (declared,) = gpudirect_acs(snap, DECLARED, {})
    assert declared.status is Status.FAIL and "ReqRedir+ CmpltRedir+" in declared.message
    assert DOWN_GPU in declared.message and declared.component == f"{GPU}->mlx5_0"
    (plain,) = gpudirect_acs(snap, PLAIN, {})
    assert plain.status is Status.SKIP and "not required" in plain.message


def test_acs_source_validation_alone_passes(tmp_path):
    (f,) = gpudirect_acs(_snap(tmp_path, acs=("SrcValid",)), DECLARED, {})
    assert f.status is Status.PASS and "3 switch port(s)" in f.message


def test_acs_unreadable_is_an_error_for_a_gpudirect_class(tmp_path):
    snap = _snap(tmp_path, full_config=False)
    assert gpudirect_acs(snap, DECLARED, {})[0].status is Status.ERROR
    assert gpudirect_acs(snap, PLAIN, {})[0].status is Status.SKIP


def test_peermem_or_dmabuf(tmp_path):
    assert gpudirect_peermem(_snap(tmp_path / "a"), DECLARED, {})[0].status is Status.PASS
    dmabuf = gpudirect_peermem(_snap(tmp_path / "b", peermem=False), DECLARED, {})[0]
    assert dmabuf.status is Status.PASS and "dma-buf possible" in dmabuf.message
    old = _snap(tmp_path / "c", peermem=False, open_module=False, driver="510.47.03", kernel="5.4.0-150-generic")
    (f,) = gpudirect_peermem(old, DECLARED, {})
    assert f.status is Status.FAIL and "modprobe nvidia_peermem" in f.message
    assert "open kernel module (the proprietary one is loaded)" in f.message and "R515+" in f.message
    assert "5.12+" in f.message
    assert gpudirect_peermem(old, PLAIN, {})[0].status is Status.SKIP


def test_dmabuf_versions():
    info = GpuDirectInfo(nvidia_driver="535.183.01", nvidia_open=True, kernel="5.12.0")
    assert dmabuf_missing(info) == []
    assert dmabuf_missing(GpuDirectInfo(nvidia_driver="535.1", nvidia_open=True, kernel="5.11.22"))
    assert dmabuf_missing(GpuDirectInfo(nvidia_driver=None, nvidia_open=None, kernel=None))


def test_translated_iommu_fails_a_gpudirect_class(tmp_path):
    snap = _snap(tmp_path, iommu="DMA-FQ", cmdline="ro intel_iommu=on")
    (f,) = gpudirect_iommu(snap, DECLARED, {})
    assert f.status is Status.FAIL and f"{GPU} (DMA-FQ)" in f.message and "iommu=pt" in f.message
    assert gpudirect_iommu(snap, PLAIN, {})[0].status is Status.SKIP
    assert gpudirect_iommu(_snap(tmp_path / "pt"), DECLARED, {})[0].status is Status.PASS
    none = gpudirect_iommu(_snap(tmp_path / "off", iommu=None, cmdline="ro"), DECLARED, {})[0]
    assert none.status is Status.PASS and "no IOMMU enabled" in none.message


def test_no_gpu_skips(tmp_path):
    sys_root, proc_root = build(tmp_path, gpu=False)
    snap = Snapshot("n1", "t", gpu_pci_devices=[], gpudirect=probe_gpudirect(str(sys_root), str(proc_root)))
    for fn in (gpudirect_acs, gpudirect_iommu, gpudirect_peermem):
        assert fn(snap, DECLARED, {})[0].status is Status.SKIP


def test_live_run_and_json_round_trip(tmp_path):
    sys_root, proc_root = build(tmp_path, acs=("ReqRedir",))
    snap = snapshot_live(LiveOptions(str(sys_root), str(proc_root), node="n1"), "t", frozenset({"gpudirect"}))
    assert snap.gpudirect is not None and snap.gpudirect.paths[0].hca == "mlx5_0"
    again = Snapshot.from_dict(snap.to_dict())
    assert again.gpudirect == snap.gpudirect


def test_class_declares_gpudirect():
    cfg = loads('[class.h100]\nnodes = "gpu[01-02]"\ngpudirect = true\n')
    assert cfg.expectations_for("gpu01").gpudirect is True
    assert loads("[defaults]\n").expectations_for("x").gpudirect is None
    with pytest.raises(ConfigError, match="gpudirect must be true or false"):
        loads('[class.h100]\nnodes = "gpu01"\ngpudirect = "yes"\n')
