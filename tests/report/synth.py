"""Synthetic history frames (the load_frames contract) with known faults, for the report tests.

Fleet of 8 nodes, 8 GPUs each, one run per node every 6 hours over 10 days ending at NOW:
- gpu03: gpu.row_remap pending in its latest run (fail), drained by us, not resumed;
- gpu05: busbw 300 GB/s where peers have ~390 (outlier), GPU 2 temperature 92 C where peers ~60;
- gpu06: gpu2 ecc_corrected_volatile grows by 10 per run (40 runs -> +390), with one reset;
- gpu07: drained and resumed three times (flapping), ib.port.state down warn in the past only;
- HOSTILE (a node named with markup) fails host.mounts now with a hostile message.
"""
from __future__ import annotations

import pandas as pd

NOW = pd.Timestamp("2024-05-31T12:00:00Z")
SINCE = NOW - pd.Timedelta(days=30)
HOSTILE = '<script>alert("x")</script>&node'
HOSTILE_MSG = '</td><img src=x onerror=alert(1)> $x^2$ | `rm -rf` \x1b[31m'
NODES = [f"gpu{i:02d}" for i in range(1, 8)] + [HOSTILE]
RUNS_PER_NODE = 40


def make_frames() -> dict[str, pd.DataFrame]:
    runs, results, metrics, actions = [], [], [], []
    for n, node in enumerate(NODES):
        for k in range(RUNS_PER_NODE):
            t = NOW - pd.Timedelta(hours=6 * (RUNS_PER_NODE - 1 - k)) - pd.Timedelta(minutes=n)
            run_id = f"{n:02d}{k:030d}"
            latest = k == RUNS_PER_NODE - 1
            res = [("gpu.temperature", "gpu0", "pass", "60 C")]
            if node == "gpu03" and latest:
                res.append(("gpu.row_remap", "gpu1", "fail",
                            "row remap pending, GPU reset required; remapped rows: correctable 0, uncorrectable 1"))
            if node == "gpu07" and k == 10:
                res.append(("ib.port.state", "mlx5_0/1", "warn", "port Down (InfiniBand)"))
            if node == HOSTILE and latest:
                res.append(("host.mounts", "/scratch", "fail", HOSTILE_MSG))
            status = "fail" if any(r[2] == "fail" for r in res) else "warn" if any(r[2] == "warn" for r in res) \
                else "pass"
            runs.append((run_id, node, "slurm-check", None, t, 0.05, status))
            results += [(run_id, node, t, c, comp, s, m) for c, comp, s, m in res]
            for g in range(8):
                temp = 92.0 if (node == "gpu05" and g == 2) else 60.0 + g * 0.5 + (k % 3) * 0.2
                metrics.append((run_id, node, t, "gpu.temperature", f"gpu{g}", "temperature_c", temp))
                sbe = 0.0
                if node == "gpu06" and g == 2:
                    sbe = float(10 * k if k < 20 else 10 * (k - 20))  # reset at k=20
                metrics.append((run_id, node, t, "gpu.ecc.corrected", f"gpu{g}", "ecc_corrected_volatile", sbe))
            bus = 300.0 if node == "gpu05" else 390.0 + (n % 3)
            metrics.append((run_id, node, t, "burnin.nccl", None, "busbw_gbps", bus))
    drain_t = NOW - pd.Timedelta(hours=1)
    actions.append(("a-3", "r3", "gpu03", drain_t, "drain", "healthcheck: gpu.row_remap gpu1: pending", None, "prolog"))
    for i in range(3):
        t0 = NOW - pd.Timedelta(days=5 - i)
        actions.append((f"a-7d{i}", f"r7{i}", "gpu07", t0, "drain", "healthcheck: ib.port.state: down", None, "prolog"))
        actions.append((f"a-7r{i}", f"r7{i}r", "gpu07", t0 + pd.Timedelta(hours=2), "resume", None, None,
                        "slurm-check"))
    return {
        "runs": pd.DataFrame(runs, columns=["run_id", "node", "context", "job_id", "started_at", "duration_s",
                                            "status"]),
        "results": pd.DataFrame(results, columns=["run_id", "node", "started_at", "check", "component", "status",
                                                  "message"]),
        "metrics": pd.DataFrame(metrics, columns=["run_id", "node", "started_at", "check", "component", "name",
                                                  "value"]),
        "actions": pd.DataFrame(actions, columns=["record_id", "run_id", "node", "time", "action", "reason",
                                                  "job_id", "context"]),
    }
