"""Tool-reported errors are judged, never skipped (issue 14, item 4).

A field nvidia-smi prints as "Unknown Error" (or NVML answers with an error code other than
NotSupported) makes the check that reads it ERROR; "GPU requires reset" / "Corrupted infoROM" make it
FAIL. Through the real parsers on real recorded outputs (the field edited in memory) and through the
NVML probe with the fake pynvml raising real NVML error codes.
"""
from __future__ import annotations

import pytest

from healthcheck.checks import registry
from healthcheck.config import default_expectations
from healthcheck.core.model import Snapshot, Status
from healthcheck.parsers.nvidia_smi import parse_nvidia_smi
from healthcheck.probes.nvml import probe_gpus

from tests.conftest import CORPUS
from tests.fakes.fake_pynvml import FakeNvml, h100_node

pynvml = pytest.importorskip("pynvml")

SMI = CORPUS / "nvidia-smi"
ECC_UNKNOWN = SMI / "q-d-ecc-row-remapper-550.90.07-ecc-mode-unknown-error-remap-pending-annotated.txt"
H100_TEXT = SMI / "q-a-text-h100-sxm-80gb-545.23.08-single-gpu-healthy-della.txt"
P100_XML = SMI / "q-x-tesla-p100-pcie-510.47.03-aggregate-sbe3.xml"


def _read(path):
    if not path.is_file():
        pytest.skip(f"corpus file {path.name} absent")
    return path.read_text(encoding="utf-8", errors="replace")


def _run(gpus, name: str):
    spec = registry.load_all()[name]
    exp = default_expectations()
    snap = Snapshot(node="n", taken_at="2024-01-01T00:00:00Z", gpus=gpus)
    return spec.func(snap, exp, exp.thresholds_for(name, spec.thresholds))


