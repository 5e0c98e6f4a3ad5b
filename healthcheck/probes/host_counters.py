"""Host error counters the kernel keeps in sysfs: EDAC memory controllers and PCIe AER, read from
``<sysfs_root>`` (os only: this runs in the prolog and the epilog too).

EDAC (Linux Documentation/admin-guide/ras.rst, ABI sysfs-devices-edac)::

    devices/system/edac/mc/mc<N>/{ce_count,ue_count,ce_noinfo_count,ue_noinfo_count,mc_name,
                                  seconds_since_reset}
    devices/system/edac/mc/mc<N>/{dimm,rank}<M>/{dimm_label,dimm_ce_count,dimm_ue_count}

The counts run since the EDAC driver loaded or ``reset_counters`` was written, ``seconds_since_reset``
ago: a window the kernel keeps itself, so a rate needs no state of ours.

PCIe AER (ABI sysfs-bus-pci-devices-aer, kernel >= 5.x)::

    bus/pci/devices/<addr>/aer_dev_{fatal,nonfatal,correctable}   "<ErrorType> <count>" lines,
                                                                  "TOTAL_ERR_FATAL <n>" the sum

counted since the device was enumerated (boot, or a hot-plug), never reset. A function without the
files has no AER capability (or the kernel lacks CONFIG_PCIEAER) and is left out.

The value parsers are pure and raise only ParseError; the probes leave an unreadable or unparsable file
out (``None``) and never raise for one controller or device.
"""
from __future__ import annotations

import os

from ..core.lazyre import Pattern
from ..core.model import EdacController, EdacDimm, PcieAer, normalize_pci_bus_id
from ..parsers import ParseError
from .pcie import device_dir, list_dir, parse_or_none, read_text, resolve_in_root

EDAC_MC = "devices/system/edac/mc"
EDAC_MC_FILES = ("ce_count", "ue_count", "ce_noinfo_count", "ue_noinfo_count", "mc_name",
                 "seconds_since_reset")
EDAC_DIMM_FILES = ("dimm_label", "dimm_ce_count", "dimm_ue_count")
AER_FILES = ("aer_dev_fatal", "aer_dev_nonfatal", "aer_dev_correctable")
# what a bundle records of a function with AER counters, so that it can be named and classified
AER_ID_FILES = ("vendor", "device", "class")
MAX_COUNT = 2 ** 64

# PCI base class / subclass (sysfs "class" >> 8) -> what the function is. Vendor-specific kinds
# (NVIDIA GPUs and NVSwitches, Mellanox HCAs) come first, from probes.pcie.classify_pci.
_CLASS_KINDS = {
    0x0108: "nvme", 0x0106: "sata", 0x0107: "sas", 0x0104: "raid", 0x0100: "scsi",
    0x0200: "nic", 0x0207: "hca", 0x0300: "gpu", 0x0302: "gpu", 0x0600: "host bridge",
    0x0604: "bridge", 0x0880: "system device", 0x0c03: "usb", 0x1200: "accelerator",
}
_BASE_KINDS = {0x01: "storage", 0x02: "network", 0x03: "display", 0x06: "bridge", 0x0C: "serial bus"}


def parse_count(text: str) -> int:
    """A counter file: a non-negative decimal integer."""
    if not isinstance(text, str):
        raise ParseError(f"counter: expected text, got {type(text).__name__}")
    value = text.strip()
    if not value.isascii() or not value.isdigit() or len(value) > 24:
        raise ParseError(f"counter: not a non-negative integer: {value[:40]!r}")
    return int(value)


# The file as the kernel writes it: "<NAME> <count>" lines, one space, a newline between them (the text is
# stripped): read with one expression; anything else goes through the line-by-line reading, whose
# answer for such a file is the same (tests/checks/test_host_counters.py compares them).
_AER_FILE = Pattern(r"(?:[!-~]+ [0-9]{1,24}\n)*[!-~]+ [0-9]{1,24}")
_AER_LINE = Pattern(r"([!-~]+) ([0-9]{1,24})")


