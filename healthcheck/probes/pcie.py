"""PCIe link state of NVIDIA GPUs, NVSwitches and Mellanox/NVIDIA HCAs, read from sysfs.

Reads ``<sysfs_root>/bus/pci/devices/<addr>/{vendor,device,class,current_link_speed,max_link_speed,
current_link_width,max_link_width}``. ``bus/pci/devices/<addr>`` is a symlink into ``devices/pci.../``
as on a live kernel; :func:`resolve_in_root` follows such links without ever leaving ``sysfs_root``
(an absolute target ``/sys/...`` found in a copied bundle is re-rooted under ``sysfs_root``).

The value parsers (:func:`parse_link_speed`, :func:`parse_link_width`, :func:`classify_pci`) are pure and
raise only :class:`~healthcheck.parsers.ParseError`; the probe turns a ParseError or an unreadable file
into ``None`` for that field and never raises for a single device.
"""
from __future__ import annotations

import os

from ..core.lazyre import Pattern
from ..core.model import PcieLink, normalize_pci_bus_id
from ..parsers import ParseError

NVIDIA_VENDOR = 0x10DE
MELLANOX_VENDOR = 0x15B3

# PCI base class + subclass (upper 16 bits of the 24-bit class code) -> our kind, per vendor.
_KINDS = {
    (NVIDIA_VENDOR, 0x0300): "gpu",  # VGA compatible controller (PCIe consumer / workstation GPUs)
    (NVIDIA_VENDOR, 0x0302): "gpu",  # 3D controller (data-centre GPUs: A100, H100, ...)
    (NVIDIA_VENDOR, 0x0680): "nvswitch",  # "Bridge: other" is how NVSwitches enumerate
    (MELLANOX_VENDOR, 0x0207): "hca",  # InfiniBand controller (ConnectX in IB mode)
    (MELLANOX_VENDOR, 0x0200): "hca",  # Ethernet controller (ConnectX in Ethernet / RoCE mode)
}

_VENDORS = frozenset({f"0x{NVIDIA_VENDOR:04x}", f"0x{MELLANOX_VENDOR:04x}"})
# "16.0 GT/s PCIe" (kernel >= 5.2, pci_speed_string), "8 GT/s" / "5 GT/s" / "2.5 GT/s" (older kernels),
# also tolerated: "8.0GT/s" (no space, as lspci and amdgpu's pp_dpm_pcie print it).
_SPEED_RE = Pattern(r"(?i)^(\d+(?:\.\d+)?)\s*GT/s(?:\s+PCIe)?$")
# Widths a PCIe link can train to; 0 = link down / not trained, 63 and 255 = all-ones config read
# (device gone / not responding), both reported as "unknown".
_VALID_WIDTHS = frozenset({1, 2, 4, 8, 12, 16, 32})
_MAX_SYMLINK_HOPS = 40


def parse_link_speed(text: str) -> float | None:
    """``current_link_speed`` / ``max_link_speed`` content -> GT/s.

    ``"16.0 GT/s PCIe"`` -> 16.0 (kernel 5.2+); ``"8 GT/s"`` -> 8.0 (older kernels);
    ``"Unknown"`` (5.2+) / ``"Unknown speed"`` (older) -> None. Anything else: ParseError.
    """
    if not isinstance(text, str):
        raise ParseError(f"link speed: expected text, got {type(text).__name__}")
    value = text.strip()
    if value.lower() in ("unknown", "unknown speed"):
        return None
    match = _SPEED_RE.match(value)
    if not match:
        raise ParseError(f"link speed: cannot parse {value[:60]!r} (expected e.g. '16.0 GT/s PCIe')")
    speed = float(match.group(1))
    if speed <= 0 or speed > 1024:
        raise ParseError(f"link speed: implausible value {value[:60]!r}")
    return speed


def parse_link_width(text: str) -> int | None:
    """``current_link_width`` / ``max_link_width`` content (decimal lane count, e.g. ``"16"``) -> int.

    0 (link down, not trained) and 63 / 255 (all-ones config space read: the device stopped answering)
    -> None; a lane count PCIe does not define -> None as well. Not a non-negative integer: ParseError.
    Also accepts the ``x16`` spelling lspci uses.
    """
    if not isinstance(text, str):
        raise ParseError(f"link width: expected text, got {type(text).__name__}")
    value = text.strip()
    if value[:1] in ("x", "X"):
        value = value[1:]
    if not value.isascii() or not value.isdigit() or len(value) > 4:
        raise ParseError(f"link width: cannot parse {text.strip()[:60]!r} (expected e.g. '16')")
    width = int(value)
    return width if width in _VALID_WIDTHS else None


def _parse_hex(text: str, what: str) -> int:
    value = text.strip()
    try:
        return int(value, 16)
    except ValueError:
        raise ParseError(f"{what}: not a hex number: {value[:40]!r}") from None


def classify_pci(vendor: str, class_code: str) -> str | None:
    """``vendor`` ("0x10de") and ``class`` ("0x030200") sysfs contents -> "gpu" | "nvswitch" | "hca"
    | None (a device we do not judge, e.g. the GPU's HD-audio function or a PCIe bridge)."""
    vendor_id = _parse_hex(vendor, "PCI vendor")
    klass = _parse_hex(class_code, "PCI class")
    return _KINDS.get((vendor_id, klass >> 8))


