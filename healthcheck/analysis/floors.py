"""Absolute floors and ceilings: a GPU at 91 C is hot whatever its peers do.

Each GPU/port's last ``n`` samples are compared with limits that do not depend on the fleet:

- **temperature** (``temperature_c``): the rules of the ``gpu.temperature`` check (its default
  thresholds, read from the generated check index): FAIL at or above the slowdown limit or at or
  above shutdown - ``fail_margin_c``; WARN at or above slowdown - ``warn_margin_c`` or at or above
  the max operating temperature. The history keeps the temperature, not the GPU's own limits, so
  the limits come per GPU model from :data:`THERMAL_LIMITS` (override with ``thermal``);
- **burn-in figures** (``gemm_tflops``, ``hbm_copy_gbps``, ``h2d_gbps``, ``d2h_gbps``): below the
  SKU reference's low bound (``healthcheck/data/burnin_references.toml``: ``value * (1 + lower)``,
  the burn-in judges' own FAIL line) is FAIL; GEMM is judged against ``gemm_<dtype>_tflops``;
- **PCIe link** (``pcie_width`` / ``pcie_gen`` against ``pcie_width_max`` / ``pcie_gen_max`` of the
  same run, as the ``gpu.pcie.link`` check records them): a width below the device's max is FAIL
  (the check's rule); the generation is not judged here (idle GPUs lower it to save power).

A node's GPU model comes from ``gpu_model`` (mapping or callable ``node -> GPU name`` as NVML
prints it, e.g. "NVIDIA H100 80GB HBM3"; matched to a SKU by the references' ``match`` strings).
A GPU of no known model is judged only by the PCIe rule.

Returns one row per unit and limit crossed at least once in its last ``n`` samples (``hits``), with
``persistent`` = ``hits >= k`` or crossed in the latest sample (a limit is not noise: the latest
crossing counts at once, older single crossings are reported but not persistent).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from ._frames import SERIES_KEYS, empty
from .persistence import DEFAULT_K, DEFAULT_N, check_kn, last_samples

#: GPU limits in C (slowdown, shutdown, max operating) per SKU key of the burn-in references.
#: H100 SXM: what the gpu.temperature check documents and a recorded `nvidia-smi -q` of an H800
#: (the same SXM5 board) prints: shutdown 92, slowdown 89, max operating 87. H200: assumed equal
#: (the same HGX thermal design); calibrate against `nvidia-smi -q -d TEMPERATURE` of your GPUs.
THERMAL_LIMITS: dict[str, tuple[float, float, float]] = {
    "h100_sxm": (89.0, 92.0, 87.0),
    "h200": (89.0, 92.0, 87.0),
}
#: Burn-in metric name -> reference key (``{dtype}`` filled with the GEMM dtype).
REFERENCE_KEYS = {"gemm_tflops": "gemm_{dtype}_tflops", "hbm_copy_gbps": "hbm_copy_gbps",
                  "h2d_gbps": "h2d_gbps", "d2h_gbps": "d2h_gbps"}
#: (measured, its device maximum) pairs of the gpu.pcie.link check's metrics judged as floors.
PCIE_PAIRS = (("pcie_width", "pcie_width_max"),)
TEMPERATURE = "temperature_c"

FLOOR_COLUMNS = {"node": "object", "check": "object", "component": "object", "name": "object",
                 "value": "float64", "worst": "float64", "limit": "float64", "kind": "object",
                 "severity": "object", "rule": "object", "hits": "int64", "runs": "int64",
                 "latest": "bool", "persistent": "bool"}

ModelSource = Mapping[str, Any] | Callable[[str], Any] | None


def temperature_thresholds() -> dict[str, float]:
    """The gpu.temperature check's default margins (fail_margin_c, warn_margin_c) from the index."""
    from ..checks._index import CHECKS

    t = CHECKS["gpu.temperature"][4]
    return {"fail_margin_c": float(t.get("fail_margin_c") or 0), "warn_margin_c": float(t.get("warn_margin_c") or 0)}


