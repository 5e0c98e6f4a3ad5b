"""Xid and SXid refresh (issue 33): NVIDIA's catalog through Xid 172, the NVLink5 Xids (144-150) judged by
the severity their message states, an Xid known from "caused by previous Xid N", NVSwitch SXid lines, and
the unrepairable-memory flag of Blackwell memory repair."""
from __future__ import annotations

import dataclasses

import pytest

from healthcheck.checks.gpu_xid import gpu_xid
from healthcheck.config import default_expectations, loads
from healthcheck.core.expectations import Expectations, message_severity
from healthcheck.core.model import KernelEvent, Snapshot, Status
from healthcheck.parsers.kernel_log import parse_kernel_log
from healthcheck.policies.xid import default_policy_text, load_xid_policy

from tests.checks.gpu_builders import by_component, h100, run, snapshot
from tests.conftest import CORPUS

PASS, WARN, FAIL = Status.PASS, Status.WARN, Status.FAIL
EXP = default_expectations()


def _judge(log: str, exp: Expectations = EXP) -> dict:
    snap = Snapshot(node="n1", taken_at="2026-01-01T00:00:00Z", kernel_events=parse_kernel_log(log))
    return {f.component: f for f in gpu_xid(snap, exp, {})}


def _xid(number: int, message: str, bus: str = "dc") -> str:
    return f"[ 100.000000] NVRM: Xid (PCI:0000:{bus}:00): {number}, {message}\n"


# ------------------------------------------------------------------------------------ the catalog


def test_the_policy_covers_the_catalog_through_172():
    rules = load_xid_policy().rules
    assert set(range(144, 173)) <= set(rules)
    actions = {n: rules[n].action for n in range(160, 173)}
    assert actions == {160: "warn", 161: "warn", 162: "ignore", 163: "warn", 164: "warn", 165: "warn", 166: "warn",
                       167: "fail", 168: "fail", 169: "fail", 170: "warn", 171: "fail", 172: "fail"}
    assert rules[160].min_count == 10 and rules[161].min_count == 1


@pytest.mark.parametrize("number,status", [(167, FAIL), (169, FAIL), (171, FAIL), (172, FAIL), (168, FAIL),
                                           (165, WARN), (163, WARN), (162, PASS)])
def test_new_catalog_entries_are_judged(number, status):
    assert _judge(_xid(number, "pid=1, name=python3, detail"))["0000:dc:00.0"].status is status


def test_every_new_entry_names_its_catalog_mnemonic():
    text = default_policy_text()
    for mnemonic in ("CHANNEL_RETIREMENT_EVENT", "PSHC_ZERO_LIFETIME", "PCIE_FATAL_TIMEOUT", "REDUCED_GPU_MEMORY_CAPACITY",
                     "SEC2_HALT_ERROR", "UNCORRECTABLE_DRAM_ERROR", "UNCORRECTABLE_SRAM_ERROR"):
        assert mnemonic in text


# --------------------------------------------------------------------- NVLink5: by the message


def test_severity_word_is_read_before_xc():
    assert message_severity("NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x025001c6 0x00000000)") == "fatal"
    assert message_severity("RLW_RXPIPE Nonfatal XC0 i0 Link 13 (0x0409a0c2 0x00000008)") == "nonfatal"
    assert message_severity("MSE degraded Fatal XC1 i0 Link 02 (0x0)") == "fatal"
    assert message_severity("Fatal error on link 3") is None  # not the NVLink5 form
    assert message_severity(None) is None


@pytest.mark.parametrize("number,message,status", [
    (145, "RLW_RXPIPE Nonfatal XC0 i0 Link 13 (0x0409a0c2 0x00000008 0x00000001 0x0 0x00100000 0x4)", WARN),
    (145, "RLW_REMAP Fatal XC0 i0 Link 13 (0x0409a0c2 0x00000040 0x0 0x0 0x0 0x0)", FAIL),
    (149, "NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x025001c6 0x0 0x0 0x0 0x0 0x0)", FAIL),
    (149, "NETIR Fatal XC0 i0 Link -1 (0x000fe406 0x0 0x0 0x0 0x0 0x0)", FAIL),
    (149, "NETIR_LINK_EVT Nonfatal XC0 i0 Link 00 (0x0)", WARN),
    (149, "NVLink: NETIR Error", FAIL),  # no severity word: every NETIR row is Link Fatal
    (144, "SAW_MVB Fatal XC0 i0 Link 04 (0x0 0x00000002 0x0 0x0 0x0 0x0)", FAIL),
    (144, "SAW_MVB Nonfatal XC0 i0 Link 04 (0x0 0x00000001 0x0 0x0 0x0 0x0)", WARN),
    (150, "MSE degraded Fatal XC0 i0 Link 02 (0x0)", FAIL),
    (146, "TLW_CTRL error", WARN),  # no severity word: the rule's action
])
def test_nvlink5_xid_by_its_severity(number, message, status):
    found = _judge(_xid(number, message))["0000:dc:00.0"]
    assert found.status is status, found.message


