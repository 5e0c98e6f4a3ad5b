"""A verdict in the Prometheus text exposition format (0.0.4), for node_exporter's textfile collector.

The metric names are a contract (docs/prometheus.md lists every family; a test keeps the two equal):

- ``healthcheck_check_status{node,check,component[,gpu,UUID]}``: one gauge per check and component,
  the status as a value: 0 pass, 1 warn, 2 fail, 3 error (the checker could not judge), 4 skip. No
  status label, so a series never changes identity when its status changes.
- ``healthcheck_node_status{node,context}`` (same codes), ``healthcheck_run_duration_seconds{node}``,
  ``healthcheck_last_run_timestamp_seconds{node}``.
- one family per numeric metric of a check (:data:`FAMILIES`), in base units (MiB -> bytes,
  GiB -> bytes, ms -> seconds, percent -> ratio, Gb/s -> bytes per second), hardware error counters as
  counters ending in ``_total``; the HELP text is the metric's meaning plus the check's description from
  the check catalog.

GPU components (``gpu3``) also carry ``gpu="3"`` and, when the snapshot is given, ``UUID="GPU-..."``:
dcgm-exporter's label names, so ``on(UUID)`` joins its series with ours.

Not on the Slurm hooks' path (they never render Prometheus): ``healthcheck.output.render`` imports this module
only when asked for this format.
"""
from __future__ import annotations

import math
import re
from datetime import datetime

from ..core.model import Status, Verdict, worst
from ..core.textsafe import clean

# The status as a value (docs/prometheus.md): compare with ==, never aggregate with max().
STATUS_CODE = {Status.PASS: 0, Status.WARN: 1, Status.FAIL: 2, Status.ERROR: 3, Status.SKIP: 4}
STATUS_HELP = "0 pass, 1 warn, 2 fail, 3 error (the checker could not judge), 4 skip"

MIB, GIB = float(1 << 20), float(1 << 30)
GBIT_S = 1e9 / 8  # Gb/s -> bytes per second
PCT = 0.01        # percent -> ratio


class Family:
    """One metric family: the checks and metric keys it is made of, its name, type, the factor that
    turns the check's unit into the base unit, what one sample means, and (for keys of a pattern such as
    ``xid_(\\d+)``) the label that takes the pattern's group."""
    __slots__ = ("checks", "key", "name", "type", "scale", "what", "label", "pattern")

    def __init__(self, checks: str, key: str, name: str, type_: str, scale: float, what: str,
                 label: str | None = None):
        self.checks = tuple(checks.split(","))
        self.key = key
        self.name = name
        self.type = type_
        self.scale = scale
        self.what = what
        self.label = label
        self.pattern = re.compile(key) if label else None


