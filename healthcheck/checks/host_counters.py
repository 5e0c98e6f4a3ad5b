"""Host error counters the kernel keeps in sysfs: EDAC memory controllers and PCIe AER.

Why levels, not growth between our runs: both counters have a window the kernel keeps. EDAC counts
since the driver loaded or the counters were reset and says how long ago (``seconds_since_reset``);
AER counts since the device was enumerated (boot or hot-plug) and is never reset. An uncorrected
memory error or an uncorrectable PCIe error at any time since then is a fault now (the page or link
that saw it is suspect until the node is serviced), so the level alone decides, in every context,
the prolog included for EDAC (a few sysfs reads; AER, a few hundred, runs in the epilog, right after
each job, and HealthCheckProgram). Corrected errors are judged as a rate over the kernel's own
window. Growth during a job is judged by ``job.counter_growth`` in the epilog, from the prolog's
baseline (``healthcheck.slurm.baseline.counters_of`` includes these counters): no state of ours.
"""
from __future__ import annotations

from ..core.expectations import Expectations
from ..core.model import EdacController, Finding, PcieAer, Snapshot, Status, aer_total
from .registry import CONTEXTS, check, finding, skip

DAY_S = 86400.0

# EDAC. Corrected errors per 24 h of the controller's window: WARN from mcelog's default DIMM
# threshold (ce-error-threshold = 10 / 24h in mcelog.conf), FAIL an order of magnitude above it (a
# DIMM that corrects 100 errors a day is degrading; its next error may be uncorrectable, and a
# storm of corrections slows the memory channel). One uncorrected error FAILs (the data was lost).
EDAC_THRESHOLDS = {"ue_fail": 1, "ce_per_day_warn": 10, "ce_per_day_fail": 100}

# AER. Uncorrectable errors, fatal or not, FAIL at the first one: the link or device lost a TLP (a
# GPU behind such a link falls off the bus: Xid 79). Corrected errors (replayed by the data link
# layer, no data lost) only WARN, past 100 since boot: a handful is normal noise (a receiver
# error when a link retrains at boot), a hundred means a marginal link worth a look.
AER_THRESHOLDS = {"fatal_fail": 1, "nonfatal_fail": 1, "correctable_warn": 100, "correctable_fail": None}

_WHAT = {"gpu": "GPU", "hca": "HCA", "nic": "NIC", "network": "network controller", "nvme": "NVMe drive",
         "sata": "SATA controller", "sas": "SAS controller", "raid": "RAID controller",
         "storage": "storage controller", "nvswitch": "NVSwitch", "bridge": "PCIe root/switch port",
         "host bridge": "host bridge", "display": "display controller", "usb": "USB controller",
         "accelerator": "accelerator"}


def ce_per_day(mc: EdacController) -> float | None:
    """Corrected errors per 24 h over the controller's window, where the window is known; a window
    under 24 h counts as 24 h (the count itself: a lower bound of the day's rate, never inflated)."""
    if mc.ce_count is None or mc.seconds_since_reset is None:
        return None
    return mc.ce_count * DAY_S / max(float(mc.seconds_since_reset), DAY_S)


def _dimms_with(mc: EdacController, attr: str) -> str:
    named = [f"{d.label or d.name} {getattr(d, attr)}" for d in mc.dimms if getattr(d, attr)]
    return f" ({', '.join(named[:4])}{' ...' if len(named) > 4 else ''})" if named else ""


