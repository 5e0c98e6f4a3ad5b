"""Correlated (facility) events: thermal/power findings -> events -> clusters per rack/power group."""
from __future__ import annotations

import dataclasses
import math
import tomllib

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from healthcheck.analysis.correlated import (CORRELATED_COLUMNS, EVENT_COLUMNS, correlated_events,
                                             events_from_results, facility_nodes)
from healthcheck.burnin.judge_compute import judge_telemetry
from healthcheck.burnin.telemetry import TelemetrySummary
from healthcheck.history.queries import FRAME_COLUMNS
from healthcheck.parsers import ParseError
from healthcheck.config.topology import node_groups
from tests.checks.gpu_builders import h100, run, snapshot
from tests.conftest import FIXTURES, corpus_params

T0 = pd.Timestamp("2024-03-01 02:00", tz="UTC")
RACKS = node_groups({"rack": {"r01": "gpu[001-008]", "r02": "gpu[009-016]"}})


def at(minutes: float) -> pd.Timestamp:
    return T0 + pd.Timedelta(minutes=minutes)


def events(rows: list[tuple]) -> pd.DataFrame:
    """rows: (node, minutes after T0, kind)."""
    return pd.DataFrame([{"node": n, "time": at(m), "kind": k, "detail": f"{k} on {n}"}
                         for n, m, k in rows], columns=list(EVENT_COLUMNS))


def rows_of(out: pd.DataFrame) -> list[tuple]:
    return [tuple(r) for r in out[["level", "group", "kind", "nodes", "n_nodes", "group_size",
                                   "share"]].itertuples(index=False)]


def results(findings_by_node: list[tuple[str, float, list]]) -> pd.DataFrame:
    """A results frame as ``load_frames`` returns it, from (node, minutes, findings)."""
    rows = [(f"{node}-run", node, at(m).isoformat(), f.check, f.component, f.status.value, f.message)
            for node, m, findings in findings_by_node for f in findings]
    df = pd.DataFrame.from_records(rows, columns=list(FRAME_COLUMNS["results"]))
    df["started_at"] = pd.to_datetime(df["started_at"], utc=True, format="ISO8601")
    return df


# ------------------------------------------------------------------------------- correlated_events

def test_four_of_eight_nodes_of_a_rack_within_ten_minutes():
    ev = events([("gpu005", 6, "thermal"), ("gpu002", 0, "thermal"), ("gpu007", 10, "thermal"),
                 ("gpu003", 3, "thermal"), ("gpu012", 4, "thermal")])
    out = correlated_events(ev, RACKS)
    assert list(out.columns) == list(CORRELATED_COLUMNS)
    assert dict(out.dtypes.astype(str)) == CORRELATED_COLUMNS
    assert rows_of(out) == [("rack", "r01", "thermal", "gpu002,gpu003,gpu005,gpu007", 4, 8, 0.5)]
    assert (out["start"][0], out["end"][0]) == (at(0), at(10))
    assert facility_nodes(out) == {"gpu002", "gpu003", "gpu005", "gpu007"}


def test_the_same_events_spread_over_three_hours_are_not_correlated():
    ev = events([("gpu002", 0, "thermal"), ("gpu003", 60, "thermal"), ("gpu005", 120, "thermal"),
                 ("gpu007", 180, "thermal")])
    out = correlated_events(ev, RACKS)
    assert out.empty and dict(out.dtypes.astype(str)) == CORRELATED_COLUMNS
    assert facility_nodes(out) == set()
    # A three-hour window sees them together.
    assert rows_of(correlated_events(ev, RACKS, window=pd.Timedelta("3h")))[0][3] == \
        "gpu002,gpu003,gpu005,gpu007"


