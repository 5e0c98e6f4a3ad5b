"""Storage health (nvme smart-log, smartctl) and BMC (ipmitool sel/sdr, FreeIPMI ipmi-sel) parsers, and
the real recordings of the corpus (host/smart, host/ipmi) judged as SOURCES-host.tsv says."""
from __future__ import annotations

import json

import pytest

from healthcheck.config import default_expectations
from healthcheck.core.model import BmcInfo, Snapshot, Status
from healthcheck.parsers import ParseError
from healthcheck.parsers.ipmitool import parse_sdr, parse_sel, sensor_type_of
from healthcheck.parsers.smart import merge, parse_storage_health
from healthcheck.pipeline.judge import judge
from tests.conftest import CORPUS

# ------------------------------------------------------------------------------------- corpus


def _rows() -> list[tuple[str, str]]:
    """(path under host/, FAULT|HEALTHY) for the SMART and IPMI recordings."""
    tsv = CORPUS / "host" / "SOURCES-host.tsv"
    if not tsv.is_file():
        return []
    out = []
    for line in tsv.read_text().splitlines()[1:]:
        cells = line.split("\t")
        if len(cells) >= 5 and cells[0].startswith(("smart/", "ipmi/")):
            out.append((cells[0], "FAULT" if cells[4].startswith("FAULT") else "HEALTHY"))
    return out


ROWS = _rows() or [pytest.param(None, None, marks=pytest.mark.skip(reason="corpus host/ absent"))]


def judged(rel: str):
    """The recording through its parser and the runner (the checks of its kind only)."""
    text = (CORPUS / "host" / rel).read_text()
    when = "2026-12-01T00:00:00+00:00"
    if rel.startswith("smart/"):
        snap, only = Snapshot("n", when, storage=[parse_storage_health(text)]), ["storage.health"]
    elif "-sdr-" in rel.split("__", 1)[1]:
        snap, only = Snapshot("n", when, bmc=BmcInfo(sensors=parse_sdr(text))), ["bmc.sdr"]
    else:
        snap, only = Snapshot("n", when, bmc=BmcInfo(events=parse_sel(text))), ["bmc.sel"]
    return judge(snap, default_expectations(), "slurm-check", only=only)


@pytest.mark.parametrize("rel,expected", ROWS)
def test_corpus_recordings_are_judged_as_their_sources_row_says(rel, expected):
    verdict = judged(rel)
    assert verdict.findings, rel
    if expected == "FAULT":
        assert verdict.status is Status.FAIL, [f.message for f in verdict.findings]
    else:
        assert verdict.status is Status.PASS, [f.message for f in verdict.findings]


def test_corpus_faults_name_their_cause():
    if not _rows():
        pytest.skip("corpus host/ absent")
    messages = {rel: " ".join(f.message for f in judged(rel).findings) for rel, _ in _rows()}
    by_word = {word: [m for rel, m in messages.items() if word in rel] for word in
               ("media-errors-7", "freeipmi", "correctable-ecc", "hgst", "sandisk")}
    assert "7 media and data integrity errors" in by_word["media-errors-7"][0]
    assert "Power Supply Failure detected" in by_word["freeipmi"][0]
    assert "CPU 0 DIMM 8" in by_word["correctable-ecc"][0] and "x8" in by_word["correctable-ecc"][0]
    assert all("overall-health self-assessment FAILED" in by_word[w][0] for w in ("hgst", "sandisk"))


# ------------------------------------------------------------------------------- smart parsers

NVME_CLI_2 = {"critical_warning": 0, "temperature": 310, "avail_spare": 100, "spare_thresh": 10,
              "percent_used": 2, "endurance_grp_critical_warning_summary": 0, "media_errors": 0,
              "num_err_log_entries": 3}


def test_nvme_cli_json_both_spellings_and_kelvin():
    dev = parse_storage_health(json.dumps(NVME_CLI_2), "nvme3")
    assert (dev.name, dev.kind, dev.source) == ("nvme3", "nvme", "nvme-smart-log")
    assert (dev.critical_warning, dev.available_spare_pct, dev.available_spare_threshold_pct,
            dev.percentage_used, dev.media_errors, dev.num_err_log_entries) == (0, 100, 10, 2, 0, 3)
    assert dev.temperature_c == 37.0
    newer = dict(NVME_CLI_2, critical_warning={"value": 4}, percentage_used=5)
    del newer["percent_used"]
    dev = parse_storage_health(json.dumps(newer), "nvme0")
    assert dev.critical_warning == 4 and dev.percentage_used == 5


