"""PCIe sysfs probe: value parsers (fed real sysfs lines from the corpus) and the tree walk."""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from healthcheck.parsers import ParseError
from healthcheck.probes.pcie import (
    classify_pci,
    parse_link_speed,
    parse_link_width,
    probe_pcie_links,
    resolve_in_root,
)
from tests.conftest import corpus_params
from tests.fixtures.sysfs_builder import GPU_ADDRS, HCA_ADDRS, NVSWITCH_ADDRS, SysfsFaults, build_sysfs
from tests.fuzzing import spliced

# ------------------------------------------------------------------------------- value parsers


@pytest.mark.parametrize("text, expected", [
    ("16.0 GT/s PCIe\n", 16.0),  # kernel >= 5.2
    ("32.0 GT/s PCIe", 32.0),
    ("64.0 GT/s PCIe", 64.0),
    ("2.5 GT/s PCIe", 2.5),
    ("8 GT/s", 8.0),  # older kernels
    ("5 GT/s\n", 5.0),
    ("2.5 GT/s", 2.5),
    ("8.0GT/s", 8.0),  # lspci / pp_dpm_pcie spelling
    ("Unknown", None),  # kernel >= 5.2, no link
    ("Unknown speed\n", None),  # older kernels
])
def test_parse_link_speed(text, expected):
    assert parse_link_speed(text) == expected


@pytest.mark.parametrize("text", ["", "fast", "GT/s", "16.0 Gb/s", "0 GT/s", "-8 GT/s", "16.0 GT/s PCIe x16"])
def test_parse_link_speed_rejects(text):
    with pytest.raises(ParseError):
        parse_link_speed(text)


@pytest.mark.parametrize("text, expected", [
    ("16\n", 16), ("8", 8), ("1", 1), ("2", 2), ("32", 32), ("x16", 16),
    ("0", None),  # link down / not trained
    ("255", None), ("63", None),  # all-ones config read: device not answering
    ("3", None),  # not a PCIe lane count
])
def test_parse_link_width(text, expected):
    assert parse_link_width(text) == expected


@pytest.mark.parametrize("text", ["", "sixteen", "-1", "16.0", "x", "1 6", "99999"])
def test_parse_link_width_rejects(text):
    with pytest.raises(ParseError):
        parse_link_width(text)


@pytest.mark.parametrize("vendor, klass, kind", [
    ("0x10de\n", "0x030200\n", "gpu"),  # H100 SXM: 3D controller
    ("0x10de", "0x030000", "gpu"),  # VGA controller
    ("0x10de", "0x068000", "nvswitch"),
    ("0x15b3", "0x020700", "hca"),  # ConnectX, InfiniBand mode
    ("0x15b3", "0x020000", "hca"),  # ConnectX, Ethernet mode
    ("0x10de", "0x040300", None),  # the GPU's HD-audio function
    ("0x15b3", "0x060400", None),  # BlueField's PCIe bridge
    ("0x8086", "0x020000", None),  # Intel NIC
    ("0x10DE", "0x030200", "gpu"),
])
def test_classify_pci(vendor, klass, kind):
    assert classify_pci(vendor, klass) == kind


def test_classify_pci_rejects_garbage():
    with pytest.raises(ParseError):
        classify_pci("nvidia", "0x030200")


# -------------------------------------------------------------------- real sysfs lines (corpus)


def _sysfs_values(text: str) -> list[tuple[str, str]]:
    """(attribute, value) pairs from a quoted `find ... -print -exec cat {} \\;` transcript."""
    lines = [re.sub(r"^>\s?", "", line).rstrip() for line in text.splitlines()]
    pairs = []
    for path, value in zip(lines, lines[1:]):
        match = re.match(r"^/sys/\S+/(current_link_\w+|max_link_\w+)$", path)
        if match:
            pairs.append((match.group(1), value))
    return pairs


@pytest.mark.parametrize("path", corpus_params("pcie", "sysfs-current_link-find-*.txt"))
def test_corpus_sysfs_link_values(path: Path):
    pairs = _sysfs_values(path.read_text())
    speeds = [parse_link_speed(v) for k, v in pairs if k == "current_link_speed"]
    widths = [parse_link_width(v) for k, v in pairs if k == "current_link_width"]
    assert len(speeds) == len(widths) == 6
    assert set(widths) == {8}
    # 8.0 GT/s under load and before the VM, 2.5 GT/s when the GPU idles (ASPM / power saving).
    assert speeds == [8.0, 2.5, 8.0, 2.5, 2.5, 8.0]


# ----------------------------------------------------------------------------------- fuzzing

_REAL = ["16.0 GT/s PCIe\n", "8 GT/s", "2.5 GT/s PCIe", "Unknown", "Unknown speed", "16\n", "8", "255"]


def _mutated():
    return spliced(_REAL)


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.text(), _mutated()))
def test_parsers_only_raise_parse_error(text):
    for parser in (parse_link_speed, parse_link_width):
        try:
            result = parser(text)
        except ParseError:
            continue
        assert result is None or result > 0


# ------------------------------------------------------------------------------- tree walking


