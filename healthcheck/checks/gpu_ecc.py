"""GPU memory error checks: ECC mode, ECC counters, page retirement (pre-Ampere), row remapping.

Checks: gpu.ecc.mode, gpu.ecc.uncorrected, gpu.ecc.corrected, gpu.ecc.sram, gpu.retired_pages,
gpu.row_remap.

Sources for the defaults:
- NVIDIA "GPU Memory Error Management" (docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt): Ampere and
  newer replace page retirement by row remapping; up to 512 remappings for the frame buffer (vs. 64
  page retirements on older GPUs); a remap needs a GPU reset to take effect; a remapping failure is
  an RMA condition (see its "RMA Policy Thresholds"); uncorrectable errors are contained and the page
  offlined, so historic (aggregate) uncorrectable counts are expected to be repaired by remapping.
- NVIDIA "Dynamic Page Retirement" (docs.nvidia.com/deploy/dynamic-page-retirement): pending
  retirements need a driver reload / GPU reset; retirements cap at 64 pages.
- DCGM's hardware limits (dcgm_gpu_hardware_limits.h): DCGM_LIMIT_MAX_RETIRED_PAGES 60 (later 63,
  "to match the field diag"), DCGM_LIMIT_MAX_RETIRED_PAGES_SOFT_LIMIT 15.
- NVML: nvmlDeviceGetEccMode (current/pending), nvmlDeviceGetTotalEccErrors (volatile = since
  driver load, aggregate = lifetime in the InfoROM), nvmlDeviceGetRemappedRows
  (corrRows, uncRows, isPending, failureOccurred), nvmlDeviceGetSramEccErrorStatus
  (nvmlEccSramErrorStatus_v1_t, Ampere and newer, R550+: uncorrectable parity and SEC-DED counts,
  per-unit buckets, ``bThresholdExceeded`` "if the error threshold of field diag is exceeded";
  nvidia-smi -q prints it as "SRAM Threshold Exceeded").
- The count rule of gpu.ecc.sram for drivers without that flag: "more than 4 aggregate SRAM
  uncorrectable errors is usually a reason to RMA that GPU" (S. Bekman, ML Engineering, "Troubleshooting
  NVIDIA GPUs", section "uncorrectable ECC error encountered"): a practitioner's rule, not NVIDIA's.

All read already-probed NVML state: every context.
"""
from __future__ import annotations

import re

from ..core.expectations import Expectations
from ..core.model import Finding, GpuInfo, Snapshot, Status
from .gpu_inventory import ALL_CONTEXTS, each_gpu, not_reported
from .registry import check, finding

# Datacenter GPU families, for which ECC is the supported configuration (on A100/H100 ECC cannot
# even be disabled). Matched as whole tokens of the product name ("NVIDIA H100 80GB HBM3",
# "NVIDIA A100-SXM4-80GB", "Tesla V100-SXM2-32GB"): "A10" matches "A10" but not "A100"/"A1000".
DATACENTER_MODELS = (
    "B300", "B200", "B100", "GB300", "GB200", "GH200", "H200", "H100", "H800", "H20",
    "A100", "A800", "A40", "A30", "A16", "A10", "A2", "L40S", "L40", "L20", "L4", "T4",
    "V100", "P100", "P40", "K80",
)


def is_datacenter(gpu_name: str | None, models) -> bool:
    if not gpu_name:
        return False
    tokens = [tok for tok in re.split(r"[\s\-_/]+", gpu_name.upper()) if tok]
    for model in models:
        m = str(model).upper()
        for tok in tokens:
            if tok == m or (tok.startswith(m) and not tok[len(m)].isdigit()):
                return True
    return False


# --------------------------------------------------------------------------------- gpu.ecc.mode


@check("gpu.ecc.mode", needs=("gpus",), contexts=ALL_CONTEXTS,
       thresholds={"require_enabled": None, "datacenter_models": list(DATACENTER_MODELS)})
