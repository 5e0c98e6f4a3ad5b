"""gpu.fabric on Blackwell and rack-scale NVLink (issue 33): the fabric's health fields, the NVLink
domain's clique id and cluster UUID, from NVML (the pynvml fake) and from nvidia-smi -q text and XML."""
from __future__ import annotations

import dataclasses

import pytest

from healthcheck.config import loads
from healthcheck.config.generate import expectations_of, generate_toml
from healthcheck.core.expectations import Expectations, NvlinkDomainExpect
from healthcheck.core.model import Snapshot, Status
from healthcheck.parsers.nvidia_smi import parse_nvidia_smi
from healthcheck.policies.fabric import FABRIC_HEALTH_RULES, judge_health
from healthcheck.probes.nvml import probe_gpus

from tests.checks.gpu_builders import by_component, h100, run, snapshot
from tests.conftest import CORPUS
from tests.fakes import fake_pynvml
from tests.fakes.fake_pynvml import FakeNvml, b200_hgx_node, fabric_health_mask, gb200_nvl72_tray

pynvml = pytest.importorskip("pynvml")
PASS, WARN, FAIL, SKIP = Status.PASS, Status.WARN, Status.FAIL, Status.SKIP
DOMAIN = Expectations(nvlink_domain=NvlinkDomainExpect(size=72, name="block"))
NVL72_UUID = "5d1e7a2c-9b3f-4e61-a0c2-d4e6f8091a2b"


def _snap(gpus) -> Snapshot:
    return Snapshot(node="n1", taken_at="2026-01-01T00:00:00Z", gpus=gpus)


def _fabric(gpus, exp: Expectations | None = None) -> dict:
    return by_component(run("gpu.fabric", _snap(gpus), exp or Expectations()))


def _tray(**changes):
    gpus = probe_gpus(nvml=FakeNvml(gb200_nvl72_tray(), driver="580.173.02"))
    return [dataclasses.replace(g, **changes) for g in gpus]


# ------------------------------------------------------------------------------- the NVML probe


def test_nvml_reads_the_tray_fabric_v3():
    gpus = probe_gpus(nvml=FakeNvml(gb200_nvl72_tray()))
    assert [g.name for g in gpus] == ["NVIDIA GB200"] * 4
    g = gpus[0]
    assert (g.fabric_state, g.fabric_status, g.fabric_clique_id) == ("completed", "Success", 32766)
    assert g.fabric_cluster_uuid == NVL72_UUID
    assert g.fabric_health == {"bandwidth": "full", "route_recovery": "false", "route_unhealthy": "false",
                               "access_timeout_recovery": "false", "incorrect_configuration": "none",
                               "partition_assigned": "true", "gfm_state": "connected", "summary": "healthy"}
    assert g.unrepairable_memory is False
    assert all(nl.speed_gbps == pytest.approx(53.125) for nl in g.nvlinks)


def test_nvml_older_driver_falls_back_to_the_v2_struct():
    fakes = gb200_nvl72_tray()
    for f in fakes:
        f.fabric_struct = 2  # the driver answers ARGUMENT_VERSION_MISMATCH for v3
        f.fabric_health_mask = fabric_health_mask(bandwidth="TRUE")
    fake = FakeNvml(fakes)
    g = probe_gpus(nvml=fake)[0]
    assert g.fabric_health["bandwidth"] == "degraded" and "summary" not in g.fabric_health
    assert g.error is None and not g.field_errors  # the mismatch is no error of the GPU
    assert fake.calls.count("nvmlDeviceGetGpuFabricInfoV") == 8  # v3 then v2, per GPU


def test_nvml_older_pynvml_without_v3_or_unrepairable_call():
    fake = FakeNvml(gb200_nvl72_tray(), missing={"nvmlDeviceGetGpuFabricInfoV", "nvmlDeviceGetUnrepairableMemoryFlag_v1"})
    g = probe_gpus(nvml=fake)[0]
    assert (g.fabric_state, g.fabric_clique_id, g.fabric_cluster_uuid) == ("completed", 32766, NVL72_UUID)
    assert g.fabric_health is None  # the deprecated struct has no health fields
    assert g.unrepairable_memory is None and not g.field_errors


def _v4_tray(cliques=None):
    fakes = gb200_nvl72_tray()
    for f in fakes:
        f.fabric_struct = 4  # a 615+ driver: nvmlDeviceGetGpuFabricInfo_v4
    for index, entries in (cliques or {}).items():
        fakes[index].fabric_cliques = entries
    fake = FakeNvml(fakes)
    return probe_gpus(nvml=fake), fake


