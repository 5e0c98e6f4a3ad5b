"""Epilog checks: what a job left behind on the node.

The epilog fills ``Snapshot.job`` (Slurm's SLURM_JOB_ID / SLURM_JOB_USER / SLURM_JOB_UID): the
processes still carrying the job's id in their environment, and the growth of error counters since the
prolog's baseline. Only the epilog has that information, so these checks run there alone.
"""
from __future__ import annotations

from ..core.expectations import Expectations
from ..core.model import Finding, Snapshot, Status
from .registry import check, finding

_STRAY_STATUS = {"kill": Status.FAIL, "drain": Status.FAIL, "warn": Status.WARN}


@check("job.stray_processes", needs=("job",), contexts=("epilog",))
def stray_processes(snap: Snapshot, exp: Expectations, t: dict) -> list[Finding]:
    """No process of the finished job is left on the node.

    A process whose environment still carries the job's SLURM_JOB_ID after the job ended holds GPU
    memory, CPU or files the next job needs. With ``epilog_stray_processes = "kill"`` (the default in
    ``[slurm]``) the epilog kills them first: killed ones are reported (PASS, counted), survivors FAIL
    (a process that survives SIGKILL is stuck in the kernel — the node needs attention). ``"drain"``:
    any leftover FAILs; ``"warn"``: WARN only.
    """
    name = "job.stray_processes"
    job = snap.job
    if job.stray_processes is None:
        return [finding(name, Status.SKIP, "process table not read")]
    left = job.stray_processes
    killed = f"killed {len(job.killed)} leftover processes of job {job.job_id}" if job.killed else ""
    if not left:
        return [finding(name, Status.PASS, killed or f"no process of job {job.job_id} left",
                        None, killed=len(job.killed), left=0)]
    listed = ", ".join(f"{p.get('pid')} {p.get('comm') or '?'}" for p in left[:5])
    more = f" (+{len(left) - 5} more)" if len(left) > 5 else ""
    verb = "survived SIGKILL" if job.stray_action == "kill" else "left"
    status = _STRAY_STATUS.get(job.stray_action, Status.FAIL)
    return [finding(name, status, f"{len(left)} processes of job {job.job_id} {verb}: {listed}{more}",
                    None, killed=len(job.killed), left=len(left))]


# Growth during one job that FAILs (``<counter>_fail``: at or above it). A job's lifetime is the
# window. link_downed 1: a flap during the job broke its collectives (the "network switch/cable"
# interruptions of Llama 3's table); ue_count 1: memory lost data under the job; aer_dev_fatal /
# aer_dev_nonfatal 1: a PCIe device lost a TLP under the job; link_error_recovery 10: retrains that
# stalled the job's traffic; symbol_error / port_rcv_errors 1000: post-FEC errors on HDR/NDR (~0 on a
# good link) by the thousand in one job; local_link_integrity_errors / excessive_buffer_overrun_errors
# 1: each is already a threshold passed in the port; ce_count 100: mcelog's 10-a-day DIMM threshold
# ten times over in one job.
GROWTH_FAIL = {"link_downed_fail": 1, "ue_count_fail": 1, "aer_dev_fatal_fail": 1, "aer_dev_nonfatal_fail": 1,
               "link_error_recovery_fail": 10, "symbol_error_fail": 1000, "port_rcv_errors_fail": 1000,
               "local_link_integrity_errors_fail": 1, "excessive_buffer_overrun_errors_fail": 1,
               "ce_count_fail": 100}


def _growth_limits(t: dict) -> dict[str, float]:
    return {key[:-len("_fail")]: float(value) for key, value in t.items()
            if key.endswith("_fail") and isinstance(value, (int, float)) and not isinstance(value, bool)}


@check("job.counter_growth", needs=("job",), contexts=("epilog",),
       thresholds={"fail_counters": ["ecc_uncorrected_volatile", "retired_pages_dbe", "remap_uncorrectable"],
                   "ignore_counters": [], **GROWTH_FAIL})
def counter_growth(snap: Snapshot, exp: Expectations, t: dict) -> list[Finding]:
    """Error counters that grew while the job ran, attributed to the job id.

    The prolog saves a node-local baseline of the error counters (ECC, retired pages, row remaps,
    PCIe replays, NVLink CRC/replay/recovery, InfiniBand port errors, EDAC memory-controller counts,
    PCIe AER counts, Xid events); the epilog reports every counter that grew, per component, naming
    the job. Growth of a counter in ``fail_counters`` (uncorrectable GPU memory errors by default)
    FAILs, and so does growth at or above a ``<counter>_fail`` amount (link_downed 1, ue_count 1,
    aer_dev_fatal 1, aer_dev_nonfatal 1, link_error_recovery 10, symbol_error 1000, port_rcv_errors
    1000, local_link_integrity_errors 1, excessive_buffer_overrun_errors 1, ce_count 100); other
    growth WARNs (the absolute levels are judged by the gpu.* / ib.* / host.edac / pcie.aer checks;
    the history keeps the per-job growth). SKIP without a baseline.
    """
    name = "job.counter_growth"
    job = snap.job
    if job.counter_growth is None:
        return [finding(name, Status.SKIP, f"no prolog baseline for job {job.job_id}")]
    ignore = set(t.get("ignore_counters") or ())
    grown = {k: v for k, v in job.counter_growth.items() if v > 0 and k.rsplit(".", 1)[-1] not in ignore}
    if not grown:
        return [finding(name, Status.PASS, f"no error counter grew during job {job.job_id}")]
    fail = set(t.get("fail_counters") or ())
    amounts = _growth_limits(t)
    by_component: dict[str, dict[str, float]] = {}
    for key, value in grown.items():
        component, _, counter = key.rpartition(".")
        by_component.setdefault(component or "node", {})[counter] = value
    findings = []
    for component, counters in sorted(by_component.items()):
        failing = {c for c, v in counters.items() if c in fail or (c in amounts and v >= amounts[c])}
        status = Status.FAIL if failing else Status.WARN
        text = ", ".join(f"{c} +{v:g}" + (f" (fail at +{amounts[c]:g})" if c in failing and c in amounts else "")
                         for c, v in sorted(counters.items()))
        since = f" (since the {job.baseline_source}, before the job)" if job.baseline_source else ""
        findings.append(finding(name, status, f"during job {job.job_id}{since}: {text}", component,
                                **{f"growth_{c}": v for c, v in counters.items()}))
    return findings
