"""Judge the external diagnostics (pure: tool run + parsed output -> findings).

``burnin.dcgm``: DCGM's own verdict, test by test. A failing test FAILs (per GPU where DCGM names it);
a warning WARNs; a diag where every test was skipped ("passed but tested nothing": no privileges, an
unsupported GPU, the wrong level) WARNs, because it proves nothing; dcgmi absent SKIPs; a diag that
could not run at all (no host engine, timeout) is an ERROR of the checker, not a node fault.

``burnin.storage``: fio bandwidth per path and direction against ``[storage.*]`` references; an fio
job error FAILs; no reference: PASS with the figure (nothing to judge against).
"""
from __future__ import annotations

from ..core.model import Finding, Status
from ..policies.references import Reference
from .tools_run import ToolRun

DCGM = "burnin.dcgm"
STORAGE = "burnin.storage"


def judge_dcgm(run: ToolRun, diag, parse_error: str | None) -> list[Finding]:
    """``diag``: a parsers.dcgmi.DcgmDiag or None when the output did not parse (``parse_error`` says why)."""
    if run.missing:
        return [Finding(DCGM, Status.SKIP, "dcgmi not installed (DCGM diagnostics not run)")]
    if diag is None:
        why = run.error or parse_error or f"exit status {run.returncode}"
        tail = (run.stderr or run.stdout).strip().splitlines()[-1:] or [""]
        return [Finding(DCGM, Status.ERROR, f"dcgmi diag did not produce a result: {why} {tail[0][:160]}".strip())]
    findings: list[Finding] = []
    for err in diag.errors[:3]:
        findings.append(Finding(DCGM, Status.ERROR, f"dcgmi: {err[:200]}"))
    tested = [t for t in diag.tests if (t.category or "").lower() != "metadata"]
    for test in tested:
        if test.status == "fail":
            bad = sorted(g for g, s in test.gpus.items() if s == "fail")
            note = f": {test.messages[0][:160]}" if test.messages else ""
            if bad:
                findings.extend(Finding(DCGM, Status.FAIL, f"dcgm {test.name} failed on gpu{g}{note}", f"gpu{g}")
                                for g in bad)
            else:
                findings.append(Finding(DCGM, Status.FAIL, f"dcgm {test.name} failed{note}"))
        elif test.status == "warn":
            note = f": {test.messages[0][:160]}" if test.messages else ""
            findings.append(Finding(DCGM, Status.WARN, f"dcgm {test.name} warning{note}"))
    if not any(f.status in (Status.FAIL, Status.WARN) for f in findings):
        ran = [t for t in tested if t.status == "pass"]
        if diag.overall == "skip" or not ran:  # deployment checks passed, every real test skipped
            findings.append(Finding(DCGM, Status.WARN, f"dcgm diag skipped every test ({len(tested)} skipped): "
                                    "it tested nothing (privileges, level or GPU support?)"))
        elif not findings:
            findings.append(Finding(DCGM, Status.PASS, f"dcgm diag passed: {len(ran)} tests "
                                    f"({', '.join(t.name for t in ran[:6])}{', ...' if len(ran) > 6 else ''})",
                                    metrics={"dcgm_tests_passed": float(len(ran))}))
    return findings


def judge_storage(path: str, rw: str, run: ToolRun, result, parse_error: str | None,
                  ref: Reference | None) -> Finding:
    """One fio job on ``path``; ``result`` a parsers.fio.FioResult or None."""
    comp = f"{path}:{rw}"
    if run.missing:
        return Finding(STORAGE, Status.SKIP, f"fio not installed (storage test of {path} not run)", comp)
    if result is None:
        why = run.error or parse_error or f"exit status {run.returncode}"
        return Finding(STORAGE, Status.ERROR, f"fio on {path} gave no result: {why}", comp)
    errors = [j for j in result.jobs if j.error] + ([] if result.jobs else [None])
    if result.errors or errors:
        first = result.errors[0] if result.errors else (f"job error {errors[0].error}" if errors[0] else "no jobs")
        return Finding(STORAGE, Status.FAIL, f"fio {rw} on {path} failed: {first}", comp)
    total = sum((j.read_bw_bytes if "read" in rw else j.write_bw_bytes) or 0.0 for j in result.jobs)
    gbps = total / 1e9
    metrics = {"bandwidth_gbps": round(gbps, 4)}
    figure = f"fio {rw} on {path}: {gbps:.2f} GB/s"
    if ref is None:
        return Finding(STORAGE, Status.PASS, f"{figure}; no storage reference for this path", comp, metrics)
    verdict = ref.judge(gbps)
    if verdict == "low":
        return Finding(STORAGE, Status.FAIL, f"{figure} below reference {ref.describe()}", comp, metrics)
    if verdict == "high":
        return Finding(STORAGE, Status.WARN, f"{figure} above reference {ref.describe()} (cache?)", comp, metrics)
    return Finding(STORAGE, Status.PASS, f"{figure} within reference {ref.describe()}", comp, metrics)
