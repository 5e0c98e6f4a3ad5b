"""The fabric manager's log read on a live node (issue 33): the corpus's real logs through the live probe on a
fixture tree (``sys/`` with NVIDIA GPUs, ``proc/uptime`` for the boot, ``var/log/fabricmanager.log``), judged
by gpu.xid as a bundle's copy is; this boot only; nothing on a node without the file; never in the prolog or
epilog."""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from healthcheck.checks.gpu_xid import event_key
from healthcheck.config import default_expectations
from healthcheck.core.model import Status
from healthcheck.pipeline.judge import judge
from healthcheck.probes import fabricmanager as fm
from healthcheck.probes.live import FABRICMANAGER_ERROR, LiveOptions, fabricmanager_log_for, snapshot_live

from tests.conftest import CORPUS
from tests.fixtures.sysfs_builder import build_sysfs

EXP = default_expectations()
NONFATAL_12028 = CORPUS / "fabricmanager" / "gpud__fabricmanager-log-nvswitch-nonfatal-error-12028.txt"
MULTICAST = CORPUS / "fabricmanager" / "gpud__fabricmanager-log-multicast-team.txt"
KERNEL_LOG = "[    5.000000] nvidia: loading out-of-tree module taints kernel.\n"


def _corpus(path: Path) -> str:
    if not path.is_file():
        pytest.skip(f"corpus {path.parent.name}/{path.name} absent")
    return path.read_text(encoding="utf-8")


def _local(*fields: int) -> float:
    """A local wall-clock time (the fabric manager writes the node's local time) as seconds since the epoch."""
    return time.mktime(tuple(fields) + (0, 0, -1))


def _node(tmp_path: Path, log: str | None, booted: float, gpus: int = 2) -> LiveOptions:
    """A node's fixture tree: its PCI bus, ``proc/uptime`` saying it booted at ``booted`` (local epoch), and
    the fabric manager's log where ``log`` is given."""
    build_sysfs(tmp_path / "sys", gpus=gpus, hcas=0, nvswitches=4 if gpus else 0)
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "uptime").write_text(f"{time.time() - booted:.2f} 1234.00\n")
    path = tmp_path / "var" / "log" / "fabricmanager.log"
    if log is not None:
        path.parent.mkdir(parents=True)
        path.write_text(log)
    return LiveOptions(str(tmp_path / "sys"), str(proc), kernel_log=lambda: KERNEL_LOG,
                       fabricmanager_log=str(path))


def _live(opts: LiveOptions):
    snap = snapshot_live(opts, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), frozenset({"kernel_events"}))
    return snap, {f.component: f for f in judge(snap, EXP, "slurm-check", ["gpu.xid"]).findings}


# ------------------------------------------------------------------------------- within this boot


@pytest.mark.corpus
def test_corpus_nonfatal_12028_within_this_boot_warns_per_switch(tmp_path):
    # SOURCES-2.tsv: HGX (H100 class), "faulty: NVSwitch non-fatal error 12028 on multiple NVSwitch ports";
    # the node booted the day before the errors (Dec 19 2024 19:17:49)
    snap, found = _live(_node(tmp_path, _corpus(NONFATAL_12028), _local(2024, 12, 18, 8, 0, 0)))
    switches = {f"nvswitch physical id {n}" for n in range(4)}
    assert set(found) == switches and {f.status for f in found.values()} == {Status.WARN}
    assert "SXid 12028 (Non-fatal)" in found["nvswitch physical id 0"].message
    assert FABRICMANAGER_ERROR not in snap.probe_errors
    sxids = [ev for ev in snap.kernel_events if ev.kind == "sxid"]
    assert sxids and all(ev.time.endswith("Z") for ev in sxids)  # the local time, in UTC
    assert sxids[0].time == time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(_local(2024, 12, 19, 19, 17, 49)))


@pytest.mark.corpus
def test_a_fatal_line_within_this_boot_fails_naming_the_switch(tmp_path):
    # the corpus's multicast log (one non-fatal 12028 on physical id 3, Feb 27 2025) and, after it, a fatal
    # line derived from its own error line (the corpus holds no fatal one: the words are the parser's)
    text = _corpus(MULTICAST)
    line = next(row for row in text.splitlines() if "detected NVSwitch non-fatal error" in row)
    fatal = (line.replace("[Feb 27 2025 15:10:02]", "[Feb 27 2025 15:12:00]")
             .replace("non-fatal error 12028", "fatal error 20034")
             .replace("86:00.0 physical id 3", "83:00.0 physical id 0"))
    snap, found = _live(_node(tmp_path, text + fatal + "\n", _local(2025, 2, 25, 9, 0, 0)))
    assert found["nvswitch physical id 0"].status is Status.FAIL
    assert "SXid 20034 (Fatal) x1 on nvswitch physical id 0" in found["nvswitch physical id 0"].message
    assert found["nvswitch physical id 3"].status is Status.WARN
    assert judge(snap, EXP, "slurm-check", ["gpu.xid"]).status is Status.FAIL