def test_a_fatal_and_a_nonfatal_event_of_one_xid_fail_and_say_so():
    log = _xid(145, "RLW_RXPIPE Nonfatal XC0 i0 Link 13 (0x0)") + _xid(145, "RLW_REMAP Fatal XC0 i0 Link 13 (0x0)")
    found = _judge(log)["0000:dc:00.0"]
    assert found.status is FAIL and "[fatal, nonfatal]" in found.message


def test_a_site_override_of_the_action_decides_every_event():
    cfg = loads('[xid]\n145 = { action = "ignore" }\n')
    exp = cfg.expectations_for("n1")
    assert _judge(_xid(145, "RLW_REMAP Fatal XC0 i0 Link 13 (0x0)"), exp)["0000:dc:00.0"].status is PASS


def test_a_bad_split_action_is_refused():
    text = default_policy_text().replace('\nfatal_action = "fail"', '\nfatal_action = "explode"', 1)
    with pytest.raises(ValueError, match="Xid 144: key 'fatal_action'"):
        load_xid_policy(text)


# ----------------------------------------------------------------- "caused by previous Xid N"


def test_an_xid_named_by_a_later_one_counts():
    log = _xid(45, "pid=7, name=python3, Ch 00000001 caused by previous Xid 149")
    found = _judge(log)["0000:dc:00.0"]
    assert found.status is FAIL and "caused by previous Xid 149" in found.message
    assert found.metrics["xid_149"] == 1


def test_the_named_xid_is_not_counted_twice_where_its_line_is_in_the_log():
    log = (_xid(149, "NETIR_LINK_EVT Nonfatal XC0 i0 Link 00 (0x0)")
           + _xid(45, "pid=7, name=python3, Ch 00000001 caused by previous Xid 149"))
    found = _judge(log)["0000:dc:00.0"]
    assert found.status is WARN and found.metrics["xid_149"] == 1  # its own line says Nonfatal


# -------------------------------------------------------------------------------- NVSwitch SXids

SXID_FATAL = ("[ 200.100000] nvidia-nvswitch2: SXid (PCI:0000:07:00.0): 20034, Fatal, Link 30 LTSSM Fault Up\n"
              "[ 200.100100] nvidia-nvswitch2: SXid (PCI:0000:07:00.0): 20034, Severity 1 Engine instance 30 "
              "Sub-engine instance 00\n"
              "[ 200.100200] nvidia-nvswitch2: SXid (PCI:0000:07:00.0): 20034, Data {0x0000001e, 0x00000000}\n")
SXID_NONFATAL = "[ 300.5] nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 egress non-posted PRIV error (First)\n"


def test_sxid_lines_are_parsed_context_lines_are_not_events():
    events = parse_kernel_log(SXID_FATAL + SXID_NONFATAL)
    assert [(e.kind, e.xid, e.event_class, e.device, e.pci_bus_id) for e in events] == [
        ("sxid", 20034, "fatal", "nvswitch2", "0000:07:00.0"),
        ("sxid", 12028, "nonfatal", "nvswitch0", "0000:05:00.0")]
    assert events[0].message == "Link 30 LTSSM Fault Up" and events[0].uptime_s == pytest.approx(200.1)


def test_sxid_and_xid_keep_log_order():
    log = _xid(79, "pid=1, name=x, GPU has fallen off the bus.") + SXID_NONFATAL + _xid(48, "DBE")
    assert [e.xid for e in parse_kernel_log(log)] == [79, 12028, 48]


def test_fatal_sxid_fails_nonfatal_warns():
    found = _judge(SXID_FATAL + SXID_NONFATAL)
    assert found["nvswitch2"].status is FAIL and "SXid 20034 (Fatal)" in found["nvswitch2"].message
    assert found["nvswitch0"].status is WARN


def test_sxid_actions_are_policy_data():
    text = default_policy_text().replace('sxid_nonfatal_action = "warn"', 'sxid_nonfatal_action = "ignore"')
    exp = dataclasses.replace(EXP, xid_policy=load_xid_policy(text))
    assert _judge(SXID_NONFATAL, exp)["nvswitch0"].status is PASS
    with pytest.raises(ValueError, match="sxid_fatal_action"):
        load_xid_policy(default_policy_text().replace('sxid_fatal_action = "fail"', 'sxid_fatal_action = "x"'))


# ------------------------------------------------------------------------------ unrepairable memory


def test_unrepairable_memory_fails_with_rma_advice():
    snap = snapshot(gpus=[h100(0, unrepairable_memory=True), h100(1, unrepairable_memory=False), h100(2)])
    found = by_component(run("gpu.row_remap", snap))
    assert found["gpu0"].status is FAIL and "RMA" in found["gpu0"].message
    assert found["gpu1"].status is PASS and found["gpu1"].metrics["unrepairable_memory"] == 0
    assert found["gpu2"].status is PASS and "unrepairable_memory" not in found["gpu2"].metrics


# ------------------------------------------------------------------------------------- the corpus

KERNEL = CORPUS / "blackwell" / "kernel-xid"


