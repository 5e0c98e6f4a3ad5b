"""A synthetic history as spool records (what the hooks write), with every case the report's database
path has to get right, a helper that stores it in a database through the real ingest, and one that
reduces a frame to its values (``plain``) so that frames read two ways compare equal.

8 nodes x 4 GPUs, one run per node every 6 h over 12 days ending at NOW, plus:
- error counters: n06 gpu2 grows by 10 per run with a reset at run 20; n03 gpu0 grew during its first 10
  runs and is constant since; n07 gpu1 jumps to 5 once and resets to 0 (a level seen again); n08's IB port
  grows every 5th run; n02 gpu3 is 0 up to NOW and 7 in three runs *after* NOW (a node clock ahead);
- performance figures: busbw (node level, every 4th run; n05 slow), temperature per GPU (n05 gpu2 hot),
  gemm TFLOPS with component None on most nodes and "" on n01;
- results: n01 fails gpu.row_remap in its latest run, n04 has gpu.xid errors, n08 failed host.mounts once
  (a past onset), ib.port.state warns at random; n04 has two runs at the same instant (a tie);
- actions: n01 drained an hour ago (open), n07 three drain/resume cycles, n03 drained and resumed 10
  days ago.
"""
from __future__ import annotations

import json
import random
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pandas as pd

NOW = datetime(2026, 5, 31, 12, 0, tzinfo=timezone.utc)
NODES = [f"n{i:02d}" for i in range(1, 9)]
RUNS = 48
WINDOWS = {  # name: (since, now)
    "30d": (NOW - timedelta(days=30), NOW),
    "47h": (NOW - timedelta(hours=47), NOW),
    "middle": (NOW - timedelta(days=6), NOW - timedelta(days=3)),  # every series has later samples
    "with-future": (NOW - timedelta(days=30), NOW + timedelta(days=2)),
    "empty": (NOW - timedelta(days=90), NOW - timedelta(days=60)),
}


def _iso(t: datetime) -> str:
    return t.isoformat().replace("+00:00", "Z")


def _counter(node: str, g: int, k: int) -> float:
    if node == "n06" and g == 2:
        return float(10 * k if k < 20 else 10 * (k - 20))
    if node == "n03" and g == 0:
        return float(10 * min(k, 10))
    if node == "n07" and g == 1:
        return 5.0 if k == 30 else 0.0
    if node == "n02" and g == 3:
        return 7.0 if k >= RUNS else 0.0
    return 0.0


def run_records(seed: int = 7) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for n, node in enumerate(NODES):
        count = RUNS + (3 if node == "n02" else 0)
        for k in range(count):
            t = NOW - timedelta(hours=6 * (RUNS - 1 - k), minutes=n)
            if node == "n04" and k == RUNS - 3:
                t = NOW - timedelta(hours=6 * 3, minutes=n)  # the same instant as run k-1: a tie
            findings = []
            for g in range(4):
                temp = 92.0 if (node == "n05" and g == 2) else round(60 + g * 0.5 + rng.uniform(-1, 1), 2)
                findings.append(("gpu.temperature", f"gpu{g}", "pass", f"{temp} C", {"temperature_c": temp}))
                findings.append(("gpu.ecc.corrected", f"gpu{g}", "pass", "ok",
                                 {"ecc_corrected_volatile": _counter(node, g, k)}))
            sym = float(3 * (k // 5)) if node == "n08" else 0.0
            findings.append(("ib.port.errors", "mlx5_0/1", "pass", "ok", {"symbol_error": sym, "link_downed": 0.0}))
            if k % 4 == n % 4:
                bus = 300.0 if node == "n05" else round(390 + rng.uniform(-2, 2), 1)
                findings.append(("burnin.nccl", None, "pass", "ok", {"busbw_gbps": bus}))
            findings.append(("burnin.gemm", "" if node == "n01" else None, "pass", "ok",
                             {"gemm_tflops": round(700 + rng.uniform(-5, 5), 1)}))
            findings.append(("host.disk", None, "pass", "ok", {"disk_used_pct": float(40 + k % 7)}))
            if rng.random() < 0.08:
                findings.append(("ib.port.state", "mlx5_0/1", "warn", "port Down (InfiniBand)", {}))
            if node == "n01" and k == RUNS - 1:
                findings.append(("gpu.row_remap", "gpu1", "fail", "row remap pending, GPU reset required", {}))
            if node == "n04" and k % 9 == 2:  # its latest run (47) too
                findings.append(("gpu.xid", "gpu3", "error", "Xid 79: GPU has fallen off the bus", {}))
            if node == "n08" and k in (20, 21):
                findings.append(("host.mounts", "/scratch", "fail", "/scratch not mounted", {}))
            statuses = {f[2] for f in findings}
            status = "fail" if "fail" in statuses else "error" if "error" in statuses else \
                "warn" if "warn" in statuses else "pass"
            out.append({"kind": "run", "record_id": f"rec-{node}-{k:03d}", "run_id": f"{node}-{k:03d}".ljust(32, "0"),
                        "node": node, "context": "slurm-check", "job_id": None, "started_at": _iso(t),
                        "duration_s": 0.05, "status": status, "config_hash": "c0ffee", "tool_version": "0.1.0",
                        "results": [{"check": c, "component": comp, "status": st, "message": msg, "metrics": m}
                                    for c, comp, st, msg, m in findings]})
    return out


def action_records() -> list[dict]:
    acts = [("n01", NOW - timedelta(hours=1), "drain", "healthcheck: gpu.row_remap gpu1: pending"),
            ("n03", NOW - timedelta(days=10), "drain", "healthcheck: gpu.ecc.corrected gpu0"),
            ("n03", NOW - timedelta(days=10) + timedelta(hours=5), "resume", None)]
    for i in range(3):
        t0 = NOW - timedelta(days=5 - i)
        acts += [("n07", t0, "drain", "healthcheck: ib.port.state: down"),
                 ("n07", t0 + timedelta(hours=2), "resume", None)]
    return [{"kind": "action", "record_id": f"act-{i:03d}", "run_id": None, "node": node, "time": _iso(t),
             "action": action, "reason": reason, "job_id": None, "context": "prolog", "why": None, "checks": []}
            for i, (node, t, action, reason) in enumerate(acts)]


def write_spool(folder: Path, records: list[dict]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "records.jsonl", "a", encoding="utf-8") as fh:
        for rec in records:
            fh.write(json.dumps(rec, separators=(",", ":")) + "\n")
    return folder


def store(engine, folder: Path, batch_rows: int = 100_000, shuffle: int | None = None, on_batch=None) -> None:
    """Ingest the whole history (in a shuffled record order when ``shuffle`` is a seed)."""
    from healthcheck.history import migrations
    from healthcheck.history.ingest import ingest

    records = run_records() + action_records()
    if shuffle is not None:
        random.Random(shuffle).shuffle(records)
    migrations.require_current(engine, create=True)
    ingest([write_spool(folder, records)], engine, batch_rows=batch_rows, on_batch=on_batch)


def plain(df: pd.DataFrame) -> pd.DataFrame:
    """Values only: object columns, times as UTC Timestamps, rows in their order."""
    out = df.reset_index(drop=True).copy()
    for c in out.columns:
        if isinstance(out[c].dtype, pd.DatetimeTZDtype):
            out[c] = out[c].dt.as_unit("us")
        elif out[c].dtype != "float64":
            out[c] = out[c].astype(object).where(out[c].notna(), None)
    return out
