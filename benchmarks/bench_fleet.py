"""Benchmark: the fleet ranking and report over the simulated history of ``fleet_sim.py``, at 1,000 and
10,000 nodes x 90 days: time and peak memory per step, and how they grow.

Steps (each size in its own child process, so each peak RSS is that step's process alone; the child
generates the history first, so every figure includes the generator's frames):

- ``generate``: ``fleet_sim.simulate`` (frames in memory);
- ``ingest``:   the real ``healthcheck history ingest`` path (spool records -> SQLite, rollups kept) for
                the last ``--ingest-days`` days of every node (the whole 90 days at 10,000 nodes is
                ~25 M metric rows: the figure per day is what a nightly ingest costs);
- ``rank``:     ``analysis.fleetrank.rank_fleet`` over the full frames;
- ``report``:   ``summarize_frames(recent=5)`` + ``build_report`` (the report's ranking) + ``render_html``;
- ``tables``:   ``analysis.fleetviews.fleet_tables`` (regressions, TTFF, MTBF, versions).

    .venv/bin/python benchmarks/bench_fleet.py [--nodes 1000 10000] [--days 90] [--ingest-days 1]

Not part of the test run. Prints one line per (size, step) and a growth line per step.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

STEPS = ("generate", "ingest", "rank", "report", "tables")


def _records(frames, since):
    """The frames' runs after ``since`` as spool run records (what the hooks write)."""
    import pandas as pd

    runs = frames["runs"][frames["runs"]["started_at"] >= since]
    ids = set(runs["run_id"])
    met = frames["metrics"][frames["metrics"]["run_id"].isin(ids)]
    res = frames["results"][frames["results"]["run_id"].isin(ids)]
    by_run: dict[str, list] = {}
    for r in met.itertuples(index=False):
        by_run.setdefault(r.run_id, []).append(r)
    flagged: dict[str, list] = {}
    for r in res.itertuples(index=False):
        flagged.setdefault(r.run_id, []).append(r)
    out = []
    for run in runs.itertuples(index=False):
        findings: dict[tuple, dict] = {}
        for m in by_run.get(run.run_id, []):
            key = (m.check, m.component)
            f = findings.setdefault(key, {"check": m.check, "component": m.component, "status": "pass",
                                          "message": "ok", "metrics": {}})
            f["metrics"][m.name] = float(m.value)
        for r in flagged.get(run.run_id, []):
            f = findings.setdefault((r.check, r.component), {"check": r.check, "component": r.component,
                                                             "metrics": {}})
            f["status"], f["message"] = r.status, r.message
        t = pd.Timestamp(run.started_at).isoformat().replace("+00:00", "Z")
        out.append({"kind": "run", "record_id": f"rec-{run.run_id}", "run_id": run.run_id, "node": run.node,
                    "context": run.context, "job_id": None, "started_at": t, "duration_s": float(run.duration_s),
                    "status": run.status, "config_hash": "c0ffee", "tool_version": "0.1.0",
                    "results": list(findings.values())})
    return out


