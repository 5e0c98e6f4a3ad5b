"""storage.health, storage.count, bmc.sel, bmc.sdr: injected faults, healthy readings, absence, dedup."""
from __future__ import annotations

import pytest

from healthcheck.checks.bmc import event_key, event_keys
from healthcheck.config import default_expectations, loads
from healthcheck.core.model import BmcInfo, BmcSensor, Snapshot, Status, StorageDevice
from healthcheck.parsers.ipmitool import parse_sel
from healthcheck.pipeline.judge import judge

WHEN = "2026-12-01T00:00:00+00:00"


def run(snap: Snapshot, only: str, exp=None, context: str = "slurm-check"):
    return judge(snap, exp or default_expectations(), context, only=[only]).findings


def healthy_nvme(name: str = "nvme0", **changes) -> StorageDevice:
    fields = dict(name=name, kind="nvme", model="M", source="nvme-smart-log", smart_passed=None,
                  critical_warning=0, media_errors=0, percentage_used=3, available_spare_pct=100,
                  available_spare_threshold_pct=10, num_err_log_entries=1)
    fields.update(changes)
    return StorageDevice(**fields)


# ------------------------------------------------------------------------------ storage.health


def test_healthy_devices_pass():
    findings = run(Snapshot("n", WHEN, storage=[healthy_nvme("nvme0"), healthy_nvme("nvme1")]), "storage.health")
    assert [(f.component, f.status) for f in findings] == [("nvme0", Status.PASS), ("nvme1", Status.PASS)]


@pytest.mark.parametrize("changes,status,words", [
    ({"critical_warning": 0x01}, Status.FAIL, "available spare below"),
    ({"critical_warning": 0x02}, Status.WARN, "temperature"),
    ({"critical_warning": 0x04}, Status.FAIL, "reliability degraded"),
    ({"critical_warning": 0x08}, Status.FAIL, "read-only"),
    ({"critical_warning": 0x10}, Status.FAIL, "backup device"),
    ({"critical_warning": 0x80}, Status.FAIL, "bits 0x80"),
    ({"media_errors": 1}, Status.FAIL, "1 media and data integrity errors"),
    ({"available_spare_pct": 9}, Status.FAIL, "below the drive's threshold 10%"),
    ({"available_spare_pct": 15}, Status.WARN, "available spare 15%"),
    ({"percentage_used": 80}, Status.WARN, "80% of rated endurance"),
    ({"percentage_used": 130}, Status.FAIL, "130% of rated endurance"),
    ({"smart_passed": False}, Status.FAIL, "FAILED"),
    ({"failing_attributes": ["Reallocated_Sector_Ct"]}, Status.FAIL, "Reallocated_Sector_Ct"),
    ({"pending_sectors": 3}, Status.WARN, "3 sectors pending"),
    ({"state": "dead"}, Status.FAIL, "controller state dead"),
])
def test_each_fault_gives_its_status(changes, status, words):
    [f] = run(Snapshot("n", WHEN, storage=[healthy_nvme(**changes)]), "storage.health")
    assert f.status is status and words in f.message, f.message


def test_thresholds_are_overridable():
    exp = loads('[defaults]\n[defaults.thresholds."storage.health"]\nmax_media_errors = 10\n'
                'fail_percentage_used = 150\n').expectations_for("n")
    [f] = run(Snapshot("n", WHEN, storage=[healthy_nvme(media_errors=7, percentage_used=120)]),
              "storage.health", exp)
    assert f.status is Status.WARN and "120%" in f.message


def test_unread_devices_skip_when_no_tool_and_error_when_the_tool_failed():
    devs = [StorageDevice("nvme0", unread="health not read: nvme-cli (nvme) and smartmontools "
                                           "(smartctl) are not installed"),
            StorageDevice("sda", kind="sata", unread="smartctl sda: no answer within 9 s")]
    f0, f1 = run(Snapshot("n", WHEN, storage=devs), "storage.health")
    assert f0.status is Status.SKIP and "not installed" in f0.message
    assert f1.status is Status.ERROR and "no answer" in f1.message


def test_storage_not_probed_is_a_skip_and_the_prolog_does_not_run_it():
    [f] = run(Snapshot("n", WHEN), "storage.health")
    assert f.status is Status.SKIP and "no storage data" in f.message
    with pytest.raises(ValueError):  # not a check of the prolog
        judge(Snapshot("n", WHEN, storage=[healthy_nvme()]), default_expectations(), "prolog",
              only=["storage.health"])


