"""``Summary`` fields handed over as ``Later`` (report/summary.py): read on first use, once; a failed read
raises at every use and stays pending; a value set over a pending one replaces it; a pickle holds values;
and `healthcheck report` turns a late read's failure into its "history unreachable" exit, not a traceback."""
from __future__ import annotations

import pickle

import pandas as pd
import pytest
from click.testing import CliRunner

from healthcheck.cli import report as cli_report
from healthcheck.core import exitcodes
from healthcheck.report.load import ReportInputError, _as_input_error
from healthcheck.report.summary import Later, summarize_frames
from tests.report.synth import make_frames

SINCE, NOW = pd.Timestamp("2024-05-01", tz="UTC"), pd.Timestamp("2024-06-01", tz="UTC")


def _summary(**later):
    summary = summarize_frames(make_frames(), SINCE, NOW, recent=5)
    fields = {name: getattr(summary, name) for name in ("node_days", "mtbf_runs", "first_seen")}
    kw = {f: getattr(summary, f) for f in summary.__dataclass_fields__}
    kw.update({name: Later(get) for name, get in later.items()})
    return type(summary)(**kw), fields  # the summary with those fields pending; the fields as they were


def test_a_later_field_is_read_on_first_use_and_once():
    calls = []
    days = pd.DataFrame({"node": ["n1"], "day": [1], "failed": [False]})

    def read():
        calls.append(1)
        return days

    summary, _ = _summary(node_days=read)
    assert summary.pending == {"node_days"} and not calls  # not read by constructing the summary
    assert summary.node_days is days and summary.node_days is days
    assert calls == [1] and not summary.pending


def test_a_failed_later_read_raises_each_time_and_stays_pending():
    def gone():
        raise ReportInputError("the history database went away", "history")

    summary, fields = _summary(mtbf_runs=gone)
    for _ in range(2):
        with pytest.raises(ReportInputError, match="went away"):
            summary.mtbf_runs
    assert summary.pending == {"mtbf_runs"}
    pd.testing.assert_frame_equal(summary.node_days, fields["node_days"])  # the others as they were


def test_a_value_set_over_a_pending_field_replaces_it_and_a_pickle_holds_values():
    first = pd.Series([NOW], index=pd.Index(["n1"], name="node"), name="first_seen")
    summary, _ = _summary(first_seen=lambda: first, node_days=lambda: pd.DataFrame({"x": [1]}))
    summary.node_days = None  # e.g. the caller's own
    assert summary.node_days is None and summary.pending == {"first_seen"}
    back = pickle.loads(pickle.dumps(summary))
    assert not back.pending and not summary.pending
    pd.testing.assert_series_equal(back.first_seen, first)


def test_the_report_loader_turns_a_late_read_error_into_its_input_error():
    from healthcheck.history.db import HistoryError

    def fails():
        raise HistoryError("could not reach the history database (connection refused)")

    summary, _ = _summary(node_days=fails)
    summary.wrap_later(_as_input_error)
    with pytest.raises(ReportInputError, match="connection refused") as err:
        summary.node_days
    assert err.value.kind == "history"


def test_the_cli_exits_unavailable_when_a_late_read_fails(monkeypatch, tmp_path):
    def fake_load(db_url, since, now, empty_is_error=False, recent=None):
        frames = make_frames()
        summary = summarize_frames(frames, since, now, recent=recent)
        kw = {f: getattr(summary, f) for f in summary.__dataclass_fields__}

        def gone():
            raise ReportInputError("history database: server closed the connection", "history")

        return type(summary)(**{**kw, "mtbf_runs": Later(gone)})

    monkeypatch.setattr("healthcheck.report.load.load_history", fake_load)
    res = CliRunner().invoke(cli_report.report, ["--since", "2024-05-01", "--html", str(tmp_path / "r.html")])
    assert res.exit_code == exitcodes.UNAVAILABLE, res.output
    assert "server closed the connection" in res.output and "Traceback" not in res.output
    assert not (tmp_path / "r.html").exists()
