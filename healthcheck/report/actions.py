"""What to do about a finding, and which metrics are performance figures or error counters. Data, pure.

``ACTIONS`` maps a check (the names of docs/checks.md) and, optionally, a word of its message to the
action an operator takes. The first row whose check matches and whose message word (case-insensitive)
is in the message wins, so specific rows come before the check's catch-all row (word ``None``).
"""
from __future__ import annotations

import re

from ..history import rollups as _rollups

ACTIONS: tuple[tuple[str, str | None, str], ...] = (
    ("gpu.row_remap", "failure", "RMA the GPU (row remapping failed: a bank ran out of spare rows)"),
    ("gpu.row_remap", "pending", "reset the GPU (nvidia-smi -r -i <gpu>) or reboot, so the pending remap takes effect"),
    ("gpu.row_remap", None, "RMA the GPU (uncorrectable remapped rows at the limit)"),
    ("gpu.ecc.uncorrected", None, "reset the GPU or reboot (remaps the bad rows); RMA if it recurs after the reset"),
    ("gpu.ecc.corrected", None, "watch the growth; run the memory burn-in; RMA if the rate keeps climbing"),
    ("gpu.ecc.mode", None, "enable ECC (nvidia-smi -e 1) and reset the GPU"),
    ("gpu.retired_pages", "pending", "reboot (or reset the GPU) so the pending page retirement takes effect"),
    ("gpu.retired_pages", None, "RMA the GPU (retired pages at the limit)"),
    ("gpu.reset_required", None, "reset the GPU (nvidia-smi -r) or reboot"),
    ("gpu.lost", None, "reboot the node; RMA the GPU if it falls off the bus again"),
    ("gpu.responsive", None, "the driver is wedged: reboot the node; collect a bundle first (healthcheck collect)"),
    ("gpu.count", None, "reboot; if a GPU is still missing, reseat it or its riser, then RMA"),
    ("gpu.fabric", None, "restart nvidia-fabricmanager and check the NVSwitch trays; reboot if it does not register"),
    ("gpu.nvlink.state", None, "reset the GPU; if the link stays down, reseat the board or RMA the baseboard"),
    ("gpu.nvlink.errors", None, "run the NVLink bandwidth burn-in; reseat or RMA if CRC/replay errors keep growing"),
    ("gpu.pcie.link", None, "reseat the GPU or its riser/cable; check the BIOS PCIe settings"),
    ("gpu.pcie.replays", None, "reseat the GPU or riser; RMA if replays keep growing"),
    ("gpu.persistence", None, "enable persistence mode (systemctl enable --now nvidia-persistenced)"),
    ("gpu.power", None, "check the power supplies and the power cap (nvidia-smi -q -d POWER)"),
    ("gpu.temperature", None, "check the cooling: fans, airflow, inlet temperature, blanking panels"),
    ("gpu.throttle", None, "check cooling and power: see the active clock-event reasons"),
    ("gpu.memory_used", None, "find and stop the process holding GPU memory, or reset the GPU"),
    ("gpu.processes", None, "stop the leftover GPU processes; check the epilog"),
    ("gpu.xid", None, "look the Xid up in NVIDIA's Xid catalogue; reset the GPU or reboot, RMA if it repeats"),
    ("ib.port.state", "down", "reseat/replace the cable or transceiver; check the switch port"),
    ("ib.port.state", "init", "check the subnet manager (the port is up but not configured)"),
    ("ib.port.state", None, "reseat/replace the cable or transceiver; check the switch port and the subnet manager"),
    ("ib.port.rate", None, "reseat/replace the cable; check the switch port speed"),
    ("ib.port.errors", None, "replace the cable or transceiver if the error counters keep growing"),
    ("ib.hca.firmware", None, "update the HCA firmware to the expected version (mlxfwmanager)"),
    ("pcie.hca.link", None, "reseat the HCA; check its slot's PCIe settings"),
    ("host.memory", None, "check the DIMMs (a failed DIMM lowers the total); replace it"),
    ("host.cpu", None, "check the BIOS (SMT, sockets) and the CPU model against the node class"),
    ("host.disk", None, "free space on the filesystem (scratch, logs, core dumps)"),
    ("host.mounts", None, "remount the filesystem; check the storage network"),
    ("host.services", None, "restart the service and look at its logs"),
    ("host.swap", None, "check what is swapping; disable swap if the node class expects none"),
    ("host.load", None, "find the runaway processes"),
    ("sw.versions", None, "install the expected driver/firmware/software versions"),
    ("job.stray_processes", None, "stop the leftover processes; check the job's cleanup and the epilog"),
    ("job.counter_growth", None, "an error counter grew during a job: act as for the counter's own check"),
    ("slurm.drain_cap", None, "held back by the drain cap: one check fails on many nodes; fix the expectation "
                              "(or the fault shared by them), then resume; raise drain_cap_nodes only if the "
                              "nodes are really bad"),
)
DEFAULT_ACTION = "investigate: read the message, rerun `healthcheck check` on the node"

