"""Kernel-log (NVRM Xid / fallen off the bus / RmInitAdapter) parser: real corpus, own fixtures, fuzz."""
from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from healthcheck.core.model import KernelEvent
from healthcheck.parsers import ParseError
from healthcheck.parsers.kernel_log import MAX_LINE_CHARS, parse_kernel_log
from tests.conftest import CORPUS, FIXTURES, corpus_files, corpus_params
from tests.fuzzing import mutated as fuzz_mutated

KINDS = {"xid", "fallen_off_bus", "rm_init_failed"}
FIX = FIXTURES / "kernel-log"


def _corpus(name: str) -> list[KernelEvent]:
    path = CORPUS / "kernel-xid" / name
    if not path.is_file():
        pytest.skip(f"corpus file {name} absent")
    return parse_kernel_log(path.read_text())


def _fixture(name: str) -> list[KernelEvent]:
    return parse_kernel_log((FIX / name).read_text())


def _xids(events):
    return [e.xid for e in events if e.kind == "xid"]


# ------------------------------------------------------------------------------------ real corpus


@pytest.mark.corpus
@pytest.mark.parametrize("path", corpus_params("kernel-xid"))
def test_every_corpus_file_parses_to_events(path: Path):
    events = parse_kernel_log(path.read_text())
    assert events, "every corpus file shows at least one NVIDIA event"
    for event in events:
        assert isinstance(event, KernelEvent)
        assert event.kind in KINDS
        assert event.line and "NVRM:" in event.line
        if event.kind == "xid":
            assert isinstance(event.xid, int)
        if event.pci_bus_id is not None:
            assert len(event.pci_bus_id) == 12 and event.pci_bus_id.endswith(".0")


@pytest.mark.corpus
def test_corpus_syslog_xid48_xid64_and_rminit_on_other_gpu():
    events = _corpus("syslog-xid48-dbe-xid64-rminitadapter-failed-gpuop1146-excerpt.log")
    xids = [e for e in events if e.kind == "xid"]
    assert [(e.xid, e.pci_bus_id) for e in xids] == [(48, "0000:07:00.0"), (64, "0000:07:00.0")]
    dbe = xids[0]
    assert dbe.pid is None and dbe.process is None  # pid='<unknown>', name=<unknown>
    assert dbe.message.startswith("An uncorrectable double bit error (DBE)")
    assert dbe.uptime_s == pytest.approx(219.470994)
    assert dbe.time is None  # syslog prints no year
    assert dbe.line.startswith("Dec  2 11:38:47 worker4 kernel:")
    rminit = [e for e in events if e.kind == "rm_init_failed"]
    assert len(rminit) == 3
    assert {e.pci_bus_id for e in rminit} == {"0000:0a:00.0"}
    assert all("(0x24:0x72:1568)" in e.message for e in rminit)
    assert "device minor number 5" in rminit[0].message


@pytest.mark.corpus
def test_corpus_chia_xid31_62_45_with_pid_and_name():
    events = _corpus("dmesg-xid31-mmu-fault-xid62-xid45-chia301-excerpt.log")
    assert _xids(events) == [31, 62] + [45] * 8
    assert {e.pci_bus_id for e in events} == {"0000:0a:00.0"}
    mmu = events[0]
    assert (mmu.pid, mmu.process) == (13332, "cuda_plot_k32_v")
    assert mmu.uptime_s == pytest.approx(14328.198504)
    assert mmu.message.startswith("Ch 00000010, intr 00000000. MMU Fault")
    assert (events[1].pid, events[1].process) == (None, None)
    assert events[2].message == "Ch 00000008"


@pytest.mark.corpus
def test_corpus_console_fallen_off_bus_multiline():
    events = _corpus("console-fallen-off-bus-probe-failed-cdi-rtxpro6000.log")
    assert len(events) == 1
    event = events[0]
    assert event.kind == "fallen_off_bus"
    assert event.pci_bus_id == "0000:02:00.0"
    assert "(PCI ID: 10de:2bb5)" in event.message and "fallen off the bus" in event.message


