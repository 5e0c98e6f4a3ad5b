"""The [fleet] section (analysis/fleetsettings.py): defaults, and a clear error for every bad value."""
from __future__ import annotations

import pytest

from healthcheck.analysis.fleetsettings import FleetSettings, validate


def test_defaults_and_a_full_section():
    assert validate(None) == validate({}) == FleetSettings()
    s = validate({"persist_k": 2, "persist_n": 4, "peers_per_rack": False, "gemm_dtype": "fp16",
                  "weights": {"outlier": 1}, "thermal_limits": {"a100_sxm": [89, 92, 85]}})
    assert (s.persist_k, s.persist_n, s.peers_per_rack, s.gemm_dtype) == (2, 4, False, "fp16")
    assert s.weights == {"outlier": 1.0} and s.thermal_limits == {"a100_sxm": (89.0, 92.0, 85.0)}


@pytest.mark.parametrize("section, words", [
    ([], "must be a table"),
    ({"persist": 3}, "unknown key"),
    ({"persist_k": 6}, "must not exceed"),
    ({"persist_n": 0}, "persist_n: must be an integer"),
    ({"persist_k": True}, "persist_k: must be an integer"),
    ({"peers_per_rack": "yes"}, "true or false"),
    ({"gemm_dtype": "int4"}, "gemm_dtype"),
    ({"weights": {"outliers": 1}}, "weights.outliers: unknown kind"),
    ({"weights": {"outlier": float("nan")}}, "finite"),
    ({"weights": {"outlier": -1}}, ">= 0"),
    ({"thermal_limits": {"x": [89, 92]}}, "slowdown, shutdown, max operating"),
    ({"thermal_limits": {"x": [95, 92, 85]}}, "max operating <= slowdown <= shutdown"),
])
def test_bad_values_are_named(section, words):
    with pytest.raises(ValueError, match=words):
        validate(section)
