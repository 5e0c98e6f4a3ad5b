"""The readiness report's "Training readiness" section (issue 34 point 5): the acceptance figures of the
latest training smoke test of the window (``burnin.train.*``, docs/train.md), the latest burn-in's
collective results (``burnin.nccl``) and the cluster's mean time to first failure, each with its
measured value, threshold, verdict and the run it comes from, and one ready/blocked line.

Where each figure comes from (the history's results and metrics, as the train phase records them in the
burn-in job's run record, context ``burnin-job``):

- convergence: ``burnin.train.convergence`` (status; metrics ``band_used``, ``first_bad_step``);
- the loss curve: the same finding's ``loss@NNNNNNN`` (the run's loss at step N, at most 32 steps, the
  first and the last always) and ``loss_ref@NNNNNNN`` (the reference's at those steps), ``band_rel`` and
  ``band_abs`` (the band: max(band_abs, band_rel x reference)); read back by
  ``burnin.train.judge.curve_from_metrics`` (the names strictly, ``parse_curve_name``);
- checkpoint integrity: ``burnin.train.resume`` (status; metric ``deviation_rel``, limit 0.1 %);
- recovery time: ``burnin.train.resume`` metric ``recovery_s`` (recorded, no threshold);
- throughput: ``burnin.train.throughput`` per rank (metrics ``tokens_per_s``, and with a reference
  ``tokens_per_s_ref``, ``tokens_per_s_floor``, ``pct_of_reference``); the lowest rank shown, as "N
  tokens/s per GPU, P % of the reference (≥ F %)". Rows recorded before those metrics existed (the train
  phase of 2026-12-06) have the floor in the message only: it is read back from there for them;
- SM activity: ``burnin.train.activity`` (``sm_activity_pct`` per GPU, ``sm_activity_spread_pct``,
  ``source_dcgm`` 1: DCGM field 1002, 0: NVML);
- collective efficiency: the latest run with cross-node ``burnin.nccl`` results (one row per collective,
  all-to-all included where it ran; metrics ``busbw_gbps``, ``efficiency_pct``);
- mean time to first failure of the cluster: the report's per-node reliability table (the window's
  runs): node-hours observed up to each node's first failure (or the window's end) over the first
  failures, divided by the number of nodes (any node's failure stops a job spanning the cluster);
- checkpoint write throughput: ``burnin.train.checkpoint`` metric ``checkpoint_mb_s`` (recorded only).

The loss curve is drawn (HTML: inline SVG, ``plots.loss_curve_svg``), stated as a sentence (Markdown,
``curve_note``) and given as data (JSON ``curve``: steps, loss, reference, band). A run recorded before the
curve went into the history (no ``loss@`` metric) has no curve: ``curve`` is null and ``curve_note`` says
so (:data:`CURVE_NOTE`).

Two producers, one reduction, as report/commissioning.py: :func:`from_frames` and :func:`load_sql`;
the MTTF figure and the verdict are added by :func:`finish` (build_report) from the summary's reliability
table. JSON (``Report.to_dict()["training"]``) has its own ``schema_version`` (:data:`SCHEMA_VERSION`).
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import pandas as pd

SCHEMA_VERSION = 1
TRAIN_PREFIX = "burnin.train"
CONVERGENCE = "burnin.train.convergence"
RESUME = "burnin.train.resume"
THROUGHPUT = "burnin.train.throughput"
ACTIVITY = "burnin.train.activity"
CHECKPOINT = "burnin.train.checkpoint"
RUN = "burnin.train"
NCCL = "burnin.nccl"
RESUME_LIMIT_PCT = 0.1      # data/train.toml resume_deviation_rel (the judge's message names it too)
ACTIVITY_MIN_PCT = 70.0
ACTIVITY_SPREAD_PCT = 5.0
MTTF_MIN_H = 24.0
THRESHOLDED = ("convergence", "checkpoint_integrity", "throughput", "sm_activity", "collective", "mttf")
NOT_MEASURED = "not measured"
CURVE_NOTE = ("no loss-curve plot: the history holds no per-step loss for this run (recorded before the train "
              "phase put the curve in its metrics; the burn-in's JSON record keeps it, train.full.loss)")
NO_RUN_NOTE = "no loss curve: no training run in the window"
_ORDER = {"fail": 0, "error": 1, "warn": 2, "skip": 3, "pass": 4}
_FLOOR = re.compile(r"floor ([0-9][0-9.,eE+-]*)")
_LIMIT = re.compile(r"limit ([0-9.]+) %")


@dataclass
class Figure:
    key: str
    label: str
    value: float | None      # the measured figure in ``unit`` (None: not measured)
    unit: str
    measured: str            # what was measured, for people
    threshold: str           # "" when recorded only
    verdict: str             # pass | fail | warn | skip | error | not measured | recorded
    detail: str = ""         # the finding's message
    run_id: str = ""
    job_id: str = ""
    at: str = ""             # the run's start, ISO-8601 UTC
    node: str = ""           # the batch host that recorded it


@dataclass
class Training:
    figures: list[Figure] = field(default_factory=list)
    run: dict[str, str] = field(default_factory=dict)   # the training run: run_id, job_id, at, node
    verdict: str = NOT_MEASURED                          # ready | blocked | incomplete | not measured
    line: str = ""
    curve_note: str = NO_RUN_NOTE
    curve: dict[str, Any] | None = None                  # the latest run's loss curve (see :func:`_curve`)

    @property
    def measured(self) -> bool:
        return bool(self.run)

    def to_dict(self) -> dict[str, Any]:
        return {"schema_version": SCHEMA_VERSION, "verdict": self.verdict, "line": self.line,
                "run": dict(self.run), "figures": [asdict(f) for f in self.figures],
                "curve": _curve_json(self.curve),
                "curve_note": self.curve_note}


def _iso(ts: Any) -> str:
    return pd.Timestamp(ts).tz_convert("UTC").strftime("%Y-%m-%dT%H:%M:%SZ") if pd.notna(ts) else ""


def _text(value: Any) -> str:
    return "" if value is None or (isinstance(value, float) and value != value) else str(value)


def _worst(statuses: Any) -> str:
    return min((str(s) for s in statuses), key=lambda s: _ORDER.get(s, 5), default="")


def _g(value: float) -> str:
    from .human import num

    return num(value)


def _floor(text: str) -> str:
    try:
        return _g(float(text.replace(",", "")))
    except ValueError:
        return text


def _pct(value: float) -> str:
    """A percentage for people: one decimal at most, trailing zeros dropped (95, 94.7)."""
    return f"{value:.1f}".rstrip("0").rstrip(".")


def _latest_run(rows: pd.DataFrame) -> str | None:
    if rows.empty:
        return None
    order = rows.assign(run_id=rows["run_id"].astype(str)).sort_values(["started_at", "run_id"], kind="stable")
    return str(order["run_id"].iloc[-1])


def _metric(met: pd.DataFrame, check: str, name: str) -> list[tuple[str, float]]:
    rows = met[(met["check"] == check) & (met["name"] == name)]
    return [(_text(r.component), float(r.value)) for r in rows.itertuples(index=False) if pd.notna(r.value)]


def _from(run: dict[str, str]) -> dict[str, str]:
    return {"run_id": run.get("run_id", ""), "job_id": run.get("job_id", ""), "at": run.get("at", ""),
            "node": run.get("node", "")}


def _train_figures(res: pd.DataFrame, met: pd.DataFrame, run: dict[str, str]) -> list[Figure]:
    src = _from(run)
    out: list[Figure] = []

    def rows(check: str) -> pd.DataFrame:
        return res[res["check"] == check]

    def message(r: pd.DataFrame) -> str:
        bad = r.sort_values("status", key=lambda c: c.map(lambda s: _ORDER.get(s, 5)))
        return _text(bad["message"].iloc[0]) if len(bad) else ""

    # convergence
    r = rows(CONVERGENCE)
    if r.empty:
        out.append(Figure("convergence", "convergence", None, "", "", "loss within the reference band",
                          NOT_MEASURED, **src))
    else:
        status = _worst(r["status"])
        first = _metric(met, CONVERGENCE, "first_bad_step")
        used = _metric(met, CONVERGENCE, "band_used")
        if first:
            value, shown = first[0][1], f"left the band at step {int(first[0][1])}"
        elif used:
            value, shown = used[0][1] * 100, f"within the band (at most {used[0][1] * 100:.0f} % of it used)"
        else:
            value, shown = None, {"skip": "not judged: no reference curve"}.get(status, status)
        rel, abs_ = _metric(met, CONVERGENCE, "band_rel"), _metric(met, CONVERGENCE, "band_abs")
        band = (f"max({_g(abs_[0][1])}, {_pct(100 * rel[0][1])} % of the reference)" if rel and abs_ else
                "max(0.02, 2 % of the reference)")  # the packaged tolerances: rows before the band was recorded
        out.append(Figure("convergence", "convergence", value, "% of band" if not first else "step", shown,
                          f"every step within {band} of the reference curve", status, message(r), **src))
    # checkpoint integrity and recovery time
    r = rows(RESUME)
    dev = _metric(met, RESUME, "deviation_rel")
    limit = _LIMIT.search(message(r)) if len(r) else None
    limit_pct = float(limit.group(1)) if limit else RESUME_LIMIT_PCT
    if r.empty:
        out.append(Figure("checkpoint_integrity", "checkpoint integrity", None, "%", "",
                          f"resume deviation < {limit_pct:g} %", NOT_MEASURED, **src))
    else:
        value = dev[0][1] * 100 if dev else None
        shown = f"resume deviation {value:.3g} %" if value is not None else "no deviation recorded"
        out.append(Figure("checkpoint_integrity", "checkpoint integrity", value, "%", shown,
                          f"resume deviation < {limit_pct:g} %", _worst(r["status"]), message(r), **src))
    rec = _metric(met, RESUME, "recovery_s")
    out.append(Figure("recovery", "recovery time", rec[0][1] if rec else None, "s",
                      f"{rec[0][1]:.1f} s from the kill to the first step after the restart" if rec else "",
                      "", "recorded" if rec else NOT_MEASURED, message(r) if len(r) else "", **src))
    # throughput: the lowest rank
    r = rows(THROUGHPUT)
    tps = _metric(met, THROUGHPUT, "tokens_per_s")
    if r.empty or not tps:
        out.append(Figure("throughput", "throughput", None, "tokens/s per GPU", "",
                          "≥ 90 % of the reference", _worst(r["status"]) if len(r) else NOT_MEASURED,
                          message(r) if len(r) else "", **src))
    else:
        comp, low = min(tps, key=lambda cv: cv[1])
        status = _worst(r["status"])
        mine = {name: dict(_metric(met, THROUGHPUT, name)).get(comp)
                for name in ("pct_of_reference", "tokens_per_s_ref", "tokens_per_s_floor")}
        pct, ref, floor_v = mine["pct_of_reference"], mine["tokens_per_s_ref"], mine["tokens_per_s_floor"]
        floor_pct = 100 * floor_v / ref if ref and floor_v is not None else None
        which = f"lowest: {comp or 'rank'} of {len(tps)} GPU(s)"
        if pct is not None and floor_pct is not None:
            shown = f"{_g(low)} tokens/s per GPU, {_pct(pct)} % of the reference (≥ {_pct(floor_pct)} %); {which}"
            thr = f"≥ {_pct(floor_pct)} % of the reference {_g(ref)} tokens/s (floor {_g(floor_v)} tokens/s)"
        else:  # no reference (WARN), or a row recorded before the reference's metrics: its message has the floor
            floor = _FLOOR.search(message(r))
            shown = f"{_g(low)} tokens/s per GPU ({which})"
            thr = "≥ 90 % of the reference" + (f" (floor {_floor(floor.group(1))} tokens/s)" if floor else "")
            if status == "warn":
                thr += ": no reference, not judged"
        out.append(Figure("throughput", "throughput", low, "tokens/s per GPU", shown, thr, status, message(r), **src))
    # SM activity
    r = rows(ACTIVITY)
    act = _metric(met, ACTIVITY, "sm_activity_pct")
    spread = _metric(met, ACTIVITY, "sm_activity_spread_pct")
    dcgm = _metric(met, ACTIVITY, "source_dcgm")
    source = ("DCGM (field 1002, SM active)" if dcgm[0][1] >= 0.5 else "NVML utilisation (coarser)") if dcgm else ""
    thr = f"mean ≥ {ACTIVITY_MIN_PCT:g} % per GPU, spread < {ACTIVITY_SPREAD_PCT:g} points"
    if r.empty or not act:
        status = _worst(r["status"]) if len(r) else NOT_MEASURED
        out.append(Figure("sm_activity", "SM activity", None, "%",
                          "not sampled (a CPU run, or neither DCGM nor NVML answered)" if status == "skip" else "",
                          thr, status, message(r) if len(r) else "", **src))
    else:
        comp, low = min(act, key=lambda cv: cv[1])
        shown = f"lowest mean {low:.1f} % ({comp})" + (f", spread {spread[0][1]:.1f} points" if spread else "") + \
            (f"; source {source}" if source else "")
        out.append(Figure("sm_activity", "SM activity", low, "%", shown, thr, _worst(r["status"]), message(r), **src))
    # checkpoint write throughput
    ck = _metric(met, CHECKPOINT, "checkpoint_mb_s")
    r = rows(CHECKPOINT)
    out.append(Figure("checkpoint_write", "checkpoint write throughput", ck[0][1] if ck else None, "MB/s",
                      f"{_g(ck[0][1])} MB/s to the shared filesystem" if ck else "", "",
                      "recorded" if ck else NOT_MEASURED, message(r) if len(r) else "", **src))
    err = rows(RUN)
    if len(err) and _worst(err["status"]) in ("error", "fail"):  # the test could not run: its message says why
        out.insert(0, Figure("run", "training smoke test", None, "", "did not complete", "completes",
                             _worst(err["status"]), message(err), **src))
    return out


def _collective(res: pd.DataFrame, met: pd.DataFrame, runs: dict[str, dict[str, str]]) -> list[Figure]:
    nccl = res[(res["check"] == NCCL) & ~res["component"].map(_text).str.endswith("@node")]
    latest = _latest_run(nccl)
    if latest is None:
        return [Figure("collective", "collective efficiency", None, "%", "", "the burn-in's NCCL reference",
                       NOT_MEASURED)]
    src = _from(runs.get(latest, {"run_id": latest}))
    rows = nccl[nccl["run_id"].astype(str) == latest]
    m = met[(met["run_id"].astype(str) == latest) & (met["check"] == NCCL)]
    out = []
    for r in rows.sort_values("component", key=lambda c: c.map(_text)).itertuples(index=False):
        comp = _text(r.component)
        mine = m[m["component"].map(_text) == comp]
        vals = {str(x.name): float(x.value) for x in mine.itertuples(index=False) if pd.notna(x.value)}
        eff, bw = vals.get("efficiency_pct"), vals.get("busbw_gbps")
        parts = ([f"busbw {_g(bw)} GB/s"] if bw is not None else []) + \
            ([f"{eff:.1f} % of line rate"] if eff is not None else [])
        msg = _text(r.message)
        thr = msg.split(" GB/s", 1)[1].strip(" ;,") if " GB/s" in msg else ""  # "within/below reference ..."
        out.append(Figure("collective", f"collective efficiency: {comp.split('@', 1)[0]}",
                          eff if eff is not None else bw, "%" if eff is not None else "GB/s",
                          ", ".join(parts) or "no figure", thr or "the burn-in's NCCL reference", str(r.status), msg,
                          **src))
    return out


def from_frames(results: pd.DataFrame | None, metrics: pd.DataFrame | None,
                runs: pd.DataFrame | None = None) -> Training:
    """The section's figures (all but the MTTF; see :func:`finish`) from the window's results, metrics and
    runs frames (``load_frames`` columns; ``runs`` gives the job ids)."""
    if results is None or results.empty:
        return Training()
    res = results.assign(check=results["check"].astype(str), status=results["status"].astype(str),
                         run_id=results["run_id"].astype(str))
    res = res[res["check"].str.startswith(TRAIN_PREFIX) | (res["check"] == NCCL)]
    if res.empty:
        return Training()
    met = metrics if metrics is not None else pd.DataFrame(columns=["run_id", "check", "component", "name", "value"])
    met = met.assign(check=met["check"].astype(str), name=met["name"].astype(str), run_id=met["run_id"].astype(str))
    info: dict[str, dict[str, str]] = {}
    for r in res.drop_duplicates("run_id").itertuples(index=False):
        info[r.run_id] = {"run_id": r.run_id, "job_id": "", "at": _iso(r.started_at), "node": str(r.node)}
    if runs is not None and len(runs):
        for r in runs[runs["run_id"].astype(str).isin(set(info))].itertuples(index=False):
            info[str(r.run_id)]["job_id"] = _text(r.job_id)
    train = res[res["check"].str.startswith(TRAIN_PREFIX)]
    latest = _latest_run(train)
    figures: list[Figure] = []
    run: dict[str, str] = {}
    curve = None
    if latest is not None:
        run = info[latest]
        mine = met[met["run_id"] == latest]
        figures = _train_figures(train[train["run_id"] == latest], mine, run)
        curve = _curve(mine, _worst(train.loc[(train["run_id"] == latest) & (train["check"] == CONVERGENCE),
                                              "status"]))
    note = NO_RUN_NOTE if latest is None else curve_sentence(curve, run) if curve else CURVE_NOTE
    return Training(figures + _collective(res, met, info), run, curve_note=note, curve=curve)


def _curve(met: pd.DataFrame, status: str) -> dict[str, Any] | None:
    """The loss curve the convergence finding recorded (``loss@``/``loss_ref@`` metrics): steps (the
    union of the run's and the reference's points), loss and reference (None where not recorded), band
    (the half-width max(band_abs, band_rel x reference) where both tolerances and the reference are
    there), first_bad_step, the convergence status; None when the run recorded no point of its own."""
    from ..burnin.train.judge import curve_from_metrics

    rows = met[met["check"] == CONVERGENCE]
    values: dict[str, float] = {}
    for name, value in zip(rows["name"], rows["value"]):
        if pd.notna(value):
            values.setdefault(str(name), float(value))
    run, ref = curve_from_metrics(values)
    if not run:
        return None
    steps = sorted(set(run) | set(ref))
    rel, abs_ = values.get("band_rel"), values.get("band_abs")
    band = [round(max(abs_, rel * ref[s]), 6) if s in ref and rel is not None and abs_ is not None else None
            for s in steps]
    first = values.get("first_bad_step")
    return {"steps": steps, "loss": [run.get(s) for s in steps], "reference": [ref.get(s) for s in steps],
            "band": band, "band_rel": rel, "band_abs": abs_,
            "first_bad_step": int(first) if first is not None else None, "status": status}


def _curve_json(curve: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if curve is None else {k: (list(v) if isinstance(v, list) else v) for k, v in curve.items()}


def curve_sentence(curve: dict[str, Any], run: dict[str, str] | None = None) -> str:
    """The curve in one line (Markdown states it so; no trailing full stop): every recorded step as
    ``step: loss/reference`` (``step: loss`` without a reference), the band, and where the run left it."""
    run = run or {}
    who = f"job {run['job_id']}" if run.get("job_id") else f"run {run.get('run_id', '')}".strip()
    steps, loss, ref = curve["steps"], curve["loss"], curve["reference"]
    has_ref = any(x is not None for x in ref)
    points = ", ".join(f"{s}: {_g(round(v, 4)) if v is not None else '-'}"
                       + (f"/{_g(round(r, 4)) if r is not None else '-'}" if has_ref else "")
                       for s, v, r in zip(steps, loss, ref))
    band = ""
    if curve.get("band_rel") is not None and curve.get("band_abs") is not None:
        band = f"; band ±max({_g(curve['band_abs'])}, {_pct(100 * curve['band_rel'])} % of the reference)"
    if curve.get("first_bad_step") is not None:
        end = f"; left the band at step {curve['first_bad_step']}"
    elif not has_ref:
        end = "; no reference curve for this configuration"
    elif curve.get("status") == "pass":
        end = "; within the band at every step"
    elif curve.get("status") == "fail":
        end = "; failed (the convergence figure says why)"
    else:
        end = f"; {curve.get('status') or 'not judged'}"
    what = "step: loss/reference" if has_ref else "step: loss"
    return (f"loss curve ({who}; {len(steps)} of {max(steps):,} steps recorded, as {what}): {points}{band}{end}")


def load_sql(conn, sqlite: bool, since: Any, now: Any) -> Training:
    """The same section from the database: only the ``burnin.train*`` and ``burnin.nccl`` rows of the window
    and the runs they belong to."""
    from sqlalchemy import or_, select

    from ..history import schema
    from .sqlwindow import result_checks, window_frame

    def frame(table, columns, where):
        return window_frame(conn, sqlite, table, columns, where, since, now)

    r, m, ru = schema.results, schema.metrics, schema.runs
    node_scope = r.c.component.like("%@node")
    checks = result_checks(conn, lambda c: c.startswith(TRAIN_PREFIX) or c == NCCL)  # through the check index
    if not checks:
        return Training()
    results = frame(r, ["run_id", "node", "started_at", "check", "component", "status", "message"],
                    r.c.check.in_(checks) & or_(r.c.check.startswith(TRAIN_PREFIX, autoescape=True),
                        (r.c.check == NCCL) & (r.c.component.is_(None) | ~node_scope)))
    if results.empty:
        return Training()
    # only the two runs shown: the latest training run and the latest cross-node collective run
    checks = results["check"].astype(str)
    ids = sorted({i for i in (_latest_run(results[checks.str.startswith(TRAIN_PREFIX)]),
                              _latest_run(results[checks == NCCL])) if i is not None})
    results = results[results["run_id"].astype(str).isin(ids)]
    metrics = frame(m, ["run_id", "node", "started_at", "check", "component", "name", "value"],
                    m.c.run_id.in_(ids) & or_(m.c.check.startswith(TRAIN_PREFIX, autoescape=True), m.c.check == NCCL))
    runs = pd.DataFrame.from_records(
        [tuple(x) for x in conn.execute(select(ru.c.run_id, ru.c.job_id).where(ru.c.run_id.in_(ids))).all()],
        columns=["run_id", "job_id"])
    return from_frames(results, metrics, runs)


def mttf_figure(reliability: pd.DataFrame | None, now: Any) -> Figure:
    """The cluster's mean time to first failure from the per-node reliability table (node, ttff_s,
    observed_s): exposure = each node's hours up to its first failure (or the window's end), per-node
    MTTF = exposure / first failures, the cluster's = that / nodes (any node's failure stops a job that
    spans the cluster). Without a failure, a lower bound (exposure / nodes): judged only once it reaches
    the threshold."""
    thr = f"> {MTTF_MIN_H:g} h"
    if reliability is None or reliability.empty:
        return Figure("mttf", "mean time to first failure (cluster)", None, "h", "", thr, NOT_MEASURED)
    rel = reliability
    failed = rel["ttff_s"].notna()
    exposure_h = float(rel["ttff_s"].where(failed, rel["observed_s"]).clip(lower=0).sum()) / 3600
    nodes, firsts = int(len(rel)), int(failed.sum())
    from .human import duration_h

    if firsts:
        per_node = exposure_h / firsts
        value = per_node / nodes
        shown = (f"{duration_h(value)} ({nodes:,} nodes; per node {duration_h(per_node)}: {firsts:,} first "
                 f"failure(s) in {_g(round(exposure_h))} node-hours)")
        verdict = "pass" if value > MTTF_MIN_H else "fail"
    else:
        value = exposure_h / nodes
        shown = f"no failure in {_g(round(exposure_h))} node-hours: more than {duration_h(value)} ({nodes:,} nodes)"
        verdict = "pass" if value > MTTF_MIN_H else "warn"
        if verdict == "warn":
            shown += ": not enough history to judge"
    return Figure("mttf", "mean time to first failure (cluster)", round(value, 3), "h", shown, thr, verdict,
                  at=_iso(pd.Timestamp(now)))


def finish(t: Training | None, reliability: pd.DataFrame | None, now: Any) -> Training:
    """The section with the MTTF figure and the ready/blocked line (build_report)."""
    t = t if t is not None else Training()
    figures = [f for f in t.figures if f.key != "mttf"] + [mttf_figure(reliability, now)]
    if not t.measured:
        return replace(t, figures=figures, verdict=NOT_MEASURED,
                       line="not measured: no training smoke test (burnin.train) in the window: run `healthcheck "
                            "burnin train` (or a burn-in with the train phase) before calling the cluster ready")
    judged = [f for f in figures if f.key in THRESHOLDED or f.key == "run"]
    failed = [f.label for f in judged if f.verdict in ("fail", "error")]
    open_ = [f.label for f in judged if f.verdict not in ("pass", "fail", "error")]
    from .human import when_utc

    when = when_utc(t.run["at"]) if t.run.get("at") else ""
    job = f"job {t.run['job_id']}" if t.run.get("job_id") else f"run {t.run.get('run_id', '')}"
    if failed:
        verdict, line = "blocked", f"blocked: {', '.join(failed)} failed ({job}, {when})"
    elif open_:
        verdict, line = "incomplete", (f"not ready yet: nothing failed, but {', '.join(open_)} not judged "
                                       f"({job}, {when})")
    else:
        verdict, line = "ready", f"ready: every acceptance figure passed ({job}, {when})"
    return replace(t, figures=figures, verdict=verdict, line=line)


HEADERS = ["figure", "measured", "threshold", "verdict", "run (job, time)"]


def _source(f: Figure) -> str:
    from .human import when

    if not f.run_id and not f.at:
        return ""
    who = f"job {f.job_id}" if f.job_id else (f"run {f.run_id}" if f.run_id else "the window's runs")
    return f"{who}, {when(f.at)}" if f.at else who


def _verdict_text(f: Figure) -> str:
    return "recorded (no threshold)" if f.verdict == "recorded" else f.verdict


def rows(t: Training) -> list[list[str]]:
    """The table's rows as text: figure, measured, threshold, verdict, run."""
    return [[f.label, f.measured or ("-" if f.verdict == NOT_MEASURED else f.detail), f.threshold or "-",
             _verdict_text(f), _source(f)] for f in t.figures]


