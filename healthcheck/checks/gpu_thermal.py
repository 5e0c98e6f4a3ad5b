"""GPU thermal and power checks: temperature vs. the GPU's own limits, throttle reasons, power.

Checks: gpu.temperature, gpu.throttle, gpu.power.

Limits come from the GPU itself (NVML nvmlDeviceGetTemperatureThreshold: SHUTDOWN, SLOWDOWN,
GPU_MAX, MEM_MAX; e.g. H100 SXM: shutdown 92 C, slowdown 89 C, max operating 87 C, memory 95 C).
Newer drivers on Hopper print "T.Limit" temperatures instead: offsets from the limit (shutdown -8,
slowdown -2, max operating 0). A limit below ``min_plausible_limit_c`` (30 C) is therefore treated as
not reported rather than compared with an absolute temperature. Those drivers report the headroom
instead ("GPU T.Limit Temp", NVML nvmlDeviceGetMarginTemperature: degrees below the nearest slowdown
threshold), which is judged when no absolute slowdown limit is known.

Throttle reasons are NVML's clock event reasons (nvmlClocksEventReason*), judged by the one table
of :mod:`healthcheck.policies.throttle` (its ``idle`` column here; the burn-in's ``burnin.telemetry`` uses its
``load`` column): HW slowdown (with its thermal and power-brake sub-reasons) means the board protects
itself (overheating, failing power supply or cooling: FAIL); SW thermal slowdown means the driver
keeps the GPU under its max operating temperature (WARN at idle); SW power cap is normal under load
(PASS unless configured); idle, application clock settings and sync boost are normal.

All read already-probed NVML state: every context.
"""
from __future__ import annotations

from ..core.expectations import Expectations
from ..policies import throttle
from ..core.model import Finding, GpuInfo, Snapshot, Status
from .gpu_inventory import ALL_CONTEXTS, each_gpu, not_reported
from .registry import check, finding


def _limit(value: float | None, minimum: float) -> float | None:
    return value if value is not None and value >= minimum else None


@check("gpu.temperature", needs=("gpus",), contexts=ALL_CONTEXTS,
       thresholds={"fail_margin_c": 2, "warn_margin_c": 5, "max_c": None,
                   "min_plausible_limit_c": 30, "tlimit_fail_margin_c": 0, "mem_max_c": 95})