def _num(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


@check("host.edac", needs=("edac",), contexts=CONTEXTS, thresholds=EDAC_THRESHOLDS, fails_by_default=True,
       fails_on="an uncorrected memory error counted by an EDAC memory controller since the driver loaded "
                "(ue_fail); corrected errors at ce_per_day_fail or more per 24 h of the controller's window")
def host_edac(snap: Snapshot, exp: Expectations, t: dict) -> list[Finding]:
    """EDAC memory controllers report no uncorrected error and few corrected ones.

    FAIL: ``ue_count`` >= ``ue_fail`` (1): memory lost data since the driver loaded; corrected errors
    at ``ce_per_day_fail`` (100) or more per 24 h over the controller's own window
    (``seconds_since_reset``; a window under 24 h counts as 24 h). WARN from ``ce_per_day_warn`` (10,
    mcelog's default DIMM threshold), and for any corrected error when the window is unknown. The
    DIMMs that counted are named by their label. SKIP without EDAC (no driver for the platform)."""
    name = "host.edac"
    if not snap.edac:
        return skip(name, "no EDAC memory controller (no EDAC driver loaded for this platform)")
    ue_fail, warn, fail = _num(t.get("ue_fail")), _num(t.get("ce_per_day_warn")), _num(t.get("ce_per_day_fail"))
    out = []
    for mc in snap.edac:
        label = f" [{mc.mc_name}]" if mc.mc_name else ""
        metrics = {"ce_count": mc.ce_count, "ue_count": mc.ue_count,
                   "seconds_since_reset": mc.seconds_since_reset}
        if mc.ce_count is None and mc.ue_count is None:
            out.append(finding(name, Status.ERROR, f"EDAC counts unreadable{label}", mc.component))
            continue
        rate = ce_per_day(mc)
        window = f"{mc.seconds_since_reset / 3600:.1f} h" if mc.seconds_since_reset is not None else "unknown window"
        if ue_fail is not None and (mc.ue_count or 0) >= ue_fail:
            out.append(finding(name, Status.FAIL, f"{mc.ue_count} uncorrected memory errors in {window}"
                               f"{_dimms_with(mc, 'ue_count')}{label}: replace the DIMM", mc.component, **metrics))
        elif rate is not None and fail is not None and rate >= fail:
            out.append(finding(name, Status.FAIL, f"{mc.ce_count} corrected memory errors in {window} "
                               f"({rate:.0f} per 24 h, fail at {fail:g}){_dimms_with(mc, 'ce_count')}{label}",
                               mc.component, ce_per_day=rate, **metrics))
        elif rate is not None and warn is not None and rate >= warn:
            out.append(finding(name, Status.WARN, f"{mc.ce_count} corrected memory errors in {window} "
                               f"({rate:.0f} per 24 h, warn at {warn:g}){_dimms_with(mc, 'ce_count')}{label}",
                               mc.component, ce_per_day=rate, **metrics))
        elif rate is None and mc.ce_count:
            out.append(finding(name, Status.WARN, f"{mc.ce_count} corrected memory errors (window unknown)"
                               f"{_dimms_with(mc, 'ce_count')}{label}", mc.component, **metrics))
        else:
            out.append(finding(name, Status.PASS, f"{mc.ce_count or 0} corrected, {mc.ue_count or 0} "
                               f"uncorrected in {window}{label}", mc.component, ce_per_day=rate, **metrics))
    return out


def what_is(dev: PcieAer) -> str:
    """"GPU", "HCA mlx5_0", "NVMe drive nvme0", "PCIe root/switch port", "device 0x1234 (class ...)"."""
    what = _WHAT.get(dev.kind or "", dev.kind)
    if what is None:
        what = f"device {dev.vendor or '?'}:{dev.device or '?'} (class {dev.pci_class or '?'})"
    return f"{what} {dev.name}" if dev.name else what


def _types(counts: dict[str, int] | None) -> str:
    named = [f"{k} {v}" for k, v in (counts or {}).items() if v and not k.startswith("TOTAL_ERR")]
    return f" ({', '.join(named)})" if named else ""


# Not in the prolog: a function's AER files are three reads, and a node has a few hundred PCI functions
# (10-25 ms measured on a fixture of 230 functions): the epilog reads them right after each job and
# HealthCheckProgram between jobs, so an error is judged before the next job all the same.
AER_CONTEXTS = ("check", "slurm-check", "burnin", "epilog")


@check("pcie.aer", needs=("pcie_aer",), contexts=AER_CONTEXTS, thresholds=AER_THRESHOLDS, fails_by_default=True,
       fails_on="an uncorrectable PCIe error (fatal or non-fatal) counted by AER on any device since boot, "
                "naming the device and what it is (GPU, HCA, NVMe, root/switch port)")
def pcie_aer(snap: Snapshot, exp: Expectations, t: dict) -> list[Finding]:
    """No PCIe device has counted an uncorrectable AER error since boot, and few corrected ones.

    FAIL: ``aer_dev_fatal`` total >= ``fatal_fail`` (1) or ``aer_dev_nonfatal`` total >=
    ``nonfatal_fail`` (1) on any function, named with what it is (GPU, HCA, NVMe, PCIe root/switch
    port; from the PCI class) and the error types (DLP, SDES, CmpltTO, ...). WARN: corrected errors
    at ``correctable_warn`` (100) or more since boot (``correctable_fail``: unset). A PASS line sums
    up the clean functions. SKIP when no function exposes AER counters (kernel without AER)."""
    name = "pcie.aer"
    if not snap.pcie_aer:
        return skip(name, "no PCIe function exposes AER counters (no AER capability or kernel support)")
    limits = {key: _num(t.get(key)) for key in AER_THRESHOLDS}
    out, clean = [], 0
    for dev in sorted(snap.pcie_aer, key=lambda d: d.pci_bus_id):
        fatal, nonfatal, corr = aer_total(dev.fatal), aer_total(dev.nonfatal), aer_total(dev.correctable)
        metrics = {"fatal": fatal, "nonfatal": nonfatal, "correctable": corr}
        what = what_is(dev)
        problems, status = [], Status.PASS
        for kind, total, counts in (("fatal", fatal, dev.fatal), ("nonfatal", nonfatal, dev.nonfatal)):
            limit = limits[f"{kind}_fail"]
            if total is not None and limit is not None and total >= limit:
                status = Status.FAIL
                problems.append(f"{total} uncorrectable {'fatal' if kind == 'fatal' else 'non-fatal'} "
                                f"errors{_types(counts)}")
        if corr is not None:
            if limits["correctable_fail"] is not None and corr >= limits["correctable_fail"]:
                status = Status.FAIL
                problems.append(f"{corr} corrected errors{_types(dev.correctable)} (fail at "
                                f"{limits['correctable_fail']:g})")
            elif limits["correctable_warn"] is not None and corr >= limits["correctable_warn"]:
                status = Status.WARN if status is Status.PASS else status
                problems.append(f"{corr} corrected errors{_types(dev.correctable)} (warn at "
                                f"{limits['correctable_warn']:g})")
        if problems:
            advice = ": reseat or replace it, check its slot, riser and upstream switch" \
                if status is Status.FAIL else ""
            out.append(finding(name, status, f"{what} at {dev.pci_bus_id}: {'; '.join(problems)} since "
                               f"boot{advice}", dev.component, **metrics))
        else:
            clean += 1
    if clean:
        out.append(finding(name, Status.PASS, f"{clean} PCIe functions with AER counters: no uncorrectable "
                           "error, corrected errors below the threshold", None, functions=clean))
    return out