G, C = "gauge", "counter"
F = Family
# (checks, metric key or pattern, family, type, scale, meaning[, label taking the pattern's group])
FAMILIES: tuple[Family, ...] = (
    # GPUs: inventory
    F("gpu.count", "count", "healthcheck_gpus", G, 1, "GPUs the driver sees"),
    F("gpu.count", "expected", "healthcheck_gpus_expected", G, 1, "GPUs the node class expects"),
    F("gpu.count,gpu.responsive", "pci_count|gpus_on_pci_bus", "healthcheck_gpu_pci_devices", G, 1,
      "NVIDIA GPUs on the PCI bus (whether or not the driver answers)"),
    F("gpu.responsive", "probe_s", "healthcheck_gpu_probe_duration_seconds", G, 1,
      "How long the GPU probe took"),
    F("gpu.fabric", "fabric_completed", "healthcheck_gpu_fabric_completed", G, 1,
      "1 when the GPU's fabric (NVSwitch) registration completed, else 0"),
    F("gpu.persistence", "persistence_mode", "healthcheck_gpu_persistence_mode", G, 1,
      "1 when persistence mode is on, else 0"),
    F("gpu.reset_required", "reset_required", "healthcheck_gpu_reset_required", G, 1,
      "1 when the driver says the GPU needs a reset, else 0"),
    F("gpu.processes", "processes", "healthcheck_gpu_processes", G, 1, "Processes running on the GPU"),
    F("gpu.memory_used", "memory_used_mib", "healthcheck_gpu_memory_used_bytes", G, MIB, "GPU memory in use"),
    F("gpu.memory_used", "memory_total_mib", "healthcheck_gpu_memory_size_bytes", G, MIB, "GPU memory size"),
    # GPUs: memory errors
    F("gpu.ecc.mode", "ecc_enabled", "healthcheck_gpu_ecc_enabled", G, 1, "1 when ECC is enabled, else 0"),
    F("gpu.ecc.corrected", "ecc_corrected_volatile", "healthcheck_gpu_ecc_corrected_volatile_errors_total", C, 1,
      "Corrected ECC errors since the driver loaded"),
    F("gpu.ecc.corrected", "ecc_corrected_aggregate", "healthcheck_gpu_ecc_corrected_aggregate_errors_total", C,
      1, "Corrected ECC errors over the GPU's life"),
    F("gpu.ecc.uncorrected", "ecc_uncorrected_volatile",
      "healthcheck_gpu_ecc_uncorrected_volatile_errors_total", C, 1,
      "Uncorrected ECC errors since the driver loaded"),
    F("gpu.ecc.uncorrected", "ecc_uncorrected_aggregate",
      "healthcheck_gpu_ecc_uncorrected_aggregate_errors_total", C, 1, "Uncorrected ECC errors over the GPU's life"),
    F("gpu.ecc.sram", "sram_uncorrectable_volatile", "healthcheck_gpu_sram_uncorrectable_volatile_errors_total",
      C, 1, "Uncorrectable SRAM ECC errors since the driver loaded"),
    F("gpu.ecc.sram", "sram_uncorrectable_aggregate",
      "healthcheck_gpu_sram_uncorrectable_aggregate_errors_total", C, 1,
      "Uncorrectable SRAM ECC errors over the GPU's life"),
    F("gpu.ecc.sram", "sram_parity_aggregate", "healthcheck_gpu_sram_parity_aggregate_errors_total", C, 1,
      "Uncorrectable SRAM parity errors over the GPU's life"),
    F("gpu.ecc.sram", "sram_secded_aggregate", "healthcheck_gpu_sram_secded_aggregate_errors_total", C, 1,
      "Uncorrectable SRAM SEC-DED errors over the GPU's life"),
    F("gpu.ecc.sram", "sram_threshold_exceeded", "healthcheck_gpu_sram_threshold_exceeded", G, 1,
      "1 when the driver flags the SRAM error threshold as exceeded, else 0"),
    F("gpu.retired_pages", "retired_pages_sbe", "healthcheck_gpu_retired_pages_single_bit", G, 1,
      "Pages retired for single-bit errors"),
    F("gpu.retired_pages", "retired_pages_dbe", "healthcheck_gpu_retired_pages_double_bit", G, 1,
      "Pages retired for double-bit errors"),
    F("gpu.retired_pages", "retired_pages_pending", "healthcheck_gpu_retired_pages_pending", G, 1,
      "1 when a page retirement waits for a GPU reset, else 0"),
    F("gpu.retired_pages", "retired_pages_total", "healthcheck_gpu_retired_pages", G, 1, "Pages retired"),
    F("gpu.row_remap", "remap_correctable", "healthcheck_gpu_remapped_rows_correctable", G, 1,
      "Rows remapped for correctable errors"),
    F("gpu.row_remap", "remap_uncorrectable", "healthcheck_gpu_remapped_rows_uncorrectable", G, 1,
      "Rows remapped for uncorrectable errors"),
    F("gpu.row_remap", "remap_pending", "healthcheck_gpu_row_remap_pending", G, 1,
      "1 when a row remap waits for a GPU reset, else 0"),
    F("gpu.row_remap", "remap_failure", "healthcheck_gpu_row_remap_failure", G, 1,
      "1 when a row remap failed, else 0"),
    # GPUs: links
    F("gpu.nvlink.state", "nvlinks_active", "healthcheck_gpu_nvlinks_active", G, 1, "NVLinks up"),
    F("gpu.nvlink.state", "nvlinks_total", "healthcheck_gpu_nvlinks", G, 1, "NVLinks of the GPU"),
    F("gpu.nvlink.errors", "nvlink_crc_errors", "healthcheck_gpu_nvlink_crc_errors_total", C, 1,
      "NVLink CRC errors, summed over the GPU's links"),
    F("gpu.nvlink.errors", "nvlink_replay_errors", "healthcheck_gpu_nvlink_replay_errors_total", C, 1,
      "NVLink replay errors, summed over the GPU's links"),
    F("gpu.nvlink.errors", "nvlink_recovery_errors", "healthcheck_gpu_nvlink_recovery_errors_total", C, 1,
      "NVLink recovery errors, summed over the GPU's links"),
    F("gpu.pcie.link", "pcie_gen", "healthcheck_gpu_pcie_link_generation", G, 1, "Current PCIe generation"),
    F("gpu.pcie.link", "pcie_gen_max", "healthcheck_gpu_pcie_link_max_generation", G, 1, "Maximum PCIe generation"),
    F("gpu.pcie.link", "pcie_width", "healthcheck_gpu_pcie_link_width", G, 1, "Current PCIe link width (lanes)"),
    F("gpu.pcie.link", "pcie_width_max", "healthcheck_gpu_pcie_link_max_width", G, 1,
      "Maximum PCIe link width (lanes)"),
    F("gpu.pcie.replays", "pcie_replay_count", "healthcheck_gpu_pcie_replays_total", C, 1, "PCIe replays"),
    # GPUs: thermal and power
    F("gpu.temperature", "temperature_c", "healthcheck_gpu_temperature_celsius", G, 1, "GPU temperature"),
    F("gpu.temperature", "mem_temperature_c", "healthcheck_gpu_memory_temperature_celsius", G, 1,
      "GPU memory (HBM) temperature"),
    F("gpu.temperature", "temp_tlimit_margin_c", "healthcheck_gpu_slowdown_margin_celsius", G, 1,
      "Margin to the slowdown temperature (T.Limit)"),
    F("gpu.power", "power_draw_w", "healthcheck_gpu_power_draw_watts", G, 1, "GPU power draw"),
    F("gpu.power", "power_limit_w", "healthcheck_gpu_power_limit_watts", G, 1, "GPU power limit"),
    F("gpu.throttle", "throttle_fail_reasons", "healthcheck_gpu_throttle_fail_reasons", G, 1,
      "Active clock throttle reasons that fail the check"),
    F("gpu.throttle", "throttle_warn_reasons", "healthcheck_gpu_throttle_warn_reasons", G, 1,
      "Active clock throttle reasons that warn"),
    F("gpu.stalled", "utilization_gpu_pct", "healthcheck_gpu_stalled_utilization_ratio", G, PCT,
      "GPU utilisation while judged for a stall"),
    F("gpu.stalled", "power_draw_w", "healthcheck_gpu_stalled_power_draw_watts", G, 1,
      "GPU power draw while judged for a stall"),
    F("gpu.stalled", "stalled_samples", "healthcheck_gpu_stalled_samples", G, 1,
      "Samples that looked stalled (busy at idle power)"),
    # GPUs: kernel log
    F("gpu.xid", "xid_events", "healthcheck_gpu_xid_events", G, 1,
      "Xid events in the kernel log the policy judges (not acknowledged)"),
    F("gpu.xid", "xid_acknowledged", "healthcheck_gpu_xid_acknowledged_events", G, 1,
      "Xid events in the kernel log acknowledged by an admin"),
    F("gpu.xid", r"xid_(\d+)", "healthcheck_gpu_xid_code_events", G, 1,
      "Xid events in the kernel log the policy judges, by Xid code", "xid"),
    # host
    F("host.cpu", "cpu_sockets", "healthcheck_host_cpu_sockets", G, 1, "CPU sockets"),
    F("host.cpu", "cpu_cores", "healthcheck_host_cpu_cores", G, 1, "CPU cores"),
    F("host.cpu", "cpu_threads", "healthcheck_host_cpu_threads", G, 1, "CPU hardware threads"),
    F("host.memory", "mem_total_gib", "healthcheck_host_memory_size_bytes", G, GIB, "Host memory size"),
    F("host.memory", "mem_available_gib", "healthcheck_host_memory_available_bytes", G, GIB,
      "Host memory available"),
    F("host.memory", "mem_available_fraction", "healthcheck_host_memory_available_ratio", G, 1,
      "Host memory available, as a fraction of its size"),
    F("host.swap", "swap_total_gib", "healthcheck_host_swap_size_bytes", G, GIB, "Swap size"),
    F("host.swap", "swap_used_fraction", "healthcheck_host_swap_used_ratio", G, 1, "Swap used, as a fraction"),
    F("host.disk", "free_gib", "healthcheck_host_filesystem_free_bytes", G, GIB, "Free space of the filesystem"),
    F("host.disk", "free_fraction", "healthcheck_host_filesystem_free_ratio", G, 1,
      "Free space of the filesystem, as a fraction"),
    F("host.disk", "inodes_free_fraction", "healthcheck_host_filesystem_inodes_free_ratio", G, 1,
      "Free inodes of the filesystem, as a fraction"),
    F("host.load", "load_1m", "healthcheck_host_load1", G, 1, "1-minute load average"),
    F("host.load", "load_per_cpu", "healthcheck_host_load1_per_cpu", G, 1, "1-minute load average per CPU"),
    F("host.edac", "ce_count", "healthcheck_host_edac_corrected_errors_total", C, 1,
      "Corrected memory errors (EDAC) since the counters were reset"),
    F("host.edac", "ue_count", "healthcheck_host_edac_uncorrected_errors_total", C, 1,
      "Uncorrected memory errors (EDAC) since the counters were reset"),
    F("host.edac", "ce_per_day", "healthcheck_host_edac_corrected_errors_per_second", G, 1 / 86400,
      "Rate of corrected memory errors since the counters were reset (a window under a day counts as a day)"),
    F("host.edac", "seconds_since_reset", "healthcheck_host_edac_counters_age_seconds", G, 1,
      "Time since the EDAC counters were reset"),
    F("host.events", "host_events", "healthcheck_host_events", G, 1,
      "Host kernel-log events the policy judges (not acknowledged)"),
    F("host.events", "host_events_acknowledged", "healthcheck_host_acknowledged_events", G, 1,
      "Host kernel-log events acknowledged by an admin"),
    F("host.events", r"host_(\w+)", "healthcheck_host_class_events", G, 1,
      "Host kernel-log events the policy judges, by event class", "class"),
    F("pcie.aer", "fatal", "healthcheck_pcie_aer_fatal_errors_total", C, 1,
      "Uncorrectable fatal PCIe AER errors since boot"),
    F("pcie.aer", "nonfatal", "healthcheck_pcie_aer_nonfatal_errors_total", C, 1,
      "Uncorrectable non-fatal PCIe AER errors since boot"),
    F("pcie.aer", "correctable", "healthcheck_pcie_aer_correctable_errors_total", C, 1,
      "Corrected PCIe AER errors since boot"),
    F("pcie.aer", "functions", "healthcheck_pcie_aer_clean_functions", G, 1,
      "PCIe functions with AER counters and no error to report"),
    F("pcie.hca.link", "gen_current", "healthcheck_hca_pcie_link_generation", G, 1, "Current PCIe generation"),
    F("pcie.hca.link", "gen_max", "healthcheck_hca_pcie_link_max_generation", G, 1, "Maximum PCIe generation"),
    F("pcie.hca.link", "width_current", "healthcheck_hca_pcie_link_width", G, 1, "Current PCIe link width (lanes)"),
    F("pcie.hca.link", "width_max", "healthcheck_hca_pcie_link_max_width", G, 1, "Maximum PCIe link width (lanes)"),
    F("pcie.hca.link", "speed_current_gts", "healthcheck_hca_pcie_link_transfers_per_second", G, 1e9,
      "Current PCIe link speed"),
    # InfiniBand
    F("ib.port.state", "active_ports", "healthcheck_ib_ports_active", G, 1, "InfiniBand ports up"),
    F("ib.port.state", "expected_ports", "healthcheck_ib_ports_expected", G, 1,
      "InfiniBand ports the node class expects up"),
    F("ib.port.rate,ib.port.state", "rate_gbps", "healthcheck_ib_port_rate_bytes_per_second", G, GBIT_S,
      "Port data rate"),
    F("ib.port.rate", "expected_gbps", "healthcheck_ib_port_expected_rate_bytes_per_second", G, GBIT_S,
      "Port data rate the node class expects"),
    F("ib.port.rate", "peer_gbps", "healthcheck_ib_port_peer_rate_bytes_per_second", G, GBIT_S,
      "Data rate of the node's other ports (the rate this port should have)"),
    F("ib.port.errors", r"(?:port_)?(\w+)", "healthcheck_ib_port_errors_total", C, 1,
      "Port error counter from sysfs, by counter name (port_ prefix dropped)", "counter"),
    F("ib.mlxlink", "effective_ber", "healthcheck_ib_mlxlink_effective_bit_error_ratio", G, 1,
      "Effective bit error ratio (after FEC)"),
    F("ib.mlxlink", "raw_ber", "healthcheck_ib_mlxlink_raw_bit_error_ratio", G, 1,
      "Raw bit error ratio (before FEC)"),
    F("ib.mlxlink", "symbol_ber", "healthcheck_ib_mlxlink_symbol_error_ratio", G, 1, "Symbol error ratio"),
    F("ib.mlxlink", "module_temperature_c", "healthcheck_ib_mlxlink_module_temperature_celsius", G, 1,
      "Transceiver module temperature"),
    F("ib.mlxlink", "link_down", "healthcheck_ib_mlxlink_link_down_total", C, 1, "Link down events"),
    F("ib.mlxlink", "link_error_recovery", "healthcheck_ib_mlxlink_link_error_recovery_total", C, 1,
      "Link error recovery events"),
    # storage, BMC
    F("storage.count", "nvme", "healthcheck_storage_nvme_devices", G, 1, "NVMe devices"),
    F("storage.count", "nvme_expected", "healthcheck_storage_nvme_devices_expected", G, 1,
      "NVMe devices the node class expects"),
    F("storage.health", "devices", "healthcheck_storage_devices", G, 1, "NVMe and SATA devices judged"),
    F("storage.health", "media_errors", "healthcheck_storage_media_errors_total", C, 1,
      "Media and data integrity errors over the device's life"),
    F("storage.health", "percentage_used", "healthcheck_storage_endurance_used_ratio", G, PCT,
      "Rated endurance used (may exceed 1)"),
    F("storage.health", "available_spare_pct", "healthcheck_storage_available_spare_ratio", G, PCT,
      "Available spare capacity"),
    F("storage.health", "critical_warning", "healthcheck_storage_critical_warning", G, 1,
      "NVMe critical warning bit field (0 when none)"),
    F("storage.health", "temperature_c", "healthcheck_storage_temperature_celsius", G, 1, "Device temperature"),
    F("storage.health", "smart_passed", "healthcheck_storage_smart_passed", G, 1,
      "1 when the SMART self-assessment passed, else 0"),
    F("bmc.sel", "sel_records", "healthcheck_bmc_sel_records", G, 1, "Records in the BMC's System Event Log"),
    F("bmc.sel", "sel_acknowledged", "healthcheck_bmc_sel_acknowledged_records", G, 1,
      "SEL records acknowledged by an admin"),
    F("bmc.sel", "sel_events", "healthcheck_bmc_sel_events", G, 1, "SEL events the check judges, per component"),
    F("bmc.sdr", "sdr_sensors", "healthcheck_bmc_sdr_sensors", G, 1, "Sensors in the BMC's sensor data records"),
    F("bmc.sdr", "sdr_judged", "healthcheck_bmc_sdr_judged_sensors", G, 1, "Sensors the check judges"),
    # epilog
    F("job.stray_processes", "killed", "healthcheck_job_stray_processes_killed", G, 1,
      "Leftover processes of the job the epilog killed"),
    F("job.stray_processes", "left", "healthcheck_job_stray_processes_left", G, 1,
      "Leftover processes of the job still running"),
    F("job.counter_growth", r"growth_(\w+)", "healthcheck_job_error_growth", G, 1,
      "Growth of an error counter during the job, by counter", "counter"),
)
# Metric keys deliberately not exported, with why.
NOT_EXPORTED = {
    ("gpu.count", "model_count"): "one per GPU model with no model label: the message names the model",
    ("gpu.count", "model_expected"): "as model_count",
}

