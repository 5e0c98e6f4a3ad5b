"""The report's plots as inline SVG, drawn here with plain SVG elements (no plotting library).

Why not matplotlib (which drew them before): on the 2-core machines the readiness report must take
≤ 5 s over a month of a 1,000-node fleet, and matplotlib alone took ~2 s of it (0.5-0.9 s to import,
1-1.5 s to lay out and write three SVG figures). These three plots are simple: strips with a box, step
lines, horizontal bars, with linear or time axes; drawing them here takes milliseconds.

Every label drawn comes from the data (node names, components, metric names): it goes through
:func:`label` (printable ASCII, bounded length) and is then escaped (``html.escape``), so nothing from
the data becomes markup. No ids, no scripts, no external references: several SVGs live in one page.

Reading them: every mark carries an SVG ``<title>`` (the browser shows it on hover: node, component,
value, dates); labels are placed by :class:`Placer`, which estimates each text's box from its length and
font size (generously) and drops a movable label rather than let it overlap another text; the
distributions carry reference lines (p5, median, p95 of the fleet). The browser test measures the real
boxes (tests/report/test_fleet_browser.py).
"""
from __future__ import annotations

import html
import math
from datetime import datetime, timedelta, timezone
from typing import Any, Sequence

MAX_METRICS = 6
MAX_LABELLED = 8
MAX_POINTS = 800  # non-outlier points drawn per metric
MAX_TIMELINE_NODES = 20
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


def svg_text(x: float, y: float, text: Any, limit: int = 40, anchor: str = "start", extra: str = "") -> str:
    return (f'<text x="{_n(x)}" y="{_n(y)}" text-anchor="{anchor}"{extra}>{_t(text, limit)}</text>')


def tip(text: Any) -> str:
    """A hover title for a mark (``<title>`` as the mark's first child)."""
    return f"<title>{_t(text, 200)}</title>"


CHAR_EM = 0.66  # a generous average glyph width (DejaVu Sans: digits 0.64 em, lower case 0.5-0.65 em)


def text_box(x: float, y: float, text: str, size: float = 11.0, anchor: str = "start",
             bold: bool = False) -> tuple[float, float, float, float]:
    """The estimated box (x0, y0, x1, y1) of a one-line text drawn at baseline ``y``."""
    width = len(text) * size * (CHAR_EM + (0.08 if bold else 0.0))
    x0 = x - width if anchor == "end" else x - width / 2 if anchor == "middle" else x
    return (x0, y - size * 0.95, x0 + width, y + size * 0.3)


class Placer:
    """Texts of one SVG without overlaps: fixed texts (titles, ticks) are drawn and remembered; a movable
    label tries its candidate positions in order and is left out when none is free (its mark keeps the
    hover title)."""

    def __init__(self, bounds: tuple[float, float, float, float], gap: float = 1.5) -> None:
        self.bounds, self.gap = bounds, gap
        self.boxes: list[tuple[float, float, float, float]] = []

    def _free(self, b: tuple[float, float, float, float]) -> bool:
        x0, y0, x1, y1 = self.bounds
        if b[0] < x0 or b[2] > x1 or b[1] < y0 or b[3] > y1:
            return False
        g = self.gap
        return all(b[2] + g <= o[0] or o[2] + g <= b[0] or b[3] + g <= o[1] or o[3] + g <= b[1] for o in self.boxes)

    def fixed(self, x: float, y: float, text: Any, limit: int = 40, anchor: str = "start", size: float = 11.0,
              bold: bool = False, extra: str = "") -> str:
        self.boxes.append(text_box(x, y, label(text, limit), size, anchor, bold))
        return svg_text(x, y, text, limit, anchor, extra)

    def place(self, candidates: Sequence[tuple[float, float, str]], text: Any, limit: int = 40,
              size: float = 11.0, extra: str = "") -> str:
        """The first free candidate (x, y, anchor) as a <text>, or "" when none is free."""
        s = label(text, limit)
        for x, y, anchor in candidates:
            b = text_box(x, y, s, size, anchor)
            if self._free(b):
                self.boxes.append(b)
                return svg_text(x, y, text, limit, anchor, extra)
        return ""


def svg(height: float, body: list[str], title: str) -> str:
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


