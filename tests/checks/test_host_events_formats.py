"""Issue 32.1: the host-event reader finds the kernel message whatever front-end wrote the line, reads
every block-error wording since 4.x, and judges the public network and log-format corpus
(``netlogs/logformats`` and ``netlogs/netdev``, read in place) as its SOURCES rows say."""
from __future__ import annotations

import pytest

from healthcheck.checks.host_events import host_events
from healthcheck.config import default_expectations
from healthcheck.core.model import Snapshot, Status, worst
from healthcheck.parsers.host_events import parse_host_events, split_line
from healthcheck.parsers.kernel_log import parse_kernel_log, uptime_seconds, wall_time
from tests.conftest import CORPUS, corpus_params

FAIL, WARN, PASS = Status.FAIL, Status.WARN, Status.PASS

UE = "EDAC MC0: 1 UE memory read error on CPU_SrcID#0_MC#0_Chan#1_DIMM#0 (channel:1 slot:0 page:0x1234)"

# (front-end, the line as it writes it, wall time, uptime) for one EDAC UE message
FRONT_ENDS = [
    ("dmesg raw", f"[5975153.878190] {UE}", None, 5975153.87819),
    ("dmesg -T", f"[Thu Jun 22 21:55:31 2023] {UE}", "2023-06-22T21:55:31", None),
    ("dmesg -T de_DE", f"[Do Jun 22 21:55:31 2023] {UE}", "2023-06-22T21:55:31", None),
    ("dmesg -T fr_FR", f"[jeu. déc. 21 21:55:31 2023] {UE}", "2023-12-21T21:55:31", None),
    ("dmesg -H", f"[Jun22 21:55] {UE}", None, None),
    ("dmesg --reltime delta", f"[  +0.000123] {UE}", None, None),
    ("dmesg --time-format iso", f"2023-06-22T21:55:31,352444+00:00 {UE}", "2023-06-22T21:55:31+00:00", None),
    ("dmesg -x", f"kern  :err   : [5975153.878190] {UE}", None, 5975153.87819),
    ("journalctl -k short", f"Jun 22 21:55:31 node7 kernel: {UE}", None, None),
    ("journalctl short-iso", f"2023-06-22T21:55:31+0200 node7 kernel: {UE}", "2023-06-22T21:55:31+02:00", None),
    ("journalctl short-precise", f"Jun 22 21:55:31.352444 node7 kernel: {UE}", None, None),
    ("journalctl short-full", f"Thu 2023-06-22 21:55:31 UTC node7 kernel: {UE}", "2023-06-22T21:55:31", None),
    ("journalctl short-monotonic", f"[5975153.878190] node7 kernel: {UE}", None, 5975153.87819),
    ("RFC 3164", f"<3>Jun 22 21:55:31 node7 kernel: {UE}", None, None),
    ("RFC 5424", f"<3>1 2023-06-22T21:55:31.352444Z node7 kernel - - - {UE}", "2023-06-22T21:55:31+00:00", None),
    ("RFC 5424 with SD", f'<3>1 2023-06-22T21:55:31Z node7 kernel - - [meta seq="1"] {UE}',
     "2023-06-22T21:55:31+00:00", None),
    ("kern.log", f"Jun 22 21:55:31 node7 kernel: [5975153.878190] {UE}", None, 5975153.87819),
    ("console wall clock + uptime", f"[2023-06-22 21:55:31.352444][5975153.878190] {UE}",
     "2023-06-22T21:55:31", 5975153.87819),
    ("serial console stamp", f"[2023/06/22-21:55:31:352] [5975153.878190] {UE}", "2023-06-22T21:55:31",
     5975153.87819),
    ("spliced after console output", f"node7 login: [5975153.878190] {UE}", None, 5975153.87819),
    ("no time at all", UE, None, None),
    ("markdown quote", f"> [5975153.878190] {UE}", None, 5975153.87819),
]


@pytest.mark.parametrize("name,line,when,up", FRONT_ENDS, ids=[f[0] for f in FRONT_ENDS])
def test_every_front_end_yields_the_event_with_its_stamps(name, line, when, up):
    (ev,) = parse_host_events(line + "\n")
    assert ev.event_class == "edac_ue" and ev.device == "MC0" and ev.count == 1, name
    assert ev.time == when and ev.uptime_s == up, (name, ev.time, ev.uptime_s)
    findings = host_events(Snapshot(node="n", taken_at="", source="bundle:t", kernel_events=[ev]),
                           default_expectations(), {})
    assert [f.status for f in findings] == [FAIL], name


def test_a_stamp_needs_a_digit_so_a_bracketed_tag_stays_the_message():
    message, prefix, _ = split_line("[  12.5] [drm] Initialized nvidia-drm 0.0.0")
    assert message == "[drm] Initialized nvidia-drm 0.0.0" and uptime_seconds(prefix) == 12.5


def test_an_impossible_date_in_a_stamp_is_no_time():
    _, prefix, _ = split_line(f"[Mo Mär 31 25:61:00 2021] {UE}")
    assert wall_time(prefix) is None


