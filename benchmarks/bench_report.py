"""Benchmark: the readiness report over 10,000,000 metric rows (issue 4 target: <= 5 s on 2 cores).

Generates a synthetic 30-day history in memory, in the shape ``healthcheck.history.queries.load_frames``
returns (time-ordered rows; key columns categorical): 1,000 nodes x 8 GPUs, 10 metrics per GPU and 6
per node per run (temperatures, power, ECC/NVLink/remap/PCIe counters, bus bandwidth, TFLOPS, IB
symbol errors), 86 metric rows per run -> ~116,000 runs; ~1,160,000 result rows (10 per run; a few
percent warn/fail), 2,000 drain/resume actions. A few nodes carry faults (slow busbw, a hot GPU, a
growing SBE counter) so every section of the report has content.

In-memory mode (default): times build_report, render_html (with the three SVG plots), render_markdown and
render_json over those frames.

``--db`` mode: the same history in a SQLite file (built once with bulk inserts, indexes created after the
rows, then ``healthcheck db rebuild-rollups``; kept under /tmp and reused while its schema and size match,
``--rebuild-db`` to build it again), then ``healthcheck report --db FILE --html out.html`` timed end to end
as a subprocess (interpreter start, imports, database read, analyses, plots, HTML), ``--repeat`` times.

    .venv/bin/python benchmarks/bench_report.py [--rows 10000000] [--repeat 3] [--html out.html]
    .venv/bin/python benchmarks/bench_report.py --db [--db-file /tmp/hc-bench-report-10000000.sqlite] [--rebuild-db]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
import pandas as pd

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

GPU_METRICS = [("gpu.temperature", "temperature_c"), ("gpu.temperature", "mem_temperature_c"),
               ("gpu.power", "power_draw_w"), ("gpu.ecc.corrected", "ecc_corrected_volatile"),
               ("gpu.ecc.uncorrected", "ecc_uncorrected_volatile"), ("gpu.nvlink.errors", "nvlink_crc_errors"),
               ("gpu.row_remap", "remap_correctable"), ("gpu.retired_pages", "retired_pages_total"),
               ("gpu.memory_used", "memory_used_mib"), ("gpu.pcie.replays", "pcie_replay_count")]
NODE_METRICS = [("burnin.nccl", None, "busbw_gbps"), ("burnin.gemm", None, "gemm_tflops"),
                ("ib.port.errors", "mlx5_0/1", "symbol_error"), ("ib.port.errors", "mlx5_1/1", "symbol_error"),
                ("ib.port.errors", "mlx5_2/1", "symbol_error"), ("ib.port.errors", "mlx5_3/1", "symbol_error")]
CHECKS = ["gpu.count", "gpu.temperature", "gpu.ecc.uncorrected", "gpu.row_remap", "gpu.nvlink.state",
          "ib.port.state", "host.mounts", "host.disk", "gpu.xid", "sw.versions"]


def synth(rows: int, nodes: int = 1000, seed: int = 1):
    rng = np.random.default_rng(seed)
    now = pd.Timestamp("2024-06-01T00:00:00Z")
    since = now - pd.Timedelta(days=30)
    per_run = len(GPU_METRICS) * 8 + len(NODE_METRICS)
    runs_n = rows // per_run
    node_names = np.array([f"gpu{i:04d}" for i in range(nodes)])
    run_node = np.arange(runs_n) % nodes
    step_ns = (now - since).value // runs_n
    run_t = since.value + np.arange(runs_n, dtype=np.int64) * step_ns
    run_ids = np.array([f"{i:032x}" for i in range(runs_n)])
    status = np.where(rng.random(runs_n) < 0.03, "warn", "pass").astype(object)
    status[(run_node == 17) & (np.arange(runs_n) >= runs_n - nodes)] = "fail"
    runs = pd.DataFrame({"run_id": run_ids, "node": pd.Categorical.from_codes(run_node, node_names),
                         "context": pd.Categorical(np.full(runs_n, "slurm-check")), "job_id": None,
                         "started_at": pd.to_datetime(run_t, utc=True), "duration_s": 0.05, "status": status})

    # metrics: per run, 8 GPUs x GPU_METRICS then NODE_METRICS
    names = [m for _, m in GPU_METRICS] + [m for _, _, m in NODE_METRICS]
    checks_m = [c for c, _ in GPU_METRICS] + [c for c, _, _ in NODE_METRICS]
    comps = [f"gpu{g}" for g in range(8)] + ["mlx5_0/1", "mlx5_1/1", "mlx5_2/1", "mlx5_3/1"]
    name_code = np.concatenate([np.tile(np.arange(len(GPU_METRICS)), 8),
                                np.arange(len(GPU_METRICS), len(names))])
    comp_code = np.concatenate([np.repeat(np.arange(8), len(GPU_METRICS)), [-1, -1, 8, 9, 10, 11]])
    n = runs_n * per_run
    run_of = np.repeat(np.arange(runs_n), per_run)
    nc = np.tile(name_code, runs_n)
    base = np.array([60, 70, 400, 0, 0, 0, 2, 0, 5, 0, 390, 700, 0, 0, 0, 0], dtype=float)
    noise = np.array([2, 2, 30, 0, 0, 0, 0, 0, 1, 0, 3, 10, 0, 0, 0, 0], dtype=float)
    value = base[nc] + rng.standard_normal(n) * noise[nc]
    node_of = run_node[run_of]
    value[(node_of == 42) & (nc == names.index("busbw_gbps"))] = 300.0
    value[(node_of == 7) & (nc == 0) & (np.tile(comp_code, runs_n) == 3)] = 91.0
    grow = (node_of == 99) & (nc == names.index("ecc_corrected_volatile")) & (np.tile(comp_code, runs_n) == 5)
    value[grow] = np.arange(grow.sum()) * 3.0
    cc = np.tile(comp_code, runs_n)
    name_cats = list(dict.fromkeys(names))
    name_map = np.array([name_cats.index(x) for x in names])
    check_cats = list(dict.fromkeys(checks_m))
    check_code = np.array([check_cats.index(c) for c in checks_m])
    metrics = pd.DataFrame({
        "run_id": pd.Categorical.from_codes(run_of, run_ids),
        "node": pd.Categorical.from_codes(node_of, node_names),
        "started_at": pd.to_datetime(run_t[run_of], utc=True),
        "check": pd.Categorical.from_codes(check_code[nc], check_cats),
        "component": pd.Categorical.from_codes(cc, comps),
        "name": pd.Categorical.from_codes(name_map[nc], name_cats),
        "value": value,
    })

    per = len(CHECKS)
    r_of = np.repeat(np.arange(runs_n), per)
    res_status = np.full(runs_n * per, "pass", dtype=object)
    warn_runs = np.flatnonzero(status == "warn")
    res_status[warn_runs * per + 5] = "warn"
    fail_runs = np.flatnonzero(status == "fail")
    res_status[fail_runs * per + 3] = "fail"
    results = pd.DataFrame({
        "run_id": pd.Categorical.from_codes(r_of, run_ids), "node": pd.Categorical.from_codes(run_node[r_of], node_names),
        "started_at": pd.to_datetime(run_t[r_of], utc=True),
        "check": pd.Categorical.from_codes(np.tile(np.arange(per), runs_n), CHECKS),
        "component": None, "status": res_status, "message": "ok"})
    results.loc[results["status"] == "warn", "message"] = "port Down (InfiniBand)"
    results.loc[results["status"] == "fail", "message"] = "row remap pending, GPU reset required"

    k = 1000
    a_nodes = rng.integers(0, nodes, k)
    a_t = np.sort(rng.integers(since.value, now.value, k))
    acts = pd.DataFrame({"record_id": [f"a{i}" for i in range(2 * k)], "run_id": None,
                         "node": np.concatenate([node_names[a_nodes], node_names[a_nodes]]),
                         "time": pd.to_datetime(np.concatenate([a_t, a_t + 3_600_000_000_000]), utc=True),
                         "action": ["drain"] * k + ["resume"] * k, "reason": ["healthcheck: gpu.xid: Xid 79"] * k + [None] * k,
                         "job_id": None, "context": "prolog"}).sort_values("time", kind="stable")
    return {"runs": runs, "results": results, "metrics": metrics, "actions": acts}, since, now


def _stamps(col) -> np.ndarray:
    """SQLite's stored text of UTC times ("YYYY-MM-DD HH:MM:SS.ffffff"), vectorised."""
    text = np.datetime_as_string(pd.DatetimeIndex(col).tz_convert(None).as_unit("us").to_numpy(), unit="us")
    return np.char.replace(text, "T", " ")


