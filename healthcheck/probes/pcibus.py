"""NVIDIA GPUs on the PCI bus, from sysfs alone (os calls only: every prolog reads it, on every node,
before deciding whether there are GPUs to ask NVML about)."""
from __future__ import annotations

import os

from ..core.model import normalize_pci_bus_id

NVIDIA_VENDOR = "0x10de"
# PCI class codes: 0x0300xx VGA-compatible controller, 0x0302xx 3D controller (all data-centre GPUs).
# NVSwitches are 0x0680xx (bridge, other) and must not count as GPUs.
GPU_CLASS_PREFIXES = ("0x0300", "0x0302")


def nvidia_gpu_present(sysfs_root: str | os.PathLike = "/sys") -> list[str]:
    """PCI addresses ("0000:07:00.0") of NVIDIA GPUs on the PCI bus, sorted; [] when none or no sysfs.

    Reads ``bus/pci/devices/*/vendor`` (``0x10de``) and ``class`` (``0x030000`` VGA or ``0x030200`` 3D
    controller). Independent of the NVIDIA driver: a GPU that fell off NVML's view still shows here.
    Plain os calls: every prolog reads it, on every node.
    """
    devices = os.path.join(os.fspath(sysfs_root), "bus", "pci", "devices")
    found: list[str] = []
    try:
        names = os.listdir(devices)
    except OSError:
        return []
    for name in names:
        try:
            with open(os.path.join(devices, name, "vendor")) as fh:
                vendor = fh.read().strip().lower()
            if vendor != NVIDIA_VENDOR:
                continue
            with open(os.path.join(devices, name, "class")) as fh:
                pci_class = fh.read().strip().lower()
        except OSError:
            continue
        if pci_class.startswith(GPU_CLASS_PREFIXES):
            found.append(normalize_pci_bus_id(name) or name)
    return sorted(found)
