"""Issue 32.2: the device decides. A block error on an optical, floppy, loop, RAM or virtual-media
device never drains; one on a disk that backs a mount or swap (or an NVMe the class expects) FAILs naming
it; one on a disk the node shows unused WARNs. A module event on an HCA port FAILs only where the class
expects that port up; a NIC transmit timeout WARNs on a management NIC and FAILs on an expected HCA port.
The facts come from a sysfs/procfs fixture tree through the probe (``probes.blockdevs``)."""
from __future__ import annotations

import os
from pathlib import Path

from healthcheck.checks.host_events import host_events
from healthcheck.config import default_expectations
from healthcheck.core.expectations import IbPortExpect
from healthcheck.core.model import IbPort, Snapshot, Status
from healthcheck.parsers.host_events import parse_host_events
from healthcheck.probes.blockdevs import annotate_block_events, describe_block_device
from healthcheck.policies.host_events import load_host_event_policy

FAIL, WARN, PASS = Status.FAIL, Status.WARN, Status.PASS
AZURE_SR0 = """\
[    5.114327] sr 0:0:0:2: [sr0] tag#0 FAILED Result: hostbyte=DID_OK driverbyte=DRIVER_SENSE
[    5.114336] I/O error, dev sr0, sector 0 op 0x0:(READ) flags 0x80700 phys_seg 1 prio class 0
[    5.114342] Buffer I/O error on dev sr0, logical block 0, async page read
"""


def _disk(sys: Path, name: str, vendor: str = "ATA", model: str = "SAMSUNG MZ7L3", removable: str = "0",
          parts: tuple[str, ...] = (), holders: dict[str, list[str]] | None = None) -> None:
    real = sys / "devices" / "block" / name
    (real / "device").mkdir(parents=True)
    (real / "device" / "vendor").write_text(vendor + "\n")
    (real / "device" / "model").write_text(model + "\n")
    (real / "removable").write_text(removable + "\n")
    (real / "holders").mkdir()
    links = sys / "class" / "block"
    links.mkdir(parents=True, exist_ok=True)
    os.symlink(real, links / name)
    for part in parts:
        (real / part / "holders").mkdir(parents=True)
        (real / part / "partition").write_text("1\n")
        os.symlink(real / part, links / part)
        for holder in (holders or {}).get(part, []):
            (real / part / "holders" / holder).mkdir()


def _dm(sys: Path, name: str, dm_name: str) -> None:
    real = sys / "devices" / "virtual" / "block" / name
    (real / "dm").mkdir(parents=True)
    (real / "dm" / "name").write_text(dm_name + "\n")
    (real / "holders").mkdir()
    os.symlink(real, sys / "class" / "block" / name)


def _node(tmp_path: Path, mounts: str, swaps: str = "") -> tuple[str, str, str]:
    sys, proc, dev = tmp_path / "sys", tmp_path / "proc", tmp_path / "dev"
    (proc / "self").mkdir(parents=True)
    (proc / "self" / "mounts").write_text(mounts)
    (proc / "swaps").write_text("Filename\tType\tSize\tUsed\tPriority\n" + swaps)
    dev.mkdir()
    _disk(sys, "sr0", vendor="Msft", model="Virtual CD/ROM", removable="1")
    _disk(sys, "sda", parts=("sda1", "sda2"), holders={"sda2": ["dm-0"]})
    _dm(sys, "dm-0", "vg-root")
    _disk(sys, "sdb", model="Virtual HDisk0", vendor="AMI")
    _disk(sys, "sdc", parts=("sdc1",))
    _disk(sys, "sdd")
    return str(sys), str(proc), str(dev)


MOUNTS = ("/dev/mapper/vg-root / ext4 rw,relatime 0 0\n/dev/sda1 /boot ext4 rw 0 0\n"
          "/dev/sdc1 /data\\040disk xfs rw 0 0\nproc /proc proc rw 0 0\n")


def _judge(text: str, tmp_path: Path | None = None, exp=None, ib_ports=None, mounts: str = MOUNTS):
    events = parse_host_events(text)
    if tmp_path is not None:
        sys, proc, dev = _node(tmp_path, mounts)
        block = frozenset(r.event_class for r in load_host_event_policy().rules.values() if r.device == "block")
        annotate_block_events(events, block, sys, proc, dev)
    snap = Snapshot(node="n", taken_at="", source="live", kernel_events=events, ib_ports=ib_ports)
    return host_events(snap, exp or default_expectations(), {})


