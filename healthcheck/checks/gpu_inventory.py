"""GPU inventory checks: are the GPUs there, answering, initialised and ready for CUDA?

Checks: gpu.count, gpu.lost, gpu.reset_required, gpu.fabric, gpu.persistence.

All of them read state the GPU probe already gathered (NVML / nvidia-smi), so judging costs nothing and
they run in every context, the prolog included. This module also holds the small per-GPU helpers the
other ``gpu_*`` check modules share (:func:`each_gpu`, :data:`ALL_CONTEXTS`).
"""
from __future__ import annotations

if False:  # annotations only (typing is not imported on the hot path)
    from typing import Callable  # noqa: F401

from ..core.expectations import Expectations
from ..core.model import Finding, GpuInfo, Snapshot, Status, is_gpu_fault_error, normalize_pci_bus_id
from . import registry
from .registry import check, finding, present_gpus, skip

# Cheap correctness checks (they only read already-probed NVML state): every context.
ALL_CONTEXTS = registry.FAST_CONTEXTS | {"epilog"}


def each_gpu(name: str, snap: Snapshot, judge: Callable[[GpuInfo], Finding],
             fields: tuple[str, ...] = ()) -> list[Finding]:
    """One finding per responsive GPU; a single SKIP when there is none to judge.

    ``fields``: the GpuInfo fields the judge reads; one the tool answered with an error
    (``GpuInfo.field_errors``) makes the finding ERROR or FAIL (:func:`with_tool_errors`).
    Lost GPUs are left to gpu.lost (see :func:`registry.present_gpus`)."""
    gpus = present_gpus(snap)
    if not gpus:
        why = "no responsive NVIDIA GPU (all lost)" if snap.gpus else "no NVIDIA GPU"
        return skip(name, why)
    return [with_tool_errors(name, g, judge(g), fields) for g in gpus]


READ_ERROR_ADVICE = ("the driver could not read it: rerun the check; if it persists, collect a bundle "
                     "(healthcheck collect), reset the GPU or reboot")
FAULT_ADVICE = "the GPU needs a reset (nvidia-smi -r) or a reboot; RMA if it recurs"


def with_tool_errors(name: str, g: GpuInfo, judged: Finding, fields: tuple[str, ...]) -> Finding:
    """``judged``, made ERROR or FAIL when a field in ``fields`` was answered with a tool error.

    FAIL when the error names a GPU fault (``GPU is lost``, ``GPU requires reset``, ``Corrupted
    infoROM``: :func:`healthcheck.core.model.is_gpu_fault_error`), else ERROR (``Unknown Error`` and every
    other NVML error: the checker could not judge). Never SKIP or PASS; a judged FAIL stays FAIL."""
    errors = [(f, g.field_errors[f]) for f in fields if f in (g.field_errors or {})]
    if not errors:
        return judged
    fault = any(is_gpu_fault_error(text) for _, text in errors)
    status = Status.FAIL if fault else Status.ERROR
    told = "; ".join(f"{field_name} answered {text!r}" for field_name, text in errors)
    if judged.status is Status.FAIL or (judged.status is status and status is Status.ERROR):
        return Finding(name, judged.status, f"{judged.message}; also {told}", judged.component,
                       judged.metrics)
    read = "" if judged.status is Status.SKIP else f" (the rest: {judged.message})"
    advice = FAULT_ADVICE if fault else READ_ERROR_ADVICE
    return Finding(name, status, f"{told}: {advice}{read}", g.component, judged.metrics)


def not_reported(name: str, gpu: GpuInfo, what: str) -> Finding:
    return finding(name, Status.SKIP, f"{what} not reported", gpu.component)


# ----------------------------------------------------------------------------------- gpu.count


