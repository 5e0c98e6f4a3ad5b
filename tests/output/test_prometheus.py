"""The Prometheus exposition (healthcheck/output/prometheus.py) passes `promtool check metrics` and keeps the
promises of docs/prometheus.md: on a healthy 8-GPU node, a failing node, recorded nvidia-smi outputs
and a run with every check of the catalog; HELP from the catalog; base units; counters as counters;
status as a value; gpu/UUID labels as dcgm-exporter names them; the alert rules pass promtool."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from datetime import datetime

import pytest
from click.testing import CliRunner

from healthcheck.checks.registry import index, spec
from healthcheck.config import default_expectations
from healthcheck.core.model import Finding, Snapshot, Status, Verdict
from healthcheck.output.render import render
from healthcheck.parsers.nvidia_smi import parse_nvidia_smi
from healthcheck.output.prometheus import (FAMILIES, NOT_EXPORTED, STATUS_CODE, _BY_KEY, _PATTERNS, fallback_family,
                                    family_of, prometheus)
from healthcheck.pipeline.judge import judge
from tests.checks import gpu_builders
from tests.conftest import FIXTURES, ROOT, corpus_params
from tests.output.promtext import lint_names, parse, promtool, promtool_check_metrics

STARTED = "2026-12-01T00:00:00+00:00"
SMI_XML = FIXTURES / "nvidia-smi" / "q-x-h100-sxm-8gpu-565.57.01-healthy.xml"
ALERTS = ROOT / "contrib" / "prometheus" / "healthcheck-alerts.yml"
# Faults of tests/faults/matrix.py whose runs together make every check of the catalog report and
# measure every metric it has (burn-in judges included: their names are the fallback's).
COVERING_FAULTS = ("ecc-dbe", "edac-ue-growth", "mlxlink-high-ber", "aer-counter-fatal-gpu", "ib-port-down",
                   "gpu-stalled", "gpu-driver-hang", "ib-rate-degraded-unconfigured", "hung-probe",
                   "host-mce-fatal", "bmc-psu-failure", "burnin-sdc", "burnin-nccl-hang",
                   "burnin-thermal-spread", "burnin-load-xid")


def checked(text: str) -> dict:
    """promtool passes, the strict reader and the naming rules pass; the families."""
    promtool_check_metrics(text)
    families = parse(text)
    lint_names(families)
    return families


def samples(families: dict, name: str) -> list[tuple[dict, float]]:
    return families[name].samples if name in families else []


def healthy_snapshot() -> Snapshot:
    return gpu_builders.snapshot()


# ------------------------------------------------------------------------ nodes, judged for real


def test_healthy_8gpu_node_passes_promtool():
    promtool()
    snap = healthy_snapshot()
    verdict = judge(snap, default_expectations(), started_at=STARTED)
    fams = checked(prometheus(verdict, snap))
    statuses = samples(fams, "healthcheck_check_status")
    # nothing warns or fails (checks without their source in this snapshot ERROR or SKIP)
    assert statuses and not {v for _, v in statuses} & {STATUS_CODE[Status.WARN], STATUS_CODE[Status.FAIL]}
    assert any(v == 0 for _, v in statuses)
    assert samples(fams, "healthcheck_node_status")[0][1] == STATUS_CODE[verdict.status] != 2
    temps = samples(fams, "healthcheck_gpu_temperature_celsius")
    assert sorted(int(labels["gpu"]) for labels, _ in temps) == list(range(8))
    uuids = {g.index: g.uuid for g in snap.gpus}
    assert all(labels["UUID"] == uuids[int(labels["gpu"])] for labels, _ in temps)
    assert {v for _, v in temps} == {33.0}
    used = dict((labels["gpu"], v) for labels, v in samples(fams, "healthcheck_gpu_memory_used_bytes"))
    assert used["0"] == 2.0 * 2**20  # 2 MiB as bytes
    assert samples(fams, "healthcheck_gpu_ecc_uncorrected_volatile_errors_total")[0][1] == 0
    assert fams["healthcheck_gpu_ecc_uncorrected_volatile_errors_total"].type == "counter"
    assert samples(fams, "healthcheck_last_run_timestamp_seconds")[0][1] == datetime.fromisoformat(STARTED).timestamp()


def test_failing_node_passes_promtool_and_says_which_gpu_fails(tmp_path):
    promtool()
    from tests.faults.matrix import FAULTS

    fault = next(f for f in FAULTS if f.id == "ecc-dbe")
    snap = fault.inject(tmp_path)
    verdict = judge(snap, default_expectations(), started_at=STARTED)
    assert verdict.status is Status.FAIL
    fams = checked(prometheus(verdict, snap))
    status = {(labels["check"], labels["component"]): (labels, v) for labels, v in
              samples(fams, "healthcheck_check_status")}
    labels, value = status[("gpu.ecc.uncorrected", "gpu2")]
    assert value == 2 and labels["gpu"] == "2" and labels["UUID"].startswith("GPU-")
    assert "status" not in labels
    assert status[("gpu.ecc.uncorrected", "gpu1")][1] == 0
    assert samples(fams, "healthcheck_node_status")[0][1] == 2
    ecc = {labels["gpu"]: v for labels, v in samples(fams, "healthcheck_gpu_ecc_uncorrected_volatile_errors_total")}
    assert ecc["2"] == 1 and ecc["0"] == 0


def test_recorded_8gpu_nvidia_smi_output_passes_promtool():
    promtool()
    gpus = parse_nvidia_smi(SMI_XML.read_text()).gpus
    assert len(gpus) == 8
    snap = gpu_builders.snapshot(gpus=gpus)
    fams = checked(prometheus(judge(snap, default_expectations(), started_at=STARTED), snap))
    power = samples(fams, "healthcheck_gpu_power_limit_watts")
    assert len(power) == 8 and all(v > 0 for _, v in power)
    assert {labels["UUID"] for labels, _ in power} == {g.uuid for g in gpus}


@pytest.mark.parametrize("path", corpus_params("nvidia-smi", "q-*"))
def test_recorded_outputs_of_the_corpus_pass_promtool(path):
    promtool()
    gpus = parse_nvidia_smi(path.read_text()).gpus
    snap = gpu_builders.snapshot(gpus=gpus, gpu_pci_devices=None)
    checked(prometheus(judge(snap, default_expectations(), started_at=STARTED), snap))


def test_cli_check_on_a_bundle_prints_an_exposition_promtool_accepts(tmp_path):
    promtool()
    from healthcheck.cli import cli

    bundle = tmp_path / "bundle"
    bundle.mkdir()
    shutil.copy(SMI_XML, bundle / "nvidia-smi-q-x.xml")  # the project's own fixture
    result = CliRunner().invoke(cli, ["check", "--bundle", str(bundle), "--format", "prometheus"])
    assert result.exit_code in (0, 1), result.output
    fams = checked(result.output)
    assert len(samples(fams, "healthcheck_gpu_temperature_celsius")) == 8


# ------------------------------------------------------------------ every check of the catalog


@pytest.fixture(scope="module")
def catalog_run(tmp_path_factory) -> tuple[Verdict, Snapshot]:
    """One verdict holding the findings of every check of the catalog, from real judgements of the
    fault matrix's fixture node (check, epilog and slurm-check contexts) and burn-in judges."""
    from tests.faults.matrix import FAULTS
    from tests.faults.test_fault_matrix import _findings

    by_id = {f.id: f for f in FAULTS}
    findings: list[Finding] = []
    first: Snapshot | None = None
    for fault_id in COVERING_FAULTS:
        fault = by_id[fault_id]
        injected = fault.inject(tmp_path_factory.mktemp(fault_id))
        if isinstance(injected, Snapshot):
            first = first or (injected if injected.gpus else None)
            for context in ("check", "epilog", "slurm-check"):
                findings += _findings(injected, fault, context)
        else:
            findings += injected
    return Verdict.of("gpu017", findings, STARTED, 1.5, "check"), first


