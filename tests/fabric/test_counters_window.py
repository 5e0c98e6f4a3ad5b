"""Port counter growth over a window: deltas (resets, saturated plain counters), thresholds as data,
the ports named with node, HCA, port and far end."""
from __future__ import annotations

import pytest

from healthcheck.fabric.counters import (CounterSettingsError, PortKey, Sample, counter_delta, defaults,
                                         judge_window, parse_thresholds, peers_from_ibqueryerrors,
                                         samples_from_ibqueryerrors, samples_from_perfquery, validate)
from healthcheck.core.model import Status
from healthcheck.parsers.perfquery import parse_ibqueryerrors, parse_perfquery
from tests.conftest import CORPUS, FIXTURES

PERF = FIXTURES / "fabric" / "perf"
HOUR = 3600.0


def _sample(node="gpu01", hca="mlx5_0", port=1, t=0.0, widths=None, **counters):
    return Sample(PortKey(node, hca, port), t, counters, widths or {})


def test_delta_plain_growth_reset_and_saturation():
    assert counter_delta("SymbolErrorCounter", 5, 12).growth == 7
    reset = counter_delta("SymbolErrorCounter", 900, 4)
    assert (reset.growth, reset.reset) == (4, True)  # a smaller second value: a reset, never negative
    full = counter_delta("SymbolErrorCounter", 100, 65535, 16)
    assert (full.growth, full.saturated, full.stuck) == (65435, True, False)
    stuck = counter_delta("SymbolErrorCounter", 65535, 65535, 16)
    assert stuck.stuck and stuck.growth == 0
    assert not counter_delta("PortXmitData", 1, (1 << 64) - 1).saturated  # 64-bit: no maximum in practice
    with pytest.raises(ValueError, match="16-bit"):
        counter_delta("SymbolErrorCounter", 0, 70000, 16)
    with pytest.raises(ValueError):
        counter_delta("SymbolErrorCounter", -1, 3)


def test_allowance_is_burst_or_rate_whichever_is_larger():
    rule = defaults().rules["SymbolErrorCounter"]
    assert rule.allowed(60) == rule.per_window
    assert rule.allowed(10 * HOUR) == pytest.approx(rule.per_hour * 10)


def test_link_downed_during_the_window_names_the_port_and_its_far_end():
    before = [_sample(t=0, LinkDownedCounter=2, SymbolErrorCounter=0), _sample(hca="mlx5_1", t=0, LinkDownedCounter=0)]
    after = [_sample(t=HOUR, LinkDownedCounter=3, SymbolErrorCounter=4),
             _sample(hca="mlx5_1", t=HOUR, LinkDownedCounter=0)]
    report = judge_window(before, after, peers={PortKey("gpu01", "mlx5_0", 1): "leaf03 port 17"})
    assert report.status == "fail"
    (named,) = report.named()
    assert named.name == "gpu01 mlx5_0 port 1 (-> leaf03 port 17)"
    assert [b.delta.name for b in named.breaches] == ["LinkDownedCounter"]  # 4 symbol errors are allowed
    (finding,) = report.findings()
    assert finding.status is Status.FAIL and finding.component == "gpu01/mlx5_0/1"
    assert "LinkDownedCounter +1 > 0 allowed" in finding.message and "leaf03 port 17" in finding.message


def test_warn_severity_and_clean_window():
    before = [_sample(t=0, PortXmitDiscards=0, PortXmitWait=5)]
    after = [_sample(t=600, PortXmitDiscards=500, PortXmitWait=10 ** 9)]  # wait is congestion: never judged
    report = judge_window(before, after)
    assert report.status == "warn" and report.findings()[0].status is Status.WARN
    calm = judge_window(before, [_sample(t=600, PortXmitDiscards=3, PortXmitWait=10 ** 9)])
    assert calm.status == "pass" and calm.findings()[0].status is Status.PASS


def test_reset_during_the_window_counts_the_second_value():
    report = judge_window([_sample(t=0, LinkDownedCounter=7)], [_sample(t=HOUR, LinkDownedCounter=1)])
    (named,) = report.named()
    assert named.breaches[0].delta.reset and "reset during the window" in named.message()


def test_counter_stuck_at_its_maximum_cannot_be_judged_and_says_so():
    widths = {"SymbolErrorCounter": 16}
    report = judge_window([_sample(t=0, widths=widths, SymbolErrorCounter=65535)],
                          [_sample(t=HOUR, widths=widths, SymbolErrorCounter=65535)])
    (named,) = report.named()
    assert named.status == "warn" and "perfquery -R" in named.message()


def test_ports_missing_from_one_sample():
    report = judge_window([_sample(t=0, LinkDownedCounter=0), _sample(node="gpu02", t=0, LinkDownedCounter=0)],
                          [_sample(t=60, LinkDownedCounter=0), _sample(node="gpu03", t=60, LinkDownedCounter=5)])
    by_node = {p.key.node: p for p in report.ports}
    assert by_node["gpu02"].status == "warn" and "not at its end" in by_node["gpu02"].notes[0]
    assert by_node["gpu03"].status == "pass" and "not judged" in by_node["gpu03"].notes[0]


