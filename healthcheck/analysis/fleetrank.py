"""Nodes ranked by severity-weighted risk at fleet scale, each with the evidence rows behind it.

Evidence (each optional; pass what you have):

- ``floor``: an absolute limit crossed (:func:`floors.floor_crossings`: temperature ceilings of the
  gpu.temperature check, burn-in reference floors, PCIe width below the device's max);
- ``outlier``: a performance figure off its peers (:func:`persistence.persistent_outliers`: robust
  z per GPU model, per rack too when ``rack`` is given, round by round over the last n runs);
- ``regression``: a figure off the unit's own baseline (the rule of
  :func:`regressions.baseline_deviation`, :func:`regression_hits`) in several of its last n samples;
- ``check``: a check that failed / errored / warned in the node's last n runs
  (:func:`persistence.persistent_results`);
- ``growth``: an error counter that went up in its last n samples (:func:`persistence.counter_hits`);
- ``flapping`` / ``drain`` / ``failure``: drain-resume cycles, drains and failing streaks
  (:mod:`availability`).

Score of one evidence row: ``weight[kind or kind_severity] * share * factor`` where ``share`` =
hits / runs (the fraction of the last n runs that showed it; 1 for availability rows), ``factor``
= 1 for persistent evidence (``hits >= k``; a floor crossed in the latest run is persistent) and
``noise_factor`` (0.25) otherwise, and for outliers also ``min(|z| / threshold, 3)``. A node's score
is the sum of its rows; its ``severity`` the worst of its persistent rows ("fail" > "warn" > "info").

Every row of ``why`` is a plain dict: kind, check, component, metric, value, peer_median (outliers;
baseline for regressions), limit (floors), hits, runs, severity, persistent, points, text.
"""
from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from . import availability, floors as floors_, persistence as pers, trends
from ._frames import SERIES_KEYS, empty, from_ticks, int_times, per_name, series_codes, text_categories, utc
from .outliers import IGLEWICZ_HOAGLIN_THRESHOLD

DEFAULT_WEIGHTS: dict[str, float] = {"floor_fail": 10.0, "floor_warn": 4.0, "check_fail": 10.0,
                                     "check_error": 3.0, "check_warn": 2.0, "outlier": 3.0,
                                     "regression": 5.0, "growth": 4.0, "flapping": 6.0,
                                     "drain": 1.0, "failure": 2.0}
NOISE_FACTOR = 0.25
MAX_Z_FACTOR = 3.0
MAX_REPEATS = 3  # drains / failure onsets counted at most this many times

#: Performance figures judged against peers, with their bad side; and the regression threshold
#: (fraction off the unit's own baseline) of the "higher is better" ones.
FIGURES: dict[str, str] = {"temperature_c": "high", "mem_temperature_c": "high", "power_draw_w": "high",
                           "gemm_tflops": "low", "hbm_copy_gbps": "low", "h2d_gbps": "low",
                           "d2h_gbps": "low", "busbw_gbps": "low"}
REGRESSION_THRESHOLD = 0.03
REGRESSION_WINDOW = 20  # earlier samples of a unit's own baseline (rolling median)
MIN_RELATIVE = 0.02  # at least 2 % off the peer median: no alarm on the 0.1 % spread of a uniform fleet

RANK_COLUMNS = {"node": "object", "score": "float64", "severity": "object", "n_persistent": "int64",
                "n_evidence": "int64", "why": "object", "evidence": "object"}
WHY_KEYS = ("kind", "check", "component", "metric", "value", "peer_median", "limit", "hits", "runs",
            "severity", "persistent", "points", "text")
_SEV_RANK = {"fail": 3, "warn": 2, "info": 1}


def _fmt(v: Any, spec: str = ".4g") -> str:
    """A figure of an evidence sentence; never an exponent for one a person reads (22,840, not 2.284e+04)."""
    if v is None or (isinstance(v, float) and v != v):
        return "nan"
    if spec in (".4g", "g") and isinstance(v, (int, float, np.number)) and abs(float(v)) >= 1000:
        return f"{float(v):,.0f}"
    return format(v, spec)


def _comp(c: Any) -> str:
    return "" if c is None or (isinstance(c, float) and c != c) or c == "" else f" [{c}]"


def _plain(v: Any) -> Any:
    if isinstance(v, (np.generic,)):
        v = v.item()
    if isinstance(v, float) and v != v:
        return None
    return v