def _insert(con, table: str, columns, rows) -> None:
    names = ", ".join(f'"{c}"' for c in columns)
    con.executemany(f"INSERT INTO {table} ({names}) VALUES ({', '.join('?' * len(columns))})", rows)


def build_db(path: str, rows: int) -> None:
    """The synthetic history in a SQLite file at the current schema, rollups rebuilt (minutes, once)."""
    import sqlite3

    from healthcheck.history import migrations, rollups
    from healthcheck.history.db import make_engine, resolve_url
    from healthcheck.history.rows import ACTION_COLUMNS, METRIC_COLUMNS, RESULT_COLUMNS, RUN_COLUMNS
    from healthcheck.history.schema import unit_of

    t0 = time.perf_counter()
    for p in (path, path + "-wal", path + "-shm"):
        if os.path.exists(p):
            os.unlink(p)
    frames, _, _ = synth(rows)
    engine = make_engine(resolve_url(path, env={}))
    migrations.upgrade(engine)
    engine.dispose()
    con = sqlite3.connect(path, isolation_level=None)
    for pragma in ("journal_mode = OFF", "synchronous = OFF", "cache_size = -1000000"):
        con.execute(f"PRAGMA {pragma}")
    indexes = con.execute("SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL").fetchall()
    for name, _ in indexes:  # bulk load first, sort each index once after
        con.execute(f'DROP INDEX "{name}"')
    runs, res, met, acts = frames["runs"], frames["results"], frames["metrics"], frames["actions"]
    n_runs, per_res, per_met = len(runs), len(CHECKS), len(met) // len(runs)
    run_t = _stamps(runs["started_at"])
    run_id = runs["run_id"].to_numpy(object)
    stamp = "2024-06-01 00:00:00.000000"
    con.execute("BEGIN")
    none = [None] * n_runs
    _insert(con, "runs", RUN_COLUMNS, zip(run_id, run_id, runs["node"].astype(str), runs["context"].astype(str), none,
                                          run_t.tolist(), runs["duration_s"].tolist(), runs["status"].tolist(),
                                          ["3f1c9a0b"] * n_runs, ["0.1.0"] * n_runs, [stamp] * n_runs, none, none,
                                          none, none))
    r_of = np.repeat(np.arange(n_runs), per_res)
    _insert(con, "results", RESULT_COLUMNS, zip(run_id[r_of], np.tile(np.arange(per_res), n_runs).tolist(),
                                                res["node"].astype(str).tolist(), run_t[r_of].tolist(),
                                                res["check"].astype(str).tolist(), [None] * len(res),
                                                res["status"].tolist(), res["message"].tolist()))
    con.execute("COMMIT")
    names = met["name"].astype(str).to_numpy(object)
    units = {n: unit_of(n) for n in set(names[:per_met])}
    codes = met["run_id"].cat.codes.to_numpy()
    chunk = 1_000_000
    for a in range(0, len(met), chunk):
        part = met.iloc[a:a + chunk]
        c = codes[a:a + chunk]
        comp = part["component"].astype(object)
        con.execute("BEGIN")
        _insert(con, "metrics", METRIC_COLUMNS, zip(
            run_id[c], (per_res + np.arange(a, a + len(part)) % per_met).tolist(), names[a:a + chunk],
            part["node"].astype(str).to_numpy(object), run_t[c], part["check"].astype(str).to_numpy(object),
            comp.where(comp.notna(), None).to_numpy(object), part["value"].tolist(),
            [units[n] for n in names[a:a + chunk]]))
        con.execute("COMMIT")
        print(f"  {a + len(part):,} metric rows ({time.perf_counter() - t0:.0f} s)", flush=True)
    con.execute("BEGIN")
    _insert(con, "actions", ACTION_COLUMNS, zip(acts["record_id"], acts["run_id"], acts["node"],
                                                _stamps(acts["time"]).tolist(), acts["action"], acts["reason"],
                                                acts["job_id"], acts["context"], [None] * len(acts),
                                                [None] * len(acts)))
    con.execute("COMMIT")
    for name, sql in indexes:
        con.execute(sql)
    print(f"  indexes ({time.perf_counter() - t0:.0f} s)", flush=True)
    con.execute(f"PRAGMA user_version = {rows % 2**31}")
    con.execute("PRAGMA journal_mode = WAL")
    con.close()
    engine = make_engine(resolve_url(path, env={}))
    t1 = time.perf_counter()
    done = rollups.rebuild(engine)
    engine.dispose()
    print(f"built {path} in {time.perf_counter() - t0:.0f} s (db rebuild-rollups: {time.perf_counter() - t1:.0f} s, "
          f"{done['series']:,} series, {done['levels']:,} counter levels)", flush=True)