def _time_axis(lo: datetime, hi: datetime, x0: float, x1: float, y: float, top: float,
               place: "Placer | None" = None) -> tuple[list[str], Any]:
    """Grid lines, ticks and labels of a time axis at ``y``; returns them and the scale (datetime -> x).
    With ``place``, a tick label that would overlap a text placed before is left out."""
    span = (hi - lo).total_seconds() or 1.0

    def sx(t: datetime) -> float:
        return x0 + (t - lo).total_seconds() / span * (x1 - x0)

    ticks, fmt = time_ticks(lo, hi)
    out = [f'<line x1="{x0}" y1="{_n(y)}" x2="{x1}" y2="{_n(y)}" stroke="#566573"/>']
    for t in ticks:
        x = sx(t)
        out.append(f'<line x1="{_n(x)}" y1="{_n(top)}" x2="{_n(x)}" y2="{_n(y)}" stroke="#eaeded"/>')
        if place is None:
            out.append(svg_text(x, y + 15, t.strftime(fmt), anchor="middle"))
        else:
            out.append(place.place([(x, y + 15, "middle")], t.strftime(fmt)))
    return out, sx


def _box(values: Sequence[float], sx: _Scale, y: float, what: str) -> list[str]:
    """Box (quartiles), median and whiskers at 1.5 IQR, as matplotlib's boxplot without fliers."""
    import numpy as np

    v = np.sort(np.asarray(values, dtype=float))
    q1, med, q3 = np.percentile(v, [25, 50, 75])
    lo = v[v >= q1 - 1.5 * (q3 - q1)].min()
    hi = v[v <= q3 + 1.5 * (q3 - q1)].max()
    h = 16
    return [f'<g>{tip(f"{what}: quartiles {_num(q1)} / {_num(med)} / {_num(q3)}, whiskers {_num(lo)} to {_num(hi)}")}',
            f'<line x1="{_n(sx(lo))}" y1="{_n(y)}" x2="{_n(sx(q1))}" y2="{_n(y)}" stroke="#7f8c8d"/>',
            f'<line x1="{_n(sx(q3))}" y1="{_n(y)}" x2="{_n(sx(hi))}" y2="{_n(y)}" stroke="#7f8c8d"/>',
            f'<line x1="{_n(sx(lo))}" y1="{_n(y - h / 2)}" x2="{_n(sx(lo))}" y2="{_n(y + h / 2)}" stroke="#7f8c8d"/>',
            f'<line x1="{_n(sx(hi))}" y1="{_n(y - h / 2)}" x2="{_n(sx(hi))}" y2="{_n(y + h / 2)}" stroke="#7f8c8d"/>',
            f'<rect x="{_n(sx(q1))}" y="{_n(y - h)}" width="{_n(max(sx(q3) - sx(q1), 0.5))}" height="{2 * h}" '
            f'fill="none" stroke="#7f8c8d"/>',
            f'<line x1="{_n(sx(med))}" y1="{_n(y - h)}" x2="{_n(sx(med))}" y2="{_n(y + h)}" stroke="#1f4e79" '
            f'stroke-width="2"/></g>']


PANEL = 120  # height of one distribution strip


