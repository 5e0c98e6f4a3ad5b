"""InfiniBand / RoCE ports, read from ``<sysfs_root>/class/infiniband`` (no ibstat, no MAD traffic).

Layout read (kernel Documentation/infiniband/sysfs.txt, ABI sysfs-class-infiniband)::

    class/infiniband/<dev>/fw_ver            "28.39.1002"
    class/infiniband/<dev>/hca_type          "MT4129"
    class/infiniband/<dev>/board_id          "MT_0000000838"   (the PSID: board variant + firmware image)
    class/infiniband/<dev>/device  -> ../../../0000:1a:00.0    (the PCI function)
    class/infiniband/<dev>/ports/<n>/state       "4: ACTIVE"
    class/infiniband/<dev>/ports/<n>/phys_state  "5: LinkUp"
    class/infiniband/<dev>/ports/<n>/rate        "400 Gb/sec (4X NDR)"
    class/infiniband/<dev>/ports/<n>/link_layer  "InfiniBand" | "Ethernet"
    class/infiniband/<dev>/ports/<n>/counters/*     PortCounters (symbol_error, link_downed, ...)
    class/infiniband/<dev>/ports/<n>/hw_counters/*  driver counters (mlx5: out_of_buffer, ...) -> "hw_*"

The value parsers are pure and raise only ParseError; the probe makes an unreadable or unparsable file
``None`` (or leaves the counter out) and never raises for one device or port.
"""
from __future__ import annotations

import os

from ..core.lazyre import Pattern
from ..core.model import IbPort, normalize_pci_bus_id
from ..parsers import ParseError
from .pcie import list_dir, parse_or_none, read_text, resolve_in_root

# "4: ACTIVE", "1: DOWN", "2: INIT", "3: ARMED", "5: ACTIVE_DEFER"; phys_state "5: LinkUp",
# "2: Polling", "3: Disabled", "7: Phy Test" (the name may contain spaces).
_STATE_RE = Pattern(r"^(\d+)\s*:\s*(\S(?:.*\S)?)$")
# "400 Gb/sec (4X NDR)", "10 Gb/sec (4X)" (SDR prints no speed name), "2.5 Gb/sec (1X SDR)",
# "56 Gb/sec (4X FDR)", "25 Gb/sec (1X EDR)"; the parenthesised part is optional.
_RATE_RE = Pattern(r"(?i)^(\d+(?:\.\d+)?)\s*Gb/sec(?:\s*\(.*\))?$")
# hw_counters files that are settings, not counters.
_HW_NOT_COUNTERS = frozenset({"lifespan"})
# "0000:1a:00.0" (sysfs always prints the 4-digit domain; wider domains appear on Hyper-V / VMD).
_PCI_ADDR_RE = Pattern(r"^[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")
_WORD_RE = Pattern(r"[A-Za-z][A-Za-z_ ]*")
_DIGITS_RE = Pattern(r"(\d+)")


def parse_port_state(text: str) -> str:
    """``state`` file -> "ACTIVE" / "DOWN" / "INIT" / "ARMED" / "ACTIVE_DEFER" (upper-case, numeric
    prefix dropped). A bare name without the ``N:`` prefix (some bundles) is accepted too."""
    return _parse_numbered(text, "port state").upper()


def parse_phys_state(text: str) -> str:
    """``phys_state`` file -> "LinkUp" / "Polling" / "Disabled" / ... (case as the kernel prints it)."""
    return _parse_numbered(text, "physical state")


def _parse_numbered(text: str, what: str) -> str:
    if not isinstance(text, str):
        raise ParseError(f"{what}: expected text, got {type(text).__name__}")
    value = text.strip()
    match = _STATE_RE.match(value)
    if match:
        return match.group(2)
    if value and _WORD_RE.fullmatch(value):
        return value
    raise ParseError(f"{what}: cannot parse {value[:60]!r} (expected e.g. '4: ACTIVE')")


def parse_rate(text: str) -> float:
    """``rate`` file -> Gb/s: ``"400 Gb/sec (4X NDR)"`` -> 400.0, ``"2.5 Gb/sec (1X SDR)"`` -> 2.5."""
    if not isinstance(text, str):
        raise ParseError(f"port rate: expected text, got {type(text).__name__}")
    value = text.strip()
    match = _RATE_RE.match(value)
    if not match:
        raise ParseError(f"port rate: cannot parse {value[:60]!r} (expected e.g. '400 Gb/sec (4X NDR)')")
    return float(match.group(1))


