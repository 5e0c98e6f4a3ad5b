"""End to end: a live snapshot of a fixture node (sysfs/proc trees, fake NVML, recorded kernel log),
collected into a bundle and judged offline, gives the same judgement; the CLI judges bundles with the
documented exit codes; `config generate` from a good node accepts it and catches a faulty sibling."""
from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from healthcheck.bundles.archive import BundleError, snapshot_from_bundle
from healthcheck.bundles.collect import collect_bundle
from healthcheck.config import default_expectations, loads
from healthcheck.config.generate import generate_toml
from healthcheck.core.model import Status
from healthcheck.probes.live import LiveOptions, snapshot_live
from healthcheck.pipeline.judge import judge
from tests.conftest import FIXTURES, corpus_params
from tests.fakes.fake_pynvml import FakeNvml, h100_node
from tests.fixtures.proc_builder import build_proc, build_sys
from tests.fixtures.sysfs_builder import SysfsFaults, build_sysfs

SERVICES = ("slurmd", "munged")
HEALTHY_XML = FIXTURES / "nvidia-smi" / "q-x-h100-sxm-8gpu-565.57.01-healthy.xml"
KERNEL_LOG = "[    5.123456] nvidia: loading out-of-tree module taints kernel.\n" \
             "[    6.000001] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.90.07\n"


def make_node(root: Path, faults: SysfsFaults | None = None) -> LiveOptions:
    sys_root, proc_root = root / "sys", root / "proc"
    build_sysfs(sys_root, faults=faults)
    build_sys(sys_root, hcas={}, cpu_topology=False, nvidia_driver="550.90.07")
    build_proc(proc_root, hostname="gpu017", nvidia_driver="550.90.07")
    return LiveOptions(str(sys_root), str(proc_root), SERVICES, node="gpu017",
                       nvml=FakeNvml(h100_node()), kernel_log=lambda: KERNEL_LOG)


def statuses(verdict):
    return {(f.check, f.component): f.status for f in verdict.findings}


def healthcheck(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "healthcheck.cli", *args], capture_output=True,
                          text=True, timeout=120, cwd=cwd)


@pytest.fixture
def node(tmp_path):
    return make_node(tmp_path / "node")


@pytest.mark.parametrize("name", ["bundle-dir", "bundle.tar.gz"])
def test_live_and_bundle_judgements_agree(tmp_path, node, name):
    exp = loads('[defaults]\nservices = ["slurmd", "munged"]\n').expectations_for("gpu017")
    live = snapshot_live(node, "2026-12-01T00:00:00+00:00")
    assert live.gpu_source == "nvml" and len(live.gpus) == 8 and not live.probe_errors
    path, notes = collect_bundle(str(tmp_path / name), options=node)
    assert path.exists()
    offline = snapshot_from_bundle(path, services=SERVICES)
    assert offline.node == "gpu017" and offline.gpu_source == "nvml"
    live_verdict, offline_verdict = judge(live, exp), judge(offline, exp)
    assert statuses(offline_verdict) == statuses(live_verdict)
    assert live_verdict.status is not Status.FAIL, [f.message for f in live_verdict.failing]
    by = statuses(offline_verdict)
    assert by[("gpu.count", None)] is Status.PASS
    assert by[("ib.port.state", "mlx5_0:1")] is Status.PASS
    assert by[("host.services", "slurmd")] is Status.PASS
    assert by[("gpu.xid", None)] is Status.PASS


def test_faulty_node_bundle_fails_the_right_checks(tmp_path):
    node = make_node(tmp_path / "node", SysfsFaults(port_down=frozenset({3}), gpu_width_x8=frozenset({2})))
    node.nvml.gpus[5].remapped_rows = (0, 2, 1, 0)  # uncorrectable remap pending on gpu5
    path, _ = collect_bundle(str(tmp_path / "b.tar.gz"), options=node)
    exp = loads('[defaults]\nib = { ports = 8, devices = ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3", '
                '"mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7"] }\n').expectations_for("gpu017")
    verdict = judge(snapshot_from_bundle(path, services=SERVICES), exp)
    failing = {(f.check, f.component) for f in verdict.failing}
    assert ("ib.port.state", "mlx5_3:1") in failing
    assert ("gpu.row_remap", "gpu5") in failing
    # the sysfs view and the NVML view of the GPU link are both recorded; NVML says x16 here,
    # the kernel's view of the same device says x8 — gpu.pcie.link judges the GPU's own report
    assert verdict.status is Status.FAIL


