"""Persistence over runs: an outlier once is noise; in ``k`` of the last ``n`` runs it is a finding.

Three views of the same rule, all pure and vectorised:

- :func:`last_samples`: the last ``n`` samples of every ``(node, check, component, name)`` series,
  each with ``pos`` (0 = the latest sample, 1 = the one before, ...);
- :func:`persistent_outliers`: every GPU/port/node's last ``n`` samples scored against its peers of
  the same round (the i-th latest sample of every unit of one peer group, check and metric: robust
  z, median/MAD, :func:`outliers.robust_z`); ``hits`` = rounds in which it was an outlier on its bad
  side; ``persistent`` = ``hits >= k``. Rounds are aligned by position from the end, not by clock
  time, so a fleet whose nodes run at different hours (or a weekly burn-in staggered over days)
  still compares like with like;
- :func:`persistent_results`: per ``(node, check, component)``, how many of the node's last ``n``
  runs flagged it (fail/warn/error), and its worst status in them;
- :func:`counter_hits`: per counter series, how many of its last ``n`` samples went up (a reset,
  a value below the previous one, is not counted).

Peers (``peer_of``): a mapping or callable ``node -> group`` (see :func:`peer_key`: GPU model, and
the rack when the topology says so); None = one fleet.

Complexity: one O(n log n) sort of the rows into series order (:func:`_frames.series_sorted`), then
grouped transforms over the kept rows (at most ``n`` per series), O(rows).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from ._frames import SERIES_KEYS, Names, empty, isin_mask, metric_units, per_name, prepare, series_codes, \
    series_sorted
from .outliers import IGLEWICZ_HOAGLIN_THRESHOLD, robust_z

DEFAULT_K = 3
DEFAULT_N = 5

PERSISTENT_COLUMNS = {"peer_group": "object", "check": "object", "name": "object", "node": "object",
                      "component": "object", "value": "float64", "peer_median": "float64",
                      "z": "float64", "n_peers": "int64", "hits": "int64", "runs": "int64",
                      "persistent": "bool", "side": "object"}
RESULT_HIT_COLUMNS = {"node": "object", "check": "object", "component": "object",
                      "status": "object", "hits": "int64", "runs": "int64", "latest": "bool",
                      "message": "object", "persistent": "bool"}
COUNTER_HIT_COLUMNS = {"node": "object", "check": "object", "component": "object",
                       "name": "object", "value": "float64", "increase": "float64",
                       "hits": "int64", "runs": "int64", "persistent": "bool"}

PeerSource = Mapping[str, Any] | Callable[[str], Any] | None
_SEVERITY = {"fail": 3, "error": 2, "warn": 1}


def check_kn(k: int, n: int) -> None:
    """ValueError unless 1 <= k <= n (integers)."""
    if isinstance(k, bool) or isinstance(n, bool) or not isinstance(k, int) or not isinstance(n, int):
        raise ValueError(f"k and n must be integers, got k={k!r}, n={n!r}")
    if not 1 <= k <= n:
        raise ValueError(f"need 1 <= k <= n (an outlier in k of the last n runs), got k={k}, n={n}")


def peer_key(gpu_model: PeerSource = None, rack: PeerSource = None) -> Callable[[str], str]:
    """``node -> "model"`` or ``"model/rack"`` (rack only when given and the node has one); a node
    of no known model is in group "unknown"."""
    def look(src: PeerSource, node: str) -> Any:
        if src is None:
            return None
        return src(node) if callable(src) else src.get(node)

    def key(node: str) -> str:
        model = look(gpu_model, node)
        model = "unknown" if model is None else str(getattr(model, "name", model))
        where = look(rack, node)
        return model if where is None else f"{model}/{where}"
    return key


def _groups_of(nodes: pd.Series, peer_of: PeerSource) -> pd.Series:
    if peer_of is None:
        return pd.Series("fleet", index=nodes.index, dtype=object)
    uniq = pd.unique(nodes)
    get = peer_of if callable(peer_of) else peer_of.get
    resolved = {n: get(n) for n in uniq}
    resolved = {n: ("unknown" if g is None else str(getattr(g, "name", g))) for n, g in resolved.items()}
    return nodes.map(resolved).astype(object)


_KEPT = "last_samples_n"  # DataFrame.attrs key: the n of a ``last_samples(..., keep_order=True)`` output


def last_samples(metrics: pd.DataFrame | None, names: Names = None, n: int = DEFAULT_N, *,
                 per: str = "component", keep_order: bool = False) -> pd.DataFrame:
    """The last ``n`` samples of each series (columns node, check, component, name, started_at,
    value, pos; sorted by series, then time). O(rows log rows).

    ``keep_order``: the output also carries its series ids (``_gid``) and says in ``attrs`` how many
    samples it kept; given such a frame back (or a selection of its rows by name: whole series), the
    last ``m <= n`` are taken from it in one pass, without sorting again: the fleet ranking sorts its
    window once and its judges each take their part."""
    check_kn(1, n)
    kept = metrics.attrs.get(_KEPT) if metrics is not None else None
    if kept is not None and n <= kept and per == "component" and {"_gid", "pos"} <= set(metrics.columns):
        df = metrics if names is None else metrics[isin_mask(metrics["name"], [names] if isinstance(names, str)
                                                             else names)]
        pos = df["pos"].to_numpy()
        df = df if (pos < n).all() else df[pos < n]
        out = df.reset_index(drop=True) if keep_order else df.drop(columns="_gid").reset_index(drop=True)
        out.attrs = {_KEPT: n} if keep_order else {}
        return out
    df = metric_units(metrics, names, per)
    if df.empty:
        return df.assign(pos=pd.Series([], dtype="int64"))
    df = series_sorted(df, SERIES_KEYS)
    gid = df["_gid"].to_numpy()
    ends = np.flatnonzero(np.r_[gid[1:] != gid[:-1], True])  # each series' last row (rows sorted by series)
    last = np.repeat(ends, np.diff(np.r_[-1, ends]))
    pos = (last - np.arange(len(gid))).astype("int64")  # 0 for a series' latest sample
    keep = pos < n
    df = (df if keep_order else df.drop(columns="_gid")).assign(pos=pos)
    out = (df if keep.all() else df[keep]).reset_index(drop=True)
    out.attrs = {_KEPT: n} if keep_order else {}
    return out


def persistent_outliers(metrics: pd.DataFrame | None, names: Names = None, *,
                        peer_of: PeerSource = None, k: int = DEFAULT_K, n: int = DEFAULT_N,
                        threshold: float = IGLEWICZ_HOAGLIN_THRESHOLD, min_peers: int = 5,
                        side: str | Mapping[str, str] | Callable[[str], str] = "both",
                        min_rel_deviation: float = 0.0, per: str = "component") -> pd.DataFrame:
    """Per unit (GPU/port, or node with ``per="node"``): its latest value against its peers and how
    many of its last ``n`` samples were outliers on the bad ``side`` ("low", "high", "both"; or
    ``{name: side}`` / ``name -> side``). An outlier of one round: ``|z| > threshold`` and
    ``|x - median| > min_rel_deviation * |median|``.

    Returns columns: peer_group, check, name, node, component, value (latest), peer_median and z
    (of the latest round), n_peers (latest round), hits, runs (samples considered, <= n),
    persistent (hits >= k), side ("low"/"high" of the latest value, None at the median); sorted by
    persistent, hits, |z| (descending).
    """
    check_kn(k, n)
    if threshold <= 0 or min_rel_deviation < 0:
        raise ValueError("threshold must be > 0 and min_rel_deviation >= 0")
    df = last_samples(metrics, names, n, per=per)
    if df.empty:
        return empty(PERSISTENT_COLUMNS)
    df["peer_group"] = _groups_of(df["node"], peer_of)
    # one integer per round (peer group, check, name, position): one grouping key instead of four
    rounds, _ = series_codes(df, ["peer_group", "check", "name", "pos"], with_keys=False)
    scored = robust_z(df["value"], pd.Series(rounds, index=df.index), min_peers=min_peers)
    df = pd.concat([df, scored], axis=1)
    name_codes, name_values = pd.factorize(df["name"])  # the side asked once per name, then by its code
    wanted = per_name(pd.DataFrame({"name": pd.Series(np.asarray(name_values, dtype=object), dtype=object)}),
                      side, "both")
    bad = ~wanted.isin(["both", "low", "high"])
    if bad.any():
        raise ValueError(f"unknown side(s): {sorted(set(wanted[bad]))}")
    want = wanted.map({"both": 0, "low": -1, "high": 1}).to_numpy(dtype="float64")[name_codes]
    diff = (df["value"] - df["peer_median"]).to_numpy(dtype="float64")
    sign = np.sign(diff)  # -1 low, +1 high, 0 at the median, NaN without peers
    big = np.abs(diff) > min_rel_deviation * np.abs(df["peer_median"].to_numpy(dtype="float64"))
    hit = (np.abs(df["z"].to_numpy(dtype="float64")) > threshold) & ((want == 0) | (want == sign)) & big
    # the rows are each unit's samples, oldest first, its latest (pos 0) last (last_samples): a unit
    # begins after a latest; the groups of (peer group, check, name, node, component) are the units
    pos = df["pos"].to_numpy()
    unit = np.cumsum(np.r_[True, pos[:-1] == 0]) - 1
    latest = pos == 0
    out = df.loc[latest, ["peer_group", "check", "name", "node", "component", "value", "peer_median", "z",
                          "n_peers"]].reset_index(drop=True)
    out["side"] = np.where(sign[latest] < 0, "low", np.where(sign[latest] > 0, "high", None))
    out["hits"] = np.bincount(unit, weights=hit, minlength=len(out)).astype("int64")
    out["runs"] = np.bincount(unit, minlength=len(out)).astype("int64")
    out["persistent"] = out["hits"] >= k
    out["_absz"] = out["z"].abs()
    out = out.sort_values(["persistent", "hits", "_absz", "node", "component"],
                          ascending=[False, False, False, True, True], na_position="last", kind="stable")
    out["n_peers"] = out["n_peers"].fillna(0).astype("int64")
    return out[list(PERSISTENT_COLUMNS)].reset_index(drop=True)


def persistent_results(results: pd.DataFrame | None, runs: pd.DataFrame | None = None, *,
                       k: int = DEFAULT_K, n: int = DEFAULT_N,
                       statuses: tuple[str, ...] = ("fail", "error", "warn")) -> pd.DataFrame:
    """Per ``(node, check, component)`` flagged in at least one of its node's last ``n`` runs: its
    worst status there, ``hits`` (runs of those n that flagged it), ``runs`` (the node's runs
    considered), ``latest`` (flagged in the node's latest run), the latest message, ``persistent``
    (``hits >= k``, or flagged in every run when the node has fewer than k).

    The node's runs come from ``runs`` (run_id, node, started_at), else from the results' own
    run ids (then a run whose results were all dropped is not seen). Statuses are compared
    case-insensitively.
    """
    check_kn(k, n)
    res = prepare(results, ["run_id", "node", "started_at", "check", "component", "status", "message"],
                  frame="results", time_col="started_at")
    if res.empty:
        return empty(RESULT_HIT_COLUMNS)
    src = res if runs is None else prepare(runs, ["run_id", "node", "started_at"], frame="runs",
                                           time_col="started_at")
    order = src[["run_id", "node", "started_at"]].drop_duplicates("run_id")
    order = order.sort_values(["node", "started_at", "run_id"], kind="stable")
    order["pos"] = order.groupby("node", sort=False).cumcount(ascending=False)
    order = order[order["pos"] < n]
    n_runs = order.groupby("node")["pos"].size()
    status = res["status"].astype(str).str.lower()
    res = res[status.isin(statuses)].assign(status=status)
    res = res.merge(order[["run_id", "pos"]], on="run_id", how="inner")
    if res.empty:
        return empty(RESULT_HIT_COLUMNS)
    res["_sev"] = res["status"].map(_SEVERITY)
    res["component"] = res["component"].astype(object).where(res["component"].notna(), None)
    keys = ["node", "check", "component"]
    res = res.sort_values(keys + ["pos"], kind="stable")
    g = res.groupby(keys, sort=False, dropna=False)
    out = pd.DataFrame({"hits": g["run_id"].nunique().astype("int64"),
                        "latest": g["pos"].min().eq(0),
                        "_sev": g["_sev"].max(),
                        "message": g["message"].first()}).reset_index()
    inv = {v: s for s, v in _SEVERITY.items()}
    out["status"] = out["_sev"].map(inv)
    out["runs"] = out["node"].map(n_runs).fillna(0).astype("int64")
    out["persistent"] = out["hits"] >= np.minimum(k, out["runs"].clip(lower=1))
    out = out.sort_values(["persistent", "_sev", "hits", "node", "check"],
                          ascending=[False, False, False, True, True], kind="stable")
    return out[list(RESULT_HIT_COLUMNS)].reset_index(drop=True)


def counter_hits(metrics: pd.DataFrame | None, names: Names, *, k: int = DEFAULT_K,
                 n: int = DEFAULT_N) -> pd.DataFrame:
    """Per counter series with an increase among its last ``n`` samples: ``hits`` = samples that
    went up from the previous one (the sample before the window counts as the first's previous),
    ``increase`` = their sum, ``value`` = the latest, ``persistent`` = ``hits >= k``."""
    check_kn(k, n)
    df = last_samples(metrics, names, n + 1)
    if df.empty:
        return empty(COUNTER_HIT_COLUMNS)
    codes = df.groupby(SERIES_KEYS, sort=False, dropna=False).ngroup().to_numpy()
    value = df["value"].to_numpy()
    same = np.r_[False, codes[1:] == codes[:-1]]
    step = np.where(same, value - np.r_[np.nan, value[:-1]], np.nan)
    up = same & (step > 0)
    df = df.assign(_up=up, _inc=np.where(up, step, 0.0))
    df = df[df["pos"] < n]
    g = df.groupby(SERIES_KEYS, sort=False, dropna=False)
    out = pd.DataFrame({"hits": g["_up"].sum().astype("int64"), "increase": g["_inc"].sum(),
                        "runs": g["_up"].size().astype("int64"),
                        "value": g["value"].last()}).reset_index()
    out = out[out["hits"] > 0]
    if out.empty:
        return empty(COUNTER_HIT_COLUMNS)
    out["persistent"] = out["hits"] >= k
    out = out.sort_values(["persistent", "hits", "increase"], ascending=False, kind="stable")
    return out[list(COUNTER_HIT_COLUMNS)].reset_index(drop=True)
