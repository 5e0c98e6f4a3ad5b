"""Issue 35, points 1-3: the readiness report tells the truth at fleet scale.

A simulated 1,000-node, 90-day fleet (benchmarks/fleet_sim.py, four planted faults) reported the way an
admin runs it: the last 30 days, five hours into today, without a [topology]: partial days are drawn as
partial, "new" means first seen in the whole history, an empty table says "not enough history" when it
could not look, findings follow the ranking's persistence rule with the worst case as each group's
example, a rack's shared cause is one row of the risk table, numbers and times are written for people.
"""
from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from healthcheck.report import build_report, render_html, render_json, render_markdown
from healthcheck.report import fleetstate as fs
from healthcheck.report.fold import fold
from healthcheck.report.human import duration_h, num, rate, when
from healthcheck.report.model import Finding
from healthcheck.report.summary import summarize_frames
from healthcheck.report.tables import csv_tables
from tests.report.synth import NOW, SINCE, make_frames
from tests.report.test_fleet_planted import _fleet_sim


@pytest.fixture(scope="module")
def sim():
    return _fleet_sim().simulate(nodes=1000, days=90, seed=0)


@pytest.fixture(scope="module")
def today(sim):
    """The report of the last 30 days, five hours into today (runs up to then), no [topology]."""
    now = sim.now - pd.Timedelta(hours=19)
    since = now - pd.Timedelta(days=30)
    return build_report(summarize_frames(sim.frames, since, now, recent=5), since, now, gpu_model=sim.gpu_model)


# ---- point 1: partial days, new nodes, "not enough history", a stale history, --until

def test_a_partial_day_is_drawn_partial_never_down(today):
    days = today.fleet_days
    last, first = days.iloc[-1], days.iloc[0]
    assert bool(last["partial"]) and last["hours"] == 5.0 and bool(first["partial"]) and first["hours"] == 19.0
    assert not days["partial"].iloc[1:-1].any()
    # before: "992 down (no run that day)" for a day five hours old
    assert last["down"] <= 3 and last["no_run_yet"] > 700
    assert last[list(fs.STATES)].sum() == 1000
    page = render_html(today)
    assert "partial: the window covers 5 h of it" in page and 'fill-opacity="0.45"' in page
    rec = json.loads(render_json(today))["fleet_days"][-1]
    assert rec["partial"] is True and rec["no_run_yet"] == int(last["no_run_yet"])


def test_partial_day_by_hand_a_node_silent_since_yesterday_is_still_down():
    t0 = pd.Timestamp("2024-05-01T00:00:00Z")
    day = pd.Timedelta(days=1)
    nd = pd.DataFrame({"node": ["a", "b", "c", "a", "c"], "day": [t0, t0, t0, t0 + day, t0 + 2 * day],
                       "failed": [False] * 5})
    got = fs.daily_states(fs._finish(nd), None, t0, t0 + 2 * day + pd.Timedelta(hours=5))
    rows = {f"{d:%d}": {s: int(got.loc[i, s]) for s in fs.STATES if got.loc[i, s]} for i, d in enumerate(got["day"])}
    # day 3 is 5 h old: a ran yesterday (not yet today), b has been silent since day 1 (down), c ran
    assert rows == {"01": {"ready": 3}, "02": {"ready": 1, "down": 2}, "03": {"ready": 1, "down": 1, "no_run_yet": 1}}
    assert list(got["partial"]) == [False, False, True] and list(got["hours"]) == [24.0, 24.0, 5.0]
    # a window that ends at midnight does not touch the next day (before: a day of 0 h, everyone "down")
    assert len(fs.daily_states(fs._finish(nd), None, t0, t0 + 3 * day)) == 3


def test_new_nodes_are_those_first_seen_in_the_whole_history(sim, today):
    rows = today.fleet_tables["new-nodes"]
    assert sorted(r["node"] for r in rows) == sorted(sim.new_nodes) and len(rows) == 20  # before: 1,000
    assert "new-nodes" not in today.fleet_notes


