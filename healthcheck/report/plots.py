"""The report's plots as inline SVG, drawn here with plain SVG elements (no plotting library).

Why not matplotlib (which drew them before): on the 2-core machines the readiness report must take
≤ 5 s over a month of a 1,000-node fleet, and matplotlib alone took ~2 s of it (0.5-0.9 s to import,
1-1.5 s to lay out and write three SVG figures). These three plots are simple: strips with a box, step
lines, horizontal bars, with linear or time axes; drawing them here takes milliseconds.

Every label drawn comes from the data (node names, components, metric names): it goes through
:func:`label` (printable ASCII, bounded length) and is then escaped (``html.escape``), so nothing from
the data becomes markup. No ids, no scripts, no external references: several SVGs live in one page.
"""
from __future__ import annotations

import html
import math
from datetime import datetime, timedelta, timezone
from typing import Any, Sequence

MAX_METRICS = 6
MAX_LABELLED = 8
MAX_POINTS = 800  # non-outlier points drawn per metric
MAX_TIMELINE_NODES = 40
WIDTH = 1000
FONT = "font-family:'DejaVu Sans',Arial,sans-serif;font-size:11px;fill:#1c2833"
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")
TIME_STEPS = [timedelta(minutes=m) for m in (1, 5, 15, 30)] + [timedelta(hours=h) for h in (1, 3, 6, 12)] + \
    [timedelta(days=d) for d in (1, 2, 7, 14, 30, 91, 182, 365)]


def label(text: Any, limit: int = 40) -> str:
    """Printable ASCII only, at most ``limit`` characters: safe and short for a plot label."""
    s = "".join(ch if " " <= ch <= "~" else "?" for ch in str(text))
    return s if len(s) <= limit else s[: limit - 3] + "..."


def _t(text: Any, limit: int = 40) -> str:
    return html.escape(label(text, limit), quote=True)


def _n(v: float) -> str:
    return f"{v:.1f}".rstrip("0").rstrip(".")


def _text(x: float, y: float, text: Any, limit: int = 40, anchor: str = "start", extra: str = "") -> str:
    return (f'<text x="{_n(x)}" y="{_n(y)}" text-anchor="{anchor}"{extra}>{_t(text, limit)}</text>')


def _svg(height: float, body: list[str], title: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {_n(height)}" width="{WIDTH}" '
            f'height="{_n(height)}" style="{FONT}"><title>{_t(title, 120)}</title>{"".join(body)}</svg>')