def gpu_temperature(snap: Snapshot, exp: Expectations, t: dict) -> list[Finding]:
    """GPU and memory temperatures stay clear of the GPU's own slowdown and shutdown limits.

    GPU: FAIL at or above the slowdown limit, at or above shutdown - ``fail_margin_c`` (2; matters
    when no slowdown limit is reported), or at or above ``max_c`` (absolute override, None: off);
    WARN at or above slowdown - ``warn_margin_c`` (5) or at or above the max operating temperature.
    When no absolute slowdown limit is reported (Hopper and newer drivers print T.Limit offsets) but
    the T.Limit margin is (degrees below the slowdown limit): FAIL at a margin of
    ``tlimit_fail_margin_c`` (0: at or over the limit) or less, WARN at ``warn_margin_c`` or less.
    Memory (HBM): FAIL at or above its max operating temperature, WARN within ``warn_margin_c`` of
    it. Where the GPU reports a memory temperature but no absolute memory limit (Hopper on R545+
    prints "Memory Max Operating T.Limit Temp : 0 C", an offset), the limit is ``mem_max_c`` (95 C:
    the absolute "Memory Max Operating Temp" H100/H800 print on R525 and NVML's MEM_MAX threshold on
    H100; None: memory not judged without the GPU's own limit).
    SKIP when neither temperature nor margin is reported.
    """
    name = "gpu.temperature"
    fail_margin = float(t.get("fail_margin_c") or 0)
    warn_margin = float(t.get("warn_margin_c") or 0)
    max_c = t.get("max_c")
    plausible = float(t.get("min_plausible_limit_c") or 0)
    tlimit_fail = float(t.get("tlimit_fail_margin_c") or 0)
    mem_default = t.get("mem_max_c")

    def judge(g: GpuInfo) -> Finding:
        temp, mem, margin = g.temperature_c, g.mem_temperature_c, g.temp_tlimit_margin_c
        if temp is None and mem is None and margin is None:
            return not_reported(name, g, "temperature")
        slow = _limit(g.temp_slowdown_c, plausible)
        shut = _limit(g.temp_shutdown_c, plausible)
        maxop = _limit(g.temp_max_operating_c, plausible)
        mem_max = _limit(g.mem_temp_max_c, plausible)
        mem_limit_note = ""
        if mem_max is None and mem is not None and mem_default is not None:
            mem_max, mem_limit_note = float(mem_default), " (default HBM limit: the GPU reports none)"
        metrics = {"temperature_c": temp, "mem_temperature_c": mem, "temp_tlimit_margin_c": margin}
        by_margin = slow is None and margin is not None
        fails, warns = [], []
        if by_margin and margin <= tlimit_fail:
            fails.append(f"GPU T.Limit margin {margin:g} C: at or over the slowdown limit")
        elif by_margin and margin <= warn_margin:
            warns.append(f"GPU T.Limit margin {margin:g} C: within {warn_margin:g} C of slowdown")
        if temp is not None:
            if max_c is not None and temp >= max_c:
                fails.append(f"GPU {temp:g} C >= limit {max_c:g} C")
            if slow is not None and temp >= slow:
                fails.append(f"GPU {temp:g} C >= slowdown {slow:g} C")
            elif shut is not None and temp >= shut - fail_margin:
                fails.append(f"GPU {temp:g} C within {fail_margin:g} C of shutdown {shut:g} C")
            elif slow is not None and temp >= slow - warn_margin:
                warns.append(f"GPU {temp:g} C within {warn_margin:g} C of slowdown {slow:g} C")
            elif maxop is not None and temp >= maxop:
                warns.append(f"GPU {temp:g} C >= max operating {maxop:g} C")
        if mem is not None and mem_max is not None:
            if mem >= mem_max:
                fails.append(f"memory {mem:g} C >= max {mem_max:g} C{mem_limit_note}")
            elif mem >= mem_max - warn_margin:
                warns.append(f"memory {mem:g} C within {warn_margin:g} C of max {mem_max:g} C{mem_limit_note}")
        if fails:
            return finding(name, Status.FAIL, "; ".join(fails + warns), g.component, **metrics)
        if warns:
            return finding(name, Status.WARN, "; ".join(warns), g.component, **metrics)
        parts = []
        if temp is not None or by_margin:
            limit = (f" (slowdown {slow:g} C)" if slow is not None
                     else f" (T.Limit margin {margin:g} C)" if by_margin else "")
            parts.append(("GPU" if temp is None else f"GPU {temp:g} C") + limit)
        if mem is not None:
            shown = mem_max is not None and not mem_limit_note  # the GPU's own limit, not the default
            parts.append(f"memory {mem:g} C" + (f" (max {mem_max:g} C)" if shown else ""))
        return finding(name, Status.PASS, ", ".join(parts), g.component, **metrics)

    return each_gpu(name, snap, judge, ("temperature_c", "mem_temperature_c", "temp_tlimit_margin_c", "temp_slowdown_c",
                                    "temp_shutdown_c", "temp_max_operating_c", "mem_temp_max_c"))


@check("gpu.throttle", needs=("gpus",), contexts=ALL_CONTEXTS,
       thresholds={"fail_reasons": throttle.reasons_at("idle", throttle.FAIL),
                   "warn_reasons": throttle.reasons_at("idle", throttle.WARN),
                   "sw_power_cap": throttle.status("sw_power_cap", "idle")})
