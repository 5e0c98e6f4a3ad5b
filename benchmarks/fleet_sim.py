"""A simulated fleet history with planted faults: 10,000 nodes x 90 days by default (vectorised numpy).

Output: the analyses' input frames directly, in the ``healthcheck.history.queries.load_frames``
contract (runs, results, metrics, actions; time-ordered rows, key columns categorical), plus the
fleet's facts the history does not hold (GPU model per node, ``[topology]`` racks, installed
versions) and the truth (which nodes carry which planted fault). Frames, not the database: at
10,000 nodes the history is ~25 M metric rows, which the report reads through the rollups in
production; ``bench_fleet.py`` times the real ingest on a slice (spool records -> SQLite) and
the analyses on the frames. Results hold the non-pass rows only (what the analyses read; pass
rows carry nothing the ranking uses and would double the memory).

The fleet: racks of 32 nodes (``r000``, ``r001``, ...), 8 GPUs and 4 InfiniBand ports per node;
every 5th rack is H200, the others H100 SXM; the last 2 % of the nodes are new (first run 30 days
before the end). Every node runs the health check once a day (temperatures, PCIe link width and
its max, ``link_downed`` per port) and the GEMM burn-in once a week (``gemm_tflops`` per GPU).

Realistic noise: temperatures with a per-rack inlet offset, warmer rear GPUs, per-GPU offsets, a
daily cycle, per-run noise and rare single spikes; GEMM with a per-GPU silicon spread (0.8 %),
per-run noise (1 %) and rare slow burn-in runs (-10 % on every GPU of the run: a noisy neighbour); past one-off Xid failures with a
drain and resume; single past ``ib.port.state`` warnings; a few ``link_downed`` steps (a replug);
a few nodes with a full disk (a persistent, low-severity warning); version drift on a few nodes.

Planted faults (``Sim.truth``):

- ``heating``: one GPU heats slowly from day 20 to about 91 C at the end (gpu.temperature FAIL
  at and above 89 C, WARN from 84 C, as the check judges an H100 SXM);
- ``gemm_drop``: one node's GEMM drops 5 % on every GPU for the last four weekly burn-ins;
- ``flapping_ib``: one port's link goes down and up over the last 14 days (``link_downed`` steps,
  ``ib.port.state`` warnings, four drain/resume cycles);
- ``pcie_rack``: one whole rack's GPUs train at x8 of x16 for the last 10 days (a BIOS or
  PCIe-switch firmware change on that rack; gpu.pcie.link FAIL; no drain: the drain cap holds a
  rack-wide failure back).

    .venv/bin/python benchmarks/fleet_sim.py [--nodes 10000] [--days 90]   # prints the sizes

With ``--spool DIR`` it also writes the fleet's spools, one per node (``DIR/<node>/records.jsonl``: the
run and action records the hooks write, ``spool.entries`` shape), which ``healthcheck history ingest
DIR`` stores and ``healthcheck report`` reads; ``--end now`` ends the history at the current time
(default: the fixed 2026-06-01 of the tests), ``--spool-days N`` writes only the last N days, and
``--topology FILE`` writes the fleet's racks as a config's ``[topology]`` (docs/fleet-scale.md):

    .venv/bin/python benchmarks/fleet_sim.py --nodes 1000 --end now --spool /tmp/fleet/spool \
        --topology /tmp/fleet/healthcheck.toml
    healthcheck history ingest /tmp/fleet/spool --db sqlite:////tmp/fleet/h.sqlite
    healthcheck report --db sqlite:////tmp/fleet/h.sqlite --since 30d --html /tmp/fleet/readiness.html
"""
from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

NOW = pd.Timestamp("2026-06-01T00:00:00Z")
RACK = 32
GPUS = 8
PORTS = [f"mlx5_{p}/1" for p in range(4)]
H100, H200 = "NVIDIA H100 80GB HBM3", "NVIDIA H200"
GEMM = {H100: 745.0, H200: 760.0}
DAY_NS = 86_400 * 10**9