def _edit(text: str, label: str, value: str, after: str | None = None) -> str:
    """Replace the value of the first ``label :`` line (after the line containing ``after``)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if after in line) if after else 0
    for i in range(start, len(lines)):
        head, sep, _ = lines[i].partition(":")
        if sep and head.strip() == label:
            lines[i] = f"{head}: {value}"
            return "\n".join(lines) + "\n"
    raise AssertionError(f"no {label!r} line in the recording")


# ------------------------------------------------------------------------------ nvidia-smi -q


def test_real_recording_ecc_mode_unknown_error_is_error_not_skip():
    (gpu,) = parse_nvidia_smi(_read(ECC_UNKNOWN)).gpus
    assert gpu.ecc_mode_current is None
    assert gpu.field_errors["ecc_mode_current"] == "Unknown Error"
    (f,) = _run([gpu], "gpu.ecc.mode")
    assert f.status is Status.ERROR, f
    assert "Unknown Error" in f.message and "reset the GPU or reboot" in f.message


@pytest.mark.parametrize("label, after, check, fld", [
    ("Current", "ECC Mode", "gpu.ecc.mode", "ecc_mode_current"),
    ("Persistence Mode", None, "gpu.persistence", "persistence_mode"),
    ("GPU Current Temp", None, "gpu.temperature", "temperature_c"),
    ("Pending", "Remapped Rows", "gpu.row_remap", "remap_pending"),
    ("Replays Since Reset", None, "gpu.pcie.replays", "pcie_replay_count"),
])
@pytest.mark.parametrize("words, status", [
    ("Unknown Error", Status.ERROR), ("[Unknown Error]", Status.ERROR),
    ("Insufficient Permissions", Status.ERROR),
    ("GPU requires reset", Status.FAIL), ("Corrupted infoROM", Status.FAIL),
])
def test_text_field_error_judged(label, after, check, fld, words, status):
    text = _edit(_read(H100_TEXT), label, words, after)
    (gpu,) = parse_nvidia_smi(text).gpus
    assert fld in gpu.field_errors
    findings = _run([gpu], check)
    assert findings and all(f.status is status for f in findings), findings
    # and the healthy original passes the same check
    (healthy,) = parse_nvidia_smi(_read(H100_TEXT)).gpus
    assert all(f.status is Status.PASS for f in _run([healthy], check))


def test_text_not_supported_stays_not_reported():
    text = _edit(_read(H100_TEXT), "Current", "N/A", "ECC Mode")
    (gpu,) = parse_nvidia_smi(text).gpus
    assert "ecc_mode_current" not in gpu.field_errors
    # N/A current with a readable pending: not an error, the check does not FAIL or ERROR
    assert all(f.status not in (Status.ERROR, Status.FAIL) for f in _run([gpu], "gpu.ecc.mode"))


def test_text_gpu_is_lost_field_marks_the_gpu_lost():
    text = _edit(_read(H100_TEXT), "Current", "GPU is lost", "ECC Mode")
    (gpu,) = parse_nvidia_smi(text).gpus
    assert gpu.lost
    assert [f.status for f in _run([gpu], "gpu.lost")] == [Status.FAIL]


def test_xml_field_error_judged():
    text = _read(P100_XML)
    assert "<current_ecc>Enabled</current_ecc>" in text
    text = text.replace("<current_ecc>Enabled</current_ecc>", "<current_ecc>Unknown Error</current_ecc>")
    text = text.replace("<power_draw>26.16 W</power_draw>", "<power_draw>GPU requires reset</power_draw>")
    (gpu,) = parse_nvidia_smi(text).gpus
    assert gpu.field_errors.get("ecc_mode_current") == "Unknown Error"
    assert gpu.field_errors.get("power_draw_w") == "GPU requires reset"
    assert [f.status for f in _run([gpu], "gpu.ecc.mode")] == [Status.ERROR]
    assert [f.status for f in _run([gpu], "gpu.power")] == [Status.FAIL]


def test_judged_fail_stays_fail_with_error_noted():
    (gpu,) = parse_nvidia_smi(_read(ECC_UNKNOWN)).gpus
    gpu.field_errors["remap_correctable"] = "Unknown Error"
    (f,) = _run([gpu], "gpu.row_remap")  # remap pending in the recording: FAIL, error noted
    assert f.status is Status.FAIL and "Unknown Error" in f.message


def test_every_gpu_check_names_the_fields_it_reads():
    """Each per-GPU check turns an errored field into ERROR: none silently PASSes or SKIPs."""
    from tests.checks.gpu_builders import h100

    reads = {
        "gpu.ecc.mode": "ecc_mode_current", "gpu.ecc.uncorrected": "ecc_uncorrected_volatile",
        "gpu.ecc.corrected": "ecc_corrected_volatile", "gpu.retired_pages": "retired_pages_pending",
        "gpu.row_remap": "remap_pending", "gpu.temperature": "temperature_c",
        "gpu.throttle": "throttle_reasons", "gpu.power": "power_draw_w",
        "gpu.pcie.link": "pcie_width_current", "gpu.pcie.replays": "pcie_replay_count",
        "gpu.nvlink.state": "nvlinks", "gpu.nvlink.errors": "nvlink_counters",
        "gpu.processes": "processes", "gpu.memory_used": "memory_used_mib",
        "gpu.reset_required": "reset_required", "gpu.fabric": "fabric_state",
        "gpu.persistence": "persistence_mode",
    }
    for check, fld in reads.items():
        gpu = h100(0)
        gpu.field_errors = {fld: "Unknown Error"}
        findings = _run([gpu], check)
        assert findings and all(f.status is Status.ERROR for f in findings), (check, findings)


# ------------------------------------------------------------------------------------ NVML


@pytest.mark.parametrize("fn, fld, check", [
    ("nvmlDeviceGetEccMode", "ecc_mode_current", "gpu.ecc.mode"),
    ("nvmlDeviceGetRemappedRows", "remap_pending", "gpu.row_remap"),
    ("nvmlDeviceGetTemperature", "temperature_c", "gpu.temperature"),
    ("nvmlDeviceGetCurrentClocksEventReasons", "throttle_reasons", "gpu.throttle"),
    ("nvmlDeviceGetPersistenceMode", "persistence_mode", "gpu.persistence"),
])
@pytest.mark.parametrize("code, status", [
    ("NVML_ERROR_UNKNOWN", Status.ERROR), ("NVML_ERROR_TIMEOUT", Status.ERROR),
    ("NVML_ERROR_NO_PERMISSION", Status.ERROR), ("NVML_ERROR_IRQ_ISSUE", Status.ERROR),
    ("NVML_ERROR_RESET_REQUIRED", Status.FAIL), ("NVML_ERROR_CORRUPTED_INFOROM", Status.FAIL),
    ("NVML_ERROR_NOT_SUPPORTED", None),
])
def test_nvml_error_codes(fn, fld, check, code, status):
    gpus = h100_node(1)
    gpus[0].errors[fn] = getattr(pynvml, code)
    (gpu,) = probe_gpus(FakeNvml(gpus))
    assert not gpu.lost
    findings = _run([gpu], check)
    if status is None:  # not supported: no error recorded, the check does not ERROR/FAIL
        assert fld not in gpu.field_errors
        assert all(f.status not in (Status.ERROR, Status.FAIL) for f in findings), findings
    else:
        assert fld in gpu.field_errors, gpu.field_errors
        assert findings and all(f.status is status for f in findings), findings


def test_nvml_gpu_is_lost_fails_gpu_lost():
    gpus = h100_node(1)
    gpus[0].errors["nvmlDeviceGetEccMode"] = pynvml.NVML_ERROR_GPU_IS_LOST
    (gpu,) = probe_gpus(FakeNvml(gpus))
    assert gpu.lost
    assert [f.status for f in _run([gpu], "gpu.lost")] == [Status.FAIL]


def test_nvml_field_errors_round_trip_through_json():
    import json

    from healthcheck.core.model import GpuInfo, from_dict
    gpus = h100_node(1)
    gpus[0].errors["nvmlDeviceGetEccMode"] = pynvml.NVML_ERROR_UNKNOWN
    (gpu,) = probe_gpus(FakeNvml(gpus))
    back = from_dict(GpuInfo, json.loads(json.dumps(Snapshot("n", "t", gpus=[gpu]).to_dict()))["gpus"][0])
    assert back.field_errors == gpu.field_errors and "ecc_mode_current" in back.field_errors
