"""`healthcheck history` / `healthcheck db` through click's runner on the groups themselves."""
from __future__ import annotations

import json

import click
import pytest
from click.testing import CliRunner

from healthcheck.cli.history import db, history
from tests.history.recs import action_record, run_record, write_spool


def _paths(group: click.Group, prefix: tuple[str, ...]):
    yield prefix
    for name, cmd in group.commands.items():
        yield prefix + (name,)


@pytest.mark.parametrize("group,path", [(g, p) for g, name in ((history, "history"), (db, "db"))
                                        for p in _paths(g, ())], ids=str)
def test_every_command_has_help_with_an_example(group, path):
    result = CliRunner().invoke(group, [*path, "--help"])
    assert result.exit_code == 0 and "Example:" in result.output
    assert f"healthcheck {group.name}" in result.output


@pytest.fixture
def dbfile(tmp_path):
    return str(tmp_path / "h.sqlite")


def test_ingest_show_export_round_trip(tmp_path, dbfile):
    write_spool(tmp_path / "sp" / "gpu01", [run_record("gpu01", i, status="fail" if i == 2 else "pass")
                                            for i in range(3)] + [action_record("gpu01", 2)])
    with open(tmp_path / "sp" / "gpu01" / "records.jsonl", "a") as fh:
        fh.write("{not json\n")
    runner = CliRunner()
    result = runner.invoke(history, ["ingest", str(tmp_path / "sp"), "--db", dbfile])
    assert result.exit_code == 0
    assert "stored 3 run(s) (30 results, 51 metrics) and 1 action(s)" in result.output
    assert "skipped" in result.output and "records.jsonl:5: not JSON" in result.output
    result = runner.invoke(history, ["ingest", str(tmp_path / "sp"), "--db", dbfile, "-q"])
    assert result.exit_code == 0 and "stored" not in result.output

    result = runner.invoke(history, ["show", "--db", dbfile, "--status", "fail"])
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert lines[0].split()[:3] == ["started_at", "node", "context"]
    assert len(lines) == 2 and "gpu.ecc:fail" in lines[1] and "2026-05-01T10:00:00Z" in lines[1]

    result = runner.invoke(history, ["show", "--db", dbfile, "--check", "gpu.ecc", "--node", "gpu01",
                                     "--since", "2026-05-01T09:00:00Z", "--format", "json", "--limit", "100"])
    doc = json.loads(result.output)
    rows = doc["rows"]
    assert doc["schema_version"] == 1 and doc["columns"][:3] == ["started_at", "node", "check"]
    assert len(rows) == 16 and {r["component"] for r in rows} == {f"GPU{g}" for g in range(8)}

    out = tmp_path / "actions.csv"
    result = runner.invoke(history, ["export", "--db", dbfile, "--format", "csv", "-o", str(out), "--table", "actions"])
    assert result.exit_code == 0 and "1 actions row(s)" in result.output
    assert out.read_text().splitlines()[0].startswith("record_id,run_id,node,time,action")


def test_usage_errors_exit_2_without_traceback(tmp_path, dbfile):
    runner = CliRunner()
    result = runner.invoke(history, ["show", "--db", dbfile, "--since", "last tuesday"])
    assert result.exit_code == 2 and "expected a duration like 30d" in result.output
    result = runner.invoke(history, ["ingest", str(tmp_path / "missing"), "--db", dbfile])
    assert result.exit_code == 2 and "no such file or directory" in result.output  # the input: usage
    result = runner.invoke(history, ["show", "--db", str(tmp_path / "nodir" / "h.sqlite")])
    assert result.exit_code == 6 and "unable to open database file" in result.output  # the database: unavailable
    for res in [result]:
        assert "Traceback" not in res.output


def test_db_upgrade_status_and_newer_schema(dbfile):
    runner = CliRunner()
    result = runner.invoke(db, ["status", "--db", dbfile])
    assert result.exit_code == 1 and "no schema yet" in result.output
    result = runner.invoke(db, ["upgrade", "--db", dbfile])
    assert result.exit_code == 0 and "upgraded empty -> 0005" in result.output
    result = runner.invoke(db, ["upgrade", "--db", dbfile])
    assert result.exit_code == 0 and "already at 0005" in result.output
    import sqlite3

    with sqlite3.connect(dbfile) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '0042'")
    result = runner.invoke(db, ["status", "--db", dbfile])
    assert result.exit_code == 6 and "newer than this healthcheck" in result.output  # unavailable, not usage
    for args in (["show", "--db", dbfile], ["export", "--db", dbfile, "--format", "csv", "-o", dbfile + ".csv"]):
        result = runner.invoke(history, args)
        assert result.exit_code == 6 and "newer than this healthcheck" in result.output  # unavailable, not usage


def test_ingest_verbose_prints_its_progress_anywhere(tmp_path, dbfile):
    write_spool(tmp_path / "sp" / "gpu01", [run_record("gpu01", i) for i in range(3)])
    runner = CliRunner()
    plain = runner.invoke(history, ["ingest", str(tmp_path / "sp"), "--db", dbfile])
    verbose = runner.invoke(history, ["ingest", str(tmp_path / "sp"), "--db", str(tmp_path / "other.sqlite"), "-v"])
    assert plain.exit_code == verbose.exit_code == 0
    extra = [line for line in verbose.output.splitlines() if line not in plain.output.splitlines()]
    assert extra, verbose.output  # the batch progress line(s), not printed off a terminal by default
    assert plain.output.splitlines()[-1] == verbose.output.splitlines()[-1]  # the same summary
    both = runner.invoke(history, ["ingest", str(tmp_path / "sp"), "--db", dbfile, "-q", "-v"])
    assert both.exit_code == 2 and "exclude each other" in both.output