_BY_KEY: dict[tuple[str, str], Family] = {}
_PATTERNS: dict[str, list[Family]] = {}
for _fam in FAMILIES:
    for _check in _fam.checks:
        if _fam.pattern is None:
            for _key in _fam.key.split("|"):
                _BY_KEY[(_check, _key)] = _fam
        else:
            _PATTERNS.setdefault(_check, []).append(_fam)

_UNIT_SUFFIX = {  # a fallback name's last token -> (base unit, factor)
    "c": ("celsius", 1.0), "w": ("watts", 1.0), "s": ("seconds", 1.0), "sec": ("seconds", 1.0),
    "ms": ("seconds", 1e-3), "us": ("seconds", 1e-6), "ns": ("seconds", 1e-9),
    "kib": ("bytes", 1024.0), "mib": ("bytes", MIB), "gib": ("bytes", GIB),
    "b": ("bytes", 1.0), "kb": ("bytes", 1e3), "mb": ("bytes", 1e6), "gb": ("bytes", 1e9),
    "pct": ("ratio", PCT), "percent": ("ratio", PCT), "fraction": ("ratio", 1.0),
    # GB/s, as nccl-tests and the burn-in judges report bandwidth (InfiniBand's Gb/s rates are listed)
    "gbps": ("bytes_per_second", 1e9),
}
# Tokens promtool's linter rejects inside a name (abbreviated units) or at its end (reserved suffixes).
_ABBREVIATED = {"s", "ms", "us", "ns", "sec", "b", "kb", "mb", "gb", "tb", "pb", "m", "h", "d"}
_RESERVED_END = {"count", "total", "sum", "bucket", "gauge", "counter", "histogram", "summary"}


