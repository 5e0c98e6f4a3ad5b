"""How much of the real failure mix the fault matrix proves we catch: docs/fault-coverage.md.

    .venv/bin/python -m tests.faults.coverage > docs/fault-coverage.md

Inputs, all data: the failure classes with their counts (``tests/faults/failure_classes.toml``, the
Llama 3 paper's Table 5), the fault matrix (``tests/faults/matrix.py``: every case names its class,
check, status and the contexts it is proven in) and the check index (``healthcheck/checks/_index.py``:
the contexts each check runs in). Per class, its level is the best of its cases':

- **before the next job**: a case FAILs in the prolog or in HealthCheckProgram (``slurm-check``), so
  the node is drained before another job lands on it;
- **detected**: a case FAILs or WARNs only elsewhere (the epilog, the burn-in, ``healthcheck check``)
  or only WARNs;
- **not detected**: no case.

A class whose ``unseen`` text is not empty is *partial*: part of it is out of a node's sight whatever
its cases show. The shares are by count of interruptions, over the observable classes.
``tests/faults/test_fault_coverage.py`` keeps the document equal to :func:`markdown`.
"""
from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from healthcheck.checks._index import CHECKS
from healthcheck.core.model import Status
from tests.faults.matrix import FAULTS, Fault

DATA = Path(__file__).with_name("failure_classes.toml")
BEFORE, DETECTED, NONE = "before the next job", "detected", "not detected"
BEFORE_JOB_CONTEXTS = ("prolog", "slurm-check")
CONTEXT_ORDER = ("prolog", "epilog", "slurm-check", "check", "burnin")
BURNIN_CONTEXTS = ("burnin",)  # the burn-in's own judges (burnin.*) are not registered checks
# findings the Slurm hooks make themselves (the watchdog), not a registered check
HOOK_FINDINGS = {"node.responsive": ("prolog", "epilog", "slurm-check")}
MATRIX_TEST = "tests/faults/test_fault_matrix.py::test_fault_is_detected_by_its_check_alone"
_RANK = {BEFORE: 2, DETECTED: 1, NONE: 0}


@dataclass(frozen=True)
class FailureClass:
    name: str
    count: int
    observable: bool
    symptoms: tuple[str, ...]
    unseen: str

    @property
    def partial(self) -> bool:
        return bool(self.unseen)


@dataclass(frozen=True)
class Table:
    source: str
    total: int
    classes: tuple[FailureClass, ...]

    def get(self, name: str) -> FailureClass:
        for c in self.classes:
            if c.name == name:
                return c
        raise KeyError(name)


def load_classes(path: Path = DATA) -> Table:
    """The table, validated: unique names, positive counts that add up to ``total``, the keys known."""
    data = tomllib.loads(path.read_text("utf-8"))
    classes = []
    for entry in data.get("class", []):
        unknown = set(entry) - {"name", "count", "observable", "symptoms", "unseen"}
        if unknown:
            raise ValueError(f"{path.name}: class {entry.get('name')!r}: unknown keys {sorted(unknown)}")
        count = entry["count"]
        if not isinstance(count, int) or isinstance(count, bool) or count <= 0:
            raise ValueError(f"{path.name}: class {entry['name']!r}: count must be a positive integer")
        classes.append(FailureClass(entry["name"], count, bool(entry["observable"]), tuple(entry["symptoms"]),
                                    entry.get("unseen", "")))
    names = [c.name for c in classes]
    if len(names) != len(set(names)):
        raise ValueError(f"{path.name}: duplicate class names")
    table = Table(data["source"], data["total"], tuple(classes))
    if sum(c.count for c in classes) != table.total:
        raise ValueError(f"{path.name}: counts add up to {sum(c.count for c in classes)}, not {table.total}")
    return table


def check_contexts(check: str) -> tuple[str, ...]:
    """Where ``check`` runs: the index's contexts, the hooks' for their watchdog's finding, or the
    burn-in for its own judges."""
    if check in CHECKS:
        ctx = CHECKS[check][2]
    elif check in HOOK_FINDINGS:
        ctx = HOOK_FINDINGS[check]
    elif check.startswith("burnin."):
        ctx = BURNIN_CONTEXTS
    else:
        raise KeyError(f"{check}: neither in the check index nor a burn-in judge")
    return tuple(c for c in CONTEXT_ORDER if c in ctx)


def case_level(fault: Fault) -> str:
    if fault.status is Status.FAIL and set(fault.contexts) & set(BEFORE_JOB_CONTEXTS):
        return BEFORE
    if fault.status in (Status.FAIL, Status.WARN):
        return DETECTED
    return NONE


@dataclass(frozen=True)
class ClassCoverage:
    cls: FailureClass
    cases: tuple[Fault, ...]

    @property
    def level(self) -> str:
        return max((case_level(f) for f in self.cases), key=_RANK.__getitem__, default=NONE)

    def checks(self) -> dict[str, tuple[str, ...]]:
        """check -> the contexts it runs in, for every check a case of this class names (co-detectors too)."""
        out: dict[str, tuple[str, ...]] = {}
        for f in self.cases:
            for name in (f.check, *f.co_detectors):
                out.setdefault(name, check_contexts(name))
        return out


def coverage(table: Table | None = None, faults: list[Fault] | None = None) -> list[ClassCoverage]:
    table = table or load_classes()
    faults = FAULTS if faults is None else faults
    unknown = sorted({f.failure_class for f in faults} - {c.name for c in table.classes})
    if unknown:
        raise ValueError(f"fault-matrix cases name classes not in the table: {unknown}")
    return [ClassCoverage(c, tuple(f for f in faults if f.failure_class == c.name)) for c in table.classes]