# ------------------------------------------------------------------------------- storage.count


@pytest.mark.parametrize("found,status", [(8, Status.PASS), (7, Status.FAIL), (9, Status.WARN)])
def test_nvme_count_against_the_class(found, status):
    exp = loads('[class.gpu]\nnodes = "n"\nnvme_count = 8\n').expectations_for("n")
    devs = [healthy_nvme(f"nvme{i}") for i in range(found)] + [StorageDevice("sda", kind="sata")]
    [f] = run(Snapshot("n", WHEN, storage=devs), "storage.count", exp)
    assert f.status is status and f.metrics["nvme"] == found, f.message


def test_nvme_count_without_expectation_reports_only():
    [f] = run(Snapshot("n", WHEN, storage=[healthy_nvme()]), "storage.count")
    assert f.status is Status.PASS and "no nvme_count expected" in f.message


def test_nvme_count_is_validated():
    from healthcheck.config import ConfigError

    with pytest.raises(ConfigError):
        loads('[defaults]\nnvme_count = "eight"\n')
    with pytest.raises(ConfigError):
        loads('[defaults]\nnvme_count = 5000\n')


def test_config_generate_records_the_nvme_count():
    from healthcheck.config.generate import generate_toml

    snap = Snapshot("golden", WHEN, storage=[healthy_nvme(f"nvme{i}") for i in range(4)])
    text = generate_toml(snap, "gpu", "gpu[01-10]")
    assert "nvme_count = 4" in text
    exp = loads(text).expectations_for("gpu05")
    [f] = run(Snapshot("gpu05", WHEN, storage=[healthy_nvme(f"nvme{i}") for i in range(3)]), "storage.count", exp)
    assert f.status is Status.FAIL


# ------------------------------------------------------------------------------------- bmc.sel


def sel(text: str, acked: list[str] | None = None) -> Snapshot:
    return Snapshot("n", WHEN, bmc=BmcInfo(events=parse_sel(text), sensors=[]), acknowledged_events=acked)


LINE = "{id} | 05/02/2024 | 10:{m:02d}:00 | {sensor} | {event} | {dir}{detail}\n"


def line(i: int, sensor: str, event: str, direction: str = "Asserted", detail: str = "") -> str:
    return LINE.format(id=f"{i:x}", m=i % 60, sensor=sensor, event=event, dir=direction,
                       detail=f" | {detail}" if detail else "")


@pytest.mark.parametrize("sensor,event,status", [
    ("Power Supply PS2 Status", "Power Supply AC lost", Status.FAIL),
    ("Power Supply PS2 Status", "Failure detected", Status.FAIL),
    ("Power Supply PS2 Status", "Predictive failure", Status.FAIL),
    ("Power Unit Pwr Unit Redund", "Redundancy Lost", Status.FAIL),
    ("Power Supply PS1 Status", "Presence detected", Status.PASS),
    ("Fan FAN3", "Lower Critical going low", Status.FAIL),
    ("Fan FAN3", "Lower Non-critical going low", Status.WARN),
    ("Temperature CPU1 Temp", "Upper Critical going high", Status.FAIL),
    ("Temperature CPU1 Temp", "Upper Non-critical going high", Status.WARN),
    ("Memory #0x02", "Uncorrectable ECC", Status.FAIL),
    ("Memory #0x02", "Correctable ECC logging limit reached", Status.FAIL),
    ("Memory #0x02", "Correctable ECC", Status.WARN),
    ("Processor CPU1 Status", "IERR", Status.FAIL),
    ("Processor CPU1 Status", "Thermal Trip", Status.FAIL),
    ("Processor CPU1 Status", "Presence detected", Status.PASS),
    ("Physical Security #0x51", "General Chassis intrusion", Status.PASS),  # not a class judged here
    ("System Firmware Progress #0x05", "Motherboard initialization", Status.PASS),
])
def test_sel_events_by_class(sensor, event, status):
    findings = run(sel(line(1, sensor, event)), "bmc.sel")
    assert max(f.status.severity for f in findings) == status.severity, [f.message for f in findings]


def test_correctable_ecc_fails_at_the_count_on_one_dimm_only():
    text = "".join(line(i, "Memory", "Correctable ECC", detail="CPU 0 DIMM 8") for i in range(1, 4))
    text += line(9, "Memory", "Correctable ECC", detail="CPU 1 DIMM 2")
    findings = {f.component: f for f in run(sel(text), "bmc.sel")}
    assert findings["bmc:CPU 0 DIMM 8"].status is Status.WARN and "FAIL at 4" in findings["bmc:CPU 0 DIMM 8"].message
    text += line(10, "Memory", "Correctable ECC", detail="CPU 0 DIMM 8")
    findings = {f.component: f for f in run(sel(text), "bmc.sel")}
    assert findings["bmc:CPU 0 DIMM 8"].status is Status.FAIL
    assert findings["bmc:CPU 1 DIMM 2"].status is Status.WARN