def test_events_in_two_racks_give_two_rows():
    ev = events([("gpu001", 40, "thermal"), ("gpu002", 41, "thermal"), ("gpu003", 42, "thermal"),
                 ("gpu009", 0, "thermal"), ("gpu016", 5, "thermal"), ("gpu010", 9, "thermal")])
    out = correlated_events(ev, RACKS)
    assert rows_of(out) == [("rack", "r02", "thermal", "gpu009,gpu010,gpu016", 3, 8, 0.375),
                            ("rack", "r01", "thermal", "gpu001,gpu002,gpu003", 3, 8, 0.375)]
    assert out["start"].tolist() == [at(0), at(40)] and out["end"].tolist() == [at(9), at(42)]


def test_a_power_group_spanning_racks():
    groups = node_groups({"rack": {"r01": "gpu[001-008]", "r02": "gpu[009-016]"},
                          "power": {"pdu-a": "gpu[007-010]", "pdu-b": "gpu[001-006]"}})
    ev = events([("gpu007", 0, "power"), ("gpu008", 2, "power"), ("gpu009", 2, "power"),
                 ("gpu010", 7, "power")])
    out = correlated_events(ev, groups)
    # Two nodes in each rack is below min_nodes 3; the PDU feeding all four explains them.
    assert rows_of(out) == [("power", "pdu-a", "power", "gpu007,gpu008,gpu009,gpu010", 4, 4, 1.0)]


def test_thermal_and_power_are_separate_kinds():
    mixed = events([("gpu001", 0, "thermal"), ("gpu002", 1, "power"), ("gpu003", 2, "thermal"),
                    ("gpu004", 3, "power")])
    assert correlated_events(mixed, RACKS).empty
    both = events([(f"gpu00{i}", i, "thermal") for i in (1, 2, 3)]
                  + [(f"gpu00{i}", i, "power") for i in (4, 5, 6)])
    out = correlated_events(both, RACKS)
    assert rows_of(out) == [("rack", "r01", "thermal", "gpu001,gpu002,gpu003", 3, 8, 0.375),
                            ("rack", "r01", "power", "gpu004,gpu005,gpu006", 3, 8, 0.375)]


def test_min_share_of_a_large_group():
    groups = node_groups({"rack": {"big": "gpu[001-020]"}})
    ev = events([(f"gpu00{i}", i, "thermal") for i in (1, 2, 3, 4)])
    assert correlated_events(ev, groups).empty            # 4 of 20 = 0.2 < 0.25
    out = correlated_events(ev, groups, min_share=0.2)
    assert rows_of(out) == [("rack", "big", "thermal", "gpu001,gpu002,gpu003,gpu004", 4, 20, 0.2)]


def test_a_group_of_one_never_correlates():
    groups = node_groups({"chassis": {"c1": "gpu001", "c2": "gpu[002-003]"}})
    ev = events([("gpu001", 0, "thermal"), ("gpu001", 1, "thermal"), ("gpu002", 0, "power")])
    assert correlated_events(ev, groups, min_nodes=1, min_share=0.0).empty
    # Nor does one node alone in a larger group, whatever min_nodes says.
    ev = events([("gpu002", 0, "thermal"), ("gpu002", 5, "thermal")])
    assert correlated_events(ev, groups, min_nodes=1, min_share=0.0).empty


def test_repeated_events_of_one_node_count_once():
    ev = events([("gpu001", m, "thermal") for m in range(0, 20, 2)] + [("gpu002", 3, "thermal")])
    assert correlated_events(ev, RACKS).empty
    out = correlated_events(ev, RACKS, min_nodes=2)
    assert rows_of(out) == [("rack", "r01", "thermal", "gpu001,gpu002", 2, 8, 0.25)]
    assert (out["start"][0], out["end"][0]) == (at(0), at(18))  # window at 0 reaches 30 min


