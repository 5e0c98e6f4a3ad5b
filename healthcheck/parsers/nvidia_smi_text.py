"""``nvidia-smi -q`` text -> a tree of :class:`Node` per GPU (:mod:`nvidia_smi_tree`; facts are read in :mod:`nvidia_smi`).

The text format is ``Label<spaces>: value`` lines nested by indentation (4 spaces a level), GPU blocks
opened by ``GPU 00000000:07:00.0`` at column 0, and header lines (``Timestamp``, ``Driver Version``,
``CUDA Version``, ``Attached GPUs``) at column 0. Real-world variants handled here:

- shell prompt lines (``$ nvidia-smi``, ``> nvidia-smi -q -i 0``, ``[root@h ~]# nvidia-smi``) and
  author elisions (``[...]``): ignored;
- trailing spaces, tabs (expanded), hand annotations such as ``<===`` (stripped by the value cleaner);
- several outputs pasted one after the other (``-i 0`` then ``-i 2``): GPUs in order of appearance;
- lost GPUs: ``Unable to determine the device handle for GPU 0000:0B:00.0: Unknown Error`` (old
  spacing) / ``GPU0000:07:00.0`` (newer, no space), alone or inside a GPU block, and ``GPU is lost``;
- fragments without a GPU header (``grep -A5 Fabric``, an ``ECC Errors`` block alone): they become one
  GPU when they hold a recognisable GPU section, otherwise :class:`ParseError`.

Bounds: more than MAX_LINES lines, or a line over MAX_LINE_CHARS characters, is refused with
ParseError (real outputs: a few thousand lines under 200 characters); in ``errors_only`` mode (text
printed before an XML document) such lines are skipped instead. Only the first MAX_HEADER_ENTRIES
column-0 ``Label : value`` lines are kept as the header.
"""
from __future__ import annotations

import re

from healthcheck.core.model import normalize_pci_bus_id
from healthcheck.parsers import ParseError, check_size
from healthcheck.parsers.nvidia_smi_tree import Node, RawGpu, norm_key

MAX_LINES = 200_000
MAX_LINE_CHARS = 64 * 1024
MAX_HEADER_ENTRIES = 256  # column-0 "Label : value" lines kept (the real header has 5; each is looked up)

_BUS = r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]"
_GPU_HEADER = re.compile(rf"^GPU\s*({_BUS})$")
_ERROR = re.compile(r"Unable to determine the device handle|GPU is lost", re.IGNORECASE)
_ERROR_BUS = re.compile(rf"GPU\s*({_BUS})", re.IGNORECASE)
# Label and value are stripped by the caller: no \s* around the colon (a lazy label followed by \s*
# rescans each run of blanks from every position in it: quadratic on "a<1e6 spaces>b").
_LABEL_VALUE = re.compile(r"^([^:]*):(.*)$")
_NO_DEVICES = re.compile(r"^[^\S\n]*No devices were found", re.MULTILINE)
_FAILED = re.compile(r"NVIDIA-SMI has failed[^\n]*", re.IGNORECASE)

# Sections that only appear inside a GPU block: a headerless fragment holding one of them is a GPU.
GPU_SECTIONS = frozenset({
    "productname", "gpuuuid", "serialnumber", "persistencemode", "pci", "eccmode", "eccerrors",
    "retiredpages", "remappedrows", "temperature", "fbmemoryusage", "clockseventreasons",
    "clocksthrottlereasons", "gpupowerreadings", "powerreadings", "fabric", "processes",
    "gpuresetstatus", "gpurecoveryaction", "performancestate", "utilization",
})


def _line_node(body: str) -> Node:
    """'Driver Version   : 550.54.14' -> Node('driverversion', '550.54.14'); 'PCI' -> section."""
    match = _LABEL_VALUE.match(body)
    if match and match.group(1).strip():
        return Node(norm_key(match.group(1)), match.group(2).strip())
    return Node(norm_key(body))


class _Builder:
    """Line-by-line state: the header, the GPUs so far, the block being filled and its indent stack."""

    def __init__(self) -> None:
        self.header = Node("header")
        self.gpus: list[RawGpu] = []
        self.orphan = Node("fragment")  # indented lines before any GPU header
        self.current: RawGpu | None = None
        self.stack: list[tuple[int, Node]] = [(-1, self.orphan)]

    def open_gpu(self, bus: str) -> None:
        self.current = RawGpu(bus, Node("gpu"))
        self.gpus.append(self.current)
        self.stack = [(-1, self.current.tree)]

    def close_gpu(self) -> None:
        self.current = None
        # Indented lines after a col-0 line: fragment material until a GPU was seen, else dropped.
        self.stack = [(-1, Node("ignored") if self.gpus else self.orphan)]

    def error_line(self, body: str, indent: int) -> None:
        match = _ERROR_BUS.search(body)
        bus = match.group(1) if match else None
        cur = self.current
        same = cur is not None and (
            bus is None or normalize_pci_bus_id(bus) == normalize_pci_bus_id(cur.bus_id))
        if cur is not None and (same or indent > 0):
            cur.error = cur.error or body
        elif bus is not None:
            self.gpus.append(RawGpu(bus, None, body))
            self.close_gpu()

    def add(self, indent: int, body: str) -> None:
        while self.stack[-1][0] >= indent:
            self.stack.pop()
        node = _line_node(body)
        self.stack[-1][1].children.append(node)
        self.stack.append((indent, node))


def parse_text_tree(text: str, errors_only: bool = False) -> tuple[Node, list[RawGpu]]:
    """Split ``nvidia-smi -q`` text into (header node, GPUs in order of appearance).

    ``errors_only``: only collect the lost-GPU lines (used on text printed before an XML document)
    and never raise.
    """
    if not errors_only:
        check_size(text, "nvidia-smi -q output", len(text), MAX_LINES)
    b = _Builder()
    for number, raw_line in enumerate(text.splitlines(), start=1):
        if len(raw_line) > MAX_LINE_CHARS:
            if errors_only:
                continue
            raise ParseError(f"nvidia-smi -q output: line {number} is {len(raw_line)} characters long, "
                             f"over the limit of {MAX_LINE_CHARS} (not nvidia-smi output)")
        line = raw_line.expandtabs(4).rstrip()
        body = line.strip()
        if not body:
            continue
        indent = len(line) - len(line.lstrip())
        if _ERROR.search(body):
            b.error_line(body, indent)
            continue
        if errors_only:
            continue
        if indent == 0:
            header = _GPU_HEADER.match(body)
            if header:
                b.open_gpu(header.group(1))
                continue
            b.close_gpu()
            node = _line_node(body)  # prompt lines land here too; only known keys are read
            if node.value is not None and len(b.header.children) < MAX_HEADER_ENTRIES \
                    and not b.header.child(node.key):
                b.header.children.append(node)
            continue
        b.add(indent, body)
    if errors_only:
        return b.header, b.gpus
    if not b.gpus and {c.key for c in b.orphan.children} & GPU_SECTIONS:
        b.gpus.append(RawGpu(None, b.orphan))
    if not b.gpus:
        _no_gpu(text, b.header)
    return b.header, b.gpus


def _no_gpu(text: str, header: Node) -> None:
    """Nothing GPU-like was found: an empty machine is fine, anything else is a ParseError."""
    if _NO_DEVICES.search(text) or header.get("attachedgpus") == "0":
        return
    failed = _FAILED.search(text)
    if failed:
        raise ParseError(f"nvidia-smi could not run: {failed.group().strip()}")
    raise ParseError("not nvidia-smi -q output: no GPU block (\"GPU 00000000:07:00.0\") "
                     "and no recognisable GPU section found")