def limits_for_sku(sku: Any, *, dtype: str = "bf16",
                   thermal: Mapping[str, tuple[float, float, float]] | None = None) -> list[tuple]:
    """The limits of one SKU (a ``references.Sku``): tuples (name, kind, limit, severity, rule).
    kind "floor": bad below ``limit``; "ceiling": bad at or above it."""
    out: list[tuple] = []
    if sku is None:
        return out
    margins = temperature_thresholds()
    limits = (thermal or {}).get(sku.name) or THERMAL_LIMITS.get(sku.name)
    if limits is not None:
        slow, shut, maxop = (float(x) for x in limits)
        fail_at = min(slow, shut - margins["fail_margin_c"])
        warn_at = min(slow - margins["warn_margin_c"], maxop)
        out.append((TEMPERATURE, "ceiling", fail_at, "fail",
                    f"gpu.temperature: slowdown {slow:g} C / shutdown {shut:g} C - {margins['fail_margin_c']:g}"))
        out.append((TEMPERATURE, "ceiling", warn_at, "warn",
                    f"gpu.temperature: slowdown {slow:g} C - {margins['warn_margin_c']:g} / max operating {maxop:g} C"))
    for name, key in REFERENCE_KEYS.items():
        ref = sku.get(key.format(dtype=dtype))
        if ref is not None and ref.low_bound is not None:
            out.append((name, "floor", float(ref.low_bound), "fail",
                        f"{sku.name} reference {key.format(dtype=dtype)} {ref.describe()}"))
    return out


def limits_table(models: list[str], references: Any = None, *, dtype: str = "bf16",
                 thermal: Mapping[str, tuple[float, float, float]] | None = None) -> pd.DataFrame:
    """Per GPU model name: its limits (columns model, name, kind, limit, severity, rule)."""
    if references is None:
        from ..policies import references as refs

        references = refs.load()
    rows = []
    for model in models:
        for lim in limits_for_sku(references.sku_for(model), dtype=dtype, thermal=thermal):
            rows.append((model, *lim))
    return pd.DataFrame(rows, columns=["model", "name", "kind", "limit", "severity", "rule"])


def _models(nodes: pd.Series, gpu_model: ModelSource) -> pd.Series:
    if gpu_model is None:
        return pd.Series(None, index=nodes.index, dtype=object)
    get = gpu_model if callable(gpu_model) else gpu_model.get
    resolved = {n: get(n) for n in pd.unique(nodes)}
    return nodes.map({n: (None if m is None else str(m)) for n, m in resolved.items()}).astype(object)


def _summarise(df: pd.DataFrame, k: int) -> pd.DataFrame:
    """``df``: one row per (sample, limit) with a bool ``crossed``; one row per (unit, limit)."""
    keys = SERIES_KEYS + ["kind", "severity", "limit", "rule"]
    df = df.assign(_w=np.where(df["crossed"], df["value"], np.nan))
    g = df.groupby(keys, sort=False, dropna=False)
    out = pd.DataFrame({"hits": g["crossed"].sum().astype("int64"), "runs": g["crossed"].size().astype("int64"),
                        "_latest": g["_lv"].max(), "_wmax": g["_w"].max(), "_wmin": g["_w"].min()}).reset_index()
    last = df[df["pos"].eq(0)].set_index(keys)["value"]
    out = out[out["hits"] > 0]
    out["value"] = last.reindex(pd.MultiIndex.from_frame(out[keys])).to_numpy()
    out["worst"] = np.where(out["kind"].eq("ceiling"), out["_wmax"], out["_wmin"])
    out["latest"] = out["_latest"].astype(bool)
    out["persistent"] = (out["hits"] >= k) | out["latest"]
    return out


