"""GPU PCIe checks from the GPU's own view (NVML / nvidia-smi "GPU Link Info").

Checks: gpu.pcie.link, gpu.pcie.replays. (The kernel's view of every PCIe device, sysfs, is judged
by the PCIe module for all device kinds.)

Facts behind the rules:
- NVML nvmlDeviceGetCurrPcieLinkWidth / ...MaxPcieLinkWidth and ...LinkGeneration: "max" is the
  most the device *and* the system allow, so current below max means the link trained down.
- GPUs lower the link generation when idle to save power (current gen 1 at idle is normal), so the
  generation is judged only when the GPU is not idle; width does not change with load.
- NVML nvmlDeviceGetPcieReplayCounter is cumulative since the driver loaded; DCGM's hardware limits
  recommend at most 8 replays per minute (DCGM_LIMIT_MAX_PCIREPLAY_RATE). A snapshot has a total,
  not a rate: WARN above 100 by default, no FAIL unless configured.

Both read already-probed NVML state: every context.
"""
from __future__ import annotations

from ..expectations import Expectations, PcieExpect
from ..model import Finding, GpuInfo, Snapshot, Status, normalize_pci_bus_id
from .gpu_inventory import ALL_CONTEXTS, each_gpu, not_reported
from .registry import check, finding


def _expectation(exp: Expectations, gpu: GpuInfo) -> PcieExpect | None:
    addr = normalize_pci_bus_id(gpu.pci_bus_id)
    for key, value in exp.pcie_by_address.items():
        if addr is not None and normalize_pci_bus_id(key) == addr:
            return value
    return exp.pcie_by_kind.get("gpu")


@check("gpu.pcie.link", needs=("gpus",), contexts=ALL_CONTEXTS,
       thresholds={"judge_gen_at_idle": False, "gen_action": "warn"})
def pcie_link(snap: Snapshot, exp: Expectations, t: dict) -> list[Finding]:
    """The GPU's PCIe link runs at full width and, under load, at full generation.

    FAIL when the current width is below the device's max ("x8 of x16") or below the expected width
    (``pcie_by_address[addr]`` or ``pcie_by_kind["gpu"]``); FAIL when the max generation is below
    the expected one. The current generation is compared (with max and expectation) only when the
    GPU is known not to be idle ("gpu_idle" not among the active throttle reasons) or threshold
    ``judge_gen_at_idle`` is true: idle GPUs drop to Gen1 to save power, which the message notes.
    A low current generation gives ``gen_action`` (WARN by default; "fail" to drain): without
    utilisation or P-state in the snapshot, "not idle" is a guess (a GeForce at P8 with 0 %
    utilisation was seen reporting SW power cap instead of idle, at Gen1).
    """
    name = "gpu.pcie.link"
    judge_idle = bool(t.get("judge_gen_at_idle"))
    gen_status = Status.FAIL if str(t.get("gen_action")).lower() == "fail" else Status.WARN

    def judge(g: GpuInfo) -> Finding:
        w, wmax = g.pcie_width_current, g.pcie_width_max
        gen, gmax = g.pcie_gen_current, g.pcie_gen_max
        if w is None and gen is None:
            return not_reported(name, g, "PCIe link")
        want = _expectation(exp, g)
        metrics = {"pcie_width": w, "pcie_width_max": wmax, "pcie_gen": gen, "pcie_gen_max": gmax}
        busy = g.throttle_reasons is not None and "gpu_idle" not in g.throttle_reasons
        judge_gen = judge_idle or busy
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
            if judge_gen:
                if gmax is not None and gen < gmax:
                    gen_problems.append(f"Gen{gen} of Gen{gmax} while not idle")
                elif want and want.gen and gen < want.gen:
                    gen_problems.append(f"Gen{gen}, expected Gen{want.gen} while not idle")
            elif (gmax is not None and gen < gmax) or (want and want.gen and gen < want.gen):
                gen_note = " (gen not judged: GPU idle or load unknown, power saving)"
        link = f"Gen{_n(gen)} x{_n(w)}"
        if problems:
            return finding(name, Status.FAIL, f"PCIe {link}: {'; '.join(problems + gen_problems)}",
                           g.component, **metrics)
        if gen_problems:
            return finding(name, gen_status, f"PCIe {link}: {'; '.join(gen_problems)}", g.component,
                           **metrics)
        return finding(name, Status.PASS, f"PCIe {link}{gen_note}", g.component, **metrics)

    return each_gpu(name, snap, judge)


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

    return each_gpu(name, snap, judge)


def _n(value: int | None) -> str:
    return "?" if value is None else str(value)
