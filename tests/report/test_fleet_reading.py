"""Reading the report at fleet scale without a browser: folded node lists, the fleet state per day, findings
grouped by check and action, capped tables with their CSVs, the footer, and the empty window as an error."""
from __future__ import annotations

import csv
import io
import re

import pandas as pd
import pytest

from healthcheck.report import build_report, render_html
from healthcheck.report import fleetstate as fs
from healthcheck.report.files import csv_base, write_html
from healthcheck.report.fold import count_text, fold, fold_limited
from healthcheck.report.html import MAX_ROWS, PREVIEW_ROWS, finding_groups
from healthcheck.report.tables import NAMES, cell, csv_tables
from healthcheck.report.window import EmptyWindow, newest_record, require_data
from tests.report.fleet_synth import SINCE as FLEET_SINCE
from tests.report.fleet_synth import make_fleet
from tests.report.synth import HOSTILE, NOW, SINCE, make_frames


@pytest.fixture(scope="module")
def fleet():
    return build_report(make_fleet(1_000), FLEET_SINCE, NOW)


def test_fold_as_clustershell_and_slurm_write_it():
    assert fold(["gpu017", "gpu001", "gpu002", "gpu033", "gpu003", "gpu002"]) == "gpu[001-003,017,033]"
    assert fold([]) == "" and count_text([]) == "0"
    assert count_text(["a1", "a2"]) == "2: a[1-2]"


def test_fold_keeps_names_nodeset_cannot_take_unchanged():
    odd = ["n[1]", "a,b", HOSTILE, "x y"]
    text = fold(["gpu1", "gpu2", *odd])
    assert text.startswith("gpu[1-2],")
    for name in odd:
        assert name in text


def test_fold_limited_cuts_between_ranges_never_inside_one():
    nodes = [f"n{i:05d}" for i in range(0, 20_000, 2)]  # nothing folds into a range: 10,000 pieces
    text, cut = fold_limited(nodes, 100)
    assert cut and len(text) <= 103 and text.endswith("],…")  # one long bracket, closed at a comma
    assert re.fullmatch(r"n\[(\d{5},)*\d{5}\],…", text), text
    mixed = [f"a{i}" for i in range(0, 400, 2)] + [f"b{i}" for i in range(0, 400, 2)]
    text, cut = fold_limited(mixed, len(fold(mixed)) - 5)
    assert cut and text.endswith("],…") and text.count("[") == text.count("]") == 1  # cut between node sets
    assert fold_limited(["a1"], 100) == ("a1", False)


def test_fleet_state_per_day_counts_each_node_once_a_day(fleet):
    days = fleet.fleet_days
    assert list(days.columns) == ["day", *fs.STATES, "partial", "hours"] and len(days) == 31
    per_day = days[list(fs.STATES)].sum(axis=1)
    assert per_day.iloc[0] == 0 and (per_day.iloc[1:] == 1_000).all()  # none counted before its first record
    last = days.iloc[-1]
    # 2 % + 1 % fail now (some overlap, some drained), 1 % drained by us, 0.2 % silent for 3 days
    assert last["drained_ours"] == 10 and last["down"] == 2 and 20 <= last["failing"] <= 30
    assert days.iloc[-4]["down"] == 0 and days.iloc[-3]["down"] == 2
    assert last["drained_others"] == 0


def test_fleet_state_derivation_by_hand():
    t0 = pd.Timestamp("2024-05-01T00:00:00Z")
    nd = pd.DataFrame({"node": ["a", "a", "b", "a"], "day": [t0, t0 + pd.Timedelta(days=1), t0,
                                                             t0 + pd.Timedelta(days=3)],
                       "failed": [False, True, False, False]})
    acts = pd.DataFrame({"record_id": ["1", "2", "3"], "run_id": None, "node": ["b", "b", "c"],
                         "time": [t0 + pd.Timedelta(hours=30), t0 + pd.Timedelta(hours=80),
                                  t0 + pd.Timedelta(hours=50)],
                         "action": ["drain", "resume", "drain"],
                         "reason": ["healthcheck: x", None, "maintenance (admin)"], "job_id": None,
                         "context": None})
    got = fs.daily_states(fs._finish(nd), acts, t0, t0 + pd.Timedelta(days=3, hours=12))
    rows = {f"{d:%d}": {s: int(got.loc[i, s]) for s in fs.STATES if got.loc[i, s]} for i, d in enumerate(got["day"])}
    assert rows == {"01": {"ready": 2}, "02": {"failing": 1, "drained_ours": 1},
                    "03": {"drained_ours": 1, "drained_others": 1, "down": 1},
                    "04": {"ready": 1, "drained_others": 1, "down": 1}}