def nice_ticks(lo: float, hi: float, count: int = 6) -> list[float]:
    """Round tick values (1, 2, 2.5 or 5 times a power of ten apart) covering [lo, hi]."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo] if math.isfinite(lo) else []
    raw = (hi - lo) / max(count - 1, 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    first = math.ceil(lo / step - 1e-9) * step
    return [round(first + i * step, 12) for i in range(int((hi - first) / step + 1e-9) + 1)]


def time_ticks(lo: datetime, hi: datetime, count: int = 7) -> tuple[list[datetime], str]:
    """Tick times on round boundaries (UTC) across [lo, hi] and their strftime format."""
    span = hi - lo
    step = next((s for s in TIME_STEPS if s * (count - 1) >= span), TIME_STEPS[-1])
    base = datetime(lo.year, lo.month, lo.day, tzinfo=timezone.utc)
    first = base + step * math.ceil((lo - base) / step) if step < timedelta(days=1) else \
        base + timedelta(days=math.ceil((lo - base) / timedelta(days=1)))
    ticks = []
    t = first
    while t <= hi and len(ticks) < 3 * count:
        ticks.append(t)
        t += step
    return ticks, ("%Y-%m-%d" if step >= timedelta(days=1) else "%m-%d %H:%M")


class _Scale:
    def __init__(self, lo: float, hi: float, a: float, b: float) -> None:
        if not hi > lo:
            lo, hi = lo - (abs(lo) * 0.05 or 1.0), hi + (abs(hi) * 0.05 or 1.0)
        self.lo, self.hi, self.a, self.b = lo, hi, a, b

    def __call__(self, v: float) -> float:
        return self.a + (v - self.lo) / (self.hi - self.lo) * (self.b - self.a)


def _utc(t: Any) -> datetime:
    import pandas as pd

    ts = pd.Timestamp(t)
    ts = ts.tz_localize("UTC") if ts.tzinfo is None else ts.tz_convert("UTC")
    return ts.to_pydatetime()


def _time_axis(lo: datetime, hi: datetime, x0: float, x1: float, y: float, top: float) -> tuple[list[str], Any]:
    """Grid lines, ticks and labels of a time axis at ``y``; returns them and the scale (datetime -> x)."""
    span = (hi - lo).total_seconds() or 1.0

    def sx(t: datetime) -> float:
        return x0 + (t - lo).total_seconds() / span * (x1 - x0)

    ticks, fmt = time_ticks(lo, hi)
    out = [f'<line x1="{x0}" y1="{_n(y)}" x2="{x1}" y2="{_n(y)}" stroke="#566573"/>']
    for t in ticks:
        x = sx(t)
        out.append(f'<line x1="{_n(x)}" y1="{_n(top)}" x2="{_n(x)}" y2="{_n(y)}" stroke="#eaeded"/>')
        out.append(_text(x, y + 15, t.strftime(fmt), anchor="middle"))
    return out, sx


def _box(values: Sequence[float], sx: _Scale, y: float) -> list[str]:
    """Box (quartiles), median and whiskers at 1.5 IQR, as matplotlib's boxplot without fliers."""
    import numpy as np

    v = np.sort(np.asarray(values, dtype=float))
    q1, med, q3 = np.percentile(v, [25, 50, 75])
    lo = v[v >= q1 - 1.5 * (q3 - q1)].min()
    hi = v[v <= q3 + 1.5 * (q3 - q1)].max()
    h = 16
    return [f'<line x1="{_n(sx(lo))}" y1="{_n(y)}" x2="{_n(sx(q1))}" y2="{_n(y)}" stroke="#7f8c8d"/>',
            f'<line x1="{_n(sx(q3))}" y1="{_n(y)}" x2="{_n(sx(hi))}" y2="{_n(y)}" stroke="#7f8c8d"/>',
            f'<line x1="{_n(sx(lo))}" y1="{_n(y - h / 2)}" x2="{_n(sx(lo))}" y2="{_n(y + h / 2)}" stroke="#7f8c8d"/>',
            f'<line x1="{_n(sx(hi))}" y1="{_n(y - h / 2)}" x2="{_n(sx(hi))}" y2="{_n(y + h / 2)}" stroke="#7f8c8d"/>',
            f'<rect x="{_n(sx(q1))}" y="{_n(y - h)}" width="{_n(max(sx(q3) - sx(q1), 0.5))}" height="{2 * h}" '
            f'fill="none" stroke="#7f8c8d"/>',
            f'<line x1="{_n(sx(med))}" y1="{_n(y - h)}" x2="{_n(sx(med))}" y2="{_n(y + h)}" stroke="#1f4e79" '
            f'stroke-width="2"/>']


def distributions_svg(distributions: list) -> str | None:
    """One strip per metric: every node/GPU's latest value, the box of the fleet, outliers as red crosses,
    the first few labelled."""
    shown = [d for d in distributions if d.points is not None and len(d.points)][:MAX_METRICS]
    if not shown:
        return None
    import numpy as np

    rng = np.random.default_rng(0)
    panel, left, right = 100, 20, WIDTH - 20
    body: list[str] = []
    for i, d in enumerate(shown):
        top = i * panel
        pts = d.points
        values = pts["value"].to_numpy(dtype=float)
        bad = pts["outlier"].to_numpy(dtype=bool)
        mid = top + 50
        ticks = nice_ticks(float(values.min()), float(values.max()))
        sx = _Scale(min([float(values.min())] + ticks), max([float(values.max())] + ticks), left + 10, right - 10)
        side = "low is bad" if d.low_is_bad else "high is bad"
        body.append(_text(left, top + 16, f"{d.metric}  (n={d.count}, median {d.median:.4g}, {len(d.outliers)} "
                                           f"outliers, {side})", 120, extra=' font-weight="bold"'))
        axis_y = top + 80
        body.append(f'<line x1="{left}" y1="{axis_y}" x2="{right}" y2="{axis_y}" stroke="#566573"/>')
        for v in ticks:
            body.append(f'<line x1="{_n(sx(v))}" y1="{axis_y}" x2="{_n(sx(v))}" y2="{axis_y + 4}" stroke="#566573"/>')
            body.append(_text(sx(v), axis_y + 16, f"{v:.6g}", anchor="middle"))
        body += _box(values, sx, mid)
        y = mid + rng.uniform(-22, 22, len(values))
        normal = np.flatnonzero(~bad)
        if len(normal) > MAX_POINTS:  # the box shows them all; the strip a sample (keeps the SVG small)
            normal = np.sort(rng.choice(normal, MAX_POINTS, replace=False))
        body.append('<g fill="#2e86c1" fill-opacity="0.45">' + "".join(
            f'<circle cx="{_n(sx(values[j]))}" cy="{_n(y[j])}" r="2.2"/>' for j in normal) + "</g>")
        marks = []
        for j in np.flatnonzero(bad):
            x, yy = sx(values[j]), y[j]
            marks.append(f'<path d="M{_n(x - 4)} {_n(yy - 4)}L{_n(x + 4)} {_n(yy + 4)}M{_n(x - 4)} {_n(yy + 4)}'
                         f'L{_n(x + 4)} {_n(yy - 4)}"/>')
        body.append('<g stroke="#c0392b" stroke-width="1.6">' + "".join(marks) + "</g>")
        for j in np.flatnonzero(bad)[:MAX_LABELLED]:
            x, near_end = sx(values[j]), sx(values[j]) > right - 160  # keep the label inside the plot
            name = f"{pts['node'].iloc[j]} {pts['component'].iloc[j]}"
            body.append(_text(x - 5 if near_end else x + 5, y[j] - 5, name, 28, anchor="end" if near_end else "start",
                              extra=' style="fill:#c0392b;font-size:10px"'))
    return _svg(len(shown) * panel + 4, body, "performance distributions")


