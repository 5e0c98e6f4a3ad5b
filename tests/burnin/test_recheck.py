"""The burn-in looks at the node again after its load (issue 21, item 6): the node checks re-run over a
fresh snapshot, new Xids, pending remaps and counter growth under load enter the verdict, and the
hottest GPU is compared with its siblings at similar power (N from the references, with its source).

The compute phases run on the NumPy backend (the CPU, on purpose), as the other burn-in tests do."""
from __future__ import annotations

from healthcheck.burnin import node_run
from healthcheck.burnin.judge_compute import DEFAULT_SPREAD_C, SPREAD, judge_thermal_spread
from healthcheck.burnin.judge_recheck import LOAD_ERRORS, RECHECK, judge_load_errors, judge_recheck
from healthcheck.policies.references import load
from healthcheck.burnin.settings import resolve
from healthcheck.burnin.telemetry import TelemetrySummary
from healthcheck.config import default_expectations
from healthcheck.core.model import Finding, KernelEvent, NvLink, Snapshot, Status

from tests.checks.gpu_builders import h100


def _snap(*, remap_pending=False, ecc_unc=0, crc=0, events=()) -> Snapshot:
    gpus = [h100(i, ecc_uncorrected_volatile=0, remap_pending=False) for i in range(4)]
    gpus[2].remap_pending = remap_pending
    gpus[2].ecc_uncorrected_volatile = ecc_unc
    gpus[1].nvlinks = [NvLink(0, True, crc_flit_errors=crc, crc_data_errors=0)]
    return Snapshot(node="n1", taken_at="2026-12-03T10:00:00+00:00", gpus=gpus, kernel_events=list(events),
                    boot_id="b1")


XID_OLD = KernelEvent("xid", pci_bus_id=None, xid=13, message="Graphics Exception", uptime_s=10.0, line="old")


# ------------------------------------------------------------------------------------ pure judges


def test_load_errors_new_xid_pending_remap_and_growth():
    before = _snap(events=[XID_OLD])
    bus = before.gpus[2].pci_bus_id
    new = KernelEvent("xid", pci_bus_id=bus, xid=48, message="DBE (double bit error) ECC error", uptime_s=900.0,
                      line="new")
    after = _snap(remap_pending=True, ecc_unc=1, crc=40, events=[XID_OLD, new])
    findings = judge_load_errors(before, after)
    by = {(f.component, f.status): f for f in findings}
    assert all(f.check == LOAD_ERRORS for f in findings)
    xid = next(f for f in findings if "kernel event" in f.message)
    assert xid.status is Status.FAIL and xid.component == "gpu2" and "Xid 48" in xid.message
    assert "1 new" in xid.message  # the Xid from before the load is not new
    pending = next(f for f in findings if "row remap pending" in f.message)
    assert pending.status is Status.FAIL and pending.component == "gpu2"
    grew = next(f for f in findings if f.component == "gpu2" and "grew under load" in f.message)
    assert grew.status is Status.FAIL and "ecc_uncorrected_volatile +1" in grew.message  # a fail counter
    crc = by[("gpu1", Status.WARN)]
    assert "nvlink_crc +40" in crc.message and crc.metrics["growth_nvlink_crc"] == 40


def test_load_errors_nothing_changed_passes_and_a_counter_reset_is_said():
    before = _snap(crc=10)
    (f,) = judge_load_errors(before, _snap(crc=10))
    assert f.status is Status.PASS
    findings = judge_load_errors(before, _snap(crc=0))
    assert [f.status for f in findings] == [Status.WARN] and "went down" in findings[0].message


def test_recheck_repeats_only_what_got_worse():
    before = [Finding("gpu.temperature", Status.PASS, "GPU 40 C", "gpu0"),
              Finding("gpu.row_remap", Status.FAIL, "pending", "gpu1")]
    after = [Finding("gpu.temperature", Status.WARN, "GPU 86 C within 5 C of slowdown 89 C", "gpu0"),
             Finding("gpu.row_remap", Status.FAIL, "pending", "gpu1"),
             Finding("gpu.xid", Status.FAIL, "Xid 79 fell off the bus", "gpu3")]
    out = judge_recheck(before, after)
    assert [(f.check, f.status, f.component) for f in out] == [(RECHECK, Status.WARN, "gpu0"),
                                                               (RECHECK, Status.FAIL, "gpu3")]
    assert out[0].message.startswith("gpu.temperature gpu0 after the load: GPU 86 C") and "before: pass" in out[0].message
    assert [f.status for f in judge_recheck(before, before)] == [Status.PASS]


def _summary(temps, powers) -> dict[int, TelemetrySummary]:
    return {i: TelemetrySummary(i, samples=10, temp_max_c=t, power_mean_w=p) for i, (t, p) in enumerate(zip(temps, powers))}


def test_hottest_gpu_far_above_its_siblings_at_similar_power_fails_naming_it():
    temps = [70, 72, 71, 73, 84, 70, 72, 71]
    (f,) = judge_thermal_spread(_summary(temps, [690] * 8), 10.0, source="h100_sxm thermal_spread_c")
    assert f.check == SPREAD and f.status is Status.FAIL and f.component == "gpu4"
    assert "+13 C" in f.message and "more than 10 C" in f.message and "h100_sxm thermal_spread_c" in f.message
    assert f.metrics["peer_median_temp_c"] == 71 and f.metrics["temp_over_median_c"] == 13