def test_a_deasserted_event_has_cleared():
    text = line(1, "Power Supply PS2 Status", "Power Supply AC lost") + \
        line(2, "Power Supply PS2 Status", "Power Supply AC lost", "Deasserted")
    [f] = run(sel(text), "bmc.sel")
    assert f.status is Status.PASS
    text += line(3, "Power Supply PS2 Status", "Power Supply AC lost")  # lost again later
    assert run(sel(text), "bmc.sel")[0].status is Status.FAIL


def test_events_acted_on_pass_and_new_ones_count():
    old = line(1, "Power Supply PS2 Status", "Failure detected")
    snap = sel(old)
    keys = event_keys(snap.bmc)
    assert keys == [event_key(snap.bmc.events[0])] and keys[0].startswith("sel|1|05/02/2024 10:01:00|")
    [f] = run(sel(old, acked=keys), "bmc.sel")
    assert f.status is Status.PASS and "1 already acted on" in f.message
    new = old + line(2, "Fan FAN1", "Lower Critical going low")
    [f] = run(sel(new, acked=keys), "bmc.sel")
    assert f.status is Status.FAIL and "FAN1" in f.message and "PS2" not in f.message


def test_event_keys_leave_out_events_not_judged():
    snap = sel(line(1, "OS Boot", "C: boot completed") + line(2, "Power Supply PS1", "Presence detected"))
    assert event_keys(snap.bmc) == [] and event_keys(None) == []


def test_unavailable_bmc_is_a_skip_saying_why_and_a_failed_read_an_error():
    snap = Snapshot("n", WHEN, bmc=BmcInfo(unavailable="ipmitool is not installed: the BMC was not read"))
    for name in ("bmc.sel", "bmc.sdr"):
        [f] = run(snap, name)
        assert f.status is Status.SKIP and "ipmitool is not installed" in f.message
    snap = Snapshot("n", WHEN, bmc=BmcInfo(sel_error="ipmitool sel elist: no answer within 14 s (BMC slow or hung)",
                                           sensors=[]))
    [f] = run(snap, "bmc.sel")
    assert f.status is Status.ERROR and "no answer" in f.message
    [f] = run(Snapshot("n", WHEN), "bmc.sel")
    assert f.status is Status.SKIP and "no BMC data" in f.message


# ------------------------------------------------------------------------------------- bmc.sdr


@pytest.mark.parametrize("sensor,status", [
    (BmcSensor("FAN2", "lcr", "0 RPM"), Status.FAIL),
    (BmcSensor("FAN2", "lnc", "900 RPM"), Status.WARN),
    (BmcSensor("FAN5", "ns", "no reading"), Status.PASS),
    (BmcSensor("PS1 Status", "ok", "Presence detected, Power Supply AC lost"), Status.FAIL),
    (BmcSensor("PSU2 Status", "ok", "Presence detected, Predictive failure"), Status.FAIL),
    (BmcSensor("PS1 Status", "ok", "Presence detected"), Status.PASS),
    (BmcSensor("PS2 Input Power", "cr", "0 Watts"), Status.FAIL),
    (BmcSensor("VBAT", "lcr", "2.54 Volts"), Status.WARN),
    (BmcSensor("CPU1 Temp", "ok", "40 degrees C"), Status.PASS),
])
def test_sdr_power_supplies_and_fans(sensor, status):
    healthy = [BmcSensor("FAN1", "ok", "3400 RPM"), BmcSensor("PS2 Status", "ok", "Presence detected")]
    findings = run(Snapshot("n", WHEN, bmc=BmcInfo(events=[], sensors=healthy + [sensor])), "bmc.sdr")
    assert max(f.status.severity for f in findings) == status.severity, [f.message for f in findings]
    if status is not Status.PASS:
        assert findings[0].component == f"bmc:{sensor.name}"


def test_bmc_checks_belong_to_health_check_contexts_only():
    from healthcheck.checks.registry import index

    for name in ("bmc.sel", "bmc.sdr", "storage.health", "storage.count"):
        assert index()[name].contexts == frozenset({"check", "slurm-check"}), name