def child(nodes: int, days: int, step: str, ingest_days: int) -> dict:
    import pandas as pd

    from fleet_sim import simulate

    t = time.perf_counter()
    sim = simulate(nodes, days)
    gen_s = time.perf_counter() - t
    f = sim.frames
    out = {"nodes": nodes, "step": step, "generate_s": gen_s, "metric_rows": len(f["metrics"]),
           "runs": len(f["runs"]),
           "frames_mib": sum(df.memory_usage(deep=True).sum() for df in f.values()) / 2**20}
    t = time.perf_counter()
    if step == "ingest":
        from healthcheck.history import migrations
        from healthcheck.history.db import make_engine, resolve_url
        from healthcheck.history.ingest import ingest

        recs = _records(f, sim.now - pd.Timedelta(days=ingest_days))
        with tempfile.TemporaryDirectory() as tmp:
            spool = Path(tmp, "spool")
            spool.mkdir()
            with open(spool / "records.jsonl", "w", encoding="utf-8") as fh:
                for rec in recs:
                    fh.write(json.dumps(rec, separators=(",", ":")) + "\n")
            engine = make_engine(resolve_url(f"sqlite:///{tmp}/h.sqlite", env={}))
            migrations.require_current(engine, create=True)
            t = time.perf_counter()
            ingest([spool], engine)
            engine.dispose()
        out["ingested_runs"] = len(recs)
        out["ingested_metric_rows"] = sum(len(r["metrics"]) for rec in recs for r in rec["results"])
    elif step == "rank":
        from healthcheck.analysis.fleetrank import rank_fleet

        ranked = rank_fleet(metrics=f["metrics"], results=f["results"], runs=f["runs"], actions=f["actions"],
                            now=sim.now, gpu_model=sim.gpu_model, rack=sim.rack)
        out["top_are_planted"] = set(ranked["node"].head(len(sim.planted))) == sim.planted
    elif step == "report":
        from healthcheck.report import build_report, render_html
        from healthcheck.report.summary import summarize_frames

        sm = summarize_frames(f, sim.since, sim.now, recent=5)
        rep = build_report(sm, sim.since, sim.now, gpu_model=sim.gpu_model, topology=sim.topology)
        out["build_s"] = time.perf_counter() - t
        page = render_html(rep)
        out["html_bytes"] = len(page)
        out["top_are_planted"] = {r.node for r in rep.risks[:len(sim.planted)]} == sim.planted
    elif step == "tables":
        from healthcheck.analysis.fleetviews import fleet_tables

        tabs = fleet_tables(metrics=f["metrics"], results=f["results"], runs=f["runs"], actions=f["actions"],
                            versions=sim.versions, now=sim.now)
        out["rows"] = {k: len(v) for k, v in tabs.items()}
    out["step_s"] = time.perf_counter() - t
    out["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, nargs="+", default=[1000, 10_000])
    ap.add_argument("--days", type=int, default=90)
    ap.add_argument("--ingest-days", type=int, default=1)
    ap.add_argument("--steps", nargs="+", default=list(STEPS), choices=STEPS)
    ap.add_argument("--child", nargs=2, metavar=("NODES", "STEP"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(int(args.child[0]), args.days, args.child[1], args.ingest_days)))
        return
    figures: dict[tuple[int, str], dict] = {}
    for nodes in args.nodes:
        for step in args.steps:
            proc = subprocess.run([sys.executable, __file__, "--child", str(nodes), step, "--days", str(args.days),
                                   "--ingest-days", str(args.ingest_days)], capture_output=True, text=True,
                                  env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
            if proc.returncode != 0:
                raise SystemExit(f"{nodes} nodes, {step}: exit {proc.returncode}: {proc.stderr[-3000:]}")
            r = json.loads(proc.stdout.strip().splitlines()[-1])
            figures[(nodes, step)] = r
            extra = {k: v for k, v in r.items() if k not in ("nodes", "step", "step_s", "peak_rss_mib", "generate_s",
                                                             "metric_rows", "runs", "frames_mib")}
            took = r["generate_s"] if step == "generate" else r["step_s"]
            print(f"{nodes:>6,} nodes  {step:<8} {took:7.2f} s  peak RSS {r['peak_rss_mib']:7,.0f} MiB  "
                  f"({r['metric_rows']:,} metric rows, {r['runs']:,} runs, frames {r['frames_mib']:,.0f} MiB) "
                  f"{json.dumps(extra)}", flush=True)
    if len(args.nodes) == 2:
        a, b = args.nodes
        for step in args.steps:
            x, y = figures[(a, step)], figures[(b, step)]
            tx = x["generate_s"] if step == "generate" else x["step_s"]
            ty = y["generate_s"] if step == "generate" else y["step_s"]
            print(f"growth {step:<8} x{b / a:g} nodes: time x{ty / tx:.1f}, peak RSS x{y['peak_rss_mib'] / x['peak_rss_mib']:.1f}")


if __name__ == "__main__":
    main()