def test_bad_windows_and_duplicates_are_clear_errors():
    with pytest.raises(ValueError, match="taken after the first"):
        judge_window([_sample(t=10, LinkDownedCounter=0)], [_sample(t=10, LinkDownedCounter=0)])
    with pytest.raises(ValueError, match="two samples"):
        judge_window([_sample(t=0), _sample(t=0)], [_sample(t=1)])
    with pytest.raises(ValueError, match="started_at"):
        judge_window([], [_sample(t=1, LinkDownedCounter=1)], missing_as_zero=True)


def test_ibqueryerrors_window_from_zero_with_link_info_peers():
    result = parse_ibqueryerrors((PERF / "ibqueryerrors-details-two-bad-ports.txt").read_text())
    after = samples_from_ibqueryerrors(result, taken_at=2 * HOUR)
    report = judge_window([], after, peers=peers_from_ibqueryerrors(result), missing_as_zero=True, started_at=0.0)
    names = [p.name for p in report.named()]
    assert "gpu05 mlx5_0 port 1" in names  # LinkDowned +2: fail
    assert "leaf03 7cfe9003009ce5b0 port 17 (-> gpu03 mlx5_1 port 1)" in names  # 1843 symbol errors in 2 h
    assert report.status == "fail"


def test_perfquery_samples_use_plain_widths_and_node_names():
    text = (PERF / "perfquery-basic-symbol-saturated.txt").read_text()
    (sample,) = samples_from_perfquery(parse_perfquery(text), "gpu07", "mlx5_3", 100.0)
    assert sample.key == PortKey("gpu07", "mlx5_3", 1) and sample.widths["SymbolErrorCounter"] == 16
    report = judge_window([sample], [Sample(sample.key, 200.0, dict(sample.counters), dict(sample.widths))])
    assert report.named()[0].status == "warn"  # SymbolErrorCounter stuck at 65535


def test_corpus_extended_samples_between_two_reads():
    path = CORPUS / "perfquery" / "infiniband_exporter__perfquery-x-edr-switch-port-xmitdiscards.txt"
    if not path.is_file():
        pytest.skip("corpus perfquery/ absent")
    (after,) = samples_from_perfquery(parse_perfquery(path.read_text()), "leaf07", "switch", HOUR)
    before = Sample(after.key, 0.0, {k: 0 for k in after.counters}, dict(after.widths))
    report = judge_window([before], [after])
    (named,) = report.named()
    assert {b.delta.name for b in named.breaches} == {"LinkDownedCounter", "PortXmitDiscards"}


def test_packaged_thresholds_have_a_reason_each_and_site_overrides():
    rules = defaults().rules
    assert {"LinkDownedCounter", "SymbolErrorCounter", "LinkErrorRecoveryCounter", "PortRcvErrors",
            "PortXmitDiscards", "ExcessiveBufferOverrunErrors"} <= set(rules)
    assert all(r.reason and len(r.reason) > 20 for r in rules.values())
    site = validate({"SymbolErrorCounter": {"per_window": 0, "per_hour": 0}, "PortXmitWait":
                     {"per_window": 10 ** 9, "per_hour": 10 ** 9, "severity": "warn", "reason": "congestion watch"}})
    assert site.rules["SymbolErrorCounter"].per_window == 0
    assert site.rules["SymbolErrorCounter"].reason == rules["SymbolErrorCounter"].reason
    assert site.rules["PortXmitWait"].severity == "warn"
    report = judge_window([_sample(t=0, SymbolErrorCounter=0)], [_sample(t=60, SymbolErrorCounter=1)], site)
    assert report.status == "fail"


@pytest.mark.parametrize("section, match", [
    ({"SymbolErrorCounter": {"per_windw": 1}}, "unknown key"),
    ({"SymbolErrorCounter": {"per_window": -1}}, "per_window"),
    ({"SymbolErrorCounter": {"per_hour": float("nan")}}, "per_hour"),
    ({"SymbolErrorCounter": {"severity": "drain"}}, "severity"),
    ({"SymbolErrorCounter": {"reason": ""}}, "reason"),
    ({"NewCounter": {"per_window": 1}}, "needs per_hour, severity"),
    ({"bad name!": {}}, "not a counter name"),
    ({"SymbolErrorCounter": 5}, "expected a table"),
    ([], "expected a table of counters"),
])
def test_bad_site_sections_are_clear_errors(section, match):
    with pytest.raises(CounterSettingsError, match=match):
        validate(section)  # type: ignore[arg-type]


def test_bad_thresholds_file_is_a_clear_error():
    with pytest.raises(CounterSettingsError, match="unknown table"):
        parse_thresholds("[other]\nx = 1\n")
    with pytest.raises(CounterSettingsError, match="broken.toml"):
        parse_thresholds("[counters\n", "broken.toml")


def test_far_end_from_a_fabric_graph():
    from healthcheck.fabric.counters import peers_from_fabric
    from healthcheck.parsers.ibnetdiscover import parse_ibnetdiscover

    fabric = parse_ibnetdiscover((PERF / "ibnetdiscover-one-leaf-one-ca.txt").read_text())
    known, unknown = PortKey("gpu03", "mlx5_1", 1), PortKey("gpu04", "mlx5_1", 1)
    peers = peers_from_fabric(fabric, [known, unknown])
    assert peers == {known: "leaf03 port 17"}  # a port the graph does not hold is left unnamed, not guessed
    report = judge_window([Sample(known, 0, {"LinkDownedCounter": 0})], [Sample(known, 60, {"LinkDownedCounter": 1})],
                          peers=peers)
    assert report.named()[0].name == "gpu03 mlx5_1 port 1 (-> leaf03 port 17)"
