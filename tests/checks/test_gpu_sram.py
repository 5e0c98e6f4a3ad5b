"""SRAM ECC status and HBM temperature (issue 21, item 5).

gpu.ecc.sram: through the NVML probe with the fake pynvml (nvmlDeviceGetSramEccErrorStatus and its
struct; NotSupported on older GPUs, absent on older pynvml/drivers, NVML errors judged) and through the
real parsers on real recorded nvidia-smi -q outputs (edited in memory), text and XML.
gpu.temperature: a memory temperature with no absolute limit reported is judged against mem_max_c.
"""
from __future__ import annotations

import pytest

from healthcheck.checks import registry
from healthcheck.config import default_expectations
from healthcheck.core.model import GpuInfo, Snapshot, Status
from healthcheck.parsers.nvidia_smi import parse_nvidia_smi
from healthcheck.probes.nvml import probe_gpus

from tests.conftest import CORPUS
from tests.fakes.fake_pynvml import FakeNvml, h100_node, old_gpu

pynvml = pytest.importorskip("pynvml")

SMI = CORPUS / "nvidia-smi"
NVL_550 = SMI / "q-a-text-h100-nvl-x2-550.54.14-healthy.txt"  # parity/SEC-DED split, threshold flag, sources
SXM_545 = SMI / "q-a-text-h100-sxm-80gb-545.23.08-single-gpu-healthy-della.txt"  # one SRAM count, no flag
FRAGMENT = SMI / "q-text-ecc-errors-block-sram-uncorrectable-vol1-agg5-fragment.txt"  # FAULT: agg 5


def _read(path):
    if not path.is_file():
        pytest.skip(f"corpus file {path.name} absent")
    return path.read_text(encoding="utf-8", errors="replace")


def _run(gpus, name: str, **thresholds):
    spec = registry.load_all()[name]
    t = default_expectations().thresholds_for(name, spec.thresholds)
    t.update(thresholds)
    return spec.func(Snapshot(node="n", taken_at="2026-12-01T00:00:00Z", gpus=gpus), default_expectations(), t)


def _set(text: str, label: str, value: str, after: str, nth: int = 1) -> str:
    """Replace the value of the ``nth`` ``label :`` line after the first line containing ``after``."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if after in line)
    for i in range(start, len(lines)):
        head, sep, _ = lines[i].partition(":")
        if sep and head.strip() == label:
            nth -= 1
            if nth == 0:
                lines[i] = f"{head}: {value}"
                return "\n".join(lines) + "\n"
    raise AssertionError(f"no {label!r} line after {after!r}")


# ------------------------------------------------------------------------------------------ NVML


def test_nvml_threshold_exceeded_fails_with_the_rma_advice_and_the_counts():
    gpus = h100_node(2)
    gpus[1].sram = {"aggregateUncParity": 3, "aggregateUncSecDed": 2, "volatileUncParity": 1,
                    "aggregateUncBucketL2": 4, "aggregateUncBucketSm": 1, "bThresholdExceeded": 1}
    healthy, bad = probe_gpus(FakeNvml(gpus))
    assert (bad.sram_parity_aggregate, bad.sram_secded_aggregate, bad.sram_uncorrectable_aggregate) == (3, 2, 5)
    assert bad.sram_uncorrectable_volatile == 1 and bad.sram_threshold_exceeded is True
    assert bad.sram_sources == {"l2": 4, "sm": 1, "microcontroller": 0, "pcie": 0, "other": 0}
    f0, f1 = _run([healthy, bad], "gpu.ecc.sram")
    assert f0.status is Status.PASS and "aggregate 0" in f0.message
    assert f1.status is Status.FAIL and f1.component == "gpu1"
    assert "threshold exceeded" in f1.message and "RMA" in f1.message
    assert "parity 3, SEC-DED 2" in f1.message and "l2 4, sm 1" in f1.message
    assert f1.metrics["sram_threshold_exceeded"] == 1 and f1.metrics["sram_uncorrectable_aggregate"] == 5


def test_nvml_after_a_driver_reload_the_sram_flag_still_fails_where_the_total_only_warns():
    """Volatile counts reset at a driver reload: gpu.ecc.uncorrected sees only the aggregate (WARN);
    gpu.ecc.sram still FAILs on the InfoROM's flag."""
    gpus = h100_node(1)
    gpus[0].sram = {"aggregateUncSecDed": 2, "bThresholdExceeded": 1}
    gpus[0].ecc = {(pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_AGGREGATE_ECC): 2}
    (gpu,) = probe_gpus(FakeNvml(gpus))
    assert [f.status for f in _run([gpu], "gpu.ecc.uncorrected")] == [Status.WARN]
    assert [f.status for f in _run([gpu], "gpu.ecc.sram")] == [Status.FAIL]