def distributions_svg(distributions: list) -> str | None:
    """One strip per metric: every node/GPU's latest value (a sample of the normal ones), the box of the
    fleet, reference lines at its p5, median and p95, outliers as red crosses, as many of them labelled
    as fit without overlapping; every mark has a hover title."""
    shown = [d for d in distributions if d.points is not None and len(d.points)][:MAX_METRICS]
    if not shown:
        return None
    import numpy as np

    rng = np.random.default_rng(0)
    left, right = 20, WIDTH - 20
    body: list[str] = []
    for i, d in enumerate(shown):
        top = i * PANEL
        place = Placer((0, top + 2, WIDTH, top + PANEL - 2))
        pts = d.points
        values = pts["value"].to_numpy(dtype=float)
        bad = pts["outlier"].to_numpy(dtype=bool)
        nodes, comps = pts["node"].astype(str).to_numpy(), pts["component"].fillna("").astype(str).to_numpy()
        mid = top + 62
        ticks = nice_ticks(float(values.min()), float(values.max()))
        sx = _Scale(min([float(values.min())] + ticks), max([float(values.max())] + ticks), left + 10, right - 10)
        side = "low is bad" if d.low_is_bad else "high is bad"
        body.append(place.fixed(left, top + 16, f"{d.metric}  (n={d.count}, median {_num(d.median)}, "
                                                 f"{len(d.outliers)} outliers, {side})", 120, bold=True,
                                extra=' font-weight="bold"'))
        axis_y = top + 96
        body.append(f'<line x1="{left}" y1="{axis_y}" x2="{right}" y2="{axis_y}" stroke="#566573"/>')
        for v in ticks:
            body.append(f'<line x1="{_n(sx(v))}" y1="{axis_y}" x2="{_n(sx(v))}" y2="{axis_y + 4}" stroke="#566573"/>')
            body.append(place.fixed(sx(v), axis_y + 16, f"{_num(v, 6)}", anchor="middle"))
        for name, v, dash in (("p5", d.p5, "2,3"), ("median", d.median, "6,3"), ("p95", d.p95, "2,3")):
            x = sx(v)
            body.append(f'<line x1="{_n(x)}" y1="{top + 24}" x2="{_n(x)}" y2="{axis_y}" stroke="#1f4e79" '
                        f'stroke-dasharray="{dash}" stroke-opacity="0.7">{tip(f"fleet {name}: {_num(v, 6)}")}</line>')
            body.append(place.place([(x + 3, top + 32, "start"), (x - 3, top + 32, "end"), (x + 3, top + 44, "start"),
                                     (x - 3, top + 44, "end")], f"{name} {_num(v)}", 24, 10,
                                    ' style="fill:#1f4e79;font-size:10px"'))
        body += _box(values, sx, mid, d.metric)
        y = mid + rng.uniform(-20, 20, len(values))
        normal = np.flatnonzero(~bad)
        if len(normal) > MAX_POINTS:  # the box shows them all; the strip a sample (keeps the SVG small)
            normal = np.sort(rng.choice(normal, MAX_POINTS, replace=False))
        body.append('<g fill="#2e86c1" fill-opacity="0.45">' + "".join(
            f'<circle cx="{_n(sx(values[j]))}" cy="{_n(y[j])}" r="2.2">'
            f'{tip(f"{nodes[j]} {comps[j]}: {_num(values[j], 6)}")}</circle>' for j in normal) + "</g>")
        marks, labels = [], []
        for j in np.flatnonzero(bad):
            x, yy = sx(values[j]), y[j]
            what = f"outlier {nodes[j]} {comps[j]}: {_num(values[j], 6)} (fleet median {_num(d.median)})"
            marks.append(f'<path d="M{_n(x - 4)} {_n(yy - 4)}L{_n(x + 4)} {_n(yy + 4)}M{_n(x - 4)} {_n(yy + 4)}'
                         f'L{_n(x + 4)} {_n(yy - 4)}">{tip(what)}</path>')
        body.append('<g stroke="#c0392b" stroke-width="1.6">' + "".join(marks) + "</g>")
        worst = np.flatnonzero(bad)[np.argsort(-np.abs(values[bad] - d.median), kind="stable")]
        for j in worst[:MAX_LABELLED]:
            x, yy = sx(values[j]), y[j]
            rows = [yy - 6, yy + 13, top + 32, top + 44, top + 56, top + 68, top + 80]
            cands = [(x + 6, r, "start") for r in rows] + [(x - 6, r, "end") for r in rows]
            labels.append(place.place(cands, f"{nodes[j]} {comps[j]}".strip(), 28, 10,
                                      ' style="fill:#c0392b;font-size:10px"'))
        body += [t for t in labels if t]
    return svg(len(shown) * PANEL + 4, body, "performance distributions")


