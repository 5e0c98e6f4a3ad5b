"""The report's plots as inline SVG text (matplotlib, Agg/SVG backends, imported only when plotting).

Every label drawn comes from the data (node names, components, metric names): it goes through
:func:`label` (printable ASCII, bounded length) and is drawn with math text off, so a name with ``$`` is
not parsed as TeX; matplotlib's SVG writer escapes the text it emits (``svg.fonttype = none``: real
``<text>`` elements, small and searchable). Each figure has its own ``svg.hashsalt``, so element ids
of two inline SVGs never collide in one HTML page.
"""
from __future__ import annotations

import io
from typing import Any

MAX_METRICS = 6
MAX_LABELLED = 8
MAX_POINTS = 800  # non-outlier points drawn per metric
MAX_TIMELINE_NODES = 40


def label(text: Any, limit: int = 40) -> str:
    """Printable ASCII only, at most ``limit`` characters: safe and short for a plot label."""
    s = "".join(ch if " " <= ch <= "~" else "?" for ch in str(text))
    return s if len(s) <= limit else s[: limit - 3] + "..."


def _naive_utc(t):
    import pandas as pd

    t = pd.Timestamp(t)
    return t.tz_convert("UTC").tz_localize(None) if t.tzinfo else t


def _horizontal() -> dict:
    """boxplot's horizontal switch: ``orientation`` from matplotlib 3.10, ``vert`` before (deprecated since)."""
    import matplotlib

    major, minor = (int(x) for x in matplotlib.__version__.split(".")[:2])
    return {"orientation": "horizontal"} if (major, minor) >= (3, 10) else {"vert": False}


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _svg(fig, salt: str) -> str:
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": f"hc-{salt}"}):
        fig.savefig(buf, format="svg", metadata={"Date": None})  # tight_layout done: one draw
    _pyplot().close(fig)
    text = buf.getvalue()
    start = text.find("<svg")
    return text[start:] if start >= 0 else text


def _style():
    import matplotlib

    return matplotlib.rc_context({"text.parse_math": False, "font.size": 9, "axes.spines.top": False,
                                  "axes.spines.right": False, "font.family": "DejaVu Sans"})


def distributions_svg(distributions: list) -> str | None:
    """One strip per metric: every node/GPU's latest value, the box of the fleet, outliers in red, labelled."""
    shown = [d for d in distributions if d.points is not None and len(d.points)][:MAX_METRICS]
    if not shown:
        return None
    import numpy as np

    plt = _pyplot()
    with _style():
        fig, axes = plt.subplots(len(shown), 1, figsize=(10, 1.5 * len(shown) + 0.4), squeeze=False)
        rng = np.random.default_rng(0)
        for ax, d in zip(axes[:, 0], shown):
            pts = d.points
            values = pts["value"].to_numpy(dtype=float)
            bad = pts["outlier"].to_numpy(dtype=bool)
            y = rng.uniform(-0.25, 0.25, len(values))
            ax.boxplot(values, **_horizontal(), widths=0.7, showfliers=False, positions=[0],
                       medianprops={"color": "#1f4e79"}, boxprops={"color": "#7f8c8d"})
            normal = np.flatnonzero(~bad)
            if len(normal) > MAX_POINTS:  # the box shows them all; the strip a sample (keeps the SVG small)
                normal = np.sort(rng.choice(normal, MAX_POINTS, replace=False))
            ax.scatter(values[normal], y[normal], s=6, alpha=0.45, color="#2e86c1", linewidths=0)
            ax.scatter(values[bad], y[bad], s=22, color="#c0392b", marker="x", label="outlier")
            for (_, row), yy in list(zip(pts[bad].iterrows(), y[bad]))[:MAX_LABELLED]:
                ax.annotate(label(f"{row['node']} {row['component']}", 28), (row["value"], yy), fontsize=7,
                            color="#c0392b", xytext=(3, 3), textcoords="offset points")
            side = "low is bad" if d.low_is_bad else "high is bad"
            ax.set_title(label(f"{d.metric}  (n={d.count}, median {d.median:.4g}, {len(d.outliers)} outliers, "
                               f"{side})", 120), loc="left", fontsize=9)
            ax.set_yticks([])
        fig.tight_layout()
        return _svg(fig, "dist")


def growth_svg(points) -> str | None:
    """Cumulative increase of the fastest-growing error counters over the window."""
    if points is None or not len(points):
        return None
    plt = _pyplot()
    with _style():
        fig, ax = plt.subplots(figsize=(10, 3.6))
        for keys, grp in points.groupby(["node", "component", "name"], sort=False):
            ax.step(grp["started_at"].dt.tz_localize(None), grp["cumulative"], where="post",
                    label=label(" ".join(str(k) for k in keys if k), 48))
        ax.set_ylabel("increase since window start")
        ax.legend(fontsize=7, loc="upper left", frameon=False)
        fig.autofmt_xdate()
        fig.tight_layout()
        return _svg(fig, "growth")


def timeline_svg(intervals, since, now) -> str | None:
    """Drained intervals per node (the nodes drained longest first); still drained in red."""
    if intervals is None or not len(intervals):
        return None
    import matplotlib.dates as mdates
    import numpy as np
    import pandas as pd

    since, now = _naive_utc(since), _naive_utc(now)
    iv = intervals.copy()
    iv["start"] = pd.to_datetime(iv["start"], utc=True).dt.tz_convert(None).clip(lower=since)
    iv["end"] = pd.to_datetime(iv["end"], utc=True).dt.tz_convert(None)
    iv["hours"] = (iv["end"] - iv["start"]).dt.total_seconds()
    order = iv.groupby("node")["hours"].sum().sort_values(ascending=False).index[:MAX_TIMELINE_NODES]
    plt = _pyplot()
    with _style():
        fig, ax = plt.subplots(figsize=(10, 0.28 * len(order) + 1.0))
        iv = iv[iv["node"].isin(set(order))]
        x0 = mdates.date2num(iv["start"])
        width = np.maximum(mdates.date2num(iv["end"]) - x0, 0.002)
        nodes, still = iv["node"].to_numpy(), iv["open"].to_numpy(dtype=bool)
        for i, node in enumerate(order):  # one collection per node row
            mine = nodes == node
            ax.broken_barh(list(zip(x0[mine], width[mine])), (i - 0.35, 0.7),
                           facecolors=["#c0392b" if o else "#e67e22" for o in still[mine]])
        ax.set_yticks(range(len(order)), [label(n, 30) for n in order], fontsize=7)
        ax.invert_yaxis()
        ax.set_xlim(mdates.date2num(since), mdates.date2num(now))
        ax.xaxis_date()
        ax.set_title("drained (orange: resumed since, red: still drained)", loc="left", fontsize=9)
        fig.autofmt_xdate()
        fig.tight_layout()
        return _svg(fig, "drains")