def test_every_check_of_the_catalog_passes_promtool(catalog_run):
    promtool()
    verdict, snap = catalog_run
    fams = checked(prometheus(verdict, snap))
    reported = {labels["check"] for labels, _ in samples(fams, "healthcheck_check_status")}
    assert set(index()) <= reported, sorted(set(index()) - reported)
    assert any(v == 2 for _, v in samples(fams, "healthcheck_check_status"))
    # HELP of every family from a check names the check and carries its catalog description
    for fam in FAMILIES:
        if fam.name in fams:
            for check in fam.checks:
                assert f"Check {check}: " in fams[fam.name].help
                words = " ".join(spec(check).description.split()[:6])
                assert words and words.replace("\\", "\\\\") in fams[fam.name].help, (fam.name, check)
    # a check's metrics appear where it measured them: the IB error counters by counter name
    counters = {labels["counter"] for labels, _ in samples(fams, "healthcheck_ib_port_errors_total")}
    assert {"symbol_error", "link_downed", "rcv_errors"} <= counters


def test_every_metric_of_the_catalog_has_a_listed_name(catalog_run):
    """No check of the catalog falls back to an unlisted name: a new metric is named on purpose."""
    verdict, _ = catalog_run
    catalog = set(index())
    pairs = {(f.check, k) for f in verdict.findings for k in f.metrics if f.check in catalog}
    assert len(pairs) > 80
    unlisted = sorted(p for p in pairs if p not in NOT_EXPORTED and p not in _BY_KEY and not any(
        fam.pattern.fullmatch(p[1]) for fam in _PATTERNS.get(p[0], ())))
    assert not unlisted, unlisted
    # and every listed family names checks of the catalog
    assert all(check in catalog for fam in FAMILIES for check in fam.checks)


