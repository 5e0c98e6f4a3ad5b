"""The ``[fleet]`` config section: how the report ranks the fleet (analysis/fleetrank.py). Pure.

    [fleet]
    persist_k = 3            # an outlier / regression / flagged check in k ...
    persist_n = 5            # ... of the node's last n runs is a finding (once is noise)
    peers_per_rack = true    # robust statistics per GPU model and rack when [topology] has a "rack" level
    gemm_dtype = "bf16"      # which burn-in reference judges gemm_tflops (gemm_<dtype>_tflops)
    [fleet.weights]          # per kind of evidence (fleetrank.DEFAULT_WEIGHTS), e.g.
    outlier = 2.0
    [fleet.thermal_limits]   # per SKU of the burn-in references: [slowdown, shutdown, max operating] C
    a100_sxm = [89, 92, 85]

``validate(section)`` returns :class:`FleetSettings` or raises ``ValueError`` naming the key.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from .fleetrank import DEFAULT_WEIGHTS
from .persistence import DEFAULT_K, DEFAULT_N

DEFAULTS: dict[str, Any] = {"persist_k": DEFAULT_K, "persist_n": DEFAULT_N, "peers_per_rack": True,
                            "gemm_dtype": "bf16", "weights": {}, "thermal_limits": {}}
MAX_N = 1000
DTYPES = ("bf16", "fp16", "fp32", "tf32", "fp8", "fp64")


@dataclass(frozen=True)
class FleetSettings:
    persist_k: int = DEFAULT_K
    persist_n: int = DEFAULT_N
    peers_per_rack: bool = True
    gemm_dtype: str = "bf16"
    weights: dict[str, float] = field(default_factory=dict)
    thermal_limits: dict[str, tuple[float, float, float]] = field(default_factory=dict)


def _int(key: str, v: Any, lo: int, hi: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise ValueError(f"fleet.{key}: must be an integer from {lo} to {hi}, not {v!r}")
    return v


def _num(key: str, v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ValueError(f"fleet.{key}: must be a finite number, not {v!r}")
    return float(v)


def validate(section: Any) -> FleetSettings:
    """The ``[fleet]`` table checked and resolved (missing keys: :data:`DEFAULTS`)."""
    if section is None:
        section = {}
    if not isinstance(section, dict):
        raise ValueError(f"[fleet] must be a table, not {type(section).__name__}")
    unknown = set(section) - set(DEFAULTS)
    if unknown:
        raise ValueError(f"fleet: unknown key(s) {', '.join(sorted(unknown))} (known: {', '.join(sorted(DEFAULTS))})")
    s = {**DEFAULTS, **section}
    n = _int("persist_n", s["persist_n"], 1, MAX_N)
    k = _int("persist_k", s["persist_k"], 1, MAX_N)
    if k > n:
        raise ValueError(f"fleet.persist_k ({k}) must not exceed fleet.persist_n ({n}): k of the last n runs")
    if not isinstance(s["peers_per_rack"], bool):
        raise ValueError(f"fleet.peers_per_rack: must be true or false, not {s['peers_per_rack']!r}")
    if s["gemm_dtype"] not in DTYPES:
        raise ValueError(f"fleet.gemm_dtype: must be one of {', '.join(DTYPES)}, not {s['gemm_dtype']!r}")
    if not isinstance(s["weights"], dict):
        raise ValueError("fleet.weights: must be a table {kind = weight}")
    weights = {}
    for kind, w in s["weights"].items():
        if kind not in DEFAULT_WEIGHTS:
            raise ValueError(f"fleet.weights.{kind}: unknown kind (known: {', '.join(sorted(DEFAULT_WEIGHTS))})")
        weights[kind] = _num(f"weights.{kind}", w)
        if weights[kind] < 0:
            raise ValueError(f"fleet.weights.{kind}: must be >= 0, not {w!r}")
    if not isinstance(s["thermal_limits"], dict):
        raise ValueError("fleet.thermal_limits: must be a table {sku = [slowdown, shutdown, max operating]}")
    limits = {}
    for sku, lim in s["thermal_limits"].items():
        if not isinstance(lim, (list, tuple)) or len(lim) != 3:
            raise ValueError(f"fleet.thermal_limits.{sku}: must be [slowdown, shutdown, max operating] in C")
        slow, shut, maxop = (_num(f"thermal_limits.{sku}", x) for x in lim)
        if not 30 <= maxop <= slow <= shut <= 150:
            raise ValueError(f"fleet.thermal_limits.{sku}: need 30 <= max operating <= slowdown <= shutdown "
                             f"<= 150 C, got {list(lim)!r}")
        limits[str(sku)] = (slow, shut, maxop)
    return FleetSettings(k, n, s["peers_per_rack"], s["gemm_dtype"], weights, limits)
