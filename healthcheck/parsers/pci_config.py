"""A PCI function's configuration space (the bytes of sysfs ``bus/pci/devices/<addr>/config``) -> the
two facts the GPUDirect checks need: the PCI Express port type and the ACS control register. Pure.

Layout (PCI Express Base Specification; what ``lspci -vvv`` decodes as ``Express (v2) Downstream Port``
and ``ACSCtl: SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-``):

- the capability list starts at the byte at 0x34 when bit 4 of the status register (0x06) is set;
  each entry is ``id, next``; the PCI Express capability (id 0x10) holds its flags at +2, whose bits
  7:4 are the device/port type (4 root port, 5 switch upstream port, 6 switch downstream port, ...);
- the extended capabilities start at 0x100 (only there when the read returned 4096 bytes: the kernel
  gives an unprivileged reader the first 64), each a 32-bit header ``id (15:0), version (19:16), next
  (31:20)``; Access Control Services (id 0x000D) holds its capability register at +4 and its control
  register at +6, bits 0-6: SrcValid, TransBlk, ReqRedir, CmpltRedir, UpstreamFwd, EgressCtrl, DirectTrans.
"""
from __future__ import annotations

from . import ParseError

ACS_BITS = ("SrcValid", "TransBlk", "ReqRedir", "CmpltRedir", "UpstreamFwd", "EgressCtrl", "DirectTrans")
PORT_TYPES = {0: "endpoint", 1: "legacy_endpoint", 4: "root_port", 5: "upstream", 6: "downstream",
              7: "pcie_to_pci_bridge", 8: "pci_to_pcie_bridge", 9: "rc_endpoint", 10: "rc_event_collector"}
CAP_EXP = 0x10
EXT_CAP_ACS = 0x000D
MAX_CONFIG_BYTES = 4096
_MAX_CAPS = 64  # the list is walked at most this far: a loop in a corrupt config space ends


def _u16(data: bytes, offset: int) -> int:
    return data[offset] | (data[offset + 1] << 8)


def _u32(data: bytes, offset: int) -> int:
    return _u16(data, offset) | (_u16(data, offset + 2) << 16)


def port_type(data: bytes) -> str | None:
    """The PCI Express device/port type (``"downstream"``, ``"root_port"``, ...), None when the function
    has no PCI Express capability or the bytes do not reach it."""
    _check(data)
    if len(data) < 0x40 or not data[0x06] & 0x10:
        return None
    ptr, seen = data[0x34] & 0xFC, 0
    while ptr and seen < _MAX_CAPS and ptr + 4 <= len(data):
        if data[ptr] == CAP_EXP:
            kind = (_u16(data, ptr + 2) >> 4) & 0xF
            return PORT_TYPES.get(kind, f"type{kind}")
        ptr, seen = data[ptr + 1] & 0xFC, seen + 1
    return None


def acs_control(data: bytes) -> dict[str, bool] | None:
    """The ACS control bits by lspci's names, {} when the function has no ACS capability, None when the
    extended space was not readable (fewer than 4096 bytes: an unprivileged read)."""
    _check(data)
    if len(data) < MAX_CONFIG_BYTES:
        return None
    offset, seen = 0x100, 0
    while offset and seen < _MAX_CAPS and offset + 8 <= len(data):
        header = _u32(data, offset)
        if header in (0, 0xFFFFFFFF):
            return {}
        if header & 0xFFFF == EXT_CAP_ACS:
            ctl = _u16(data, offset + 6)
            return {name: bool(ctl & (1 << bit)) for bit, name in enumerate(ACS_BITS)}
        offset, seen = (header >> 20) & 0xFFC, seen + 1
        if offset and offset < 0x100:
            raise ParseError(f"PCI config space: extended capability pointer {offset:#x} below 0x100")
    return {}


def _check(data: bytes) -> None:
    if not isinstance(data, (bytes, bytearray)):
        raise ParseError(f"PCI config space must be bytes, got {type(data).__name__}")
    if len(data) > MAX_CONFIG_BYTES:
        raise ParseError(f"PCI config space: {len(data)} bytes, over {MAX_CONFIG_BYTES}")