def ecc_mode(snap: Snapshot, exp: Expectations, t: dict) -> list[Finding]:
    """ECC is enabled, and no ECC mode change waits for a reset.

    ECC off -> FAIL when threshold ``require_enabled`` is true, or when it is unset (None, the
    default) and the GPU is a datacenter model (name token in ``datacenter_models``); WARN otherwise.
    Pending mode different from current -> WARN "ECC mode change pending until reset".
    SKIP when the GPU does not report ECC mode (consumer boards: N/A).
    """
    name = "gpu.ecc.mode"
    require = t.get("require_enabled")
    models = t.get("datacenter_models") or ()

    def judge(g: GpuInfo) -> Finding:
        cur, pend = g.ecc_mode_current, g.ecc_mode_pending
        if cur is None:
            return not_reported(name, g, "ECC mode")
        pending_note = ""
        if pend is not None and pend != cur:
            pending_note = f"; change to {'enabled' if pend else 'disabled'} pending until reset"
        if not cur:
            must = require if require is not None else is_datacenter(g.name, models)
            status = Status.FAIL if must else Status.WARN
            return finding(name, status, "ECC disabled" + pending_note, g.component, ecc_enabled=0)
        if pending_note:
            return finding(name, Status.WARN, "ECC enabled" + pending_note.replace(";", ",", 1),
                           g.component, ecc_enabled=1)
        return finding(name, Status.PASS, "ECC enabled", g.component, ecc_enabled=1)

    return each_gpu(name, snap, judge, ("ecc_mode_current", "ecc_mode_pending"))


# ------------------------------------------------------------------------ gpu.ecc.uncorrected


@check("gpu.ecc.uncorrected", needs=("gpus",), contexts=ALL_CONTEXTS,
       thresholds={"max_volatile": 0, "max_aggregate": None})
def ecc_uncorrected(snap: Snapshot, exp: Expectations, t: dict) -> list[Finding]:
    """No uncorrected (double-bit) ECC error since the driver loaded.

    Volatile count above ``max_volatile`` (0) -> FAIL. Aggregate (lifetime) count: above
    ``max_aggregate`` -> FAIL when that threshold is set; by default (None) a non-zero aggregate with
    volatile within its limit is only a WARN, since on Ampere and newer past uncorrectable errors
    are repaired by row remapping (judged by gpu.row_remap).
    """
    name = "gpu.ecc.uncorrected"
    max_vol = t.get("max_volatile")
    max_agg = t.get("max_aggregate")

    def judge(g: GpuInfo) -> Finding:
        vol, agg = g.ecc_uncorrected_volatile, g.ecc_uncorrected_aggregate
        if vol is None and agg is None:
            return not_reported(name, g, "uncorrected ECC counts")
        metrics = {"ecc_uncorrected_volatile": vol, "ecc_uncorrected_aggregate": agg}
        text = f"uncorrected ECC errors: volatile {_n(vol)}, aggregate {_n(agg)}"
        if vol is not None and max_vol is not None and vol > max_vol:
            return finding(name, Status.FAIL, f"{text} (limit {max_vol})", g.component, **metrics)
        if agg is not None and max_agg is not None and agg > max_agg:
            return finding(name, Status.FAIL, f"{text} (aggregate limit {max_agg})", g.component,
                           **metrics)
        if agg and max_agg is None:
            return finding(name, Status.WARN, f"{text} (historic; volatile within limit)",
                           g.component, **metrics)
        return finding(name, Status.PASS, text, g.component, **metrics)

    return each_gpu(name, snap, judge, ("ecc_uncorrected_volatile", "ecc_uncorrected_aggregate"))


def _n(value: int | None) -> str:
    return "n/a" if value is None else str(value)


# -------------------------------------------------------------------------- gpu.ecc.corrected


@check("gpu.ecc.corrected", needs=("gpus",), contexts=ALL_CONTEXTS,
       thresholds={"warn_volatile": 10000, "warn_aggregate": None, "fail_volatile": None})
