"""The GPU fabric's health fields judged, as data (issue 33): what ``gpu.fabric`` makes of each value.

``GpuInfo.fabric_health`` holds the fields NVML's GpuFabricInfo v2/v3 (health mask, health summary) or
``nvidia-smi -q``'s ``Fabric / Health`` lines report, canonical (``healthcheck.core.model``). Each rule:
(field, value, status name, why). A value no rule names passes; a field the driver does not report is
not judged. ``"*"`` stands for any value no other rule of the field names.

Sources: the NVML API reference, ``nvmlGpuFabricInfo_v3_t`` and the ``NVML_GPU_FABRIC_HEALTH_MASK_*`` /
``NVML_GPU_FABRIC_HEALTH_SUMMARY_*`` values (as pynvml 13.615 spells them); the nvidia-smi ``-q``
Fabric section of the corpus captures (GB200/GB300/B200, driver 580; a GB200-class node reading
``State: Completed, Status: Success, Health Summary: Unhealthy``, kubernetes-sigs/dra-driver-nvidia-gpu
issue 626). Plain tuples, no imports: the prolog judges every GPU with it.
"""
from __future__ import annotations

SOURCE = ("NVML nvmlGpuFabricInfo_v3_t health mask and summary (NVML_GPU_FABRIC_HEALTH_*); nvidia-smi -q "
          "'Fabric / Health'")

# (field, value, status, why). FAIL: the GPU's NVLink fabric cannot carry a job as the class expects;
# WARN: the driver is recovering by itself or reports a reduced but working fabric.
FABRIC_HEALTH_RULES: tuple[tuple[str, str, str, str], ...] = (
    ("summary", "unhealthy", "fail", "fabric health summary Unhealthy"),
    ("summary", "limited_capacity", "warn", "fabric health summary Limited Capacity"),
    ("bandwidth", "degraded", "fail", "NVLink fabric bandwidth degraded"),
    ("route_unhealthy", "true", "fail", "a fabric route is unhealthy"),
    ("route_recovery", "true", "warn", "fabric route recovery in progress"),
    ("access_timeout_recovery", "true", "warn", "fabric access timeout recovery in progress"),
    ("incorrect_configuration", "none", "pass", ""),
    ("incorrect_configuration", "*", "fail", "incorrect fabric configuration"),
    ("partition_assigned", "false", "warn", "no fabric partition assigned to the GPU"),
    ("gfm_state", "disconnected", "warn", "the global fabric manager is disconnected"),
)


def judge_health(health: dict[str, str] | None) -> list[tuple[str, str]]:
    """(status name, reason) for every reported field a rule judges fail or warn, in the fields' order."""
    out = []
    for key, value in (health or {}).items():
        exact = [r for r in FABRIC_HEALTH_RULES if r[0] == key and r[1] == value]
        rules = exact or [r for r in FABRIC_HEALTH_RULES if r[0] == key and r[1] == "*"]
        for _, _, status, why in rules:
            if status != "pass":
                out.append((status, f"{why} ({key} {value})"))
    return out
