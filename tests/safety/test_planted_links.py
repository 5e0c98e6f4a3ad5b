"""Issue 19, items 3 and 8: no write of ours goes through a link someone planted, and nothing we write is
writable by others, whatever the umask.

An attacker who can write a folder we write into plants a symlink (or a hard link) where we are about
to write: at the spool's record file or lock, at the temporary name an atomic writer used to take
(``<file>.tmp``, ``<file>.<pid>.tmp``, ``<file>.tmp.<pid>``, ``X.tar.gz.partial``), or at the target.
Root must never write through it: the victim file stays as it was and the link stays a link. As root,
a spool or state folder that others could write (or that is not root's, or is a symlink) is refused
with a line that names it and the fix, and the verdict still stands."""
from __future__ import annotations

import json
import os
import stat
import tarfile
from pathlib import Path

import pytest

from healthcheck.spool import store as spoolmod
from healthcheck.spool.append import SpoolError
from tests.safety._hookrun import hook, write_config

PRECIOUS = "root's precious file\n"
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="the folder ownership rules apply when running as root")


@pytest.fixture
def victim(tmp_path) -> Path:
    """A file the attacker wants root to overwrite (stands for /etc/shadow), outside the written folder."""
    folder = tmp_path / "etc"
    folder.mkdir()
    path = folder / "shadow"
    path.write_text(PRECIOUS)
    return path


def intact(victim: Path) -> bool:
    return victim.read_text() == PRECIOUS


def private_dir(path: Path) -> Path:
    path.mkdir(mode=0o700, parents=True)
    path.chmod(0o700)
    return path


RECORD = {"kind": "run", "node": "node1", "status": "pass"}


# ------------------------------------------------------------------------------------------- spool


def test_a_symlink_planted_at_the_spool_file_is_refused_not_written_through(tmp_path, victim):
    spool = private_dir(tmp_path / "spool")
    (spool / "records.jsonl").symlink_to(victim)
    with pytest.raises(SpoolError, match="symlink"):
        spoolmod.append(spool, RECORD)
    assert intact(victim) and (spool / "records.jsonl").is_symlink()


def test_a_hard_link_planted_at_the_spool_file_is_refused(tmp_path, victim):
    spool = private_dir(tmp_path / "spool")
    os.link(victim, spool / "records.jsonl")
    with pytest.raises(SpoolError, match="hard link"):
        spoolmod.append(spool, RECORD)
    assert intact(victim)


def test_a_symlink_planted_at_the_spool_lock_creates_nothing(tmp_path):
    spool = private_dir(tmp_path / "spool")
    target = tmp_path / "etc-nologin"  # an empty file created there would already do harm
    (spool / ".lock").symlink_to(target)
    with pytest.raises(SpoolError):
        spoolmod.append(spool, RECORD)
    assert not target.exists() and not os.path.lexists(spool / "records.jsonl")


def test_a_fifo_planted_at_the_spool_file_is_refused_without_blocking(tmp_path):
    spool = private_dir(tmp_path / "spool")
    os.mkfifo(spool / "records.jsonl")
    with pytest.raises(SpoolError, match="not a regular file"):
        spoolmod.append(spool, RECORD)


@as_root
def test_a_spool_file_owned_by_another_user_is_refused(tmp_path):
    spool = private_dir(tmp_path / "spool")
    planted = spool / "records.jsonl"
    planted.write_text("")
    os.chown(planted, 4321, 4321)
    with pytest.raises(SpoolError, match="owned by uid 4321"):
        spoolmod.append(spool, RECORD)
    assert planted.read_text() == ""


def test_the_spool_still_appends_and_rotates_in_a_private_folder(tmp_path):
    spool = private_dir(tmp_path / "spool")
    for i in range(3):
        spoolmod.append(spool, dict(RECORD, i=i), max_bytes=150)
    records, corrupt = spoolmod.read_all(spool)
    assert [r["i"] for r in records] == [0, 1, 2] and corrupt == []
    assert stat.S_IMODE(os.stat(spool / "records.jsonl").st_mode) == 0o600


# ---------------------------------------------------------- the spool and state folders, as root


def spoil_writable(folder: Path) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o777)
    return "writable by group or others"


def spoil_foreign(folder: Path) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    os.chown(folder, 4321, 4321)
    return "owned by uid 4321"


def spoil_symlink(folder: Path) -> str:
    real = private_dir(folder.parent / (folder.name + "-real"))
    folder.symlink_to(real)
    return "is a symlink"


SPOILS = {"writable-by-others": spoil_writable, "other-owner": spoil_foreign, "symlink": spoil_symlink}