def _db_ready(path: str, rows: int) -> bool:
    import sqlite3

    from healthcheck.history import migrations, rollups
    from healthcheck.history.db import make_engine, resolve_url

    if not os.path.exists(path):
        return False
    with sqlite3.connect(path) as con:
        if con.execute("PRAGMA user_version").fetchone()[0] != rows % 2**31:
            return False
    engine = make_engine(resolve_url(path, env={}))
    try:
        with engine.connect() as conn:
            return migrations.is_current(engine) and rollups.usable(conn)
    finally:
        engine.dispose()


def bench_db(args) -> None:
    import subprocess

    path = args.db_file or f"/tmp/hc-bench-report-{args.rows}.sqlite"
    if args.rebuild_db or not _db_ready(path, args.rows):
        print(f"building {path} ({args.rows:,} metric rows; a few minutes, once)", flush=True)
        build_db(path, args.rows)
    out = args.html or os.path.join(os.path.dirname(path), "hc-bench-report.html")
    exe = os.path.join(os.path.dirname(sys.executable), "healthcheck")
    argv = [exe] if os.path.exists(exe) else [sys.executable, "-m", "healthcheck.cli"]
    argv += ["report", "--db", path, "--html", out, "--since", "2024-05-02T00:00:00Z"]
    print("command: " + " ".join(argv), flush=True)
    times = []
    for i in range(args.repeat):
        t = time.perf_counter()
        proc = subprocess.run(argv, capture_output=True, text=True, cwd=os.path.dirname(os.path.abspath(__file__)))
        times.append(time.perf_counter() - t)
        if proc.returncode != 0:
            raise SystemExit(f"report failed ({proc.returncode}): {proc.stderr[-2000:]}")
        print(f"run {i + 1}: {times[-1]:.2f} s end to end ({proc.stderr.strip()})", flush=True)
    print(f"best {min(times):.2f} s, median {sorted(times)[len(times) // 2]:.2f} s over {args.repeat} runs "
          f"(target <= 5 s); database {os.path.getsize(path) / 2**30:.1f} GiB")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--html", help="also write the HTML report here")
    ap.add_argument("--db", action="store_true", help="time `healthcheck report` over a SQLite file instead")
    ap.add_argument("--db-file", help="the cached SQLite file (default /tmp/hc-bench-report-ROWS.sqlite)")
    ap.add_argument("--rebuild-db", action="store_true", help="build the SQLite file again even if cached")
    args = ap.parse_args()
    if args.db:
        bench_db(args)
        return
    t0 = time.perf_counter()
    frames, since, now = synth(args.rows)
    print(f"generated {len(frames['metrics']):,} metric rows, {len(frames['results']):,} results, "
          f"{len(frames['runs']):,} runs in {time.perf_counter() - t0:.1f} s")
    from healthcheck.report import build_report, render_html, render_json, render_markdown

    best = None
    for i in range(args.repeat):
        t = [time.perf_counter()]
        rep = build_report(frames, since, now)
        t.append(time.perf_counter())
        page = render_html(rep)
        t.append(time.perf_counter())
        render_markdown(rep), render_json(rep)
        t.append(time.perf_counter())
        build, html, other = t[1] - t[0], t[2] - t[1], t[3] - t[2]
        total = build + html
        print(f"run {i + 1}: build {build:.2f} s, html+plots {html:.2f} s (total {total:.2f} s); "
              f"markdown+json {other:.2f} s; {len(rep.findings)} findings, {len(page):,} bytes of HTML")
        best = total if best is None else min(best, total)
    print(f"best build+html: {best:.2f} s for {len(frames['metrics']):,} metric rows (target <= 5 s)")
    if args.html:
        with open(args.html, "w", encoding="utf-8") as fh:
            fh.write(page)


if __name__ == "__main__":
    main()
