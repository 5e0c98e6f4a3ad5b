"""Clock event (throttle) reasons: one table of what each one means in each context. Data, stdlib only.

Two contexts judge the reasons:

- ``idle``: a snapshot taken by ``check``, ``prolog``, ``epilog`` and ``slurm-check`` (and the
  burn-in's own snapshot checks, taken before the load), judged by ``gpu.throttle``;
- ``load``: sampled while the burn-in loads the GPUs, judged by ``burnin.telemetry``.

Rules the table keeps (tests/checks/test_throttle_table.py): every reason NVML names
(``healthcheck.core.model.THROTTLE_REASONS``) has a row, and no reason (hardware brakes above all) is
milder under load than at idle: a brake that is a fault at rest is still one at full power.
The reasoning per row is in docs/gpu-errors.md.
"""
from __future__ import annotations

PASS, WARN, FAIL = "pass", "warn", "fail"
SEVERITY = {PASS: 0, WARN: 1, FAIL: 2}
CONTEXTS = ("idle", "load")

# reason -> (idle, load, why). Reason names as healthcheck.core.model.THROTTLE_REASONS.
TABLE: dict[str, tuple[str, str, str]] = {
    "hw_slowdown": (FAIL, FAIL, "the board's hardware brake (thermal or power-brake signal): "
                                "a cooling, power-supply or board fault at any load"),
    "hw_thermal_slowdown": (FAIL, FAIL, "the GPU is over its hardware thermal limit: cooling fault"),
    "hw_power_brake_slowdown": (FAIL, FAIL, "an external power brake (PSU or chassis signal) is asserted: "
                                            "power-delivery fault"),
    "sw_thermal_slowdown": (WARN, FAIL, "the driver holds the GPU under its max operating temperature; "
                                        "at idle a warm node, under sustained load the cooling cannot "
                                        "carry the rated power"),
    "sw_power_cap": (PASS, PASS, "the power controller holds the configured power limit: normal under "
                                 "load (gpu.power judges the limit itself)"),
    "sync_boost": (PASS, PASS, "clocks synchronised with other GPUs of a sync-boost group: a setting"),
    "gpu_idle": (PASS, PASS, "nothing is running: normal"),
    "applications_clocks_setting": (PASS, PASS, "clocks pinned by the application-clocks setting"),
    "display_clocks_setting": (PASS, PASS, "clocks pinned by the display-clocks setting"),
}


def status(reason: str, context: str) -> str:
    """``pass``/``warn``/``fail`` for ``reason`` in ``context`` (``idle`` or ``load``); an unknown
    reason is ``pass`` (a name a newer driver adds is reported, not judged, until it has a row)."""
    row = TABLE.get(reason)
    return PASS if row is None else row[CONTEXTS.index(context)]


def reasons_at(context: str, level: str) -> list[str]:
    """The reasons whose status in ``context`` is ``level``, in table order."""
    return [r for r in TABLE if status(r, context) == level]