def fallback_family(check: str, key: str) -> Family:
    """The family of a metric not listed in :data:`FAMILIES` (a check added since): a lint-clean
    gauge ``healthcheck_<check>_<key>`` in base units, the key's words already in the check's name
    dropped (no ``healthcheck_gpu_power_power_draw_w``). Its name is not part of the contract."""
    check_tokens = [t for t in re.split(r"[^a-z0-9]+", check.lower()) if t]
    key_tokens = [t for t in re.split(r"[^a-z0-9]+", key.lower()) if t]
    unit, scale = None, 1.0
    if key_tokens and key_tokens[-1] in _UNIT_SUFFIX:
        unit, scale = _UNIT_SUFFIX[key_tokens.pop()]
    tokens = list(check_tokens)
    for tok in key_tokens:
        if tok not in tokens and tok not in _ABBREVIATED and tok not in ("gauge", "counter"):
            tokens.append(tok)
    tokens = [t for t in tokens if t not in _ABBREVIATED]
    while tokens and tokens[-1] in _RESERVED_END:
        tokens.pop()
    if unit:
        tokens.append(unit)
    name = "_".join(["healthcheck", *tokens])
    if name == "healthcheck":
        name += "_value"
    return Family(check, key, name, G, scale, f"Metric {key!r} of the check (no stable name yet)")