def growth_svg(points) -> str | None:
    """Cumulative increase of the fastest-growing error counters over the window (step lines)."""
    if points is None or not len(points):
        return None
    left, right, top, bottom, height = 70, WIDTH - 20, 20, 300, 340
    times = [_utc(t) for t in points["started_at"]]
    lo, hi = min(times), max(times)
    if hi <= lo:
        lo, hi = lo - timedelta(hours=1), hi + timedelta(hours=1)
    ymax = float(points["cumulative"].max())
    ticks = nice_ticks(0.0, ymax if ymax > 0 else 1.0)
    sy = _Scale(0.0, max([ymax] + ticks), bottom, top)
    body, sx = _time_axis(lo, hi, left, right, bottom, top)
    for v in ticks:
        body.append(f'<line x1="{left}" y1="{_n(sy(v))}" x2="{right}" y2="{_n(sy(v))}" stroke="#eaeded"/>')
        body.append(_text(left - 6, sy(v) + 4, f"{v:.6g}", anchor="end"))
    body.append(_text(14, (top + bottom) / 2, "increase since window start", anchor="middle",
                      extra=f' transform="rotate(-90 14 {(top + bottom) / 2})"'))
    points = points.assign(_t=times)
    for k, (keys, grp) in enumerate(points.groupby(["node", "component", "name"], sort=False, dropna=False)):
        color = PALETTE[k % len(PALETTE)]
        xs = [sx(t) for t in grp["_t"]]
        ys = [sy(float(v)) for v in grp["cumulative"]]
        path = f"M{_n(xs[0])} {_n(ys[0])}" + "".join(f"H{_n(x)}V{_n(y)}" for x, y in zip(xs[1:], ys[1:]))
        body.append(f'<path d="{path}" fill="none" stroke="{color}" stroke-width="1.6"/>')
        name = " ".join(str(x) for x in keys if isinstance(x, str) and x)
        body.append(f'<rect x="{left + 10}" y="{top + 4 + 14 * k}" width="14" height="3" fill="{color}"/>')
        body.append(_text(left + 28, top + 9 + 14 * k, name, 48, extra=' style="font-size:10px"'))
    return _svg(height, body, "counter growth")


def timeline_svg(intervals, since, now) -> str | None:
    """Drained intervals per node (the nodes drained longest first); still drained in red."""
    if intervals is None or not len(intervals):
        return None
    lo, hi = _utc(since), _utc(now)
    if hi <= lo:
        return None
    rows: dict[str, list[tuple[datetime, datetime, bool]]] = {}
    hours: dict[str, float] = {}
    for node, start, end, still in zip(intervals["node"], intervals["start"], intervals["end"], intervals["open"]):
        s, e = max(_utc(start), lo), min(_utc(end), hi)
        rows.setdefault(str(node), []).append((s, e, bool(still)))
        hours[str(node)] = hours.get(str(node), 0.0) + (_utc(end) - s).total_seconds()
    order = sorted(hours, key=lambda n: -hours[n])[:MAX_TIMELINE_NODES]
    left, right, top, row = 170, WIDTH - 20, 30, 20
    bottom = top + row * len(order) + 6
    body, sx = _time_axis(lo, hi, left, right, bottom, top)
    body.append(_text(left, 16, "drained (orange: resumed since, red: still drained)", 80))
    for i, node in enumerate(order):
        y = top + row * i
        body.append(_text(left - 6, y + 14, node, 30, anchor="end", extra=' style="font-size:10px"'))
        for s, e, still in rows[node]:
            if e < s:
                continue
            width = max(sx(e) - sx(s), 1.5)
            body.append(f'<rect x="{_n(sx(s))}" y="{y + 3}" width="{_n(width)}" height="14" '
                        f'fill="{"#c0392b" if still else "#e67e22"}"/>')
    return _svg(bottom + 26, body, "drain timeline")