def growth_svg(points) -> str | None:
    """Cumulative increase of the fastest-growing error counters over the window (step lines)."""
    if points is None or not len(points):
        return None
    left, right, top, bottom, height = 86, WIDTH - 20, 20, 236, 266
    times = [_utc(t) for t in points["started_at"]]
    lo, hi = min(times), max(times)
    if hi <= lo:
        lo, hi = lo - timedelta(hours=1), hi + timedelta(hours=1)
    ymax = float(points["cumulative"].max())
    ticks = nice_ticks(0.0, ymax if ymax > 0 else 1.0)
    sy = _Scale(0.0, max([ymax] + ticks), bottom, top)
    place = Placer((0, 0, WIDTH, height))
    body = []
    for v in ticks:
        body.append(f'<line x1="{left}" y1="{_n(sy(v))}" x2="{right}" y2="{_n(sy(v))}" stroke="#eaeded"/>')
        body.append(place.fixed(left - 6, sy(v) + 4, f"{_num(v, 6)}", anchor="end"))
    axis, sx = _time_axis(lo, hi, left, right, bottom, top, place)
    body += axis
    body.append(svg_text(12, (top + bottom) / 2, "increase since window start", anchor="middle",
                      extra=f' transform="rotate(-90 12 {(top + bottom) / 2})"'))
    points = points.assign(_t=times)
    for k, (keys, grp) in enumerate(points.groupby(["node", "component", "name"], sort=False, dropna=False)):
        color = PALETTE[k % len(PALETTE)]
        xs = [sx(t) for t in grp["_t"]]
        ys = [sy(float(v)) for v in grp["cumulative"]]
        path = f"M{_n(xs[0])} {_n(ys[0])}" + "".join(f"H{_n(x)}V{_n(y)}" for x, y in zip(xs[1:], ys[1:]))
        name = " ".join(str(x) for x in keys if isinstance(x, str) and x)
        span = f"{grp['_t'].iloc[0]:%Y-%m-%d %H:%M} to {grp['_t'].iloc[-1]:%Y-%m-%d %H:%M}"
        grew = float(grp["cumulative"].iloc[-1])
        body.append(f'<path d="{path}" fill="none" stroke="{color}" stroke-width="1.6">'
                    f'{tip(f"{name}: +{_num(grew)} ({span})")}</path>')
        body.append(f'<rect x="{left + 10}" y="{top + 4 + 14 * k}" width="14" height="3" fill="{color}">'
                    f'{tip(name)}</rect>')
        body.append(svg_text(left + 28, top + 9 + 14 * k, name, 48, extra=' style="font-size:10px"'))
    return svg(height, body, "counter growth")


def timeline_svg(intervals, since, now) -> str | None:
    """Drained intervals per node (the nodes drained longest first); still drained in red."""
    if intervals is None or not len(intervals):
        return None
    lo, hi = _utc(since), _utc(now)
    if hi <= lo:
        return None
    rows: dict[str, list[tuple[datetime, datetime, bool, str]]] = {}
    hours: dict[str, float] = {}
    for node, start, end, still, reason in zip(intervals["node"], intervals["start"], intervals["end"],
                                               intervals["open"], intervals["reason"]):
        s, e = max(_utc(start), lo), min(_utc(end), hi)
        rows.setdefault(str(node), []).append((s, e, bool(still), "" if reason is None else str(reason)))
        hours[str(node)] = hours.get(str(node), 0.0) + (_utc(end) - s).total_seconds()
    order = sorted(hours, key=lambda n: (-hours[n], n))[:MAX_TIMELINE_NODES]
    left, right, top, row = 170, WIDTH - 20, 30, 18
    bottom = top + row * len(order) + 6
    place = Placer((0, 0, WIDTH, bottom + 26))
    for i, node in enumerate(order):
        place.boxes.append(text_box(left - 6, top + row * i + 13, label(node, 30), 10, "end"))
    body, sx = _time_axis(lo, hi, left, right, bottom, top, place)
    body.append(svg_text(left, 16, f"drained (orange: resumed since, red: still drained); the {len(order)} nodes "
                                f"drained longest of {len(hours)}", 100))
    for i, node in enumerate(order):
        y = top + row * i
        body.append(svg_text(left - 6, y + 13, node, 30, anchor="end", extra=' style="font-size:10px"'))
        for s, e, still, reason in rows[node]:
            if e < s:
                continue
            width = max(sx(e) - sx(s), 1.5)
            until = "still drained" if still else f"to {e:%Y-%m-%d %H:%M}"
            body.append(f'<rect x="{_n(sx(s))}" y="{y + 3}" width="{_n(width)}" height="13" '
                        f'fill="{"#c0392b" if still else "#e67e22"}">'
                        f'{tip(f"{node}: drained {s:%Y-%m-%d %H:%M} {until}: {reason}")}</rect>')
    return svg(bottom + 26, body, "drain timeline")


def _num(v: Any, digits: int = 4) -> str:
    from .human import num

    return num(v, digits)


def _hours(h: float) -> str:
    return f"{h:.0f} h" if h >= 1 else f"{h * 60:.0f} min"