# ------------------------------------------------------------------------------- before this boot


@pytest.mark.corpus
def test_errors_logged_before_this_boot_are_not_judged(tmp_path):
    # the same corpus log on a node rebooted since (Jan 2025): the reboot cleared them; the log keeps them
    text = _corpus(NONFATAL_12028)
    fatal = ("[Dec 19 2024 19:20:00] [ERROR] [tid 1374] detected NVSwitch fatal error 20034 on fid 0 on NVSwitch "
             "pci bus id 00000000:83:00.0 physical id 0 port 34\n")
    snap, found = _live(_node(tmp_path, text + fatal, _local(2025, 1, 6, 10, 0, 0)))
    assert not [ev for ev in snap.kernel_events if ev.kind == "sxid"]
    assert [(c, f.status) for c, f in found.items()] == [(None, Status.PASS)]


def test_the_boot_window_reads_the_local_time_and_allows_a_minute(tmp_path, monkeypatch):
    monkeypatch.setenv("TZ", "EST5EDT,M3.2.0,M11.1.0")  # New York's rules (no tzdata needed): UTC-5 in December
    time.tzset()
    try:
        line = ("[Dec 19 2024 19:17:49] [ERROR] [tid 1] detected NVSwitch fatal error 20034 on fid 0 on NVSwitch "
                "pci bus id 00000000:83:00.0 physical id 0 port 34\n")
        log = tmp_path / "fm.log"
        log.write_text(line)
        (tmp_path / "uptime").write_text("100.00 1.00\n")
        logged = _local(2024, 12, 19, 19, 17, 49)
        for booted, kept in ((logged - 3600, True), (logged + 59, True), (logged + 61, False)):
            events = fm.probe_fabricmanager(str(log), str(tmp_path), now=booted + 100)
            assert bool(events) is kept, booted - logged
        assert events == [] and fm.probe_fabricmanager(str(log), str(tmp_path), now=logged)[0].time == \
            "2024-12-20T00:17:49Z"
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()


def test_no_uptime_keeps_every_line_as_an_event_of_unknown_age_is_counted(tmp_path):
    log = tmp_path / "fm.log"
    log.write_text("[Dec 19 2024 19:17:49] [ERROR] [tid 1] detected NVSwitch non-fatal error 12028 on fid 0 on "
                   "NVSwitch pci bus id 00000000:83:00.0 physical id 0 port 34\n")
    assert fm.boot_epoch(str(tmp_path)) is None
    assert [ev.xid for ev in fm.probe_fabricmanager(str(log), str(tmp_path))] == [12028]
    (tmp_path / "uptime").write_text("nan 1\n")
    assert fm.boot_epoch(str(tmp_path)) is None


@pytest.mark.corpus
def test_an_error_is_acted_on_once_its_key_is_the_same_every_run(tmp_path):
    opts = _node(tmp_path, _corpus(NONFATAL_12028), _local(2024, 12, 18, 8, 0, 0))
    first, _ = _live(opts)
    second, _ = _live(opts)
    keys = [event_key(ev, "boot-1") for ev in first.kernel_events if ev.kind == "sxid"]
    assert keys == [event_key(ev, "boot-1") for ev in second.kernel_events if ev.kind == "sxid"]
    second.boot_id, second.acknowledged_events = "boot-1", keys  # the drain for them ended: passed over
    (f,) = judge(second, EXP, "slurm-check", ["gpu.xid"]).findings
    assert f.status is Status.PASS and "already acted on" in f.message


# ------------------------------------------------------------------------------- where it does not apply


def test_no_fabric_manager_log_no_finding_and_no_error(tmp_path):
    snap, found = _live(_node(tmp_path, None, time.time() - 3600))
    assert [(c, f.status) for c, f in found.items()] == [(None, Status.PASS)]
    assert snap.probe_errors == {} and snap.kernel_events == []


def test_no_nvidia_gpu_the_log_is_not_read(tmp_path, monkeypatch):
    opts = _node(tmp_path, "anything\n", time.time() - 3600, gpus=0)
    monkeypatch.setattr(fm, "probe_fabricmanager", _refuse)
    snap = snapshot_live(opts, "2026-01-01T00:00:00Z", frozenset({"kernel_events"}))
    assert snap.probe_errors == {}


def test_a_log_without_an_nvswitch_error_is_not_parsed(tmp_path, monkeypatch):
    log = tmp_path / "fm.log"
    log.write_text("[Feb 25 2025 13:59:45] [INFO] [tid 1808] multicast group 0 is freed.\n")
    import healthcheck.parsers.fabricmanager as parser

    monkeypatch.setattr(parser, "parse_fabricmanager_log", _refuse)
    assert fm.probe_fabricmanager(str(log), str(tmp_path)) == []