def parse_counter(text: str) -> int:
    """A counter file: a non-negative decimal integer (``"0"``, ``"18446744073709551615"``)."""
    if not isinstance(text, str):
        raise ParseError(f"counter: expected text, got {type(text).__name__}")
    value = text.strip()
    if not value.isascii() or not value.isdigit() or len(value) > 24:
        raise ParseError(f"counter: not a non-negative integer: {value[:40]!r}")
    return int(value)


def _natural_key(name: str):
    """mlx5_2 < mlx5_10; ports "1" < "2"."""
    return [int(p) if p.isdigit() else p for p in _DIGITS_RE.split(name)]


def _pci_address(devdir: str, root: str, relpath: str) -> str | None:
    """PCI address of the HCA: basename of the ``device`` link target (live sysfs), else the
    ``PCI_SLOT_NAME=`` line of ``device/uevent`` (a copy that kept the link as a folder), else the
    ``bus/pci/devices/<addr>`` whose ``infiniband/<dev>`` folder exists (bundles: no links at all)."""
    link = os.path.join(devdir, "device")
    if os.path.islink(link):
        target = os.path.basename(resolve_in_root(root, relpath + "/device"))
        if _PCI_ADDR_RE.match(target):
            return normalize_pci_bus_id(target)
    uevent = read_text(os.path.join(resolve_in_root(root, relpath + "/device"), "uevent"))
    for line in (uevent or "").splitlines():
        if line.startswith("PCI_SLOT_NAME="):
            return normalize_pci_bus_id(line.split("=", 1)[1])
    # A bundle copies files, not links: find the PCI function whose infiniband/ folder names us.
    dev = os.path.basename(relpath)
    pci_devices = resolve_in_root(root, "bus/pci/devices")
    for addr in list_dir(pci_devices):
        if os.path.isdir(os.path.join(resolve_in_root(root, f"bus/pci/devices/{addr}"), "infiniband", dev)):
            return normalize_pci_bus_id(addr)
    return None


def _read_counters(folder: str, prefix: str = "", skip: frozenset[str] = frozenset()) -> dict[str, int]:
    counters: dict[str, int] = {}
    for name in list_dir(folder):
        if name in skip:
            continue
        value = parse_or_none(parse_counter, read_text(os.path.join(folder, name)))
        if value is not None:
            counters[prefix + name] = value
    return counters


def probe_ib_ports(sysfs_root: str = "/sys", *, counters: bool = True) -> list[IbPort]:
    """Every port of every RDMA device under ``class/infiniband``; [] when that class is absent
    (no HCA, or the RDMA core module not loaded). ``counters=False`` skips the ~30 counter files per
    port (what the prolog needs: state and rate only)."""
    root = os.path.abspath(sysfs_root)
    base = resolve_in_root(root, "class/infiniband")
    if not os.path.isdir(base):
        return []
    ports: list[IbPort] = []
    for dev in sorted(list_dir(base), key=_natural_key):
        rel = f"class/infiniband/{dev}"
        devdir = resolve_in_root(root, rel)
        firmware = read_text(os.path.join(devdir, "fw_ver")) or None
        hca_type = read_text(os.path.join(devdir, "hca_type")) or None
        board_id = read_text(os.path.join(devdir, "board_id")) or None
        pci = _pci_address(devdir, root, rel)
        ports_dir = os.path.join(devdir, "ports")
        for name in sorted((n for n in list_dir(ports_dir) if n.isascii() and n.isdigit()), key=int):
            pdir = os.path.join(ports_dir, name)
            values: dict[str, int] = {}
            if counters:
                values = _read_counters(os.path.join(pdir, "counters"))
                values.update(_read_counters(os.path.join(pdir, "hw_counters"), "hw_", _HW_NOT_COUNTERS))
            ports.append(IbPort(
                device=dev,
                port=int(name),
                state=parse_or_none(parse_port_state, read_text(os.path.join(pdir, "state"))),
                phys_state=parse_or_none(parse_phys_state, read_text(os.path.join(pdir, "phys_state"))),
                rate_gbps=parse_or_none(parse_rate, read_text(os.path.join(pdir, "rate"))),
                link_layer=read_text(os.path.join(pdir, "link_layer")) or None,
                firmware=firmware,
                hca_type=hca_type,
                pci_bus_id=pci,
                counters=values,
                board_id=board_id,
            ))
    return ports