@pytest.mark.corpus
@pytest.mark.parametrize("fragment,expected", [
    # SOURCES-blackwell: FAULT (non-fatal): SXid 22013 Minion Link DLREQ on nvswitch3
    ("sxid-22013", {"nvswitch3": WARN}),
    # FAULT: SXid 11004 ingress invalid ACL (Non-fatal) on all 4 NVSwitches
    ("sxid-11004", {"nvswitch0": WARN, "nvswitch1": WARN, "nvswitch2": WARN, "nvswitch3": WARN}),
    # FAULT: Xid 45 caused by previous Xid 149 (Link Fatal) / Xid 145 on 4 GPUs
    ("xid-45-caused-by-previous-xid-149", {"0000:dc:00.0": FAIL, "0000:ed:00.0": WARN, "0000:ba:00.0": WARN,
                                           "0000:97:00.0": WARN}),
])
def test_corpus_kernel_logs_judged_as_their_sources_say(fragment, expected):
    files = sorted(KERNEL.glob(f"*{fragment}*")) if KERNEL.is_dir() else []
    if not files:
        pytest.skip("corpus blackwell/kernel-xid absent")
    found = _judge(files[0].read_text(encoding="utf-8"))
    assert {c: f.status for c, f in found.items()} == expected, {c: f.message for c, f in found.items()}


# --------------------------------------------------------------------------- the fabric manager's log

FM_LINES = (
    "[Dec 19 2024 19:17:48] [INFO] [tid 1374] Successfully configured all the available GPUs and NVSwitches\n"
    "[Dec 19 2024 19:17:49] [ERROR] [tid 1374] detected NVSwitch non-fatal error 12028 on fid 0 on NVSwitch pci bus "
    "id 00000000:83:00.0 physical id 0 port 34\n"
    "[Dec 19 2024 19:17:49] [ERROR] [tid 1374] detected NVSwitch non-fatal error 12028 on fid 0 on NVSwitch pci bus "
    "id 00000000:83:00.0 physical id 0 port 34\n"
    "[Dec  2 2025 01:02:03] [ERROR] [tid 99] detected NVSwitch fatal error 20034 on fid 0 on NVSwitch pci bus id "
    "00000000:84:00.0 physical id 1 port 35\n")


def test_fabric_manager_errors_become_sxid_events():
    from healthcheck.parsers.fabricmanager import parse_fabricmanager_log

    events = parse_fabricmanager_log(FM_LINES)
    assert [(e.xid, e.event_class, e.device, e.pci_bus_id, e.time, e.message) for e in events] == [
        (12028, "nonfatal", "nvswitch physical id 0", "0000:83:00.0", "2024-12-19T19:17:49", "port 34"),
        (20034, "fatal", "nvswitch physical id 1", "0000:84:00.0", "2025-12-02T01:02:03", "port 35")]
    snap = Snapshot(node="n1", taken_at="2026-01-01T00:00:00Z", kernel_events=events)
    found = {f.component: f.status for f in gpu_xid(snap, EXP, {})}
    assert found == {"nvswitch physical id 0": WARN, "nvswitch physical id 1": FAIL}


@pytest.mark.corpus
def test_corpus_fabric_manager_log_nonfatal_12028_warns():
    # SOURCES.md: HGX H100, "faulty: NVSwitch non-fatal error 12028 on multiple NVSwitch ports"
    from healthcheck.parsers.fabricmanager import parse_fabricmanager_log

    path = CORPUS / "fabricmanager" / "gpud__fabricmanager-log-nvswitch-nonfatal-error-12028.txt"
    if not path.is_file():
        pytest.skip("corpus fabricmanager/ absent")
    events = parse_fabricmanager_log(path.read_text(encoding="utf-8"))
    assert {e.xid for e in events} == {12028} and len({e.device for e in events}) == 4
    snap = Snapshot(node="n1", taken_at="2026-01-01T00:00:00Z", kernel_events=events)
    assert {f.status for f in gpu_xid(snap, EXP, {})} == {WARN}


def test_bundles_record_and_read_the_fabric_manager_log(tmp_path):
    from healthcheck.bundles.archive import snapshot_from_bundle, write_bundle
    from healthcheck.bundles.collect import _fabricmanager_log

    log = tmp_path / "fabricmanager.log"
    log.write_text("x" * 100 + "\n" + FM_LINES)
    raw: dict = {}
    _fabricmanager_log(raw, [], str(log))
    assert raw["fabricmanager.log"].endswith(FM_LINES)
    notes: list = []
    _fabricmanager_log({}, notes, str(tmp_path / "absent.log"))
    assert notes == []
    raw["dmesg.txt"] = SXID_NONFATAL
    snap = Snapshot(node="n1", taken_at="2026-01-01T00:00:00Z")
    path = write_bundle(snap, tmp_path / "b", raw, sysfs_root=str(tmp_path / "nosys"), proc_root=str(tmp_path / "np"))
    back = snapshot_from_bundle(path)
    assert sorted(e.xid for e in back.kernel_events if e.kind == "sxid") == [12028, 12028, 20034]
