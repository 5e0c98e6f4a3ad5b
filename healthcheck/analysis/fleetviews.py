"""The fleet tables a report renders, as plain DataFrames (pure; no I/O, no clock: ``now`` is an argument).

- :func:`regressions_since`: per GPU/node and figure, "gemm_tflops down 5.6 % since 2026-05-06":
  the latest value, the unit's own baseline, the change, the start of the trailing streak of
  regressed samples, and in how many of the last n samples it regressed;
- :func:`new_node_ttff`: time to first failure of the nodes first seen after a date (new nodes);
- :func:`mtbf`: mean time between failures per check, or per component kind (GPU, IB port, ...):
  failure onsets (a run that fails the check after one of the same node that did not) against the
  fleet's node-hours observed;
- :func:`version_table`: each version item's values across the fleet (how many nodes run which),
  with :func:`drift.version_drift`'s per-node drift rows beside it;
- :func:`shared_causes`: the persistent evidence of a ranking shared by most nodes of one rack (or
  any group): one cause of the group (a BIOS setting, a PCIe switch, the cooling), not N node faults;
- :func:`fleet_tables`: all of the above in one dict.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import pandas as pd

from . import availability, drift as drift_
from ._frames import empty, prepare, utc
from .fleetrank import FIGURES, REGRESSION_THRESHOLD, regression_hits
from .persistence import DEFAULT_K, DEFAULT_N, check_kn

REGRESSION_COLUMNS = {"node": "object", "component": "object", "metric": "object", "value": "float64",
                      "baseline": "float64", "change_pct": "float64", "since": "datetime64[us, UTC]",
                      "hits": "int64", "runs": "int64", "text": "object"}
TTFF_COLUMNS = {"node": "object", "first_seen": "datetime64[us, UTC]",
                "first_failure_at": "datetime64[us, UTC]", "ttff_h": "float64", "failed": "bool",
                "failures": "int64", "observed_h": "float64"}
MTBF_COLUMNS = {"key": "object", "failures": "int64", "nodes": "int64", "node_hours": "float64",
                "mtbf_h": "float64", "last_failure_at": "datetime64[us, UTC]"}
SHARED_COLUMNS = {"group": "object", "kind": "object", "subject": "object", "n_nodes": "int64",
                  "group_size": "int64", "share": "float64", "nodes": "object", "text": "object"}
VERSION_COLUMNS = {"item": "object", "value": "object", "nodes": "int64", "share": "float64",
                   "majority": "bool"}


def regressions_since(metrics: pd.DataFrame | None, names: list[str] | None = None, *, k: int = DEFAULT_K,
                      n: int = DEFAULT_N, threshold: float | Mapping[str, float] = REGRESSION_THRESHOLD,
                      window: int | str = 20, hits: pd.DataFrame | None = None) -> pd.DataFrame:
    """The persistent regressions (``hits >= k`` of the last ``n`` samples) of "higher is better"
    figures (default: the low-is-bad ones of ``fleetrank.FIGURES``), worst first. Columns: node,
    component, metric, value, baseline, change_pct (negative = down), since, hits, runs, text.
    ``hits``: ``fleetrank.regression_hits`` of the same samples, names, k, n, threshold and window,
    already computed (the fleet ranking's, ``rank_fleet(keep=)``): used instead of computing it again."""
    check_kn(k, n)
    names = names or [m for m, side in FIGURES.items() if side == "low"]
    rg = hits if hits is not None else regression_hits(metrics, names, k=k, n=n, threshold=threshold, window=window)
    rg = rg[rg["persistent"]]
    if rg.empty:
        return empty(REGRESSION_COLUMNS)
    out = pd.DataFrame({"node": rg["node"], "component": rg["component"].astype(object), "metric": rg["name"],
                        "value": rg["value"], "baseline": rg["baseline"], "change_pct": rg["change"] * 100.0,
                        "since": rg["since"], "hits": rg["hits"], "runs": rg["runs"]})
    comp = out["component"].where(out["component"].notna(), "")
    out["text"] = [f"{m}{' [' + c + ']' if c else ''} down {abs(p):.1f} % since "
                   f"{s:%Y-%m-%d}" if not pd.isna(s) else f"{m}{' [' + c + ']' if c else ''} down {abs(p):.1f} %"
                   for m, c, p, s in zip(out["metric"], comp, out["change_pct"], out["since"])]
    out = out.sort_values(["change_pct", "node"], kind="stable")
    return out[list(REGRESSION_COLUMNS)].reset_index(drop=True)


def new_node_ttff(runs: pd.DataFrame | None, *, now: Any, new_since: Any,
                  actions: pd.DataFrame | None = None, reliability: pd.DataFrame | None = None,
                  first_seen: Mapping[str, Any] | pd.Series | None = None) -> pd.DataFrame:
    """Nodes whose first run is at or after ``new_since``: their time to first failure (hours; NaN
    when they have not failed yet), failure onsets and hours observed; sorted by ttff (failed
    first), then node. ``reliability``: an :func:`availability.reliability` frame already computed
    (a report summary's), instead of ``runs`` and ``actions``. ``first_seen``: node -> its first run
    in the WHOLE history (a report's window may start later): a node is new when that is at or after
    ``new_since``, and its TTFF and hours observed count from it; without it, the first run in
    ``runs`` / ``reliability`` is taken as the first ever."""
    rel = reliability if reliability is not None else availability.reliability(runs, now=now, actions=actions)
    if first_seen is not None and len(rel):
        ever = pd.Series(first_seen)
        ever = pd.to_datetime(rel["node"].astype(str).map(ever), utc=True)
        first = ever.where(ever.notna() & (ever < rel["first_seen"]), rel["first_seen"])
        moved = (rel["first_seen"] - first)
        rel = rel.assign(first_seen=first, ttff_s=rel["ttff_s"] + moved.dt.total_seconds(),
                         observed_s=rel["observed_s"] + moved.dt.total_seconds())
    rel = rel[rel["first_seen"] >= utc(new_since)]
    if rel.empty:
        return empty(TTFF_COLUMNS)
    out = pd.DataFrame({"node": rel["node"], "first_seen": rel["first_seen"],
                        "first_failure_at": rel["first_failure_at"], "ttff_h": rel["ttff_s"] / 3600.0,
                        "failed": rel["failures"] > 0, "failures": rel["failures"].astype("int64"),
                        "observed_h": rel["observed_s"] / 3600.0})
    out = out.sort_values(["failed", "ttff_h", "node"], ascending=[False, True, True], na_position="last",
                          kind="stable")
    return out.astype({"first_seen": "datetime64[us, UTC]", "first_failure_at": "datetime64[us, UTC]"})[
        list(TTFF_COLUMNS)].reset_index(drop=True)


def component_kind(component: Any) -> str:
    """"gpu" for "gpu3", "mlx5" for "mlx5_0/1", "node" for none; the leading letters otherwise."""
    if component is None or (isinstance(component, float) and component != component) or component == "":
        return "node"
    m = re.match(r"[A-Za-z]+", str(component))
    return m.group(0).lower() if m else "other"


def mtbf(results: pd.DataFrame | None, runs: pd.DataFrame | None, *, now: Any, by: str = "check",
         statuses: tuple[str, ...] = ("fail",)) -> pd.DataFrame:
    """Mean time between failures per check (``by="check"``) or per component kind
    (``by="component"``, see :func:`component_kind`): ``node_hours`` = the sum over the fleet's nodes of the hours from their
    first run to ``now``; ``failures`` = onsets of failing streaks of (node, check, component):
    a run of the node that fails it after a run of the node that did not (or its first run);
    ``mtbf_h`` = node_hours / failures (NaN with none). A failure is counted per node and key (a
    check failing on three GPUs of one node at once is one failure of the check, one of "gpu").
    With a ``context`` column in ``runs``, streaks follow the runs of the same context. Only keys
    with a failure are listed, shortest MTBF first."""
    if by not in ("check", "component"):
        raise ValueError(f"by must be 'check' or 'component', not {by!r}")
    now = utc(now)
    cols = ["run_id", "node", "started_at"] + (["context"] if runs is not None and "context" in runs else [])
    rn = prepare(runs, cols, frame="runs", time_col="started_at")
    rn = rn[rn["started_at"] <= now]
    res = prepare(results, ["run_id", "node", "started_at", "check", "component", "status"], frame="results",
                  time_col="started_at")
    if rn.empty or res.empty:
        return empty(MTBF_COLUMNS)
    first = rn.groupby("node")["started_at"].min()
    node_hours = float(((now - first).dt.total_seconds() / 3600.0).sum())
    # runs are counted per node and context: a burn-in between two health checks does not end a
    # health check's failing streak (it does not run that check)
    by_run = ["node", "context"] if "context" in rn else ["node"]
    rn = rn.assign(context=rn["context"].astype(str)) if "context" in rn else rn
    rn = rn.sort_values(by_run + ["started_at", "run_id"], kind="stable")
    rn["pos"] = rn.groupby(by_run, sort=False).cumcount()
    bad = res[res["status"].astype(str).str.lower().isin(statuses)]
    bad = bad.merge(rn[["run_id", "pos"] + by_run[1:]], on="run_id", how="inner")
    if bad.empty:
        return empty(MTBF_COLUMNS)
    comp = bad["component"].astype(object)
    bad = bad.assign(key=bad["check"].astype(str) if by == "check" else comp.map(component_kind))
    keys = ["node", "key"] + by_run[1:]
    bad = bad.drop_duplicates(keys + ["pos"]).sort_values(keys + ["pos"], kind="stable")
    same = (bad[keys].shift() == bad[keys]).all(axis=1).to_numpy()
    onset = ~(same & (bad["pos"].diff().to_numpy() == 1))
    on = bad[onset]
    key = on["key"]
    g = on.groupby(key.to_numpy(), sort=True)
    out = pd.DataFrame({"failures": g.size().astype("int64"), "nodes": g["node"].nunique().astype("int64"),
                        "last_failure_at": g["started_at"].max()})
    out.index.name = "key"
    out = out.reset_index()
    out["node_hours"] = node_hours
    out["mtbf_h"] = node_hours / out["failures"]
    out = out.sort_values(["mtbf_h", "key"], kind="stable")
    return out.astype({"last_failure_at": "datetime64[us, UTC]"})[list(MTBF_COLUMNS)].reset_index(drop=True)


def version_table(versions: pd.DataFrame | None,
                  items: tuple[str, ...] | None = ("driver", "cuda", "nccl", "hca_firmware", "ofed")) -> pd.DataFrame:
    """Per version item (``items``; None: all) and value: how many nodes run it and their share of
    the nodes reporting the item; ``majority`` marks the most common value (ties: none). A node with
    several values (per-GPU, per-HCA) counts once per distinct value."""
    df = prepare(versions, ["node", "item", "value"], frame="versions")
    if items is not None:
        df = df[df["item"].isin(items)]
    if df.empty:
        return empty(VERSION_COLUMNS)
    vals = df["value"].astype(object).where(df["value"].notna(), "").astype(str).str.split(",")
    df = df.assign(value=vals).explode("value")
    df["value"] = df["value"].str.strip()
    df = df[df["value"].ne("")].drop_duplicates(["node", "item", "value"])
    counts = df.groupby(["item", "value"], sort=True)["node"].nunique().rename("nodes").reset_index()
    per_item = df.groupby("item")["node"].nunique()
    counts["share"] = counts["nodes"] / counts["item"].map(per_item)
    top = counts.groupby("item")["nodes"].transform("max")
    n_top = counts["nodes"].eq(top).groupby(counts["item"]).transform("sum")
    counts["majority"] = counts["nodes"].eq(top) & n_top.eq(1)
    counts = counts.sort_values(["item", "nodes", "value"], ascending=[True, False, True], kind="stable")
    return counts.astype({"nodes": "int64"})[list(VERSION_COLUMNS)].reset_index(drop=True)


def shared_causes(ranked: pd.DataFrame, group_of: Mapping[str, str], *, min_share: float = 0.5,
                  min_nodes: int = 3) -> pd.DataFrame:
    """Per group (``group_of``: node -> rack, say) and persistent evidence (kind and metric, or kind
    and check, of :func:`fleetrank.rank_fleet`'s ``why`` rows): how many of the group's nodes show
    it; listed when at least ``min_nodes`` and more than ``min_share`` of the group do. Columns:
    group, kind, subject, n_nodes, group_size, share, nodes (sorted), text; most nodes first."""
    if not 0 < min_share <= 1 or min_nodes < 1:
        raise ValueError("need 0 < min_share <= 1 and min_nodes >= 1")
    rows = [(node, w["kind"], w["metric"] or w["check"]) for node, why in zip(ranked["node"], ranked["why"])
            for w in why if w.get("persistent") and (w["metric"] or w["check"]) and node in group_of]
    if not rows:
        return empty(SHARED_COLUMNS)
    ev = pd.DataFrame(rows, columns=["node", "kind", "subject"]).drop_duplicates()
    ev["group"] = ev["node"].map(group_of)
    sizes = pd.Series(list(group_of.values())).value_counts()
    g = ev.groupby(["group", "kind", "subject"], sort=True)["node"]
    out = pd.DataFrame({"n_nodes": g.nunique().astype("int64"), "nodes": g.agg(lambda x: sorted(set(x)))})
    out = out.reset_index()
    out["group_size"] = out["group"].map(sizes).astype("int64")
    out["share"] = out["n_nodes"] / out["group_size"]
    out = out[(out["n_nodes"] >= min_nodes) & (out["share"] > min_share)]
    if out.empty:
        return empty(SHARED_COLUMNS)
    out["text"] = [f"{grp}: {kind} {subj} on {n} of {size} nodes" for grp, kind, subj, n, size in
                   zip(out["group"], out["kind"], out["subject"], out["n_nodes"], out["group_size"])]
    out = out.sort_values(["n_nodes", "group", "kind", "subject"], ascending=[False, True, True, True], kind="stable")
    return out[list(SHARED_COLUMNS)].reset_index(drop=True)


def fleet_tables(*, metrics: pd.DataFrame | None = None, results: pd.DataFrame | None = None,
                 runs: pd.DataFrame | None = None, actions: pd.DataFrame | None = None,
                 versions: pd.DataFrame | None = None, now: Any, new_since: Any = None,
                 expected_versions: Mapping[str, Mapping[str, str]] | None = None,
                 k: int = DEFAULT_K, n: int = DEFAULT_N) -> dict[str, pd.DataFrame]:
    """The report's fleet tables: {"regressions", "new_nodes", "mtbf_check", "mtbf_component",
    "versions", "drift"} (each a frame as its function documents; "drift" is
    :func:`drift.version_drift`). ``new_since`` defaults to 30 days before ``now``."""
    now = utc(now)
    new_since = now - pd.Timedelta(days=30) if new_since is None else utc(new_since)
    vers = versions if versions is not None and len(versions) else None
    return {
        "regressions": regressions_since(metrics, k=k, n=n),
        "new_nodes": new_node_ttff(runs, now=now, new_since=new_since, actions=actions),
        "mtbf_check": mtbf(results, runs, now=now, by="check"),
        "mtbf_component": mtbf(results, runs, now=now, by="component"),
        "versions": version_table(vers),
        "drift": drift_.version_drift(vers, expected_versions) if vers is not None else empty(drift_.DRIFT_COLUMNS),
    }


__all__ = ["regressions_since", "new_node_ttff", "mtbf", "version_table", "shared_causes", "fleet_tables",
           "component_kind"]