def test_no_regression_for_want_of_history_is_not_none(sim, today):
    assert today.fleet_tables["regressions"] == []
    note = today.fleet_notes["regressions"]
    assert note.startswith("not enough history: 4 samples of 6 per unit")
    page = render_html(today)
    trends = page[page.index('<h2 id="trends">'):]
    assert "Regressions against the unit&#x27;s own baseline: not enough history: 4 samples of 6" in trends
    assert "Regressions against the unit&#x27;s own baseline: none" not in trends
    assert "Not enough history: 4 samples of 6" in render_markdown(today)
    assert json.loads(render_json(today))["fleet_table_notes"]["regressions"] == note
    # with the 90 days the drop is found, and "none" would be the truth elsewhere: no note
    whole = build_report(summarize_frames(sim.frames, sim.since, sim.now, recent=5), sim.since, sim.now,
                         gpu_model=sim.gpu_model)
    assert {r["node"] for r in whole.fleet_tables["regressions"]} == set(sim.truth["gemm_drop"])
    assert "regressions" not in whole.fleet_notes


def test_a_stale_history_says_how_old_its_newest_record_is_first():
    frames = make_frames()
    later = NOW + pd.Timedelta(days=21)
    rep = build_report(frames, SINCE + pd.Timedelta(days=21), later)
    assert "21 days before the report's end" in rep.stale and "2024-05-31 12:00 UTC" in rep.stale
    page = render_html(rep, plots=False)
    body = page[page.index("<body>"):]
    assert body.index('id="stale"') < body.index('class="meta"') < body.index('<h2')  # first thing, under the title
    md = render_markdown(rep).splitlines()
    assert md[2].startswith("> **Stale history: the newest record is from 2024-05-31")
    assert json.loads(render_json(rep))["stale"] == rep.stale
    assert build_report(frames, SINCE, NOW).stale == ""  # a fresh history says nothing


