"""NVML probe: margin temperature, performance state and utilisation (the real pynvml API behind
the fake driver), and the checks fed from the probe."""
from __future__ import annotations

import inspect
import json

import pynvml
import pytest

from healthcheck.checks import registry
from healthcheck.config import default_expectations
from healthcheck.core.model import Snapshot, Status
from healthcheck.probes.nvml import probe_gpus
from tests.fakes.fake_pynvml import FakeNvml, h100_node, old_gpu


def probe(gpus, **kwargs):
    return probe_gpus(nvml=FakeNvml(gpus, **kwargs))


def facts(g):
    return (g.temp_tlimit_margin_c, g.performance_state, g.utilization_gpu_pct)


def test_healthy_h100_values():
    infos = probe(h100_node())
    assert [facts(g) for g in infos] == [(56.0, "P0", 0.0)] * 8
    assert all(g.error is None for g in infos)


def test_busy_hot_gpu_values():
    gpus = h100_node(2)
    gpus[1].margin_temperature, gpus[1].utilization, gpus[1].pstate = -3, (97, 41), pynvml.NVML_PSTATE_0
    infos = probe(gpus)
    assert facts(infos[1]) == (-3.0, "P0", 97.0)
    assert facts(infos[0]) == (56.0, "P0", 0.0)


@pytest.mark.parametrize("pstate, expected", [
    (pynvml.NVML_PSTATE_0, "P0"), (pynvml.NVML_PSTATE_2, "P2"), (pynvml.NVML_PSTATE_8, "P8"),
    (pynvml.NVML_PSTATE_12, "P12"), (pynvml.NVML_PSTATE_15, "P15"), (pynvml.NVML_PSTATE_UNKNOWN, None),
])
def test_performance_states(pstate, expected):
    gpu = h100_node(1)[0]
    gpu.pstate = pstate
    (g,) = probe([gpu])
    assert g.performance_state == expected and g.error is None


def test_not_supported_stays_none_without_error():
    gpu = h100_node(1)[0]
    gpu.unsupported = {"nvmlDeviceGetMarginTemperature", "nvmlDeviceGetPerformanceState",
                       "nvmlDeviceGetUtilizationRates"}
    (g,) = probe([gpu])
    assert facts(g) == (None, None, None)
    assert (g.lost, g.error, g.temperature_c) == (False, None, 33.0)


def test_old_gpu_has_no_margin():
    (g,) = probe([old_gpu()])
    assert facts(g) == (None, "P8", 0.0) and g.error is None


def test_older_pynvml_or_driver_without_margin():
    gpu = h100_node(1)[0]
    (g,) = probe([gpu], missing={"nvmlDeviceGetMarginTemperature"})  # pynvml lacks it
    assert facts(g) == (None, "P0", 0.0) and g.error is None
    gpu.errors = {"nvmlDeviceGetMarginTemperature": pynvml.NVML_ERROR_FUNCTION_NOT_FOUND}  # driver
    (g,) = probe([gpu])
    assert g.temp_tlimit_margin_c is None and g.error is None


def test_other_error_is_noted():
    gpu = h100_node(1)[0]
    gpu.errors = {"nvmlDeviceGetUtilizationRates": pynvml.NVML_ERROR_UNKNOWN}
    (g,) = probe([gpu])
    assert g.utilization_gpu_pct is None and g.performance_state == "P0"
    assert g.error.startswith("nvmlDeviceGetUtilizationRates: ")


def test_gpu_lost_on_utilisation_call():
    gpus = h100_node(2)
    gpus[0].errors = {"nvmlDeviceGetUtilizationRates": pynvml.NVML_ERROR_GPU_IS_LOST}
    infos = probe(gpus)
    assert infos[0].lost and "nvmlDeviceGetUtilizationRates" in infos[0].error
    assert facts(infos[0]) == (None, None, None) and not infos[1].lost


def test_fake_matches_real_signatures_and_structures():
    """The fake returns what the real pynvml returns (struct types, plain ints)."""
    for name in ("nvmlDeviceGetMarginTemperature", "nvmlDeviceGetPerformanceState",
                 "nvmlDeviceGetUtilizationRates"):
        assert list(inspect.signature(getattr(pynvml, name)).parameters) == ["handle"]
    assert [f[0] for f in pynvml.c_nvmlUtilization_t._fields_] == ["gpu", "memory"]
    assert "marginTemperature" in [f[0] for f in pynvml.c_nvmlMarginTemperature_v1_t._fields_]
    fake = FakeNvml(h100_node(1))
    fake.nvmlInit()
    h = fake.nvmlDeviceGetHandleByIndex(0)
    assert isinstance(fake.nvmlDeviceGetUtilizationRates(h), pynvml.c_nvmlUtilization_t)
    assert isinstance(fake.nvmlDeviceGetMarginTemperature(h), int)


def test_round_trip_and_checks_from_probe():
    gpus = h100_node(3)
    gpus[1].margin_temperature = 0  # at the slowdown limit
    gpus[2].utilization, gpus[2].pcie = (88, 10), (3, 5, 16, 16)  # busy at Gen3 of Gen5
    for gpu in gpus:  # as nvidia-smi on R545+: no absolute thresholds, the margin only
        gpu.thresholds = {}
    snap = Snapshot(node="gpu01", taken_at="2024-05-01T00:00:00Z", gpus=probe(gpus), gpu_source="nvml")
    snap = Snapshot.from_dict(json.loads(json.dumps(snap.to_dict())))
    assert [facts(g) for g in snap.gpus] == [(56.0, "P0", 0.0), (0.0, "P0", 0.0), (56.0, "P0", 88.0)]
    specs, exp = registry.load_all(), default_expectations()
    got = {}
    for name in ("gpu.temperature", "gpu.pcie.link"):
        spec = specs[name]
        for f in spec.func(snap, exp, exp.thresholds_for(name, spec.thresholds)):
            got[(name, f.component)] = f.status
    assert got == {
        ("gpu.temperature", "gpu0"): Status.PASS, ("gpu.temperature", "gpu1"): Status.FAIL,
        ("gpu.temperature", "gpu2"): Status.PASS,
        ("gpu.pcie.link", "gpu0"): Status.PASS, ("gpu.pcie.link", "gpu1"): Status.PASS,
        ("gpu.pcie.link", "gpu2"): Status.FAIL,
    }
