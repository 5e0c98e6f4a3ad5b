"""Fixtures of the history-store tests: a real private PostgreSQL server, and a fresh store per test
parametrized over SQLite and PostgreSQL.

``postgres_server`` (session): Debian's ``postgresql`` (installed through scripts/lib.sh's apt_install
when missing, as root), ``initdb`` into a tmp dir (as the ``postgres`` user when we are root: the server
refuses to run as root), started on 127.0.0.1 at a free port with its socket in the tmp dir, password
authentication over TCP (scram-sha-256; the password is random), trust only on its private socket. It
FAILS when it cannot start (CI never passes by skipping); HEALTHCHECK_SKIP_POSTGRES=1 skips on purpose.

``store`` (per test): a ``Store`` with an empty database (a new SQLite file, or a new PostgreSQL
database), its URL without the password, and the ``env`` that supplies the password.
"""
from __future__ import annotations

import glob
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIB = ROOT / "scripts" / "lib.sh"
SKIP_ENV = "HEALTHCHECK_SKIP_POSTGRES"


def _bindir() -> Path | None:
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"),
                        key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0)
    if candidates:
        return Path(candidates[-1]).parent
    found = shutil.which("pg_ctl")
    return Path(found).resolve().parent if found else None


def _ensure_postgres() -> Path:
    if _bindir() is None:
        if os.geteuid() != 0:
            pytest.fail("PostgreSQL missing and not root: install Debian's postgresql or set "
                        f"{SKIP_ENV}=1", pytrace=False)
        try:
            proc = subprocess.run(["bash", "-c", 'source "$0"; apt_install "$@"', str(LIB), "postgresql"],
                                  capture_output=True, text=True, timeout=900)
        except subprocess.TimeoutExpired:
            pytest.fail("installing postgresql took over 15 minutes", pytrace=False)
        if proc.returncode != 0 or _bindir() is None:
            pytest.fail(f"could not install postgresql (exit {proc.returncode}):\n{proc.stderr[-2000:]}",
                        pytrace=False)
    return _bindir()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class PostgresServer:
    bindir: Path
    base: Path
    port: int
    password: str
    user: str = "postgres"
    as_postgres: bool = False
    log: Path = field(init=False)

    def __post_init__(self) -> None:
        self.log = self.base / "server.log"

    @property
    def data(self) -> Path:
        return self.base / "data"

    def _run(self, argv: list[str], timeout: float = 120) -> subprocess.CompletedProcess:
        if self.as_postgres:
            argv = ["runuser", "-u", "postgres", "--", *argv]
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=self.base)

    def initdb(self) -> None:
        pwfile = self.base / "pw"
        pwfile.write_text(self.password + "\n")
        if self.as_postgres:
            shutil.chown(pwfile, "postgres")
        proc = self._run([str(self.bindir / "initdb"), "-D", str(self.data), "-U", self.user, "--pwfile",
                          str(pwfile), "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8",
                          "--no-sync"])
        pwfile.unlink()
        if proc.returncode != 0:
            raise RuntimeError(f"initdb failed: {proc.stdout}\n{proc.stderr}")

    def start(self) -> None:
        options = (f"-p {self.port} -k {self.base} -c listen_addresses=127.0.0.1 -c fsync=off "
                   "-c synchronous_commit=off -c full_page_writes=off -c max_connections=60")
        proc = self._run([str(self.bindir / "pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-o", options,
                          "-w", "-t", "60", "start"])
        if proc.returncode != 0:
            raise RuntimeError(f"pg_ctl start failed: {proc.stdout}\n{proc.stderr}\n{self._log_tail()}")

    def stop(self) -> None:
        self._run([str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop"])

    def _log_tail(self) -> str:
        try:
            return self.log.read_text()[-2000:]
        except OSError:
            return ""

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{database}"

    def admin(self, sql: str) -> None:
        """Run SQL as the superuser over the private socket (trust), autocommit."""
        proc = self._run([str(self.bindir / "psql"), "-h", str(self.base), "-p", str(self.port), "-U", self.user,
                          "-d", "postgres", "-v", "ON_ERROR_STOP=1", "-qAtc", sql])
        if proc.returncode != 0:
            raise RuntimeError(f"psql {sql!r}: {proc.stderr}")


@pytest.fixture(scope="session")
def postgres_server():
    if os.environ.get(SKIP_ENV) == "1":
        pytest.skip(f"{SKIP_ENV}=1")
    bindir = _ensure_postgres()
    as_postgres = os.geteuid() == 0
    base = Path(tempfile.mkdtemp(prefix="hc-pg-"))
    os.chmod(base, 0o700)
    if as_postgres:
        shutil.chown(base, "postgres", "postgres")
    server = PostgresServer(bindir, base, _free_port(), "pw-" + secrets.token_hex(12), as_postgres=as_postgres)
    try:
        server.initdb()
        server.start()
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        shutil.rmtree(base, ignore_errors=True)
        pytest.fail(f"could not start PostgreSQL: {exc}", pytrace=False)
    yield server
    server.stop()
    shutil.rmtree(base, ignore_errors=True)


@dataclass
class Store:
    kind: str              # "sqlite" | "postgres"
    url: str               # no password in it
    env: dict[str, str]    # what supplies the password (HEALTHCHECK_DB_PASSWORD)
    server: PostgresServer | None = None

    def engine(self):
        from healthcheck.history.db import make_engine, resolve_url

        return make_engine(resolve_url(self.url, env=self.env))


_counter = iter(range(1, 1_000_000))


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request, tmp_path):
    if request.param == "sqlite":
        yield Store("sqlite", f"sqlite:///{tmp_path / 'history.sqlite'}", {})
        return
    server = request.getfixturevalue("postgres_server")
    name = f"t{os.getpid()}_{next(_counter)}_{int(time.time() * 1000) % 100000}"
    server.admin(f"CREATE DATABASE {name}")
    yield Store("postgres", server.url(name), {"HEALTHCHECK_DB_PASSWORD": server.password}, server)
    try:
        server.admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    except (RuntimeError, subprocess.TimeoutExpired):
        pass


@pytest.fixture
def engine(store):
    """The store's engine with the schema at this code's head."""
    from healthcheck.history import migrations

    eng = store.engine()
    migrations.upgrade(eng)
    yield eng
    eng.dispose()


def migrate_to(engine, revision: str) -> None:
    """The schema of an older release: Alembic up to ``revision`` only (no rollup rebuild)."""
    from alembic import command

    from healthcheck.history import migrations

    cfg = migrations._config()
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)
