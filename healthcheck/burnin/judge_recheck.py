"""Pure judge of the node after the burn-in's load: the snapshot before the load phases and the one
after, and the node checks' findings on each -> findings. No I/O.

Checks:

- ``burnin.recheck``: the node checks (``judge.judge`` in context ``burnin``) run again after the load;
  every finding worse than the same check's finding on the same component before the load is repeated
  under this name with its status ("gpu.temperature gpu3 after the load: ..."); PASS when none got worse.
  What was already wrong before the load is in the first pass's findings, not repeated.
- ``burnin.load_errors``: what the load provoked, from the two snapshots:
  new Xid (and other NVIDIA kernel) events -> FAIL (the burn-in runs known-good code: an Xid under its
  load is the hardware's or the driver's); a row remap or page retirement that became pending -> FAIL (an
  uncorrectable memory error under load; the GPU needs a reset); error counters that grew
  (:func:`healthcheck.slurm.baseline.counters_of`) -> FAIL for those in ``fail_counters`` (uncorrectable
  ECC, double-bit retirements, uncorrectable remaps), WARN for the rest (corrected ECC, PCIe replays,
  NVLink CRC/replay/recovery, InfiniBand port errors); counters that went down (a driver reload or a
  counter clear during the run) are said, not judged. PASS when nothing changed.
"""
from __future__ import annotations

from ..checks.gpu_xid import event_key
from ..core.model import Finding, Snapshot, Status
from ..slurm.baseline import counters_of, growth, resets

RECHECK = "burnin.recheck"
LOAD_ERRORS = "burnin.load_errors"
FAIL_COUNTERS = ("ecc_uncorrected_volatile", "retired_pages_dbe", "remap_uncorrectable")


def judge_recheck(before: list[Finding], after: list[Finding]) -> list[Finding]:
    """The findings of the second pass that are worse than the first pass's for the same check and
    component (a check or component absent before counts as PASS before)."""
    was = {(f.check, f.component): f.status for f in before}
    worse = []
    for f in after:
        old = was.get((f.check, f.component), Status.PASS)
        if f.status.severity > old.severity:
            where = f" {f.component}" if f.component else ""
            worse.append(Finding(RECHECK, f.status, f"{f.check}{where} after the load: {f.message} (before: {old})",
                                 f.component, dict(f.metrics)))
    if worse:
        return worse
    return [Finding(RECHECK, Status.PASS, f"node checks after the load: nothing worse than before "
                                          f"({len(after)} findings)")]


def judge_load_errors(before: Snapshot, after: Snapshot,
                      fail_counters: tuple[str, ...] = FAIL_COUNTERS) -> list[Finding]:
    findings: list[Finding] = []
    findings += _new_events(before, after)
    findings += _new_pending(before, after)
    findings += _growth(before, after, set(fail_counters))
    if findings:
        return findings
    return [Finding(LOAD_ERRORS, Status.PASS, "the load provoked no Xid, no pending remap or retirement and no "
                                              "error counter growth")]


def _new_events(before: Snapshot, after: Snapshot) -> list[Finding]:
    if after.kernel_events is None:
        return []
    seen = {event_key(ev, before.boot_id) for ev in before.kernel_events or []}
    new = [ev for ev in after.kernel_events if event_key(ev, before.boot_id) not in seen]
    if not new:
        return []
    by_gpu = {g.pci_bus_id: g.component for g in after.gpus or [] if g.pci_bus_id}
    out = []
    groups: dict[str | None, list] = {}
    for ev in new:
        groups.setdefault(by_gpu.get(ev.pci_bus_id, ev.pci_bus_id), []).append(ev)
    for component, events in groups.items():
        shown = "; ".join(_label(ev) + (f": {ev.message}" if ev.message else "") for ev in events[:5])
        more = f" (+{len(events) - 5} more)" if len(events) > 5 else ""
        out.append(Finding(LOAD_ERRORS, Status.FAIL, f"{len(events)} new kernel event(s) under load: {shown[:400]}{more}",
                           component, {"new_kernel_events": float(len(events))}))
    return out


def _label(ev) -> str:
    """How a kernel event is named: Xid N, SXid N (an NVSwitch's), else its kind."""
    if ev.xid is None:
        return ev.kind
    return f"SXid {ev.xid}" if ev.kind == "sxid" else f"Xid {ev.xid}"


def _new_pending(before: Snapshot, after: Snapshot) -> list[Finding]:
    old = {g.index: g for g in before.gpus or []}
    out = []
    for g in after.gpus or []:
        prev = old.get(g.index)
        for attr, what in (("remap_pending", "row remap"), ("retired_pages_pending", "page retirement")):
            if getattr(g, attr) and not (prev is not None and getattr(prev, attr)):
                out.append(Finding(LOAD_ERRORS, Status.FAIL, f"{what} pending after the load: an uncorrectable "
                                   "memory error under load; the GPU needs a reset, and RMA if it recurs",
                                   g.component, {attr: 1.0}))
    return out


def _growth(before: Snapshot, after: Snapshot, fail: set[str]) -> list[Finding]:
    start, end = counters_of(before), counters_of(after)
    start.pop("xid_events", None)  # reported as events, by _new_events
    grown, went_down = growth(start, end), resets(start, end)
    by_component: dict[str, dict[str, float]] = {}
    for key, value in grown.items():
        component, _, counter = key.rpartition(".")
        by_component.setdefault(component or "node", {})[counter] = value
    out = []
    for component, counters in sorted(by_component.items()):
        status = Status.FAIL if fail & set(counters) else Status.WARN
        text = ", ".join(f"{c} +{v:g}" for c, v in sorted(counters.items()))
        out.append(Finding(LOAD_ERRORS, status, f"error counters grew under load: {text}", component,
                           {f"growth_{c}": v for c, v in counters.items()}))
    if went_down:
        text = ", ".join(f"{k} {v:g}" for k, v in sorted(went_down.items())[:8])
        out.append(Finding(LOAD_ERRORS, Status.WARN, f"counters went down during the run (a driver reload or a "
                                                     f"counter clear: growth under load unknown): {text}"))
    return out
