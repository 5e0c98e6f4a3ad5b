"""Builders of small contract-shaped frames and hypothesis strategies for the analysis tests."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pandas as pd
from hypothesis import strategies as st

T0 = pd.Timestamp("2024-03-01 00:00", tz="UTC")


def hours(h: float) -> pd.Timestamp:
    return T0 + pd.Timedelta(hours=h)


def metrics(rows: list[tuple]) -> pd.DataFrame:
    """rows: (node, hour, check, component, name, value)."""
    return pd.DataFrame(
        [{"run_id": f"r{i}", "node": n, "started_at": hours(h), "check": c, "component": comp,
          "name": name, "value": v} for i, (n, h, c, comp, name, v) in enumerate(rows)],
        columns=["run_id", "node", "started_at", "check", "component", "name", "value"])


def actions(rows: list[tuple]) -> pd.DataFrame:
    """rows: (node, hour, action)."""
    return pd.DataFrame(
        [{"record_id": f"a{i}", "run_id": f"r{i}", "node": n, "time": hours(h), "action": a,
          "reason": f"healthcheck: {a} {i}", "job_id": None, "context": "sweep"}
         for i, (n, h, a) in enumerate(rows)],
        columns=["record_id", "run_id", "node", "time", "action", "reason", "job_id", "context"])


_times = st.datetimes(min_value=datetime(2020, 1, 1), max_value=datetime(2030, 1, 1),
                      timezones=st.sampled_from([None, timezone.utc,
                                                 timezone(timedelta(hours=-7))]))
_nodes = st.sampled_from(["n1", "n2", "n3", "gpu-a01"])
_floats = st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                    st.integers(-10, 10**6).map(float))
_names = st.sampled_from(["ecc_corrected_volatile", "busbw_gbps", "temperature_c",
                          "symbol_error"])


@st.composite
def metric_frames(draw) -> pd.DataFrame:
    rows = draw(st.lists(st.tuples(_nodes, _times, st.sampled_from(["c1", "c2"]),
                                   st.sampled_from([None, "GPU0", "GPU1", "mlx5_0/1"]),
                                   _names, _floats), max_size=30))
    return pd.DataFrame([{"run_id": "r", "node": n, "started_at": t, "check": c,
                          "component": comp, "name": name, "value": v}
                         for n, t, c, comp, name, v in rows],
                        columns=["run_id", "node", "started_at", "check", "component", "name",
                                 "value"])


@st.composite
def action_frames(draw) -> pd.DataFrame:
    rows = draw(st.lists(st.tuples(_nodes, _times, st.sampled_from(["drain", "resume", "other"])),
                         max_size=30))
    return pd.DataFrame([{"record_id": str(i), "run_id": None, "node": n, "time": t, "action": a,
                          "reason": None, "job_id": None, "context": "sweep"}
                         for i, (n, t, a) in enumerate(rows)],
                        columns=["record_id", "run_id", "node", "time", "action", "reason",
                                 "job_id", "context"])


@st.composite
def run_frames(draw) -> pd.DataFrame:
    rows = draw(st.lists(st.tuples(_nodes, _times,
                                   st.sampled_from(["pass", "warn", "fail", "FAIL", "error",
                                                    "skip", None])), max_size=30))
    return pd.DataFrame([{"run_id": str(i), "node": n, "context": "prolog", "job_id": None,
                          "started_at": t, "duration_s": 0.1, "status": s}
                         for i, (n, t, s) in enumerate(rows)],
                        columns=["run_id", "node", "context", "job_id", "started_at",
                                 "duration_s", "status"])


@st.composite
def result_frames(draw) -> pd.DataFrame:
    rows = draw(st.lists(st.tuples(_nodes, _times, st.sampled_from(["gpu.ecc", "ib.port"]),
                                   st.sampled_from([None, "GPU0"]),
                                   st.sampled_from(["pass", "warn", "fail", "error", "skip"]),
                                   st.one_of(st.none(), st.text(max_size=20))), max_size=30))
    return pd.DataFrame([{"run_id": "r", "node": n, "started_at": t, "check": c, "component": comp,
                          "status": s, "message": m} for n, t, c, comp, s, m in rows],
                        columns=["run_id", "node", "started_at", "check", "component", "status",
                                 "message"])