def test_nvml_count_over_the_rule_warns_when_the_driver_says_no_threshold():
    gpus = h100_node(1)
    gpus[0].sram = {"aggregateUncParity": 6, "bThresholdExceeded": 0}
    (gpu,) = probe_gpus(FakeNvml(gpus))
    (f,) = _run([gpu], "gpu.ecc.sram")
    assert f.status is Status.WARN and "more than 4" in f.message
    (f,) = _run([gpu], "gpu.ecc.sram", fail_over_count_with_flag=True)
    assert f.status is Status.FAIL


def test_nvml_older_gpu_not_supported_and_older_pynvml_without_the_call_skip():
    (old,) = probe_gpus(FakeNvml([old_gpu()]))  # NotSupported
    assert old.sram_threshold_exceeded is None and "sram_threshold_exceeded" not in old.field_errors
    assert [f.status for f in _run([old], "gpu.ecc.sram")] == [Status.SKIP]
    (gpu,) = probe_gpus(FakeNvml(h100_node(1), missing={"nvmlDeviceGetSramEccErrorStatus"}))
    assert gpu.sram_uncorrectable_aggregate is None and gpu.error is None
    assert [f.status for f in _run([gpu], "gpu.ecc.sram")] == [Status.SKIP]


@pytest.mark.parametrize("code, status", [
    ("NVML_ERROR_UNKNOWN", Status.ERROR), ("NVML_ERROR_NO_PERMISSION", Status.ERROR),
    ("NVML_ERROR_CORRUPTED_INFOROM", Status.FAIL), ("NVML_ERROR_FUNCTION_NOT_FOUND", Status.SKIP),
])
def test_nvml_errors_follow_the_field_error_rule(code, status):
    gpus = h100_node(1)
    gpus[0].errors["nvmlDeviceGetSramEccErrorStatus"] = getattr(pynvml, code)
    (gpu,) = probe_gpus(FakeNvml(gpus))
    findings = _run([gpu], "gpu.ecc.sram")
    assert [f.status for f in findings] == [status], findings
    if status is not Status.SKIP:
        assert "nvmlDeviceGetSramEccErrorStatus" in gpu.field_errors["sram_threshold_exceeded"]


# ------------------------------------------------------------------------------ nvidia-smi -q


def test_text_550_healthy_reads_every_sram_field_and_passes():
    result = parse_nvidia_smi(_read(NVL_550))
    for gpu in result.gpus:
        assert (gpu.sram_parity_volatile, gpu.sram_secded_volatile, gpu.sram_uncorrectable_aggregate) == (0, 0, 0)
        assert gpu.sram_threshold_exceeded is False and gpu.sram_sources["l2"] == 0
    assert {f.status for f in _run(result.gpus, "gpu.ecc.sram")} == {Status.PASS}


def test_text_550_threshold_exceeded_yes_fails():
    text = _set(_read(NVL_550), "SRAM Threshold Exceeded", "Yes", "ECC Errors")
    text = _set(text, "SRAM Uncorrectable SEC-DED", "2", "Aggregate")
    gpus = parse_nvidia_smi(text).gpus
    first = _run(gpus, "gpu.ecc.sram")[0]
    assert first.status is Status.FAIL and "RMA" in first.message and "SEC-DED 2" in first.message
    assert _run(gpus, "gpu.ecc.sram")[1].status is Status.PASS  # the other GPU is untouched


def test_text_550_threshold_unknown_error_is_error():
    gpus = parse_nvidia_smi(_set(_read(NVL_550), "SRAM Threshold Exceeded", "Unknown Error", "ECC Errors")).gpus
    assert gpus[0].field_errors["sram_threshold_exceeded"] == "Unknown Error"
    assert _run(gpus, "gpu.ecc.sram")[0].status is Status.ERROR


def test_text_545_single_count_without_flag_judged_by_the_count_rule():
    (gpu,) = parse_nvidia_smi(_read(SXM_545)).gpus
    assert gpu.sram_uncorrectable_aggregate == 0 and gpu.sram_threshold_exceeded is None
    assert _run([gpu], "gpu.ecc.sram")[0].status is Status.PASS
    five = _set(_read(SXM_545), "SRAM Uncorrectable", "5", "Aggregate")
    (f,) = _run(parse_nvidia_smi(five).gpus, "gpu.ecc.sram")
    assert f.status is Status.FAIL and "more than 4" in f.message


