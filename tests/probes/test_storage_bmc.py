"""The storage and BMC probes through the real subprocess seam, with fake `nvme`, `smartctl` and
`ipmitool` programs (shell scripts printing recorded-style output) on the seam's search path; the
live registration (which contexts probe them); collect -> bundle -> the same judgement."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from healthcheck.safeio import subproc
from healthcheck.config import default_expectations
from healthcheck.core.model import Status
from healthcheck.probes import bmc as bmc_probe
from healthcheck.probes.live import LiveOptions, snapshot_live
from healthcheck.probes.storage import list_devices, probe_storage
from healthcheck.pipeline.judge import judge

NVME_OK = {"critical_warning": 0, "temperature": 310, "avail_spare": 100, "spare_thresh": 10, "percent_used": 2,
           "media_errors": 0, "num_err_log_entries": 0}
NVME_BAD = dict(NVME_OK, critical_warning=4, media_errors=12)
SMART_SDA = {"smartctl": {"exit_status": 0}, "device": {"name": "/dev/sda", "protocol": "ATA"},
             "model_name": "BOOT SSD", "smart_status": {"passed": True}}
SMART_NVME0 = {"smartctl": {"exit_status": 0}, "device": {"name": "/dev/nvme0", "protocol": "NVMe"},
               "smart_status": {"passed": True}, "nvme_smart_health_information_log": {"critical_warning": 0}}
SEL = ("   1 | 05/02/2024 | 10:00:01 | Power Supply PS1 Status | Presence detected | Asserted\n"
       "   2 | 05/02/2024 | 10:05:11 | Power Supply PS2 Status | Power Supply AC lost | Asserted\n")
SDR = ("FAN1             | 41h | ok  | 29.1 | 3400 RPM\n"
       "PS2 Status       | C9h | ok  | 10.2 | Presence detected, Power Supply AC lost\n")


def _script(path: Path, body: str) -> None:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)


@pytest.fixture
def node(tmp_path, monkeypatch):
    """A sysfs tree with nvme0, nvme1, sda (and a removable sdb, a loop device), /dev/ipmi0, fake tools."""
    sys_root, dev, tools, out = tmp_path / "sys", tmp_path / "dev", tmp_path / "bin", tmp_path / "out"
    for d in (dev, tools, out):
        d.mkdir()
    for name, model in (("nvme0", "NVME A"), ("nvme1", "NVME B")):
        base = sys_root / "class" / "nvme" / name
        base.mkdir(parents=True)
        (base / "model").write_text(model + "\n")
        (base / "state").write_text("live\n")
    for name, removable in (("sda", "0"), ("sdb", "1"), ("loop0", "0")):
        (sys_root / "block" / name / "device").mkdir(parents=True)
        (sys_root / "block" / name / "removable").write_text(removable + "\n")
    (dev / "ipmi0").write_text("")
    (out / "nvme-nvme0.json").write_text(json.dumps(NVME_OK))
    (out / "nvme-nvme1.json").write_text(json.dumps(NVME_BAD))
    (out / "smart-nvme0.json").write_text(json.dumps(SMART_NVME0))
    (out / "smart-sda.json").write_text(json.dumps(SMART_SDA))
    (out / "sel.txt").write_text(SEL)
    (out / "sdr.txt").write_text(SDR)
    calls = tmp_path / "calls.log"
    log = f'echo "$0 $*" >> {calls}\n'
    _script(tools / "nvme", log + f'exec cat {out}/nvme-$(basename "$2").json\n')
    _script(tools / "smartctl", log + f'f={out}/smart-$(basename "$3").json; [ -f "$f" ] && exec cat "$f"; '
                                      'echo \'{"smartctl": {"exit_status": 2}}\'; exit 2\n')
    _script(tools / "ipmitool", log + f'exec cat {out}/"$1".txt\n')
    monkeypatch.setattr(subproc, "SAFE_PATH", (str(tools),))
    monkeypatch.setattr(subproc, "_RESOLVED", {})
    return {"sys": str(sys_root), "dev": str(dev), "tools": tools, "calls": calls, "tmp": tmp_path}


def test_devices_are_listed_from_sysfs(node):
    devs = list_devices(node["sys"])
    assert [(d.name, d.kind, d.state) for d in devs] == [("nvme0", "nvme", "live"), ("nvme1", "nvme", "live"),
                                                         ("sda", "sata", None)]


def test_storage_probe_reads_each_device_with_its_tool(node):
    devs = {d.name: d for d in probe_storage(node["sys"], node["dev"])}
    assert devs["nvme0"].source == "nvme-smart-log" and devs["nvme0"].media_errors == 0
    assert devs["nvme1"].critical_warning == 4 and devs["nvme1"].media_errors == 12
    assert devs["sda"].source == "smartctl-json" and devs["sda"].smart_passed is True
    calls = node["calls"].read_text()
    assert "smart-log" in calls and f"{node['dev']}/nvme0 -o json" in calls and "-j -a" in calls


def test_without_tools_devices_stay_listed_and_unread(node, monkeypatch):
    for tool in ("nvme", "smartctl"):
        (node["tools"] / tool).unlink()
    monkeypatch.setattr(subproc, "_RESOLVED", {})
    devs = probe_storage(node["sys"], node["dev"])
    assert [d.name for d in devs] == ["nvme0", "nvme1", "sda"]
    assert all(d.source is None and "not installed" in d.unread for d in devs)
    findings = judge_storage_bmc(devs, None)
    assert {f.status for f in findings if f.check == "storage.health"} == {Status.SKIP}


def test_a_tool_that_fails_leaves_the_device_unread_with_its_words(node):
    _script(node["tools"] / "nvme", 'echo "NVMe status: INVALID_FIELD" >&2; exit 22\n')
    devs = {d.name: d for d in probe_storage(node["sys"], node["dev"])}
    # nvme-cli failed on both; smartctl read nvme0 and could not open nvme1: both tools' words kept
    assert devs["nvme0"].source == "smartctl-json" and devs["nvme0"].smart_passed is True
    assert devs["nvme1"].source is None
    assert "INVALID_FIELD" in devs["nvme1"].unread and "exit status 2" in devs["nvme1"].unread
    [f] = [f for f in judge_storage_bmc([devs["nvme1"]], None) if f.check == "storage.health"]
    assert f.status is Status.ERROR


def judge_storage_bmc(storage, bmc):
    from healthcheck.core.model import Snapshot

    snap = Snapshot("n", "2026-12-01T00:00:00+00:00", storage=storage, bmc=bmc)
    return judge(snap, default_expectations(), "slurm-check", only=["storage.*", "bmc.*"]).findings


def test_bmc_probe_reads_sel_and_sdr(node):
    info = bmc_probe.probe_bmc(10.0, node["dev"])
    assert info.unavailable is None and len(info.events) == 2 and len(info.sensors) == 2
    statuses = {f.check: f.status for f in judge_storage_bmc(None, info) if f.check.startswith("bmc.")}
    assert statuses == {"bmc.sel": Status.FAIL, "bmc.sdr": Status.FAIL}


def test_no_ipmitool_or_no_bmc_is_unavailable_with_the_reason(node, monkeypatch):
    os.unlink(Path(node["dev"]) / "ipmi0")
    info = bmc_probe.probe_bmc(10.0, node["dev"])
    assert "no BMC device" in info.unavailable and "ipmi0" in info.unavailable
    assert not node["calls"].exists()  # the tool was not even started
    (node["tools"] / "ipmitool").unlink()
    monkeypatch.setattr(subproc, "_RESOLVED", {})
    info = bmc_probe.probe_bmc(10.0, node["dev"])
    assert info.unavailable.startswith("ipmitool is not installed")
    assert {f.status for f in judge_storage_bmc(None, info)} == {Status.SKIP}


def test_an_ipmitool_that_cannot_open_the_device_is_unavailable(node):
    _script(node["tools"] / "ipmitool", "echo 'Could not open device at /dev/ipmi0 or /dev/ipmi/0 or "
                                        "/dev/ipmidev/0: No such file or directory' >&2; exit 1\n")
    info = bmc_probe.probe_bmc(10.0, node["dev"])
    assert info.unavailable.startswith("no BMC answered") and info.events is None


def test_a_hung_bmc_costs_its_deadline_not_more(node):
    _script(node["tools"] / "ipmitool", "exec sleep 60\n")
    start = time.monotonic()
    info = bmc_probe.probe_bmc(1.0, node["dev"])
    elapsed = time.monotonic() - start
    assert "no answer within" in info.sel_error
    assert info.sdr_error and info.events is None and info.sensors is None
    assert elapsed < 20  # the deadline is 1 s; generous for a loaded machine, far below the sleep
    findings = {f.check: f for f in judge_storage_bmc(None, info)}
    assert findings["bmc.sel"].status is Status.ERROR


def test_live_probes_storage_and_bmc_only_when_their_checks_run(node):
    from healthcheck.pipeline.judge import sources_needed

    opts = LiveOptions(node["sys"], str(node["tmp"] / "proc"), dev_root=node["dev"])
    prolog = snapshot_live(opts, "2026-12-01T00:00:00+00:00", sources_needed(default_expectations(), "prolog"))
    assert prolog.storage is None and prolog.bmc is None and not node["calls"].exists()
    check = snapshot_live(opts, "2026-12-01T00:00:00+00:00",
                          sources_needed(default_expectations(), "slurm-check"))
    assert [d.name for d in check.storage] == ["nvme0", "nvme1", "sda"] and len(check.bmc.events) == 2
    assert "storage" in check.probe_durations_s and "bmc" in check.probe_durations_s


def test_collect_records_the_new_inputs_and_the_bundle_is_judged_like_the_node(node):
    from healthcheck.bundles.archive import snapshot_from_bundle
    from healthcheck.bundles.collect import collect_bundle

    opts = LiveOptions(node["sys"], str(node["tmp"] / "proc"), dev_root=node["dev"], node="gpu01")
    live = snapshot_live(opts, "2026-12-01T00:00:00+00:00")
    path, notes = collect_bundle(str(node["tmp"] / "bundle"), options=opts)
    names = sorted(os.listdir(path))
    for name in ("nvme-smart-log-nvme0.json", "nvme-smart-log-nvme1.json", "smartctl-nvme0.json",
                 "smartctl-sda.json", "ipmitool-sel.txt", "ipmitool-sdr.txt", "storage-devices.json"):
        assert name in names, names
    # smartctl could not open nvme1 (exit 2): its answer is recorded as given; nvme-cli's reading counts
    assert json.loads((path / "smartctl-nvme1.json").read_text())["smartctl"]["exit_status"] == 2
    recorded = snapshot_from_bundle(path)

    def view(snap):
        # the bundle holds every tool's answer (the live probe stops at the first): same statuses
        return [(f.check, f.component, f.status) for f in judge_storage_bmc(snap.storage, snap.bmc)]

    assert view(recorded) == view(live)
    assert {f[2] for f in view(recorded) if f[0] in ("storage.health", "bmc.sel")} >= {Status.FAIL}


def test_collect_without_a_bmc_notes_why_and_the_bundle_skips_with_it(node):
    from healthcheck.bundles.archive import snapshot_from_bundle
    from healthcheck.bundles.collect import collect_bundle

    os.unlink(Path(node["dev"]) / "ipmi0")
    opts = LiveOptions(node["sys"], str(node["tmp"] / "proc"), dev_root=node["dev"], node="gpu01")
    path, notes = collect_bundle(str(node["tmp"] / "bundle"), options=opts)
    assert any("no BMC device" in n for n in notes)
    snap = snapshot_from_bundle(path)
    [f] = [f for f in judge_storage_bmc(snap.storage, snap.bmc) if f.check == "bmc.sel"]
    assert f.status is Status.SKIP and "no BMC device" in f.message


def test_a_bundle_of_recordings_alone_is_judged(tmp_path):
    """Files named as collect names them, without the device list (a support ticket's attachments)."""
    from healthcheck.bundles.archive import snapshot_from_bundle

    (tmp_path / "meta.json").write_text(json.dumps({"hostname": "gpu07", "time": "2026-12-01T00:00:00+00:00"}))
    (tmp_path / "nvme-smart-log-nvme0.json").write_text(json.dumps(NVME_BAD))
    (tmp_path / "smartctl-sda.txt").write_text("SMART overall-health self-assessment test result: FAILED!\n")
    (tmp_path / "ipmitool-sdr.txt").write_text("FAN1 | 41h | lcr | 29.1 | 0 RPM\n")
    snap = snapshot_from_bundle(tmp_path)
    assert [d.name for d in snap.storage] == ["nvme0", "sda"]
    findings = {(f.check, f.component): f.status for f in judge_storage_bmc(snap.storage, snap.bmc)}
    assert findings[("storage.health", "nvme0")] is Status.FAIL
    assert findings[("storage.health", "sda")] is Status.FAIL
    assert findings[("bmc.sdr", "bmc:FAN1")] is Status.FAIL
    assert findings[("bmc.sel", None)] is Status.SKIP  # no SEL recorded


def test_a_bundle_with_an_unreadable_recording_is_an_error_not_a_pass(tmp_path):
    from healthcheck.bundles.archive import snapshot_from_bundle

    (tmp_path / "meta.json").write_text(json.dumps({"hostname": "gpu07", "time": "2026-12-01T00:00:00+00:00"}))
    (tmp_path / "smartctl-nvme0.json").write_text("{cut")
    (tmp_path / "ipmitool-sel.txt").write_text("garbage only\n")
    (tmp_path / "storage-devices.json").write_text("[1]")
    snap = snapshot_from_bundle(tmp_path)
    verdict = judge(snap, default_expectations(), "slurm-check", only=["storage.*", "bmc.*"])
    findings = {f.check: f.status for f in verdict.findings}
    assert findings["storage.health"] is Status.ERROR and "storage" in snap.probe_errors
    assert findings["bmc.sel"] is Status.ERROR


def test_probe_modules_are_imported_before_the_threads_and_a_broken_one_stays_the_jobs_error(node, monkeypatch):
    """The probes' modules are imported in the calling thread (threads importing at once contend for the
    import locks); a module that cannot be imported still becomes that probe's error, not the run's."""
    import dataclasses
    import sys

    from healthcheck.probes import live

    monkeypatch.setitem(live.PROBE_MODULES, "storage", "no_such_probe_module")
    broken = lambda opts, snap: __import__("healthcheck.probes.no_such_probe_module")  # noqa: E731
    monkeypatch.setattr(live, "PROBES", tuple(dataclasses.replace(p, read=broken) if p.source == "storage" else p
                                              for p in live.PROBES))
    monkeypatch.delitem(sys.modules, "healthcheck.probes.host_counters", raising=False)
    seen, run_bounded = [], live.run_bounded

    def spy(jobs, *args, **kwargs):
        seen.append("healthcheck.probes.host_counters" in sys.modules)
        return run_bounded(jobs, *args, **kwargs)

    monkeypatch.setattr(live, "run_bounded", spy)
    opts = LiveOptions(node["sys"], str(node["tmp"] / "proc"), dev_root=node["dev"])
    snap = snapshot_live(opts, "2026-12-01T00:00:00+00:00", frozenset({"storage", "edac"}))
    assert seen == [True]  # imported before any probe's thread started
    assert snap.probe_errors["storage"].kind == "error" and "no_such_probe_module" in snap.probe_errors["storage"].message
    assert "edac" not in snap.probe_errors