def test_findings_grouped_by_check_and_action(fleet):
    groups = finding_groups(fleet)
    assert sum(g["count"] for g in groups) == len(fleet.findings)
    assert len(groups) < 12 < len(fleet.findings)
    remap = next(g for g in groups if g["subject"] == "gpu.row_remap")
    assert groups[0]["status"] == "fail" and len(remap["nodes"]) == 20
    page = render_html(fleet)
    assert re.search(r"20: gpu\[\d{5}", page)  # folded, with its count


def test_tables_capped_and_the_rest_in_the_csvs(fleet, tmp_path):
    assert len(fleet.risks) > MAX_ROWS
    paths = write_html(fleet, str(tmp_path / "readiness.html"))
    assert sorted(p.rsplit("/", 1)[-1] for p in paths) == sorted(
        [f"readiness.{n}.csv" for n in NAMES] + ["readiness.html"])
    page = (tmp_path / "readiness.html").read_text()
    risk = page[page.index('<h2 id="risk">'):page.index('<h2 id="trends">')]  # the fleet trends follow
    assert risk.count("<tr>") == MAX_ROWS + 2  # two header rows: the preview and the closed details
    assert f"{len(fleet.risks) - MAX_ROWS:,} more rows not shown" in risk and 'href="readiness.risk.csv"' in risk
    assert risk.index("<details") > risk.index("</table>")  # only PREVIEW_ROWS rows before the fold
    assert risk[:risk.index("<details")].count("<tr>") == PREVIEW_ROWS + 1
    rows = list(csv.reader(io.StringIO((tmp_path / "readiness.risk.csv").read_text())))
    assert len(rows) == len(fleet.risks) + 1 and rows[1][1] == fleet.risks[0].node
    for href in re.findall(r'href="([^"#]+)"', page):
        assert (tmp_path / href).is_file(), href


def test_csv_cells_are_never_formulas():
    assert cell("=cmd|' /C calc'!A0") == "'=cmd|' /C calc'!A0"
    assert [cell(x) for x in ("-1+1", "@x", "\tx", "gpu01", None, -3)] == ["'-1+1", "'@x", "'\tx", "gpu01", "", -3]
    frames = make_frames()
    frames["results"].loc[frames["results"]["check"] == "host.mounts", "message"] = "=HYPERLINK(\"x\")"
    text = csv_tables(build_report(frames, SINCE, NOW))["findings"]
    assert "'=HYPERLINK" in text and ",=HYPERLINK" not in text


def test_csv_base_of_the_page_name():
    assert csv_base("/srv/www/readiness.html") == "readiness" and csv_base("r") == "r"
    with pytest.raises(ValueError):
        csv_base("/srv/www/")


def test_footer_and_table_of_contents(fleet):
    fleet.config_hash = "c0ffee123456"
    page = render_html(fleet)
    foot = page[page.index('<footer id="about">'):]
    assert "healthcheck 0." in foot and "config hash c0ffee123456" in foot
    assert "data window 2024-05-01 12:00 UTC to 2024-05-31 12:00 UTC" in foot  # to the minute, for people
    ids = set(re.findall(r' id="([^"]+)"', page))
    anchors = re.findall(r'href="#([^"]+)"', page)
    assert anchors and set(anchors) <= ids
    # the counts and what to act on first (issue 35: the first screen shows the findings), then the days
    assert page.index('id="fleet"') < page.index('id="findings"') < page.index('id="fleet-days"')
    assert fleet.to_dict()["fleet_days"][-1]["drained_ours"] == 10


def test_an_empty_window_is_an_error_naming_the_newest_record():
    rep = build_report(make_frames(), NOW + pd.Timedelta(days=60), NOW + pd.Timedelta(days=90))
    with pytest.raises(EmptyWindow) as exc:
        require_data(rep, NOW.to_pydatetime())
    assert "newest record is from 2024-05-31 12:00" in str(exc.value) and "--since 2024-05-31" in str(exc.value)
    with pytest.raises(EmptyWindow, match="holds no record at all"):
        require_data(build_report({}, SINCE, NOW), None)
    require_data(build_report(make_frames(), SINCE, NOW), NOW.to_pydatetime())  # data: nothing raised


def test_newest_record_from_the_database(tmp_path):
    from healthcheck.history.db import make_engine, resolve_url
    from tests.report import history as hist

    engine = make_engine(resolve_url(f"sqlite:///{tmp_path / 'h.sqlite'}", env={}))
    from healthcheck.history import migrations

    migrations.require_current(engine, create=True)
    assert newest_record(engine) is None
    hist.store(engine, tmp_path / "spool")
    newest = newest_record(engine)
    # the newest run is n02's three runs after NOW (a clock ahead); later than every action
    assert newest == max(pd.Timestamp(r["started_at"]) for r in hist.run_records()).to_pydatetime()
    engine.dispose()