def test_real_fault_fragment_fails_and_still_fails_after_a_driver_reload():
    """The recorded FAULT (volatile 1, aggregate 5): gpu.ecc.sram FAILs; with the volatile count reset
    (a driver reload) gpu.ecc.uncorrected only WARNs, gpu.ecc.sram still FAILs."""
    (gpu,) = parse_nvidia_smi(_read(FRAGMENT)).gpus
    assert (gpu.sram_uncorrectable_volatile, gpu.sram_uncorrectable_aggregate) == (1, 5)
    assert _run([gpu], "gpu.ecc.sram")[0].status is Status.FAIL
    reloaded = _set(_read(FRAGMENT), "SRAM Uncorrectable", "0", "Volatile")
    (gpu,) = parse_nvidia_smi(reloaded).gpus
    assert _run([gpu], "gpu.ecc.uncorrected")[0].status is Status.WARN
    assert _run([gpu], "gpu.ecc.sram")[0].status is Status.FAIL


XML = """<?xml version="1.0" ?>
<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">
<nvidia_smi_log><driver_version>550.90.07</driver_version><cuda_version>12.4</cuda_version>
<attached_gpus>1</attached_gpus>
<gpu id="00000000:18:00.0"><product_name>NVIDIA H100 80GB HBM3</product_name>
<ecc_errors><volatile><sram_correctable>0</sram_correctable>
<sram_uncorrectable_parity>0</sram_uncorrectable_parity><sram_uncorrectable_secded>1</sram_uncorrectable_secded>
<dram_correctable>0</dram_correctable><dram_uncorrectable>0</dram_uncorrectable></volatile>
<aggregate><sram_correctable>0</sram_correctable><sram_uncorrectable_parity>1</sram_uncorrectable_parity>
<sram_uncorrectable_secded>3</sram_uncorrectable_secded><dram_correctable>0</dram_correctable>
<dram_uncorrectable>0</dram_uncorrectable><sram_threshold_exceeded>{flag}</sram_threshold_exceeded></aggregate>
<aggregate_uncorrectable_sram_sources><sram_l2>3</sram_l2><sram_sm>1</sram_sm>
<sram_microcontroller>0</sram_microcontroller><sram_pcie>0</sram_pcie><sram_other>0</sram_other>
</aggregate_uncorrectable_sram_sources></ecc_errors></gpu></nvidia_smi_log>
"""


@pytest.mark.parametrize("flag, status", [("Yes", Status.FAIL), ("No", Status.PASS), ("N/A", Status.PASS)])
def test_xml_reads_the_same_fields(flag, status):
    (gpu,) = parse_nvidia_smi(XML.format(flag=flag)).gpus
    assert (gpu.sram_uncorrectable_volatile, gpu.sram_parity_aggregate, gpu.sram_secded_aggregate) == (1, 1, 3)
    assert gpu.sram_sources == {"l2": 3, "sm": 1, "microcontroller": 0, "pcie": 0, "other": 0}
    assert gpu.ecc_uncorrected_volatile == 1  # still summed into the total, as nvidia-smi's counts are
    assert _run([gpu], "gpu.ecc.sram")[0].status is status


# ------------------------------------------------------------------------------ HBM temperature


def test_hbm_temperature_without_an_absolute_limit_is_judged_against_mem_max_c():
    """Hopper on R545+ prints the memory limit as a T.Limit offset (0 C): the default limit judges."""
    text = _read(SXM_545)
    (gpu,) = parse_nvidia_smi(text).gpus
    assert gpu.mem_temperature_c == 41 and gpu.mem_temp_max_c is None
    assert _run([gpu], "gpu.temperature")[0].status is Status.PASS
    (hot,) = parse_nvidia_smi(_set(text, "Memory Current Temp", "96 C", "Temperature")).gpus
    (f,) = _run([hot], "gpu.temperature")
    assert f.status is Status.FAIL and "memory 96 C >= max 95 C" in f.message and "default" in f.message
    (warm,) = parse_nvidia_smi(_set(text, "Memory Current Temp", "91 C", "Temperature")).gpus
    assert _run([warm], "gpu.temperature")[0].status is Status.WARN
    assert _run([hot], "gpu.temperature", mem_max_c=None)[0].status is Status.PASS


def test_hbm_limit_reported_by_the_gpu_wins_over_the_default():
    gpu = GpuInfo(0, temperature_c=40.0, mem_temperature_c=101.0, mem_temp_max_c=105.0)
    (f,) = _run([gpu], "gpu.temperature")
    assert f.status is Status.WARN and "max 105 C" in f.message and "default" not in f.message
    gpus = h100_node(1)
    gpus[0].mem_temperature = 96  # NVML field value; MEM_MAX threshold 95 from the driver
    (nvml_gpu,) = probe_gpus(FakeNvml(gpus))
    assert _run([nvml_gpu], "gpu.temperature")[0].status is Status.FAIL