@pytest.mark.corpus
def test_corpus_ctime_quoted_xid13_and_109():
    events = _corpus("dmesg-ctime-xid13-sm-warp-exception-xid109-ctx-switch-timeout-gpud-readme-quoted.log")
    assert _xids(events) == [13, 13, 13, 109]
    assert events[0].time == "2024-08-30T11:43:09"
    assert events[0].line.startswith("[Fri Aug 30 11:43:09 2024] NVRM:")  # "> " quote stripped
    assert events[3].pid == 1797828 and events[3].process == "pt_main_thread"
    assert events[3].time == "2024-08-30T11:43:14"
    assert {e.pci_bus_id for e in events} == {"0000:cb:00.0"}


@pytest.mark.corpus
def test_corpus_old_format_without_pci_prefix():
    events = _corpus("kernlog-old-format-no-pci-prefix-xid16-head-xid8-bumblebee329.log")
    assert _xids(events) == [16] * 8 + [8]
    assert {e.pci_bus_id for e in events} == {"0000:01:00.0"}
    assert events[-1].message == "Channel 00000000"
    assert all(e.uptime_s is None and e.time is None for e in events)


@pytest.mark.corpus
def test_corpus_old_xid32_xid31_without_pid():
    events = _corpus("dmesg-xid32-xid31-engmask-no-pid-bumblebee677-excerpt.log")
    assert _xids(events) == [32, 32, 31]
    assert events[2].pid is None and events[2].message == "Ch 00000003, engmask 00000101, intr 10000000"


@pytest.mark.corpus
def test_corpus_journal_xid45_on_four_gpus():
    events = _corpus("journal-xid45-after-nvlink-xid149-xid145-ogkm1150-excerpt.log")
    assert _xids(events) == [45] * 7
    assert {e.pci_bus_id for e in events} == {"0000:dc:00.0", "0000:ed:00.0", "0000:ba:00.0", "0000:97:00.0"}
    assert events[0].message == "Ch 00000001 caused by previous Xid 149"
    assert (events[0].pid, events[0].process) == (1818990, "python3")


@pytest.mark.corpus
@pytest.mark.parametrize("name, pci, code, stamp", [
    ("dmesg-T-rminitadapter-failed-0x25-0x40-1470-titan-v-illinois76.log", "0000:81:00.0",
     "(0x25:0x40:1470)", "2024-04-14T12:48:42"),
    ("dmesg-rminitadapter-failed-0x63-open-module-unsupported-gpu-ogkm230-excerpt.log", "0000:04:00.0",
     "(0x63:0x0:1905)", None),
    ("journal-rminitadapter-failed-0x22-0x56-894-cannot-attach-gpu-rtx5080-ogkm1151-excerpt.log",
     "0000:09:00.0", "(0x22:0x56:894)", None),
])
def test_corpus_rminit_failures(name, pci, code, stamp):
    events = _corpus(name)
    assert events and all(e.kind == "rm_init_failed" for e in events)
    assert {e.pci_bus_id for e in events} == {pci}
    assert all(code in e.message for e in events)
    assert events[0].time == stamp


# ---------------------------------------------------------------------------------- own fixtures


def test_fixture_raw_dmesg_xid79_and_fallen_off_bus():
    events = _fixture("dmesg-raw-h100-xid79-fallen-off-bus.log")
    assert [(e.kind, e.xid, e.pci_bus_id) for e in events] == [
        ("xid", 79, "0000:1b:00.0"), ("fallen_off_bus", None, "0000:1b:00.0")]
    assert events[0].uptime_s == pytest.approx(8123.456799)
    assert (events[0].pid, events[0].process, events[0].message) == (2345, "python3", "GPU has fallen off the bus.")