def test_cli_check_on_nvidia_smi_bundle_exit_codes_and_json(tmp_path):
    healthy = tmp_path / "healthy"
    healthy.mkdir()
    (healthy / "nvidia-smi-q-x.xml").write_text(HEALTHY_XML.read_text())
    proc = healthcheck("check", "--bundle", str(healthy), "--format", "json", "--only", "gpu.*")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    assert report["status"] in ("pass", "warn") and report["node"] == "healthy"
    assert {r["component"] for r in report["results"] if r["check"] == "gpu.ecc.uncorrected"} == \
        {f"gpu{i}" for i in range(8)}

    faulty = tmp_path / "faulty"
    faulty.mkdir()
    xml = HEALTHY_XML.read_text()
    blocks = xml.split("<gpu id=")
    assert "<remapped_row_pending>No</remapped_row_pending>" in blocks[4]
    blocks[4] = blocks[4].replace("<remapped_row_pending>No</remapped_row_pending>",
                                  "<remapped_row_pending>Yes</remapped_row_pending>", 1)
    (faulty / "nvidia-smi-q-x.xml").write_text("<gpu id=".join(blocks))
    proc = healthcheck("check", "--bundle", str(faulty), "--format", "json")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    failing = [(r["check"], r["component"]) for r in json.loads(proc.stdout)["results"] if r["status"] == "fail"]
    assert ("gpu.row_remap", "gpu3") in failing