def fleet_days_svg(days, states: Sequence[str], labels: dict, colors: dict) -> str | None:
    """The fleet state per day as stacked bars (one per UTC day, ``days``: a frame with ``day`` and one
    count column per state), a legend and a hover title on every segment."""
    if days is None or not len(days):
        return None
    left, right, top, bottom = 56, WIDTH - 20, 34, 214
    n = len(days)
    totals = days[list(states)].sum(axis=1).to_numpy()
    ymax = float(max(totals.max(), 1))
    ticks = nice_ticks(0.0, ymax, 5)
    sy = _Scale(0.0, max([ymax] + ticks), bottom, top)
    slot = (right - left) / n
    width = max(slot * 0.8, 1.0)
    body: list[str] = []
    place = Placer((0, 0, WIDTH, bottom + 30))
    x = left
    for s in states:  # the legend, in one row, each entry where the last one ended
        if s == "no_run_yet" and s in days and not int(days[s].sum()):
            continue  # only a partial day has it
        last = f"{labels[s]}: {int(days[s].iloc[-1]):,} nodes on {days['day'].iloc[-1]:%Y-%m-%d}"
        body.append(f'<rect x="{_n(x)}" y="8" width="12" height="12" fill="{colors[s]}">{tip(last)}</rect>')
        body.append(place.fixed(x + 16, 18, labels[s], 40))
        x = place.boxes[-1][2] + 14
    for v in ticks:
        body.append(f'<line x1="{left}" y1="{_n(sy(v))}" x2="{right}" y2="{_n(sy(v))}" stroke="#eaeded"/>')
        body.append(place.fixed(left - 6, sy(v) + 4, f"{v:,.0f}", anchor="end"))
    for k, row in enumerate(days.itertuples(index=False)):
        x0 = left + k * slot + (slot - width) / 2
        base = 0.0
        partial = bool(getattr(row, "partial", False))
        day = f"{row.day:%Y-%m-%d}" + (f" (partial day: {_hours(getattr(row, 'hours', 0.0))} covered)"
                                        if partial else "")
        total = sum(int(getattr(row, s)) for s in states)
        for s in states:
            c = int(getattr(row, s))
            if not c:
                continue
            y1, y0 = sy(base), sy(base + c)
            pale = ' fill-opacity="0.45"' if partial else ""
            body.append(f'<rect x="{_n(x0)}" y="{_n(y0)}" width="{_n(width)}" height="{_n(max(y1 - y0, 0.5))}" '
                        f'fill="{colors[s]}"{pale}>{tip(f"{day}: {labels[s]} {c:,} of {total:,} nodes")}</rect>')
            base += c
    body.append(f'<line x1="{left}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="#566573"/>')
    every = max(1, math.ceil(n / 10))  # at most ~10 date labels (70 px each): never overlapping
    for k in range(0, n, every):
        row = days.iloc[k]
        body.append(place.place([(left + (k + 0.5) * slot, bottom + 16, "middle")], f"{row['day']:%Y-%m-%d}"))
    return svg(bottom + 28, body, "fleet state per day")