def test_the_probe_reads_disk_partition_stack_mounts_and_model(tmp_path):
    sys, proc, dev = _node(tmp_path, MOUNTS, swaps="/dev/sdd\tpartition\t1024\t0\t-2\n")
    assert describe_block_device("sr0", sys, proc, dev) == {
        "present": True, "disk": "sr0", "vendor_model": "Msft Virtual CD/ROM", "removable": True, "used_by": []}
    sda = describe_block_device("sda", sys, proc, dev)
    assert sda["used_by"] == ["/", "/boot"]  # / through dm-0 (vg-root) on sda2, /boot on sda1
    assert describe_block_device("sdc1", sys, proc, dev)["disk"] == "sdc"
    assert describe_block_device("sdc1", sys, proc, dev)["used_by"] == ["/data disk"]
    assert describe_block_device("sdd", sys, proc, dev)["used_by"] == ["swap"]
    assert describe_block_device("sdz", sys, proc, dev) == {"present": False}


def test_a_provisioning_cdrom_is_a_line_never_a_drain(tmp_path):
    findings = _judge(AZURE_SR0)  # a recorded log: the name alone decides
    assert [(f.component, f.status) for f in findings] == [("sr0", PASS)]
    assert "not drained: optical drive" in findings[0].message
    live = _judge(AZURE_SR0, tmp_path)
    assert [f.status for f in live] == [PASS]


def test_loop_ram_zram_and_floppy_never_drain():
    for dev in ("loop3", "ram0", "zram0", "fd0"):
        findings = _judge(f"[9.0] Buffer I/O error on dev {dev}, logical block 0, async page read\n")
        assert [f.status for f in findings] == [PASS], dev
    # a name that only starts like one is a disk
    assert [f.status for f in _judge("[9.0] I/O error, dev srv0x, sector 8\n")] == [FAIL]


def test_virtual_media_by_its_model_never_drains(tmp_path):
    findings = _judge("[9.0] I/O error, dev sdb, sector 0 op 0x0:(READ)\n", tmp_path)
    assert [f.status for f in findings] == [PASS] and "virtual media (AMI Virtual HDisk0)" in findings[0].message


def test_a_disk_in_use_fails_naming_what_it_backs(tmp_path):
    findings = _judge("[9.0] print_req_error: I/O error, dev sda, sector 2048\n", tmp_path)
    assert [f.status for f in findings] == [FAIL] and "backs /, /boot" in findings[0].message
    findings = _judge("[9.0] Buffer I/O error on dev sdc1, logical block 7, async page read\n", tmp_path / "2")
    assert [f.status for f in findings] == [FAIL] and "backs /data disk" in findings[0].message


def test_an_unused_disk_warns_and_a_vanished_one_fails(tmp_path):
    findings = _judge("[9.0] I/O error, dev sdd, sector 8\n", tmp_path)
    assert [f.status for f in findings] == [WARN] and "backs no mount" in findings[0].message
    findings = _judge("[9.0] I/O error, dev sdq, sector 8\n", tmp_path / "other")  # gone from sysfs
    assert [f.status for f in findings] == [FAIL]


def test_an_nvme_the_class_expects_fails_even_unmounted(tmp_path):
    exp = default_expectations()
    exp = type(exp)(**{**{f: getattr(exp, f) for f in exp.__dataclass_fields__}, "nvme_count": 2})
    findings = _judge("[9.0] I/O error, dev nvme1n1, sector 8\n", None, exp=exp)
    assert [f.status for f in findings] == [FAIL] and "storage.nvme_count" in findings[0].message


UNPLUG = "[5.0] mlx5_core 0000:21:00.1: Port module event: module 1, Cable unplugged\n"


def _ports(*, second_pci: str = "0000:21:00.1"):
    return [IbPort("mlx5_0", 1, "ACTIVE", "LinkUp", 400.0, "InfiniBand", pci_bus_id="0000:21:00.0"),
            IbPort("mlx5_1", 1, "DOWN", "Disabled", None, "InfiniBand", pci_bus_id=second_pci)]