@check("gpu.count", needs=("gpus", "gpu_pci_devices"), contexts=ALL_CONTEXTS, handles_missing=True)
def gpu_count(snap: Snapshot, exp: Expectations, t: dict) -> list[Finding]:
    """The driver sees every GPU: as many as expected, as many as the PCI bus shows, of the right model.

    FAIL when ``gpu_count`` is expected and the number of responsive GPUs differs, when GPUs are
    expected but the GPU source gave nothing, when the PCI bus (sysfs, independent of the driver)
    lists NVIDIA GPUs the driver does not report (fell off the bus / not initialised: their
    addresses are named), and when ``gpu_model`` is expected and a GPU's name does not contain it.
    SKIP "no NVIDIA GPU" when there are none and none are expected; SKIP when the GPU probe itself
    failed (gpu.responsive reports that, once).
    """
    name = "gpu.count"
    expected = exp.gpu_count
    pci = sorted({normalize_pci_bus_id(p) for p in (snap.gpu_pci_devices or []) if p})
    gpus = snap.gpus
    if gpus is None and "gpus" in snap.probe_errors:
        return skip(name, "GPU probe failed (judged by gpu.responsive)")
    if gpus is None:
        if expected:
            return [finding(name, Status.FAIL,
                            f"expected {expected} GPUs, but no GPU data could be read", None,
                            count=0, expected=expected)]
        if pci:
            return [finding(name, Status.FAIL,
                            f"PCI bus shows {len(pci)} NVIDIA GPUs ({', '.join(pci)}) "
                            "but the driver reported none", None, count=0, pci_count=len(pci))]
        if expected == 0:
            return [finding(name, Status.PASS, "no GPU, as expected", None, count=0, expected=0)]
        return skip(name, "no NVIDIA GPU")

    if not gpus and not pci and not expected:
        if expected == 0:
            return [finding(name, Status.PASS, "no GPU, as expected", None, count=0, expected=0)]
        return skip(name, "no NVIDIA GPU")
    present = present_gpus(snap)
    count = len(present)
    problems: list[str] = []
    if expected is not None and count != expected:
        lost = len(gpus) - count
        extra = f" ({lost} lost)" if lost else ""
        problems.append(f"driver sees {count} GPUs{extra}, expected {expected}")
    missing = _missing_on_driver(gpus, pci)
    if missing:
        problems.append(missing)

    findings: list[Finding] = []
    metrics = {"count": count, "expected": expected,
               "pci_count": len(pci) if snap.gpu_pci_devices is not None else None}
    if problems:
        findings.append(finding(name, Status.FAIL, "; ".join(problems), None, **metrics))
    else:
        msg = f"{count} GPUs" + (f" (expected {expected})" if expected is not None else "")
        findings.append(finding(name, Status.PASS, msg, None, **metrics))
    if exp.gpu_model:
        want = exp.gpu_model.lower()
        for g in present:
            if g.name is not None and want not in g.name.lower():
                findings.append(finding(name, Status.FAIL,
                                        f"model {g.name!r}, expected {exp.gpu_model!r}", g.component))
    if exp.gpu_models:
        findings.extend(_model_groups(name, present, exp))
    return findings


def _model_groups(name: str, present: list[GpuInfo], exp: Expectations) -> list[Finding]:
    """A node of several GPU models (``gpu_models``): each model's count as recorded, and no GPU of a
    model the node class does not list (a swapped board of the right total count)."""
    seen: dict[str, list[GpuInfo]] = {}
    for g in present:
        seen.setdefault(g.name or "?", []).append(g)
    out = []
    for model, want in sorted(exp.gpu_models.items()):
        have = len(seen.get(model, []))
        if want.count is not None and have != want.count:
            out.append(finding(name, Status.FAIL, f"{have} GPUs of model {model!r}, expected {want.count}", None,
                               model_count=have, model_expected=want.count))
    for model, gpus in sorted(seen.items()):
        if model not in exp.gpu_models:
            out.append(finding(name, Status.FAIL,
                               f"{len(gpus)} GPUs of model {model!r}, which this node class does not list "
                               f"(expected models: {', '.join(sorted(exp.gpu_models))})",
                               ", ".join(g.component for g in gpus[:8])))
    return out


def _missing_on_driver(gpus: list[GpuInfo], pci: list[str]) -> str | None:
    """Name the PCI GPUs the driver does not list at all (lost ones it lists are gpu.lost's)."""
    if not pci:
        return None
    known = {normalize_pci_bus_id(g.pci_bus_id) for g in gpus if g.pci_bus_id}
    if len(known) == len(gpus):  # every driver GPU has an address: compare addresses
        missing = [p for p in pci if p not in known]
        if missing:
            return (f"PCI bus shows {len(pci)} NVIDIA GPUs, driver reports {len(gpus)}; "
                    f"missing: {', '.join(missing)}")
        return None
    if len(pci) > len(gpus):  # addresses unknown (text output without bus ids): compare counts
        return f"PCI bus shows {len(pci)} NVIDIA GPUs, driver reports {len(gpus)}"
    return None


# ------------------------------------------------------------------------------------ gpu.lost


@check("gpu.lost", needs=("gpus",), contexts=ALL_CONTEXTS)
def gpu_lost(snap: Snapshot, exp: Expectations, t: dict) -> list[Finding]:
    """No GPU is lost: every GPU the driver lists answers queries.

    FAIL names the PCI address and the driver's error ("Unable to determine the device handle for
    GPU ...: Unknown Error", "GPU is lost"). A lost GPU needs a reset or a reboot, often an RMA
    (Xid 79, fallen off the bus, usually precedes it).
    """
    name = "gpu.lost"
    if not snap.gpus:
        return skip(name, "no NVIDIA GPU")
    out = []
    for g in snap.gpus:
        if g.lost:
            where = g.pci_bus_id or "unknown PCI address"
            err = f": {g.error}" if g.error else ""
            out.append(finding(name, Status.FAIL, f"GPU lost ({where}){err}", g.component))
        else:
            out.append(finding(name, Status.PASS, "GPU responds", g.component))
    return out