def test_a_log_that_cannot_be_trusted_or_read_is_an_error_the_kernel_log_still_judged(tmp_path):
    kernel = "[  100.000000] NVRM: Xid (PCI:0000:18:00): 79, pid=0, GPU has fallen off the bus.\n"
    opts = _node(tmp_path, "[Dec 19 2024 19:17:49] [ERROR] detected NVSwitch fatal error 1\n", time.time() - 60)
    opts.kernel_log = lambda: kernel
    path = Path(opts.fabricmanager_log)
    if os.geteuid() == 0:  # as root: writable by others is not root's alone
        path.chmod(0o666)
        snap, found = _live(opts)
        assert found["fabricmanager"].status is Status.ERROR and "writable by group or others" in \
            found["fabricmanager"].message
        assert any(f.status is Status.FAIL for f in found.values())  # the Xid 79 still judged
        path.chmod(0o644)
    path.unlink()
    os.mkfifo(path)  # a FIFO there must not hold the run
    snap, found = _live(opts)
    assert "not a regular file" in snap.probe_errors[FABRICMANAGER_ERROR].message
    assert found["fabricmanager"].status is Status.ERROR and found["fabricmanager"].component == "fabricmanager"
    assert any(f.status is Status.FAIL for f in found.values())


def test_a_link_is_refused_and_the_tail_is_bounded(tmp_path):
    target = tmp_path / "elsewhere.log"
    target.write_bytes(b"x" * (fm.TAIL_BYTES + 10) + b"\nlast line\n")
    assert fm.read_tail(str(target)) == (b"x" * (fm.TAIL_BYTES + 10) + b"\nlast line\n")[-fm.TAIL_BYTES:]
    (tmp_path / "fm.log").symlink_to(target)
    with pytest.raises(OSError):
        fm.read_tail(str(tmp_path / "fm.log"))
    assert fm.read_tail(str(tmp_path / "absent.log")) is None


def test_the_trust_rule_on_what_was_opened():
    from healthcheck.safeio.trust import UntrustedFile, check_trusted_stat

    def stat_of(uid: int, mode: int) -> os.stat_result:
        return os.stat_result((0o100000 | mode, 0, 0, 1, uid, 0, 10, 0, 0, 0))

    check_trusted_stat(stat_of(0, 0o644), "/var/log/fabricmanager.log", "fabric manager log")
    for uid, mode in ((1000, 0o644), (0, 0o664), (0, 0o646)):
        with pytest.raises(UntrustedFile):
            check_trusted_stat(stat_of(uid, mode), "/var/log/fabricmanager.log", "fabric manager log")


# ------------------------------------------------------------------------------- which contexts read it


def test_only_healthcheckprogram_and_check_read_it():
    assert fabricmanager_log_for("slurm-check") == fabricmanager_log_for("check") == fm.LOG_PATH
    assert [fabricmanager_log_for(c) for c in ("prolog", "epilog", "burnin")] == [None, None, None]


def test_the_hooks_ask_for_it_in_healthcheckprogram_only(monkeypatch):
    from healthcheck.hook import run as hook
    from healthcheck.pipeline import acquire

    asked: list = []
    monkeypatch.setattr(acquire, "snapshot_for", lambda *args, **kw: asked.append(kw["fabricmanager_log"]))
    for context in ("prolog", "epilog", "slurm-check"):
        hook.snapshot(context, "n1", EXP, "/nonexistent", "2026-01-01T00:00:00Z", 10.0)
    assert asked == [None, None, fm.LOG_PATH]


def test_the_check_command_asks_for_it_but_not_as_the_prolog(monkeypatch):
    from click.testing import CliRunner

    from healthcheck.cli.main import cli
    from healthcheck.core.model import Snapshot
    from healthcheck.pipeline import acquire

    asked: list = []

    def snapshot_for(*args, **kw):
        asked.append(kw["fabricmanager_log"])
        return Snapshot(node="n1", taken_at="2026-01-01T00:00:00Z", kernel_events=[])

    monkeypatch.setattr(acquire, "snapshot_for", snapshot_for)
    for context in ("check", "prolog", "epilog"):
        CliRunner().invoke(cli, ["check", "--only", "gpu.xid", "--context", context, "--node", "n1"])
    assert asked == [fm.LOG_PATH, None, None]


def test_a_live_run_without_it_never_calls_the_probe(tmp_path, monkeypatch):
    opts = _node(tmp_path, "[Dec 19 2024 19:17:49] [ERROR] detected NVSwitch fatal error 1\n", time.time() - 60)
    opts.fabricmanager_log = None  # the prolog's and epilog's options
    monkeypatch.setattr(fm, "probe_fabricmanager", _refuse)
    snap = snapshot_live(opts, "2026-01-01T00:00:00Z", frozenset({"kernel_events"}))
    assert snap.probe_errors == {} and snap.kernel_events == []


def _refuse(*args, **kw):
    raise AssertionError("not to be called here")
