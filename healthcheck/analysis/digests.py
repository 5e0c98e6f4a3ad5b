"""The fleet's GEMM digests: which product is right for each fleet key, and which GPUs computed another.

Every GPU of one model, running the burn-in's GEMM with the same library stack, dtype, size and input
seed (the *fleet key*, ``healthcheck.burnin.judge_compute.fleet_key``), must produce the same bits. A
node compares its own GPUs and the job compares its nodes; this compares the whole fleet through the
history, so a GPU that is wrong alone on its node, or a node whose every GPU is wrong, is still named.

Input: rows with ``node``, ``component``, ``fleet_key``, ``digest``, ``started_at`` and ``run_id``
(``healthcheck.history.digests.load_digests``). Each GPU (node, component) votes once per key, with its
latest digest (latest by (started_at, run_id)): a GPU repaired since its bad run is judged by its new run.

Majority: the digest held by more than ``share`` of the key's voting GPUs (default: more than half),
provided at least ``min_gpus`` GPUs on at least ``min_nodes`` nodes voted. A key short of that is
*undecided*: nothing is said about its GPUs (a new model, a new library version, a first burn-in).
A GPU whose latest digest differs from its key's majority is a *deviant*: silent data corruption, or a
node that runs other software under the same label (the message says both).

Pure: no I/O, no clock; O(rows) plus a sort of the voting GPUs per key.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable

MIN_GPUS = 4
MIN_NODES = 2
SHARE = 0.5


@dataclass(frozen=True)
class FleetDigest:
    fleet_key: str
    digest: str | None  # the majority digest; None when undecided
    gpus: int           # GPUs that voted (their latest digest)
    votes: int          # of those, GPUs with the leading digest
    nodes: int          # nodes that voted

    def to_dict(self) -> dict[str, Any]:
        return {"digest": self.digest, "gpus": self.gpus, "votes": self.votes, "nodes": self.nodes}


@dataclass(frozen=True)
class Deviant:
    node: str
    component: str
    fleet_key: str
    digest: str
    majority: str
    votes: int
    gpus: int
    run_id: str
    started_at: Any

    def message(self) -> str:
        return (f"{self.component}: GEMM result {self.digest[:12]} differs from the fleet's {self.majority[:12]} "
                f"({self.votes} of {self.gpus} GPUs) for {self.fleet_key}: silent data corruption, or software "
                "other than its peers'")


@dataclass
class FleetView:
    keys: dict[str, FleetDigest] = field(default_factory=dict)
    deviants: list[Deviant] = field(default_factory=list)

    @property
    def majorities(self) -> dict[str, str]:
        """fleet key -> majority digest, decided keys only (what a node run compares with)."""
        return {k: v.digest for k, v in self.keys.items() if v.digest is not None}


def _field(row: Any, name: str) -> Any:
    return row[name] if isinstance(row, dict) else getattr(row, name)


def fleet_view(rows: Iterable[Any], *, min_gpus: int = MIN_GPUS, min_nodes: int = MIN_NODES,
               share: float = SHARE) -> FleetView:
    """The majority per fleet key and the GPUs that differ from it (see the module docstring)."""
    if min_gpus < 1 or min_nodes < 1 or not 0.5 <= share < 1:
        raise ValueError(f"min_gpus and min_nodes must be >= 1 and share in [0.5, 1), got {min_gpus}, "
                         f"{min_nodes}, {share}")
    latest: dict[tuple[str, str, str], Any] = {}
    order: dict[tuple[str, str, str], tuple] = {}
    for row in rows:
        key = (_field(row, "fleet_key"), _field(row, "node"), _field(row, "component"))
        when = (_field(row, "started_at"), _field(row, "run_id"))
        if key not in order or when > order[key]:
            latest[key], order[key] = row, when
    by_key: dict[str, list[Any]] = {}
    for (fleet_key, _node, _component), row in sorted(latest.items(), key=lambda kv: kv[0]):
        by_key.setdefault(fleet_key, []).append(row)
    view = FleetView()
    for fleet_key, voters in by_key.items():
        counts = Counter(str(_field(r, "digest")).lower() for r in voters)
        (top, top_n), *rest = counts.most_common()
        tie = bool(rest) and rest[0][1] == top_n
        nodes = len({_field(r, "node") for r in voters})
        decided = (len(voters) >= min_gpus and nodes >= min_nodes and top_n > share * len(voters) and not tie)
        view.keys[fleet_key] = FleetDigest(fleet_key, top if decided else None, len(voters), top_n, nodes)
        if not decided:
            continue
        for r in voters:
            digest = str(_field(r, "digest")).lower()
            if digest != top:
                view.deviants.append(Deviant(_field(r, "node"), _field(r, "component"), fleet_key, digest, top,
                                             top_n, len(voters), _field(r, "run_id"), _field(r, "started_at")))
    return view
