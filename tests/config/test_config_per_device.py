"""[class.NAME.ib.per_port] and [class.NAME.gpu_models]: validated with a clear error and its line,
resolved into the node's expectations."""
from __future__ import annotations

import pytest

from healthcheck.config import ConfigError, loads
from healthcheck.core.expectations import GpuModelExpect, IbPortExpect

GOOD = '''
[class.h100]
nodes = "gpu[01-04]"

[class.h100.ib]
ports = 8
[class.h100.ib.per_port]
"mlx5_0:1" = { ca_type = "MT4129", firmware = "28.39.1002", link_layer = "InfiniBand", active = true, rate_gbps = 400 }
"mlx5_8:1" = { ca_type = "MT4125", firmware = "22.38.1002", link_layer = "Ethernet", active = false }

[class.h100.gpu_models]
"NVIDIA H100 80GB HBM3" = { count = 8, nvlinks = 18 }
"NVIDIA L4" = { count = 2 }
'''


def test_per_device_tables_resolve():
    exp = loads(GOOD, "site.toml").expectations_for("gpu02")
    assert exp.ib_per_port == {
        "mlx5_0:1": IbPortExpect("MT4129", "28.39.1002", 400.0, "InfiniBand", True),
        "mlx5_8:1": IbPortExpect("MT4125", "22.38.1002", None, "Ethernet", False)}
    assert exp.gpu_models == {"NVIDIA H100 80GB HBM3": GpuModelExpect(8, 18), "NVIDIA L4": GpuModelExpect(2, None)}
    assert exp.ib_port_count == 8


@pytest.mark.parametrize("line, words", [
    ('"mlx5_0" = { active = true }', 'must be "device:port"'),
    ('"mlx5_0:1" = { speed = 400 }', "unknown key 'speed'"),
    ('"mlx5_0:1" = { rate_gbps = "400" }', "rate_gbps must be a positive number"),
    ('"mlx5_0:1" = { rate_gbps = nan }', "rate_gbps must be a positive number"),
    ('"mlx5_0:1" = { rate_gbps = -1 }', "rate_gbps must be a positive number"),
    ('"mlx5_0:1" = { link_layer = "RoCE" }', 'link_layer must be "InfiniBand" or "Ethernet"'),
    ('"mlx5_0:1" = { active = "yes" }', "active must be true or false"),
    ('"mlx5_0:1" = { firmware = 28 }', "firmware must be a string"),
    ('"mlx5_0:1" = 1', "must be a table"),
])
def test_bad_per_port_entry_is_a_clear_error_with_its_line(line, words):
    text = f'[class.a]\nnodes = "n1"\n[class.a.ib.per_port]\n{line}\n'
    with pytest.raises(ConfigError) as info:
        loads(text, "site.toml")
    assert words in str(info.value) and str(info.value).startswith("site.toml:4:"), str(info.value)


@pytest.mark.parametrize("line, words", [
    ('"NVIDIA L4" = { count = -1 }', "count must be a non-negative integer"),
    ('"NVIDIA L4" = { count = 2, model = "x" }', "unknown key 'model'"),
    ('"NVIDIA L4" = 2', "must be a table"),
])
def test_bad_gpu_model_group_is_a_clear_error(line, words):
    text = f'[class.a]\nnodes = "n1"\n[class.a.gpu_models]\n{line}\n'
    with pytest.raises(ConfigError) as info:
        loads(text, "site.toml")
    assert words in str(info.value), str(info.value)
