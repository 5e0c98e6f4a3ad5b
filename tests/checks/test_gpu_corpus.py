"""GPU checks over real recorded outputs (corpus), through the real parsers: the faults SOURCES.md
describes are found, healthy recordings raise nothing. Skips when the corpus is absent."""
from __future__ import annotations

import dataclasses

import pytest

from healthcheck.checks import registry
from healthcheck.config import default_expectations
from healthcheck.core.expectations import Expectations
from healthcheck.core.model import Snapshot, Status
from healthcheck.parsers import ParseError

from tests.conftest import corpus_params

nvidia_smi = pytest.importorskip("healthcheck.parsers.nvidia_smi")
kernel_log = pytest.importorskip("healthcheck.parsers.kernel_log")

GPU_STATE_CHECKS = [name for name in registry.load_all()
                    if name.startswith("gpu.") and name not in ("gpu.xid", "gpu.responsive")]

# file name fragment -> the (check, component, status) findings that must be there; every other
# FAIL is unexpected. Files not listed must have no FAIL at all.
EXPECTED_NVIDIA_SMI = {
    "unable-to-determine-device-handle": {("gpu.lost", "gpu0", Status.FAIL)},
    "remap-pending": {("gpu.row_remap", "gpu0", Status.FAIL)},
    "fabric-h100-sxm-vm-570.195.03-state-in-progress": {("gpu.fabric", "gpu0", Status.FAIL)},
    # the SRAM FAULT: volatile 1 (gpu.ecc.uncorrected) and aggregate 5 > 4 without a driver flag (gpu.ecc.sram)
    "sram-uncorrectable-vol1-agg5": {("gpu.ecc.uncorrected", "gpu0", Status.FAIL), ("gpu.ecc.sram", "gpu0", Status.FAIL)},
    "h800-525.105.17": {("gpu.ecc.mode", "gpu0", Status.FAIL)},  # Hopper with ECC disabled
    "pcie-x1-of-x16": {("gpu.pcie.link", "gpu0", Status.FAIL), ("gpu.pcie.link", "gpu1", Status.FAIL)},
}


def _judge(snap: Snapshot, names, exp: Expectations | None = None):
    specs = registry.load_all()
    exp = exp or default_expectations()
    found = []
    for name in names:
        spec = specs[name]
        found += spec.func(snap, exp, exp.thresholds_for(name, spec.thresholds))
    return found


@pytest.mark.corpus
@pytest.mark.parametrize("path", corpus_params("nvidia-smi", "[qe]*"))
def test_nvidia_smi_recordings(path):
    try:
        result = nvidia_smi.parse_nvidia_smi(path.read_text(encoding="utf-8", errors="replace"))
    except ParseError:
        pytest.skip("not a parsable -q recording")
    snap = Snapshot(node="n", taken_at="2024-01-01T00:00:00Z", gpus=result.gpus)
    findings = _judge(snap, GPU_STATE_CHECKS)
    got = {(f.check, f.component, f.status) for f in findings}
    expected = set().union(*[v for k, v in EXPECTED_NVIDIA_SMI.items() if k in path.name])
    assert expected <= got, sorted(got - {(c, p, s) for c, p, s in got if s is Status.PASS})
    unexpected_fails = {g for g in got if g[2] is Status.FAIL} - expected
    assert not unexpected_fails
    if "healthy" in path.name:
        assert all(f.status in (Status.PASS, Status.SKIP) for f in findings), findings


@pytest.mark.corpus
@pytest.mark.parametrize("path", corpus_params("nvidia-smi", "q-x-geforce-rtx2080ti*"))
def test_idle_geforce_at_gen1_is_not_a_failure(path):
    # P8, 0 % utilisation, SW power cap "Active" but idle "Not Active", PCIe Gen1 of 3: power saving.
    # The utilisation settles it (the clock event reasons alone made gpu1 look "not idle": WARN).
    result = nvidia_smi.parse_nvidia_smi(path.read_text(encoding="utf-8"))
    snap = Snapshot(node="n", taken_at="2024-01-01T00:00:00Z", gpus=result.gpus)
    findings = {f.component: f for f in _judge(snap, ["gpu.pcie.link"])}
    assert {c: f.status for c, f in findings.items()} == {"gpu0": Status.PASS, "gpu1": Status.PASS}
    assert findings["gpu1"].message == ("PCIe Gen1 x16 (gen not judged at 0 % utilisation, P8: "
                                        "idle GPUs lower it to save power)")
    without_load = [dataclasses.replace(g, utilization_gpu_pct=None) for g in result.gpus]
    snap = dataclasses.replace(snap, gpus=without_load)
    assert {f.component: f.status for f in _judge(snap, ["gpu.pcie.link"])} == {
        "gpu0": Status.PASS, "gpu1": Status.WARN}


@pytest.mark.corpus
@pytest.mark.parametrize("path", corpus_params("nvidia-smi", "q-x-tesla-k80x4*"))
def test_busy_k80_at_full_gen_passes_idle_at_gen1_passes(path):
    # GPUs 0-1: P0 at 99 %, Gen3 of 3; GPUs 2-3: P8 at 0 %, Gen1 of 3.
    gpus = nvidia_smi.parse_nvidia_smi(path.read_text(encoding="utf-8")).gpus
    snap = Snapshot(node="n", taken_at="2024-01-01T00:00:00Z", gpus=gpus)
    assert {f.component: f.status for f in _judge(snap, ["gpu.pcie.link"])} == {
        f"gpu{i}": Status.PASS for i in range(4)}
    # The same busy GPU downtrained to Gen1: a real fault.
    slow = dataclasses.replace(gpus[0], pcie_gen_current=1)
    (f,) = _judge(dataclasses.replace(snap, gpus=[slow]), ["gpu.pcie.link"])
    assert f.status is Status.FAIL
    assert f.message == "PCIe Gen1 x16: Gen1 of Gen3 under load (99 % utilisation at P0)"


EXPECTED_XID = {
    "fallen-off-bus": Status.FAIL,
    "rminitadapter-failed": Status.FAIL,
    "xid62": Status.FAIL,
    "xid48-dbe": Status.FAIL,
    # Xid 45 "caused by previous Xid 149": the Xid 149 itself (NVLink5 NETIR, Link Fatal in every row of NVIDIA's
    # decode sheet; Blackwell only) counts, though its own line is not in the excerpt (issue 33; it passed before)
    "xid45-after-nvlink": Status.FAIL,
}


@pytest.mark.corpus
@pytest.mark.parametrize("path", corpus_params("kernel-xid"))
def test_kernel_log_recordings(path):
    events = kernel_log.parse_kernel_log(path.read_text(encoding="utf-8", errors="replace"))
    snap = Snapshot(node="n", taken_at="2024-01-01T00:00:00Z", kernel_events=events)
    findings = _judge(snap, ["gpu.xid"])
    assert findings
    worst = max((f.status for f in findings), key=lambda s: s.severity)
    for fragment, status in EXPECTED_XID.items():
        if fragment in path.name:
            assert worst is status, [f.message for f in findings]
