"""NVLink checks: every link up, error counters quiet.

Checks: gpu.nvlink.state, gpu.nvlink.errors.

Counters are NVML's per-link NVLink error counters (nvmlDeviceGetNvLinkErrorCounter: DL replay,
DL recovery, DL CRC flit, DL CRC data), cumulative since the driver loaded; ``nvidia-smi nvlink -e``
shows the same. CRC errors are corrected by replay, so a healthy link accumulates some: DCGM's
hardware limits note that CRC errors only matter at rates of 100+ per second
(DCGM_LIMIT_MAX_NVLINK_CRC_ERROR), while DCGM treats any replay/recovery error in its health watch
as noteworthy (DCGM_LIMIT_MAX_NVLINK_ERROR 1). A recovery means the link went through retraining:
one is worth a warning. A snapshot has totals, not rates, so the defaults below are deliberately
conservative (WARN only, never FAIL); growth over time is judged by the history.

Both read already-probed NVML state: every context.
"""
from __future__ import annotations

from ..core.expectations import Expectations
from ..core.model import Finding, GpuInfo, Snapshot, Status
from .gpu_inventory import ALL_CONTEXTS, each_gpu, not_reported
from .registry import check, finding


@check("gpu.nvlink.state", needs=("gpus",), contexts=ALL_CONTEXTS)
def nvlink_state(snap: Snapshot, exp: Expectations, t: dict) -> list[Finding]:
    """Every NVLink of every GPU is active, and as many as expected (``nvlinks_per_gpu``, or the GPU's
    model group's ``nvlinks`` in ``gpu_models``).

    FAIL names the inactive links ("NVLink 3, 7 inactive"); FAIL when the active count differs from
    the expectation (an empty link list with links expected FAILs). SKIP when the source does not
    report NVLink (None: PCIe GPUs, text output without links), or reports none and none are expected.
    """
    name = "gpu.nvlink.state"
    if "gpus.nvlink" in snap.probe_errors:
        return [_nvlink_source_error(name, snap)]

    def judge(g: GpuInfo) -> Finding:
        links = g.nvlinks
        expected = exp.nvlinks_per_gpu
        if expected is None and g.name in exp.gpu_models:  # a node of several models: per model
            expected = exp.gpu_models[g.name].nvlinks
        if links is None or (not links and not expected):
            # None: this source cannot tell (cannot judge, even with an expectation).
            return not_reported(name, g, "NVLink")
        active = [link for link in links if link.active]
        down = sorted(link.link for link in links if link.active is False)
        unknown = sorted(link.link for link in links if link.active is None)
        metrics = {"nvlinks_active": len(active), "nvlinks_total": len(links)}
        problems = []
        if down:
            problems.append(f"NVLink {', '.join(map(str, down))} inactive")
        if expected is not None and len(active) != expected:
            problems.append(f"{len(active)} active NVLinks, expected {expected}")
        if problems:
            return finding(name, Status.FAIL,
                           "; ".join(problems) + f" ({len(active)} of {len(links)} active)",
                           g.component, **metrics)
        note = f"; state of link {', '.join(map(str, unknown))} unknown" if unknown else ""
        return finding(name, Status.PASS, f"{len(active)} of {len(links)} NVLinks active{note}",
                       g.component, **metrics)

    return each_gpu(name, snap, judge, ("nvlinks",))


def _nvlink_source_error(name: str, snap: Snapshot) -> Finding:
    """The NVLink recording of a bundle did not parse: cannot judge (not: no NVLink)."""
    err = snap.probe_errors["gpus.nvlink"]
    return finding(name, Status.ERROR, f"cannot judge: NVLink data unreadable: {err.message}")


_COUNTERS = (("crc", "CRC"), ("replay", "replay"), ("recovery", "recovery"))
# NVLink5 (Blackwell, issue 33), shown and judged only where reported: errors left after FEC. Any is worth a
# warning: DCGM's NVLink health watch fails on 1 or more (its test_health.py, NVLink5 error counters).
_NVLINK5_COUNTERS = (("effective", "effective (after FEC)"),)


