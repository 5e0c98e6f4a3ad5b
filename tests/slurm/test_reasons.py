"""Our Slurm reasons: exact format, ownership test, sanitising hostile text."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from healthcheck.slurm.nodestate import parse_scontrol_nodes
from healthcheck.slurm.reasons import (MAX_REASON, REASON_PREFIX, is_ours, make_reason, make_reason_multi,
                                       sanitise, without_run)

LINE = ("NodeName=n1 CoresPerSocket=4  CPUAlloc=0 CPUEfctv=8 CPUTot=8 CPULoad=0.00 State=IDLE+DRAIN "
        "ThreadsPerCore=2 CurrentWatts=0 AveWatts=0 Reason={reason} [root@2024-03-05T10:11:12]{tail}\n")


def test_exact_format():
    assert make_reason("gpu.ecc.uncorrected", "gpu3", "uncorrected ECC errors: volatile 2", run_id="1a2b3c4d") == \
        "healthcheck: gpu.ecc.uncorrected gpu3: uncorrected ECC errors: volatile 2 [run 1a2b3c4d]"
    assert make_reason("host.disk", None, "/tmp 99% full") == "healthcheck: host.disk: /tmp 99% full"
    assert make_reason("gpu.responsive", "", "NVML hung for 5.0s", "r1") == \
        "healthcheck: gpu.responsive: NVML hung for 5.0s [run r1]"


def test_multi():
    fails = [("gpu.ecc.uncorrected", "gpu3", "uncorrected ECC errors: volatile 2"),
             ("nvlink.down", "gpu3", "link 4 inactive"), ("pcie.width", "gpu1", "x8 < x16")]
    assert make_reason_multi(fails, "1a2b3c4d") == ("healthcheck: gpu.ecc.uncorrected gpu3: uncorrected ECC "
                                                    "errors: volatile 2 (+2 more) [run 1a2b3c4d]")
    assert make_reason_multi(fails[:1]) == make_reason(*fails[0])
    with pytest.raises(ValueError):
        make_reason_multi([])


def test_long_message_is_cut_but_tags_survive():
    r = make_reason_multi([("gpu.xid", "gpu7", "x" * 5000), ("a", None, "b")], run_id="0123456789abcdef")
    assert len(r) <= MAX_REASON and r.startswith("healthcheck: gpu.xid gpu7: xxx")
    assert r.endswith("... (+1 more) [run 0123456789abcdef]")


def test_hostile_check_component_and_run_id_are_reduced():
    r = make_reason("gpu ecc\n;rm -rf /", "gpu3\x1b[31m red", "msg", run_id="id with spaces/../\n")
    assert r == "healthcheck: gpu_ecc__rm_-rf__ gpu3_red: msg [run idwithspaces]"
    assert "\n" not in r and is_ours(r)


def test_is_ours():
    assert is_ours("healthcheck: x: y")
    assert not is_ours("RMA ticket 4711")
    assert not is_ours(" healthcheck: x")  # prefix must be first
    assert not is_ours("Healthcheck: x") and not is_ours("healthcheck x")
    assert not is_ours(None) and not is_ours("")


def test_without_run():
    a = make_reason("c", "g", "m", run_id="aaaa")
    b = make_reason("c", "g", "m", run_id="bbbb")
    assert a != b and without_run(a) == without_run(b) == "healthcheck: c g: m"
    assert without_run(None) is None


@pytest.mark.parametrize("text,expected", [
    ("line1\nline2\r\n\tx", "line1 line2 x"),
    ("\x1b[31mred\x1b[0m text", "red text"),
    ("\x1b]0;title\x07after", "after"),
    ("nul\x00byte", "nul?byte"),
    ("quote\"s 'and' back\\slash", "quotes and backslash"),
    ("caf\u00e9 \u2603 \U0001F525", "caf? ? ?"),
    ("State=DOWN Reason=x", "State=DOWN Reason=x"),
    ("   lots    of   space  ", "lots of space"),
    ("\x7f\x08bell\x07", "??bell?"),
])
def test_sanitise_examples(text, expected):
    assert sanitise(text) == expected


def test_sanitise_bounds():
    assert len(sanitise("a" * 10_000)) == MAX_REASON and sanitise("a" * 10_000).endswith("...")
    assert sanitise("abcdef", limit=4) == "a..."
    assert sanitise("abcdef", limit=3) == "abc"
    assert sanitise("abc", limit=0) == ""
    assert sanitise("0\r0", limit=2) == "0"  # a cut at a space leaves no trailing space (found by hypothesis)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=12_000), st.integers(1, 400))
def test_sanitise_hostile(text, limit):
    out = sanitise(text, limit)
    assert len(out) <= limit
    assert all(" " <= ch <= "~" for ch in out)
    assert not any(ch in out for ch in "\"'\\")
    assert out == out.strip() and "  " not in out
    assert sanitise(out, limit) == out  # idempotent


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300), st.one_of(st.none(), st.text(max_size=40)), st.text(max_size=3000),
       st.one_of(st.none(), st.text(max_size=60)))
def test_round_trip_through_the_parser(check, component, message, run_id):
    reason = make_reason(check, component, message, run_id)
    assert is_ours(reason) and len(reason) <= MAX_REASON and sanitise(reason) == reason
    for tail in ("", " Comment=admin note", " Comment=x Extra=y"):
        node = parse_scontrol_nodes(LINE.format(reason=reason, tail=tail))["n1"]
        assert node.reason == reason and is_ours(node.reason) and node.reason_user == "root"


def test_prefix_is_fixed():
    assert REASON_PREFIX == "healthcheck:"