def test_family_names_are_unique_and_follow_the_rules():
    names = [fam.name for fam in FAMILIES]
    assert len(names) == len(set(names))
    for fam in FAMILIES:
        words = fam.name.split("_")
        assert len(words) == len(set(words)), fam.name
        assert (fam.type == "counter") == fam.name.endswith("_total"), fam.name
        assert words[-1] not in ("count", "sum", "bucket"), fam.name
        assert not {"gauge", "counter", "histogram", "summary"} & set(words), fam.name  # promtool's rule
        assert fam.what and fam.scale > 0


def test_docs_list_every_family_with_its_type():
    text = (ROOT / "docs" / "prometheus.md").read_text()
    rows = dict(re.findall(r"^\| `(healthcheck_\w+)` \| (gauge|counter) \|", text, re.M))
    fixed = {"healthcheck_check_status", "healthcheck_node_status", "healthcheck_run_duration_seconds",
             "healthcheck_last_run_timestamp_seconds"}
    assert rows == {**{fam.name: fam.type for fam in FAMILIES}, **{n: "gauge" for n in fixed}}


# ------------------------------------------------------------------------- the rules, one by one


def verdict_of(*findings: Finding, node: str = "gpu017") -> Verdict:
    return Verdict.of(node, list(findings), STARTED, 0.25)


def test_status_is_a_value_and_a_series_keeps_its_identity():
    series = {}
    for status in Status:
        text = prometheus(verdict_of(Finding("gpu.temperature", status, "m", "gpu1", {"temperature_c": 40})))
        line = next(ln for ln in text.splitlines() if ln.startswith("healthcheck_check_status{"))
        name, value = line.rsplit(" ", 1)
        series[status] = (name, int(value))
    assert len({name for name, _ in series.values()}) == 1  # same series whatever the status
    assert {s: v for s, (_, v) in series.items()} == {Status.PASS: 0, Status.WARN: 1, Status.FAIL: 2,
                                                      Status.ERROR: 3, Status.SKIP: 4}


