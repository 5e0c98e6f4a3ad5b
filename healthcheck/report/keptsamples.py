"""The fleet ranking's kept samples as the report reads them: ``metric_recent`` rows (``history.recent``: per
series its newest ``KEEP`` samples, times and values as arrays, newest first) unnested into one row per
sample of the window, and the series whose kept samples cannot tell named, to be read from the metric rows
(``report.dbsummary``). Pure functions over frames; the reads are dbsummary's.

PCIe pairs (``floors.PCIE_PAIRS``: a width and its max) whose kept samples are the same text are left out
before the arrays are split (``identical_pairs``): nothing the ranking judges is in them, and they are half
the rows at fleet scale; a pair series read again from the rows is read with its partner (``with_partners``).
"""
from __future__ import annotations

from typing import Any

import pandas as pd

from ..history.db import HistoryError
from ..history.recent import KEEP
from . import summary as summ
from .sqlframe import array_items

KEY_COLUMNS = ["name", "node", "check", "component"]  # a series in the rollups ('' for no component)


def identical_pairs(rows: pd.DataFrame, sure: Any, arrow: bool | None = None) -> Any:
    """Both ``metric_recent`` rows of a PCIe pair (``floors.PCIE_PAIRS``: the width and its max) of one unit
    (node, check, component) whose arrays, as read, are the same text, where both rows' kept samples tell
    (``sure``): the width equals its max at every instant of them, so the floor rule finds nothing there
    and ``floors.uncrossed_pairs`` drops them after the reduction anyway. At 10,000 nodes nearly every pair
    (half the rows, 800,000 kept samples) is never unnested. A boolean mask over the rows. The texts are
    compared by pyarrow where it is installed (or ``arrow``), else as Python strings (the same mask)."""
    import numpy as np

    from ..analysis.floors import PCIE_PAIRS

    drop = np.zeros(len(rows), dtype=bool)
    names = rows["name"]
    pairs = [(names.eq(cur).to_numpy(dtype=bool) & sure, names.eq(mx).to_numpy(dtype=bool) & sure)
             for cur, mx in PCIE_PAIRS]
    if not any(a.any() and b.any() for a, b in pairs):
        return drop
    unit = np.zeros(len(rows), dtype=np.int64)  # one integer per (node, check, component)
    for col in ("node", "check", "component"):
        codes, uniques = pd.factorize(rows[col].fillna(""))
        unit = unit * (len(uniques) + 1) + codes
    equal = text_equality(rows["t"], rows["v"], arrow)
    for is_cur, is_max in pairs:
        a, b = np.flatnonzero(is_cur), np.flatnonzero(is_max)
        pos = pd.Index(unit[b]).get_indexer(unit[a])  # a unit has one row per name (the primary key)
        a, b = a[pos >= 0], b[pos[pos >= 0]]
        same = equal(a, b)
        drop[a[same]] = drop[b[same]] = True
    return drop


def text_equality(t: pd.Series, v: pd.Series, arrow: bool | None = None):
    """``(a, b) -> mask``: whether rows ``a`` and rows ``b`` (positions) hold the same ``t`` and ``v`` texts (a
    missing text equals nothing). pyarrow's kernels where it is installed (``arrow`` None or True), else Python
    strings (``arrow=False``, or no pyarrow: it is not a dependency of the history extra)."""
    import numpy as np

    try:
        if arrow is False:
            raise ImportError("Python strings asked for")
        import pyarrow as pa
        import pyarrow.compute as pc
    except ImportError:
        tt, vv = t.to_numpy(dtype=object), v.to_numpy(dtype=object)

        def python(a, b):
            same = [x == y and p == q and isinstance(x, str) and isinstance(p, str)
                    for x, y, p, q in zip(tt[a], tt[b], vv[a], vv[b])]
            return np.array(same, dtype=bool)
        return python
    ta, va = pa.chunked_array(pa.array(t)), pa.chunked_array(pa.array(v))

    def kernels(a, b):
        same = pc.and_(pc.equal(ta.take(a), ta.take(b)), pc.equal(va.take(a), va.take(b)))
        return same.to_numpy(zero_copy_only=False).astype(bool)  # a missing text: null, not the same
    return kernels


def with_partners(keys: pd.DataFrame) -> pd.DataFrame:
    """``keys`` (rollup keys) with the other series of each PCIe pair among them (``floors.PCIE_PAIRS``): a
    series read again from the rows is judged against its partner's rows too, not against kept samples that
    ``identical_pairs`` may have left out."""
    from ..analysis.floors import PCIE_PAIRS

    other = {a: b for pair in PCIE_PAIRS for a, b in (pair, pair[::-1])}
    partners = keys[keys["name"].isin(list(other))]
    if not len(partners):
        return keys
    partners = partners.assign(name=partners["name"].map(other))
    return pd.concat([keys, partners], ignore_index=True).drop_duplicates().reset_index(drop=True)