@as_root
@pytest.mark.parametrize("spoil", SPOILS.values(), ids=list(SPOILS))
@pytest.mark.parametrize("kind,rc", [("healthy", 0), ("faulty", 1)])
def test_a_spool_folder_others_could_write_is_refused_and_the_verdict_stands(tmp_path, node_bundles, spoil,
                                                                            kind, rc):
    tmp_path.chmod(0o755)
    spool = tmp_path / "spool"
    words = spoil(spool)
    config = write_config(tmp_path / "site.toml", str(node_bundles / kind), str(tmp_path / "state"), str(spool))
    proc, _ = hook("prolog", config, tmp_path / "cache")
    assert proc.returncode == rc, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    (line,) = [x for x in proc.stderr.splitlines() if "spool not written" in x]
    assert words in line and "spool directory" in line and "refusing it as root" in line, line
    assert not os.path.lexists(os.path.realpath(spool) + "/records.jsonl")
    assert (tmp_path / "state" / "node1" / "baselines" / "4242.json").exists()  # the rest went on


@as_root
def test_a_state_folder_others_could_write_gets_no_baseline_and_the_verdict_stands(tmp_path, node_bundles):
    tmp_path.chmod(0o755)
    state = tmp_path / "state"
    spoil_writable(state)
    config = write_config(tmp_path / "site.toml", str(node_bundles / "healthy"), str(state), str(tmp_path / "spool"))
    proc, _ = hook("prolog", config, tmp_path / "cache")
    assert proc.returncode == 0, proc.stderr
    (line,) = [x for x in proc.stderr.splitlines() if "baseline for job 4242 not saved" in x]
    assert "writable by group or others" in line and "chmod go-w" in line, line
    assert not (state / "node1" / "baselines" / "4242.json").exists()
    assert (tmp_path / "spool" / "records.jsonl").exists()


# ------------------------------------------------ atomic writers: the temporary names they used to take


def _cache(tmp_path, monkeypatch):
    from healthcheck.safeio import tomlcache

    cache = private_dir(tmp_path / "cache")
    monkeypatch.setenv(tomlcache.CACHE_ENV, str(cache))
    source = tmp_path / "site.toml"
    source.write_text("[defaults]\n")
    target = tomlcache._entry(str(source))[0]
    return target, [f"{target}.{os.getpid()}.tmp"], lambda: tomlcache.put(str(source), {"defaults": {}})


def _ledger(tmp_path, monkeypatch):
    from healthcheck.slurm.ledger import LEDGER, remember_drain

    state = private_dir(tmp_path / "state")
    target = str(state / LEDGER)
    return target, [target + ".tmp"], lambda: remember_drain(str(state), "healthcheck: test", "prolog", [],
                                                             lambda m: None)


def _gate_baseline(tmp_path, monkeypatch):
    from healthcheck.hook.gate import _save_baseline

    state = private_dir(tmp_path / "state")
    private_dir(state / "baselines")
    target = str(state / "baselines" / "4242.json")
    return target, [f"{target}.{os.getpid()}.tmp"], \
        lambda: _save_baseline(str(state), "4242", '{"gpu0.x":1.0}', 1.0e9, "abc", 1.0e9)


def _sweep_state(tmp_path, monkeypatch):
    from healthcheck.sweep.state import STATE_FILE, SweepState, save

    state = private_dir(tmp_path / "sweep")
    target = str(state / STATE_FILE)
    return target, [f"{target}.tmp.{os.getpid()}"], \
        lambda: save(str(state), SweepState("s1", "2026-12-01T00:00:00+00:00", str(tmp_path)))


def _sweep_json(tmp_path, monkeypatch):
    from healthcheck.sweep.run import write_json

    target = str(private_dir(tmp_path / "results") / "sweep.json")
    return target, [f"{target}.tmp.{os.getpid()}"], lambda: write_json(target, {"sweep_id": "s1"})


def _burnin_result(tmp_path, monkeypatch):
    from healthcheck.burnin.node_run import write_result

    results = private_dir(tmp_path / "results")
    target = str(results / "node1.json")
    return target, [f"{target}.tmp.{os.getpid()}"], lambda: write_result(str(results), "node1", {"node": "node1"})


def _fleet_file(tmp_path, monkeypatch):
    from healthcheck.burnin.fleetfile import write

    target = str(private_dir(tmp_path / "out") / "fleet-digests.json")
    keys = {"k": {"digest": "ab" * 16, "gpus": 8, "votes": 8, "nodes": 1}}
    return target, [f"{target}.tmp.{os.getpid()}"], lambda: write(target, keys, "2026-12-01T00:00:00+00:00", None)


def _history_export(tmp_path, monkeypatch):
    target = str(private_dir(tmp_path / "out") / "results.csv")
    engine = _history_engine(tmp_path)
    from healthcheck.history.queries import export

    return target, [f"{target}.tmp-{os.getpid()}"], lambda: export(engine, "csv", target, table="results")


def _report(tmp_path, monkeypatch):
    from healthcheck.cli.report import _write

    target = str(private_dir(tmp_path / "out") / "report.html")
    return target, [], lambda: _write(target, "<html></html>\n")