def test_nvml_v4_reads_the_cliques_per_type():
    gpus, fake = _v4_tray()
    g = gpus[0]
    assert g.fabric_cliques == {"unicast_pointer": [32766], "multicast_pointer": [32766]}
    assert (g.fabric_clique_id, g.fabric_cluster_uuid) == (32766, NVL72_UUID)  # the unicast pointer clique
    assert g.fabric_health["summary"] == "healthy" and g.error is None and not g.field_errors
    assert fake.calls.count("nvmlDeviceGetGpuFabricInfo_v4") == 4
    assert fake.calls.count("nvmlDeviceGetGpuFabricInfoV") == 0  # one call where the driver knows v4


def test_nvml_driver_before_v4_falls_back_to_v3_without_an_error():
    fake = FakeNvml(gb200_nvl72_tray())  # fabric_struct 3: the v4 call answers FUNCTION_NOT_FOUND
    gpus = probe_gpus(nvml=fake)
    assert all(g.fabric_cliques is None and g.fabric_clique_id == 32766 for g in gpus)
    assert all(g.error is None and not g.field_errors for g in gpus)
    assert fake.calls.count("nvmlDeviceGetGpuFabricInfo_v4") == 4


def test_nvml_v4_unknown_clique_type_and_several_of_one_type_are_kept():
    mc = pynvml.NVML_GPU_FABRIC_CLIQUE_TYPE_MULTICAST_POINTER
    gpus, _ = _v4_tray({0: [(0, 9), (mc, 4), (mc, 5), (7, 1)]})
    assert gpus[0].fabric_cliques == {"unicast_pointer": [9], "multicast_pointer": [4, 5], "type7": [1]}


def test_v4_clique_of_another_type_differing_is_named_only_where_a_domain_is_declared():
    uc, mc = pynvml.NVML_GPU_FABRIC_CLIQUE_TYPE_UNICAST_POINTER, pynvml.NVML_GPU_FABRIC_CLIQUE_TYPE_MULTICAST_POINTER
    gpus, _ = _v4_tray({2: [(uc, 32766), (mc, 12)]})  # same unicast clique, another multicast one
    assert {f.status for f in _fabric(gpus).values()} == {PASS}
    found = _fabric(gpus, DOMAIN)
    assert [found[f"gpu{i}"].status for i in range(4)] == [PASS, PASS, FAIL, PASS]
    assert "multicast pointer clique 12, the node's other GPUs 32766" in found["gpu2"].message
    assert "clique id" not in found["gpu2"].message  # v3's view of it (the unicast clique) agrees


def test_v4_no_clique_at_all_is_clique_zero_where_a_domain_is_declared():
    gpus, _ = _v4_tray({i: [] for i in range(4)})
    assert all(g.fabric_clique_id == 0 and g.fabric_cliques == {} for g in gpus)
    found = _fabric(gpus, DOMAIN)["gpu0"]
    assert found.status is FAIL and "clique id 0" in found.message


def test_nvml_unrepairable_flag_set():
    fakes = gb200_nvl72_tray()
    fakes[2].unrepairable_memory = 1
    assert [g.unrepairable_memory for g in probe_gpus(nvml=FakeNvml(fakes))] == [False, False, True, False]


def test_hopper_fake_reports_no_health_and_keeps_its_verdict():
    gpus = probe_gpus(nvml=FakeNvml(fake_pynvml.h100_node(2)))
    assert all(g.fabric_health is None for g in gpus)
    assert {f.status for f in _fabric(gpus).values()} == {PASS}


# ----------------------------------------------------------------------------- health, judged


def test_healthy_tray_and_b200_node_pass():
    assert {f.status for f in _fabric(_tray(), DOMAIN).values()} == {PASS}
    b200 = probe_gpus(nvml=FakeNvml(b200_hgx_node()))
    assert b200[0].fabric_health == {"access_timeout_recovery": "false", "summary": "healthy"}
    assert (b200[0].fabric_clique_id, b200[0].fabric_cluster_uuid) == (0, "00000000-0000-0000-0000-000000000000")
    assert {f.status for f in _fabric(b200).values()} == {PASS}  # no NVLink domain declared: 0 is normal