def test_several_findings_of_one_component_give_one_series_with_the_worst_status():
    text = prometheus(verdict_of(Finding("gpu.count", Status.PASS, "8 GPUs", None, {"count": 8}),
                                 Finding("gpu.count", Status.FAIL, "1 GPU of model X", None, {"model_count": 1})))
    fams = parse(text)
    assert samples(fams, "healthcheck_check_status") == [({"node": "gpu017", "check": "gpu.count",
                                                          "component": ""}, 2.0)]
    assert set(fams) == {"healthcheck_check_status", "healthcheck_gpus", "healthcheck_node_status",
                         "healthcheck_run_duration_seconds", "healthcheck_last_run_timestamp_seconds"}
    assert ("gpu.count", "model_count") in NOT_EXPORTED  # it says why


def test_gpu_and_uuid_labels_are_dcgm_exporters():
    finding = Finding("gpu.power", Status.PASS, "ok", "gpu5", {"power_draw_w": 71.5})
    bare = parse(prometheus(verdict_of(finding)))
    labels, value = samples(bare, "healthcheck_gpu_power_draw_watts")[0]
    assert labels == {"node": "gpu017", "component": "gpu5", "gpu": "5"} and value == 71.5
    snap = healthy_snapshot()
    joined = parse(prometheus(verdict_of(finding), snap))
    labels, _ = samples(joined, "healthcheck_gpu_power_draw_watts")[0]
    assert labels["UUID"] == snap.gpus[5].uuid and labels["gpu"] == "5"
    host = parse(prometheus(verdict_of(Finding("host.load", Status.PASS, "ok", "load", {"load_1m": 2}))))
    assert samples(host, "healthcheck_host_load1")[0][0] == {"node": "gpu017", "component": "load"}


@pytest.mark.parametrize("check, key, value, family, expected", [
    ("gpu.memory_used", "memory_total_mib", 81559, "healthcheck_gpu_memory_size_bytes", 81559 * 2**20),
    ("host.memory", "mem_total_gib", 2, "healthcheck_host_memory_size_bytes", 2 * 2**30),
    ("gpu.stalled", "utilization_gpu_pct", 97, "healthcheck_gpu_stalled_utilization_ratio", 0.97),
    ("storage.health", "percentage_used", 120, "healthcheck_storage_endurance_used_ratio", 1.2),
    ("ib.port.rate", "rate_gbps", 400, "healthcheck_ib_port_rate_bytes_per_second", 5e10),
    ("pcie.hca.link", "speed_current_gts", 32, "healthcheck_hca_pcie_link_transfers_per_second", 3.2e10),
    ("host.edac", "ce_per_day", 86400, "healthcheck_host_edac_corrected_errors_per_second", 1.0),
    ("gpu.responsive", "probe_s", 0.125, "healthcheck_gpu_probe_duration_seconds", 0.125),
    ("ib.port.errors", "port_rcv_errors", 3, "healthcheck_ib_port_errors_total", 3),
])
def test_values_are_in_base_units(check, key, value, family, expected):
    fams = parse(prometheus(verdict_of(Finding(check, Status.PASS, "ok", "c0", {key: value}))))
    got = samples(fams, family)
    assert len(got) == 1 and got[0][1] == pytest.approx(expected), got


def test_one_quantity_from_two_checks_is_one_series():
    port = "mlx5_0:1"
    text = prometheus(verdict_of(Finding("ib.port.state", Status.PASS, "up", port, {"rate_gbps": 400}),
                                 Finding("ib.port.rate", Status.PASS, "ok", port, {"rate_gbps": 400})))
    assert len(samples(parse(text), "healthcheck_ib_port_rate_bytes_per_second")) == 1