@check("gpu.nvlink.errors", needs=("gpus",), contexts=ALL_CONTEXTS,
       thresholds={"crc_warn": 10000, "replay_warn": 1000, "recovery_warn": 0,
                   "crc_fail": None, "replay_fail": None, "recovery_fail": None,
                   "effective_warn": 0, "effective_fail": None,
                   "effective_ber_warn": None, "effective_ber_fail": None})
def nvlink_errors(snap: Snapshot, exp: Expectations, t: dict) -> list[Finding]:
    """NVLink error counters, summed over a GPU's links, stay at or below their limits.

    A sum above ``<counter>_fail`` -> FAIL, above ``<counter>_warn`` -> WARN, for counter in crc
    (flit + data), replay, recovery and, on NVLink5 (Blackwell, NVML field values), effective (errors
    left after FEC). Defaults: CRC warn above 10000, replay above 1000, recovery above 0 (any link
    retraining), effective above 0 (DCGM's NVLink health watch fails on any); no FAIL limit (totals
    since driver load, not rates). The worst link's effective bit error rate is judged against
    ``effective_ber_warn`` / ``effective_ber_fail`` (unset by default: NVIDIA publishes no limit; a
    site sets one, e.g. 1e-12); symbol errors (before FEC) are shown, not judged. SKIP when no
    counter is reported.
    """
    name = "gpu.nvlink.errors"
    if "gpus.nvlink" in snap.probe_errors:
        return [_nvlink_source_error(name, snap)]

    def judge(g: GpuInfo) -> Finding:
        links = g.nvlinks or []
        sums = {
            "crc": _sum([link.crc_flit_errors for link in links]
                        + [link.crc_data_errors for link in links]),
            "replay": _sum([link.replay_errors for link in links]),
            "recovery": _sum([link.recovery_errors for link in links]),
            "effective": _sum([link.effective_errors for link in links]),
        }
        if all(v is None for v in sums.values()):
            return not_reported(name, g, "NVLink error counters")
        nvlink5 = [(key, label) for key, label in _NVLINK5_COUNTERS if sums[key] is not None]
        metrics = {f"nvlink_{key}_errors": value for key, value in sums.items()
                   if key in dict(_COUNTERS) or value is not None}
        text = ", ".join(f"{label} {_n(sums[key])}" for key, label in _COUNTERS + tuple(nvlink5))
        symbols = _sum([link.symbol_errors for link in links])
        if symbols is not None:
            metrics["nvlink_symbol_errors"] = symbols
            text += f", symbol (before FEC) {symbols}"
        fails, warns = [], []
        ber = max((link.effective_ber for link in links if link.effective_ber is not None), default=None)
        if ber is not None:
            metrics["nvlink_effective_ber_max"] = ber
            text += f", worst effective BER {ber:.1e}"
            fail, warn = t.get("effective_ber_fail"), t.get("effective_ber_warn")
            if fail is not None and ber > fail:
                fails.append(f"effective BER limit {fail:g}")
            elif warn is not None and ber > warn:
                warns.append(f"effective BER warn limit {warn:g}")
        for key, label in _COUNTERS + tuple(nvlink5):
            value = sums[key]
            if value is None:
                continue
            fail, warn = t.get(f"{key}_fail"), t.get(f"{key}_warn")
            if fail is not None and value > fail:
                fails.append(f"{label} limit {fail}")
            elif warn is not None and value > warn:
                warns.append(f"{label} warn limit {warn}")
        message = f"NVLink errors: {text}"
        if fails:
            return finding(name, Status.FAIL, f"{message} (over {', '.join(fails)})", g.component,
                           **metrics)
        if warns:
            return finding(name, Status.WARN, f"{message} (over {', '.join(warns)})", g.component,
                           **metrics)
        return finding(name, Status.PASS, message, g.component, **metrics)

    return each_gpu(name, snap, judge, ("nvlinks", "nvlink_counters"))


def _sum(values: list[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _n(value: int | None) -> str:
    return "n/a" if value is None else str(value)