def test_fixture_dmesg_T_wall_time():
    events = _fixture("dmesg-T-a100-xid48-dbe-xid63.log")
    assert _xids(events) == [48, 63, 94, 45]
    assert [e.time for e in events] == ["2024-03-05T10:11:12"] * 2 + ["2024-03-05T10:11:13"] * 2
    assert all(e.uptime_s is None for e in events)


def test_fixture_dmesg_iso_keeps_offset():
    events = _fixture("dmesg-iso-h100-xid13-storm-xid31.log")
    assert _xids(events) == [13, 13, 13, 43, 31]
    assert events[0].time == "2024-03-05T10:11:12+00:00"
    assert events[-1].time == "2024-03-05T10:14:55+00:00"
    assert events[-1].pci_bus_id == "0000:9a:00.0"


def test_fixture_journal_short_iso_pid_na_and_xid154():
    events = _fixture("journal-short-iso-b200-xid119-gsp.log")
    assert _xids(events) == [119, 119, 154]
    assert events[0].time == "2025-01-14T03:22:41+00:00"  # "+0000" normalised
    assert (events[1].pid, events[1].process) == (None, None)  # pid='N/A', no name= field
    assert events[1].message.startswith("Timeout after 6s")
    assert events[2].message == "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)"


def test_fixture_syslog_has_uptime_but_no_year():
    events = _fixture("kernlog-syslog-xid48-xid79-no-year.log")
    assert [(e.kind, e.xid, e.pci_bus_id) for e in events] == [
        ("xid", 48, "0000:3b:00.0"), ("xid", 45, "0000:3b:00.0"), ("xid", 79, "0000:86:00.0"),
        ("fallen_off_bus", None, "0000:86:00.0")]
    assert all(e.time is None for e in events)
    assert events[0].uptime_s == pytest.approx(1234.56789)
    assert events[0].process == "train.py"
    assert events[0].line.startswith("Mar  5 10:11:12 gpu017 kernel:")


def test_fixture_journalctl_console_fallen_off_bus_then_rminit():
    events = _fixture("journalctl-k-console-fallen-off-bus-rminit.log")
    assert [(e.kind, e.pci_bus_id) for e in events] == [
        ("fallen_off_bus", "0000:c1:00.0"), ("rm_init_failed", "0000:c1:00.0")]
    assert events[0].message == ("The NVIDIA GPU 0000:c1:00.0 (PCI ID: 10de:2330) installed in this system "
                                 "has fallen off the bus and is not responding to commands.")
    assert events[1].message == "RmInitAdapter failed! (0x26:0xffff:1601); device minor number 3"
    assert events[0].time is None


def test_fixture_short_full_ctime_quote_and_no_device():
    events = _fixture("journal-short-full-ctime-mixed.log")
    assert _xids(events) == [74, 45, 45, 13]
    assert [e.time for e in events] == ["2024-03-05T10:11:12", "2024-03-05T10:11:15",
                                        "2024-03-05T10:11:20", None]
    assert events[3].pci_bus_id is None
    assert events[3].message == "Graphics Exception: Illegal Instruction Encoding"


# ------------------------------------------------------------------------------------- edge cases


def test_no_events_gives_empty_list():
    assert parse_kernel_log("") == []
    assert parse_kernel_log("[    0.000000] Linux version 6.8.0\nMar  5 10:11:12 h sshd[1]: hi\n") == []


def test_bytes_are_decoded_with_replacement():
    raw = b"[ 12.5] NVRM: Xid (PCI:0000:07:00): 48, pid=1, name=x\xff\xfe, DBE\n"
    (event,) = parse_kernel_log(raw)
    assert event.xid == 48 and event.uptime_s == 12.5 and event.pid == 1


@pytest.mark.parametrize("bad", [None, 42, ["NVRM: Xid (PCI:0000:07:00): 48, x"]])
def test_non_text_raises_parse_error(bad):
    with pytest.raises(ParseError):
        parse_kernel_log(bad)