def _rows(df: pd.DataFrame, kind: str, **cols: Any) -> list[dict]:
    """Evidence dicts from a frame: ``cols`` maps a WHY key to a column name or a constant."""
    out = []
    recs = df.to_dict("records")
    for r in recs:
        row = {key: None for key in WHY_KEYS}
        row["kind"] = kind
        for key, src in cols.items():
            row[key] = _plain(r.get(src)) if isinstance(src, str) and src in r else src
        row["node"] = r["node"]
        out.append(row)
    return out


def _share(hits: Any, runs: Any) -> float:
    return float(hits) / float(runs) if runs else 1.0


def evidence_floors(fl: pd.DataFrame, w: Mapping[str, float]) -> list[dict]:
    rows = _rows(fl, "floor", check="check", component="component", metric="name", value="value",
                 limit="limit", hits="hits", runs="runs", severity="severity", persistent="persistent")
    for r, worst, rule, kind in zip(rows, fl["worst"], fl["rule"], fl["kind"]):
        factor = 1.0 if r["persistent"] else NOISE_FACTOR
        r["points"] = w[f"floor_{r['severity']}"] * _share(r["hits"], r["runs"]) * factor
        word = "at or above" if kind == "ceiling" else "below"
        r["text"] = (f"{r['severity'].upper()} {r['metric']}{_comp(r['component'])}: {_fmt(r['value'])} now, "
                     f"{_fmt(worst)} at worst, {word} {_fmt(r['limit'])} in {r['hits']} of the last {r['runs']} "
                     f"runs ({rule})")
    return rows


def evidence_outliers(po: pd.DataFrame, w: Mapping[str, float], threshold: float) -> list[dict]:
    po = po[po["hits"] > 0]
    rows = _rows(po, "outlier", check="check", component="component", metric="name", value="value",
                 peer_median="peer_median", hits="hits", runs="runs", persistent="persistent")
    for r, z, group in zip(rows, po["z"], po["peer_group"]):
        mag = min(abs(z) / threshold, MAX_Z_FACTOR) if z == z else 1.0
        factor = 1.0 if r["persistent"] else NOISE_FACTOR
        r["severity"] = "warn" if r["persistent"] else "info"
        r["points"] = w["outlier"] * _share(r["hits"], r["runs"]) * factor * mag
        r["text"] = (f"outlier {r['metric']}{_comp(r['component'])}: {_fmt(r['value'])} vs peer median "
                     f"{_fmt(r['peer_median'])} of {group} (z={_fmt(z, '.1f')}), outlier in {r['hits']} of the "
                     f"last {r['runs']} runs")
    return rows