def test_overlapping_windows_merge_and_separate_clusters_stay_separate():
    chain = events([(f"gpu00{i + 1}", 10 * i, "thermal") for i in range(6)])
    out = correlated_events(chain, RACKS)
    assert rows_of(out) == [("rack", "r01", "thermal", "gpu001,gpu002,gpu003,gpu004,gpu005,gpu006",
                             6, 8, 0.75)]
    assert (out["start"][0], out["end"][0]) == (at(0), at(50))
    apart = events([("gpu001", 0, "thermal"), ("gpu002", 10, "thermal"), ("gpu003", 20, "thermal"),
                    ("gpu004", 45, "thermal"), ("gpu005", 55, "thermal"), ("gpu006", 60, "thermal")])
    out = correlated_events(apart, RACKS)
    assert [r[3] for r in rows_of(out)] == ["gpu001,gpu002,gpu003", "gpu004,gpu005,gpu006"]
    assert out["end"].tolist() == [at(20), at(60)]


def test_window_boundary_is_inclusive():
    ev = events([("gpu001", 0, "thermal"), ("gpu002", 15, "thermal"), ("gpu003", 30, "thermal")])
    assert len(correlated_events(ev, RACKS)) == 1
    late = events([("gpu001", 0, "thermal"), ("gpu002", 15, "thermal"), ("gpu003", 30.01, "thermal")])
    assert correlated_events(late, RACKS).empty


def test_nodes_without_a_group_are_ignored_for_that_level():
    ev = events([("gpu001", 0, "thermal"), ("login1", 1, "thermal"), ("gpu099", 2, "thermal"),
                 ("gpu002", 3, "thermal")])
    assert correlated_events(ev, RACKS).empty
    ev = pd.concat([ev, events([("gpu003", 4, "thermal")])])
    assert rows_of(correlated_events(ev, RACKS))[0][3] == "gpu001,gpu002,gpu003"


def test_fixture_topology_rack_chassis_and_pdu():
    with open(FIXTURES / "topology" / "topology.toml", "rb") as fh:
        groups = node_groups(tomllib.load(fh)["topology"])
    ev = events([("gpu001", 0, "thermal"), ("gpu002", 4, "thermal"), ("gpu003", 8, "thermal"),
                 ("gpu011", 5, "power"), ("gpu012", 6, "power"), ("gpu004", 7, "power")])
    out = correlated_events(ev, groups)
    assert rows_of(out) == [
        ("chassis", "c01a", "thermal", "gpu001,gpu002,gpu003", 3, 4, 0.75),
        ("power", "pdu-a", "thermal", "gpu001,gpu002,gpu003", 3, 8, 0.375),
        ("rack", "r01", "thermal", "gpu001,gpu002,gpu003", 3, 8, 0.375),
        ("power", "pdu-a", "power", "gpu004,gpu011,gpu012", 3, 8, 0.375)]


def test_naive_and_zoned_times_and_string_frames():
    ev = events([("gpu002", 0, "thermal"), ("gpu003", 3, "thermal"), ("gpu005", 6, "thermal")])
    naive = ev.assign(time=ev["time"].dt.tz_localize(None))
    zoned = ev.assign(time=ev["time"].dt.tz_convert("America/Denver"))
    text = ev.assign(time=ev["time"].astype(str)).astype("category")
    want = correlated_events(ev, RACKS)
    assert len(want) == 1
    for variant in (naive, zoned, text):
        pd.testing.assert_frame_equal(correlated_events(variant, RACKS), want)


def test_empty_and_bad_input():
    for empty_events in (events([]), None, pd.DataFrame()):
        out = correlated_events(empty_events, RACKS)
        assert out.empty and dict(out.dtypes.astype(str)) == CORRELATED_COLUMNS
    assert correlated_events(events([("gpu001", 0, "thermal")]), {}).empty
    with pytest.raises(ValueError, match="events frame lacks column"):
        correlated_events(pd.DataFrame({"node": ["gpu001"]}), RACKS)
    with pytest.raises(ValueError, match=r"groups\['gpu001'\] must map level -> group"):
        correlated_events(events([]), {"gpu001": "r01"})
    with pytest.raises(ValueError, match="window"):
        correlated_events(events([]), RACKS, window=pd.Timedelta("-1min"))
    with pytest.raises(ValueError, match="min_share"):
        correlated_events(events([]), RACKS, min_share=1.5)
    with pytest.raises(ValueError, match="min_nodes"):
        correlated_events(events([]), RACKS, min_nodes=0)
    with pytest.raises(ValueError, match="correlated frame lacks column"):
        facility_nodes(pd.DataFrame({"node": []}))


