"""Parse ``nvidia-smi topo -m`` (``--matrix``) and ``nvidia-smi topo -p2p r|w|n|a|p`` into a matrix.

``topo -m`` prints one column per GPU and NIC, then the affinity columns, one row per device::

            GPU0    GPU1    NIC0    CPU Affinity    NUMA Affinity   GPU NUMA ID
    GPU0     X      NV18    PIX     0-47            0               N/A
    GPU1    NV18     X      SYS     48-95           1               N/A
    NIC0    PIX     SYS      X

    Legend: ...
    NIC Legend:
      NIC0: mlx5_0

Cells are link kinds: ``X`` (self), ``NV#`` (a bonded set of # NVLinks), ``PIX`` / ``PXB`` / ``PHB`` /
``NODE`` / ``SYS`` (PCIe paths, nearest first; older drivers print ``SOC`` and ``PSB``). ``topo -p2p``
prints the same shape with ``OK`` / ``CNS`` / ``GNS`` / ``TNS`` / ``NS`` / ``U`` cells and no
affinity columns. Older drivers name the NIC columns after the device (``mlx5_0``) instead of
``NIC0`` + a NIC legend; both are read, and :attr:`TopoDevice.hca` is the HCA name either way.

Messy pastes are tolerated: prompt lines and text before the header, tabs or runs of spaces, a
header indented by a copy, empty cells (tabs) that vanish (spaces), NIC rows printed without NIC
columns, an affinity column clipped by the terminal (kept as printed), and legends cut at the
terminal width. A row with fewer link cells than the header has device columns, or a cell that is
no link word, raises ParseError naming the line. Input without a ``GPU0 ...`` header raises too.

Bounds: MAX_INPUT_CHARS, MAX_LINES, MAX_LINE_CHARS and MAX_DEVICES; one pass, ``split()`` per line,
anchored regular expressions without nested quantifiers: linear time.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from healthcheck.parsers import ParseError, as_text

MAX_INPUT_CHARS = 4 * 1024 * 1024
MAX_LINES = 100_000
MAX_LINE_CHARS = 64 * 1024
MAX_DEVICES = 512

LINK_WORDS = ("X", "PIX", "PXB", "PSB", "PHB", "NODE", "SOC", "SYS")
P2P_WORDS = ("X", "OK", "CNS", "GNS", "TNS", "NS", "U")
# PCIe/NUMA distance of a link kind, nearest first (NVLink is nearer than any of them)
PCIE_RANK = {"PIX": 1, "PSB": 1, "PXB": 2, "PHB": 3, "NODE": 4, "SOC": 5, "SYS": 5}
_NV = re.compile(r"^NV([0-9]{1,3})$")
_GPU = re.compile(r"^GPU([0-9]{1,4})$")
_NIC = re.compile(r"^NIC([0-9]{1,4})$")
_NIC_LEGEND = re.compile(r"^\s*(NIC[0-9]{1,4})\s*:\s*(\S{1,64})\s*$")
_DEVICE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.:-]{0,63}$")
_AFFINITY_NAMES = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")


@dataclass
class TopoDevice:
    """One row: a GPU (``index`` set) or a NIC/HCA (``hca`` set), with its affinity columns."""

    name: str  # as printed: "GPU0", "NIC0", "mlx5_0"
    kind: str  # "gpu" | "nic"
    index: int | None = None  # GPU index
    hca: str | None = None  # "mlx5_0" (from the NIC legend, or the name itself)
    cpu_affinity: str | None = None  # "0-47", "0,2,4" (kept as printed, even when clipped)
    numa_affinity: str | None = None  # "0", "0-1", None for "N/A"
    gpu_numa_id: str | None = None


@dataclass
class TopoMatrix:
    kind: str  # "topo" (link kinds) | "p2p" (peer-to-peer status)
    columns: list[str] = field(default_factory=list)  # device columns as printed
    devices: list[TopoDevice] = field(default_factory=list)  # rows in order
    cells: dict[str, dict[str, str]] = field(default_factory=dict)  # row name -> column name -> word
    nic_legend: dict[str, str] = field(default_factory=dict)  # "NIC0" -> "mlx5_0"

    def gpus(self) -> list[TopoDevice]:
        return [d for d in self.devices if d.kind == "gpu"]

    def nics(self) -> list[TopoDevice]:
        return [d for d in self.devices if d.kind == "nic"]

    def link(self, a: str, b: str) -> str | None:
        """The word between devices ``a`` and ``b`` (row a, column b; else row b, column a)."""
        return self.cells.get(a, {}).get(b) or self.cells.get(b, {}).get(a)


def nvlink_count(word: str | None) -> int:
    """``NV18`` -> 18; anything else -> 0."""
    match = _NV.match(word or "")
    return int(match.group(1)) if match else 0


def _is_cell(word: str, kind: str) -> bool:
    if kind == "p2p":
        return word in P2P_WORDS
    return word in LINK_WORDS or _NV.match(word) is not None


def _header(tokens: list[str], line: str) -> list[str] | None:
    """The device column names of a header line, or None when the line is no header."""
    if not tokens or _GPU.match(tokens[0]) is None or "X" in tokens:
        return None
    devices = []
    for token in tokens:
        if token in ("CPU", "NUMA", "Affinity") or token == "GPU" and devices:
            break
        if not _DEVICE_NAME.match(token) or _is_cell(token, "topo") or _is_cell(token, "p2p"):
            return None
        devices.append(token)
    return devices


def _affinity_names(line: str) -> list[str]:
    found = [(line.find(name), name) for name in _AFFINITY_NAMES if name in line]
    return [name for _, name in sorted(found)]


def _device(name: str) -> TopoDevice:
    gpu = _GPU.match(name)
    if gpu:
        return TopoDevice(name, "gpu", index=int(gpu.group(1)))
    return TopoDevice(name, "nic", hca=None if _NIC.match(name) else name)


def _scan(text: object, what: str) -> TopoMatrix:
    text = as_text(text, what, MAX_INPUT_CHARS, MAX_LINES)
    if not text.strip():
        raise ParseError(f"{what}: empty output")
    lines = text.splitlines()
    columns: list[str] | None = None
    affinity: list[str] = []
    matrix: TopoMatrix | None = None
    in_rows = False
    in_nic_legend = False
    for number, line in enumerate(lines, start=1):
        where = f"{what}: line {number}"
        if len(line) > MAX_LINE_CHARS:
            raise ParseError(f"{where} is {len(line)} characters long, over the limit of {MAX_LINE_CHARS}")
        tokens = line.split()
        if columns is None:
            columns = _header(tokens, line)
            if columns is not None:
                if len(columns) > MAX_DEVICES:
                    raise ParseError(f"{where}: more than {MAX_DEVICES} device columns")
                affinity = _affinity_names(line)
                in_rows = True
            continue
        if matrix is not None and line.strip().startswith("NIC Legend"):
            in_nic_legend, in_rows = True, False
            continue
        if in_nic_legend:
            legend = _NIC_LEGEND.match(line)
            if legend:
                matrix.nic_legend[legend.group(1)] = legend.group(2)
            continue
        if not in_rows:
            continue
        if not tokens:
            if matrix is not None:
                in_rows = False
            continue
        if tokens[0].rstrip(":").lower() == "legend":
            in_rows = False
            continue
        if _header(tokens, line) is not None:
            raise ParseError(f"{where}: a second header line (two outputs pasted together?)")
        name = tokens[0]
        cells = tokens[1:1 + len(columns)]
        if matrix is None:
            kind = "p2p" if cells and all(c in P2P_WORDS for c in cells) and any(c != "X" for c in cells) \
                else "topo"
            matrix = TopoMatrix(kind, list(columns))
        if not _DEVICE_NAME.match(name):
            raise ParseError(f"{where}: {name[:40]!r} is not a device name (GPU0, NIC0, mlx5_0)")
        if len(matrix.devices) >= MAX_DEVICES:
            raise ParseError(f"{where}: more than {MAX_DEVICES} device rows")
        if name in matrix.cells:
            raise ParseError(f"{where}: device {name} printed twice")
        if len(cells) < len(columns):
            raise ParseError(f"{where}: {name} has {len(cells)} cells for {len(columns)} device columns "
                             "(a cut matrix)")
        for column, cell in zip(columns, cells):
            if not _is_cell(cell, matrix.kind):
                words = "OK/CNS/GNS/TNS/NS/U" if matrix.kind == "p2p" else "X/NV#/PIX/PXB/PHB/NODE/SYS"
                raise ParseError(f"{where}: {name}/{column} cell {cell[:20]!r} is not one of {words}")
        device = _device(name)
        rest = tokens[1 + len(columns):]
        if matrix.kind == "p2p" and rest:
            raise ParseError(f"{where}: {name} has {len(rest)} cells more than the header's columns")
        for label, value in zip(affinity, rest):
            value = None if value.upper() == "N/A" else value
            if label == "CPU Affinity":
                device.cpu_affinity = value
            elif label == "NUMA Affinity":
                device.numa_affinity = value
            else:
                device.gpu_numa_id = value
        matrix.devices.append(device)
        matrix.cells[name] = dict(zip(columns, cells))
    if columns is None or matrix is None:
        first = next((ln.strip() for ln in lines if ln.strip()), "")
        raise ParseError(f"{what}: no 'GPU0 GPU1 ...' header with device rows found "
                         f"(first line: {first[:80]!r})")
    for device in matrix.devices:
        if device.kind == "nic" and device.hca is None:
            device.hca = matrix.nic_legend.get(device.name, device.name)
    if not matrix.gpus():
        raise ParseError(f"{what}: no GPU rows under the header")
    return matrix


def parse_topo(text: str | bytes) -> TopoMatrix:
    """``nvidia-smi topo -m`` or ``topo -p2p ...`` (detected from the cells): the matrix."""
    return _scan(text, "nvidia-smi topo")


def parse_topo_m(text: str | bytes) -> TopoMatrix:
    """``nvidia-smi topo -m``; ParseError when the input is a ``-p2p`` matrix."""
    matrix = _scan(text, "nvidia-smi topo -m")
    if matrix.kind != "topo":
        raise ParseError("nvidia-smi topo -m: the cells are P2P status words (OK/CNS/...): this is "
                         "`nvidia-smi topo -p2p` output")
    return matrix


def parse_topo_p2p(text: str | bytes) -> TopoMatrix:
    """``nvidia-smi topo -p2p r`` (or w/n/a/p); ParseError when the input is a ``-m`` matrix."""
    matrix = _scan(text, "nvidia-smi topo -p2p")
    if matrix.kind != "p2p":
        raise ParseError("nvidia-smi topo -p2p: the cells are link kinds (NV#/PIX/SYS): this is "
                         "`nvidia-smi topo -m` output")
    return matrix


def to_dict(matrix: TopoMatrix) -> dict:
    """JSON-ready form (for ``healthcheck parse nvidia-smi-topo --format json``)."""
    return {"kind": matrix.kind, "columns": matrix.columns,
            "devices": [{"name": d.name, "kind": d.kind, "index": d.index, "hca": d.hca,
                         "cpu_affinity": d.cpu_affinity, "numa_affinity": d.numa_affinity,
                         "gpu_numa_id": d.gpu_numa_id} for d in matrix.devices],
            "cells": matrix.cells, "nic_legend": matrix.nic_legend}