@dataclass(frozen=True)
class Shares:
    observable: int
    before: int  # classes with a FAIL before the next job
    before_whole: int  # of those, classes with nothing out of sight
    detected: int  # before + detected elsewhere
    detected_whole: int

    def pct(self, n: int) -> float:
        return 100.0 * n / self.observable


def shares(rows: list[ClassCoverage]) -> Shares:
    seen = [r for r in rows if r.cls.observable]
    before = [r for r in seen if r.level == BEFORE]
    detected = [r for r in seen if r.level != NONE]
    return Shares(sum(r.cls.count for r in seen), sum(r.cls.count for r in before),
                  sum(r.cls.count for r in before if not r.cls.partial), sum(r.cls.count for r in detected),
                  sum(r.cls.count for r in detected if not r.cls.partial))


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _checks_cell(row: ClassCoverage) -> str:
    return "; ".join(f"`{c}` ({', '.join(ctx)})" for c, ctx in row.checks().items()) or "none"


def _level_cell(row: ClassCoverage) -> str:
    if not row.cls.observable:
        return "not counted" + (f" (what it leaves behind: {row.level})" if row.level != NONE else "")
    return row.level + (" (partial)" if row.cls.partial else "")


def markdown() -> str:
    table = load_classes()
    rows = coverage(table)
    sh = shares(rows)
    unobservable = sum(c.count for c in table.classes if not c.observable)
    lines = [
        "# Fault coverage of the real failure mix",
        "",
        "Generated by `tests/faults/coverage.py` from the failure classes (`tests/faults/failure_classes.toml`),",
        "the fault matrix (`tests/faults/matrix.py`, see [fault-matrix.md](fault-matrix.md)) and the check index",
        "(`healthcheck/checks/_index.py`); `tests/faults/test_fault_coverage.py` fails when this file is stale,",
        "when a class it calls detected has no fault-matrix case, or when the share before the next job falls",
        "under the goal of 95 %.",
        "",
        f"The mix: {table.source}; {table.total} interruptions. Not visible to a node tool: "
        + ", ".join(f"{c.name} {c.count}" for c in table.classes if not c.observable)
        + f" ({unobservable}); {sh.observable} remain, and the shares below are of those {sh.observable}.",
        "",
        "Levels, computed per class from its cases (each injected into a fixture node, or into the burn-in's",
        "judges, and proven by `" + MATRIX_TEST + "[<case>]`):",
        "",
        "- **before the next job**: a case FAILs in the prolog or HealthCheckProgram (`slurm-check`): the node is",
        "  drained before another job lands on it;",
        "- **detected**: the class's cases FAIL only in the epilog or the burn-in, or only WARN;",
        "- **partial**: part of the class is out of a node's sight (said under the class); the share counts the",
        "  class by its best case, and the row \"whole classes only\" leaves the partial ones out.",
        "",
        "A class is counted with all its interruptions: the paper does not say how many of them left the marker",
        "a case injects (an Xid, a counter, a log line, a sensor). The cases prove that each marker is caught",
        "where it is said to be, not that every interruption of the class leaves one.",
        "",
        "Regenerate with: `.venv/bin/python -m tests.faults.coverage > docs/fault-coverage.md`",
        "",
        "## Shares",
        "",
        f"| detected | interruptions (of {sh.observable}) | share |",
        "|---|---|---|",
        f"| with a FAIL before the next job (prolog or HealthCheckProgram) | {sh.before} | {sh.pct(sh.before):.1f} % |",
        f"| with a FAIL before the next job, whole classes only | {sh.before_whole} | {sh.pct(sh.before_whole):.1f} % |",
        f"| at all (also epilog, burn-in, or a WARN) | {sh.detected} | {sh.pct(sh.detected):.1f} % |",
        f"| at all, whole classes only | {sh.detected_whole} | {sh.pct(sh.detected_whole):.1f} % |",
        f"| not detected | {sh.observable - sh.detected} | {sh.pct(sh.observable - sh.detected):.1f} % |",
        "",
        "## Classes",
        "",
        "| class | count | level | checks that catch it (contexts they run in) | fault-matrix cases |",
        "|---|---|---|---|---|",
    ]
    for row in rows:
        cases = ", ".join(f"`{f.id}`" for f in row.cases) or "none"
        lines.append(f"| {_cell(row.cls.name)} | {row.cls.count} | {_level_cell(row)} | {_cell(_checks_cell(row))} "
                     f"| {cases} |")
    lines += ["", "## What no check here sees", "",
              "Per class, from `unseen` in the data (a check that does not exist is named here, not faked):", ""]
    lines += [f"- **{r.cls.name}** ({r.cls.count}): {r.cls.unseen}." for r in rows if r.cls.partial]
    for row in rows:
        c = row.cls
        lines += ["", f"## {c.name} ({c.count})", "",
                  f"Level: **{_level_cell(row)}**" + ("" if c.observable else "; no node tool sees the class itself")
                  + ".", "", "Symptoms:", ""]
        lines += [f"- {s}" for s in c.symptoms]
        if row.cases:
            lines += ["", "| case | check | status | proven in | check runs in | level |", "|---|---|---|---|---|---|"]
            for f in row.cases:
                co = "".join(f" + `{x}`" for x in f.co_detectors)
                lines.append(f"| {_cell(f.name)} (`{f.id}`) | `{f.check}`{co} | {f.status.value} | "
                             f"{', '.join(f.contexts)} | {', '.join(check_contexts(f.check))} | {case_level(f)} |")
        else:
            lines += ["", "No fault-matrix case."]
        if c.unseen:
            lines += ["", f"Not seen: {c.unseen}."]
    lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    import sys

    sys.stdout.write(markdown())
