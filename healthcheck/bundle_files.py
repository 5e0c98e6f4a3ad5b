"""Which sysfs and procfs files a bundle records: exactly what the probes read, copied as plain files
(symlinks resolved, so the bundle holds no links), bounded in size."""
from __future__ import annotations

import os
from pathlib import Path

MAX_FILE_BYTES = 1024 * 1024
# PCI vendors whose devices the probes look at: NVIDIA, Mellanox/NVIDIA networking.
VENDORS = ("0x10de", "0x15b3")
PCI_FILES = ("vendor", "device", "class", "current_link_speed", "current_link_width",
             "max_link_speed", "max_link_width")
IB_DEVICE_FILES = ("fw_ver", "hca_type", "board_id", "node_guid")
IB_PORT_FILES = ("state", "phys_state", "rate", "link_layer")
MODULES = ("nvidia", "mlx5_core", "mlx_compat")
PROC_FILES = ("cpuinfo", "meminfo", "loadavg", "uptime", "mounts", "sys/kernel/osrelease",
              "driver/nvidia/version")
PROC_PID_FILES = ("comm", "status", "cmdline")


def _copy(src: Path, dst: Path) -> None:
    try:
        with open(src, "rb") as fh:
            data = fh.read(MAX_FILE_BYTES)
    except OSError:
        return  # unreadable attribute (permissions, write-only, device gone): leave it out
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_bytes(data)


def copy_sys(sys_root: Path, out: Path) -> None:
    devices = sys_root / "bus" / "pci" / "devices"
    for dev in sorted(devices.glob("*")) if devices.is_dir() else []:
        try:
            vendor = (dev / "vendor").read_text().strip()
        except OSError:
            continue
        if vendor not in VENDORS:
            continue
        target = out / "bus" / "pci" / "devices" / dev.name
        for name in PCI_FILES:
            _copy(dev / name, target / name)
        if (dev / "physfn").exists():
            (target / "physfn").mkdir(parents=True, exist_ok=True)
        for ib in (dev / "infiniband").glob("*") if (dev / "infiniband").is_dir() else []:
            (target / "infiniband" / ib.name).mkdir(parents=True, exist_ok=True)
    ib_class = sys_root / "class" / "infiniband"
    for hca in sorted(ib_class.glob("*")) if ib_class.is_dir() else []:
        target = out / "class" / "infiniband" / hca.name
        for name in IB_DEVICE_FILES:
            _copy(hca / name, target / name)
        for port in sorted((hca / "ports").glob("*")):
            for name in IB_PORT_FILES:
                _copy(port / name, target / "ports" / port.name / name)
            for group in ("counters", "hw_counters"):
                for counter in sorted((port / group).glob("*")):
                    _copy(counter, target / "ports" / port.name / group / counter.name)
    for module in MODULES:
        _copy(sys_root / "module" / module / "version", out / "module" / module / "version")


def copy_proc(proc_root: Path, out: Path) -> None:
    for name in PROC_FILES:
        _copy(proc_root / name, out / name)
    for entry in os.scandir(proc_root) if proc_root.is_dir() else []:
        if entry.name.isdigit():
            for name in PROC_PID_FILES:
                _copy(proc_root / entry.name / name, out / entry.name / name)
