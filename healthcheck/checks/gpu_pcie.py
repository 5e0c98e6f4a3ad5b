"""GPU PCIe checks from the GPU's own view (NVML / nvidia-smi "GPU Link Info").

Checks: gpu.pcie.link, gpu.pcie.replays. (The kernel's view of every PCIe device, sysfs, is judged
by the PCIe module for all device kinds.)

Facts behind the rules:
- NVML nvmlDeviceGetCurrPcieLinkWidth / ...MaxPcieLinkWidth and ...LinkGeneration: "max" is the
  most the device *and* the system allow, so current below max means the link trained down.
- GPUs lower the link generation when idle to save power (current gen 1 at idle is normal), so the
  generation is judged only when the GPU is not idle; width does not change with load. The load comes
  from NVML nvmlDeviceGetUtilizationRates (nvidia-smi "Utilization / Gpu") and
  nvmlDeviceGetPerformanceState ("Performance State": P0 is maximum performance; an idle H100 with
  persistence mode stays in P0 at 0 %, so P0 alone does not mean busy).
- NVML nvmlDeviceGetPcieReplayCounter is cumulative since the driver loaded; DCGM's hardware limits
  recommend at most 8 replays per minute (DCGM_LIMIT_MAX_PCIREPLAY_RATE). A snapshot has a total,
  not a rate: WARN above 100 by default, no FAIL unless configured.

Both read already-probed NVML state: every context.
"""
from __future__ import annotations

from ..core.expectations import Expectations, PcieExpect
from ..core.model import Finding, GpuInfo, Snapshot, Status, normalize_pci_bus_id
from .gpu_inventory import ALL_CONTEXTS, each_gpu, not_reported
from .registry import check, finding


def _expectation(exp: Expectations, gpu: GpuInfo) -> PcieExpect | None:
    addr = normalize_pci_bus_id(gpu.pci_bus_id)
    for key, value in exp.pcie_by_address.items():
        if addr is not None and normalize_pci_bus_id(key) == addr:
            return value
    return exp.pcie_by_kind.get("gpu")


def _load(g: GpuInfo, busy_pct: float) -> tuple[str, str]:
    """(kind, phrase) of the GPU's load; the phrase follows "Gen1 of Gen5" in messages.

    kind "busy": utilisation >= ``busy_pct``, or P0 with utilisation above 0; "quiet": utilisation
    known, not busy. Without utilisation (older bundles, GPUs that do not report it) the clock event
    reasons give a guess: "gpu_idle" active -> "idle", reported but inactive -> "not_idle"; no
    reasons either -> "unknown".
    """
    util, pstate = g.utilization_gpu_pct, g.performance_state
    if util is not None:
        if util >= busy_pct or (pstate == "P0" and util > 0):
            at = f" at {pstate}" if pstate else ""
            return "busy", f"under load ({util:g} % utilisation{at})"
        return "quiet", f"at {util:g} % utilisation" + (f", {pstate}" if pstate else "")
    if g.throttle_reasons is None:
        return "unknown", "with load unknown"
    if "gpu_idle" in g.throttle_reasons:
        return "idle", "while idle"
    return "not_idle", "while not idle"


@check("gpu.pcie.link", needs=("gpus",), contexts=ALL_CONTEXTS,
       thresholds={"judge_gen_at_idle": False, "gen_action": "warn", "busy_util_pct": 50})
