"""Judge a snapshot: select the checks for a context, run them, turn probe failures into findings,
build the verdict. Pure apart from the monotonic clock used for the duration."""
from __future__ import annotations

import time
from datetime import datetime, timezone

from .checks.registry import CheckSpec, load_all, select
from .expectations import Expectations
from .model import Finding, Snapshot, Status, Verdict

# Why a check was skipped, by missing source.
_ABSENT = {
    "gpus": "no NVIDIA GPU data (no NVIDIA GPU on the PCI bus, or none recorded in the bundle)",
    "gpu_pci_devices": "no PCI device data",
    "kernel_events": "no kernel log (no NVIDIA GPU, or none recorded in the bundle)",
    "ib_ports": "no InfiniBand/RoCE data",
    "pcie_links": "no PCIe link data",
    "host": "no host data",
    "versions": "no version data",
    "job": "no job (runs in the epilog of a Slurm job)",
}


def utc_now_iso() -> str:
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat()


def run_check(spec: CheckSpec, snap: Snapshot, exp: Expectations) -> list[Finding]:
    """One check on one snapshot; never raises (a checker bug becomes an ERROR finding)."""
    for source in spec.needs:
        err = snap.probe_errors.get(source)
        if err is not None and not spec.handles_missing:
            what = "did not answer (driver wedged?)" if err.kind == "hang" else f"failed ({err.kind})"
            return [Finding(spec.name, Status.ERROR, f"cannot judge: {source} probe {what}: {err.message}")]
    if not spec.handles_missing:
        missing = [s for s in spec.needs if getattr(snap, s) is None]
        if missing:
            return [Finding(spec.name, Status.SKIP, _ABSENT[missing[0]])]
    try:
        findings = list(spec.func(snap, exp, exp.thresholds_for(spec.name, spec.thresholds)))
    except Exception as exc:  # a checker bug must not stop the other checks
        return [Finding(spec.name, Status.ERROR, f"check crashed: {type(exc).__name__}: {exc}")]
    if not findings:
        return [Finding(spec.name, Status.SKIP, "nothing to check")]
    for f in findings:
        if f.check != spec.name:
            f.check = spec.name
    return findings


def judge(snap: Snapshot, exp: Expectations, context: str = "check", only: list[str] | None = None,
          started_at: str | None = None, started_monotonic: float | None = None) -> Verdict:
    started_monotonic = time.monotonic() if started_monotonic is None else started_monotonic
    specs = select(load_all(), context, list(exp.checks[context]) if context in exp.checks else None, only)
    findings: list[Finding] = []
    for spec in specs:
        findings.extend(run_check(spec, snap, exp))
    return Verdict.of(snap.node, findings, started_at or snap.taken_at,
                      time.monotonic() - started_monotonic, context)