def test_probe_hgx_h100_tree(tmp_path):
    build_sysfs(tmp_path, vfs=2)
    links = probe_pcie_links(str(tmp_path))
    kinds = {k: [link for link in links if link.kind == k] for k in ("gpu", "hca", "nvswitch")}
    assert len(links) == 20  # bridges, VFs skipped
    assert [link.pci_bus_id for link in kinds["gpu"]] == sorted(GPU_ADDRS)
    assert [link.pci_bus_id for link in kinds["nvswitch"]] == list(NVSWITCH_ADDRS)
    assert sorted(link.pci_bus_id for link in kinds["hca"]) == sorted(HCA_ADDRS)
    gpu = kinds["gpu"][0]
    assert (gpu.vendor, gpu.device) == ("0x10de", "0x2330")
    assert (gpu.speed_current_gts, gpu.speed_max_gts) == (32.0, 32.0)
    assert (gpu.width_current, gpu.width_max, gpu.gen_current, gpu.name) == (16, 16, 5, None)
    names = {link.pci_bus_id: link.name for link in kinds["hca"]}
    assert names["0000:1a:00.0"] == "mlx5_0" and names["0000:dc:00.0"] == "mlx5_7"
    assert all(link.vendor == "0x15b3" for link in kinds["hca"])


def test_probe_faults(tmp_path):
    faults = SysfsFaults(gpu_width_x8=frozenset({2}), hca_gen_downgraded=frozenset({1}),
                         gpu_speed_gen1=frozenset({0}))
    build_sysfs(tmp_path, faults=faults)
    by_addr = {link.pci_bus_id: link for link in probe_pcie_links(str(tmp_path))}
    assert by_addr[GPU_ADDRS[2]].width_current == 8 and by_addr[GPU_ADDRS[2]].width_max == 16
    assert by_addr[GPU_ADDRS[0]].speed_current_gts == 2.5 and by_addr[GPU_ADDRS[0]].gen_current == 1
    hca = by_addr[HCA_ADDRS[1]]
    assert (hca.gen_current, hca.gen_max, hca.name) == (4, 5, "mlx5_1")


def test_probe_ethernet_hca_and_unknown_values(tmp_path):
    build_sysfs(tmp_path, gpus=1, hcas=0, nvswitches=0, eth_ports=2)
    gpu_dir = (tmp_path / "bus" / "pci" / "devices" / GPU_ADDRS[0]).resolve()
    (gpu_dir / "current_link_speed").write_text("Unknown\n")
    (gpu_dir / "current_link_width").write_text("0\n")
    (gpu_dir / "max_link_width").unlink()
    (gpu_dir / "max_link_width").mkdir()  # unreadable (EISDIR) -> None, no exception
    links = probe_pcie_links(str(tmp_path))
    gpu = next(link for link in links if link.kind == "gpu")
    assert (gpu.speed_current_gts, gpu.width_current, gpu.width_max) == (None, None, None)
    assert gpu.speed_max_gts == 32.0
    eth = [link for link in links if link.kind == "hca"]
    assert [link.name for link in eth] == ["mlx5_0", "mlx5_1"]


def test_probe_absent_bus(tmp_path):
    assert probe_pcie_links(str(tmp_path)) == []
    assert probe_pcie_links(str(tmp_path / "missing")) == []


def test_probe_skips_garbage_devices(tmp_path):
    build_sysfs(tmp_path, gpus=1, hcas=0, nvswitches=0)
    odd = tmp_path / "bus" / "pci" / "devices" / "0000:99:00.0"
    odd.mkdir()
    (odd / "vendor").write_text("garbage\n")
    (odd / "class").write_text("0x030200\n")
    nocls = tmp_path / "bus" / "pci" / "devices" / "0000:98:00.0"
    nocls.mkdir()
    (nocls / "vendor").write_text("0x10de\n")
    assert [link.pci_bus_id for link in probe_pcie_links(str(tmp_path))] == [GPU_ADDRS[0]]


def test_resolve_in_root_stays_inside(tmp_path):
    (tmp_path / "devices" / "pci0000:00" / "0000:00:01.0").mkdir(parents=True)
    (tmp_path / "bus").mkdir()
    os.symlink("/sys/devices/pci0000:00/0000:00:01.0", tmp_path / "bus" / "abs")  # bundle-style absolute
    os.symlink("../../../../../../etc", tmp_path / "bus" / "escape")
    os.symlink("loop", tmp_path / "bus" / "loop")
    assert resolve_in_root(str(tmp_path), "bus/abs") == str(tmp_path / "devices/pci0000:00/0000:00:01.0")
    assert resolve_in_root(str(tmp_path), "bus/escape") == str(tmp_path / "etc")
    assert resolve_in_root(str(tmp_path), "bus/loop").startswith(str(tmp_path))


def test_probe_over_bundle_copy(tmp_path):
    """A bundle holds plain files (no links): the probe reads it the same way."""
    bundle_files = pytest.importorskip("healthcheck.bundles.files")
    build_sysfs(tmp_path / "live", vfs=1, faults=SysfsFaults(hca_width_x8=frozenset({3})))
    bundle_files.copy_sys(tmp_path / "live", tmp_path / "bundle")
    live = probe_pcie_links(str(tmp_path / "live"))
    assert probe_pcie_links(str(tmp_path / "bundle")) == live
    assert len(live) == 20