# Metric names that are performance figures (distributions) and on which side a value is bad.
PERF_PATTERNS: tuple[tuple[str, bool], ...] = (  # (regular expression, low value is bad)
    (r"busbw|bus_bw|algbw|bandwidth|_gbs$|gb_s$", True),
    (r"tflops|gflops", True),
    (r"temperature|temp_c$", False),
    (r"power_draw", False),
)
# Error counters (growth rates): the history's rollups keep per-value levels of exactly these names, so
# the patterns live there (healthcheck.history.rollups.COUNTER_PATTERNS; changing them means a rebuild).
COUNTER_PATTERNS = _rollups.COUNTER_PATTERNS
_PERF = [(re.compile(p, re.I), low) for p, low in PERF_PATTERNS]

GROWTH_ACTIONS: tuple[tuple[str, str], ...] = (  # (regular expression on the metric name, action)
    (r"^ecc_uncorrected|^remap_uncorrectable|retired_pages", "drain and reset the GPU; RMA if uncorrected errors recur"),
    (r"^ecc_corrected|^remap_correctable", "run the memory burn-in; RMA if the correctable error rate keeps climbing"),
    (r"^nvlink_", "run the NVLink bandwidth burn-in; reseat or RMA if link errors keep growing"),
    (r"replay", "reseat the GPU or riser; RMA if PCIe replays keep growing"),
    (r"^xid", "look the Xids up in NVIDIA's catalogue; reset or reboot, RMA if they repeat"),
    (r"symbol_error|link_downed|link_error_recovery|rcv|integrity|overrun|discards",
     "replace the IB cable or transceiver; check the switch port"),
)
OUTLIER_ACTIONS: tuple[tuple[str, str], ...] = (
    (r"busbw|bus_bw|algbw|bandwidth|gb_?s$", "run nccl-tests on the node and its peers; check NVLink and IB links"),
    (r"tflops|gflops", "run the GEMM burn-in; check clocks, throttling and the power cap"),
    (r"temp", "check the cooling: fans, airflow, inlet temperature"),
    (r"power", "check the power cap and the power supplies"),
)


def recommend(check: str, message: str | None = None) -> str:
    """The action for a failing/warning result of ``check`` with ``message``."""
    text = (message or "").lower()
    for name, word, action in ACTIONS:
        if name == check and (word is None or word in text):
            return action
    return DEFAULT_ACTION


def recommend_error(check: str, message: str | None = None) -> str:
    """The action for an ERROR result of ``check``: the checker could not judge (not a node fault)."""
    from ..output.render import error_advice  # noqa: PLC0415 - one rule for the CLI's text and the report

    return "could not judge: " + error_advice(check, message or "")


def _first(table: tuple[tuple[str, str], ...], metric: str, default: str) -> str:
    return next((action for pattern, action in table if re.search(pattern, metric, re.I)), default)


def recommend_growth(metric: str) -> str:
    """The action for an error counter that keeps growing."""
    return _first(GROWTH_ACTIONS, metric, DEFAULT_ACTION)


def recommend_outlier(metric: str) -> str:
    """The action for a node whose performance figure is an outlier among its peers."""
    return _first(OUTLIER_ACTIONS, metric, "rerun the burn-in on the node and compare with its peers")


def perf_metric(name: str) -> bool:
    """True for performance figures shown as fleet distributions."""
    return any(rx.search(name) for rx, _ in _PERF)


def low_is_bad(name: str) -> bool:
    """For a performance figure: True when a low value is the bad side (bandwidth), False when high is."""
    return next((low for rx, low in _PERF if rx.search(name)), True)


def counter_metric(name: str) -> bool:
    """True for error counters whose growth the report plots and ranks."""
    return _rollups.is_counter(name)
