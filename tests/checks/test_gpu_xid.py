"""gpu.xid: grouping, policy actions, windows by wall clock and by uptime, component mapping."""
from __future__ import annotations

import dataclasses

from healthcheck.core.expectations import Expectations, XidPolicy, XidRule
from healthcheck.core.model import HostInfo, KernelEvent, Status

from tests.checks.gpu_builders import H100_BUS_IDS, by_component, only, run, snapshot, xid

PASS, WARN, FAIL, SKIP = Status.PASS, Status.WARN, Status.FAIL, Status.SKIP


def _policy(*rules: XidRule, unknown: str = "warn") -> Expectations:
    return Expectations(xid_policy=XidPolicy({r.xid: r for r in rules}, unknown_action=unknown))


def test_no_events_one_pass():
    f = only(run("gpu.xid", snapshot()))
    assert f.status is PASS and f.component is None and f.metrics == {"xid_events": 0.0}


def test_xid79_twice_fails_on_gpu_component():
    snap = snapshot(kernel_events=[xid(79, uptime_s=100.0), xid(79, uptime_s=200.0)])
    f = only(run("gpu.xid", snap))
    assert f.status is FAIL and f.component == "gpu0"
    assert f.message == "Xid 79 (GPU has fallen off the bus) x2 on 0000:18:00.0"
    assert f.metrics == {"xid_events": 2.0, "xid_79": 2.0}


def test_pci_ids_are_normalised_for_mapping():
    snap = snapshot(kernel_events=[xid(48, pci="00000000:2A:00.0")])
    f = only(run("gpu.xid", snap))
    assert f.component == "gpu1" and f.status is FAIL


def test_unknown_pci_and_missing_pci_components():
    snap = snapshot(kernel_events=[xid(48, pci="0000:c1:00.0"), xid(62, pci=None)])
    found = by_component(run("gpu.xid", snap))
    assert set(found) == {"0000:c1:00.0", "node"}
    assert "on 0000:c1:00.0" in found["0000:c1:00.0"].message
    assert found["node"].status is FAIL


def test_application_xids_below_storm_threshold_pass_with_packaged_policy():
    snap = snapshot(kernel_events=[xid(13), xid(31), xid(43)])
    f = only(run("gpu.xid", snap))
    assert f.status is PASS and "below 10" in f.message
    assert f.metrics["xid_13"] == 1 and f.metrics["xid_events"] == 3


def test_application_xid_storm_warns():
    snap = snapshot(kernel_events=[xid(13, uptime_s=float(i)) for i in range(12)], host=HostInfo(uptime_s=100.0))
    f = only(run("gpu.xid", snap))
    assert f.status is WARN and "Xid 13" in f.message and "x12" in f.message


def test_unknown_xid_uses_policy_unknown_action():
    snap = snapshot(kernel_events=[xid(999)])
    f = only(run("gpu.xid", snap))
    assert f.status is WARN and "Xid 999 (unlisted Xid) x1" in f.message
    assert only(run("gpu.xid", snap, _policy(unknown="fail"))).status is FAIL
    assert only(run("gpu.xid", snap, _policy(unknown="ignore"))).status is PASS


def test_site_rule_overrides_packaged_policy():
    snap = snapshot(kernel_events=[xid(79)])
    exp = _policy(XidRule(79, "warn", "fell off (lab node)"))
    f = only(run("gpu.xid", snap, exp))
    assert f.status is WARN and "fell off (lab node)" in f.message


def test_min_count_storm_threshold():
    rule = XidRule(94, "fail", "Contained ECC error", window_s=0, min_count=3)
    two = snapshot(kernel_events=[xid(94), xid(94)])
    f = only(run("gpu.xid", two, _policy(rule)))
    assert f.status is PASS and "below 3" in f.message
    three = snapshot(kernel_events=[xid(94)] * 3)
    assert only(run("gpu.xid", three, _policy(rule))).status is FAIL


def test_window_by_uptime():
    rule = XidRule(48, "fail", "DBE", window_s=3600)
    # host uptime 86400: an event at uptime 1000 is 85400 s old, one at 85000 is 1400 s old
    old = snapshot(kernel_events=[xid(48, uptime_s=1000.0)])
    new = snapshot(kernel_events=[xid(48, uptime_s=85_000.0)])
    assert only(run("gpu.xid", old, _policy(rule))).status is PASS
    f = only(run("gpu.xid", new, _policy(rule)))
    assert f.status is FAIL and "in 3600s" in f.message