def pcie_link(snap: Snapshot, exp: Expectations, t: dict) -> list[Finding]:
    """The GPU's PCIe link runs at full width and, under load, at full generation.

    FAIL when the current width is below the device's max ("x8 of x16") or below the expected width
    (``pcie_by_address[addr]`` or ``pcie_by_kind["gpu"]``); FAIL when the max generation is below
    the expected one. The current generation is compared with max and expectation according to the
    GPU's load: busy (utilisation >= ``busy_util_pct`` (50), or P0 with utilisation above 0) -> FAIL,
    a link that stays downtrained under load is a real fault; utilisation known but below that
    (idle or light load) -> not judged, PASS with a note, idle GPUs drop to Gen1 to save power;
    utilisation unknown -> judged when the clock event reasons say "not idle" ("gpu_idle" inactive),
    with ``gen_action`` (WARN by default, "fail" to drain: that is a guess, a GeForce at P8 with 0 %
    utilisation was seen reporting SW power cap instead of idle, at Gen1), else not judged.
    Threshold ``judge_gen_at_idle`` true judges the generation at any load (``gen_action`` unless busy).
    """
    name = "gpu.pcie.link"
    judge_idle = bool(t.get("judge_gen_at_idle"))
    gen_status = Status.FAIL if str(t.get("gen_action")).lower() == "fail" else Status.WARN
    busy_pct = float(t.get("busy_util_pct") if t.get("busy_util_pct") is not None else 50)

    def judge(g: GpuInfo) -> Finding:
        w, wmax = g.pcie_width_current, g.pcie_width_max
        gen, gmax = g.pcie_gen_current, g.pcie_gen_max
        if w is None and gen is None:
            return not_reported(name, g, "PCIe link")
        want = _expectation(exp, g)
        metrics = {"pcie_width": w, "pcie_width_max": wmax, "pcie_gen": gen, "pcie_gen_max": gmax}
        load, load_text = _load(g, busy_pct)
        judge_gen = judge_idle or load in ("busy", "not_idle")
        problems = []
        if w is not None and wmax is not None and w < wmax:
            problems.append(f"width x{w} of x{wmax}")
        if w is not None and want and want.width and w < want.width:
            problems.append(f"width x{w}, expected x{want.width}")
        if gmax is not None and want and want.gen and gmax < want.gen:
            problems.append(f"max Gen{gmax}, expected Gen{want.gen}")
        gen_note = ""
        gen_problems = []
        if gen is not None:
            low = []
            if gmax is not None and gen < gmax:
                low.append(f"Gen{gen} of Gen{gmax}")
            elif want and want.gen and gen < want.gen:
                low.append(f"Gen{gen}, expected Gen{want.gen}")
            if low and judge_gen:
                gen_problems = [f"{low[0]} {load_text}"]
            elif low:
                gen_note = f" (gen not judged {load_text}: idle GPUs lower it to save power)"
        link = f"Gen{_n(gen)} x{_n(w)}"
        if problems or (gen_problems and load == "busy"):
            return finding(name, Status.FAIL, f"PCIe {link}: {'; '.join(problems + gen_problems)}",
                           g.component, **metrics)
        if gen_problems:
            return finding(name, gen_status, f"PCIe {link}: {'; '.join(gen_problems)}", g.component,
                           **metrics)
        return finding(name, Status.PASS, f"PCIe {link}{gen_note}", g.component, **metrics)

    return each_gpu(name, snap, judge, ("pcie_gen_current", "pcie_gen_max", "pcie_width_current", "pcie_width_max"))


@check("gpu.pcie.replays", needs=("gpus",), contexts=ALL_CONTEXTS,
       thresholds={"warn": 100, "fail": None})
def pcie_replays(snap: Snapshot, exp: Expectations, t: dict) -> list[Finding]:
    """The GPU's PCIe replay counter (link-level retransmissions since driver load) stays low.

    Above ``fail`` (None: off) -> FAIL; above ``warn`` (100) -> WARN. Replays are corrected, so by
    default this only warns; a growing count points at a marginal riser, cable or slot.
    """
    name = "gpu.pcie.replays"
    warn, fail = t.get("warn"), t.get("fail")

    def judge(g: GpuInfo) -> Finding:
        count = g.pcie_replay_count
        if count is None:
            return not_reported(name, g, "PCIe replay count")
        text = f"PCIe replays: {count}"
        if fail is not None and count > fail:
            return finding(name, Status.FAIL, f"{text} (limit {fail})", g.component,
                           pcie_replay_count=count)
        if warn is not None and count > warn:
            return finding(name, Status.WARN, f"{text} (warn limit {warn})", g.component,
                           pcie_replay_count=count)
        return finding(name, Status.PASS, text, g.component, pcie_replay_count=count)

    return each_gpu(name, snap, judge, ("pcie_replay_count",))


def _n(value: int | None) -> str:
    return "?" if value is None else str(value)