def uncrossed_pairs(metrics: pd.DataFrame) -> np.ndarray:
    """Rows of ``metrics`` (node, check, component, name, started_at, value) that the PCIe rule can find
    nothing in: the samples of both names of a :data:`PCIE_PAIRS` pair of a unit (node, check, component)
    whose measured value is below the device's maximum at no instant where both were recorded (the rule of
    :func:`floor_crossings`, over the same samples). A boolean mask over the rows; dropping them leaves
    every crossing :func:`floor_crossings` finds in the rest. At 10,000 nodes they are half the fleet
    ranking's samples (the width of every GPU of every run, and its max) and almost never cross."""
    from ._frames import int_times, series_codes

    drop = np.zeros(len(metrics), dtype=bool)
    if not len(metrics):
        return drop
    names = metrics["name"]
    for cur, mx in PCIE_PAIRS:
        rows = np.flatnonzero((names.eq(cur) | names.eq(mx)).to_numpy(dtype=bool))
        if not len(rows):
            continue
        sub = metrics.iloc[rows]
        unit, _ = series_codes(sub, ["node", "check", "component"], with_keys=False)
        mine = sub["name"].eq(cur).to_numpy(dtype=bool)
        at = int_times(sub["started_at"])
        value = sub["value"].to_numpy(dtype="float64")
        both = pd.DataFrame({"u": unit[mine], "t": at[mine], "v": value[mine]}).merge(
            pd.DataFrame({"u": unit[~mine], "t": at[~mine], "limit": value[~mine]}), on=["u", "t"])
        crossing = np.unique(both["u"].to_numpy()[(both["v"] < both["limit"]).to_numpy()])
        drop[rows[~np.isin(unit, crossing)]] = True
    return drop


def floor_crossings(metrics: pd.DataFrame | None, gpu_model: ModelSource = None, *,
                    references: Any = None, dtype: str = "bf16", k: int = DEFAULT_K, n: int = DEFAULT_N,
                    thermal: Mapping[str, tuple[float, float, float]] | None = None) -> pd.DataFrame:
    """The limits crossed in the last ``n`` samples of each unit (see the module docstring).

    Returns columns: node, check, component, name, value (latest), worst (most extreme crossing),
    limit, kind ("floor"|"ceiling"), severity ("fail"|"warn"; a unit over both temperature lines
    is reported at its worst only), rule (which limit, with its source), hits, runs, latest,
    persistent; sorted by severity, persistent, hits, node.
    """
    check_kn(k, n)
    names = [TEMPERATURE, *REFERENCE_KEYS, *(m for pair in PCIE_PAIRS for m in pair)]
    df = last_samples(metrics, names, n)
    if df.empty:
        return empty(FLOOR_COLUMNS)
    parts = []
    df["model"] = _models(df["node"], gpu_model)
    models = sorted(m for m in df["model"].dropna().unique())
    lim = limits_table(models, references, dtype=dtype, thermal=thermal) if models else None
    if lim is not None and len(lim):
        j = df.merge(lim, on=["model", "name"], how="inner")
        if len(j):
            ceiling = j["kind"].eq("ceiling")
            j["crossed"] = np.where(ceiling, j["value"] >= j["limit"], j["value"] < j["limit"])
            j["_lv"] = j["crossed"] & j["pos"].eq(0)
            parts.append(_summarise(j, k))
    for cur, mx in PCIE_PAIRS:
        a = df[df["name"].eq(cur)]
        b = df[df["name"].eq(mx)][["node", "check", "component", "started_at", "value"]]
        if a.empty or b.empty:
            continue
        # one max per instant (the later sample of two runs at the same instant): each width sample is judged
        # once, not once per max recorded then (several made the rows' count, and a unit's latest, ambiguous)
        b = b.drop_duplicates(["node", "check", "component", "started_at"], keep="last")
        j = a.merge(b.rename(columns={"value": "limit"}), on=["node", "check", "component", "started_at"],
                    how="inner")
        j = j.assign(kind="floor", severity="fail", rule=f"gpu.pcie.link: {cur} below the device's {mx}")
        j["crossed"] = j["value"] < j["limit"]
        j["_lv"] = j["crossed"] & j["pos"].eq(0)
        # the limit is per sample (the device's max): keep the latest one as the unit's limit
        j["limit"] = j.groupby(SERIES_KEYS, sort=False, dropna=False)["limit"].transform("last")
        parts.append(_summarise(j, k))
    parts = [p for p in parts if len(p)]
    if not parts:
        return empty(FLOOR_COLUMNS)
    out = pd.concat(parts, ignore_index=True)
    out["_sev"] = out["severity"].map({"fail": 2, "warn": 1})
    out = out.sort_values(["_sev"], ascending=False, kind="stable")
    out = out.drop_duplicates(SERIES_KEYS, keep="first")  # a unit over the fail line: not also warn
    out = out.sort_values(["_sev", "persistent", "hits", "node", "component"],
                          ascending=[False, False, False, True, True], kind="stable")
    return out[list(FLOOR_COLUMNS)].astype({"hits": "int64", "runs": "int64"}).reset_index(drop=True)