@pytest.mark.parametrize("check, key, name", [
    ("gpu.newcheck", "latency_ms", "healthcheck_gpu_newcheck_latency_seconds"),
    ("gpu.power", "power_peak_w", "healthcheck_gpu_power_peak_watts"),
    ("host.new", "error_count", "healthcheck_host_new_error"),
    ("host.new", "things_total", "healthcheck_host_new_things"),
    ("nic.x", "buffer_mib", "healthcheck_nic_x_buffer_bytes"),
    ("nic.x", "busy_pct", "healthcheck_nic_x_busy_ratio"),
    ("burnin.gemm.tflops", "gemm_tflops", "healthcheck_burnin_gemm_tflops"),
    ("9.x", "s", "healthcheck_9_x_seconds"),
])
def test_a_metric_not_listed_gets_a_lint_clean_fallback_name(check, key, name):
    assert family_of(check, key)[0].name == name == fallback_family(check, key).name
    promtool()
    fams = checked(prometheus(verdict_of(Finding(check, Status.WARN, "m", None, {key: 1.5}))))
    assert name in fams and "no stable name yet" in fams[name].help


def test_hostile_strings_stay_inside_their_quotes():
    evil = 'x"}\n# TYPE evil counter\nevil_total 1 \\'
    text = prometheus(verdict_of(Finding("gpu.temperature", Status.FAIL, evil, evil, {"temperature_c": 1e400}),
                                 node=evil))
    fams = parse(text)
    assert set(fams) >= {"healthcheck_check_status", "healthcheck_node_status"} and "evil_total" not in fams
    assert samples(fams, "healthcheck_node_status")[0][0]["node"].startswith('x\\"}\\n# TYPE')
    promtool()
    checked(text)


