"""A simulated GPU fleet for bad-node localisation, a scorer, and two naive baselines to compare against.

``Fleet`` models what an nccl-tests bus bandwidth looks like per group of nodes: a group runs at
``nominal * min(factor of its members) * (1 + gauss(0, noise_sd))`` GB/s, one fresh noise draw per group
and round. Every node has its own factor, drawn once when the fleet is built:

  - a healthy node: uniform in ``[1 - good_spread, 1]`` (``good_spread`` 0.0, the default: exactly 1.0);
  - a bad node: uniform in ``bad_factor_range = (lo, hi)``, or exactly ``bad_factor`` when the range is
    None (the default);
  - a *group-only* bad node (a share ``group_only_fraction`` of the bad nodes) has its healthy factor
    (drawn like a healthy node's) in groups smaller than ``group_only_min_size`` and its bad factor in
    larger ones (a fault that only shows at scale).

``Fleet.factors`` (bad factor for bad nodes, healthy factor for the others) and ``Fleet.healthy_factors``
(every node) hold the draws. The bad and group-only sets, the healthy factors, the bad factors and the
noise come from four separate ``random.Random`` streams seeded from ``seed``, so changing the spread or
the range does not move the bad nodes or the noise, and the defaults give bit-identical values to the
fleet before per-node factors. ``Fleet.measure`` is a ``localize.Measure``: it checks that the groups of a round are disjoint and
made of known nodes, and counts rounds. Everything is seeded (``random`` only, no numpy).

Baselines (both return ``(bad nodes sorted, rounds used)``):
  - ``baseline_random_pairs_second_pass``: random pairs (odd node joins the last pair); every node of a
    pair below threshold is a suspect; each suspect is then paired once with a distinct node of a passing
    pair and flagged when below threshold again. Suspects left without a partner are flagged too. No
    margin, no re-test, no bisection.
  - ``baseline_shuffles``: ``rounds`` independent random pairings; a node is flagged when more than half
    of its pairs were below threshold.
"""
from __future__ import annotations

import random
from typing import Iterable, Sequence

from healthcheck.burnin.localize import Group, Measure


def _check_range(value: tuple[float, float] | None) -> tuple[float, float] | None:
    if value is None:
        return None
    if not isinstance(value, (tuple, list)) or len(value) != 2 or any(
            isinstance(v, bool) or not isinstance(v, (int, float)) for v in value):
        raise ValueError(f"bad_factor_range must be a (low, high) pair of numbers or None, got {value!r}")
    low, high = float(value[0]), float(value[1])
    if not 0 <= low <= high <= 1:
        raise ValueError(f"bad_factor_range must satisfy 0 <= low <= high <= 1, got {value!r}")
    return low, high


