"""A database password never shows: not in the argv or environment of a child process, not in the
output, logs or error messages of `healthcheck history show|ingest|export`, `report --format json`,
`db upgrade|status` or `sweep --dry-run`. The database is an unreachable PostgreSQL (127.0.0.1, a closed
port), so every command fails on it, and a failing command is where a URL usually gets printed. A
password on the command line (`--db postgresql://u:pw@h/db`) or in `[history] db_url` is refused, the
message naming the fix (HEALTHCHECK_DB_PASSWORD_FILE) and never the password.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest

from healthcheck.history.db import HistoryError, redact, redact_text, resolve_url

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "S3cr3tZq9"  # survives any quoting or escaping: its absence proves every form's absence
SECRET = f"{TOKEN}/p@ss:w%rd+ ä"  # characters that URL quoting changes
FORMS = {SECRET, quote(SECRET), quote(SECRET, safe=""), quote_plus(SECRET), quote(SECRET, safe=" +")}


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # closed again when the socket is: connection refused


def assert_no_secret(*texts: str) -> None:
    for text in texts:
        assert TOKEN not in text, text
        for form in FORMS:
            assert form not in text, text


def healthcheck(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "healthcheck.cli", *args], capture_output=True, text=True,
                          errors="replace", env=env, timeout=120, cwd=cwd)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


@pytest.fixture
def world(tmp_path):
    """A base environment, a spool with nothing in it, a password file, an unreachable server's URL."""
    (tmp_path / "spool").mkdir()
    (tmp_path / "home").mkdir()
    pwfile = tmp_path / "db.pw"
    pwfile.write_text(SECRET + "\n")
    os.chmod(pwfile, 0o600)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path / "home"),
           "XDG_DATA_HOME": str(tmp_path / "home"), "LANG": "C.UTF-8"}
    return {"tmp": tmp_path, "env": env, "pwfile": pwfile,
            "url": f"postgresql://hc@127.0.0.1:{closed_port()}/healthcheck"}


COMMANDS = {
    "history-show": lambda w: ["history", "show"],
    "history-ingest": lambda w: ["history", "ingest", str(w["tmp"] / "spool")],
    "history-export": lambda w: ["history", "export", "--format", "csv", "-o", str(w["tmp"] / "out.csv")],
    "report-json": lambda w: ["report", "--format", "json"],
    "db-upgrade": lambda w: ["db", "upgrade"],
    "db-status": lambda w: ["db", "status"],
}


@pytest.mark.parametrize("source", ["password-env", "password-file", "url-env"])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_unreachable_database_errors_never_show_the_password(world, command, source):
    env = dict(world["env"])
    args = COMMANDS[command](world)
    if source == "password-env":
        env["HEALTHCHECK_DB_PASSWORD"] = SECRET
        args += ["--db", world["url"]]
    elif source == "password-file":
        env["HEALTHCHECK_DB_PASSWORD_FILE"] = str(world["pwfile"])
        args += ["--db", world["url"]]
    else:  # the whole URL, password inside, from the environment (allowed: not argv)
        env["HEALTHCHECK_DB_URL"] = world["url"].replace("hc@", f"hc:{quote(SECRET, safe='')}@")
    proc = healthcheck(args, env, world["tmp"])
    assert proc.returncode == 6, proc.stdout + proc.stderr  # the database could not be used (exitcodes.UNAVAILABLE)
    assert "Connection refused" in proc.stderr or "connection failed" in proc.stderr, proc.stderr
    assert "***" in proc.stderr  # the URL is named, its password masked
    assert_no_secret(proc.stdout, proc.stderr)
    assert not (world["tmp"] / "out.csv").exists()


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_password_on_the_command_line_is_refused_naming_the_fix(world, command):
    args = COMMANDS[command](world) + ["--db", f"postgresql://u:{quote(SECRET, safe='')}@h/db"]
    proc = healthcheck(args, world["env"], world["tmp"])
    assert proc.returncode == 2
    assert "HEALTHCHECK_DB_PASSWORD_FILE" in proc.stderr and "visible to every user" in proc.stderr
    assert_no_secret(proc.stdout, proc.stderr)


def fake_scontrol(tmp: Path) -> Path:
    """Prints nothing, exits 1; records its argv and environment for the test."""
    script = tmp / "fake-scontrol"
    script.write_text(f'#!/bin/sh\nprintf "%s\\n" "$0" "$@" >> {tmp}/scontrol.argv\nenv >> {tmp}/scontrol.env\n'
                      "exit 1\n")
    script.chmod(0o755)
    return script


def sweep_config(tmp: Path, extra: str = "") -> Path:
    config = tmp / "healthcheck.toml"
    config.write_text(f'[slurm]\nscontrol = "{fake_scontrol(tmp)}"\nstate_dir = "{tmp}/state"\n'
                      f'spool_dir = "{tmp}/spool"\n' + extra)
    return config