def family_of(check: str, key: str) -> tuple[Family, str | None] | None:
    """(family, value of its extra label) for one metric of one check; None when not exported."""
    if (check, key) in NOT_EXPORTED:
        return None
    fam = _BY_KEY.get((check, key))
    if fam is not None:
        return fam, None
    for fam in _PATTERNS.get(check, ()):
        m = fam.pattern.fullmatch(key)
        if m:
            return fam, m.group(1).lower()
    return fallback_family(check, key), None


def _describe(check: str) -> str:
    """The check's description from the catalog ('' for a check the registry does not know)."""
    from ..checks import registry

    if check not in registry.index():
        return ""
    return registry.spec(check).description


def help_text(fam: Family) -> str:
    unit = fam.name.rsplit("_", 1)[-1]
    parts = [fam.what + (f" ({unit})" if unit in ("celsius", "watts", "bytes", "seconds", "ratio") else "")]
    for check in fam.checks:
        description = _describe(check)
        parts.append(f"Check {check}: {description}" if description else f"Check {check}.")
    return ". ".join(p.rstrip(".") for p in parts) + "."


def _escape_help(text: str) -> str:
    return clean(text).replace("\\", "\\\\").replace("\n", "\\n")


def _label(value: str | None) -> str:
    """A label value: control characters escaped as text first (see :func:`clean`), then the
    exposition format's own escapes (backslash, double quote; no raw newline can remain)."""
    text = "\n".join(clean(part) for part in (value or "").split("\n"))
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _value(value: float) -> str:
    value = float(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


_GPU = re.compile(r"gpu(\d+)")


def _gpu_labels(component: str | None, uuids: dict[int, str]) -> str:
    m = _GPU.fullmatch(component or "")
    if not m:
        return ""
    index = int(m.group(1))
    uuid = uuids.get(index)
    return f',gpu="{index}"' + (f',UUID="{_label(uuid)}"' if uuid else "")


def _uuids(snapshot) -> dict[int, str]:
    out: dict[int, str] = {}
    for gpu in (getattr(snapshot, "gpus", None) or []):
        if getattr(gpu, "uuid", None) and getattr(gpu, "index", None) is not None:
            out[int(gpu.index)] = str(gpu.uuid)
    return out


def _family_block(name: str, help_: str, type_: str, samples: list[str]) -> list[str]:
    return [f"# HELP {name} {_escape_help(help_)}", f"# TYPE {name} {type_}", *samples]


def prometheus(verdict: Verdict, snapshot=None) -> str:
    """The verdict as text exposition format; ``snapshot`` (optional) gives each GPU's UUID."""
    node = _label(verdict.node)
    uuids = _uuids(snapshot)
    statuses: dict[str, list[Status]] = {}  # one series per check and component: its worst status
    metric_samples: dict[str, list[str]] = {}
    families: dict[str, Family] = {}
    seen: set[str] = set()
    for f in verdict.findings:
        comp = f'component="{_label(f.component)}"{_gpu_labels(f.component, uuids)}'
        series = f'healthcheck_check_status{{node="{node}",check="{_label(f.check)}",{comp}}}'
        statuses.setdefault(series, []).append(f.status)
        for key, value in f.metrics.items():
            found = family_of(f.check, key)
            if found is None or value is None:
                continue
            fam, extra = found
            families.setdefault(fam.name, fam)
            extra_label = f',{fam.label}="{_label(extra)}"' if fam.label else ""
            series = f'{fam.name}{{node="{node}",{comp}{extra_label}}}'
            if series in seen:  # the same quantity from two checks (ib.port.rate and ib.port.state)
                continue
            seen.add(series)
            metric_samples.setdefault(fam.name, []).append(f"{series} {_value(float(value) * fam.scale)}")
    status_samples = [f"{series} {STATUS_CODE[worst(found)]}" for series, found in statuses.items()]
    out = _family_block("healthcheck_check_status",
                        f"Result of one check on one component: {STATUS_HELP}", G, status_samples)
    for name in sorted(metric_samples):
        fam = families[name]
        out += _family_block(name, help_text(fam), fam.type, metric_samples[name])
    out += _family_block("healthcheck_node_status", f"Worst status of the run: {STATUS_HELP}", G,
                         [f'healthcheck_node_status{{node="{node}",context="{_label(verdict.context)}"}} '
                          f"{STATUS_CODE[verdict.status]}"])
    out += _family_block("healthcheck_run_duration_seconds", "How long the run took (seconds).", G,
                         [f'healthcheck_run_duration_seconds{{node="{node}"}} {_value(verdict.duration_s)}'])
    try:
        ts = datetime.fromisoformat(verdict.started_at).timestamp()
    except (TypeError, ValueError):
        ts = None
    if ts is not None:
        out += _family_block("healthcheck_last_run_timestamp_seconds",
                             "When the run started (Unix time, seconds).", G,
                             [f'healthcheck_last_run_timestamp_seconds{{node="{node}"}} {_value(round(ts))}'])
    return "\n".join(out) + "\n"