# ---------------------------------------------------------------------------- events_from_results

def _throttle(*reasons: str, **thresholds) -> list:
    return run("gpu.throttle", snapshot(gpus=[h100(3, throttle_reasons=list(reasons))]), **thresholds)


def test_events_from_real_check_findings_in_a_load_frames_results_frame():
    hot = run("gpu.temperature", snapshot(gpus=[h100(0, temperature_c=90.0)]))
    capped = run("gpu.power", snapshot(gpus=[h100(1, power_limit_w=400.0)]), expected_limit_w=700)
    telemetry = judge_telemetry({2: TelemetrySummary(index=2, samples=100, temp_max_c=71.0,
                                                     power_mean_w=690.0, sm_clock_min_mhz=1200.0,
                                                     reasons={"hw_power_brake_slowdown": 0.125},
                                                     reason_samples=100)})
    frame = results([
        ("gpu001", 0, _throttle("hw_thermal_slowdown")),
        ("gpu002", 1, _throttle("sw_thermal_slowdown")),
        ("gpu003", 2, _throttle("sw_power_cap", sw_power_cap="warn")),
        ("gpu004", 3, _throttle("hw_thermal_slowdown", "hw_power_brake_slowdown")),
        ("gpu005", 4, _throttle("hw_slowdown")),
        ("gpu006", 5, hot), ("gpu007", 6, capped), ("gpu008", 7, telemetry),
        ("gpu009", 8, _throttle("gpu_idle") + _throttle("sw_power_cap")   # pass: no event
         + run("gpu.temperature", snapshot(gpus=[h100(0)]))),
    ])
    frame.loc[len(frame)] = ["x-run", "gpu010", at(9), "gpu.ecc", "gpu0", "fail", "thermal words"]
    ev = events_from_results(frame)
    assert list(ev.columns) == list(EVENT_COLUMNS) and dict(ev.dtypes.astype(str)) == EVENT_COLUMNS
    assert [tuple(r) for r in ev[["node", "kind"]].itertuples(index=False)] == [
        ("gpu001", "thermal"), ("gpu002", "thermal"), ("gpu003", "power"), ("gpu004", "power"),
        ("gpu004", "thermal"), ("gpu005", "thermal"), ("gpu006", "thermal"), ("gpu007", "power"),
        ("gpu008", "power")]
    assert ev["time"].tolist() == [at(m) for m in (0, 1, 2, 3, 3, 4, 5, 6, 7)]
    detail = dict(zip(ev["node"], ev["detail"]))
    assert detail["gpu001"] == "gpu.throttle gpu3 fail: clock slowdown active: hw_thermal_slowdown"
    assert detail["gpu006"] == "gpu.temperature gpu0 fail: GPU 90 C >= slowdown 89 C"
    assert detail["gpu008"].startswith("burnin.telemetry gpu2 fail: gpu2: hw_power_brake_slowdown 12.5%")


def test_events_from_results_status_case_missing_values_and_empty():
    frame = results([("gpu001", 0, _throttle("hw_thermal_slowdown"))])
    frame.loc[1] = ["r", "gpu002", at(1), "gpu.throttle", None, "WARN", None]
    frame.loc[2] = ["r", None, at(2), "gpu.throttle", None, "fail", "no node"]
    frame.loc[3] = ["r", "gpu004", None, "gpu.throttle", None, "fail", "no time"]
    ev = events_from_results(frame)
    assert ev[["node", "kind", "detail"]].values.tolist() == [
        ["gpu001", "thermal", "gpu.throttle gpu3 fail: clock slowdown active: hw_thermal_slowdown"],
        ["gpu002", "thermal", "gpu.throttle warn: "]]
    for empty_results in (None, pd.DataFrame(columns=list(FRAME_COLUMNS["results"]))):
        out = events_from_results(empty_results)
        assert out.empty and dict(out.dtypes.astype(str)) == EVENT_COLUMNS
    with pytest.raises(ValueError, match="results frame lacks column"):
        events_from_results(pd.DataFrame({"node": ["a"], "check": ["gpu.throttle"]}))


