"""Render the fault matrix (tests/faults/matrix.py) as docs/fault-matrix.md.

    .venv/bin/python -m tests.faults.render > docs/fault-matrix.md

A test asserts the committed file equals :func:`markdown`, so the documentation cannot drift from
what is tested.
"""
from __future__ import annotations

from tests.faults.matrix import FAULTS, Fault


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _check(fault: Fault) -> str:
    where = f" on `{fault.component}`" if fault.component else ""
    co = "".join(f" (+ `{c}`)" for c in fault.co_detectors)
    return f"`{fault.check}`{where}{co}"


def markdown() -> str:
    lines = [
        "# Fault matrix",
        "",
        "Generated from `tests/faults/matrix.py`, the table `tests/faults/test_fault_matrix.py` proves: each",
        "fault is injected into a fixture node (sysfs / proc trees, the fake NVML, a kernel log, drive and BMC",
        "tool outputs, or the real prolog hook) or into the burn-in's judges, judged in every listed context,",
        "and must be reported by the named check with the named status on the named component, while no other",
        "check FAILs (except the co-detectors in parentheses). Default action: what the default `[slurm]`",
        "policy does in those contexts (`drain`: FAIL drains the node, and a failing prolog requeues the job;",
        "`report`: recorded and shown, no drain). `healthcheck check` runs every check as well and exits 1 on",
        "a FAIL. Class: the root-cause class of the real failure mix the case belongs to;",
        "[fault-coverage.md](fault-coverage.md) sums them up.",
        "",
        "Regenerate with: `.venv/bin/python -m tests.faults.render > docs/fault-matrix.md`",
        "",
        "| fault | class | check | status | context | default action | expectations | how injected |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for f in FAULTS:
        config = "default" if f.config is None else "`" + _cell(" ".join(f.config.split())) + "`"
        lines.append(f"| {_cell(f.name)} (`{f.id}`) | {_cell(f.failure_class)} | {_check(f)} | {f.status.value} | "
                     f"{', '.join(f.contexts)} | {f.action} | {config} | {_cell(f.how)} |")
    lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    import sys

    sys.stdout.write(markdown())