# -------------------------------------------------------------------------- gpu.reset_required


@check("gpu.reset_required", needs=("gpus",), contexts=ALL_CONTEXTS)
def gpu_reset_required(snap: Snapshot, exp: Expectations, t: dict) -> list[Finding]:
    """The driver does not ask for a GPU reset (NVML GPU recovery action / "GPU Reset Status").

    FAIL "GPU needs reset (recovery action: X)". Producers also set ``reset_required`` when a row
    remap is pending; that case is reported by gpu.row_remap alone (SKIP here, so one fault is not
    counted twice) unless the recovery action asks for more than a GPU reset (node_reboot, ...).
    """
    name = "gpu.reset_required"

    def judge(g: GpuInfo) -> Finding:
        if g.reset_required is None:
            return not_reported(name, g, "reset status")
        if g.reset_required and g.remap_pending and (g.recovery_action or "none") in _RESET_ONLY:
            return finding(name, Status.SKIP, "reset needed for the pending row remap "
                           "(judged by gpu.row_remap)", g.component)
        if g.reset_required:
            shown = g.recovery_action if g.recovery_action not in (None, "none") else None
            action = f" (recovery action: {shown})" if shown else ""
            return finding(name, Status.FAIL, f"GPU needs reset{action}", g.component, reset_required=1)
        return finding(name, Status.PASS, "no reset required", g.component, reset_required=0)

    return each_gpu(name, snap, judge, ("reset_required", "recovery_action"))


_RESET_ONLY = ("none", "gpu_reset")


# ---------------------------------------------------------------------------------- gpu.fabric


@check("gpu.fabric", needs=("gpus",), contexts=ALL_CONTEXTS)
def gpu_fabric(snap: Snapshot, exp: Expectations, t: dict) -> list[Finding]:
    """NVSwitch fabric registration finished and the fabric is healthy (Hopper and newer SXM; NVML
    GpuFabricInfo, nvidia-smi -q "Fabric").

    SKIP when the GPU has no fabric (state None / not_supported). FAIL when not_started / in_progress:
    the fabric manager has not registered the GPU and CUDA initialisation fails with error 802
    (cudaErrorSystemNotReady). FAIL when completed with a non-success status. The health fields the
    driver reports (R570+: summary, bandwidth, route recovery / unhealthy, access timeout recovery,
    incorrect configuration, partition, fabric manager state) are judged by the rules of
    ``healthcheck/policies/fabric.py``: FAIL on an unhealthy summary, degraded bandwidth, an unhealthy
    route or an incorrect configuration, WARN on a recovery in progress. Where the class declares an
    NVLink domain (``nvlink_domain``), the GPU must also be in it: a non-zero clique id and a set
    (not all-zero) cluster UUID, both the same on every GPU of the node (FAIL naming the odd ones);
    where the driver reports a clique per type (NVML v4, driver 615+), each type's the node's too.
    """
    name = "gpu.fabric"
    domain = _domain_majority(present_gpus(snap)) if exp.nvlink_domain is not None else None

    def judge(g: GpuInfo) -> Finding:
        state = (g.fabric_state or "").lower() or None
        status = (g.fabric_status or "").strip()
        if state is None and status and status.lower() not in ("success", "n/a"):
            return finding(name, Status.FAIL, f"fabric status {status!r} (state not reported)", g.component,
                           fabric_completed=0)
        if state is None or state == "not_supported":
            if exp.nvlink_domain is not None:
                return finding(name, Status.FAIL, "no GPU fabric reported, but the class declares an NVLink "
                               "domain", g.component, fabric_completed=0)
            return finding(name, Status.SKIP, "no GPU fabric (not supported / not reported)",
                           g.component)
        if state in ("not_started", "in_progress"):
            return finding(name, Status.FAIL,
                           f"fabric manager not done (state {state}): CUDA will fail with error 802",
                           g.component, fabric_completed=0)
        if state != "completed":
            return finding(name, Status.WARN, f"unknown fabric state {g.fabric_state!r}", g.component)
        problems: list[tuple[str, str]] = []
        if status and status.lower() not in ("success", "n/a"):
            problems.append(("fail", f"fabric registration completed with status {status!r}"))
        from ..policies.fabric import judge_health  # noqa: PLC0415 - only where a GPU has a fabric

        problems += judge_health(g.fabric_health)
        if domain is not None:
            problems += _domain_problems(g, domain)
        metrics = {"fabric_completed": 1}
        if g.fabric_health and "summary" in g.fabric_health:
            metrics["fabric_healthy"] = int(g.fabric_health["summary"] == "healthy")
        if not problems:
            text = "fabric registration completed"
            if g.fabric_health:
                text += ", fabric healthy"
            if domain is not None:
                text += f", in the NVLink domain (clique {g.fabric_clique_id}, cluster {g.fabric_cluster_uuid})"
            return finding(name, Status.PASS, text, g.component, **metrics)
        worst_status = Status.FAIL if any(s == "fail" for s, _ in problems) else Status.WARN
        return finding(name, worst_status, "; ".join(why for _, why in problems), g.component, **metrics)

    return each_gpu(name, snap, judge, ("fabric_state", "fabric_status", "fabric_health"))