def test_truncated_xml_makes_gpu_checks_error_not_a_crash(tmp_path):
    bundle = tmp_path / "cut"
    bundle.mkdir()
    text = HEALTHY_XML.read_text()
    (bundle / "nvidia-smi-q-x.xml").write_text(text[: len(text) // 2])
    proc = healthcheck("check", "--bundle", str(bundle), "--format", "json", "--only", "gpu.ecc.*")
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    results = json.loads(proc.stdout)["results"]
    assert results and all(r["status"] == "error" for r in results)
    assert all("nvidia-smi-q-x.xml" in r["message"] for r in results)


@pytest.mark.parametrize("member", ["../escape.txt", "/abs.txt", "link"])
def test_hostile_tarball_is_refused_with_exit_2(tmp_path, member):
    archive = tmp_path / "evil.tar.gz"
    payload = tmp_path / "payload.txt"
    payload.write_text("x")
    with tarfile.open(archive, "w:gz") as tar:
        if member == "link":
            info = tarfile.TarInfo("bundle/sys")
            info.type, info.linkname = tarfile.SYMTYPE, "/sys"
            tar.addfile(info)
        else:
            info = tarfile.TarInfo(member)  # written raw: tar.add() would strip a leading "/"
            info.size = 1
            with open(payload, "rb") as fh:
                tar.addfile(info, fh)
    with pytest.raises(BundleError):
        snapshot_from_bundle(archive)
    proc = healthcheck("check", "--bundle", str(archive))
    assert proc.returncode == 2 and "refusing" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path.parent / "escape.txt").exists()


def test_not_a_bundle_is_a_clear_error(tmp_path):
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(b"not a tarball")
    proc = healthcheck("check", "--bundle", str(junk))
    assert proc.returncode == 2 and "not a readable .tar.gz bundle" in proc.stderr


def test_generated_config_accepts_the_golden_node_and_catches_a_sibling(tmp_path):
    golden = make_node(tmp_path / "golden")
    path, _ = collect_bundle(str(tmp_path / "golden.tar.gz"), options=golden)
    snap = snapshot_from_bundle(path, services=("slurmd", "munged", "sshd"))
    text = generate_toml(snap, "h100", "gpu[001-128]")
    cfg = loads(text, "generated.toml")  # the generated file validates
    exp = cfg.expectations_for("gpu017")
    assert exp.gpu_count == 8 and exp.ib_port_count == 8 and exp.ib_rate_gbps == 400
    assert exp.pcie_by_kind["gpu"].gen == 5 and exp.versions["driver"] == "550.90.07"
    assert judge(snap, exp).status is not Status.FAIL

    sibling = make_node(tmp_path / "sibling", SysfsFaults(rate_200=frozenset({1})))
    sibling.nvml.gpus.pop()  # a GPU the driver no longer reports
    path2, _ = collect_bundle(str(tmp_path / "sibling.tar.gz"), options=sibling)
    verdict = judge(snapshot_from_bundle(path2, services=exp.services), exp)
    failing = {f.check for f in verdict.failing}
    assert {"gpu.count", "ib.port.rate"} <= failing


def test_cli_config_generate_from_bundle_then_validate(tmp_path, node):
    path, _ = collect_bundle(str(tmp_path / "b"), options=node)
    proc = healthcheck("config", "generate", "--bundle", str(path), "--nodes", "gpu[001-004]")
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "gen.toml"
    out.write_text(proc.stdout)
    proc = healthcheck("config", "validate", str(out))
    assert proc.returncode == 0 and "ok (1 node classes)" in proc.stdout
    proc = healthcheck("config", "show", "--config", str(out), "--node", "gpu003")
    shown = json.loads(proc.stdout)
    assert shown["node_class"] == "generated" and shown["gpu_count"] == 8


CORPUS_FAULTS = {
    # corpus nvidia-smi file (substring) -> the check that must fail when it is judged as a bundle
    "remap-pending": "gpu.row_remap",
    "unable-to-determine-device-handle": "gpu.lost",
    "fabric-h100-sxm-vm-570.195.03-state-in-progress": "gpu.fabric",
    "mining-pcie-x1-of-x16": "gpu.pcie.link",
}


@pytest.mark.corpus
@pytest.mark.parametrize("path", corpus_params("nvidia-smi", "q-*") + corpus_params("nvidia-smi", "error-*"))
def test_corpus_recordings_as_bundles(tmp_path, path):
    # (summary-* tables are not a bundle format: the parser refuses them, tested in tests/parsers)
    bundle = tmp_path / "b"
    bundle.mkdir()
    target = "nvidia-smi-q-x.xml" if path.suffix == ".xml" else "nvidia-smi-q.txt"
    (bundle / target).write_bytes(path.read_bytes())
    proc = healthcheck("check", "--bundle", str(bundle), "--format", "json", "--only", "gpu.*")
    assert proc.returncode in (0, 1), proc.stderr
    assert "Traceback" not in proc.stderr
    failing = {r["check"] for r in json.loads(proc.stdout)["results"] if r["status"] == "fail"}
    expected = [check for fragment, check in CORPUS_FAULTS.items() if fragment in path.name]
    for check in expected:
        assert check in failing, (path.name, failing)
    if not expected and "healthy" in path.name:
        assert not failing, (path.name, failing)


NVLINK = FIXTURES / "nvlink"


def _xml_bundle(tmp_path: Path, status: str | None, errors: str | None) -> Path:
    bundle = tmp_path / "nv"
    bundle.mkdir()
    (bundle / "nvidia-smi-q-x.xml").write_text(HEALTHY_XML.read_text())
    if status is not None:
        (bundle / "nvidia-smi-nvlink-status.txt").write_text(status)
    if errors is not None:
        (bundle / "nvidia-smi-nvlink-e.txt").write_text(errors)
    return bundle


def test_nvlink_recordings_complete_nvidia_smi_bundles(tmp_path):
    bundle = _xml_bundle(tmp_path, (NVLINK / "nvlink-s-h100x8-gpu3-link5-inactive.txt").read_text(),
                         (NVLINK / "nvlink-e-h100x8-gpu5-link11-replay-crc.txt").read_text())
    snap = snapshot_from_bundle(bundle)
    assert all(g.nvlinks is not None and len(g.nvlinks) == 18 for g in snap.gpus)
    exp = loads('[defaults]\nnvlinks_per_gpu = 18\n').expectations_for("x")
    verdict = judge(snap, exp, only=["gpu.nvlink.*"])
    by = statuses(verdict)
    assert by[("gpu.nvlink.state", "gpu3")] is Status.FAIL
    assert by[("gpu.nvlink.state", "gpu0")] is Status.PASS
    assert by[("gpu.nvlink.errors", "gpu5")] is Status.WARN  # recovery errors: link retrained
    assert by[("gpu.nvlink.errors", "gpu0")] is Status.PASS


def test_without_nvlink_recordings_nvlink_checks_skip(tmp_path):
    verdict = judge(snapshot_from_bundle(_xml_bundle(tmp_path, None, None)), default_expectations(),
                    only=["gpu.nvlink.*"])
    assert {f.status for f in verdict.findings} == {Status.SKIP}


def test_unreadable_nvlink_recording_is_an_error_not_a_skip(tmp_path):
    snap = snapshot_from_bundle(_xml_bundle(tmp_path, "garbage\n", None))
    assert "gpus.nvlink" in snap.probe_errors and len(snap.gpus) == 8
    verdict = judge(snap, default_expectations(), only=["gpu.nvlink.*"])
    assert {f.status for f in verdict.findings} == {Status.ERROR}
    assert "nvidia-smi-nvlink-status.txt" in verdict.findings[0].message


def test_cli_bundle_services_come_from_the_nodes_class(tmp_path, node):
    path, _ = collect_bundle(str(tmp_path / "b"), options=node)
    cfg = tmp_path / "site.toml"
    cfg.write_text('[class.h100]\nnodes = "gpu[001-128]"\nservices = ["slurmd", "nv-fabricmanager"]\n')
    proc = healthcheck("check", "--bundle", str(path), "--config", str(cfg), "--format", "json",
                       "--only", "host.services")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    results = {r["component"]: r["status"] for r in json.loads(proc.stdout)["results"]}
    assert results == {"slurmd": "pass", "nv-fabricmanager": "fail"}
