"""Bad-node localisation for multi-node collectives (nccl-tests bus bandwidth), in few parallel rounds.

A *round* is one call of ``measure`` with a list of disjoint node groups, all run at the same time (e.g.
``srun -N2 -w a,b all_reduce_perf`` for every pair). A group's value is its bus bandwidth in GB/s, or
None when the test did not run (counted as below threshold). A group is only as fast as its slowest
member, so a passing group clears every member and a failing group holds at least one bad member.

Values are read with a band: ``>= threshold*(1+margin)`` passes, ``< threshold*(1-margin)`` (or None)
fails, anything in between is *unsure* and is measured again.

Pair phase
  1. ``pairs``: the nodes (seeded shuffle) in disjoint pairs; an odd node out is paired with a known-good
     node when one is given, otherwise it joins the last pair (a triple). A pass clears both nodes, a fail
     makes both suspects, an unsure value leaves both unsure.
  2. ``repair``: every suspect (then every unsure node) is paired with a distinct cleared node, given
     known-good nodes first; one round when there are at least as many cleared nodes as suspects. Below
     threshold with a cleared partner: bad (both members of a failed pair can be bad); above: cleared.
     Suspects left without a partner are re-paired among themselves (never a pair that already failed):
     such a pair can only clear. A round that only re-tests unsure nodes is a ``retest``.
  3. Further rounds only for leftovers, up to ``max_rounds`` in all; what remains is a suspect.

Group phase (``group_fault``), only when ``full_group_value`` (the full allocation) is below threshold
  - every pair passed: the fault only shows in larger groups. ``bisect`` rounds split each failing group
    into halves, all failing groups of a level at once, down to groups of 2-4; groups no larger than the
    smallest failing size are only conclusive when they pass, so smaller groups are padded with cleared
    nodes up to that size. A group is *isolated* (one node + cleared nodes, at the smallest failing size)
    as soon as enough cleared nodes are free; a failing isolation makes the node bad.
  - some pair failed (or the full value was unsure): one ``retest`` round measures the allocation without
    bad nodes and suspects; if that still fails, it is bisected as above (a second, group-only fault).

A node is bad only when measured below threshold with cleared partners; nothing else is attributed.
Variants handled: odd node counts, tests that fail to run (None), known-good partners inside or outside
the allocation, values inside the margin band, more bad nodes than cleared partners (suspects), faults
that need larger groups, an allocation of one node (suspect: nothing to test it with).
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Callable, Sequence

Group = tuple[str, ...]
Measure = Callable[[list[Group]], dict[Group, float | None]]

PASS, FAIL, UNSURE = "pass", "fail", "unsure"


@dataclass
class Round:
    kind: str  # "pairs" | "repair" | "retest" | "bisect"
    groups: list[Group]
    results: dict[Group, float | None]

    def to_dict(self) -> dict:
        return {"kind": self.kind,
                "groups": [{"nodes": list(g), "busbw": self.results.get(g)} for g in self.groups]}


@dataclass
class Localisation:
    bad: list[str]
    suspects: list[str]
    good: list[str]
    rounds: list[Round]
    evidence: dict[str, list[str]]
    group_fault: bool = False

    def to_dict(self) -> dict:
        return {"bad": list(self.bad), "suspects": list(self.suspects), "good": list(self.good),
                "group_fault": self.group_fault, "rounds": [r.to_dict() for r in self.rounds],
                "evidence": {k: list(v) for k, v in self.evidence.items()}}


@dataclass
class _Test:
    members: Group  # the unresolved nodes under test; the rest of ``group`` is cleared padding
    group: Group
    split_of: Group = ()  # the pending group this half came from (group phase)
    unpadded: bool = False


@dataclass
class _Run:
    nodes: list[str]
    measure: Measure
    threshold: float
    margin: float
    max_rounds: int
    trusted: list[str]
    rng: random.Random
    rounds: list[Round] = field(default_factory=list)
    evidence: dict[str, list[str]] = field(default_factory=dict)
    state: dict[str, str] = field(default_factory=dict)  # cleared | suspect | unsure | bad
    failed_pairs: set[frozenset] = field(default_factory=set)
    partners_of: dict[str, set[str]] = field(default_factory=dict)
    trusted_set: set[str] = field(default_factory=set)
    unit: str = "GB/s"  # of the values, for the evidence lines (the RDMA pair phase measures Gb/s)

    def __post_init__(self) -> None:
        self.trusted_set = set(self.trusted)

    # ------------------------------------------------------------------ measuring and reading
    def classify(self, value: float | None) -> str:
        if value is None or math.isnan(value):
            return FAIL
        if value >= self.threshold * (1 + self.margin):
            return PASS
        return FAIL if value < self.threshold * (1 - self.margin) else UNSURE

    def describe(self, value: float | None) -> str:
        cls = self.classify(value)
        if value is None or math.isnan(value):
            return "failed to run"
        if cls == PASS:
            return f"{value:.1f} {self.unit} >= {self.threshold:.1f}"
        if cls == FAIL:
            return f"{value:.1f} {self.unit} < {self.threshold:.1f}"
        return f"{value:.1f} {self.unit} within ±{self.margin:.0%} of {self.threshold:.1f} (unsure)"

    def note(self, node: str, line: str) -> None:
        self.evidence.setdefault(node, []).append(line)

    def run_round(self, kind: str, groups: list[Group]) -> dict[Group, float | None]:
        got = self.measure(list(groups))
        if not isinstance(got, dict):
            raise ValueError(f"measure must return a dict of group -> busbw, got {type(got).__name__}")
        results: dict[Group, float | None] = {}
        for g in groups:
            v = got.get(g)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
                raise ValueError(f"measure returned {v!r} for group {g}: expected GB/s or None")
            results[g] = None if v is None or math.isnan(v) else float(v)
        self.rounds.append(Round(kind, list(groups), results))
        return results

    def label(self, t: _Test) -> str:
        pad = len(t.group) - len(t.members)
        if len(t.members) <= 4:
            core = ",".join(t.members)
        else:
            core = f"{t.members[0]},...,{t.members[-1]}; {len(t.members)} nodes"
        if pad == 0:
            return f"({core})"
        if pad <= 3 and len(t.members) <= 4:
            return f"({','.join(t.group)})"
        return f"({core} + {pad} known-good)"

    def is_clear(self, node: str) -> bool:
        return node in self.trusted_set or self.state.get(node) == "cleared"

    # ------------------------------------------------------------------ pair phase
    def pair_phase(self, test_nodes: list[str]) -> None:
        order = list(test_nodes)
        self.rng.shuffle(order)
        groups: list[Group] = [(order[i], order[i + 1]) for i in range(0, len(order) - 1, 2)]
        if len(order) % 2:
            last = order[-1]
            if self.trusted:
                groups.append((last, self.trusted[0]))
            elif groups:
                groups[-1] = groups[-1] + (last,)
            else:
                self.state[last] = "suspect"
                self.note(last, "round 1 pairs: no partner to test with (one node, no known-good node)")
        if groups:
            self.apply_pairs(1, "pairs", groups, self.run_round("pairs", groups))
        while len(self.rounds) < self.max_rounds:
            groups = self.plan_pairs(test_nodes)
            if not groups:
                break
            kind = "repair" if any(self.state.get(n) == "suspect" for g in groups for n in g) else "retest"
            self.apply_pairs(len(self.rounds) + 1, kind, groups, self.run_round(kind, groups))

    def plan_pairs(self, test_nodes: list[str]) -> list[Group]:
        pending = [n for n in test_nodes if self.state.get(n) == "suspect"]
        pending += [n for n in test_nodes if self.state.get(n) == "unsure"]
        pool = self.trusted + [n for n in test_nodes if self.state.get(n) == "cleared" and n not in self.trusted_set]
        groups: list[Group] = []
        leftovers: list[str] = []
        for node in pending:
            seen = self.partners_of.get(node, set())
            pick = next((i for i, p in enumerate(pool) if p not in seen), 0 if pool else None)
            if pick is None:
                leftovers.append(node)
            else:
                groups.append((node, pool.pop(pick)))
        self.rng.shuffle(leftovers)
        while leftovers:
            node = leftovers.pop(0)
            mate = next((m for m in leftovers if frozenset((node, m)) not in self.failed_pairs), None)
            if mate is not None:
                leftovers.remove(mate)
                groups.append((node, mate))
        return groups

    def apply_pairs(self, number: int, kind: str, groups: list[Group], results: dict) -> None:
        for g in groups:
            value = results[g]
            cls = self.classify(value)
            known = [m for m in g if self.is_clear(m)]
            unknown = [m for m in g if not self.is_clear(m)]
            for m in unknown:
                self.partners_of.setdefault(m, set()).update(x for x in g if x != m)
            line = f"round {number} {kind}: ({','.join(g)}) {self.describe(value)}"
            if known:
                line += " with known-good " + ",".join(known)
            if cls == FAIL and len(unknown) > 1:
                self.failed_pairs.update(frozenset((a, b)) for a in unknown for b in unknown if a < b)
            for m in unknown:
                if cls == PASS:
                    self.state[m] = "cleared"
                elif cls == FAIL:
                    self.state[m] = "bad" if known and len(unknown) == 1 else "suspect"
                elif self.state.get(m) != "suspect":
                    self.state[m] = "unsure"
                self.note(m, line)

    # ------------------------------------------------------------------ group phase
    def group_phase(self, allocation: list[str], full_value: float) -> bool:
        """Returns True when bisection was used (a fault that only shows in larger groups)."""
        good = [n for n in allocation if self.is_clear(n)]
        any_found = any(self.state.get(n) in ("bad", "suspect", "unsure") for n in allocation)
        if self.classify(full_value) == FAIL and not any_found:
            size = len(allocation)
            for n in allocation:
                self.note(n, f"full allocation ({size} nodes): {self.describe(full_value)} while every pair passed")
        else:
            if len(good) < 2 or len(self.rounds) >= self.max_rounds:
                return False
            group = tuple(good)
            value = self.run_round("retest", [group])[group]
            line = f"round {len(self.rounds)} retest: allocation without bad nodes and suspects " \
                   f"({len(group)} nodes) {self.describe(value)}"
            for n in good:
                self.note(n, line)
            if self.classify(value) != FAIL:
                return False
            size = len(group)
        pending = [tuple(n for n in good if n not in self.trusted_set)]
        if not pending[0]:
            return False
        for n in pending[0]:
            self.state[n] = "suspect"
        self.bisect(pending, size, good)
        return True

    def bisect(self, pending: list[Group], smallest_fail: int, allocation: list[str]) -> None:
        pass_size: dict[str, int] = {}
        tried: set[Group] = set()
        while pending and len(self.rounds) < self.max_rounds:
            busy = {n for g in pending for n in g}
            pool = self.trusted + [n for n in allocation if n not in busy and n not in self.trusted_set
                                   and self.state.get(n) == "cleared"]
            tests = self.plan_bisect(pending, smallest_fail, pool, tried)
            if not tests:
                break
            number = len(self.rounds) + 1
            results = self.run_round("bisect", [t.group for t in tests])
            verdicts = [(t, results[t.group], self.classify(results[t.group])) for t in tests]
            smallest_fail = min([smallest_fail] + [len(t.group) for t, _, c in verdicts if c == FAIL])
            resolved: set[str] = set()
            new_pending: list[Group] = []
            for t, value, cls in verdicts:
                line = f"round {number} bisect: {self.label(t)} {self.describe(value)}"
                for m in t.members:
                    pass_size[m] = max(pass_size.get(m, 0), len(t.group) if cls == PASS else 0)
                if cls == FAIL and len(t.members) == 1:
                    self.state[t.members[0]] = "bad"
                    resolved.add(t.members[0])
                    line += ": isolated"
                elif cls != PASS:
                    new_pending.append(t.members)
                    resolved.update(t.members)
                elif len(t.group) < smallest_fail:
                    line += f" (smaller than the smallest failing group, {smallest_fail}: not conclusive)"
                for m in t.members:
                    self.note(m, line)
            for g in pending:  # what is left of each group: untested or passed below the failing size
                rest = tuple(n for n in g if n not in resolved)
                if rest and any(t.unpadded and t.split_of == g for t in tests) and rest == g:
                    tried.add(g)
                new_pending.append(rest)
            pending = []
            for g in new_pending:
                for n in g:
                    if pass_size.get(n, 0) >= smallest_fail and self.state.get(n) != "bad":
                        self.state[n] = "cleared"
                        self.note(n, f"cleared: passed in a group of {pass_size[n]} "
                                     f"(faults show in groups of {smallest_fail})")
                rest = tuple(n for n in g if self.state.get(n) == "suspect")
                if rest:
                    pending.append(rest)

    @staticmethod
    def plan_bisect(pending: list[Group], size: int, pool: list[str], tried: set[Group]) -> list[_Test]:
        tests: list[_Test] = []
        free = list(pool)

        def padded(members: Group, split_of: Group) -> _Test:
            need = max(0, size - len(members))
            pad = tuple(free[:need])
            del free[:need]
            return _Test(members, members + pad, split_of)

        for g in sorted(pending, key=len):
            halves = (g[:len(g) // 2], g[len(g) // 2:])
            pad_halves = sum(max(0, size - len(h)) for h in halves)
            if len(g) * (size - 1) <= len(free):
                tests += [padded((n,), g) for n in g]
            elif len(g) > 4 and g not in tried:
                tests += [_Test(h, h, g, unpadded=True) for h in halves]
            elif len(g) > 1 and pad_halves <= len(free):
                tests += [padded(h, g) for h in halves]
            else:
                k = len(free) // max(1, size - 1)
                tests += [padded((n,), g) for n in g[:k]]
        return tests


def localise(nodes: Sequence[str], measure: Measure, threshold: float, *, known_good: Sequence[str] = (),
             margin: float = 0.05, max_rounds: int = 6, seed: int = 0,
             full_group_value: float | None = None, unit: str = "GB/s") -> Localisation:
    """Find the nodes that drag a collective below ``threshold`` (GB/s); see the module docstring."""
    nodes = list(nodes)
    if len(set(nodes)) != len(nodes):
        dupes = sorted({n for n in nodes if nodes.count(n) > 1})
        raise ValueError(f"duplicate node names: {', '.join(dupes)}")
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not threshold > 0 \
            or math.isinf(threshold):
        raise ValueError(f"threshold must be a positive number of GB/s, got {threshold!r}")
    if not 0 <= margin < 1:
        raise ValueError(f"margin must be in [0, 1), got {margin!r}")
    if max_rounds < 1:
        raise ValueError(f"max_rounds must be >= 1, got {max_rounds!r}")
    trusted = list(dict.fromkeys(known_good))
    run = _Run(nodes, measure, float(threshold), margin, max_rounds, trusted, random.Random(seed), unit=unit)
    for n in nodes:
        if n in run.trusted_set:
            run.state[n] = "cleared"
            run.note(n, "given as known-good")
    test_nodes = [n for n in nodes if n not in run.trusted_set]
    if test_nodes:
        run.pair_phase(test_nodes)
    group_fault = False
    if full_group_value is not None and run.classify(full_group_value) != PASS and len(nodes) > 1:
        group_fault = run.group_phase(nodes, full_group_value)
    bad = sorted(n for n in nodes if run.state.get(n) == "bad")
    suspects = sorted(n for n in nodes if run.state.get(n) in ("suspect", "unsure"))
    good = sorted(n for n in nodes if run.state.get(n) == "cleared")
    for n in suspects:
        run.note(n, f"unresolved after {len(run.rounds)} rounds (max_rounds={max_rounds})")
    return Localisation(bad, suspects, good, run.rounds, {n: run.evidence.get(n, []) for n in nodes},
                        group_fault)