@pytest.mark.parametrize("source", ["password-env", "password-file"])
def test_sweep_dry_run_with_a_database_never_shows_or_passes_on_the_password(world, source):
    env = dict(world["env"])
    env.update({"HEALTHCHECK_DB_PASSWORD": SECRET} if source == "password-env"
               else {"HEALTHCHECK_DB_PASSWORD_FILE": str(world["pwfile"])})
    config = sweep_config(world["tmp"])
    for fmt in ("text", "json"):
        proc = healthcheck(["sweep", "--dry-run", "--config", str(config), "--db", world["url"], "--format", fmt],
                           env, world["tmp"])
        assert proc.returncode == 6 and "sweep stopped" in proc.stderr, proc.stdout + proc.stderr  # Slurm unusable
        assert_no_secret(proc.stdout, proc.stderr)
    argv = (world["tmp"] / "scontrol.argv").read_text()
    child_env = (world["tmp"] / "scontrol.env").read_text()
    assert "show" in argv and "node" in argv  # the child did run, twice
    assert_no_secret(argv, child_env)
    assert "HEALTHCHECK_DB" not in child_env  # the sanitised child environment carries none of it


def test_sweep_refuses_a_password_on_the_command_line(world):
    proc = healthcheck(["sweep", "--dry-run", "--config", str(sweep_config(world["tmp"])), "--db",
                        f"postgresql://u:{quote(SECRET, safe='')}@h/db"], world["env"], world["tmp"])
    assert_no_secret(proc.stdout, proc.stderr)
    assert proc.returncode == 2 and "HEALTHCHECK_DB_PASSWORD_FILE" in proc.stderr
    assert not (world["tmp"] / "scontrol.argv").exists()  # refused before anything ran


def test_sweep_burnin_jobs_do_not_get_the_database_password(monkeypatch, tmp_path):
    from healthcheck.config import Config
    from healthcheck.sweep.run import Sweeper
    from healthcheck.sweep.settings import SweepSettings

    monkeypatch.setenv("HEALTHCHECK_DB_PASSWORD", SECRET)
    monkeypatch.setenv("HEALTHCHECK_DB_URL", f"postgresql://hc:{quote(SECRET, safe='')}@db/hc")
    sweeper = Sweeper(Config(None), SweepSettings(), backend=None)
    env = sweeper.job_env(str(tmp_path))
    assert env["HEALTHCHECK_BURNIN_RESULTS_DIR"] == str(tmp_path)
    assert_no_secret("\n".join(f"{k}={v}" for k, v in env.items()))


@pytest.mark.parametrize("args", [
    lambda cfg: ["config", "validate", str(cfg)],
    lambda cfg: ["report", "--format", "json", "--config", str(cfg)],
    lambda cfg: ["sweep", "--dry-run", "--config", str(cfg)],
], ids=["config-validate", "report", "sweep"])
def test_a_password_in_the_config_db_url_is_refused_naming_the_fix(world, args):
    config = sweep_config(world["tmp"], f'[history]\ndb_url = "postgresql://u:{quote(SECRET, safe="")}@h/db"\n')
    proc = healthcheck(args(config), world["env"], world["tmp"])
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "must not carry a password" in proc.stderr and "HEALTHCHECK_DB_PASSWORD_FILE" in proc.stderr
    assert_no_secret(proc.stdout, proc.stderr)
    env = dict(world["env"], HEALTHCHECK_CONFIG=str(config))  # the site config, found by the history commands
    proc = healthcheck(["history", "show"], env, world["tmp"])
    assert proc.returncode == 2 and "must not carry a password" in proc.stderr
    assert_no_secret(proc.stdout, proc.stderr)
    assert not (world["tmp"] / "scontrol.argv").exists()  # a refused config starts nothing


def test_redaction_covers_the_promised_quoted_forms():
    for form in (SECRET, quote(SECRET, safe=""), quote_plus(SECRET)):
        assert redact_text(f"x {form} y", [SECRET]) == "x *** y"
    url = resolve_url("postgresql://hc@db/hc", env={"HEALTHCHECK_DB_PASSWORD": SECRET})
    assert url.password == SECRET and TOKEN not in redact(url) and "***" in redact(url)
    with pytest.raises(HistoryError) as err:
        resolve_url(f"postgresql://u:{quote(SECRET, safe='')}@h/db", env={})
    assert_no_secret(str(err.value))


def test_redaction_covers_the_form_sqlalchemy_renders():
    from sqlalchemy.engine import make_url

    rendered = make_url("postgresql://hc@db/hc").set(password=SECRET).render_as_string(hide_password=False)
    assert_no_secret(redact_text(rendered, [SECRET]), redact_text(quote(SECRET), [SECRET]))