def test_smartctl_ata_json_failing_attributes_and_exit_status():
    doc = {"smartctl": {"exit_status": 8}, "device": {"name": "/dev/sda", "protocol": "ATA"},
           "model_name": "X", "ata_smart_attributes": {"table": [
               {"id": 5, "name": "Reallocated_Sector_Ct", "when_failed": "now", "raw": {"value": 2000}},
               {"id": 197, "name": "Current_Pending_Sector", "when_failed": "", "raw": {"value": 8}}]}}
    dev = parse_storage_health(json.dumps(doc))
    assert (dev.name, dev.kind, dev.smart_passed) == ("sda", "sata", False)  # exit bit 3: disk failing
    assert dev.failing_attributes == ["Reallocated_Sector_Ct"]
    assert (dev.reallocated_sectors, dev.pending_sectors) == (2000, 8)


def test_smartctl_that_could_not_open_the_device_is_unread():
    doc = {"smartctl": {"exit_status": 2, "messages": [{"string": "Smartctl open device: /dev/sdz failed"}]},
           "device": {"name": "/dev/sdz"}}
    dev = parse_storage_health(json.dumps(doc))
    assert dev.source is None and "open device" in dev.unread


def test_smartctl_text_nvme_section():
    text = ("=== START OF SMART DATA SECTION ===\nSMART overall-health self-assessment test result: PASSED\n"
            "Critical Warning:                   0x08\nAvailable Spare:                    3%\n"
            "Available Spare Threshold:          10%\nPercentage Used:                    101%\n"
            "Media and Data Integrity Errors:    1,204\n")
    dev = parse_storage_health(text, "nvme1")
    assert (dev.smart_passed, dev.critical_warning, dev.available_spare_pct, dev.percentage_used,
            dev.media_errors) == (True, 8, 3, 101, 1204)


@pytest.mark.parametrize("text", ["", "hello", "{}", "[1, 2]", "{not json", '{"smartctl": 1, "device": 3}'])
def test_unusable_inputs_are_parse_errors_or_empty_readings(text):
    try:
        dev = parse_storage_health(text)
    except ParseError:
        return
    assert dev.smart_passed is None and dev.media_errors is None


def test_merge_keeps_the_first_known_value_and_every_source():
    a = parse_storage_health(json.dumps(NVME_CLI_2), "nvme0")
    b = parse_storage_health(json.dumps({"smart_status": {"passed": False}, "device": {"protocol": "NVMe"}}), "nvme0")
    m = merge([a, b])
    assert m.smart_passed is False and m.percentage_used == 2
    assert m.source == "nvme-smart-log+smartctl-json"


# ---------------------------------------------------------------------------- ipmitool parsers

ELIST = """\
   1 | 05/02/2024 | 10:00:01 | Power Supply PS1 Status | Presence detected | Asserted
   2 | 05/02/2024 | 10:05:11 | Power Supply PS2 Status | Power Supply AC lost | Asserted
   3 | 05/02/2024 | 10:09:00 | Power Supply PS2 Status | Power Supply AC lost | Deasserted
   4 | Pre-Init  |0000000011| Processor CPU1 Status | IERR | Asserted
  1f | 05/03/2024 | 01:00:00 | Memory #0x02 | Uncorrectable ECC | Asserted | DIMM_A1
"""


def test_sel_elist_fields_pre_init_and_detail():
    events = parse_sel(ELIST)
    assert [e.record_id for e in events] == ["1", "2", "3", "4", "1f"]
    assert events[1].sensor_type == "Power Supply" and events[1].description == "Power Supply AC lost"
    assert events[2].direction == "Deasserted"
    assert (events[3].date, events[3].sensor_type) == ("Pre-Init", "Processor")
    assert events[4].detail == "DIMM_A1" and events[4].sensor_type == "Memory"


def test_sel_without_entries_and_garbage():
    assert parse_sel("SEL has no entries\n") == []
    assert parse_sel("") == []
    with pytest.raises(ParseError):
        parse_sel("Could not open device at /dev/ipmi0\nnothing here\n")


def test_sensor_types_prefer_the_longest_name():
    assert sensor_type_of("System Firmware Progress #0x05") == "System Firmware Progress"
    assert sensor_type_of("Power Unit Pwr Unit Redund") == "Power Unit"
    assert sensor_type_of("Fanatic") is None


def test_sdr_elist_and_list_forms():
    sensors = parse_sdr("PS1 Status       | C8h | ok  | 10.1 | Presence detected, Power Supply AC lost\n"
                        "FAN2             | 41h | lcr | 29.2 | 0 RPM\n"
                        "CPU1 Temp        | 29 degrees C      | ok\n")
    assert [(s.name, s.status) for s in sensors] == [("PS1 Status", "ok"), ("FAN2", "lcr"), ("CPU1 Temp", "ok")]
    assert "AC lost" in sensors[0].reading and sensors[0].sensor_id == "C8h"
    with pytest.raises(ParseError):
        parse_sdr("Unable to open SDR for reading\n")