def _with(exp, **changes):
    fields = {f: getattr(exp, f) for f in exp.__dataclass_fields__}
    return type(exp)(**{**fields, **changes})


def test_an_unused_hca_port_unplugged_at_boot_is_a_line():
    findings = _judge(UNPLUG, ib_ports=_ports())
    assert [f.status for f in findings] == [PASS], [f.message for f in findings]
    assert "mlx5_1:1 is not expected up" in findings[0].message
    exp = _with(default_expectations(), ib_per_port={"mlx5_0:1": IbPortExpect(active=True),
                                                     "mlx5_1:1": IbPortExpect(active=False)})
    assert [f.status for f in _judge(UNPLUG, exp=exp, ib_ports=_ports())] == [PASS]


def test_an_expected_hca_port_unplugged_fails_and_unknown_ports_keep_the_class_severity():
    exp = _with(default_expectations(), ib_per_port={"mlx5_1:1": IbPortExpect(active=True)})
    findings = _judge(UNPLUG, exp=exp, ib_ports=_ports())
    assert [f.status for f in findings] == [FAIL] and "mlx5_1:1 is expected up" in findings[0].message
    assert [f.status for f in _judge(UNPLUG, exp=_with(default_expectations(), ib_devices=("mlx5_1",)),
                                     ib_ports=_ports())] == [FAIL]
    assert [f.status for f in _judge(UNPLUG)] == [FAIL]  # no port readings (a bare log): as the class says


def test_a_tx_timeout_warns_on_a_management_nic_and_fails_on_an_expected_hca_port():
    mgmt = "[9.0] igb 0000:05:00.0 eno1: Detected Tx Unit Hang\n"
    assert [f.status for f in _judge(mgmt, ib_ports=_ports())] == [WARN]
    hca = "[9.0] mlx5_core 0000:21:00.0 ens1np0: TX timeout detected\n"
    exp = _with(default_expectations(), ib_devices=("mlx5_0",))
    findings = _judge(hca, exp=exp, ib_ports=_ports())
    assert [f.status for f in findings] == [FAIL] and "mlx5_0:1 is expected up" in findings[0].message
    assert [f.status for f in _judge(hca, ib_ports=_ports())] == [WARN]  # nobody expects it


def test_the_live_snapshot_carries_the_device_facts_only_where_a_block_event_was_logged(tmp_path):
    from healthcheck.probes.live import LiveOptions, snapshot_live

    sys, proc, dev = _node(tmp_path, MOUNTS)
    log = AZURE_SR0 + "[10.0] print_req_error: I/O error, dev sda, sector 2048\n[11.0] EDAC MC0: 1 CE x\n"
    opts = LiveOptions(sysfs_root=sys, proc_root=proc, dev_root=dev, kernel_log=lambda: log)
    snap = snapshot_live(opts, "2026-12-06T00:00:00Z", frozenset({"kernel_events"}))
    infos = {ev.device: ev.device_info for ev in snap.kernel_events}
    assert infos["sr0"]["vendor_model"] == "Msft Virtual CD/ROM" and infos["sda"]["used_by"] == ["/", "/boot"]
    assert infos["MC0"] is None  # not a block event: nothing read
    findings = host_events(snap, default_expectations(), {})
    assert {(f.component, f.status) for f in findings} == {("sr0", PASS), ("sda", FAIL), ("MC0", WARN)}
    again = Snapshot.from_dict(snap.to_dict())  # the spool and bundles keep the facts
    assert [ev.device_info for ev in again.kernel_events] == [ev.device_info for ev in snap.kernel_events]


def test_with_a_zfs_pool_mounted_an_unmounted_disk_is_not_called_unused(tmp_path):
    """A ZFS pool's member disks appear in no mount (the pool is mounted by name): an error on one still
    FAILs; a removable disk is still only a warning."""
    zfs = MOUNTS + "tank/data /data2 zfs rw,xattr 0 0\n"
    findings = _judge("[9.0] I/O error, dev sdd, sector 8\n", tmp_path, mounts=zfs)
    assert [f.status for f in findings] == [FAIL] and "ZFS pools are mounted" in findings[0].message