def longest(n: int, long_: list[str]) -> int:
    """The most samples the ranking asks of one series: n, or n + its regression window where there are
    "higher is better" names (``long_``)."""
    from ..analysis.fleetrank import REGRESSION_WINDOW

    return n + REGRESSION_WINDOW if long_ else n


def no_samples() -> pd.DataFrame:
    return summ.empty_frame("metrics").astype({"value": "float64"})


def keyed(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with its component as the rollups key it ('' for none)."""
    comp = df["component"].astype(object)
    return df.assign(component=comp.where(comp.notna() & (comp != ""), ""))


def unnest_recent(rows: pd.DataFrame, long_: list[str], n: int, longer: int, since_us: int,
                  now_us: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``metric_recent`` rows (arrays newest first) -> (one row per kept sample in [since, now] among each
    series' newest n (``longer`` for ``long_``), the series in (node, check, component, name) order, each
    oldest first, in the metrics frame's columns; the keys of the series whose kept samples cannot tell, to
    be read from the rows)."""
    import numpy as np

    from ..analysis._frames import SERIES_KEYS, series_codes

    if rows.empty:
        return no_samples(), pd.DataFrame(columns=KEY_COLUMNS)
    # rows whose kept samples may not tell (redo, or a full list that samples after the window's end may
    # crowd the window out of: see ``unsure`` below) are never left out as identical pairs
    maybe_short = ((rows["n_kept"].to_numpy() >= KEEP) & (rows["oldest_us"].to_numpy() >= since_us)
                   & (rows["newest_us"].to_numpy() > now_us)) | (rows["redo"].to_numpy() != 0)
    same = identical_pairs(rows, ~maybe_short)
    if same.any():
        rows = rows[~same].reset_index(drop=True)
    ticks, lengths = array_items(rows["t"], "int64")
    values, vlengths = array_items(rows["v"], "float64")
    if not np.array_equal(lengths, vlengths):
        raise HistoryError("the recent samples' times and values disagree in length (a database error?)")
    series = np.repeat(np.arange(len(rows)), lengths)
    inside = (ticks >= since_us) & (ticks <= now_us)
    before = np.cumsum(inside) - inside  # in-window samples ahead of each (newest first), over all series
    starts = np.cumsum(lengths) - lengths
    rank = before - before[starts][series] if len(before) else before  # 0 for a series' newest in the window
    need = np.where(rows["name"].isin(long_).to_numpy(), longer, n)
    count = np.bincount(series, weights=inside, minlength=len(rows)).astype(np.int64)
    # fewer than needed in the window, a full list whose oldest is still in it, and samples after the
    # window's end: older samples, not kept, may be in the window
    unsure = ((count < need) & (rows["n_kept"].to_numpy() >= KEEP) & (rows["oldest_us"].to_numpy() >= since_us)
              & (rows["newest_us"].to_numpy() > now_us)) | (rows["redo"].to_numpy() != 0)
    keep = inside & (rank < need[series]) & ~unsure[series]
    comp = rows["component"]
    comp = comp.where(comp.notna() & (comp != ""))  # '' (the rollups' none) as missing, as in the rows
    # one string per series, not per sample: each key a category of the series' values, sorted (the ranking
    # works on the codes)
    cols = pd.DataFrame({"node": rows["node"], "check": rows["check"], "component": comp, "name": rows["name"]})
    keys = {k: pd.factorize(col, sort=True) for k, col in cols.items()}
    # the series in the ranking's order (series_codes of SERIES_KEYS: text order, no component last), each
    # oldest first: its reductions (persistence.last_samples) find them sorted and do not sort them again
    place, _ = series_codes(cols, SERIES_KEYS, with_keys=False)
    kept = np.flatnonzero(keep)
    take = kept[np.lexsort((-kept, place[series[kept]]))]  # a series' arrays are newest first: backwards
    pick = series[take]

    def at(key: str) -> pd.Series:
        codes, uniques = keys[key]
        return pd.Series(pd.Categorical.from_codes(codes[pick], uniques))

    out = pd.DataFrame({"run_id": None, "node": at("node"),
                        "started_at": pd.to_datetime(ticks[take], unit="us", utc=True),
                        "check": at("check"), "component": at("component"), "name": at("name"),
                        "value": values[take]})
    again = keyed(rows.loc[unsure, KEY_COLUMNS]).reset_index(drop=True)
    return out[summ.COLUMNS["metrics"]], again