def ecc_corrected(snap: Snapshot, exp: Expectations, t: dict) -> list[Finding]:
    """Corrected (single-bit) ECC error counts stay below their warning levels.

    Corrected errors are corrected, so they never FAIL by default (``fail_volatile`` None).
    Volatile above ``warn_volatile`` (10000 since driver load) or aggregate above ``warn_aggregate``
    (None: lifetime counts grow with age, not judged) -> WARN. NVIDIA publishes no limit for
    correctable HBM errors (out of scope of its memory error note); the driver's own alarm is
    Xid 92 "high single-bit ECC error rate" (judged by gpu.xid), and rows with repeated
    correctable errors get remapped (gpu.row_remap). Growth over time is judged by the history.
    """
    name = "gpu.ecc.corrected"
    warn_vol, warn_agg = t.get("warn_volatile"), t.get("warn_aggregate")
    fail_vol = t.get("fail_volatile")

    def judge(g: GpuInfo) -> Finding:
        vol, agg = g.ecc_corrected_volatile, g.ecc_corrected_aggregate
        if vol is None and agg is None:
            return not_reported(name, g, "corrected ECC counts")
        metrics = {"ecc_corrected_volatile": vol, "ecc_corrected_aggregate": agg}
        text = f"corrected ECC errors: volatile {_n(vol)}, aggregate {_n(agg)}"
        if vol is not None and fail_vol is not None and vol > fail_vol:
            return finding(name, Status.FAIL, f"{text} (limit {fail_vol})", g.component, **metrics)
        over = []
        if vol is not None and warn_vol is not None and vol > warn_vol:
            over.append(f"volatile warn limit {warn_vol}")
        if agg is not None and warn_agg is not None and agg > warn_agg:
            over.append(f"aggregate warn limit {warn_agg}")
        if over:
            return finding(name, Status.WARN, f"{text} ({', '.join(over)})", g.component, **metrics)
        return finding(name, Status.PASS, text, g.component, **metrics)

    return each_gpu(name, snap, judge, ("ecc_corrected_volatile", "ecc_corrected_aggregate"))


# -------------------------------------------------------------------------- gpu.retired_pages


@check("gpu.retired_pages", needs=("gpus",), contexts=ALL_CONTEXTS,
       thresholds={"fail_total": 60, "warn_total": 15})
def retired_pages(snap: Snapshot, exp: Expectations, t: dict) -> list[Finding]:
    """Page retirement (Kepler..Volta/Turing): nothing pending, total retired pages below the RMA level.

    Pending retirement -> FAIL (takes effect only after a driver reload / GPU reset). SBE+DBE retired
    pages >= ``fail_total`` (60, DCGM_LIMIT_MAX_RETIRED_PAGES; the hardware caps at 64) -> FAIL;
    >= ``warn_total`` (15, DCGM's soft limit) -> WARN; fewer -> PASS with the counts.
    SKIP on GPUs that do not retire pages (Ampere and newer remap rows instead: N/A).
    """
    name = "gpu.retired_pages"
    fail_total, warn_total = t.get("fail_total"), t.get("warn_total")

    def judge(g: GpuInfo) -> Finding:
        sbe, dbe, pending = g.retired_pages_sbe, g.retired_pages_dbe, g.retired_pages_pending
        if sbe is None and dbe is None and pending is None:
            return not_reported(name, g, "page retirement")
        total = (sbe or 0) + (dbe or 0)
        metrics = {"retired_pages_sbe": sbe, "retired_pages_dbe": dbe, "retired_pages_total": total,
                   "retired_pages_pending": None if pending is None else int(pending)}
        text = f"retired pages: {total} (sbe {_n(sbe)}, dbe {_n(dbe)})"
        if pending:
            return finding(name, Status.FAIL, f"page retirement pending, GPU reset required; {text}",
                           g.component, **metrics)
        if fail_total is not None and total >= fail_total:
            return finding(name, Status.FAIL, f"{text} (limit {fail_total})", g.component, **metrics)
        if warn_total is not None and total >= warn_total:
            return finding(name, Status.WARN, f"{text} (warn limit {warn_total})", g.component,
                           **metrics)
        return finding(name, Status.PASS, text, g.component, **metrics)

    return each_gpu(name, snap, judge, ("retired_pages_sbe", "retired_pages_dbe", "retired_pages_pending"))