_ZERO_UUID = "00000000-0000-0000-0000-000000000000"


def _most(values: list) -> object:
    """The value most of them hold (ties: the first by its text), None where none is set."""
    counts: dict = {}
    for v in values:
        if v is not None:
            counts[v] = counts.get(v, 0) + 1
    return max(sorted(counts, key=str), key=lambda v: counts[v]) if counts else None


def _domain_majority(gpus: list[GpuInfo]) -> tuple[int | None, str | None, dict[str, tuple[int, ...]]]:
    """The clique id, cluster UUID and (v4) cliques of each type most of the node's GPUs report (their
    domain); None / absent where none reports one."""
    kinds = sorted({kind for g in gpus for kind in (g.fabric_cliques or {})})
    cliques = {kind: _most([tuple(g.fabric_cliques.get(kind, ())) for g in gpus if g.fabric_cliques is not None])
               for kind in kinds}
    return (_most([g.fabric_clique_id for g in gpus]), _most([g.fabric_cluster_uuid for g in gpus]),
            {kind: ids for kind, ids in cliques.items() if ids is not None})


def _domain_problems(g: GpuInfo, domain: tuple[int | None, str | None, dict[str, tuple[int, ...]]]
                     ) -> list[tuple[str, str]]:
    """The class declares an NVLink domain: the GPU's clique id and cluster UUID are set and the node's;
    where the driver reports cliques per type (v4), each type's cliques are the node's too."""
    clique, cluster, cliques = domain
    out = []
    uuid = (g.fabric_cluster_uuid or "").strip().lower()
    if g.fabric_clique_id is None:
        out.append(("warn", "clique id not reported (NVLink domain not verified)"))
    elif g.fabric_clique_id == 0:
        out.append(("fail", "clique id 0: the GPU is in no NVLink domain (the class declares one)"))
    elif clique is not None and g.fabric_clique_id != clique:
        out.append(("fail", f"clique id {g.fabric_clique_id}, the node's other GPUs {clique}"))
    if g.fabric_cliques is not None:
        for kind, ids in cliques.items():
            mine = tuple(g.fabric_cliques.get(kind, ()))
            if mine != ids:
                out.append(("fail", f"{kind.replace('_', ' ')} clique {_ids(mine)}, the node's other GPUs "
                                    f"{_ids(ids)}"))
    if g.fabric_cluster_uuid is None:
        out.append(("warn", "cluster UUID not reported (NVLink domain not verified)"))
    elif not uuid.replace("-", "").strip("0"):
        out.append(("fail", f"cluster UUID {g.fabric_cluster_uuid} (all zeros): no NVLink domain"))
    elif cluster is not None and uuid != (cluster or "").strip().lower():
        out.append(("fail", f"cluster UUID {g.fabric_cluster_uuid}, the node's other GPUs {cluster}"))
    return out


def _ids(ids: tuple[int, ...]) -> str:
    return "/".join(str(i) for i in ids) if ids else "none"


# ----------------------------------------------------------------------------- gpu.persistence


@check("gpu.persistence", needs=("gpus",), contexts=ALL_CONTEXTS, thresholds={"require": False})
def gpu_persistence(snap: Snapshot, exp: Expectations, t: dict) -> list[Finding]:
    """Persistence mode is on, so the driver state stays loaded between jobs.

    Off -> WARN (job start pays driver initialisation, and NVIDIA recommends persistence mode or
    nvidia-persistenced on compute nodes); FAIL when threshold ``require`` is true.
    """
    name = "gpu.persistence"
    bad = Status.FAIL if t.get("require") else Status.WARN

    def judge(g: GpuInfo) -> Finding:
        if g.persistence_mode is None:
            return not_reported(name, g, "persistence mode")
        if g.persistence_mode:
            return finding(name, Status.PASS, "persistence mode on", g.component, persistence_mode=1)
        return finding(name, bad, "persistence mode off", g.component, persistence_mode=0)

    return each_gpu(name, snap, judge, ("persistence_mode",))