def test_completed_success_but_unhealthy_fails():
    # the tray of the issue: State Completed, Status Success, Health Summary Unhealthy passed before
    gpus = _tray()
    gpus[1] = dataclasses.replace(gpus[1], fabric_health={**gpus[1].fabric_health, "summary": "unhealthy"})
    found = _fabric(gpus)
    assert found["gpu1"].status is FAIL and "Unhealthy" in found["gpu1"].message
    assert found["gpu0"].status is PASS


@pytest.mark.parametrize("field,value,status", [
    ("bandwidth", "degraded", FAIL), ("route_unhealthy", "true", FAIL),
    ("incorrect_configuration", "incorrect_sysguid", FAIL), ("incorrect_configuration", "no_partition", FAIL),
    ("route_recovery", "true", WARN), ("access_timeout_recovery", "true", WARN),
    ("summary", "limited_capacity", WARN), ("partition_assigned", "false", WARN), ("gfm_state", "disconnected", WARN),
])
def test_each_health_field_is_judged(field, value, status):
    gpus = _tray()
    gpus[0] = dataclasses.replace(gpus[0], fabric_health={**gpus[0].fabric_health, field: value})
    f = _fabric(gpus)["gpu0"]
    assert f.status is status and value in f.message


def test_every_rule_has_a_reason_and_a_status():
    assert all(status in ("pass", "warn", "fail") for _, _, status, _ in FABRIC_HEALTH_RULES)
    assert judge_health({"incorrect_configuration": "none", "summary": "healthy"}) == []


# ------------------------------------------------------------------------------ the NVLink domain


def test_domain_clique_zero_and_zero_uuid_fail_only_where_declared():
    gpus = _tray(fabric_clique_id=0, fabric_cluster_uuid="00000000-0000-0000-0000-000000000000")
    assert {f.status for f in _fabric(gpus).values()} == {PASS}
    found = _fabric(gpus, DOMAIN)["gpu0"]
    assert found.status is FAIL
    assert "clique id 0" in found.message and "all zeros" in found.message


def test_domain_gpu_in_another_clique_or_cluster_is_named():
    gpus = _tray()
    gpus[3] = dataclasses.replace(gpus[3], fabric_clique_id=7)
    gpus[2] = dataclasses.replace(gpus[2], fabric_cluster_uuid="11111111-2222-3333-4444-555555555555")
    found = _fabric(gpus, DOMAIN)
    assert (found["gpu0"].status, found["gpu1"].status) == (PASS, PASS)
    assert found["gpu3"].status is FAIL and "clique id 7, the node's other GPUs 32766" in found["gpu3"].message
    assert found["gpu2"].status is FAIL and "cluster UUID 11111111" in found["gpu2"].message


def test_domain_declared_but_no_fabric_fails():
    gpus = [h100(0, fabric_state=None, fabric_status=None)]
    assert _fabric(gpus)["gpu0"].status is SKIP
    assert _fabric(gpus, DOMAIN)["gpu0"].status is FAIL


def test_insufficient_resources_status_fails_even_without_a_state():
    gpus = [h100(0, fabric_state=None, fabric_status="Insufficient Resources")]
    assert _fabric(gpus)["gpu0"].status is FAIL


# -------------------------------------------------------------------------------- nvidia-smi -q

TRAY_TEXT = """==============NVSMI LOG==============

Driver Version                            : 580.173.02

GPU 00000008:01:00.0
    Product Name                          : NVIDIA GB200
    Fabric
        State                             : Completed
        Status                            : {status}
        CliqueId                          : {clique}
        ClusterUUID                       : {uuid}
        Health
            Summary                       : {summary}
            Bandwidth                     : Full
            Route Recovery in progress    : False
            Route Unhealthy               : False
            Access Timeout Recovery       : False
            Incorrect Configuration       : None
            Partition Assigned            : N/A
    ECC Errors
        Unrepairable Memory               : {unrepairable}
"""


def _text(status="Success", clique=2, uuid=NVL72_UUID, summary="Healthy", unrepairable="No"):
    return parse_nvidia_smi(TRAY_TEXT.format(status=status, clique=clique, uuid=uuid, summary=summary,
                                             unrepairable=unrepairable)).gpus


def test_text_fabric_section_is_read():
    g = _text()[0]
    assert (g.fabric_state, g.fabric_clique_id, g.fabric_cluster_uuid) == ("completed", 2, NVL72_UUID)
    assert g.fabric_health == {"summary": "healthy", "bandwidth": "full", "route_recovery": "false",
                               "route_unhealthy": "false", "access_timeout_recovery": "false",
                               "incorrect_configuration": "none"}  # Partition Assigned N/A: left out
    assert g.unrepairable_memory is False
    assert _fabric(_text(), DOMAIN)["gpu0"].status is PASS


