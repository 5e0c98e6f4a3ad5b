"""Storage checks: NVMe/SATA health (``nvme smart-log``, ``smartctl``) and the NVMe count of the class.

Pure: judge ``snapshot.storage`` (devices listed from sysfs, each with what its health tool said).
One finding per device (``nvme0``, ``sda``); the levels are data (:data:`CRITICAL_WARNING_BITS` and
the thresholds), each with its source in docs/storage-bmc.md.
"""
from __future__ import annotations

from ..core.expectations import Expectations
from ..core.model import Finding, Snapshot, Status, StorageDevice, worst
from .registry import check, finding

CONTEXTS = ("check", "slurm-check")

# NVMe SMART / Health Information log page, byte 0 "Critical Warning" (NVMe Base Specification):
# bit -> (what the controller says, status). Every bit is the drive's own alarm; only
# the temperature bit can be momentary.
CRITICAL_WARNING_BITS = {
    0: ("available spare below its threshold", Status.FAIL),
    1: ("temperature outside its thresholds", Status.WARN),
    2: ("NVM subsystem reliability degraded (media or internal errors)", Status.FAIL),
    3: ("media placed in read-only mode", Status.FAIL),
    4: ("volatile memory backup device failed", Status.FAIL),
    5: ("persistent memory region read-only or unreliable", Status.FAIL),
}
# NVMe controller states (sysfs /sys/class/nvme/nvmeX/state) that mean the controller is unusable
DEAD_STATES = ("dead", "deleting", "deleting (no IO)")


@check("storage.health", needs=("storage",), contexts=CONTEXTS,
       thresholds={"max_media_errors": 0, "warn_percentage_used": 80, "fail_percentage_used": 100,
                   "warn_spare_pct": 20, "warn_pending_sectors": 1, "warn_reallocated_sectors": 1},
       fails_by_default=True,
       fails_on="SMART overall-health FAILED, an NVMe critical warning (spare, reliability, read-only, "
                "backup), media errors, available spare below the drive's threshold, wear at "
                "fail_percentage_used, failing ATA attributes, an NVMe controller dead")
def health(snap: Snapshot, exp: Expectations, t: dict) -> list[Finding]:
    """Each NVMe/SATA device is healthy by its own SMART data: overall assessment not FAILED, no NVMe
    critical warning bit, no media errors, spare not below the drive's threshold, wear below the
    levels, no ATA attribute failing now, NVMe controller not dead.

    WARN: wear at ``warn_percentage_used`` (the vendor's rated endurance used, in per cent), spare at or
    below ``warn_spare_pct``, pending or reallocated ATA sectors, the temperature warning bit. A device
    whose health could not be read is ERROR when its tool failed, SKIP when no tool is installed."""
    devices = snap.storage or []
    if not devices:
        return [finding("storage.health", Status.PASS, "no NVMe or SATA device on this node", None, devices=0)]
    return [_device(dev, t) for dev in devices]