BLOCK_WORDINGS = [
    ("3.x-4.16 blk_update_request", "blk_update_request: I/O error, dev sdc, sector 2048", "sdc"),
    ("4.17-5.x print_req_error", "print_req_error: I/O error, dev sdc, sector 2048", "sdc"),
    ("5.x+ plain", "I/O error, dev sdc, sector 2048 op 0x0:(READ) flags 0x0 phys_seg 1 prio class 0", "sdc"),
    ("critical medium", "print_req_error: critical medium error, dev sdc, sector 2048", "sdc"),
    ("buffer", "Buffer I/O error on dev sdc1, logical block 0, async page read", "sdc1"),
    ("SCSI FAILED", "sd 2:0:0:0: [sdc] tag#7 FAILED Result: hostbyte=DID_BAD_TARGET driverbyte=DRIVER_OK", "sdc"),
    ("SCSI FAILED old", "sd 2:0:0:0: [sdc] FAILED Result: hostbyte=DID_OK driverbyte=DRIVER_SENSE", "sdc"),
    ("btrfs counters", "BTRFS info (device sdc1): bdev /dev/sdc1 errs: wr 133, rd 133, flush 0, corrupt 0, gen 1",
     "sdc1"),
]


@pytest.mark.parametrize("name,line,dev", BLOCK_WORDINGS, ids=[b[0] for b in BLOCK_WORDINGS])
def test_block_error_wordings_of_every_kernel_fail_on_a_data_disk(name, line, dev):
    events = parse_host_events(f"[100.0] {line}\n")
    assert [ev.device for ev in events] == [dev], name
    findings = host_events(Snapshot(node="n", taken_at="", source="bundle:t", kernel_events=events),
                           default_expectations(), {})
    assert [f.status for f in findings] == [FAIL], (name, [f.message for f in findings])


def test_btrfs_counters_at_zero_are_no_event():
    assert parse_host_events("BTRFS info (device sda1): bdev /dev/sda1 errs: wr 0, rd 0, flush 0, corrupt 0, gen 0\n") == []


def test_lines_without_a_time_count_once_per_content_and_stamped_repeats_count_each():
    line = "mlx5_core 0000:13:00.1 eth1: Link down\n"
    assert len(parse_host_events(line * 4)) == 1  # a paste that repeats the line
    stamped = "".join(f"[{100 + i}.0] {line}" for i in range(4))
    assert len(parse_host_events(stamped)) == 4
    journal = "".join(f"Mar 27 15:37:{30 + i} cc1 kernel: {line}" for i in range(4))  # no year, still a time
    assert len(parse_host_events(journal)) == 4


def test_nic_transmit_timeouts_and_hangs_are_read_and_judged_once_per_interface():
    text = "".join(f"[{100 + 5 * i}.0] ixgbe 0000:01:00.0 eth2: Detected Tx Unit Hang\n" for i in range(6))
    text += "[130.0] NETDEV WATCHDOG: eth2 (igb): transmit queue 5 timed out\n"
    events = parse_host_events(text)
    assert {ev.event_class for ev in events} == {"nic_tx_hang", "nic_tx_timeout"}
    findings = host_events(Snapshot(node="n", taken_at="", source="bundle:t", kernel_events=events),
                           default_expectations(), {})
    assert [(f.component, f.status) for f in findings] == [("eth2", WARN)]


def test_the_nvidia_parser_reads_the_same_front_ends():
    xid = "NVRM: Xid (PCI:0000:07:00): 79, pid=1234, name=python, GPU has fallen off the bus."
    for line in (f"<3>1 2023-06-22T21:55:31Z node7 kernel - - - {xid}", f"[2023-06-22 21:55:31.1][77.5] {xid}",
                 f"[Do Jun 22 21:55:31 2023] {xid}"):
        (ev,) = parse_kernel_log(line)
        assert ev.xid == 79 and ev.time and ev.time.startswith("2023-06-22T21:55:31"), line


# --------------------------------------------------------------------- the public corpus, in place

