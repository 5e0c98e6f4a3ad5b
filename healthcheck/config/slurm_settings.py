"""The `[slurm]` table of the expectations file: how the hooks behave on this cluster."""
from __future__ import annotations

from ..core.struct import record as dataclass, fields
if False:  # annotations only (typing is not imported on the hot path)
    from typing import Any  # noqa: F401

PROLOG_ON_FAIL = ("drain", "warn")
PROLOG_MODES = ("full", "fast")
STRAY_ACTIONS = ("kill", "drain", "warn")
BACKENDS = ("scontrol", "pyslurm", "auto")


@dataclass(frozen=True)
class SlurmSettings:
    backend: str = "scontrol"
    scontrol: str = "scontrol"  # resolved to an absolute path from a fixed PATH, or give one
    state_dir: str = "/var/lib/healthcheck"
    spool_dir: str = "/var/lib/healthcheck/spool"
    prolog_budget_s: float = 5.0
    epilog_budget_s: float = 30.0
    slurm_check_budget_s: float = 60.0
    # prolog FAIL: "drain" = drain the node and exit non-zero (Slurm requeues the job);
    # "warn" = record and report only, exit 0 (a soft roll-out)
    prolog_on_fail: str = "drain"
    epilog_on_fail: str = "drain"
    slurm_check_on_fail: str = "drain"
    # a process of the job's user left after the job: kill it, drain the node, or only report
    epilog_stray_processes: str = "kill"
    resume: bool = True  # slurm-check resumes nodes we drained once they pass again
    # "full": the prolog probes and judges its checks before every job. "fast": it starts the job on the
    # word of the last healthy HealthCheckProgram run (at most prolog_gate_max_age_s old), re-reading a
    # few live facts (GPUs on the bus, IB ports active, mounts); anything unproven falls back to "full".
    prolog_mode: str = "full"
    prolog_gate_max_age_s: float = 660.0  # HealthCheckInterval=300 twice, plus a minute
    # The drain cap (every hook): a node is not drained for a check once `drain_cap_nodes` nodes, or
    # `drain_cap_fraction` of the nodes sharing a partition with it if that is more, are already drained
    # by us for that same check within `drain_cap_window_s`; it is recorded as held back instead.
    drain_cap: bool = True
    drain_cap_nodes: int = 2
    drain_cap_fraction: float = 0.1
    drain_cap_window_s: float = 86400.0
    # a [topology] level whose groups are NVLink domains (e.g. "nvlink": [topology.nvlink] nvl01 = "gb[001-018]"):
    # the cap also counts within this node's group, and blames the domain (issue 33); "" = partitions only
    drain_cap_level: str = ""
    # the agent's job sampler (issue 32.6, docs/job-stalls.md): seconds between samples while a job holds
    # the node; 0 turns it off
    job_sample_interval_s: float = 30.0

    def budget(self, context: str) -> float:
        return {"prolog": self.prolog_budget_s, "epilog": self.epilog_budget_s}.get(
            context, self.slurm_check_budget_s)

    def on_fail(self, context: str) -> str:
        return {"prolog": self.prolog_on_fail, "epilog": self.epilog_on_fail}.get(
            context, self.slurm_check_on_fail)


# Numbers that are not budgets in seconds (those are in (0, 3600]).
_RANGES = {"drain_cap_nodes": (0, 100000), "drain_cap_fraction": (0.0, 1.0), "drain_cap_window_s": (60.0, 31 * 86400.0),
           "job_sample_interval_s": (0.0, 3600.0)}

_CHOICES = {"prolog_mode": PROLOG_MODES, "backend": BACKENDS, "prolog_on_fail": PROLOG_ON_FAIL, "epilog_on_fail": PROLOG_ON_FAIL,
            "slurm_check_on_fail": PROLOG_ON_FAIL, "epilog_stray_processes": STRAY_ACTIONS}


def validate(table: dict[str, Any]) -> tuple[dict[str, Any], tuple[str, str] | None]:
    """Check a [slurm] table: (clean values, None) or ({}, (key, problem))."""
    known = {f.name: f for f in fields(SlurmSettings)}
    out = {}
    for key, value in table.items():
        if key not in known:
            return {}, (key, f"unknown key {key!r} in [slurm] (allowed: {', '.join(known)})")
        default = known[key].default
        if key in _CHOICES and value not in _CHOICES[key]:
            return {}, (key, f"{key} must be one of {', '.join(_CHOICES[key])}, got {value!r}")
        if isinstance(default, bool):
            if not isinstance(value, bool):
                return {}, (key, f"{key} must be true or false")
        elif key in _RANGES:
            low, high = _RANGES[key]
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value != value \
                    or not low <= value <= high or (isinstance(default, int) and not isinstance(value, int)):
                kind = "an integer" if isinstance(default, int) else "a number"
                return {}, (key, f"{key} must be {kind} in [{low:g}, {high:g}], got {value!r}")
            value = type(default)(value)
        elif isinstance(default, float):
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 < value <= 3600:
                return {}, (key, f"{key} must be a number of seconds in (0, 3600], got {value!r}")
            value = float(value)
        elif not isinstance(value, str) or not value:
            return {}, (key, f"{key} must be a non-empty string")
        elif key.endswith("_dir") and not value.startswith("/"):
            return {}, (key, f"{key} must be an absolute path, got {value!r}")
        out[key] = value
    return out, None
