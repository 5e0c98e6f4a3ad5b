"""URL resolution, passwords (file/env, never argv), redaction, SQLite settings."""
from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import text

from healthcheck.cli.history import db as db_group, history
from healthcheck.history import migrations
from healthcheck.history.db import (HistoryError, default_sqlite_path, make_engine, redact, redact_text,
                                    resolve_url)
from tests.history.recs import run_record, write_spool

SECRET = "s3cr%t p@ss:/word"


def test_default_sqlite_path_root_and_user():
    assert default_sqlite_path({}, euid=0) == Path("/var/lib/healthcheck/history.sqlite")
    assert default_sqlite_path({"XDG_DATA_HOME": "/x/data"}, euid=1000) == Path("/x/data/healthcheck/history.sqlite")
    assert default_sqlite_path({"HOME": "/home/ops"}, euid=1000) == Path(
        "/home/ops/.local/share/healthcheck/history.sqlite")


def test_resolution_order_cli_then_config_then_env_then_default():
    env = {"HEALTHCHECK_DB_URL": "postgresql://hc@envhost/hc", "XDG_DATA_HOME": "/d"}
    assert resolve_url("postgresql://hc@cli/hc", "postgresql://hc@cfg/hc", env).host == "cli"
    assert resolve_url(None, "postgresql://hc@cfg/hc", env).host == "cfg"
    url = resolve_url(None, None, env)
    assert url.host == "envhost" and url.drivername == "postgresql+psycopg"
    assert resolve_url(None, None, {"XDG_DATA_HOME": "/d"}, euid=1000).database == "/d/healthcheck/history.sqlite"
    assert resolve_url("relative.sqlite", env={}).database.endswith("/relative.sqlite")


def test_password_from_file_beats_env_and_is_never_in_redacted_text(tmp_path):
    pw = tmp_path / "pw"
    pw.write_text(SECRET + "\n")
    env = {"HEALTHCHECK_DB_PASSWORD_FILE": str(pw), "HEALTHCHECK_DB_PASSWORD": "other"}
    url = resolve_url("postgresql://hc@db.example:5432/hc", env=env)
    assert url.password == SECRET
    assert SECRET not in redact(url) and "***" in redact(url)
    assert resolve_url("postgresql://hc@db/hc", env={"HEALTHCHECK_DB_PASSWORD": "other"}).password == "other"
    with pytest.raises(HistoryError, match="HEALTHCHECK_DB_PASSWORD_FILE=.*No such file"):
        resolve_url("postgresql://hc@db/hc", env={"HEALTHCHECK_DB_PASSWORD_FILE": str(tmp_path / "missing")})


def test_password_on_the_command_line_is_refused_and_redacted():
    with pytest.raises(HistoryError) as err:
        resolve_url("postgresql://hc:hunter2@db.example/hc", env={})
    assert "hunter2" not in str(err.value) and "HEALTHCHECK_DB_PASSWORD_FILE" in str(err.value)
    result = CliRunner().invoke(history, ["show", "--db", "postgresql://hc:hunter2@db.example/hc"])
    assert result.exit_code == 2 and "hunter2" not in result.output and "Traceback" not in result.output
    assert redact("postgresql://u:hunter2@h/db") == "postgresql://u:***@h/db"
    assert redact_text("x s3cr%25t y s3cr%t", ["s3cr%t"]) == "x *** y ***"


def test_unsupported_or_garbage_urls(tmp_path):
    with pytest.raises(HistoryError, match="unsupported database 'mysql'"):
        resolve_url("mysql://u@h/db", env={})
    with pytest.raises(HistoryError, match="not a database URL"):
        resolve_url("postgresql://u:pw@h:notaport/db", env={})


def test_sqlite_runs_in_wal_mode_with_a_busy_timeout(tmp_path):
    engine = make_engine(resolve_url(str(tmp_path / "h.sqlite"), env={}), busy_timeout_s=7)
    with engine.connect() as conn:
        assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert conn.execute(text("PRAGMA busy_timeout")).scalar() == 7000


@pytest.mark.postgres
def test_wrong_password_error_is_clear_and_redacted(postgres_server, tmp_path, caplog):
    pwfile = tmp_path / "pw"
    pwfile.write_text(SECRET)
    env = {"HEALTHCHECK_DB_PASSWORD_FILE": str(pwfile)}
    engine = make_engine(resolve_url(postgres_server.url(), env=env))
    with pytest.raises(HistoryError) as err:
        migrations.upgrade(engine)
    message = str(err.value)
    assert "password authentication failed" in message and SECRET not in message
    assert "***" in message  # the URL is shown, its password masked
    assert SECRET not in caplog.text


@pytest.mark.postgres
def test_cli_with_password_file_works_and_never_prints_it(postgres_server, tmp_path, monkeypatch):
    postgres_server.admin("CREATE DATABASE cli_pw_test")
    pwfile = tmp_path / "pw"
    pwfile.write_text(postgres_server.password + "\n")
    monkeypatch.setenv("HEALTHCHECK_DB_PASSWORD_FILE", str(pwfile))
    monkeypatch.setenv("HEALTHCHECK_DB_URL", postgres_server.url("cli_pw_test"))
    write_spool(tmp_path / "sp", [run_record("gpu01", i) for i in range(2)])
    runner = CliRunner()
    outputs = []
    for group, args in ((db_group, ["upgrade"]), (db_group, ["status"]), (history, ["ingest", str(tmp_path / "sp")]),
                        (history, ["show"])):
        result = runner.invoke(group, args)
        assert result.exit_code == 0, result.output
        outputs.append(result.output)
    assert "stored 2 run(s)" in outputs[2] and "gpu01" in outputs[3]
    assert all(postgres_server.password not in out for out in outputs)
    pwfile.write_text("wrong-" + postgres_server.password)
    result = runner.invoke(history, ["show"])
    assert result.exit_code == 6 and "password authentication failed" in result.output  # the database refused us
    assert postgres_server.password not in result.output
    postgres_server.admin("DROP DATABASE cli_pw_test WITH (FORCE)")