# netlogs/<folder>/<file>: (verdict of host.events with the default expectations, classes it must name)
NETLOGS = {
    "logformats/avnu-issue210__kernlog-syslog-header-plus-uptime-igb-detected-tx-unit-hang-multiline-same-timestamp-excerpt.txt":
        (WARN, {"nic_tx_hang"}),
    "logformats/balena-intel-issue304__journalctl-short-pcieport-aer-corrected-data-link-layer-timeout-three-lines.txt":
        (WARN, {"aer_corrected"}),
    "logformats/btrfs-list-20210330__dmesg-T-german-locale-mo-di-maer-btrfs-sda1-bdev-errs-wr-133-rd-133-then-scrub.txt":
        (FAIL, {"btrfs_dev_errors"}),
    "logformats/btrfs-list-20210330__syslog-rfc3164-with-uptime-hung-task-btrfs-cleaner-blocked-241s-homeserver.txt":
        (WARN, {"hung_task"}),
    "logformats/coreboot-pr815__dmesg-T-english-aer-correctable-ath10k-rxerr-baddllp-timeout-badtlp-root-port-multiple-excerpt.txt":
        (WARN, {"aer_corrected"}),
    "logformats/gpud-testdata__journalctl-short-iso-a800-host-kernel-docker-veth-ipv6-addrconf-noise.log":
        (PASS, set()),
    "logformats/mcelog-issue74__rsyslog-rfc3339-usec-tz-with-uptime-ghes-recoverable-memory-error-dimm-already-poisoned-excerpt.txt":
        (FAIL, {"ghes_uncorrected"}),
    "logformats/netdev-list-20200414-linode__no-timestamp-netdev-watchdog-mlx5-core-eth1-queue-5-trace-mail-wrapped-and-repeated-lines.txt":
        (WARN, {"nic_tx_timeout"}),
    "logformats/riscv-board-notes-id25309409542__serial-console-wallclock-prefix-yyyy-mm-dd-hh-mm-ss-ms-uboot-then-kernel-boot-healthy-excerpt.txt":
        (PASS, set()),
    "netdev/netdev-list-20200414-linode__dmesg-netdev-watchdog-eth1-mlx5-core-queue-19-timed-out-tx-timeout-recovery-rcu-stall-supermicro-h11dsi.txt":
        (WARN, {"nic_tx_timeout", "nic_tx_timeout_reset"}),
    "netdev/netdev-list-20250117-leitao__bnxt-en-bcm57452-netdev-watchdog-cpu-queue-timed-out-ms-tx-timeout-starting-reset-task-ring-dump-tab-indented.txt":
        (WARN, {"nic_tx_timeout", "nic_tx_timeout_reset"}),
    "netdev/gpu-ops-chat-id53115452667__dmesg-hgx-node-mlx5-enp83s0f0np0-link-down-up-flapping-port-1-link-active-down-bond0-slave-disabled.txt":
        (FAIL, {"link_down"}),
    "netdev/gpud-pr1209__journalctl-k-grep-gpu-node-mlx5-5-port-1-link-init-then-active-at-boot-anonymized-host-excerpt.txt":
        (PASS, set()),
}


def _judge_text(text: bytes):
    events = parse_kernel_log(text) + parse_host_events(text)
    return host_events(Snapshot(node="n", taken_at="", source="bundle:t", kernel_events=events),
                       default_expectations(), {})


@pytest.mark.parametrize("path", corpus_params("netlogs", "logformats/*") + corpus_params("netlogs", "netdev/*"))
def test_netlogs_corpus_judged_as_its_sources_say(path):
    rel = f"{path.parent.name}/{path.name}"
    assert rel in NETLOGS, f"{rel}: a new corpus file; add its expected verdict"
    want, classes = NETLOGS[rel]
    findings = _judge_text(path.read_bytes())
    assert worst(f.status for f in findings) is want, [f.message for f in findings]
    got = {k[len("host_"):] for f in findings if f.status is want for k in f.metrics
           if k.startswith("host_") and k not in ("host_events", "host_events_acknowledged")}
    assert classes <= got, (classes - got, [f.message for f in findings])


def test_netlogs_table_names_existing_files():
    if not (CORPUS / "netlogs").is_dir():
        pytest.skip("corpus absent")
    for rel in NETLOGS:
        assert (CORPUS / "netlogs" / rel).is_file(), rel


def test_parse_kernel_log_shows_host_events_beside_the_xid_events(tmp_path):
    import json

    from click.testing import CliRunner

    from healthcheck.cli.main import cli

    log = tmp_path / "kern.log"
    log.write_text("[ 12.5] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, GPU has fallen off the bus.\n"
                   "[  5.1] I/O error, dev sr0, sector 0 op 0x0:(READ)\n"
                   f"[2023-06-22 21:55:31.352444][5975153.878190] {UE}\n")
    result = CliRunner().invoke(cli, ["parse", "kernel-log", str(log)])
    assert result.exit_code == 0, result.output
    assert "Xid 79" in result.output and "2 host events" in result.output
    assert "MC0 edac_ue (fail)" in result.output and "FAIL MC0" in result.output
    assert "PASS sr0" in result.output and "not drained: optical drive" in result.output
    result = CliRunner().invoke(cli, ["parse", "kernel-log", str(log), "--format", "json"])
    items = json.loads(result.output)["items"]
    assert [(e["kind"], e["event_class"]) for e in items] == [("xid", None), ("host", "block_io_error"),
                                                               ("host", "edac_ue")]


def test_lines_with_a_syslog_stamp_in_the_same_second_are_not_merged():
    """Two link downs logged in the same second under a syslog header (no year: no parsed time) are two
    events; only lines with no stamp at all are de-duplicated by content."""
    line = "Mar 27 15:37:34 cc1 kernel: mlx5_core 0000:13:00.1 eth1: Link down\n"
    assert len(parse_host_events(line * 2)) == 2