# --------------------------------------------------------------------------------- sysfs walking


def resolve_in_root(root: str, relpath: str) -> str:
    """Resolve ``relpath`` (relative to ``root``) following symlinks, never escaping ``root``.

    Relative link targets (what the kernel creates: ``../../../devices/pci0000:00/...``) are followed
    from the link's directory; ``..`` never climbs above ``root``. Absolute targets (a bundle copied
    with ``/sys/...`` links) are re-rooted: ``/sys/devices/x`` -> ``<root>/devices/x``. Returns the
    resolved path, which may not exist; a link loop stops after 40 hops at the path reached.
    """
    root = os.path.abspath(root)
    pending = [p for p in relpath.split("/") if p not in ("", ".")]
    done: list[str] = []
    hops = 0
    while pending:
        part = pending.pop(0)
        if part == "..":
            if done:
                done.pop()
            continue
        candidate = os.path.join(root, *done, part)
        if os.path.islink(candidate) and hops < _MAX_SYMLINK_HOPS:
            hops += 1
            try:
                target = os.readlink(candidate)
            except OSError:
                done.append(part)
                continue
            if target.startswith("/"):
                parts = [p for p in target.split("/") if p not in ("", ".")]
                if parts[:1] == ["sys"]:
                    parts = parts[1:]
                done = []
                pending = parts + pending
            else:
                pending = [p for p in target.split("/") if p not in ("", ".")] + pending
            continue
        done.append(part)
    return os.path.join(root, *done)


def device_dir(root: str, base: str, addr: str) -> str:
    """The folder of ``bus/pci/devices/<addr>`` (``base``), cheaply: the entry itself when it is a folder
    or a relative link (the kernel's ``../../../devices/...``: open() follows it, a few µs, where
    :func:`resolve_in_root` costs ~20 µs a device), resolved inside ``root`` when it is an absolute
    link (a tree copied with ``/sys/...`` links). A bundle folder with a link leading out of it is
    refused before any probe reads it (bundle_files.vet_tree)."""
    path = os.path.join(base, addr)
    try:
        target = os.readlink(path)
    except OSError:
        return path  # not a link
    return resolve_in_root(root, f"bus/pci/devices/{addr}") if target.startswith("/") else path


def read_text(path: str) -> str | None:
    """A sysfs attribute's content, stripped; None when absent or unreadable (EINVAL, EACCES, ...).

    What a text-mode ``open(path, encoding="utf-8", errors="replace").read(4096)`` gives (its first
    4,096 characters, universal newlines), read with ``os`` calls: an AER probe reads six files per PCI
    function, and a buffered text file costs about twice the open, read and close."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except (OSError, ValueError):
        return None
    try:
        data = os.read(fd, 16384)  # 4,096 characters are at most 16,384 bytes; an attribute comes in one read
    except OSError:
        return None
    finally:
        os.close(fd)
    text = data.decode("utf-8", "replace")
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text[:4096].strip()


def list_dir(path: str) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def parse_or_none(parser, text: str | None):
    """``parser(text)``, or None when the file was unreadable or its content does not parse."""
    if text is None:
        return None
    try:
        return parser(text)
    except ParseError:
        return None


def probe_pcie_links(sysfs_root: str = "/sys") -> list[PcieLink]:
    """PCIe links of NVIDIA GPUs / NVSwitches and Mellanox HCAs (physical functions only: a device
    with a ``physfn`` link is an SR-IOV virtual function and is skipped). No PCI bus in sysfs -> []."""
    root = os.path.abspath(sysfs_root)
    base = resolve_in_root(root, "bus/pci/devices")
    if not os.path.isdir(base):
        return []
    links: list[PcieLink] = []
    for addr in list_dir(base):
        dev = device_dir(root, base, addr)
        vendor = read_text(os.path.join(dev, "vendor"))
        if vendor is None or vendor.strip().lower() not in _VENDORS:
            continue  # the prolog reads this for every function: one file for the ones we do not judge
        klass = read_text(os.path.join(dev, "class"))
        if klass is None:
            continue
        try:
            kind = classify_pci(vendor, klass)
        except ParseError:
            continue
        if kind is None or os.path.lexists(os.path.join(dev, "physfn")):
            continue
        name = None
        if kind == "hca":
            names = list_dir(os.path.join(dev, "infiniband"))
            name = names[0] if names else None
        links.append(PcieLink(
            pci_bus_id=normalize_pci_bus_id(addr) or addr,
            kind=kind,
            vendor=vendor.lower(),
            device=(read_text(os.path.join(dev, "device")) or "").lower() or None,
            speed_current_gts=parse_or_none(parse_link_speed, read_text(os.path.join(dev, "current_link_speed"))),
            speed_max_gts=parse_or_none(parse_link_speed, read_text(os.path.join(dev, "max_link_speed"))),
            width_current=parse_or_none(parse_link_width, read_text(os.path.join(dev, "current_link_width"))),
            width_max=parse_or_none(parse_link_width, read_text(os.path.join(dev, "max_link_width"))),
            name=name,
        ))
    return links
