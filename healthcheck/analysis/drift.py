"""Version drift among the nodes of one class: who runs something other than their peers (or than
the site expects).

Input: a ``versions`` frame with columns node, node_class, item, value: one row per node and item
(items as ``healthcheck.probes.versions`` names them: kernel, driver, cuda, vbios, nccl, rdma_core,
ofed, hca_firmware, mlx5_core, ...). An item with several values on one node (per-GPU vbios,
per-HCA firmware) comes either as several rows or as one comma-joined value (the probe's own
spelling, "96.00.89.00.01,96.00.74.00.01"); both are read alike. Values are stripped; rows without
a node or a value are ignored. A missing node_class is a class of its own (shown as None).

Method: per (class, item), each node's *value set* (its distinct values, sorted and comma-joined;
"a node counts as drifting when any value differs") is one vote; the majority value set is the
plurality winner (the mode of the votes) provided it holds more than ``majority_share`` of the
class's nodes that report the item (``n_nodes``) and no other value set ties with it. Nodes whose
value set differs from the majority drift by kind "majority". Without a majority ("no value on more
than half the nodes") nobody can say which side is right: every node is reported (kind "majority",
severity warn), except nodes that match an explicit expectation for that item, which says which side
is right. Classes where fewer than ``min_nodes`` nodes report the item are not voted on: only the
expectation is judged there.

Expectations ``{class: {item: spec}}``: a spec ending with "." or "*" is a *prefix* ("550." matches
"550.54.15" but not "5501.2"; "550*" matches anything starting with "550", the "*" removed); any
other spec must equal the value exactly. A node misses the expectation when any of its values does
not match: kind "expected" (or "both" when it also drifts from the majority). Severity: "fail" for
a missed explicit expectation, "warn" for majority-only drift.

Complexity: one explode, a sort and a few grouped counts over the rows (O(n log n)); the
expectation match is one Python comparison per (node, value) row of an item that has a spec.
"""
from __future__ import annotations

import re
from collections.abc import Mapping

import numpy as np
import pandas as pd

from ._frames import empty, prepare

DRIFT_COLUMNS = {"node_class": "object", "item": "object", "node": "object", "value": "object",
                 "majority": "object", "majority_share": "float64", "n_nodes": "int64",
                 "expected": "object", "kind": "object", "severity": "object"}

_VERSION_COLS = ["node", "node_class", "item", "value"]
_NO_CLASS = "\x00no-class"  # internal stand-in for a missing class (groupby/merge-safe)
_MAX_LISTED = 8


def matches_expected(value: str, spec: str) -> bool:
    """Whether one version ``value`` satisfies ``spec`` (prefix when it ends with "." or "*",
    else exact)."""
    if spec.endswith("*"):
        return value.startswith(spec.rstrip("*"))
    if spec.endswith("."):
        return value.startswith(spec)
    return value == spec


def _expected_frame(expected: Mapping[str, Mapping[str, str]] | None) -> pd.DataFrame:
    rows = []
    if expected is None:
        expected = {}
    if not isinstance(expected, Mapping):
        raise ValueError(f"expected must be a mapping {{class: {{item: version}}}}, "
                         f"not {type(expected).__name__}")
    for cls, items in expected.items():
        if not isinstance(items, Mapping):
            raise ValueError(f"expected[{cls!r}] must be a mapping {{item: version}}, "
                             f"not {type(items).__name__}")
        for item, spec in items.items():
            if not isinstance(spec, str) or not spec.strip().rstrip("*"):
                raise ValueError(f"expected[{cls!r}][{item!r}] must be a non-empty version string "
                                 f"or prefix, not {spec!r}")
            rows.append((_NO_CLASS if cls is None else str(cls), str(item), spec.strip()))
    return pd.DataFrame(rows, columns=["node_class", "item", "expected"], dtype=object)


