"""Judge a ``dcgmi mndiag`` run (DCGM's multi-node diagnostic across the trays of an NVLink domain):
one finding per failed or warning host / GPU, naming the host and GPU with DCGM's message; the run itself
failing (no host engine, MPI, a host unreachable) is an ERROR of the measurement, not of the nodes.

Check ``burnin.dcgm_mndiag``; component = the host (``gb-r01-t02``) or its GPU (``gb-r01-t02:GPU1``).
dcgmi exits 0 whether the diagnostic passed or failed: this verdict comes from its output. Pure.
"""
from __future__ import annotations

from healthcheck.core.model import Finding, Status
from healthcheck.parsers.dcgmi_mndiag import MnDiag

CHECK = "burnin.dcgm_mndiag"
_STATUS = {"fail": Status.FAIL, "warn": Status.WARN, "unknown": Status.WARN}


def judge(diag: MnDiag) -> list[Finding]:
    test = diag.test or "mndiag"
    out: list[Finding] = []
    for error in diag.errors:
        out.append(Finding(CHECK, Status.ERROR, f"{test}: the multi-node diagnostic did not complete: {error}",
                           test))
    gpu_failed = {r.host for r in diag.results if r.gpu is not None and r.status in _STATUS}
    for r in diag.results:
        status = _STATUS.get(r.status)
        if status is None or (r.gpu is None and r.host in gpu_failed and not r.messages):
            continue  # a host row that only sums up its GPUs' rows below
        subject = f"{r.host}:GPU{r.gpu}" if r.gpu is not None else r.host
        why = "; ".join(m for m in r.messages if not m.startswith("Info:")) or f"{r.status} (no message)"
        out.append(Finding(CHECK, status, f"{test}: {subject} {r.status}: {why}", subject))
    if diag.status in _STATUS and not out:
        out.append(Finding(CHECK, _STATUS[diag.status], f"{test}: {diag.status}, no host or GPU named", test))
    if not out:
        if diag.overall == "skip":
            return [Finding(CHECK, Status.WARN, f"{test}: nothing ran (every result skipped)", test)]
        hosts = len(diag.hosts) or len({r.host for r in diag.results})
        gpus = len({(r.host, r.gpu) for r in diag.results if r.gpu is not None})
        out.append(Finding(CHECK, Status.PASS, f"{test}: passed on {hosts} host(s)"
                           + (f", {gpus} GPU(s)" if gpus else ""), test, {"hosts": hosts, "gpus": gpus}))
    return out