def test_window_by_wall_clock_naive_is_utc_and_offset_respected():
    rule = XidRule(48, "fail", "DBE", window_s=3600)
    recent = snapshot(kernel_events=[xid(48, time="2024-05-01T11:30:00")])  # naive: UTC
    old = snapshot(kernel_events=[xid(48, time="2024-05-01T10:30:00+00:00")])
    shifted = snapshot(kernel_events=[xid(48, time="2024-05-01T13:30:00+02:00")])  # 11:30 UTC
    assert only(run("gpu.xid", recent, _policy(rule))).status is FAIL
    assert only(run("gpu.xid", old, _policy(rule))).status is PASS
    assert only(run("gpu.xid", shifted, _policy(rule))).status is FAIL


def test_event_of_unknown_age_is_counted():
    rule = XidRule(48, "fail", "DBE", window_s=60)
    no_host = snapshot(kernel_events=[xid(48, uptime_s=5.0)], host=None)
    bad_time = snapshot(kernel_events=[xid(48, time="yesterday-ish")], host=None)
    assert only(run("gpu.xid", no_host, _policy(rule))).status is FAIL
    assert only(run("gpu.xid", bad_time, _policy(rule))).status is FAIL
    # a parsable time wins over the uptime stamp
    timed = snapshot(kernel_events=[xid(48, time="2024-04-01T00:00:00Z", uptime_s=86_000.0)])
    assert only(run("gpu.xid", timed, _policy(rule))).status is PASS


def test_fallen_off_bus_and_rm_init_failed_always_fail():
    events = [KernelEvent(kind="fallen_off_bus", pci_bus_id=H100_BUS_IDS[2], message="fallen off"),
              KernelEvent(kind="rm_init_failed", pci_bus_id="0000:c1:00.0", message="RmInitAdapter")]
    found = by_component(run("gpu.xid", snapshot(kernel_events=events)))
    assert found["gpu2"].status is FAIL and "fallen off the bus" in found["gpu2"].message
    assert found["0000:c1:00.0"].status is FAIL and "RmInitAdapter" in found["0000:c1:00.0"].message
    assert found["gpu2"].metrics["fallen_off_bus"] == 1


def test_one_finding_per_component_worst_status_lists_problems():
    events = [xid(13), xid(63), xid(48), xid(48), xid(79, pci=H100_BUS_IDS[1])]
    found = by_component(run("gpu.xid", snapshot(kernel_events=events)))
    assert set(found) == {"gpu0", "gpu1"}
    g0 = found["gpu0"]
    assert g0.status is FAIL
    assert "Xid 48 (Double Bit ECC Error) x2" in g0.message and "Xid 63" in g0.message
    assert "Xid 13" not in g0.message  # passing items are not drain reasons
    assert g0.metrics == {"xid_events": 4.0, "xid_13": 1.0, "xid_63": 1.0, "xid_48": 2.0}


def test_xid_event_without_number_and_other_kinds_ignored():
    events = [KernelEvent(kind="xid", xid=None), KernelEvent(kind="something_else")]
    assert only(run("gpu.xid", snapshot(kernel_events=events))).status is PASS


def test_lost_gpu_still_named_and_gpus_absent_ok():
    snap = snapshot(kernel_events=[xid(79, pci=H100_BUS_IDS[3])])
    gpus = [dataclasses.replace(g, lost=g.index == 3) for g in snap.gpus]
    snap = dataclasses.replace(snap, gpus=gpus)
    assert only(run("gpu.xid", snap)).component == "gpu3"
    no_gpus = dataclasses.replace(snap, gpus=None)
    assert only(run("gpu.xid", no_gpus)).component == H100_BUS_IDS[3]


def test_snapshot_time_unparsable_counts_conservatively():
    rule = XidRule(48, "fail", "DBE", window_s=60)
    snap = snapshot(kernel_events=[xid(48, time="2020-01-01T00:00:00Z")], taken_at="garbage",
                    host=HostInfo(uptime_s=None))
    assert only(run("gpu.xid", snap, _policy(rule))).status is FAIL
