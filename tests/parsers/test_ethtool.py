"""Issue 32: the pure parser of ``ethtool -S`` (and any "name: value" counter listing), on the corpus'
real outputs (grep-filtered, with prompts and notes in them) and on bad input."""
from __future__ import annotations

import pytest

from healthcheck.parsers import ParseError
from healthcheck.parsers.ethtool import parse_ethtool_stats
from tests.conftest import CORPUS, corpus_params

ROCE = CORPUS / "netlogs" / "roce"


def _read(stem: str) -> str:
    files = sorted(ROCE.glob(stem + "*")) if ROCE.is_dir() else []
    if not files:
        pytest.skip(f"corpus netlogs/roce/{stem}* absent")
    return files[0].read_text(encoding="utf-8")


def test_the_full_mlx5_output_of_an_overloaded_port():
    counters = parse_ethtool_stats(_read("bpf-list-20240619"))
    assert counters["rx_out_of_buffer"] == 990473555
    assert counters["rx_discards_phy"] == 58591428329
    assert counters["tx_pause_ctrl_phy"] == 5745055
    assert counters["rx0_xdp_drop"] == 3753342954
    # the poster left the zero counters out: absent, not 0
    assert "rx_crc_errors_phy" not in counters and "link_down_events_phy" not in counters
    assert "NIC statistics" not in counters


def test_two_grep_runs_with_prompts_and_full_width_notes():
    counters = parse_ethtool_stats(_read("cn-nic-notes"))
    assert counters["tx_pause_storm_error_events"] == 0
    assert counters["tx_pause_storm_warning_events"] == 0
    assert counters["tx_pci_signal_integrity"] == 3
    assert counters["tx_global_pause"] == 1266552
    assert counters["rx_steer_missed_packets"] == 24627
    # the author's notes ("rx_out_of_buffer：" with a full-width colon) and the command lines are no counters
    assert not [name for name in counters if "：" in name or name.startswith("#") or "ethtool" in name]
    assert counters["rx_out_of_buffer"] == 0


def test_a_grep_of_the_priority_counters():
    counters = parse_ethtool_stats(_read("byteps-issue179"))
    assert counters["rx_prio0_packets"] == 419873392068
    assert len(counters) == 32 and all(v == 0 for k, v in counters.items() if "prio0" not in k)


def test_show_counters_reads_the_same_way_and_gids_are_not_counters():
    counters = parse_ethtool_stats(_read("cn-rdma-notes"))
    assert counters["out_of_buffer"] == 135
    assert counters["resp_cqe_error"] == 1009
    assert counters["np_cnp_sent"] == 0
    assert not [name for name in counters if name.startswith(("mlx5_", "fe80", "0000"))]


@pytest.mark.parametrize("path", corpus_params("netlogs/roce", "*ethtool-S*"))
def test_every_ethtool_capture_of_the_corpus_parses(path):
    counters = parse_ethtool_stats(path.read_text(encoding="utf-8"))
    assert counters and all(isinstance(v, int) and v >= 0 for v in counters.values())


def test_bnxt_style_names_keep_their_queue_prefix():
    text = "NIC statistics:\n     [0]: rx_ucast_packets: 12\n     rx_total_discard_pkts: 3\n"
    assert parse_ethtool_stats(text) == {"[0]: rx_ucast_packets": 12, "rx_total_discard_pkts": 3}


def test_a_name_seen_twice_keeps_its_last_value():
    assert parse_ethtool_stats("a: 1\na: 5\n") == {"a": 5}


@pytest.mark.parametrize("text", ["", "NIC statistics:\n", "# ethtool -S eth0\nno stats available\n",
                                  "rx_crc_errors_phy: -1\n", "rx: 12abc\n"])
def test_no_counter_at_all_is_a_clear_error(text):
    with pytest.raises(ParseError, match="no 'name: value' counter line"):
        parse_ethtool_stats(text)


def test_not_text_is_a_clear_error():
    with pytest.raises(ParseError, match="expected text"):
        parse_ethtool_stats(b"rx: 1")