def html_part(t: Training | None, plots: bool = True) -> str:
    import html as h

    t = t if t is not None else finish(None, None, None)
    cls = {"ready": "ready-line", "blocked": "fail", NOT_MEASURED: "warn", "incomplete": "warn"}[t.verdict]

    def td(value: str, status: str = "") -> str:
        c = {"fail": "fail", "error": "fail", "warn": "warn", NOT_MEASURED: "warn"}.get(status, "")
        return f'<td class="{c}">{h.escape(value)}</td>' if c else f"<td>{h.escape(value)}</td>"

    head = "".join(f"<th>{h.escape(x)}</th>" for x in HEADERS)
    body = "".join("<tr>" + "".join(td(v, f.verdict if i == 3 else "") for i, v in enumerate(row)) + "</tr>"
                   for f, row in zip(t.figures, rows(t)))
    out = (f'<h2 id="training">Training readiness</h2><p class="{cls}" id="training-verdict"><strong>'
           f"{h.escape(t.line)}</strong></p><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
    svg = None
    if t.curve is not None and plots:
        from .plots import loss_curve_svg

        c = t.curve
        svg = loss_curve_svg(c["steps"], c["loss"], c["reference"], c["band"], c.get("first_bad_step"),
                             "loss per step: the run against its reference")
    if svg:
        out += (f'<h3 id="training-curve">Loss curve</h3><div class="plot" role="img" aria-label="loss curve">{svg}'
                f"</div>")
    return out + f'<p class="muted">{h.escape(t.curve_note)}.</p>'