def test_text_unhealthy_tray_fails():
    assert _fabric(_text(summary="Unhealthy"))["gpu0"].status is FAIL


def test_text_insufficient_resources_clique_zero_fails():
    gpus = _text(status="Insufficient Resources", clique=0, uuid="00000000-0000-0000-0000-000000000000")
    f = _fabric(gpus, DOMAIN)["gpu0"]
    assert f.status is FAIL
    assert "Insufficient Resources" in f.message and "clique id 0" in f.message


# ------------------------------------------------------------------------------ config generate


def test_generate_records_the_domain_where_a_cluster_uuid_shows():
    tray = _snap(_tray())
    assert expectations_of(tray)["nvlink_domain"] == {"name": "nvlink"}
    cfg = loads(generate_toml(tray, "gb200", "gb[001-018]"))
    assert cfg.expectations_for("gb001").nvlink_domain == NvlinkDomainExpect(None, "nvlink")
    b200 = _snap(probe_gpus(nvml=FakeNvml(b200_hgx_node())))
    assert "nvlink_domain" not in expectations_of(b200)
    assert "nvlink_domain" not in expectations_of(snapshot())


# ----------------------------------------------------------------------------------- the corpus

CAPTURES = CORPUS / "blackwell" / "nvidia-smi"


@pytest.mark.corpus
@pytest.mark.parametrize("fragment,domain,expected", [
    ("dra-driver-issue626", False, {FAIL}),  # Completed / Success / clique 2 but Health Summary Unhealthy
    ("q-x-gb200-4gpu", True, {PASS}),
    ("q-x-gb300-4gpu", True, {PASS}),
    ("q-x-b200-8gpu", False, {PASS}),  # clique 0, all-zero cluster UUID: a single-node NVLink domain
    ("q-x-b200-8gpu", True, {FAIL}),  # ... which a class declaring an NVLink domain does not accept
    ("rtx5080-laptop", True, {FAIL}),  # Fabric all N/A: no fabric where the class declares a domain
    ("rtx5080-laptop", False, {SKIP}),
])
def test_corpus_fabric_verdicts(fragment, domain, expected):
    files = sorted(CAPTURES.glob(f"*{fragment}*")) if CAPTURES.is_dir() else []
    if not files:
        pytest.skip("corpus blackwell/nvidia-smi absent")
    gpus = parse_nvidia_smi(files[0].read_text(encoding="utf-8", errors="replace")).gpus
    found = _fabric(gpus, DOMAIN if domain else None)
    assert {f.status for f in found.values()} == expected, {c: f.message for c, f in found.items()}


# Every blackwell/nvidia-smi capture the parser reads, through the checks issue 33 touched, as its SOURCES row says:
# the FAULT fails gpu.fabric, the HEALTHY and EDGE captures fail none of them.
TOUCHED = ("gpu.fabric", "gpu.row_remap", "gpu.ecc.uncorrected", "gpu.ecc.sram", "gpu.reset_required")
BLACKWELL_FAULTS = {"dra-driver-issue626": {("gpu.fabric", "gpu0")}}


@pytest.mark.corpus
@pytest.mark.parametrize("path", sorted(CAPTURES.glob("*")) if CAPTURES.is_dir() else
                         [pytest.param(None, marks=pytest.mark.skip(reason="corpus blackwell/nvidia-smi absent"))])
def test_blackwell_captures_as_their_sources_say(path):
    from healthcheck.checks import registry
    from healthcheck.parsers import ParseError

    try:
        gpus = parse_nvidia_smi(path.read_text(encoding="utf-8", errors="replace")).gpus
    except ParseError:
        # the default table (B300, 7 of 8 GPUs) and one GPU's Platform Info block: not -q outputs
        assert "xe9780" in path.name or "platform-info" in path.name
        return
    specs = registry.load_all()
    exp = Expectations()
    failing = {(f.check, f.component) for name in TOUCHED
               for f in specs[name].func(_snap(gpus), exp, exp.thresholds_for(name, specs[name].thresholds))
               if f.status is FAIL}
    expected = set().union(*[v for k, v in BLACKWELL_FAULTS.items() if k in path.name])
    assert failing == expected