def gpu_throttle(snap: Snapshot, exp: Expectations, t: dict) -> list[Finding]:
    """No clock slowdown that signals a cooling or power problem is active (the idle column of the
    one throttle table, docs/gpu-errors.md; the burn-in judges the same reasons under load).

    A reason in ``fail_reasons`` (HW slowdown, HW thermal slowdown, HW power brake) -> FAIL; in
    ``warn_reasons`` (SW thermal slowdown) -> WARN; ``sw_power_cap`` -> PASS unless threshold
    ``sw_power_cap`` is "warn" or "fail" (capping at the power limit under load is normal); idle,
    application clocks, sync boost and display clocks -> PASS. SKIP when reasons are not reported;
    ERROR when the driver answered with an error.
    """
    name = "gpu.throttle"
    fail_set = set(t.get("fail_reasons") or ())
    warn_set = set(t.get("warn_reasons") or ())
    cap_action = str(t.get("sw_power_cap") or "pass").lower()
    if cap_action == "fail":
        fail_set.add("sw_power_cap")
    elif cap_action == "warn":
        warn_set.add("sw_power_cap")

    def judge(g: GpuInfo) -> Finding:
        reasons = g.throttle_reasons
        if reasons is None:
            return not_reported(name, g, "clock event reasons")
        failing = [r for r in reasons if r in fail_set]
        warning = [r for r in reasons if r in warn_set and r not in fail_set]
        metrics = {"throttle_fail_reasons": len(failing), "throttle_warn_reasons": len(warning)}
        if failing:
            return finding(name, Status.FAIL, f"clock slowdown active: {', '.join(failing + warning)}",
                           g.component, **metrics)
        if warning:
            return finding(name, Status.WARN, f"clock slowdown active: {', '.join(warning)}",
                           g.component, **metrics)
        active = ", ".join(reasons) if reasons else "none"
        return finding(name, Status.PASS, f"clock event reasons: {active}", g.component, **metrics)

    return each_gpu(name, snap, judge, ("throttle_reasons",))


@check("gpu.power", needs=("gpus",), contexts=ALL_CONTEXTS,
       thresholds={"expected_limit_w": None, "min_limit_fraction": 0.9,
                   "max_draw_fraction": 1.05, "low_limit_action": "warn"})
def gpu_power(snap: Snapshot, exp: Expectations, t: dict) -> list[Finding]:
    """The power limit is where it should be and the draw does not exceed it.

    When ``expected_limit_w`` is set (e.g. 700 for H100 SXM): a limit below ``min_limit_fraction``
    (0.9) of it -> WARN (``low_limit_action`` "fail" makes it FAIL): someone capped the GPU and jobs
    run slower. Always: draw above the limit x ``max_draw_fraction`` (1.05) -> WARN (the power
    controller is not holding the limit, or the reading is wrong). SKIP when neither is reported.
    """
    name = "gpu.power"
    expected = t.get("expected_limit_w")
    min_frac = float(t.get("min_limit_fraction") or 0)
    max_frac = float(t.get("max_draw_fraction") or 0)
    low_status = Status.FAIL if str(t.get("low_limit_action")).lower() == "fail" else Status.WARN

    def judge(g: GpuInfo) -> Finding:
        draw, limit = g.power_draw_w, g.power_limit_w
        if draw is None and limit is None:
            return not_reported(name, g, "power")
        metrics = {"power_draw_w": draw, "power_limit_w": limit}
        text = f"power {_w(draw)} of limit {_w(limit)}"
        if expected is not None and limit is not None and limit < float(expected) * min_frac:
            return finding(name, low_status,
                           f"power limit {limit:g} W below {min_frac:g} x expected "
                           f"{float(expected):g} W",
                           g.component, **metrics)
        if draw is not None and limit and max_frac and draw > limit * max_frac:
            return finding(name, Status.WARN, f"{text}: draw above {max_frac:g} x limit",
                           g.component, **metrics)
        return finding(name, Status.PASS, text, g.component, **metrics)

    return each_gpu(name, snap, judge, ("power_draw_w", "power_limit_w"))


def _w(value: float | None) -> str:
    return "n/a" if value is None else f"{value:g} W"