# ------------------------------------------------------------------------------ gpu.row_remap


@check("gpu.row_remap", needs=("gpus",), contexts=ALL_CONTEXTS,
       thresholds={"max_uncorrectable": 512, "warn_uncorrectable": None})
def row_remap(snap: Snapshot, exp: Expectations, t: dict) -> list[Finding]:
    """Row remapping (Ampere and newer): no remap failure, no remap pending, spare rows left.

    Remapping failure -> FAIL (a bank ran out of spare rows: NVIDIA's RMA condition). The driver's
    unrepairable-memory flag (Blackwell memory repair, NVML ``nvmlDeviceGetUnrepairableMemoryFlag_v1``,
    nvidia-smi "Unrepairable Memory") -> FAIL with RMA advice, whatever the counts. Pending
    remap -> FAIL (takes effect only after a GPU reset; also the reason the GPU asks for a reset,
    which gpu.reset_required does not count again). Rows remapped for uncorrectable errors >=
    ``max_uncorrectable`` (512, the documented remapping capacity of the frame buffer) -> FAIL;
    >= ``warn_uncorrectable`` (None: off) -> WARN. Otherwise PASS with the counts: remapping is the
    designed repair, and the history tracks its growth. SKIP on GPUs without row remapping.
    """
    name = "gpu.row_remap"
    max_unc, warn_unc = t.get("max_uncorrectable"), t.get("warn_uncorrectable")

    def judge(g: GpuInfo) -> Finding:
        corr, unc = g.remap_correctable, g.remap_uncorrectable
        pending, failed = g.remap_pending, g.remap_failure
        if g.unrepairable_memory:  # Blackwell memory repair: the driver can repair no more (issue 33)
            return finding(name, Status.FAIL, UNREPAIRABLE_ADVICE, g.component, unrepairable_memory=1)
        if corr is None and unc is None and pending is None and failed is None:
            return not_reported(name, g, "row remapping")
        metrics = {"remap_correctable": corr, "remap_uncorrectable": unc,
                   "remap_pending": None if pending is None else int(pending),
                   "remap_failure": None if failed is None else int(failed)}
        if g.unrepairable_memory is not None:
            metrics["unrepairable_memory"] = 0
        counts = f"remapped rows: correctable {_n(corr)}, uncorrectable {_n(unc)}"
        if failed:
            return finding(name, Status.FAIL, f"row remapping failure occurred (RMA); {counts}",
                           g.component, **metrics)
        if pending:
            return finding(name, Status.FAIL, f"row remap pending, GPU reset required; {counts}",
                           g.component, **metrics)
        if unc is not None and max_unc is not None and unc >= max_unc:
            return finding(name, Status.FAIL, f"{counts} (limit {max_unc})", g.component, **metrics)
        if unc is not None and warn_unc is not None and unc >= warn_unc:
            return finding(name, Status.WARN, f"{counts} (warn limit {warn_unc})", g.component,
                           **metrics)
        return finding(name, Status.PASS, counts, g.component, **metrics)

    return each_gpu(name, snap, judge, ("remap_correctable", "remap_uncorrectable", "remap_pending", "remap_failure",
                                        "unrepairable_memory"))


UNREPAIRABLE_ADVICE = ("unrepairable memory flagged by the driver (Blackwell memory repair has no spare left: "
                       "NVML UnrepairableMemoryFlag / nvidia-smi 'Unrepairable Memory: Yes'): RMA the GPU "
                       "(collect nvidia-bug-report and a bundle, open an RMA)")


# ------------------------------------------------------------------------------ gpu.ecc.sram

SRAM_RMA_ADVICE = ("RMA the GPU: the SRAM error threshold of NVIDIA's field diagnostic is exceeded "
                   "(run the field diagnostic or dcgmi diag -r 3 and open an RMA with nvidia-bug-report)")


