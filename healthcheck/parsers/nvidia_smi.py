"""Parse ``nvidia-smi -q -x`` (XML) and ``nvidia-smi -q`` (text) into :class:`GpuInfo` lists.

:mod:`nvidia_smi_xml` / :mod:`nvidia_smi_text` turn either format into the same tree of
:class:`Node` (:mod:`nvidia_smi_tree`, which both import; this module imports all three: no circle)
(labels normalised: ``ECC Errors`` and ``<ecc_errors>`` are both ``eccerrors``); the one path table
below reads the facts from either tree, so both formats give the same :class:`GpuInfo` by construction.
It covers the old schema (``clocks_throttle_reasons``, ``power_readings``, ``single_bit``/``double_bit``
ECC totals, ``pending_blacklist``) and the new one (``clocks_event_reasons``, ``gpu_power_readings``,
SRAM/DRAM ECC counters, ``remapped_rows``, ``fabric``, ``gpu_reset_status``, ``gpu_recovery_action``).
The default summary table (``nvidia-smi`` without ``-q``) is refused: it says too little to judge a GPU.

Bounds: input over MAX_INPUT_CHARS (16 MiB; a real 8-GPU ``-q -x`` is ~250 KB) or with more than
MAX_GPUS GPUs is refused with ParseError; the text parser also refuses more than ``nvidia_smi_text.MAX_LINES`` lines or a line over
``nvidia_smi_text.MAX_LINE_CHARS``, the XML parser more than ``nvidia_smi_xml.MAX_TAGS`` tags, nesting
deeper than 32 and any entity declaration.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from healthcheck.core.model import THROTTLE_REASONS, GpuInfo, GpuProcess, normalize_pci_bus_id
from healthcheck.parsers import ParseError, check_size, nvidia_smi_text, nvidia_smi_xml
from healthcheck.parsers.nvidia_smi_tree import Node, RawGpu, norm_key

MAX_INPUT_CHARS = 16 * 1024 * 1024
MAX_GPUS = 1024  # a node has at most a few dozen; each costs ~60 look-ups

SUMMARY_MESSAGE = (
    "this is the nvidia-smi summary table; record `nvidia-smi -q -x` or `nvidia-smi -q`"
)


@dataclass
class NvidiaSmiResult:
    gpus: list[GpuInfo]
    driver_version: str | None = None
    cuda_version: str | None = None
    timestamp: str | None = None
    format: str = "text"  # "xml" | "text"


# ------------------------------------------------------------------------------- value converters

# Values nvidia-smi prints for "no value": N/A, [N/A], Not Supported, [Unknown Error], deprecated, ...
# The error words among them (_TOOL_ERRORS) are also recorded in GpuInfo.field_errors: a field the
# tool could not read is judged (ERROR or FAIL), a field it does not support is not.
_MISSING = {
    "", "n/a", "na", "not supported", "notsupported", "unknown error", "unknown", "not found",
    "not available", "err!", "insufficient permissions", "gpu is lost", "not applicable",
    "requested functionality has been deprecated",
}
_TOOL_ERRORS = {
    "unknown error", "err!", "insufficient permissions", "gpu is lost", "gpu requires reset",
    "corrupted inforom", "timeout", "driver/library version mismatch",
}
_MISSING |= _TOOL_ERRORS
# Hand-written annotations in pasted outputs ("Pending : Yes   <==="): cut from the arrow on (callers
# strip the spaces before it; a leading \s* here would rescan every run of spaces: quadratic).
_ANNOTATION = re.compile(r"(?:<=+|<-+|←).*", re.DOTALL)
_INT = re.compile(r"[+-]?\d{1,18}(?!\d)")
_FLOAT = re.compile(r"[+-]?\d{1,18}(?:\.\d{1,12})?(?![\d.])")


def clean(raw: str | None) -> str | None:
    """Strip annotations and brackets; None for the N/A family."""
    if raw is None:
        return None
    value = _ANNOTATION.sub("", raw).strip()
    return None if value.strip("[]").strip().lower() in _MISSING else value


def tool_error(raw: str | None) -> str | None:
    """The tool's error words when ``raw`` is an error answer ("[Unknown Error]" -> "Unknown Error"),
    else None (a value, or N/A / Not Supported: not an error)."""
    if raw is None:
        return None
    value = _ANNOTATION.sub("", raw).strip().strip("[]").strip()
    return value if value.lower() in _TOOL_ERRORS else None


def to_int(raw: str | None) -> int | None:
    """'16x' -> 16, '4' -> 4, '2560 bank(s)' -> 2560; None when there is no leading number."""
    value = clean(raw)
    match = _INT.match(value) if value else None
    return int(match.group()) if match else None


def to_float(raw: str | None) -> float | None:
    """'61.62 W' -> 61.62, '32 C' -> 32.0, '95830 MiB' -> 95830.0."""
    value = clean(raw)
    match = _FLOAT.match(value) if value else None
    return float(match.group()) if match else None


_PSTATE = re.compile(r"P(\d{1,2})", re.IGNORECASE)


def to_pstate(raw: str | None) -> str | None:
    """'P0' / 'p8' -> 'P0' / 'P8'; 'Unknown', 'N/A' and anything else -> None."""
    value = clean(raw)
    match = _PSTATE.fullmatch(value) if value else None
    return f"P{int(match.group(1))}" if match else None


def to_bool(raw: str | None) -> bool | None:
    """Yes/Enabled/Active -> True; No/Disabled/Not Active -> False; anything else None."""
    value = (clean(raw) or "").lower()
    if value in ("yes", "enabled", "active", "true", "on"):
        return True
    if value in ("no", "disabled", "not active", "false", "off"):
        return False
    return None


# -------------------------------------------------------------------------------- fact extraction

# field -> (converter, alternative paths "section/label"; first non-None wins). Each path is written
# once per format where the XML tag and the text label normalise differently.
_SCALARS: list[tuple[str, Callable[[str | None], object], str]] = [
    ("uuid", clean, "uuid gpuuuid"),
    ("serial", clean, "serial serialnumber"),
    ("name", clean, "productname"),
    ("vbios", clean, "vbiosversion"),
    ("persistence_mode", to_bool, "persistencemode"),
    ("ecc_mode_current", to_bool, "eccmode/currentecc eccmode/current"),
    ("ecc_mode_pending", to_bool, "eccmode/pendingecc eccmode/pending"),
    ("retired_pages_sbe", to_int,
     "retiredpages/multiplesinglebitretirement/retiredcount retiredpages/singlebitecc"),
    ("retired_pages_dbe", to_int,
     "retiredpages/doublebitretirement/retiredcount retiredpages/doublebitecc"),
    ("remap_correctable", to_int, "remappedrows/remappedrowcorr remappedrows/correctableerror"),
    ("remap_uncorrectable", to_int, "remappedrows/remappedrowunc remappedrows/uncorrectableerror"),
    ("remap_pending", to_bool, "remappedrows/remappedrowpending remappedrows/pending"),
    ("remap_failure", to_bool,
     "remappedrows/remappedrowfailure remappedrows/remappingfailureoccurred"),
    # Absolute thresholds only: the "GPU Shutdown/Slowdown/Max Operating T.Limit Temp" lines (Hopper,
    # R545+; XML gpu_temp_*_tlimit_threshold) are offsets from T.Limit (-8, -2, 0), not temperatures,
    # and their labels normalise to other keys. "GPU T.Limit Temp" (XML gpu_temp_tlimit) is the
    # current headroom below T.Limit; "N/A" on GPUs without it (A10, 535).
    ("temperature_c", to_float, "temperature/gputemp temperature/gpucurrenttemp"),
    ("temp_tlimit_margin_c", to_float, "temperature/gputemptlimit temperature/gputlimittemp"),
    ("temp_slowdown_c", to_float, "temperature/gputempslowthreshold temperature/gpuslowdowntemp"),
    ("temp_shutdown_c", to_float, "temperature/gputempmaxthreshold temperature/gpushutdowntemp"),
    ("temp_max_operating_c", to_float,
     "temperature/gputempmaxgputhreshold temperature/gpumaxoperatingtemp"),
    ("mem_temperature_c", to_float, "temperature/memorytemp temperature/memorycurrenttemp"),
    ("mem_temp_max_c", to_float,
     "temperature/gputempmaxmemthreshold temperature/memorymaxoperatingtemp"),
    ("power_draw_w", to_float,
     "gpupowerreadings/powerdraw gpupowerreadings/averagepowerdraw "
     "gpupowerreadings/instantpowerdraw gpupowerreadings/instantaneouspowerdraw "
     "powerreadings/powerdraw powerreadings/averagepowerdraw powerreadings/instantpowerdraw"),
    ("power_limit_w", to_float,
     "gpupowerreadings/currentpowerlimit gpupowerreadings/enforcedpowerlimit "
     "powerreadings/enforcedpowerlimit powerreadings/currentpowerlimit powerreadings/powerlimit"),
    ("pcie_gen_current", to_int,
     "pci/pcigpulinkinfo/pciegen/currentlinkgen pci/gpulinkinfo/pciegeneration/current"),
    ("pcie_gen_max", to_int,
     "pci/pcigpulinkinfo/pciegen/maxlinkgen pci/gpulinkinfo/pciegeneration/max"),
    ("pcie_width_current", to_int,
     "pci/pcigpulinkinfo/linkwidths/currentlinkwidth pci/gpulinkinfo/linkwidth/current"),
    ("pcie_width_max", to_int,
     "pci/pcigpulinkinfo/linkwidths/maxlinkwidth pci/gpulinkinfo/linkwidth/max"),
    ("pcie_replay_count", to_int, "pci/replaycounter pci/replayssincereset"),
    ("memory_used_mib", to_float, "fbmemoryusage/used"),
    ("memory_total_mib", to_float, "fbmemoryusage/total"),
    ("fabric_status", clean, "fabric/status"),
    ("fabric_clique_id", to_int, "fabric/cliqueid"),  # "CliqueId : 2" / <cliqueId> (issue 33)
    ("fabric_cluster_uuid", clean, "fabric/clusteruuid"),
    ("unrepairable_memory", to_bool, "eccerrors/unrepairablememory"),  # Blackwell memory repair (R575+)
    ("performance_state", to_pstate, "performancestate"),  # "Performance State : P0" / <performance_state>
    ("utilization_gpu_pct", to_float, "utilization/gpuutil utilization/gpu"),  # "23 %"
]

_THROTTLE = {
    "gpuidle": "gpu_idle", "idle": "gpu_idle",
    "applicationsclockssetting": "applications_clocks_setting",
    "swpowercap": "sw_power_cap", "hwslowdown": "hw_slowdown", "syncboost": "sync_boost",
    "swthermalslowdown": "sw_thermal_slowdown", "hwthermalslowdown": "hw_thermal_slowdown",
    "hwpowerbrakeslowdown": "hw_power_brake_slowdown",
    "displayclockssetting": "display_clocks_setting", "displayclocksetting": "display_clocks_setting",
}
_FABRIC = {
    "completed": "completed", "inprogress": "in_progress", "notstarted": "not_started",
    "na": "not_supported", "notsupported": "not_supported",
}
# nvidia-smi's words -> the NVML probe's names (lower-cased NVML_GPU_RECOVERY_ACTION_* suffixes).
_RECOVERY = {
    "none": "none", "reset": "gpu_reset", "gpureset": "gpu_reset", "reboot": "node_reboot",
    "nodereboot": "node_reboot", "drainp2p": "drain_p2p", "drainandreset": "drain_and_reset",
}
_ECC_CORRECTED = ("sramcorrectable", "dramcorrectable")
_ECC_UNCORRECTED = ("sramuncorrectable", "sramuncorrectableparity", "sramuncorrectablesecded",
                    "dramuncorrectable")


def _first(tree: Node, convert: Callable[[str | None], object], paths: str) -> object:
    for path in paths.split():
        value = convert(tree.get(*path.split("/")))
        if value is not None:
            return value
    return None


def _path_error(tree: Node, path: str) -> str | None:
    """The tool error at ``path`` or at a section above it ("ECC Mode : Unknown Error")."""
    keys = path.split("/")
    for depth in range(len(keys), 0, -1):
        error = tool_error(tree.get(*keys[:depth]))
        if error:
            return error
    return None


def _block_error(node: Node | None) -> str | None:
    """The first tool error in a section or anywhere below it."""
    if node is None:
        return None
    for item in [node] + node.walk():
        error = tool_error(item.value)
        if error:
            return error
    return None


def _sum(node: Node, keys: tuple[str, ...]) -> int | None:
    values = [v for v in (to_int(node.get(k)) for k in keys) if v is not None]
    return sum(values) if values else None


def _bit_total(node: Node | None) -> int | None:
    """Old schema (pre-Ampere, and Volta even on R580): the ``Total`` of a Single/Double Bit block."""
    if node is None:
        return None
    total = to_int(node.get("total"))
    if total is not None:
        return total
    return _sum(node, tuple(c.key for c in node.children))


def ecc_counts(node: Node | None) -> tuple[int | None, int | None]:
    """(corrected, uncorrected) of a Volatile or Aggregate block, old or new schema."""
    if node is None:
        return None, None
    single, double = node.child("singlebit"), node.child("doublebit")
    if single is not None or double is not None:
        return _bit_total(single), _bit_total(double)
    return _sum(node, _ECC_CORRECTED), _sum(node, _ECC_UNCORRECTED)


def throttle_reasons(tree: Node) -> list[str] | None:
    """Active reasons of ``clocks_event_reasons`` (new) or ``clocks_throttle_reasons`` (old)."""
    block = tree.child("clockseventreasons") or tree.child("clocksthrottlereasons")
    if block is None:
        return None
    active: set[str] = set()
    seen = False
    for node in block.walk():
        key = re.sub(r"^clocks(?:event|throttle)reason", "", node.key)
        name, state = _THROTTLE.get(key), to_bool(node.value)
        if name and state is not None:
            seen = True
            if state:
                active.add(name)
    return [r for r in THROTTLE_REASONS if r in active] if seen else None


def processes(tree: Node) -> list[GpuProcess] | None:
    """XML ``process_info`` elements or text ``Process ID`` entries; ``None``/empty -> []."""
    block = tree.child("processes")
    if block is None:
        return None
    if not block.children and (block.value or "").strip().lower() not in ("", "none"):
        return None  # "N/A" and the like
    found = []
    for node in block.children:
        if node.key == "processinfo":
            pid, name, mem = node.get("pid"), node.get("processname"), node.get("usedmemory")
        elif node.key == "processid":
            pid, name, mem = node.value, node.get("name"), node.get("usedgpumemory")
        else:
            continue
        if to_int(pid) is not None:
            found.append(GpuProcess(pid=to_int(pid), name=clean(name), used_memory_mib=to_float(mem)))
    return found


# the Fabric section's Health lines (text label / XML tag, normalised) -> GpuInfo.fabric_health key
_FABRIC_HEALTH = {"summary": "summary", "bandwidth": "bandwidth", "routerecoveryinprogress": "route_recovery",
                  "routeunhealthy": "route_unhealthy", "accesstimeoutrecovery": "access_timeout_recovery",
                  "incorrectconfiguration": "incorrect_configuration", "partitionassigned": "partition_assigned"}
_CANONICAL = re.compile(r"[^a-z0-9]+")


def fabric_health(tree: Node) -> dict[str, str] | None:
    """The reported fields of ``Fabric / Health`` (R570+), canonical as the NVML probe writes them
    ("Unhealthy" -> "unhealthy", "Full" -> "full", "False" -> "false", "Incorrect SysGUID" ->
    "incorrect_sysguid"); N/A lines and tool errors are left out. None when nothing is reported."""
    block = tree.child("fabric", "health")
    if block is None:
        return None
    found: dict[str, str] = {}
    for node in block.children:
        key = _FABRIC_HEALTH.get(node.key)
        value = clean(node.value)
        if key is None or value is None or tool_error(node.value):
            continue
        canonical = _CANONICAL.sub("_", value.lower()).strip("_")
        found[key] = {"yes": "true", "no": "false"}.get(canonical, canonical)
    return found or None


def _recovery(tree: Node) -> tuple[str | None, bool | None]:
    """(recovery_action as snake_case, reset_required) from GPU Reset Status / GPU Recovery Action."""
    raw = clean(tree.get("gpurecoveryaction"))  # None, Reset, Reboot, Drain P2P, Drain and Reset
    action = None
    if raw:
        action = _RECOVERY.get(norm_key(raw)) or re.sub(r"[^a-z0-9]+", "_", raw.lower()).strip("_")
        action = action or None
    flags = [to_bool(tree.get("gpuresetstatus", "resetrequired")),
             to_bool(tree.get("gpuresetstatus", "drainandresetrecommended"))]
    if action is not None:
        flags.append(action != "none")
    if True in flags:
        return action, True
    return action, (False if False in flags else None)


def build_gpu(index: int, raw: RawGpu, driver: str | None, cuda: str | None) -> GpuInfo:
    """Read every GpuInfo fact from one GPU tree (either format)."""
    gpu = GpuInfo(index=index, driver_version=driver, cuda_driver_version=cuda)
    tree = raw.tree
    bus = raw.bus_id
    if tree is not None and not bus:
        bus = clean(tree.get("pci", "pcibusid")) or clean(tree.get("pci", "busid"))
    gpu.pci_bus_id = normalize_pci_bus_id(bus)
    if raw.error:
        gpu.lost, gpu.error = True, raw.error
    if tree is None:
        return gpu
    errors: dict[str, str] = {}
    for name, convert, paths in _SCALARS:
        value = _first(tree, convert, paths)
        setattr(gpu, name, value)
        if value is None:
            _note(errors, name, *(_path_error(tree, p) for p in paths.split()))
    for scope in ("volatile", "aggregate"):
        block = tree.child("eccerrors", scope)
        counts = ecc_counts(block)
        for kind, value in zip(("corrected", "uncorrected"), counts):
            setattr(gpu, f"ecc_{kind}_{scope}", value)
            if value is None:
                _note(errors, f"ecc_{kind}_{scope}", tool_error(tree.get("eccerrors")), _block_error(block))
    _sram(tree, gpu, errors)
    pending_keys = ("pendingblacklist", "pendingretirement", "pendingpageblacklist", "pendingpageretirement")
    pending = [to_bool(tree.get("retiredpages", k)) for k in pending_keys]
    gpu.retired_pages_pending = True if True in pending else (False if False in pending else None)
    if gpu.retired_pages_pending is None:
        _note(errors, "retired_pages_pending", *(_path_error(tree, f"retiredpages/{k}") for k in pending_keys))
    gpu.throttle_reasons = throttle_reasons(tree)
    if gpu.throttle_reasons is None:
        _note(errors, "throttle_reasons", _block_error(tree.child("clockseventreasons")),
              _block_error(tree.child("clocksthrottlereasons")))
    gpu.processes = processes(tree)
    if gpu.processes is None:
        _note(errors, "processes", tool_error(tree.get("processes")))
    state = tree.get("fabric", "state")
    if state is not None:
        gpu.fabric_state = _FABRIC.get(norm_key(_ANNOTATION.sub("", state)))
    if gpu.fabric_state is None:
        _note(errors, "fabric_state", _path_error(tree, "fabric/state"))
    gpu.fabric_health = fabric_health(tree)
    if gpu.fabric_health is None:
        _note(errors, "fabric_health", _block_error(tree.child("fabric", "health")))
    gpu.recovery_action, gpu.reset_required = _recovery(tree)
    if gpu.recovery_action is None:
        _note(errors, "recovery_action", tool_error(tree.get("gpurecoveryaction")))
    if gpu.reset_required is None:
        _note(errors, "reset_required", _block_error(tree.child("gpuresetstatus")))
    gpu.field_errors = errors
    if any("requires reset" in e.lower() for e in errors.values()):
        gpu.reset_required = True  # as the NVML probe does for NVML_ERROR_RESET_REQUIRED
    if gpu.remap_pending:  # a pending row remap takes effect only at the next GPU reset (as NVML probe)
        gpu.reset_required = True
    return gpu


# "Aggregate Uncorrectable SRAM Sources" (R550+; XML aggregate_uncorrectable_sram_sources) -> sram_sources keys
_SRAM_SOURCES = (("sraml2", "l2"), ("sramsm", "sm"), ("srammicrocontroller", "microcontroller"),
                 ("srampcie", "pcie"), ("sramother", "other"))


def _sram(tree: Node, gpu: GpuInfo, errors: dict[str, str]) -> None:
    """SRAM ECC facts of the ECC Errors block: R550+ splits "SRAM Uncorrectable Parity" and
    "SRAM Uncorrectable SEC-DED" and prints "SRAM Threshold Exceeded" (under Aggregate) and the
    aggregate sources; R535/R545 print one "SRAM Uncorrectable" count per scope. (These counts are also
    summed into ecc_uncorrected_*, as nvidia-smi's totals are.)"""
    ecc = tree.child("eccerrors")
    if ecc is None:
        return
    for scope in ("volatile", "aggregate"):
        block = ecc.child(scope)
        if block is None:
            continue
        parity, secded = to_int(block.get("sramuncorrectableparity")), to_int(block.get("sramuncorrectablesecded"))
        setattr(gpu, f"sram_parity_{scope}", parity)
        setattr(gpu, f"sram_secded_{scope}", secded)
        total = to_int(block.get("sramuncorrectable"))
        if total is None and (parity is not None or secded is not None):
            total = (parity or 0) + (secded or 0)
        setattr(gpu, f"sram_uncorrectable_{scope}", total)
        for name, key in ((f"sram_parity_{scope}", "sramuncorrectableparity"),
                          (f"sram_secded_{scope}", "sramuncorrectablesecded")):
            if getattr(gpu, name) is None:
                _note(errors, name, tool_error(block.get(key)))
        if total is None:
            _note(errors, f"sram_uncorrectable_{scope}", tool_error(block.get("sramuncorrectable")),
                  tool_error(block.get("sramuncorrectableparity")), tool_error(block.get("sramuncorrectablesecded")),
                  tool_error(ecc.value))
    raw_flag = ecc.get("aggregate", "sramthresholdexceeded") or ecc.get("sramthresholdexceeded") \
        or ecc.get("volatile", "sramthresholdexceeded")
    gpu.sram_threshold_exceeded = to_bool(raw_flag)
    if gpu.sram_threshold_exceeded is None:
        _note(errors, "sram_threshold_exceeded", tool_error(raw_flag))
    sources = ecc.child("aggregateuncorrectablesramsources")
    if sources is not None:
        found = {name: to_int(sources.get(key)) for key, name in _SRAM_SOURCES}
        gpu.sram_sources = {k: v for k, v in found.items() if v is not None} or None
        if gpu.sram_sources is None:
            _note(errors, "sram_sources", _block_error(sources))


def _note(errors: dict[str, str], name: str, *found: str | None) -> None:
    """Record the first tool error found for field ``name``."""
    error = next((e for e in found if e), None)
    if error:
        errors[name] = error


# --------------------------------------------------------------------------------------- dispatch

_XML_START = re.compile(r"<\?xml|<!DOCTYPE|<nvidia_smi_log\b", re.IGNORECASE)
_TEXT_GPU_HEADER = re.compile(r"^GPU\s*[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]\s*$",
                              re.MULTILINE)
# [^\S\n]: blanks within the line only (\s would let every line start rescan all following blank lines)
_TABLE_ROW = re.compile(r"^[^\S\n]*\|.*\|[^\S\n]*$|^[^\S\n]*\+[-=+]{10,}", re.MULTILINE)


def _looks_like_summary(text: str) -> bool:
    if _TEXT_GPU_HEADER.search(text):
        return False
    return "NVIDIA-SMI" in text and len(_TABLE_ROW.findall(text)) >= 3


def parse_nvidia_smi(text: str) -> NvidiaSmiResult:
    """Parse one recorded ``nvidia-smi -q -x`` or ``nvidia-smi -q`` output (or an error-only one).

    Raises :class:`ParseError` for empty input, the summary table, malformed/truncated XML and text
    in which no GPU block can be identified.
    """
    if not isinstance(text, str):
        raise ParseError(f"expected text, got {type(text).__name__}")
    check_size(text, "nvidia-smi output", MAX_INPUT_CHARS)
    if not text.strip():
        raise ParseError("empty nvidia-smi output")
    start = _XML_START.search(text)
    if start is not None:
        header, raws = nvidia_smi_xml.parse_xml_tree(text[start.start():])
        # Error lines printed before the XML (stderr mixed in) name GPUs the XML could not show.
        _, before = nvidia_smi_text.parse_text_tree(text[:start.start()], errors_only=True)
        known = {normalize_pci_bus_id(r.bus_id) for r in raws}
        raws += [r for r in before if normalize_pci_bus_id(r.bus_id) not in known]
        fmt = "xml"
    elif _looks_like_summary(text):
        raise ParseError(SUMMARY_MESSAGE)
    else:
        header, raws = nvidia_smi_text.parse_text_tree(text)
        fmt = "text"
    if len(raws) > MAX_GPUS:
        raise ParseError(f"nvidia-smi output: {len(raws)} GPUs, more than {MAX_GPUS} (not a real output)")
    driver = clean(header.get("driverversion"))
    cuda = clean(header.get("cudaversion"))
    gpus = [build_gpu(i, raw, driver, cuda) for i, raw in enumerate(raws)]
    return NvidiaSmiResult(gpus=gpus, driver_version=driver, cuda_version=cuda,
                           timestamp=clean(header.get("timestamp")), format=fmt)