@dataclass
class Sim:
    frames: dict[str, pd.DataFrame]
    since: pd.Timestamp
    now: pd.Timestamp
    gpu_model: dict[str, str]
    rack: dict[str, str]
    topology: dict[str, dict[str, str]]
    versions: pd.DataFrame
    truth: dict[str, list[str]]
    new_nodes: list[str] = field(default_factory=list)

    @property
    def planted(self) -> set[str]:
        return {n for nodes in self.truth.values() for n in nodes}


def _names(n: int) -> np.ndarray:
    return np.array([f"gpu{i:05d}" for i in range(n)], dtype=object)


def simulate(nodes: int = 10_000, days: int = 90, seed: int = 0, now: pd.Timestamp = NOW) -> Sim:
    if nodes < 4 * RACK or days < 40:
        raise ValueError(f"need at least {4 * RACK} nodes and 40 days (got {nodes}, {days})")
    rng = np.random.default_rng(seed)
    names = _names(nodes)
    rack_of = np.arange(nodes) // RACK
    model = np.where(rack_of % 5 == 4, H200, H100).astype(object)
    start_day = np.zeros(nodes, dtype=np.int64)
    n_new = max(1, nodes // 50)
    start_day[nodes - n_new:] = days - 30
    since = now - pd.Timedelta(days=days)

    # planted nodes: away from the new nodes and from each other; the PCIe rack is an H100 rack
    pcie_rack = 2
    heating, gemm_node, flap_node = RACK * 3 + 5, RACK * 6 + 17, RACK * 7 + 9
    heat_gpu, flap_port = 3, 2

    # --- daily health-check runs: node x day, at the node's own hour, time-ordered
    hour = rng.integers(0, 24 * 60, nodes) * 60 * 10**9
    day_grid, node_grid = np.meshgrid(np.arange(days), np.arange(nodes), indexing="ij")
    d_day, d_node = day_grid.ravel(), node_grid.ravel()
    keep = d_day >= start_day[d_node]
    d_day, d_node = d_day[keep], d_node[keep]
    d_t = since.value + d_day * DAY_NS + hour[d_node] + rng.integers(0, 600, d_day.size) * 10**9
    # --- weekly burn-in runs: on the node's weekday, an hour after its health check
    w_keep = ((d_day + d_node) % 7 == 0)
    b_day, b_node = d_day[w_keep], d_node[w_keep]
    b_t = d_t[w_keep] + 3_600 * 10**9

    run_node = np.concatenate([d_node, b_node])
    run_day = np.concatenate([d_day, b_day])
    run_t = np.concatenate([d_t, b_t])
    is_burn = np.concatenate([np.zeros(d_day.size, bool), np.ones(b_day.size, bool)])
    order = np.argsort(run_t, kind="stable")
    run_node, run_day, run_t, is_burn = run_node[order], run_day[order], run_t[order], is_burn[order]
    n_runs = run_t.size
    run_ids = np.array([f"{i:032x}" for i in range(n_runs)], dtype=object)
    status = np.full(n_runs, "pass", dtype=object)
    hc = np.flatnonzero(~is_burn)
    bi = np.flatnonzero(is_burn)

    # --- temperatures (per GPU of each health-check run)
    h_node, h_day = run_node[hc], run_day[hc]
    rack_off = rng.normal(0, 1.5, nodes // RACK + 1)
    gpu_off = rng.normal(0, 1.0, (nodes, GPUS)) + np.where(np.arange(GPUS) >= 4, 3.0, 0.0) + np.arange(GPUS) * 0.3
    tod = ((run_t[hc] % DAY_NS) / DAY_NS)[:, None]
    temp = (62.0 + rack_off[rack_of[h_node]][:, None] + gpu_off[h_node] + 2.0 * np.sin(2 * np.pi * tod)
            + rng.normal(0, 1.2, (hc.size, GPUS)))
    spikes = rng.random((hc.size, GPUS)) < 2e-4
    temp[spikes] += 12.0
    heat_rows = h_node == heating
    ramp = np.clip((h_day[heat_rows] - 20) / (days - 21), 0, 1)
    temp[heat_rows, heat_gpu] = 66.0 + 25.0 * ramp + rng.normal(0, 0.4, ramp.size)
    temp = np.round(temp, 1)

    # --- PCIe link width (x16; the planted rack trains at x8 for the last 10 days)
    width = np.full((hc.size, GPUS), 16.0)
    down = (rack_of[h_node] == pcie_rack) & (h_day >= days - 10)
    width[down] = 8.0

    # --- link_downed per port: a counter (cumulative); a few replugs; the planted flapping port
    steps = np.zeros((hc.size, len(PORTS)))
    replug = rng.random((hc.size, len(PORTS))) < 5e-4
    steps[replug] = 1.0
    flap_rows = (h_node == flap_node) & (h_day >= days - 14)
    flapped = np.zeros(hc.size, bool)
    flapped[flap_rows] = rng.random(flap_rows.sum()) < 0.6
    steps[flapped, flap_port] = rng.integers(1, 4, flapped.sum())
    # cumulative per (node, port) in time order (runs are time-ordered)
    link = np.zeros_like(steps)
    for p in range(len(PORTS)):
        link[:, p] = pd.Series(steps[:, p]).groupby(h_node).cumsum().to_numpy()

    # --- GEMM per GPU of each burn-in run
    g_node, g_day = run_node[bi], run_day[bi]
    silicon = 1.0 + rng.normal(0, 0.008, (nodes, GPUS))
    base = np.array([GEMM[m] for m in model])
    gemm = base[g_node][:, None] * silicon[g_node] * (1.0 + rng.normal(0, 0.01, (bi.size, GPUS)))
    slow = rng.random(bi.size) < 3e-3  # a disturbed burn-in run: every GPU of it slow
    gemm[slow] *= 0.90
    gemm[(g_node == gemm_node) & (g_day >= days - 27)] *= 0.95
    gemm = np.round(gemm, 1)

    # --- metrics frame (time order: per run, its rows)
    comps = [f"gpu{g}" for g in range(GPUS)] + PORTS
    per_hc = [("gpu.temperature", "temperature_c", temp, range(GPUS)),
              ("gpu.pcie.link", "pcie_width", width, range(GPUS)),
              ("gpu.pcie.link", "pcie_width_max", np.full_like(width, 16.0), range(GPUS)),
              ("ib.port.errors", "link_downed", link, range(GPUS, GPUS + len(PORTS)))]
    checks = ["gpu.temperature", "gpu.pcie.link", "ib.port.errors", "burnin.gemm.tflops"]
    mnames = ["temperature_c", "pcie_width", "pcie_width_max", "link_downed", "gemm_tflops"]
    parts_run, parts_check, parts_comp, parts_name, parts_val = [], [], [], [], []
    for check, name, vals, comp_idx in per_hc:
        ncol = vals.shape[1]
        parts_run.append(np.repeat(hc.astype(np.int32), ncol))
        parts_check.append(np.full(hc.size * ncol, checks.index(check), dtype=np.int8))
        parts_comp.append(np.tile(np.array(list(comp_idx), dtype=np.int8), hc.size))
        parts_name.append(np.full(hc.size * ncol, mnames.index(name), dtype=np.int8))
        parts_val.append(vals.ravel())
    parts_run.append(np.repeat(bi.astype(np.int32), GPUS))
    parts_check.append(np.full(bi.size * GPUS, checks.index("burnin.gemm.tflops"), dtype=np.int8))
    parts_comp.append(np.tile(np.arange(GPUS, dtype=np.int8), bi.size))
    parts_name.append(np.full(bi.size * GPUS, mnames.index("gemm_tflops"), dtype=np.int8))
    parts_val.append(gemm.ravel())
    m_run = np.concatenate(parts_run)
    m_order = np.argsort(m_run, kind="stable")
    m_run = m_run[m_order]
    metrics = pd.DataFrame({
        "run_id": pd.Categorical.from_codes(m_run, run_ids),
        "node": pd.Categorical.from_codes(run_node[m_run], names),
        "started_at": pd.to_datetime(run_t[m_run], utc=True).as_unit("us"),
        "check": pd.Categorical.from_codes(np.concatenate(parts_check)[m_order], checks),
        "component": pd.Categorical.from_codes(np.concatenate(parts_comp)[m_order], comps),
        "name": pd.Categorical.from_codes(np.concatenate(parts_name)[m_order], mnames),
        "value": np.concatenate(parts_val)[m_order]})

    # --- results (non-pass rows) and run statuses
    res: list[tuple[np.ndarray, str, np.ndarray, str, np.ndarray]] = []  # (run idx, check, comp, status, msg)

    def add(runs_idx, check, comp, st, msg):
        runs_idx = np.asarray(runs_idx, dtype=np.int64)
        if runs_idx.size:
            res.append((runs_idx, check, np.broadcast_to(np.asarray(comp, dtype=object), runs_idx.shape),
                        st, np.broadcast_to(np.asarray(msg, dtype=object), runs_idx.shape)))

    for level, lo, hi in (("fail", 89.0, np.inf), ("warn", 84.0, 89.0)):
        r, g = np.nonzero((temp >= lo) & (temp < hi))
        add(hc[r], "gpu.temperature", np.array([f"gpu{x}" for x in g], dtype=object), level,
            np.array([f"GPU {t:g} C: {'at or above slowdown 89' if level == 'fail' else 'within 5 C of slowdown 89'}"
                      for t in temp[r, g]], dtype=object))
    r, g = np.nonzero(width < 16)
    add(hc[r], "gpu.pcie.link", np.array([f"gpu{x}" for x in g], dtype=object), "fail",
        "PCIe Gen5 x8: width x8 of x16")
    add(hc[np.flatnonzero(flapped)], "ib.port.state", PORTS[flap_port], "warn",
        "port Down (InfiniBand): link went down since the last run")
    # noise: one-off past Xid failures (1 % of the nodes), single past port warnings (0.5 %)
    past = (run_day[hc] >= 5) & (run_day[hc] <= days - 10)
    xid_nodes = rng.choice(nodes, max(1, nodes // 100), replace=False)
    xid_nodes = xid_nodes[~np.isin(xid_nodes, [heating, gemm_node, flap_node])]
    cand = hc[past & np.isin(run_node[hc], xid_nodes)]
    xid_runs = pd.Series(cand).groupby(run_node[cand]).apply(lambda s: rng.choice(s.to_numpy())).to_numpy() \
        if cand.size else np.array([], dtype=np.int64)
    add(xid_runs, "gpu.xid", "gpu1", "fail", "Xid 79: GPU has fallen off the bus")
    warn_nodes = rng.choice(nodes, max(1, nodes // 200), replace=False)
    cand = hc[past & np.isin(run_node[hc], warn_nodes)]
    warn_runs = pd.Series(cand).groupby(run_node[cand]).apply(lambda s: rng.choice(s.to_numpy())).to_numpy() \
        if cand.size else np.array([], dtype=np.int64)
    add(warn_runs, "ib.port.state", PORTS[0], "warn", "port Down (InfiniBand)")
    # noise: a few full disks, a persistent low-severity warning over the last 10 days
    disk_nodes = rng.choice(np.setdiff1d(np.arange(nodes), [heating, gemm_node, flap_node]),
                            max(1, nodes // 300), replace=False)
    add(hc[np.isin(run_node[hc], disk_nodes) & (run_day[hc] >= days - 10)], "host.disk", None, "warn",
        "/var 91 % used (warn at 90 %)")

    r_run = np.concatenate([x[0] for x in res])
    r_order = np.argsort(r_run, kind="stable")
    r_run = r_run[r_order]
    r_status = np.concatenate([np.full(x[0].size, x[3], dtype=object) for x in res])[r_order]
    results = pd.DataFrame({
        "run_id": pd.Categorical.from_codes(r_run, run_ids),
        "node": pd.Categorical.from_codes(run_node[r_run], names),
        "started_at": pd.to_datetime(run_t[r_run], utc=True).as_unit("us"),
        "check": pd.Categorical(np.concatenate([np.full(x[0].size, x[1], dtype=object) for x in res])[r_order]),
        "component": np.concatenate([x[2] for x in res])[r_order],
        "status": r_status,
        "message": np.concatenate([x[4] for x in res])[r_order]})
    rank = {"pass": 0, "warn": 1, "fail": 2}
    worst = pd.Series(r_status).map(rank).groupby(r_run).max()
    status[worst.index.to_numpy()] = np.array(["pass", "warn", "fail"], dtype=object)[worst.to_numpy()]
    runs = pd.DataFrame({"run_id": run_ids, "node": pd.Categorical.from_codes(run_node, names),
                         "context": pd.Categorical.from_codes(is_burn.astype(np.int8), ["slurm-check", "burnin"]),
                         "job_id": None, "started_at": pd.to_datetime(run_t, utc=True).as_unit("us"),
                         "duration_s": np.where(is_burn, 1800.0, 0.05), "status": status})

    # --- actions: a drain and a resume 3 h later for each Xid failure; the flapping port's cycles
    a_node, a_t, a_act, a_reason = [], [], [], []
    for i in xid_runs:
        a_node += [names[run_node[i]]] * 2
        a_t += [run_t[i] + 60 * 10**9, run_t[i] + 3 * 3_600 * 10**9]
        a_act += ["drain", "resume"]
        a_reason += ["healthcheck: gpu.xid gpu1: Xid 79", None]
    flap_runs = hc[flapped]
    for i in flap_runs[np.linspace(0, flap_runs.size - 1, min(4, flap_runs.size)).astype(int)]:
        a_node += [names[flap_node]] * 2
        a_t += [run_t[i] + 60 * 10**9, run_t[i] + 2 * 3_600 * 10**9]
        a_act += ["drain", "resume"]
        a_reason += [f"healthcheck: ib.port.state {PORTS[flap_port]}: down", None]
    actions = pd.DataFrame({"record_id": [f"act-{i:06d}" for i in range(len(a_node))], "run_id": None,
                            "node": a_node, "time": pd.to_datetime(np.array(a_t, dtype=np.int64), utc=True).as_unit("us"),
                            "action": a_act, "reason": a_reason, "job_id": None, "context": "prolog"})
    actions = actions[actions["time"] <= now].sort_values("time", kind="stable").reset_index(drop=True)

    # --- the fleet's facts
    gpu_model = dict(zip(names, model))
    racks = {n: f"r{r:03d}" for n, r in zip(names, rack_of)}
    topology = {"rack": {}}
    for r in range(rack_of.max() + 1):
        members = np.flatnonzero(rack_of == r)
        topology["rack"][f"r{r:03d}"] = f"gpu[{members[0]:05d}-{members[-1]:05d}]"
    klass = np.where(model == H200, "h200", "h100")
    items = {"driver": "550.54.15", "cuda": "12.4", "nccl": "2.21.5", "ofed": "24.01-0.3.3",
             "hca_firmware": "28.39.1002"}
    vrows = []
    odd = {("driver", 11): "535.129.03", ("driver", RACK * 9 + 2): "535.129.03",
           ("ofed", 40): "23.10-1.1.9", ("hca_firmware", 41): "28.36.1010", ("nccl", 42): "2.20.3"}
    for item, value in items.items():
        vals = np.full(nodes, value, dtype=object)
        for (it, i), v in odd.items():
            if it == item and i < nodes:
                vals[i] = v
        vrows.append(pd.DataFrame({"node": names, "node_class": klass, "item": item, "value": vals}))
    versions = pd.concat(vrows, ignore_index=True)
    truth = {"heating": [names[heating]], "gemm_drop": [names[gemm_node]], "flapping_ib": [names[flap_node]],
             "pcie_rack": list(names[rack_of == pcie_rack])}
    frames = {"runs": runs, "results": results, "metrics": metrics, "actions": actions}
    return Sim(frames, since, now, gpu_model, racks, topology, versions, truth,
               list(names[nodes - n_new:]))


def _text(value) -> str | None:
    return value if isinstance(value, str) else None  # a resume's reason is NaN in the frame


def _iso(ns: int) -> str:
    return pd.Timestamp(int(ns), tz="UTC").isoformat().replace("+00:00", "Z")


def write_spools(sim: Sim, folder: str | Path, days: int | None = None) -> dict[str, int]:
    """The simulated history as the nodes' spools: ``folder/<node>/records.jsonl``, each node's run
    records with a ``record_id`` as ``spool.store.append`` adds it (one per health check or burn-in:
    every figure as a result's metrics, the non-pass results
    with their status and message) and its drain/resume records, time-ordered. ``days``: only the last
    ``days`` days (None: all). Refuses a folder that already holds a spool (a second run would add
    duplicates the ingest skips, but mix two fleets). Returns counts: nodes, runs, actions, bytes."""
    folder = Path(folder)
    if days is not None and days < 1:
        raise ValueError(f"--spool-days must be >= 1, not {days}")
    if folder.exists() and any(folder.rglob("records.jsonl")):
        raise FileExistsError(f"{folder} already holds spools: give an empty or new folder")
    folder.mkdir(parents=True, exist_ok=True)
    f = sim.frames
    runs, met, res, acts = f["runs"], f["metrics"], f["results"], f["actions"]
    start = -np.inf if days is None else (sim.now - pd.Timedelta(days=days)).value
    n_runs = len(runs)
    t_run = runs["started_at"].dt.as_unit("ns").astype("int64").to_numpy()
    node_of = runs["node"].astype(str).to_numpy()
    m_code = met["run_id"].cat.codes.to_numpy()
    m_lo, m_hi = np.searchsorted(m_code, np.arange(n_runs)), np.searchsorted(m_code, np.arange(n_runs), "right")
    # categorical codes, not 26 M strings: the write stays near the frames' own memory
    m_check, m_check_of = met["check"].cat.codes.to_numpy(), [str(c) for c in met["check"].cat.categories]
    m_comp, m_comp_of = met["component"].cat.codes.to_numpy(), [str(c) for c in met["component"].cat.categories]
    m_name, m_name_of = met["name"].cat.codes.to_numpy(), [str(c) for c in met["name"].cat.categories]
    m_val = met["value"].to_numpy(dtype=float)
    r_code = res["run_id"].cat.codes.to_numpy()
    r_lo, r_hi = np.searchsorted(r_code, np.arange(n_runs)), np.searchsorted(r_code, np.arange(n_runs), "right")
    r_check, r_comp = res["check"].astype(str).to_numpy(), res["component"].astype(object).to_numpy()
    r_status, r_msg = res["status"].astype(str).to_numpy(), res["message"].astype(str).to_numpy()
    ctx, status = runs["context"].astype(str).to_numpy(), runs["status"].astype(str).to_numpy()
    dur, run_id = runs["duration_s"].to_numpy(dtype=float), runs["run_id"].astype(str).to_numpy()
    a_time = acts["time"].dt.as_unit("ns").astype("int64").to_numpy()
    acts_of: dict[str, list[int]] = {}
    for i, node in enumerate(acts["node"].astype(str)):
        if a_time[i] >= start:
            acts_of.setdefault(node, []).append(i)
    order = np.lexsort((t_run, node_of))
    counts = {"nodes": 0, "runs": 0, "actions": 0, "bytes": 0}

    def comp(c):
        return c if isinstance(c, str) else None

    def flush(node: str, lines: list[tuple[int, str]]) -> None:
        d = folder / node
        d.mkdir(exist_ok=True)
        text = "".join(line for _, line in sorted(lines, key=lambda x: x[0]))
        with open(d / "records.jsonl", "w", encoding="utf-8") as fh:
            fh.write(text)
        counts["nodes"] += 1
        counts["bytes"] += len(text)

    current, lines = None, []
    for i in order:
        node = node_of[i]
        if node != current:
            if current is not None:
                flush(current, lines)
            current, lines = node, []
            for a in acts_of.get(node, []):
                lines.append((int(a_time[a]), json.dumps({
                    "kind": "action", "schema_version": 1, "record_id": f"sim-{acts['record_id'].iat[a]}",
                    "run_id": None, "node": node, "time": _iso(a_time[a]),
                    "action": str(acts["action"].iat[a]), "reason": _text(acts["reason"].iat[a]), "job_id": None,
                    "context": str(acts["context"].iat[a]), "why": "simulated (benchmarks/fleet_sim.py)",
                    "checks": []}, separators=(",", ":")) + "\n"))
                counts["actions"] += 1
        if t_run[i] < start:
            continue
        results: dict[tuple, dict] = {}
        for j in range(m_lo[i], m_hi[i]):
            key = (m_check_of[m_check[j]], m_comp_of[m_comp[j]] if m_comp[j] >= 0 else None)
            r = results.setdefault(key, {"check": key[0], "component": key[1], "status": "pass", "message": "ok",
                                         "metrics": {}})
            r["metrics"][m_name_of[m_name[j]]] = float(m_val[j])
        for j in range(r_lo[i], r_hi[i]):
            key = (r_check[j], comp(r_comp[j]))
            r = results.setdefault(key, {"check": key[0], "component": key[1], "metrics": {}})
            r["status"], r["message"] = r_status[j], r_msg[j]
        lines.append((int(t_run[i]), json.dumps({
            "kind": "run", "schema_version": 1, "record_id": f"sim-{run_id[i]}", "run_id": run_id[i], "node": node, "context": ctx[i], "job_id": None,
            "started_at": _iso(t_run[i]), "duration_s": float(dur[i]), "status": status[i],
            "results": list(results.values()), "config_hash": None, "tool_version": "fleet_sim"},
            separators=(",", ":")) + "\n"))
        counts["runs"] += 1
    if current is not None:
        flush(current, lines)
    return counts


def topology_toml(sim: Sim) -> str:
    """The fleet's racks as a site config's ``[topology]`` section (node sets per rack)."""
    lines = ["# racks of the simulated fleet (benchmarks/fleet_sim.py)", "[topology.rack]"]
    lines += [f'{rack} = "{nodes}"' for rack, nodes in sim.topology["rack"].items()]
    return "\n".join(lines) + "\n"


def _end(text: str) -> pd.Timestamp:
    if text == "now":
        return pd.Timestamp.now(tz="UTC").floor("s")
    try:
        t = pd.Timestamp(text)
    except ValueError:
        raise SystemExit(f"fleet_sim: --end {text!r}: expected 'now' or an ISO-8601 time") from None
    return t.tz_localize("UTC") if t.tzinfo is None else t.tz_convert("UTC")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--days", type=int, default=90)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--end", default=NOW.isoformat(), metavar="WHEN",
                    help="when the history ends: 'now' or an ISO-8601 time (default: %(default)s)")
    ap.add_argument("--spool", metavar="DIR", help="write the nodes' spools under DIR (DIR/<node>/records.jsonl)")
    ap.add_argument("--spool-days", type=int, metavar="N", help="write only the last N days (default: all)")
    ap.add_argument("--topology", metavar="FILE", help="write the racks as a config's [topology] to FILE")
    args = ap.parse_args()
    t = time.perf_counter()
    try:
        sim = simulate(args.nodes, args.days, args.seed, now=_end(args.end))
    except ValueError as exc:
        raise SystemExit(f"fleet_sim: {exc}") from None
    took = time.perf_counter() - t
    sizes = ", ".join(f"{len(df):,} {name}" for name, df in sim.frames.items())
    mem = sum(df.memory_usage(deep=True).sum() for df in sim.frames.values()) / 2**20
    print(f"{args.nodes:,} nodes x {args.days} days in {took:.1f} s: {sizes}; {mem:,.0f} MiB in frames")
    print("planted:", {k: (v if len(v) < 4 else f"{v[0]}..{v[-1]} ({len(v)})") for k, v in sim.truth.items()})
    if args.topology:
        Path(args.topology).parent.mkdir(parents=True, exist_ok=True)
        Path(args.topology).write_text(topology_toml(sim), encoding="utf-8")
        print(f"wrote {args.topology} ([topology] of {len(sim.topology['rack']):,} racks)")
    if args.spool:
        t = time.perf_counter()
        try:
            c = write_spools(sim, args.spool, args.spool_days)
        except (ValueError, FileExistsError) as exc:
            raise SystemExit(f"fleet_sim: {exc}") from None
        print(f"wrote {c['nodes']:,} spools under {args.spool}: {c['runs']:,} run and {c['actions']:,} action "
              f"records, {c['bytes'] / 2**20:,.0f} MiB, in {time.perf_counter() - t:.1f} s; next: healthcheck "
              f"history ingest {args.spool}")


if __name__ == "__main__":
    main()