def _device(dev: StorageDevice, t: dict) -> Finding:
    problems: list[tuple[Status, str]] = []
    if dev.state and dev.state.lower() in DEAD_STATES:
        problems.append((Status.FAIL, f"controller state {dev.state}"))
    if dev.source is None:
        if problems:
            return _finding(dev, problems)
        why = dev.unread or "health not read"
        tool_absent = "not installed" in why  # healthcheck.probes.storage's words for a missing tool
        return finding("storage.health", Status.SKIP if tool_absent else Status.ERROR,
                       f"{_label(dev)}: {why}", dev.component)
    if dev.smart_passed is False:
        problems.append((Status.FAIL, "SMART overall-health self-assessment FAILED"))
    if dev.critical_warning:
        for bit, (text, status) in CRITICAL_WARNING_BITS.items():
            if dev.critical_warning & (1 << bit):
                problems.append((status, f"critical warning: {text}"))
        unknown = dev.critical_warning & ~sum(1 << b for b in CRITICAL_WARNING_BITS)
        if unknown:
            problems.append((Status.FAIL, f"critical warning bits 0x{unknown:02x}"))
    if dev.media_errors is not None and dev.media_errors > int(t["max_media_errors"]):
        problems.append((Status.FAIL, f"{dev.media_errors} media and data integrity errors"))
    spare, floor = dev.available_spare_pct, dev.available_spare_threshold_pct
    if spare is not None and floor is not None and spare < floor:
        problems.append((Status.FAIL, f"available spare {spare}% below the drive's threshold {floor}%"))
    elif spare is not None and spare <= float(t["warn_spare_pct"]):
        problems.append((Status.WARN, f"available spare {spare}%"))
    used = dev.percentage_used
    if used is not None and used >= float(t["fail_percentage_used"]):
        problems.append((Status.FAIL, f"{used}% of rated endurance used"))
    elif used is not None and used >= float(t["warn_percentage_used"]):
        problems.append((Status.WARN, f"{used}% of rated endurance used"))
    if dev.failing_attributes:
        problems.append((Status.FAIL, "ATA attributes failing now: " + ", ".join(dev.failing_attributes[:8])))
    if dev.pending_sectors is not None and dev.pending_sectors >= int(t["warn_pending_sectors"]):
        problems.append((Status.WARN, f"{dev.pending_sectors} sectors pending reallocation"))
    if dev.reallocated_sectors is not None and dev.reallocated_sectors >= int(t["warn_reallocated_sectors"]):
        problems.append((Status.WARN, f"{dev.reallocated_sectors} reallocated sectors"))
    return _finding(dev, problems)


def _label(dev: StorageDevice) -> str:
    return f"{dev.name} ({dev.model})" if dev.model else dev.name


def _finding(dev: StorageDevice, problems: list[tuple[Status, str]]) -> Finding:
    metrics = {k: getattr(dev, k) for k in ("media_errors", "percentage_used", "available_spare_pct",
                                            "critical_warning", "temperature_c")}
    metrics["smart_passed"] = None if dev.smart_passed is None else float(dev.smart_passed)
    if not problems:
        facts = [f"{k} {v}" for k, v in (("media errors", dev.media_errors), ("used %", dev.percentage_used),
                                         ("spare %", dev.available_spare_pct)) if v is not None]
        if dev.smart_passed is not None:
            facts.insert(0, "SMART passed")
        return finding("storage.health", Status.PASS, f"{_label(dev)}: " + (", ".join(facts) or "healthy"),
                       dev.component, **metrics)
    status = worst(s for s, _ in problems)
    shown = [text for s, text in problems if s is status] + [text for s, text in problems if s is not status]
    return finding("storage.health", status, f"{_label(dev)}: " + "; ".join(shown), dev.component, **metrics)


@check("storage.count", needs=("storage",), contexts=CONTEXTS, fails_by_default=False,
       fails_on="nvme_count (written by `config generate`): FAIL when fewer NVMe controllers are seen "
                "(a drive or its PCIe link lost)")
def count(snap: Snapshot, exp: Expectations, t: dict) -> list[Finding]:
    """The node has the class's number of NVMe controllers (``nvme_count``): fewer is FAIL (a drive
    that died or fell off its PCIe link), more is WARN. Without ``nvme_count`` it reports the count."""
    nvme = sorted((d.name for d in snap.storage or [] if d.kind == "nvme"), key=_natural)
    shown = f"{len(nvme)} NVMe controller{'s' if len(nvme) != 1 else ''}" + (f" ({', '.join(nvme)})" if nvme else "")
    wanted = exp.nvme_count
    if wanted is None:
        return [finding("storage.count", Status.PASS, f"{shown}; no nvme_count expected", None, nvme=len(nvme))]
    if len(nvme) < wanted:
        return [finding("storage.count", Status.FAIL, f"{shown}, expected {wanted}", None,
                        nvme=len(nvme), nvme_expected=wanted)]
    if len(nvme) > wanted:
        return [finding("storage.count", Status.WARN, f"{shown}, expected {wanted}", None,
                        nvme=len(nvme), nvme_expected=wanted)]
    return [finding("storage.count", Status.PASS, shown, None, nvme=len(nvme), nvme_expected=wanted)]


def _natural(name: str) -> tuple:
    digits = "".join(c for c in name if c.isdigit())
    return (name.rstrip("0123456789"), int(digits) if digits else -1, name)