def test_results_through_the_history_store(tmp_path):
    """Findings -> spool -> SQLite -> load_frames -> events -> one facility row."""
    from healthcheck.history import migrations
    from healthcheck.history.db import make_engine, resolve_url
    from healthcheck.history.ingest import ingest
    from healthcheck.history.queries import load_frames
    from tests.history.recs import run_record, write_spool

    records = []
    for i, node in enumerate(["gpu001", "gpu003", "gpu006", "gpu012"]):
        rec = run_record(node, 0, when=at(2 * i).to_pydatetime())
        rec["results"] = [{"check": f.check, "status": f.status.value, "message": f.message,
                           "component": f.component, "metrics": f.metrics}
                          for f in _throttle("hw_thermal_slowdown")]
        records.append(rec)
    write_spool(tmp_path / "spool", records)
    engine = make_engine(resolve_url(f"sqlite:///{tmp_path / 'h.sqlite'}", env={}))
    try:
        migrations.upgrade(engine)
        ingest([tmp_path / "spool"], engine)
        frames = load_frames(engine, tables=("results",))
    finally:
        engine.dispose()
    ev = events_from_results(frames["results"])
    assert ev["node"].tolist() == ["gpu001", "gpu003", "gpu006", "gpu012"]
    assert ev["time"].tolist() == [at(0), at(2), at(4), at(6)]
    out = correlated_events(ev, RACKS)
    assert rows_of(out) == [("rack", "r01", "thermal", "gpu001,gpu003,gpu006", 3, 8, 0.375)]
    assert facility_nodes(out) == {"gpu001", "gpu003", "gpu006"}


# ------------------------------------------------------------------------------------ properties

_GROUPS = node_groups({"rack": {"r01": "gpu[001-006]", "r02": "gpu[007-012]"},
                       "power": {"pdu-a": "gpu[004-009]"}})
_member_events = st.lists(st.tuples(st.sampled_from(sorted(_GROUPS)), st.integers(0, 240),
                                    st.sampled_from(["thermal", "power"])), max_size=25)
_outside_events = st.lists(st.tuples(st.sampled_from(["login1", "gpu013", "gpu100", "cpu001"]),
                                     st.integers(0, 240), st.sampled_from(["thermal", "power"])),
                           min_size=1, max_size=15)


def _oracle(rows: list[tuple], window_min: float, min_nodes: int, min_share: float) -> set:
    """Brute force with Python sets: (level, group, kind, nodes, first minute, last minute)."""
    out = set()
    keys = {(lvl, grp, k) for n, _, k in rows for lvl, grp in _GROUPS.get(n, {}).items()}
    for lvl, grp, kind in keys:
        size = sum(1 for levels in _GROUPS.values() if levels.get(lvl) == grp)
        evs = sorted((m, n) for n, m, k in rows if k == kind and _GROUPS.get(n, {}).get(lvl) == grp)
        need = max(min_nodes, 2, math.ceil(min_share * size - 1e-9))
        spans = []
        for m0, _ in evs:
            inside = [(m, n) for m, n in evs if m0 <= m <= m0 + window_min]
            if len({n for _, n in inside}) >= need:
                spans.append([m0, max(m for m, _ in inside)])
        merged: list[list[float]] = []
        for lo, hi in sorted(spans):
            if merged and lo <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], hi)
            else:
                merged.append([lo, hi])
        for lo, hi in merged:
            nodes = ",".join(sorted({n for m, n in evs if lo <= m <= hi}))
            out.add((lvl, grp, kind, nodes, lo, hi))
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_member_events, _outside_events, st.sampled_from([10, 30, 60]), st.integers(1, 4),
       st.sampled_from([0.0, 0.25, 0.5]))
