"""What a drill measured: a timeline of monotonic marks, and the result built from it. Pure: the
clock is passed in (``Timeline(clock=...)``), nothing here reads it on its own or does I/O."""
from __future__ import annotations

import math
from typing import Any, Callable, Iterable

from ..core.model import Finding, Status, Verdict
from ..spool.entries import new_run_id, run_record

# The stages every drill reports, in the order they happen; each is seconds after the fault (a stage
# the drill does not have, or that never came, is None). ``resume_s`` is counted from the repair.
STAGES = ("detect_s", "drain_s", "requeue_s", "resume_s")
CHECK_PREFIX = "drill."
CONTEXT = "drill"


class Timeline:
    """Named instants from one monotonic clock. ``mark(name)`` records now; ``since(a, b)`` is the
    seconds from mark ``a`` to mark ``b`` (None when either is missing)."""

    __slots__ = ("clock", "marks")

    def __init__(self, clock: Callable[[], float]):
        self.clock = clock
        self.marks: dict[str, float] = {}

    def mark(self, name: str, at: float | None = None) -> float:
        if name in self.marks:
            raise ValueError(f"timeline mark {name!r} set twice")
        value = self.clock() if at is None else float(at)
        self.marks[name] = value
        return value

    def since(self, start: str, end: str) -> float | None:
        if start not in self.marks or end not in self.marks:
            return None
        return self.marks[end] - self.marks[start]


class DrillResult:
    """One drill's outcome. ``stages``: STAGES -> seconds or None; ``extra``: other measured numbers
    (e.g. ``hook_s``, ``budget_s``, ``detect_runs``); ``expected``: the stages this drill must reach
    (a missing one fails it); ``lost``: what was lost (empty: nothing); ``problems``: what else went
    wrong (a budget overrun, a wrong reason, a wait that timed out); ``notes``: what was seen."""

    __slots__ = ("name", "node", "job_id", "started_at", "duration_s", "stages", "extra", "expected",
                 "lost", "problems", "notes", "reason")

    def __init__(self, name: str, node: str, started_at: str, duration_s: float = 0.0,
                 job_id: str | None = None, stages: dict[str, float | None] | None = None,
                 extra: dict[str, float] | None = None, expected: Iterable[str] = (),
                 lost: Iterable[str] = (), notes: Iterable[str] = (), reason: str | None = None,
                 problems: Iterable[str] = ()):
        self.name, self.node, self.job_id = name, node, job_id
        self.started_at, self.duration_s = started_at, float(duration_s)
        unknown = set(stages or {}) - set(STAGES)
        if unknown:
            raise ValueError(f"unknown drill stage(s): {', '.join(sorted(unknown))} (known: {', '.join(STAGES)})")
        self.stages = {s: (None if (stages or {}).get(s) is None else round(float(stages[s]), 3))
                       for s in STAGES}
        self.extra = {k: round(float(v), 3) for k, v in (extra or {}).items() if v is not None}
        self.expected = tuple(expected)
        bad = set(self.expected) - set(STAGES)
        if bad:
            raise ValueError(f"unknown expected stage(s): {', '.join(sorted(bad))}")
        self.lost, self.notes, self.problems = list(lost), list(notes), list(problems)
        self.reason = reason  # the drain reason Slurm showed, where the drill drains

    @property
    def missing(self) -> list[str]:
        """Expected stages that never came."""
        return [s for s in self.expected if self.stages[s] is None]

    @property
    def ok(self) -> bool:
        return not self.missing and not self.lost and not self.problems

    @property
    def status(self) -> str:
        return "pass" if self.ok else "fail"

    def message(self) -> str:
        parts = [f"{s[:-2]} {self.stages[s]:.1f} s" for s in STAGES if self.stages[s] is not None]
        if self.missing:
            parts.append("never reached: " + ", ".join(s[:-2] for s in self.missing))
        parts.extend(self.problems)
        parts.append("lost: " + "; ".join(self.lost) if self.lost else "nothing lost")
        return f"drill {self.name} on {self.node}: " + ", ".join(parts)

    def metrics(self) -> dict[str, float]:
        """The finite numbers of the run: the stages reached plus the extra figures."""
        out = {k: v for k, v in self.stages.items() if v is not None}
        out.update(self.extra)
        out["lost_items"] = float(len(self.lost))
        return {k: v for k, v in out.items() if math.isfinite(v)}

    def to_dict(self) -> dict[str, Any]:
        return {"drill": self.name, "node": self.node, "job_id": self.job_id, "status": self.status,
                "started_at": self.started_at, "duration_s": round(self.duration_s, 3),
                "stages": dict(self.stages), "extra": dict(self.extra), "expected": list(self.expected),
                "missing": self.missing, "lost": list(self.lost), "problems": list(self.problems), "notes": list(self.notes),
                "reason": self.reason}

    def to_record(self, run_id: str | None = None) -> dict[str, Any]:
        """The spool "run" record (the one shape, ``spool.entries.run_record``, that the history
        ingests): context "drill", one result ``drill.<name>`` whose metrics are the stage timings."""
        finding = Finding(CHECK_PREFIX + self.name, Status(self.status), self.message(), None, self.metrics())
        verdict = Verdict.of(self.node, [finding], self.started_at, self.duration_s, CONTEXT)
        return run_record(verdict, run_id or new_run_id(), self.job_id, None)


def render_text(results: Iterable[DrillResult]) -> str:
    """A table: one line per drill, a column per stage (seconds; '-' not applicable or not reached),
    then what was lost and the notes."""
    results = list(results)
    head = f"{'drill':<16} {'node':<8} {'status':<6} " + " ".join(f"{s:>10}" for s in STAGES)
    lines = [head]
    for r in results:
        cells = " ".join(f"{'-' if r.stages[s] is None else format(r.stages[s], '.1f'):>10}" for s in STAGES)
        lines.append(f"{r.name:<16} {r.node:<8} {r.status:<6} {cells}")
    for r in results:
        if r.extra:
            lines.append(f"  {r.name}: " + ", ".join(f"{k}={v:g}" for k, v in sorted(r.extra.items())))
        if r.missing:
            lines.append(f"  {r.name}: never reached: {', '.join(r.missing)}")
        lines.extend(f"  {r.name}: problem: {p}" for p in r.problems)
        lines.append(f"  {r.name}: " + ("lost: " + "; ".join(r.lost) if r.lost else "nothing lost"))
        lines.extend(f"  {r.name}: {note}" for note in r.notes)
    return "\n".join(lines) + "\n"
