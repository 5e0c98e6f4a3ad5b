"""Parse ``nvidia-smi nvlink --status`` (``-s``) and ``nvidia-smi nvlink -e`` text into NvLink lists.

``nvidia-smi -q`` carries no NVLink state, so bundles recorded without NVML judge NVLink from these
two outputs. Both print one header per GPU and one line per link (and counter)::

    GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-2fd736d2-a0b7-2ff1-0a75-93da08bb11b2)
    \t Link 0: 26.562 GB/s                 <- --status: a speed means the link is up
    \t Link 1: <inactive>                  <- --status: down ("Inactive", "Not Active", "Down" too)
    \t Link 0: Replay Errors: 0            <- -e (the same GPU header)
    \t Link 0: Recovery Errors: 0
    \t Link 0: CRC Errors: 0               <- newer drivers: one CRC counter, stored as crc_flit_errors
    \t Link 0: CRC Flit Errors: 0          <- older drivers / NVML names: flit and data split
    \t Link 0: CRC Data Errors: 0

What each result means (``dict[GpuKey, list[NvLink]]``, GPUs in the order printed, links sorted):

- a GPU with link lines -> its links;
- ``NVML: Unable to retrieve NVLink information as all links are inActive`` (own line or after the
  header on the same line) -> ``[]``: the GPU was asked and has no usable link;
- ``Device does not have or support Nvlink``, a header with nothing under it (PCIe cards on newer
  drivers, ``nvidia-smi -L`` output) or an unknown message -> the GPU is left out, so its
  ``GpuInfo.nvlinks`` stays ``None`` ("no NVLink / not reported").

Pasted outputs are tolerated: prompt lines (``$ nvidia-smi nvlink -s``, ``> ...``), comments, blank
lines and author elisions (``...``, ``[...]``) are skipped; redacted UUIDs that are not real UUIDs
(``GPU-...``) become ``None`` so matching falls back to the index. Input with no ``GPU N:`` header,
and counters fed to the status parser (or status lines to the error parser), raise ParseError.

Bounds: input over MAX_INPUT_CHARS (16 MiB) or MAX_LINES lines, a line over MAX_LINE_CHARS or more
than MAX_GPUS GPUs is refused with ParseError (a real 8-GPU ``-e`` output is ~600 lines of under 100 characters).
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field

from healthcheck.core.model import GpuInfo, NvLink
from healthcheck.parsers import ParseError, check_size


@dataclass(frozen=True)
class GpuKey:
    """The GPU a block belongs to, from ``GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)``."""

    index: int
    uuid: str | None = None
    name: str | None = None


MAX_INPUT_CHARS = 16 * 1024 * 1024
MAX_LINES = 200_000
MAX_LINE_CHARS = 64 * 1024
MAX_GPUS = 1024  # GPU headers (a node has at most a few dozen; merging is quadratic in them)

# "GPU 0: ..." -- at most 4 digits then a colon, so `nvidia-smi -q`'s "GPU 00000000:18:00.0" is no header.
_HEADER = re.compile(r"^\s*GPU\s+([0-9]{1,4}):(.*)$")
_LINK = re.compile(r"^\s*Link\s+([0-9]{1,3})\s*:(.*)$", re.IGNORECASE)
_UUID = re.compile(r"(?:GPU|MIG)-[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}")
# A speed starts after a non-digit: without the lookbehind every digit of a long run starts a try.
_SPEED = re.compile(r"(?<![0-9])([0-9]{1,6}(?:\.[0-9]{1,6})?)\s*GB/s", re.IGNORECASE)
_COUNTER = re.compile(r"^\s*+([A-Za-z][^:]{0,60}):(.*)$")  # "Replay Errors: 0", "Data Tx: 5863784 KiB"
_INT = re.compile(r"^\s*([0-9]{1,20})(?![0-9.])")

_DOWN = {"inactive", "notactive", "down", "disabled", "off"}
_UP = {"active", "up"}
# Messages nvidia-smi prints instead of links (own line under the header, or after it on one line).
_ALL_INACTIVE = "all links are inactive"
_UNSUPPORTED = ("does not have or support nvlink", "nvlink is not supported")
_MESSAGE_START = re.compile(r"NVML:|Device does not|Unable to|Failed to", re.IGNORECASE)

# -e labels (normalised: lower-case letters/digits) -> NvLink field. "CRC Errors" (no split) is kept
# apart and lands in crc_flit_errors unless the same link also prints an explicit flit counter.
_ERROR_FIELDS = {
    "replayerrors": "replay_errors", "replayerror": "replay_errors", "dlreplay": "replay_errors",
    "recoveryerrors": "recovery_errors", "recoveryerror": "recovery_errors",
    "dlrecovery": "recovery_errors",
    "crcfliterrors": "crc_flit_errors", "crcfliterror": "crc_flit_errors",
    "flitcrcerrors": "crc_flit_errors", "dlcrcflit": "crc_flit_errors", "crcflit": "crc_flit_errors",
    "crcdataerrors": "crc_data_errors", "crcdataerror": "crc_data_errors",
    "datacrcerrors": "crc_data_errors", "dlcrcdata": "crc_data_errors", "crcdata": "crc_data_errors",
}
_CRC_GENERIC = {"crcerrors", "crcerror"}


def _norm(label: str) -> str:
    return _NOT_ALNUM.sub("", label.lower())


_NOT_ALNUM = re.compile(r"[^a-z0-9]+")  # runs, not single characters: one substitution per run


@dataclass
class _Block:
    """Everything printed under one GPU header (headers repeated by concatenated outputs merge)."""

    key: GpuKey
    state: str | None = None  # None | "all_inactive" | "unsupported" | "message"
    links: dict[int, NvLink] = field(default_factory=dict)
    crc_generic: dict[int, int | None] = field(default_factory=dict)

    def link(self, number: int) -> NvLink:
        return self.links.setdefault(number, NvLink(link=number))


@dataclass
class _Seen:
    status: int = 0  # link lines with a status value (speed / inactive / other word)
    errors: int = 0  # link lines with an error counter label
    counters: int = 0  # link lines with any other "Label: value" (throughput -gt, -c ...)


def _message_state(text: str) -> str | None:
    """Classify a driver message: all links inactive, NVLink unsupported, other message, or none."""
    low = " ".join(text.lower().split())
    if _ALL_INACTIVE in low:
        return "all_inactive"
    if any(m in low for m in _UNSUPPORTED):
        return "unsupported"
    return "message" if _MESSAGE_START.search(text) else None


def _header(index: str, rest: str) -> tuple[GpuKey, str | None]:
    """Key and message state of ``GPU 0: NAME (UUID: GPU-...) [message]`` (UUID and message optional)."""
    uuid = None
    at = rest.find("(UUID:")
    if at >= 0:
        name, tail = rest[:at], rest[at + 6:]
        close = tail.find(")")
        raw_uuid, tail = (tail[:close], tail[close + 1:]) if close >= 0 else (tail, "")
        uuid = raw_uuid.strip() if _UUID.fullmatch(raw_uuid.strip()) else None  # "GPU-..." redacted
    else:
        start = _MESSAGE_START.search(rest)
        name, tail = (rest[:start.start()], rest[start.start():]) if start else (rest, "")
    name = name.strip()
    return GpuKey(int(index), uuid, name or None), _message_state(tail)


def _status_value(link: NvLink, value: str) -> None:
    """``26.562 GB/s`` -> up at that speed (0 GB/s counts as down); ``<inactive>`` and the like ->
    down; ``Active``/``Up`` without a speed -> up; anything else -> active stays None (unknown)."""
    speed = _SPEED.search(value)
    if speed:
        link.speed_gbps = float(speed.group(1))
        link.active = link.speed_gbps > 0
        return
    word = _norm(value)
    if word in _DOWN:
        link.active = False
    elif word in _UP:
        link.active = True


def _count(value: str) -> int | None:
    """``0`` -> 0, ``65535`` -> 65535; ``N/A`` / ``[Not Supported]`` -> None."""
    match = _INT.match(value)
    return int(match.group(1)) if match else None


def _error_value(block: _Block, number: int, label: str, value: str, seen: _Seen) -> None:
    key = _norm(label)
    if key in _ERROR_FIELDS:
        setattr(block.link(number), _ERROR_FIELDS[key], _count(value))
    elif key in _CRC_GENERIC:
        block.link(number)
        block.crc_generic[number] = _count(value)
    elif "error" in key or key.endswith("ber"):  # newer counters with no model field: link known
        block.link(number)
    else:  # "Data Tx", "Raw Rx", capability lines: not error counters
        seen.counters += 1
        return
    seen.errors += 1


def _scan(text: object, errors: bool, what: str) -> tuple[list[_Block], _Seen]:
    if not isinstance(text, str):
        raise ParseError(f"{what}: expected text, got {type(text).__name__}")
    check_size(text, what, MAX_INPUT_CHARS, MAX_LINES)
    if not text.strip():
        raise ParseError(f"{what}: empty output")
    blocks: dict[int, _Block] = {}
    seen = _Seen()
    current: _Block | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        if len(line) > MAX_LINE_CHARS:
            raise ParseError(f"{what}: line {number} is {len(line)} characters long, over the limit of "
                             f"{MAX_LINE_CHARS} (not nvidia-smi nvlink output)")
        header = _HEADER.match(line)
        if header:
            key, state = _header(header.group(1), header.group(2))
            current = blocks.get(key.index)
            if current is None:
                if len(blocks) >= MAX_GPUS:
                    raise ParseError(f"{what}: more than {MAX_GPUS} GPUs (not nvidia-smi nvlink output)")
                current = blocks[key.index] = _Block(key)
            elif current.key.uuid is None and key.uuid is not None:
                current.key = key
            current.state = state or current.state
            continue
        if current is None:  # prompt lines, comments, text before the first GPU
            continue
        link = _LINK.match(line)
        if link is None:
            state = _message_state(line)  # elisions, blank lines, prompts: state None, ignored
            current.state = state or current.state
            continue
        number, value = int(link.group(1)), link.group(2)
        # "Label: value" is a counter line, unless it carries a speed (a status with a prefix word).
        counter = None if _SPEED.search(value) else _COUNTER.match(value)
        if counter is None:
            seen.status += 1
            if not errors:
                _status_value(current.link(number), value)
        elif errors:
            _error_value(current, number, counter.group(1), counter.group(2), seen)
        else:
            seen.counters += 1
    if not blocks:
        first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
        raise ParseError(f"{what}: no 'GPU N: <name> (UUID: ...)' header found "
                         f"(first line: {first[:80]!r})")
    return list(blocks.values()), seen


def _result(blocks: list[_Block]) -> dict[GpuKey, list[NvLink]]:
    out: dict[GpuKey, list[NvLink]] = {}
    for block in blocks:
        for number, crc in block.crc_generic.items():
            link = block.links[number]
            if link.crc_flit_errors is None:
                link.crc_flit_errors = crc
        if block.links:
            out[block.key] = [block.links[n] for n in sorted(block.links)]
        elif block.state == "all_inactive":
            out[block.key] = []
    return out


def parse_nvlink_status(text: str) -> dict[GpuKey, list[NvLink]]:
    """Parse ``nvidia-smi nvlink --status``: fills ``link``, ``active`` and ``speed_gbps``."""
    what = "nvidia-smi nvlink --status"
    blocks, seen = _scan(text, errors=False, what=what)
    if seen.status == 0 and seen.counters > 0:
        raise ParseError(f"{what}: the link lines hold counters ('Link 0: Replay Errors: 0', "
                         "'Link 0: Data Tx: ...'): this is `nvidia-smi nvlink -e`/`-gt` output")
    return _result(blocks)


def parse_nvlink_errors(text: str) -> dict[GpuKey, list[NvLink]]:
    """Parse ``nvidia-smi nvlink -e``: fills ``replay_errors``, ``recovery_errors``,
    ``crc_flit_errors`` (also from a plain ``CRC Errors`` line) and ``crc_data_errors``."""
    what = "nvidia-smi nvlink -e"
    blocks, seen = _scan(text, errors=True, what=what)
    if seen.errors == 0 and (seen.status or seen.counters):
        kind = "link status (`nvlink --status`)" if seen.status else "non-error counters (`nvlink -gt`?)"
        raise ParseError(f"{what}: the link lines hold {kind}, not error counters")
    return _result(blocks)


# ------------------------------------------------------------------------------------- joining


def _same_uuid(a: str | None, b: str | None) -> bool:
    return a is not None and b is not None and a.lower() == b.lower()


def _find(index: int, uuid: str | None, keys, used: set[GpuKey]) -> GpuKey | None:
    """The key for this GPU: same UUID when both have one, else same index (a UUID match wins)."""
    free = [k for k in keys if k not in used]
    for key in free:
        if _same_uuid(uuid, key.uuid):
            return key
    for key in free:
        if (uuid is None or key.uuid is None) and key.index == index:
            return key
    return None


def _copy(links: list[NvLink]) -> list[NvLink]:
    return [dataclasses.replace(link) for link in links]


def merge_nvlinks(status: dict[GpuKey, list[NvLink]],
                  errors: dict[GpuKey, list[NvLink]]) -> dict[GpuKey, list[NvLink]]:
    """One dict from both outputs: link state/speed from ``status``, counters from ``errors``.

    GPUs are joined like :func:`apply_to_gpus` (UUID when both have one, else index); a GPU or link
    found in only one output keeps what that output said. Result ordered by GPU index.
    """
    out: dict[GpuKey, list[NvLink]] = {}
    used: set[GpuKey] = set()
    for skey, slinks in status.items():
        ekey = _find(skey.index, skey.uuid, errors, used)
        if ekey is None:
            out[skey] = _copy(slinks)
            continue
        used.add(ekey)
        key = GpuKey(skey.index, skey.uuid or ekey.uuid, skey.name or ekey.name)
        merged = {link.link: dataclasses.replace(link) for link in slinks}
        for elink in errors[ekey]:
            link = merged.setdefault(elink.link, NvLink(link=elink.link))
            link.replay_errors = elink.replay_errors
            link.recovery_errors = elink.recovery_errors
            link.crc_flit_errors = elink.crc_flit_errors
            link.crc_data_errors = elink.crc_data_errors
        out[key] = [merged[n] for n in sorted(merged)]
    for ekey, elinks in errors.items():
        if ekey not in used:
            out.setdefault(ekey, _copy(elinks))
    return dict(sorted(out.items(), key=lambda item: item[0].index))


def apply_to_gpus(gpus: list[GpuInfo], links: dict[GpuKey, list[NvLink]]) -> list[GpuInfo]:
    """New GpuInfo objects with ``nvlinks`` set from ``links`` (matched by UUID when both have one,
    else by index; each key used once). GPUs without a match are copied unchanged."""
    used: set[GpuKey] = set()
    out = []
    for gpu in gpus:
        key = _find(gpu.index, gpu.uuid, links, used)
        if key is None:
            out.append(dataclasses.replace(gpu))
            continue
        used.add(key)
        out.append(dataclasses.replace(gpu, nvlinks=_copy(links[key])))
    return out