def test_outside_nodes_never_change_the_output_and_the_oracle_agrees(rows, outside, win, k, share):
    window = pd.Timedelta(minutes=win)
    out = correlated_events(events(rows), _GROUPS, window=window, min_nodes=k, min_share=share)
    more = correlated_events(events(rows + outside), _GROUPS, window=window, min_nodes=k,
                             min_share=share)
    pd.testing.assert_frame_equal(more, out)
    shuffled = correlated_events(events(list(reversed(rows)) + outside), _GROUPS, window=window,
                                 min_nodes=k, min_share=share)
    pd.testing.assert_frame_equal(shuffled, out)
    got = {(r.level, r.group, r.kind, r.nodes, (r.start - T0) / pd.Timedelta(minutes=1),
            (r.end - T0) / pd.Timedelta(minutes=1)) for r in out.itertuples()}
    assert got == _oracle(rows, win, k, share)
    assert (out["share"] == out["n_nodes"] / out["group_size"]).all()
    assert (out["start"] <= out["end"]).all() and (out["n_nodes"] >= 2).all()


# ------------------------------------------------------------------- real recordings (corpus)

@pytest.mark.parametrize("path", corpus_params("nvidia-smi", "q-*"))
def test_real_gpus_through_the_checks(path):
    """Each recording's GPUs on four nodes of a rack: the checks' real warn/fail findings become
    events of the kind their reasons name; a heat wave (each GPU at its own slowdown limit, or at
    T.Limit margin 0) is one thermal facility row."""
    from healthcheck.parsers.nvidia_smi import parse_nvidia_smi

    try:
        gpus = parse_nvidia_smi(path.read_text(encoding="utf-8", errors="replace")).gpus
    except ParseError:
        pytest.skip("not a parseable -q recording")
    nodes = ["gpu001", "gpu002", "gpu004", "gpu008"]

    def judged(gpu_list):
        snap = snapshot(gpus=gpu_list)
        return (run("gpu.throttle", snap, sw_power_cap="warn") + run("gpu.temperature", snap)
                + run("gpu.power", snap))

    findings = judged(gpus)
    ev = events_from_results(results([(n, 5 * i, findings) for i, n in enumerate(nodes)]))
    want: list[str] = []
    for f in findings:
        if f.status.value not in ("warn", "fail"):
            continue
        if f.check == "gpu.throttle":
            gpu = next(g for g in gpus if g.component == f.component)
            named = [r for r in gpu.throttle_reasons or [] if r in f.message]
            want += (["power"] if any("power" in r for r in named) else []) + (
                ["thermal"] if any("thermal" in r for r in named)
                or not any("power" in r for r in named) else [])
        else:
            want.append({"gpu.temperature": "thermal", "gpu.power": "power"}[f.check])
    assert sorted(ev["kind"]) == sorted(want * len(nodes))
    out = correlated_events(ev, RACKS)
    assert sorted(out["kind"]) == sorted(set(want))
    assert all(r.nodes == ",".join(nodes) for r in out.itertuples())

    # Absolute limits, or (Hopper, newer drivers: T.Limit offsets) a margin of 0 C to slowdown.
    hot = [dataclasses.replace(g, temperature_c=g.temp_slowdown_c) if (g.temp_slowdown_c or 0) >= 30
           else dataclasses.replace(g, temp_tlimit_margin_c=0.0) for g in gpus
           if (g.temp_slowdown_c or 0) >= 30 or g.temp_tlimit_margin_c is not None]
    if not hot:
        return
    ev = events_from_results(results([(n, 5 * i, judged(hot)) for i, n in enumerate(nodes)]))
    heat = correlated_events(ev[ev["kind"] == "thermal"], RACKS)
    assert rows_of(heat) == [("rack", "r01", "thermal", ",".join(nodes), 4, 8, 0.5)]
    assert (heat["start"][0], heat["end"][0]) == (at(0), at(15))