def parse_aer(text: str) -> dict[str, int]:
    """An ``aer_dev_*`` file -> {error type: count}, the ``TOTAL_ERR_*`` line included as is.

    ``"DLP 0\\nSDES 0\\n...\\nTOTAL_ERR_FATAL 2"`` -> {"DLP": 0, ..., "TOTAL_ERR_FATAL": 2}. A line that
    is not ``<name> <count>``, or a file without any: ParseError."""
    if not isinstance(text, str):
        raise ParseError(f"AER counters: expected text, got {type(text).__name__}")
    if _AER_FILE.fullmatch(text):
        return {name: int(count) for name, count in _AER_LINE.findall(text)}
    out: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), 1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 2 or not parts[1].isascii() or not parts[1].isdigit() or len(parts[1]) > 24:
            raise ParseError(f"AER counters line {number}: expected '<error> <count>', got {line[:60]!r}")
        out[parts[0]] = int(parts[1])
    if not out:
        raise ParseError("AER counters: empty")
    return out


def pci_kind(vendor: str | None, pci_class: str | None) -> str | None:
    """What a PCI function is, from its vendor and class: gpu, nvswitch, hca (NVIDIA/Mellanox by
    vendor), else by class: nvme, nic, bridge (a root or switch port), ...; None when unknown."""
    if pci_class is None:
        return None
    from .pcie import classify_pci

    try:
        known = classify_pci(vendor, pci_class) if vendor is not None else None
        klass = int(pci_class.strip(), 16) >> 8
    except (ParseError, ValueError):
        return None
    if known is not None:
        return known
    return _CLASS_KINDS.get(klass) or _BASE_KINDS.get(klass >> 8)


def _natural(name: str):
    digits = "".join(c for c in name if c.isdigit())
    return (name.rstrip("0123456789"), int(digits) if digits else -1, name)


def probe_edac(sysfs_root: str = "/sys") -> list[EdacController]:
    """Every EDAC memory controller; [] when there is none (no EDAC driver for this platform, or it
    is not loaded: then memory errors are only in the kernel log)."""
    base = resolve_in_root(os.path.abspath(sysfs_root), EDAC_MC)
    controllers = []
    for name in sorted((n for n in list_dir(base) if n.startswith("mc") and n[2:].isdigit()), key=_natural):
        folder = os.path.join(base, name)

        def count(file: str, where: str = folder):
            return parse_or_none(parse_count, read_text(os.path.join(where, file)))

        dimms = []
        for sub in sorted((n for n in list_dir(folder) if n.startswith(("dimm", "rank"))
                           and n.lstrip("dimrank").isdigit()), key=_natural):
            where = os.path.join(folder, sub)
            dimms.append(EdacDimm(sub, read_text(os.path.join(where, "dimm_label")) or None,
                                  count("dimm_ce_count", where), count("dimm_ue_count", where)))
        controllers.append(EdacController(
            name=name, mc_name=read_text(os.path.join(folder, "mc_name")) or None,
            ce_count=count("ce_count"), ue_count=count("ue_count"),
            ce_noinfo_count=count("ce_noinfo_count"), ue_noinfo_count=count("ue_noinfo_count"),
            seconds_since_reset=count("seconds_since_reset"), dimms=dimms))
    return controllers


def _function_name(dev: str) -> str | None:
    """The name sysfs gives what sits behind the function: an RDMA device, an NVMe controller, a
    network interface (the first one)."""
    for sub in ("infiniband", "nvme", "net"):
        names = list_dir(os.path.join(dev, sub))
        if names:
            return names[0]
    return None


def probe_pcie_aer(sysfs_root: str = "/sys") -> list[PcieAer]:
    """The AER counters of every PCI function that has them (root and switch ports included);
    [] when no function has any. Functions whose three files are all unreadable are left out."""
    root = os.path.abspath(sysfs_root)
    base = resolve_in_root(root, "bus/pci/devices")
    out: list[PcieAer] = []
    for addr in list_dir(base):
        dev = device_dir(root, base, addr)
        first = read_text(os.path.join(dev, AER_FILES[0]))
        if first is None and not any(os.path.exists(os.path.join(dev, f)) for f in AER_FILES[1:]):
            continue  # no AER capability: one failed open (or three) for the function
        counts = [parse_or_none(parse_aer, first)] + \
            [parse_or_none(parse_aer, read_text(os.path.join(dev, f))) for f in AER_FILES[1:]]
        if all(c is None for c in counts):
            continue
        vendor = (read_text(os.path.join(dev, "vendor")) or "").lower() or None
        klass = (read_text(os.path.join(dev, "class")) or "").lower() or None
        out.append(PcieAer(
            pci_bus_id=normalize_pci_bus_id(addr) or addr, vendor=vendor,
            device=(read_text(os.path.join(dev, "device")) or "").lower() or None, pci_class=klass,
            kind=pci_kind(vendor, klass), name=_function_name(dev),
            fatal=counts[0], nonfatal=counts[1], correctable=counts[2]))
    return out