@check("gpu.ecc.sram", needs=("gpus",), contexts=ALL_CONTEXTS,
       thresholds={"max_aggregate_uncorrectable": 4, "fail_over_count_with_flag": False},
       fails_by_default=True,
       fails_on="the driver's SRAM Threshold Exceeded flag (RMA), or more than max_aggregate_uncorrectable (4) "
                "aggregate uncorrectable SRAM errors where the driver reports no flag")
def ecc_sram(snap: Snapshot, exp: Expectations, t: dict) -> list[Finding]:
    """On-chip SRAM (L2, SM register files and caches, microcontrollers): the driver's RMA flag and the
    lifetime count of uncorrectable SRAM errors.

    "SRAM Threshold Exceeded" (NVML ``bThresholdExceeded``, R550+) -> FAIL with the RMA advice, even
    after a driver reload or GPU reset (the flag lives in the InfoROM). Where the driver does not
    report the flag (R535/R545: one "SRAM Uncorrectable" count), an aggregate count above
    ``max_aggregate_uncorrectable`` (4: a practitioner's RMA rule, see the module's sources) -> FAIL;
    where it reports the flag as No, such a count is a WARN (``fail_over_count_with_flag`` true makes
    it FAIL). Otherwise PASS with the counts (parity / SEC-DED split and the units, where reported);
    volatile uncorrectable errors are judged by gpu.ecc.uncorrected (a GPU reset clears them).
    SKIP when no SRAM figure is reported (pre-Ampere GPUs, consumer boards).
    """
    name = "gpu.ecc.sram"
    limit = t.get("max_aggregate_uncorrectable")
    fail_with_flag = bool(t.get("fail_over_count_with_flag"))

    def judge(g: GpuInfo) -> Finding:
        vol, agg, flag = g.sram_uncorrectable_volatile, g.sram_uncorrectable_aggregate, g.sram_threshold_exceeded
        if vol is None and agg is None and flag is None:
            return not_reported(name, g, "SRAM ECC status")
        metrics = {"sram_uncorrectable_volatile": vol, "sram_uncorrectable_aggregate": agg,
                   "sram_parity_aggregate": g.sram_parity_aggregate,
                   "sram_secded_aggregate": g.sram_secded_aggregate,
                   "sram_threshold_exceeded": None if flag is None else int(flag)}
        text = _sram_text(g)
        if flag:
            return finding(name, Status.FAIL, f"SRAM error threshold exceeded; {text}: {SRAM_RMA_ADVICE}",
                           g.component, **metrics)
        if agg is not None and limit is not None and agg > limit:
            rule = f"more than {limit} aggregate uncorrectable SRAM errors"
            if flag is None or fail_with_flag:
                why = " (the driver reports no SRAM threshold flag: confirm with the field diagnostic)" \
                    if flag is None else ""
                return finding(name, Status.FAIL, f"{text} ({rule}): RMA the GPU{why}", g.component, **metrics)
            return finding(name, Status.WARN, f"{text} ({rule}, though the driver's SRAM threshold is not "
                           "exceeded): watch its growth", g.component, **metrics)
        return finding(name, Status.PASS, text, g.component, **metrics)

    return each_gpu(name, snap, judge, ("sram_uncorrectable_volatile", "sram_uncorrectable_aggregate",
                                        "sram_parity_volatile", "sram_parity_aggregate", "sram_secded_volatile",
                                        "sram_secded_aggregate", "sram_threshold_exceeded"))


def _sram_text(g: GpuInfo) -> str:
    parts = [f"uncorrectable SRAM errors: volatile {_n(g.sram_uncorrectable_volatile)}, "
             f"aggregate {_n(g.sram_uncorrectable_aggregate)}"]
    if g.sram_parity_aggregate is not None or g.sram_secded_aggregate is not None:
        parts.append(f"aggregate parity {_n(g.sram_parity_aggregate)}, SEC-DED {_n(g.sram_secded_aggregate)}")
    units = {k: v for k, v in (g.sram_sources or {}).items() if v}
    if units:
        parts.append("in " + ", ".join(f"{k} {v}" for k, v in sorted(units.items())))
    return "; ".join(parts)
