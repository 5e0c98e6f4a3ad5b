"""[burnin] settings: suite presets, precedence config < environment < flags, clear errors."""
from __future__ import annotations

import pytest

from healthcheck.burnin.settings import PRESETS, SettingsError, resolve
from healthcheck.config import ConfigError, loads


def test_suite_presets_then_layers():
    quick = resolve({"suite": "quick"})
    assert quick.gemm_duration_s == PRESETS["quick"]["gemm_duration_s"] and quick.nccl_collectives == ("all_reduce",)
    full = resolve({}, {"HEALTHCHECK_BURNIN_SUITE": "full"})
    assert full.suite == "full" and "alltoall" in full.nccl_collectives and full.dcgm_level == 3
    s = resolve({"suite": "quick", "gemm_duration_s": 5}, {"HEALTHCHECK_BURNIN_GEMM_DURATION_S": "7.5"},
                {"gemm_duration_s": None, "backend": "numpy"})
    assert (s.suite, s.gemm_duration_s, s.backend) == ("quick", 7.5, "numpy")
    assert resolve({}, {}, {"gemm_duration_s": 2.0}).gemm_duration_s == 2.0
    env = resolve({}, {"HEALTHCHECK_BURNIN_PHASES": "gemm,nccl", "HEALTHCHECK_BURNIN_DRAIN": "false",
                       "HEALTHCHECK_BURNIN_LAUNCHER": "mpirun -np {nnodes} --host {nodelist}"})
    assert env.phases == ("gemm", "nccl") and env.drain is False
    assert env.launcher == ("mpirun", "-np", "{nnodes}", "--host", "{nodelist}")


@pytest.mark.parametrize("layer, message", [
    ({"suite": "fast"}, "suite must be one of"),
    ({"phases": ["gemm", "lunch"]}, "unknown lunch"),
    ({"gemm_n": 3}, "out of range"),
    ({"gemm_duration_s": 0}, "out of range"),
    ({"max_drain_fraction": 1.5}, "out of range"),
    ({"drain": "yes please"}, "true or false"),
    ({"nope": 1}, "unknown key 'nope'"),
])
def test_bad_values_are_refused(layer, message):
    with pytest.raises(SettingsError, match=message):
        resolve(layer)


def test_bad_environment_value_names_the_environment():
    with pytest.raises(SettingsError, match="environment: gemm_n must be a number"):
        resolve({}, {"HEALTHCHECK_BURNIN_GEMM_N": "big"})


def test_config_file_burnin_table_is_validated_with_its_line():
    cfg = loads('[burnin]\nsuite = "quick"\nnccl_dir = "/opt/nccl-tests/build"\n', "site.toml")
    assert cfg.burnin == {"suite": "quick", "nccl_dir": "/opt/nccl-tests/build"}
    with pytest.raises(ConfigError) as err:
        loads('[slurm]\n\n[burnin]\nsuite = "quick"\ngemm_n = "big"\n', "site.toml")
    assert "site.toml:5" in str(err.value) and "gemm_n" in str(err.value)