def loss_curve_svg(steps: Sequence[int], loss: Sequence[float | None], reference: Sequence[float | None],
                   band: Sequence[float | None], first_bad: int | None = None, title: str = "loss curve") -> str | None:
    """A training run's loss per step (the recorded points, a line and a dot each) against its reference
    curve (dashed) and the tolerance band around it (shaded, where the reference has a value); the step
    that left the band as a red line. Every dot has a hover title (step, loss, reference, band). None
    without a point of the run."""
    pts = [(int(s), float(v)) for s, v in zip(steps, loss) if v is not None and math.isfinite(v)]
    if not pts:
        return None
    refs = [(int(s), float(r), float(b) if b is not None and math.isfinite(b) else 0.0)
            for s, r, b in zip(steps, reference, band) if r is not None and math.isfinite(r)]
    left, right, top, bottom, height = 70, WIDTH - 20, 40, 236, 280
    xs_all = [s for s, _ in pts] + [s for s, _, _ in refs]
    ys_all = [v for _, v in pts] + [r + b for _, r, b in refs] + [r - b for _, r, b in refs]
    x_ticks = nice_ticks(float(min(xs_all)), float(max(xs_all)), 8)
    y_ticks = nice_ticks(min(ys_all), max(ys_all), 5)
    sx = _Scale(float(min(xs_all)), float(max(xs_all)), left, right)
    sy = _Scale(min(ys_all + y_ticks), max(ys_all + y_ticks), bottom, top)
    place = Placer((0, 0, WIDTH, height))
    body: list[str] = []
    body.append(place.fixed(left, 18, title, 80, bold=True, extra=' font-weight="bold"'))
    x = place.boxes[-1][2] + 24
    legend = [("run", PALETTE[0], "2", "")] + ([("reference", "#566573", "2", ' stroke-dasharray="6,3"'),
                                               ("band", "#95a5a6", "8", ' stroke-opacity="0.4"')] if refs else [])
    for name, color, width, extra in legend:
        body.append(f'<line x1="{_n(x)}" y1="14" x2="{_n(x + 22)}" y2="14" stroke="{color}" '
                    f'stroke-width="{width}"{extra}/>')
        body.append(place.fixed(x + 26, 18, name))
        x = place.boxes[-1][2] + 16
    for v in y_ticks:
        body.append(f'<line x1="{left}" y1="{_n(sy(v))}" x2="{right}" y2="{_n(sy(v))}" stroke="#eaeded"/>')
        body.append(place.fixed(left - 6, sy(v) + 4, _num(v, 4), anchor="end"))
    body.append(f'<line x1="{left}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="#566573"/>')
    for v in x_ticks:
        if sx.lo <= v <= sx.hi:
            body.append(f'<line x1="{_n(sx(v))}" y1="{bottom}" x2="{_n(sx(v))}" y2="{bottom + 4}" stroke="#566573"/>')
            body.append(place.place([(sx(v), bottom + 16, "middle")], f"{v:g}"))
    body.append(place.fixed((left + right) / 2, bottom + 32, "step", anchor="middle"))
    body.append(svg_text(12, (top + bottom) / 2, "loss", anchor="middle",
                         extra=f' transform="rotate(-90 12 {(top + bottom) / 2})"'))
    if refs:
        upper = "".join(f"{'M' if k == 0 else 'L'}{_n(sx(s))} {_n(sy(r + b))}" for k, (s, r, b) in enumerate(refs))
        lower = "".join(f"L{_n(sx(s))} {_n(sy(r - b))}" for s, r, b in reversed(refs))
        body.append(f'<path d="{upper}{lower}Z" fill="#95a5a6" fill-opacity="0.25" stroke="none">'
                    f'{tip("the tolerance band around the reference")}</path>')
        line = "".join(f"{'M' if k == 0 else 'L'}{_n(sx(s))} {_n(sy(r))}" for k, (s, r, _) in enumerate(refs))
        body.append(f'<path d="{line}" fill="none" stroke="#566573" stroke-width="1.4" stroke-dasharray="6,3">'
                    f'{tip("the reference curve")}</path>')
    if first_bad is not None and sx.lo <= first_bad <= sx.hi:
        x = sx(first_bad)
        body.append(f'<line x1="{_n(x)}" y1="{top}" x2="{_n(x)}" y2="{bottom}" stroke="#c0392b" stroke-width="1.4">'
                    f'{tip(f"step {first_bad}: the first step outside the band")}</line>')
        body.append(place.place([(x + 4, top + 12, "start"), (x - 4, top + 12, "end")],
                                f"left the band at step {first_bad}", 40, 10, ' style="fill:#c0392b;font-size:10px"'))
    by_ref = {s: (r, b) for s, r, b in refs}
    line = "".join(f"{'M' if k == 0 else 'L'}{_n(sx(s))} {_n(sy(v))}" for k, (s, v) in enumerate(pts))
    body.append(f'<path d="{line}" fill="none" stroke="{PALETTE[0]}" stroke-width="1.8"/>')
    dots = []
    for s, v in pts:
        ref = by_ref.get(s)
        what = f"step {s}: loss {_num(v, 5)}" + (f", reference {_num(ref[0], 5)} ± {_num(ref[1], 3)}" if ref else "")
        color = "#c0392b" if ref and abs(v - ref[0]) > ref[1] else PALETTE[0]
        dots.append(f'<circle cx="{_n(sx(s))}" cy="{_n(sy(v))}" r="2.6" fill="{color}">{tip(what)}</circle>')
    body.append('<g class="loss-points">' + "".join(dots) + "</g>")
    return svg(height, body, title)