def test_until_reports_a_past_period(monkeypatch):
    from click.testing import CliRunner

    from healthcheck.cli import report as cli_report

    seen = {}

    def fake_load(db_url, since, now, empty_is_error=False, recent=None):
        seen.update(since=since, now=now)
        return summarize_frames(make_frames(), since, now, recent=recent)

    monkeypatch.setattr("healthcheck.report.load.load_history", fake_load)
    res = CliRunner().invoke(cli_report.report, ["--until", "2024-05-20T00:00:00Z", "--since", "7d", "--format",
                                                 "json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["until"] == "2024-05-20T00:00:00Z" and data["since"] == "2024-05-13T00:00:00Z"
    assert seen["now"] == pd.Timestamp("2024-05-20T00:00:00Z")
    for args, msg in ((["--until", "2999-01-01"], "in the future"),
                      (["--since", "2024-05-21", "--until", "2024-05-20"], "is not before"),
                      (["--until", "yesterday"], "--until 'yesterday': expected a duration")):
        res = CliRunner().invoke(cli_report.report, args)
        assert res.exit_code == 2 and msg in res.output, res.output


# ---- point 2: findings under the ranking's persistence rule, worst case, folded, in every output

def test_findings_are_the_planted_faults_under_the_persistence_rule(sim, today):
    planted = sim.planted
    groups = json.loads(render_json(today))["finding_groups"]
    by = {(g["kind"], g["subject"]): g for g in groups}
    flap = sim.truth["flapping_ib"][0]
    # before: 48 link_downed nodes (one link-down in a month) told to replace the cable; now the flapping one
    assert by[("growth", "link_downed")]["nodes"] == flap and by[("flapping", "drain/resume")]["nodes"] == flap
    assert by[("growth", "link_downed")]["example"].startswith(f"{flap}: grew by 16")
    # before: 6 outlier nodes, 4 of them one-off noise
    outliers = {n for (kind, _), g in by.items() if kind == "outlier" for n in g["nodes"].split(",")}
    assert outliers == set(sim.truth["gemm_drop"])
    assert by[("floor", "temperature_c")]["nodes"] == sim.truth["heating"][0]
    # every finding is a planted fault, but the persistent full disks (a real, low-severity warning)
    flagged = {f.node for f in today.findings}
    assert flagged - planted == {f.node for f in today.findings if f.subject == "host.disk"} - planted
    pcie = by[("check+floor", "gpu.pcie.link (pcie_width)")]  # the rack's links: one row, whole rack
    assert pcie["nodes"].startswith("gpu[000") and pcie["n_nodes"] == len(sim.truth["pcie_rack"])  # folded for Slurm


def test_a_groups_example_is_its_worst_case():
    from healthcheck.report.groups import finding_groups

    class R:
        findings = [Finding("growth", f"n{i}", "link_downed", "mlx5_0/1", "warn", f"grew by {g}", None, "act",
                            float(g)) for i, g in enumerate([1, 19, 3])]
    (g,) = finding_groups(R)
    assert g["example"] == "n1 [mlx5_0/1]: grew by 19" and g["count"] == 3


def test_markdown_and_json_group_findings_like_the_html(today):
    md = render_markdown(today)
    findings = md[md.index("## Findings"):md.index("## Failing checks")]
    rows = [line for line in findings.splitlines() if line.startswith("| ") and not line.startswith("| status")]
    groups = json.loads(render_json(today))["finding_groups"]
    assert len(rows) == len(groups) < 12
    pcie = next(line for line in rows if "gpu.pcie.link" in line)
    assert "gpu[000" in pcie and "\\[" not in pcie  # the node set pastes into scontrol as it is
    assert all(set(g) >= {"status", "kind", "subject", "nodes", "n_nodes", "example", "action"} for g in groups)


# ---- the risk table (point 4's part of it) and point 3: numbers and times for people

def test_a_racks_shared_cause_is_one_row_and_the_hot_gpu_ranks_next(sim, today):
    from healthcheck.report.shared import risk_rows

    rows = risk_rows(today)
    assert rows[0]["group"] and rows[0]["node"] == fold(sim.truth["pcie_rack"]) and rows[0]["n_nodes"] == 32
    top = [r["node"] for r in rows[:4]]
    assert set(top[1:]) == {sim.truth[k][0] for k in ("heating", "gemm_drop", "flapping_ib")}  # before: #32
    page = render_html(today)
    risk = page[page.index('<h2 id="risk">'):page.index('<h2 id="trends">')]
    assert "4 of 5.0" not in risk and re.search(r">\d of \d<", risk)
    assert "white-space:nowrap" in page and '<td class="node">gpu00101</td>' in risk
    rows = [r for r in re.findall(r"<tr>(.*?)</tr>", risk) if "<td" in r]
    assert len(rows) == 50
    for row in rows:  # value/peers/limit: one "measured" cell, never empty
        cells = re.findall(r"<td[^>]*>(.*?)</td>", row)
        assert cells[6], row


def test_numbers_and_times_for_people():
    assert [num(x) for x in (22840.0, 745.21, 0.001443, 3, 16.0, None, float("nan"))] == \
        ["22,840", "745.2", "0.001443", "3", "16", "", ""]
    assert [duration_h(x) for x in (0.5, 5.0, 47.9, 22840.0)] == ["30 min", "5 h", "47.9 h", "952 days"]
    assert when("2026-05-31T05:00:12.345678Z") == "2026-05-31 05:00" and rate(0.00144) == "0.0346/day"


def test_no_exponent_no_microsecond_in_any_rendered_output_csv_full_precision(today):
    page, md = render_html(today, plots=False), render_markdown(today)
    for text in (page, md):
        assert not re.search(r"\d\.\d+e[+-]\d\d", text)
        assert not re.search(r"\d\d:\d\d:\d\d\.\d{6}", text)
    mtbf = today.fleet_tables["mtbf-check"]
    assert mtbf and f"{mtbf[0]['key']} {duration_h(mtbf[0]['mtbf_h'])}" in page
    csv = csv_tables(today)["mtbf-check"]
    assert "mtbf_h" in csv.splitlines()[0] and repr(mtbf[0]["mtbf_h"]) in csv  # full precision, unit in the name


def test_every_markdown_table_row_has_its_headers_columns(today):
    """Each row of every Markdown table has as many cells as its header (the "why" table had 7 headers
    for 5 cells once the value/peers/limit columns became one)."""
    header = None
    for line in render_markdown(today).splitlines():
        if not line.startswith("|"):
            header = None
            continue
        cells = len(re.findall(r"(?<!\\)\|", line))
        if header is None:
            header = cells
        assert cells == header, line


def test_csvs_of_the_fleet_days_carry_partial_days(today):
    rows = csv_tables(today)["fleet-days"].splitlines()
    assert rows[0].endswith(",no_run_yet,partial,hours") and rows[-1].endswith(",True,5.0")
