"""A synthetic fleet history at scale (1,000-10,000 nodes), in the frames contract of tests/report/synth.py,
for the fleet-scale reading tests: the same kinds of faults as synth.make_frames, planted on a share of
the fleet, so the page has long lists and tables to fold and cap.

``make_fleet(n_nodes, days=30, seed=0)``: nodes ``gpu00001``...; one health-check run per node per day
(more would only make it slower: the report reads each node's latest run and the day's last); a few
nodes silent for the last days (down); and, as fractions of the fleet:
- 2 % fail ``gpu.row_remap`` now (one action group), 1 % fail ``host.mounts`` now, 3 % warn
  ``ib.port.state``; 1 % drained by us (open), 0.5 % flapping (drained and resumed daily);
- GPU temperatures (8 per node) on the latest run, 0.5 % of the GPUs hot (outliers); busbw per node,
  0.5 % slow; one ECC counter series growing on 0.3 % of the nodes.
Metrics are recorded on the last two runs only (the report reads latest values and moving counters).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from tests.report.synth import NOW

SINCE = NOW - pd.Timedelta(days=30)


def node_names(n: int) -> list[str]:
    return [f"gpu{i:05d}" for i in range(1, n + 1)]


def make_fleet(n_nodes: int, days: int = 30, seed: int = 0) -> dict[str, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    nodes = np.array(node_names(n_nodes), dtype=object)

    def pick(share: float) -> set[str]:
        k = max(1, int(n_nodes * share))
        return set(rng.choice(nodes, k, replace=False))

    remap, mounts, ib, drained, flapping, hot, slow, growing = (
        pick(0.02), pick(0.01), pick(0.03), pick(0.01), pick(0.005), pick(0.005), pick(0.005), pick(0.003))
    silent = pick(0.002) - drained
    # runs: one per node per day, at a per-node minute past the hour
    day_idx = np.arange(days)
    node_idx = np.arange(n_nodes)
    nn, dd = np.meshgrid(node_idx, day_idx, indexing="ij")
    nn, dd = nn.ravel(), dd.ravel()
    t = NOW - pd.to_timedelta((days - 1 - dd) * 86400 + (nn % 600) * 6, unit="s")
    runs = pd.DataFrame({"run_id": [f"{n:06d}{d:026d}" for n, d in zip(nn, dd)], "node": nodes[nn],
                         "context": "slurm-check", "job_id": None, "started_at": t, "duration_s": 0.05,
                         "status": "pass"})
    silent_mask = runs["node"].isin(silent) & (dd >= days - 3)
    runs = runs[~silent_mask].reset_index(drop=True)
    last = (runs["started_at"] >= NOW - pd.Timedelta(days=1)).to_numpy()
    results = []
    for r in runs[last].itertuples(index=False):
        if r.node in remap:
            results.append((r.run_id, r.node, r.started_at, "gpu.row_remap", "gpu1", "fail",
                            "row remap pending, GPU reset required; remapped rows: correctable 0, uncorrectable 1"))
        if r.node in mounts:
            results.append((r.run_id, r.node, r.started_at, "host.mounts", "/scratch", "fail", "/scratch not mounted"))
        if r.node in ib:
            results.append((r.run_id, r.node, r.started_at, "ib.port.state", "mlx5_0/1", "warn",
                            "port Down (InfiniBand)"))
    results = pd.DataFrame(results, columns=["run_id", "node", "started_at", "check", "component", "status",
                                             "message"])
    bad = results.groupby("run_id")["status"].agg(lambda s: "fail" if (s == "fail").any() else "warn")
    runs["status"] = runs["run_id"].map(bad).fillna("pass")
    # metrics: the last two runs of every node
    recent = runs[runs["started_at"] >= NOW - pd.Timedelta(days=2)]
    m_run = np.repeat(recent["run_id"].to_numpy(), 10)
    m_node = np.repeat(recent["node"].to_numpy(), 10)
    m_t = recent["started_at"].repeat(10).reset_index(drop=True)
    slot = np.tile(np.arange(10), len(recent))
    temp = 60.0 + (slot % 8) * 0.5 + rng.normal(0, 1.0, len(slot))
    hot_mask = np.isin(m_node, list(hot)) & (slot == 2)
    temp[hot_mask] = 91.0 + rng.uniform(0, 2, hot_mask.sum())
    bus = 390.0 + rng.normal(0, 1.5, len(slot))
    bus[np.isin(m_node, list(slow))] = 300.0
    newer = (m_t >= NOW - pd.Timedelta(days=1)).to_numpy()
    ecc = np.where(np.isin(m_node, list(growing)) & newer, 40.0, 0.0)
    name = np.where(slot < 8, "temperature_c", np.where(slot == 8, "busbw_gbps", "ecc_corrected_volatile"))
    value = np.where(slot < 8, temp, np.where(slot == 8, bus, ecc))
    check = np.where(slot < 8, "gpu.temperature", np.where(slot == 8, "burnin.nccl", "gpu.ecc.corrected"))
    comp = np.where(slot < 8, np.char.add("gpu", (slot % 8).astype(str)).astype(object),
                    np.where(slot == 8, None, "gpu2"))
    metrics = pd.DataFrame({"run_id": m_run, "node": m_node, "started_at": m_t,
                            "check": check, "component": comp, "name": name, "value": value})
    acts = []
    for i, node in enumerate(sorted(drained)):
        acts.append((f"d{i}", None, node, NOW - pd.Timedelta(hours=30 + i % 20), "drain",
                     f"healthcheck: gpu.row_remap gpu1: pending [run {i}]", None, "prolog"))
    for i, node in enumerate(sorted(flapping)):
        for k in range(4):
            t0 = NOW - pd.Timedelta(days=6 - k, hours=3)
            acts.append((f"f{i}d{k}", None, node, t0, "drain", "healthcheck: ib.port.state: down", None, "prolog"))
            acts.append((f"f{i}r{k}", None, node, t0 + pd.Timedelta(hours=2), "resume", None, None, "slurm-check"))
    actions = pd.DataFrame(acts, columns=["record_id", "run_id", "node", "time", "action", "reason", "job_id",
                                          "context"])
    return {"runs": runs, "results": results, "metrics": metrics, "actions": actions}
