"""`healthcheck report` (the click command), with the history's frames fed directly."""
from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest
from click.testing import CliRunner

from healthcheck.cli import report as cli_report
from tests.report.synth import make_frames


@pytest.fixture
def frames(monkeypatch):
    seen = {}

    def fake_load(db_url, since, now, empty_is_error=False, recent=None):
        """The database replaced by the synthetic frames; the window judged by the library itself."""
        from healthcheck.report.summary import summarize_frames
        from healthcheck.report.window import require_data

        seen.update(db_url=db_url, since=since, now=now, recent=recent)
        frames = make_frames()
        summary = summarize_frames(frames, since, now, recent=recent)
        if empty_is_error:
            require_data(summary, frames["runs"]["started_at"].max().to_pydatetime())
        return summary

    monkeypatch.setattr("healthcheck.report.load.load_history", fake_load)
    return seen


def invoke(*args):
    return CliRunner().invoke(cli_report.report, list(args), catch_exceptions=False)


def test_help_has_an_example():
    res = invoke("--help")
    assert res.exit_code == 0 and "Example:" in res.output and "--since" in res.output


def test_html_file(frames, tmp_path):
    out = tmp_path / "r.html"
    res = invoke("--since", "2024-05-01", "--html", str(out), "--db", "sqlite:///x.sqlite")
    assert res.exit_code == 0, res.output
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>") and '<h2 id="risk">' in page and "<svg" in page
    assert frames["db_url"] == "sqlite:///x.sqlite"
    assert frames["since"] == datetime(2024, 5, 1, tzinfo=timezone.utc)
    assert "wrote" in res.output and "findings" in res.output


def test_json_and_markdown(frames, tmp_path):
    res = invoke("--since", "2024-05-01T00:00:00Z", "--format", "json")
    assert res.exit_code == 0
    data = json.loads(res.output)
    assert data["fleet"]["counts"]["failing"] == 1 and data["checks"][0]["check"] == "gpu.row_remap"
    res = invoke("--since", "2024-05-01", "--format", "markdown", "-o", str(tmp_path / "r.md"))
    assert res.exit_code == 0 and "## Nodes ranked by risk" in (tmp_path / "r.md").read_text()


def test_default_window_without_data_exits_1_naming_the_newest_record(frames):
    res = CliRunner().invoke(cli_report.report, [])  # --since 30d: the synthetic history (May 2024) is older
    assert res.exit_code == 1, res.output
    assert "no run or drain/resume record" in res.output and "2024-05" in res.output and "--since" in res.output


def test_node_classes_from_config(frames, tmp_path):
    cfg = tmp_path / "hc.toml"
    cfg.write_text('[class.fast]\nnodes = "gpu05"\n[class.std]\nnodes = "gpu[01-04,06-07]"\n')
    res = invoke("--since", "2024-05-01", "--format", "json", "--config", str(cfg))
    assert res.exit_code == 0, res.output
    dist = {d["metric"]: d for d in json.loads(res.output)["distributions"]}
    assert dist["busbw_gbps"]["outliers"] == []  # gpu05 has no peers in its class
    assert {r["node_class"] for r in json.loads(res.output)["risks"]} >= {"std", "fast"}


@pytest.mark.parametrize("args,msg", [
    (["--since", "yesterday"], "expected a duration"),
    (["--html", "x.html", "--format", "json"], "not both"),
])
def test_usage_errors(frames, args, msg):
    res = CliRunner().invoke(cli_report.report, args)
    assert res.exit_code == 2 and msg in res.output


def test_bad_config_is_a_clean_error(frames, tmp_path):
    cfg = tmp_path / "bad.toml"
    cfg.write_text("[class.x\n")
    res = CliRunner().invoke(cli_report.report, ["--config", str(cfg)])
    assert res.exit_code == 2 and "Traceback" not in res.output


def test_parse_since():
    from healthcheck.core.timespec import parse_since

    now = datetime(2024, 5, 31, tzinfo=timezone.utc)
    assert parse_since("30d", now) == datetime(2024, 5, 1, tzinfo=timezone.utc)
    assert parse_since("12h", now).hour == 12
    assert parse_since("2024-05-02T03:00:00+02:00", now).hour == 1


def test_an_unwritable_output_is_refused_before_the_history_is_read(frames, tmp_path):
    """Issue 35.6: `report --html DIR/x.html` into a missing DIR was an internal error (exit 3) after the
    whole build; now a usage error (exit 2) before any work."""
    res = CliRunner().invoke(cli_report.report, ["--since", "2024-05-01", "--html", str(tmp_path / "no" / "x.html")])
    assert res.exit_code == 2 and "does not exist" in res.output, res.output
    assert frames == {}  # the history was never loaded
    res = CliRunner().invoke(cli_report.report, ["--format", "json", "-o", str(tmp_path)])
    assert res.exit_code == 2 and "is a folder" in res.output


def test_report_quiet_and_verbose(frames, tmp_path):
    verbose = CliRunner().invoke(cli_report.report, ["--since", "2024-05-01", "--format", "json", "-o",
                                                     str(tmp_path / "r.json"), "-v"])
    quiet = CliRunner().invoke(cli_report.report, ["--since", "2024-05-01", "--format", "json", "-o",
                                                   str(tmp_path / "q.json"), "-q", "--progress"])
    assert verbose.exit_code == quiet.exit_code == 0
    assert "load" in verbose.output and len(quiet.output.strip().splitlines()) < len(verbose.output.strip().splitlines())