def regression_hits(metrics: pd.DataFrame | None, names: list[str], *, k: int, n: int,
                    threshold: float | Mapping[str, float] = REGRESSION_THRESHOLD,
                    window: int = REGRESSION_WINDOW, min_periods: int = 3) -> pd.DataFrame:
    """Per series of ``names`` ("higher is better"): how many of its last ``n`` samples regressed
    against the unit's own baseline, the median of its ``window`` previous samples (at least
    ``min_periods`` of them; the rule of :func:`regressions.baseline_deviation` with an int window):
    ``change = (value - baseline) / |baseline| < -threshold`` (a fraction, or ``{name: fraction}``).
    The latest sample's value, baseline and change; ``since`` = the first sample of the trailing
    streak of regressed samples among the last ``n + window`` (NaT when the latest did not regress).
    Columns: node, check, component, name, value, baseline, change, hits, runs, persistent, since.

    Complexity: the last ``n + window`` samples of each series in one right-aligned matrix (series x
    positions), one vectorised ``nanmedian`` per position: O(series * (n + window) * window).
    """
    pers.check_kn(k, n)
    if isinstance(window, bool) or not isinstance(window, int) or window < 1 or min_periods < 1:
        raise ValueError(f"window and min_periods must be integers >= 1, got {window!r}, {min_periods!r}")
    cols = {"node": "object", "check": "object", "component": "object", "name": "object",
            "value": "float64", "baseline": "float64", "change": "float64", "hits": "int64",
            "runs": "int64", "persistent": "bool", "since": "datetime64[us, UTC]"}
    width = n + window
    df = pers.last_samples(metrics, names, width)
    if df.empty:
        return empty(cols)
    codes, units = series_codes(df, SERIES_KEYS)
    slot = width - 1 - df["pos"].to_numpy()
    vals = np.full((len(units), width), np.nan)
    vals[codes, slot] = df["value"].to_numpy(dtype="float64")
    ticks = np.zeros((len(units), width), dtype=np.int64)
    ticks[codes, slot] = int_times(df["started_at"])
    base = np.full_like(vals, np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN windows: no baseline, NaN
        for j in range(min_periods, width):
            win = vals[:, max(0, j - window):j]
            enough = np.count_nonzero(~np.isnan(win), axis=1) >= min_periods
            if enough.all():
                base[:, j] = np.nanmedian(win, axis=1)
            elif enough.any():  # the median only where there is a baseline (a short history: few rows)
                base[enough, j] = np.nanmedian(win[enough], axis=1)
        change = np.where(np.abs(base) > 0, (vals - base) / np.abs(base), np.nan)
    thr = per_name(units, threshold, REGRESSION_THRESHOLD).to_numpy(dtype="float64")
    regressed = np.nan_to_num(change, nan=0.0) < -thr[:, None]
    hits = regressed[:, width - n:].sum(axis=1)
    runs = np.count_nonzero(~np.isnan(vals[:, width - n:]), axis=1)
    rev = regressed[:, ::-1]
    streak = np.where((~rev).any(axis=1), np.argmax(~rev, axis=1), width)
    since_col = np.clip(width - streak, 0, width - 1)
    since = np.where(streak > 0, ticks[np.arange(len(units)), since_col], np.iinfo(np.int64).min)
    out = units.assign(value=vals[:, -1], baseline=base[:, -1], change=change[:, -1], hits=hits.astype("int64"),
                       runs=runs.astype("int64"))
    out["since"] = from_ticks(since, df["started_at"]).where(streak > 0).to_numpy()
    out = out[out["hits"] > 0]
    if out.empty:
        return empty(cols)
    out["persistent"] = out["hits"] >= k
    out["since"] = pd.to_datetime(out["since"], utc=True).dt.as_unit("us")
    return out[list(cols)].sort_values(["persistent", "hits", "change"], ascending=[False, False, True],
                                       kind="stable").reset_index(drop=True)


def evidence_regressions(rg: pd.DataFrame, w: Mapping[str, float]) -> list[dict]:
    rows = _rows(rg, "regression", check="check", component="component", metric="name", value="value",
                 peer_median="baseline", hits="hits", runs="runs", persistent="persistent")
    for r, change, since in zip(rows, rg["change"], rg["since"]):
        factor = 1.0 if r["persistent"] else NOISE_FACTOR
        r["severity"] = "warn" if r["persistent"] else "info"
        r["points"] = w["regression"] * _share(r["hits"], r["runs"]) * factor
        when = f" since {since:%Y-%m-%d}" if isinstance(since, pd.Timestamp) and not pd.isna(since) else ""
        pct = _fmt(abs(change) * 100, ".1f") if change == change else "?"
        r["text"] = (f"regression {r['metric']}{_comp(r['component'])}: {_fmt(r['value'])} vs own baseline "
                     f"{_fmt(r['peer_median'])} (down {pct} %{when}), regressed in {r['hits']} of the last "
                     f"{r['runs']} samples")
    return rows


def evidence_checks(ch: pd.DataFrame, w: Mapping[str, float]) -> list[dict]:
    rows = _rows(ch, "check", check="check", component="component", hits="hits", runs="runs",
                 severity="status", persistent="persistent")
    for r, latest, msg in zip(rows, ch["latest"], ch["message"]):
        status = r["severity"]
        # A FAIL in the node's latest run is a verdict, not a statistical outlier: the node is failing
        # now (the hooks drain it) and ranks with full weight, as a floor crossed in the latest run does.
        if latest and status == "fail":
            r["persistent"] = True
        share = 1.0 if latest and status == "fail" else _share(r["hits"], r["runs"])
        factor = 1.0 if r["persistent"] else NOISE_FACTOR
        r["points"] = w[f"check_{status}"] * share * factor
        r["severity"] = {"error": "warn"}.get(status, status) if r["persistent"] else "info"
        now = ", now too" if latest else ", not in the latest run"
        r["text"] = (f"{status.upper()} {r['check']}{_comp(r['component'])} in {r['hits']} of the last "
                     f"{r['runs']} runs{now}: {'' if msg is None else str(msg)[:200]}")
    return rows


def evidence_growth(cg: pd.DataFrame, w: Mapping[str, float]) -> list[dict]:
    rows = _rows(cg, "growth", check="check", component="component", metric="name", value="value",
                 hits="hits", runs="runs", persistent="persistent")
    for r, inc in zip(rows, cg["increase"]):
        factor = 1.0 if r["persistent"] else NOISE_FACTOR
        r["severity"] = "warn" if r["persistent"] else "info"
        r["points"] = w["growth"] * _share(r["hits"], r["runs"]) * factor
        r["text"] = (f"growth {r['metric']}{_comp(r['component'])}: +{_fmt(inc, 'g')} over the last {r['runs']} "
                     f"samples, up in {r['hits']} of them, now {_fmt(r['value'], 'g')}")
    return rows


def evidence_availability(flaps: pd.DataFrame | None, drains: pd.DataFrame | None,
                          reliability: pd.DataFrame | None, w: Mapping[str, float]) -> list[dict]:
    rows: list[dict] = []
    base = {key: None for key in WHY_KEYS}
    for r in ([] if flaps is None else flaps.to_dict("records")):
        rows.append({**base, "node": r["node"], "kind": "flapping", "hits": int(r["cycles"]), "severity": "warn",
                     "persistent": True, "points": w["flapping"],
                     "text": f"flapping: {int(r['cycles'])} drain/resume cycles"})
    for r in ([] if drains is None else drains.to_dict("records")):
        if int(r["drains"]) <= 0:
            continue
        still = " (still drained)" if r.get("open") else ""
        rows.append({**base, "node": r["node"], "kind": "drain", "hits": int(r["drains"]), "severity": "info",
                     "persistent": False, "points": w["drain"] * min(int(r["drains"]), MAX_REPEATS),
                     "text": f"drained {int(r['drains'])}x, {float(r['drained_s']) / 3600:.3g} h{still}"})
    for r in ([] if reliability is None else reliability.to_dict("records")):
        if int(r["failures"]) <= 0:
            continue
        rows.append({**base, "node": r["node"], "kind": "failure", "hits": int(r["failures"]), "severity": "info",
                     "persistent": False, "points": w["failure"] * min(int(r["failures"]), MAX_REPEATS),
                     "text": f"failed {int(r['failures'])}x (failing streaks of runs)"})
    return rows


def combine(evidence: list[dict]) -> pd.DataFrame:
    """Per node: score (sum of points), severity (worst persistent row, else "info"), counts, why
    (rows heaviest first) and evidence (their texts); sorted by score descending, then node."""
    if not evidence:
        return empty(RANK_COLUMNS)
    ev = pd.DataFrame(evidence)
    ev["_sev"] = np.where(ev["persistent"].astype(bool), ev["severity"].map(_SEV_RANK).fillna(1), 1)
    ev = ev.sort_values(["node", "points", "text"], ascending=[True, False, True], kind="stable")
    g = ev.groupby("node", sort=True)
    out = pd.DataFrame({"score": g["points"].sum().astype(float),
                        "_sev": g["_sev"].max(),
                        "n_persistent": g["persistent"].sum().astype("int64"),
                        "n_evidence": g["points"].size().astype("int64")})
    plain = ev[list(WHY_KEYS)].astype(object)
    records = plain.where(plain.notna(), None).to_dict("records")  # None, not NaN: plain JSON-able rows
    why: dict[str, list] = {}
    for node, rec in zip(ev["node"], records):
        why.setdefault(node, []).append(rec)
    out["why"] = pd.Series(why, dtype=object).reindex(out.index)
    out["evidence"] = out["why"].map(lambda rows: [r["text"] for r in rows])
    out["severity"] = out["_sev"].map({v: k for k, v in _SEV_RANK.items()})
    out = out.reset_index().sort_values(["score", "node"], ascending=[False, True], kind="stable")
    return out[list(RANK_COLUMNS)].reset_index(drop=True)


def rank_fleet(*, metrics: pd.DataFrame | Callable[[], pd.DataFrame | None] | None = None,
               results: pd.DataFrame | None = None,
               runs: pd.DataFrame | None = None, actions: pd.DataFrame | None = None,
               now: Any = None, gpu_model: Mapping[str, Any] | Callable[[str], Any] | None = None,
               rack: Mapping[str, Any] | Callable[[str], Any] | None = None,
               references: Any = None, k: int = pers.DEFAULT_K, n: int = pers.DEFAULT_N,
               weights: Mapping[str, float] | None = None,
               figures: Mapping[str, str] | None = None,
               counters: Any = trends.DEFAULT_COUNTERS, threshold: float = IGLEWICZ_HOAGLIN_THRESHOLD,
               min_peers: int = 5, flap_window: str = "14D", dtype: str = "bf16",
               reliability: pd.DataFrame | None = None,
               thermal: Mapping[str, tuple[float, float, float]] | None = None,
               keep: dict[str, pd.DataFrame] | None = None) -> pd.DataFrame:
    """Rank the fleet's nodes from its history frames (the ``load_frames`` contract; ``metrics``
    may be the full window or only each series' last ``n`` samples; or a call that gives them, made after
    the evidence that needs none: a report's summary may still be reading them). ``now`` is needed with
    ``actions`` or ``runs`` (drains, flapping, failure onsets). ``reliability``: an
    :func:`availability.reliability` frame already computed (then ``runs`` only orders the results).
    ``thermal``: GPU limits per SKU (see :data:`floors.THERMAL_LIMITS`), over the built-in ones.
    ``keep``: a dict that receives intermediate frames for other views of the same data (``"regressions"``:
    :func:`regression_hits` of the "higher is better" figures, as ``fleetviews.regressions_since`` takes
    it), so they are not computed twice. See the module docstring.

    Returns columns: node, score, severity, n_persistent, n_evidence, why (list of dicts, heaviest
    first), evidence (their texts); only nodes with evidence, highest score first.
    """
    pers.check_kn(k, n)
    w = {**DEFAULT_WEIGHTS, **(weights or {})}
    unknown = set(weights or {}) - set(DEFAULT_WEIGHTS)
    if unknown:
        raise ValueError(f"unknown weight(s) {sorted(unknown)} (known: {sorted(DEFAULT_WEIGHTS)})")
    figs = dict(FIGURES if figures is None else figures)
    # the evidence of the results, runs and actions first: the samples may still be on their way (``metrics``
    # a call); the rows are combined in the same order either way (metrics first)
    other: list[dict] = []
    if results is not None and len(results):
        other += evidence_checks(pers.persistent_results(results, runs, k=k, n=n), w)
    if actions is not None and len(actions):
        if now is None:
            raise ValueError("rank_fleet: 'now' is needed with actions")
        now_ = utc(now)
        flaps = availability.flapping(actions, now=now_, window=flap_window, min_cycles=3)
        drains = availability.drain_summary(actions, now=now_)
        other += evidence_availability(flaps, drains, None, w)
    if reliability is not None:
        other += evidence_availability(None, None, reliability, w)
    elif runs is not None and len(runs):
        if now is None:
            raise ValueError("rank_fleet: 'now' is needed with runs")
        other += evidence_availability(None, None, availability.reliability(runs, now=utc(now)), w)
    if callable(metrics):
        metrics = metrics()
    ev: list[dict] = []
    if metrics is not None and len(metrics):
        # the keys as categories: every judge's take, sort and grouping below then moves integer codes, not
        # millions of strings (10,000 nodes: 1.5 M samples; the ranking 5.3 s -> 2.8 s, the same rows out)
        metrics = metrics.assign(**{c: text_categories(metrics[c]) for c in SERIES_KEYS if c in metrics.columns})
        # one sort of the whole window: every judge below reads at most each series' last n + window
        judged = set(figs) | set(floors_.REFERENCE_KEYS) | {floors_.TEMPERATURE} | {
            m for pair in floors_.PCIE_PAIRS for m in pair}
        counted = counters if callable(counters) else set([counters] if isinstance(counters, str) else counters)
        metrics = pers.last_samples(metrics, lambda m: m in judged or (
            counted(m) if callable(counted) else m in counted), n + REGRESSION_WINDOW, keep_order=True)
        peer = pers.peer_key(gpu_model, rack)
        fl = floors_.floor_crossings(metrics, gpu_model, references=references, dtype=dtype, k=k, n=n,
                                     thermal=thermal)
        ev += evidence_floors(fl, w)
        po = pers.persistent_outliers(metrics, list(figs), peer_of=peer, k=k, n=n, threshold=threshold,
                                      min_peers=min_peers, side=figs, min_rel_deviation=MIN_RELATIVE)
        ev += evidence_outliers(po, w, threshold)
        higher = [name for name, side in figs.items() if side == "low"]
        rg = regression_hits(metrics, higher, k=k, n=n)
        if keep is not None:
            keep["regressions"] = rg
        ev += evidence_regressions(rg, w)
        ev += evidence_growth(pers.counter_hits(metrics, counters, k=k, n=n), w)
    return combine(ev + other)


def recent_names(figures: Mapping[str, str] | None = None) -> tuple[list[str], list[str]]:
    """The metric names :func:`recent_inputs` keeps: (last n samples, last n + ``REGRESSION_WINDOW``
    samples: the "higher is better" figures, judged against their own baseline too)."""
    figs = FIGURES if figures is None else figures
    names = sorted(set(figs) | set(floors_.REFERENCE_KEYS) | {floors_.TEMPERATURE}
                   | {m for pair in floors_.PCIE_PAIRS for m in pair})
    longer = [m for m in names if figs.get(m) == "low"]
    return [m for m in names if m not in longer], longer


def recent_inputs(metrics: pd.DataFrame | None, runs: pd.DataFrame | None, *, n: int = pers.DEFAULT_N,
                  figures: Mapping[str, str] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """What :func:`rank_fleet` needs of a window, reduced: (:func:`recent_samples`, :func:`recent_runs`).
    For a report summary."""
    return recent_samples(metrics, n=n, figures=figures), recent_runs(runs, n=n)


def recent_samples(metrics: pd.DataFrame | None, *, n: int = pers.DEFAULT_N,
                   figures: Mapping[str, str] | None = None) -> pd.DataFrame:
    """The last ``n`` samples of every series of the judged figures and floors (``n + REGRESSION_WINDOW`` of
    the "higher is better" figures: their own baseline), no counters (pass the moved counter series
    separately). The samples of a PCIe pair that never crosses in them are left out
    (:func:`floors.uncrossed_pairs`: nothing the ranking judges is in them)."""
    short, longer = recent_names(figures)
    parts = [pers.last_samples(metrics, short, n),
             pers.last_samples(metrics, longer, n + REGRESSION_WINDOW)]
    recent = pd.concat([p for p in parts if len(p)] or parts[:1], ignore_index=True).drop(columns="pos")
    drop = floors_.uncrossed_pairs(recent)
    if drop.any():
        recent = recent[~drop].reset_index(drop=True)
    return recent


def recent_runs(runs: pd.DataFrame | None, *, n: int = pers.DEFAULT_N) -> pd.DataFrame:
    """The last ``n`` runs of every node (run_id, node, started_at), by node and time."""
    cols = ["run_id", "node", "started_at"]
    if runs is None or not len(runs):
        return pd.DataFrame({c: pd.Series([], dtype=object) for c in cols})
    r = runs[cols].sort_values(["node", "started_at", "run_id"], kind="stable")
    r = r[r.groupby("node", sort=False, observed=True).cumcount(ascending=False) < n]
    return r.reset_index(drop=True)


def rank_summary(summary: Any, *, gpu_model: Mapping[str, Any] | Callable[[str], Any] | None = None,
                 rack: Mapping[str, Any] | Callable[[str], Any] | None = None, references: Any = None,
                 k: int = pers.DEFAULT_K, n: int = pers.DEFAULT_N, **kw: Any) -> pd.DataFrame:
    """:func:`rank_fleet` over a report summary (``report.summary.Summary`` built with ``recent``):
    its ``perf_recent`` + ``counter_samples`` as metrics (read last: the summary may still be reading its
    samples, ``summary.Later``), ``flagged_results`` ordered by ``recent_runs``, its actions and failure onsets
    (``reliability``), at ``summary.now``."""
    results = summary.flagged_results
    latest = getattr(summary, "latest_results", None)
    if latest is not None and len(latest):  # ERROR (the checker could not judge) is evidence too; the
        errors = latest[latest["status"] == "error"]  # summary keeps it for the latest runs only
        if len(errors):
            results = pd.concat([results, errors], ignore_index=True) if len(results) else errors
    return rank_fleet(metrics=lambda: _summary_metrics(summary), results=results, runs=summary.recent_runs,
                      actions=summary.actions, now=summary.now, gpu_model=gpu_model, rack=rack,
                      references=references, k=k, n=n, reliability=summary.reliability, **kw)


def _summary_metrics(summary: Any) -> pd.DataFrame | None:
    """A summary's ``perf_recent`` + ``counter_samples``, their keys as one set of categories."""
    parts = [f for f in (summary.perf_recent, summary.counter_samples) if f is not None and len(f)]
    if len(parts) > 1:  # the keys as one set of categories on both sides: the concatenation stays categorical
        def values(col: pd.Series) -> list:
            return list(col.cat.categories) if isinstance(col.dtype, pd.CategoricalDtype) else list(pd.unique(col))

        cats = {c: pd.CategoricalDtype(pd.Index(sorted({v for p in parts for v in values(p[c]) if isinstance(v, str)})))
                for c in SERIES_KEYS}
        parts = [p.astype(cats) for p in parts]
    return pd.concat(parts, ignore_index=True) if parts else None