def test_nul_bytes_and_crlf_do_not_hide_events():
    text = "\x00\x00[ 1.0] NVRM: Xid (PCI:0000:07:00): 79, GPU has fallen off the bus.\r\n\x00garbage\x00"
    (event,) = parse_kernel_log(text)
    assert event.xid == 79 and event.message == "GPU has fallen off the bus."


def test_overlong_lines_are_ignored():
    long_line = "NVRM: Xid (PCI:0000:07:00): 48, " + "x" * MAX_LINE_CHARS
    text = long_line + "\nNVRM: Xid (PCI:0000:08:00): 13, short\n"
    assert [(e.xid, e.pci_bus_id) for e in parse_kernel_log(text)] == [(13, "0000:08:00.0")]


def test_huge_xid_number_is_not_an_event():
    assert parse_kernel_log("NVRM: Xid (PCI:0000:07:00): " + "9" * 5000 + ", boom") == []


@pytest.mark.parametrize("line", [
    "NVRM: Xid (PCI:0000:07:00): 48, pid=1, name=" + " " * 60000,
    "NVRM: RmInitAdapter failed!\nNVRM: " + "rm_init_adapter failed " * 2500,
    ("GPU" + " " * 100) * 500 + "NVRM: fallen off the bus",
])
def test_adversarial_lines_stay_linear(line):
    import time

    started = time.thread_time()  # CPU time: a loaded CI machine does not count
    assert len(parse_kernel_log(line)) == 1
    assert time.thread_time() - started < 1.0


def test_impossible_date_gives_no_time_but_keeps_event():
    (event,) = parse_kernel_log("[Fri Feb 30 11:43:09 2024] NVRM: Xid (PCI:0000:cb:00): 13, x")
    assert event.time is None and event.xid == 13


def test_domain_with_eight_digits_is_normalised():
    (event,) = parse_kernel_log("NVRM: Xid (PCI:00000001:c1:00): 95, pid=9, name=a, Uncontained")
    assert event.pci_bus_id == "0001:c1:00.0"


def test_old_rminit_without_gpu_takes_pci_from_next_line():
    text = ("[  5.1] NVRM: RmInitAdapter failed! (0x31:0x40:2636)\n"
            "[  5.1] NVRM: GPU at PCI:0000:3b:00: GPU-0b1c2d3e-aaaa-bbbb-cccc-0123456789ab\n")
    (event,) = parse_kernel_log(text)
    assert event.kind == "rm_init_failed" and event.pci_bus_id == "0000:3b:00.0"
    assert event.message == "RmInitAdapter failed! (0x31:0x40:2636)"


# ------------------------------------------------------------------------------------------- fuzz


def _seed_texts() -> list[str]:
    texts = [p.read_text() for p in sorted(FIX.glob("*.log"))]
    texts += [p.read_text() for p in corpus_files("kernel-xid")]
    return texts


SEEDS = _seed_texts()


def mutated():
    return fuzz_mutated(SEEDS)


def _assert_well_formed(events):
    assert isinstance(events, list)
    for event in events:
        assert event.kind in KINDS
        assert event.kind != "xid" or isinstance(event.xid, int)


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_fuzz_any_text(text):
    try:
        _assert_well_formed(parse_kernel_log(text))
    except ParseError:
        pass


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_fuzz_mutated_real_logs(text):
    try:
        _assert_well_formed(parse_kernel_log(text))
    except ParseError:
        pass


@settings(max_examples=100, deadline=None)
@given(st.binary())
def test_fuzz_bytes(raw):
    _assert_well_formed(parse_kernel_log(raw))


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet="NVRM:Xid (PCI0123456789abcdef.,)pid=name'<unknown> \n[]>", max_size=200))
def test_fuzz_nvrm_alphabet(text):
    _assert_well_formed(parse_kernel_log(text))