def test_the_slurm_hooks_never_import_the_renderer():
    code = ("import sys, healthcheck.output.render, healthcheck.hook.run; "
            "sys.exit('healthcheck.output.prometheus' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr


def test_render_passes_the_snapshot_for_uuids():
    snap = healthy_snapshot()
    finding = Finding("gpu.temperature", Status.PASS, "ok", "gpu0", {"temperature_c": 33})
    text = render(verdict_of(finding), "prometheus", snapshot=snap)
    assert f'UUID="{snap.gpus[0].uuid}"' in text
    assert "UUID=" not in render(verdict_of(finding), "prometheus")


# ------------------------------------------------------------------------------- the alert rules


def test_alert_rules_pass_promtool_check_rules():
    proc = subprocess.run([promtool(), "check", "rules", str(ALERTS)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


RULE_TESTS = """
rule_files: [{alerts}]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'healthcheck_check_status{{node="gpu1",check="gpu.ecc.uncorrected",component="gpu2",gpu="2"}}'
        values: '2x20'
      - series: 'healthcheck_check_status{{node="gpu1",check="gpu.ecc.corrected",component="gpu2",gpu="2"}}'
        values: '4x20'
      - series: 'healthcheck_check_status{{node="gpu2",check="host.load",component="load"}}'
        values: '3x40'
      - series: 'healthcheck_gpu_ecc_uncorrected_volatile_errors_total{{node="gpu1",component="gpu2",gpu="2"}}'
        values: '1x20'
      - series: 'healthcheck_gpu_nvlinks_active{{node="gpu1",component="gpu3",gpu="3"}}'
        values: '17x20'
      - series: 'healthcheck_gpu_nvlinks{{node="gpu1",component="gpu3",gpu="3"}}'
        values: '18x20'
      - series: 'healthcheck_ib_port_errors_total{{node="gpu1",component="mlx5_0:1",counter="symbol_error"}}'
        values: '0+1x120'
      - series: 'healthcheck_gpu_xid_events{{node="gpu1",component="gpu4",gpu="4"}}'
        values: '3x20'
      - series: 'healthcheck_check_status{{node="gpu1",check="gpu.xid",component="gpu4",gpu="4"}}'
        values: '1x20'
      - series: 'healthcheck_gpu_xid_events{{node="gpu3",component="gpu0",gpu="0"}}'
        values: '3x20'
      - series: 'healthcheck_check_status{{node="gpu3",check="gpu.xid",component="gpu0",gpu="0"}}'
        values: '4x20'
    alert_rule_test:
      - eval_time: 15m
        alertname: HealthcheckCheckFailing
        exp_alerts:
          - exp_labels: {{severity: critical, node: gpu1, check: gpu.ecc.uncorrected, component: gpu2, gpu: "2"}}
            exp_annotations:
              summary: "gpu1: gpu.ecc.uncorrected fails (gpu2)"
              description: "healthcheck reports FAIL for gpu.ecc.uncorrected (gpu2) on gpu1 for 10 minutes. The Slurm hooks drain the node with a reason naming the check; `healthcheck check --only 'gpu.ecc.uncorrected'` on the node says why."
      - eval_time: 35m
        alertname: HealthcheckCheckError
        exp_alerts:
          - exp_labels: {{severity: warning, node: gpu2, check: host.load, component: load}}
            exp_annotations:
              summary: "gpu2: host.load cannot be judged (load)"
              description: "The checker for host.load (load) on gpu2 has reported ERROR for 30 minutes: it could not judge (unreadable source, probe timeout, crashed parser). ERROR never drains, so a broken checker hides faults until fixed."
      - eval_time: 15m
        alertname: HealthcheckCheckWarning
        exp_alerts: []
      - eval_time: 5m
        alertname: HealthcheckGpuUncorrectableEcc
        exp_alerts:
          - exp_labels: {{severity: critical, node: gpu1, component: gpu2, gpu: "2"}}
            exp_annotations:
              summary: "gpu1 gpu2: 1 uncorrected ECC errors since driver load"
              description: "Uncorrected (double-bit) ECC errors on gpu2 of gpu1. Jobs on this GPU may have computed with corrupted data; the GPU needs a reset, see gpu.row_remap."
      - eval_time: 15m
        alertname: HealthcheckNvlinkDown
        exp_alerts:
          - exp_labels: {{severity: critical, node: gpu1, component: gpu3, gpu: "3"}}
            exp_annotations:
              summary: "gpu1 gpu3: only 17 NVLinks active"
              description: "gpu3 of gpu1 has inactive NVLinks: collectives inside the node run slower or fail. The failing check is gpu.nvlink.state."
      - eval_time: 5m
        alertname: HealthcheckXidEvents
        exp_alerts:
          - exp_labels: {{severity: warning, node: gpu1, component: gpu4, gpu: "4"}}
            exp_annotations:
              summary: "gpu1: 3 NVIDIA Xid events the policy judges"
              description: "The kernel log of gpu1 holds Xid events that gpu.xid warns or fails for (`healthcheck parse kernel-log` on the node lists them). Fatal Xids stay until reboot."
      - eval_time: 90m
        alertname: HealthcheckIbSymbolErrorsGrowing
        exp_alerts:
          - exp_labels: {{severity: warning, node: gpu1, component: mlx5_0:1, counter: symbol_error}}
            exp_annotations:
              summary: "gpu1 mlx5_0:1: 60 InfiniBand symbol errors in an hour"
              description: "The symbol error counter of mlx5_0:1 on gpu1 grows (more than 10 in the last hour): a marginal cable or transceiver. ib.port.errors judges the total; this alert sees the growth before the total reaches its threshold."
"""


def test_alert_rules_fire_on_the_new_codes_and_names(tmp_path):
    """promtool test rules: a FAIL (2) fires the failing alert, an ERROR (3) the error alert, a SKIP (4)
    nothing (neither alone nor as the gate of the Xid alert); the counters and gauges of the new names
    fire theirs."""
    tool = promtool()
    path = tmp_path / "alerts-test.yml"
    path.write_text(RULE_TESTS.format(alerts=ALERTS))
    proc = subprocess.run([tool, "test", "rules", str(path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