def _value_rows(versions: pd.DataFrame) -> pd.DataFrame:
    """Distinct (class, item, node, value) rows, comma-joined values split, sorted."""
    df = prepare(versions, _VERSION_COLS, frame="versions")
    if df.empty:
        return df
    value = df["value"].astype(object)
    value = value.where(value.notna(), "").astype(str).str.split(",")
    cls = df["node_class"].astype(object)
    df = pd.DataFrame({"node_class": cls.where(cls.notna(), _NO_CLASS).astype(str),
                       "item": df["item"].astype(object).astype(str),
                       "node": df["node"].astype(object).astype(str),
                       "value": value}).explode("value")
    df["value"] = df["value"].astype(str).str.strip()
    df = df[df["value"].ne("")]
    return df.drop_duplicates().sort_values(["node_class", "item", "node", "value"],
                                            kind="stable").reset_index(drop=True)


def _value_sets(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per (class, item, node): its sorted value set, comma-joined (the node's vote).

    ``rows`` come sorted and distinct; only nodes with several values are joined in Python."""
    unit = rows[["node_class", "item", "node"]]
    start = (unit != unit.shift()).any(axis=1).to_numpy()
    gid = np.cumsum(start) - 1
    multi = np.bincount(gid)[gid] > 1
    nodes = rows[start].reset_index(drop=True)
    if multi.any():
        joined = rows[multi].groupby(gid[multi], sort=True)["value"].agg(",".join)
        values = nodes["value"].to_numpy(dtype=object)
        values[joined.index.to_numpy()] = joined.to_numpy(dtype=object)
        nodes["value"] = values
    return nodes


def version_drift(versions: pd.DataFrame, expected: Mapping[str, Mapping[str, str]] | None = None,
                  *, min_nodes: int = 3, majority_share: float = 0.5) -> pd.DataFrame:
    """Nodes whose versions differ from their class's majority or from the expectation.

    Returns one row per drifting (node, item) with columns node_class, item, node, value (the
    node's value set, comma-joined), majority (the majority value set, None when there is none or
    the class was not voted on), majority_share (share of ``n_nodes`` holding the most common value
    set), n_nodes (nodes of the class reporting the item), expected (the spec or None), kind
    ("majority" | "expected" | "both"), severity ("fail" | "warn"); sorted by class (None last),
    item, node.
    """
    if not 0.0 <= majority_share < 1.0:
        raise ValueError(f"majority_share must be in [0, 1), not {majority_share!r}")
    if min_nodes < 1:
        raise ValueError(f"min_nodes must be at least 1, not {min_nodes!r}")
    exp = _expected_frame(expected)
    rows = _value_rows(versions)
    if rows.empty:
        return empty(DRIFT_COLUMNS)
    keys = ["node_class", "item"]
    nodes = _value_sets(rows)
    votes = nodes.groupby(keys + ["value"], sort=True).size().rename("count").reset_index()
    votes = votes.sort_values(keys + ["count", "value"], ascending=[True, True, False, True],
                              kind="stable")
    rank = votes.groupby(keys, sort=False).cumcount().to_numpy()
    stats = votes[rank == 0].set_index(keys).rename(columns={"value": "top", "count": "top_count"})
    stats["n_nodes"] = votes.groupby(keys, sort=True)["count"].sum()
    second = votes[rank == 1].set_index(keys)["count"]
    stats["second"] = second.reindex(stats.index).fillna(0).astype("int64")
    stats["majority_share"] = stats["top_count"] / stats["n_nodes"]
    stats["voted"] = stats["n_nodes"] >= min_nodes
    has_major = ((stats["majority_share"] > majority_share) & (stats["top_count"] > stats["second"])
                 & stats["voted"])
    stats["majority"] = stats["top"].where(has_major, None)
    stats = stats.reset_index()

    nodes = nodes.merge(stats[keys + ["majority", "majority_share", "n_nodes", "voted"]],
                        on=keys, how="left")
    nodes = nodes.merge(exp, on=keys, how="left")
    nodes["expected"] = nodes["expected"].astype(object).where(nodes["expected"].notna(), None)

    # Expectation: judged per value row (any value off the spec = the node misses it).
    rows = rows.merge(exp, on=keys, how="inner")
    miss = [not matches_expected(v, s) for v, s in zip(rows["value"], rows["expected"])]
    missed = rows.loc[np.asarray(miss, dtype=bool), keys + ["node"]].drop_duplicates()
    missed["_missed"] = True
    nodes = nodes.merge(missed, on=keys + ["node"], how="left")
    exp_drift = nodes["_missed"].eq(True).to_numpy()
    has_spec = nodes["expected"].notna().to_numpy()

    no_major = nodes["majority"].isna().to_numpy()
    maj_drift = nodes["voted"].to_numpy(dtype=bool) & np.where(
        no_major, ~(has_spec & ~exp_drift), nodes["value"].ne(nodes["majority"]).to_numpy())
    nodes["kind"] = np.where(maj_drift & exp_drift, "both",
                             np.where(exp_drift, "expected", "majority"))
    nodes["severity"] = np.where(exp_drift, "fail", "warn")
    out = nodes[maj_drift | exp_drift].copy()
    if out.empty:
        return empty(DRIFT_COLUMNS)
    out["_noclass"] = out["node_class"].eq(_NO_CLASS)
    out["node_class"] = out["node_class"].where(~out["_noclass"], None)
    out = out.sort_values(["_noclass", "node_class", "item", "node"], kind="stable")
    out["n_nodes"] = out["n_nodes"].astype("int64")
    out["majority_share"] = out["majority_share"].astype("float64")
    out = out[list(DRIFT_COLUMNS)].astype(DRIFT_COLUMNS).reset_index(drop=True)
    for col in ("node_class", "majority", "expected"):
        out[col] = out[col].where(out[col].notna(), None)
    return out


def _node_key(name: str) -> list:
    """Natural order: digit runs (odd positions of the split) compare as numbers."""
    return [int(p) if i % 2 else p for i, p in enumerate(re.split(r"(\d+)", name))]


def _listed(nodes: list[str]) -> str:
    nodes = sorted(nodes, key=_node_key)
    shown = ", ".join(nodes[:_MAX_LISTED])
    return shown + (f" and {len(nodes) - _MAX_LISTED} more" if len(nodes) > _MAX_LISTED else "")


def drift_summary(df: pd.DataFrame) -> list[str]:
    """One human line per (class, item) of a :func:`version_drift` frame, e.g.
    "h100: driver 550.54.15 on 126 of 128 nodes; gpu017, gpu033 run 535.129.03"
    (no-majority items: "a100: nccl has no majority among 4 nodes; ..."; an expectation is
    appended as "(expected 550.)"). Lines follow the frame's order."""
    missing = [c for c in DRIFT_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"drift frame lacks column(s): {', '.join(missing)}")
    lines = []
    keys = df["node_class"].astype(object).where(df["node_class"].notna(), None)
    for (cls, item), part in df.groupby([keys, df["item"]], sort=False, dropna=False):
        first = part.iloc[0]
        label = "(no class)" if cls is None or pd.isna(cls) else str(cls)
        n = int(first["n_nodes"])
        major = first["majority"]
        if isinstance(major, str):
            held = int(round(float(first["majority_share"]) * n))
            head = f"{label}: {item} {major} on {held} of {n} nodes"
        elif part["kind"].isin(["majority", "both"]).any():
            head = f"{label}: {item} has no majority among {n} nodes"
        else:
            head = f"{label}: {item} on {n} nodes"
        spans = []
        for value, sub in part.groupby("value", sort=True):
            who = sub["node"].astype(str).tolist()
            spans.append(f"{_listed(who)} {'runs' if len(who) == 1 else 'run'} {value}")
        tail = f" (expected {first['expected']})" if isinstance(first["expected"], str) else ""
        lines.append(head + "; " + "; ".join(spans) + tail)
    return lines