def test_within_n_passes_and_a_gpu_at_another_power_is_not_compared():
    (f,) = judge_thermal_spread(_summary([70, 72, 71, 73, 79, 70, 72, 71], [690] * 8), 10.0)
    assert f.status is Status.PASS and f.component == "gpu4"
    powers = [300, 300, 300, 300, 690, 300, 300, 300]  # the hot one drew more than twice the power
    (f,) = judge_thermal_spread(_summary([60, 60, 61, 60, 84, 60, 61, 60], powers), 10.0)
    assert f.status is Status.SKIP and "not compared" in f.message
    (f,) = judge_thermal_spread(_summary([60, 90], [690, 690]), 10.0)
    assert f.status is Status.SKIP and "too few" in f.message


def test_n_is_data_with_its_source():
    refs = load()
    ref = refs.sku_for("NVIDIA H100 80GB HBM3").get("thermal_spread_c")
    assert ref is not None and ref.unit == "C" and ref.value == DEFAULT_SPREAD_C and "Thermal Stragglers" in ref.source
    hot = _summary([70, 72, 71, 73, 84, 70, 72, 71], [690] * 8)
    (f,) = node_run._thermal_spread(hot, refs.sku_for("NVIDIA H100 80GB HBM3"))
    assert f.status is Status.FAIL and "h100_sxm thermal_spread_c" in f.message
    (f,) = node_run._thermal_spread(hot, None)
    assert f.status is Status.FAIL and "default thermal_spread_c" in f.message


# ------------------------------------------------------------------------ the node run, end to end


def _ctx(tmp_path, phases, snapshots):
    settings = resolve({"backend": "numpy", "gemm_duration_s": 0.2, "gemm_n": 64, "phases": phases}, environ={})
    taken = iter(snapshots)
    exp = default_expectations()
    return node_run.NodeContext("n1", settings, load(), snapshot=lambda: (next(taken), exp))


def test_node_run_rechecks_after_the_load_and_the_load_errors_enter_the_verdict(tmp_path):
    before = _snap(events=[XID_OLD])
    new = KernelEvent("xid", pci_bus_id=before.gpus[2].pci_bus_id, xid=94, message="Contained ECC error",
                      uptime_s=950.0, line="new")
    after = _snap(remap_pending=True, events=[XID_OLD, new])
    ctx = _ctx(tmp_path, ["checks", "gemm"], [before, after])
    verdict = node_run.run_node(ctx, "2026-12-03T10:00:00+00:00")
    checks = {}
    for f in verdict.findings:
        checks.setdefault(f.check, []).append(f)
    assert any(f.status is Status.FAIL and "row remap pending" in f.message for f in checks[LOAD_ERRORS])
    assert any(f.status is Status.FAIL and "Xid 94" in f.message for f in checks[LOAD_ERRORS])
    assert any(f.status is Status.FAIL and f.message.startswith("gpu.row_remap gpu2 after the load")
               for f in checks[RECHECK])
    assert verdict.status is Status.FAIL and "recheck" in ctx.extra["phase_seconds"]


def test_a_healthy_node_stays_healthy_after_the_load(tmp_path):
    ctx = _ctx(tmp_path, ["checks", "gemm"], [_snap(), _snap()])
    verdict = node_run.run_node(ctx, "2026-12-03T10:00:00+00:00")
    mine = [f for f in verdict.findings if f.check in (RECHECK, LOAD_ERRORS)]
    assert sorted((f.check, f.status) for f in mine) == [(LOAD_ERRORS, Status.PASS), (RECHECK, Status.PASS)]


def test_no_recheck_without_a_load_phase_or_without_the_checks_phase(tmp_path):
    ctx = _ctx(tmp_path, ["checks"], [_snap()])
    verdict = node_run.run_node(ctx, "2026-12-03T10:00:00+00:00")
    assert not [f for f in verdict.findings if f.check in (RECHECK, LOAD_ERRORS)]
    ctx = _ctx(tmp_path, ["gemm"], [])
    verdict = node_run.run_node(ctx, "2026-12-03T10:00:00+00:00")
    assert not [f for f in verdict.findings if f.check in (RECHECK, LOAD_ERRORS)]


def test_a_snapshot_that_fails_after_the_load_is_one_error(tmp_path):
    def broken():
        raise OSError("sysfs gone")

    ctx = _ctx(tmp_path, ["checks", "gemm"], [_snap()])
    first = ctx.snapshot
    calls = []
    ctx.snapshot = lambda: first() if not calls.append(1) and len(calls) == 1 else broken()
    verdict = node_run.run_node(ctx, "2026-12-03T10:00:00+00:00")
    (err,) = [f for f in verdict.findings if f.check == "burnin.recheck"]
    assert err.status is Status.ERROR and "sysfs gone" in err.message


def test_an_nvswitch_sxid_under_load_is_named_sxid_not_xid():
    before = _snap(events=[XID_OLD])
    sxid = KernelEvent("sxid", pci_bus_id="0000:04:00.0", xid=22013, message="Non-fatal, Link 32 egress error",
                       uptime_s=950.0, line="nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Non-fatal")
    (f,) = [f for f in judge_load_errors(before, _snap(events=[XID_OLD, sxid])) if f.status is Status.FAIL]
    assert "SXid 22013" in f.message and "Xid 22013" not in f.message.replace("SXid 22013", "")