def _history_engine(tmp_path):
    from healthcheck.history import migrations
    from healthcheck.history.db import make_engine, resolve_url
    from healthcheck.history.ingest import ingest
    from tests.history.recs import run_record, write_spool

    engine = make_engine(resolve_url(f"sqlite:///{tmp_path / 'history.sqlite'}"))
    migrations.upgrade(engine)
    write_spool(tmp_path / "sp", [run_record("gpu01", i) for i in range(2)])
    ingest([tmp_path / "sp"], engine)
    return engine


WRITERS = {"toml-cache": _cache, "drain-ledger": _ledger, "gate-baseline": _gate_baseline,
           "sweep-state": _sweep_state, "sweep-json": _sweep_json, "burnin-result": _burnin_result,
           "fleet-digests": _fleet_file, "history-export": _history_export, "report": _report}


@pytest.mark.parametrize("setup", WRITERS.values(), ids=list(WRITERS))
def test_no_writer_writes_through_a_link_at_its_temporary_name_or_its_target(tmp_path, monkeypatch, victim,
                                                                           setup):
    target, old_temps, write = setup(tmp_path, monkeypatch)
    for name in old_temps:
        os.symlink(victim, name)
    os.symlink(victim, target)  # at the target itself: replaced, never written through
    write()
    assert intact(victim)
    assert all(os.path.islink(name) and os.readlink(name) == str(victim) for name in old_temps)
    assert not os.path.islink(target) and os.path.getsize(target) > 0
    folder = os.path.dirname(target)
    left = [n for n in os.listdir(folder) if n.endswith(".tmp") and os.path.join(folder, n) not in old_temps]
    assert left == []


# ---------------------------------------------------------------------------------------- collect


@pytest.fixture(scope="module")
def live_node(tmp_path_factory):
    from tests.bundles.test_bundles import make_node

    return make_node(tmp_path_factory.mktemp("planted-node"))


def test_collect_never_writes_through_a_planted_partial_or_output_link(tmp_path, victim, live_node):
    from healthcheck.bundles.collect import collect_bundle

    out = private_dir(tmp_path / "out") / "node.tar.gz"
    partial = out.with_name(out.name + ".partial")
    partial.symlink_to(victim)
    out.symlink_to(victim)
    path, _ = collect_bundle(str(out), options=live_node)
    assert intact(victim) and partial.is_symlink()
    assert not out.is_symlink()
    with tarfile.open(path) as tar:
        assert "node/meta.json" in tar.getnames()
    assert [n for n in os.listdir(out.parent) if n.endswith(".tmp")] == []


def test_collect_refuses_an_output_folder_that_is_a_link(tmp_path, live_node):
    from healthcheck.bundles.archive import BundleError
    from healthcheck.bundles.collect import collect_bundle

    elsewhere = private_dir(tmp_path / "elsewhere")
    link = tmp_path / "bundle"
    link.symlink_to(elsewhere)
    with pytest.raises(BundleError, match="choose a new path"):
        collect_bundle(str(link), options=live_node)
    assert list(elsewhere.iterdir()) == []


# ------------------------------------------------------------------------------------- umask 000


def loose(*roots: Path) -> dict[str, str]:
    """Every file or folder under ``roots`` that group or others may write."""
    found = {}
    for root in roots:
        for folder, dirs, files in os.walk(root):
            for name in [""] + dirs + files:
                path = os.path.join(folder, name) if name else folder
                mode = stat.S_IMODE(os.lstat(path).st_mode)
                if mode & 0o022:
                    found[path] = oct(mode)
    return found


@pytest.fixture
def umask0():
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def test_collect_under_umask_0_writes_nothing_others_may_write(tmp_path, live_node, umask0):
    from healthcheck.bundles.collect import collect_bundle

    out = tmp_path / "out"
    tarball, _ = collect_bundle(str(out / "new" / "node.tar.gz"), options=live_node)
    folder, _ = collect_bundle(str(out / "node-dir"), options=live_node)
    os.umask(0o022)
    assert stat.S_IMODE(os.stat(tarball).st_mode) == 0o644
    assert (folder / "meta.json").is_file() and stat.S_IMODE(os.stat(folder / "meta.json").st_mode) == 0o644
    assert loose(out) == {}
    with tarfile.open(tarball) as tar:
        members = tar.getmembers()
    assert members and [m.name for m in members if m.mode & 0o022] == []


def test_history_export_and_report_under_umask_0_are_0644(tmp_path, umask0):
    from healthcheck.cli.report import _write
    from healthcheck.history.queries import export

    engine = _history_engine(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    out.chmod(0o755)
    for fmt in ("csv", "json", "parquet"):
        export(engine, fmt, str(out / f"results.{fmt}"), table="results")
    _write(str(out / "report.html"), "<html></html>\n")
    assert {p.name: oct(stat.S_IMODE(p.stat().st_mode)) for p in out.iterdir()} == \
        {n: "0o644" for n in ("results.csv", "results.json", "results.parquet", "report.html")}
    assert json.loads((out / "results.json").read_text())[0]["node"] == "gpu01"