class Fleet:
    def __init__(self, n_nodes: int, bad_fraction: float, bad_factor: float = 0.6, noise_sd: float = 0.03,
                 nominal: float = 400.0, group_only_fraction: float = 0.0, group_only_min_size: int = 8,
                 seed: int = 0, good_spread: float = 0.0,
                 bad_factor_range: tuple[float, float] | None = None) -> None:
        if n_nodes < 1:
            raise ValueError(f"n_nodes must be >= 1, got {n_nodes}")
        for name, value in (("bad_fraction", bad_fraction), ("group_only_fraction", group_only_fraction)):
            if not 0 <= value <= 1:
                raise ValueError(f"{name} must be in [0, 1], got {value}")
        if not (noise_sd >= 0 and nominal > 0 and bad_factor >= 0):
            raise ValueError("noise_sd and bad_factor must be >= 0 and nominal > 0")
        if isinstance(good_spread, bool) or not isinstance(good_spread, (int, float)) or not 0 <= good_spread < 1:
            raise ValueError(f"good_spread must be a number in [0, 1), got {good_spread!r}")
        bad_range = _check_range(bad_factor_range)
        width = max(3, len(str(n_nodes - 1)))
        self.nodes: list[str] = [f"n{i:0{width}d}" for i in range(n_nodes)]
        self.bad_factor = bad_factor
        self.bad_factor_range = bad_range
        self.good_spread = float(good_spread)
        self.noise_sd = noise_sd
        self.nominal = nominal
        self.group_only_min_size = group_only_min_size
        pick = random.Random(f"{seed}/fleet")  # independent of a random.Random(seed) elsewhere
        self.bad: set[str] = set(pick.sample(self.nodes, round(n_nodes * bad_fraction)))
        ordered = sorted(self.bad)
        self.group_only: set[str] = set(pick.sample(ordered, round(len(ordered) * group_only_fraction)))
        healthy = random.Random(f"{seed}/healthy")  # one draw per node, in node order, whatever is bad
        self.healthy_factors: dict[str, float] = {
            n: 1.0 if not good_spread else healthy.uniform(1.0 - good_spread, 1.0) for n in self.nodes}
        slow = random.Random(f"{seed}/bad")  # one draw per bad node, in name order
        self.factors: dict[str, float] = dict(self.healthy_factors)
        for n in ordered:
            self.factors[n] = bad_factor if bad_range is None else slow.uniform(*bad_range)
        self._noise = random.Random(f"{seed}/noise")
        self._index = set(self.nodes)
        self.rounds = 0

    def factor(self, node: str, group_size: int) -> float:
        """The node's factor in a group of ``group_size`` nodes (a group-only fault hides in small groups)."""
        if node in self.group_only and group_size < self.group_only_min_size:
            return self.healthy_factors[node]
        return self.factors[node]

    def _value(self, group: Group) -> float:
        slowest = min(self.factor(n, len(group)) for n in group)
        return self.nominal * slowest * (1 + self._noise.gauss(0.0, self.noise_sd))

    def measure(self, groups: list[Group]) -> dict[Group, float | None]:
        seen: set[str] = set()
        for g in groups:
            if not g:
                raise ValueError("empty group")
            unknown = [n for n in g if n not in self._index]
            if unknown:
                raise ValueError(f"unknown nodes in group {g}: {unknown}")
            if seen.intersection(g) or len(set(g)) != len(g):
                raise ValueError(f"groups of one round must be disjoint: {g} overlaps")
            seen.update(g)
        self.rounds += 1
        return {tuple(g): self._value(tuple(g)) for g in groups}

    def full_value(self) -> float:
        """The full allocation's result (the run that triggered localisation; not counted as a round)."""
        return self._value(tuple(self.nodes))


def score(found: Iterable[str], truth: set[str]) -> tuple[float, float]:
    """(precision, recall); precision is 1.0 when nothing was found, recall 1.0 when nothing is bad."""
    found = set(found)
    hits = len(found & truth)
    precision = hits / len(found) if found else 1.0
    recall = hits / len(truth) if truth else 1.0
    return precision, recall


def _pairs(nodes: list[str]) -> list[Group]:
    groups: list[Group] = [(nodes[i], nodes[i + 1]) for i in range(0, len(nodes) - 1, 2)]
    if len(nodes) % 2 and groups:
        groups[-1] = groups[-1] + (nodes[-1],)
    return groups


def _below(value: float | None, threshold: float) -> bool:
    return value is None or value < threshold


def baseline_random_pairs_second_pass(nodes: Sequence[str], measure: Measure, threshold: float,
                                      seed: int) -> tuple[list[str], int]:
    order = list(nodes)
    random.Random(seed).shuffle(order)
    groups = _pairs(order)
    if not groups:
        return [], 0
    results = measure(groups)
    suspects = [n for g in groups if _below(results.get(g), threshold) for n in g]
    good = [n for g in groups if not _below(results.get(g), threshold) for n in g]
    if not suspects:
        return [], 1
    second = [(s, p) for s, p in zip(suspects, good)]
    flagged = set(suspects[len(second):])
    if second:
        results = measure(second)
        flagged.update(s for s, p in second if _below(results.get((s, p)), threshold))
    return sorted(flagged), 2 if second else 1


def baseline_shuffles(nodes: Sequence[str], measure: Measure, threshold: float, rounds: int,
                      seed: int) -> tuple[list[str], int]:
    rng = random.Random(seed)
    fails = {n: 0 for n in nodes}
    tested = {n: 0 for n in nodes}
    used = 0
    for _ in range(rounds):
        order = list(nodes)
        rng.shuffle(order)
        groups = _pairs(order)
        if not groups:
            break
        results = measure(groups)
        used += 1
        for g in groups:
            below = _below(results.get(g), threshold)
            for n in g:
                tested[n] += 1
                fails[n] += below
    return sorted(n for n in nodes if tested[n] and fails[n] / tested[n] > 0.5), used
