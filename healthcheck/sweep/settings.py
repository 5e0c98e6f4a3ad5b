"""The `[sweep]` table of the config (and the flags of `healthcheck sweep`)."""
from __future__ import annotations

import re
from ..core.struct import record as dataclass, fields, replace
if False:  # annotations only (typing is not imported on the hot path)
    from typing import Any, Mapping  # noqa: F401

_WINDOW = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)-([01]\d|2[0-3]):([0-5]\d)$")
_TIME = re.compile(r"^(\d+-)?\d+(:\d{1,2}){0,2}$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass(frozen=True)
class SweepSettings:
    max_nodes: int = 16             # nodes burned in at once (one sweep)
    partition: str = ""             # only nodes of this partition ("" = any)
    window: str = ""                # "HH:MM-HH:MM" local time when a sweep may start ("" = any time)
    suite: str = "quick"            # burn-in suite of the sweep's jobs
    nice: int = 10000               # sbatch --nice: the sweep yields to every user job
    time_limit: str = "02:00:00"    # sbatch --time of each node's burn-in
    template: str = ""              # sbatch template (default: sbatch_templates/burnin-array.sbatch)
    results_root: str = "/var/lib/healthcheck/sweeps"  # shared with the compute nodes
    reservation: bool = True        # hold the swept nodes in a MAINT reservation while they are tested
    include_ours: bool = True       # re-test nodes we drained (resumed into the reservation first)
    max_drain_fraction: float = 0.1 # blast radius: one check may drain at most this share of the nodes...
    max_drain_nodes: int = 0        # ...and at most this many (0: no absolute cap)
    wait_timeout_s: float = 6 * 3600.0
    poll_s: float = 15.0
    report: bool = True             # write the readiness report at the end
    db_url: str = ""                # history database for the sweep's results ("" = the config's / default)


_LIMITS = {"max_nodes": (1, 100000), "nice": (0, 2147483645), "max_drain_nodes": (0, 100000)}


class SweepSettingsError(ValueError):
    pass


def validate(table: Mapping[str, Any], where: str = "[sweep]") -> dict[str, Any]:
    known = {f.name: f.default for f in fields(SweepSettings)}
    out: dict[str, Any] = {}
    for key, value in table.items():
        if key not in known:
            raise SweepSettingsError(f"{where}: unknown key {key!r} (allowed: {', '.join(known)})")
        default = known[key]
        if isinstance(default, bool):
            if not isinstance(value, bool):
                raise SweepSettingsError(f"{where}: {key} must be true or false")
        elif isinstance(default, int):
            low, high = _LIMITS[key]
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise SweepSettingsError(f"{where}: {key} must be an integer in [{low}, {high}], got {value!r}")
        elif isinstance(default, float):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise SweepSettingsError(f"{where}: {key} must be a number")
            value = float(value)
            if key == "max_drain_fraction" and not 0.0 < value <= 1.0:
                raise SweepSettingsError(f"{where}: max_drain_fraction must be in (0, 1], got {value}")
            if key.endswith("_s") and not 0.0 < value <= 7 * 86400:
                raise SweepSettingsError(f"{where}: {key} must be in (0, 604800] seconds, got {value}")
        elif not isinstance(value, str):
            raise SweepSettingsError(f"{where}: {key} must be a string")
        if key == "window" and value and not _WINDOW.match(value):
            raise SweepSettingsError(f"{where}: window must be HH:MM-HH:MM (e.g. 01:00-05:00), got {value!r}")
        if key == "time_limit" and not _TIME.match(value):
            raise SweepSettingsError(f"{where}: time_limit must be a Slurm time (e.g. 02:00:00), got {value!r}")
        if key == "partition" and value and not _NAME.match(value):
            raise SweepSettingsError(f"{where}: partition {value!r} is not a plain name")
        if key == "db_url" and value and _has_password(value):
            raise SweepSettingsError(f"{where}: db_url must not carry a password (it would be visible to every user); "
                                     "put it in the file named by HEALTHCHECK_DB_PASSWORD_FILE (or in "
                                     "HEALTHCHECK_DB_PASSWORD)")
        if key == "suite" and value not in ("quick", "standard", "full"):
            raise SweepSettingsError(f"{where}: suite must be quick, standard or full, got {value!r}")
        out[key] = value
    return out


def _has_password(url: str) -> bool:
    head = url.split("://", 1)[-1].split("@", 1)
    return "://" in url and len(head) == 2 and ":" in head[0]


def resolve(config_table: Mapping[str, Any] | None, flags: Mapping[str, Any] | None = None) -> SweepSettings:
    merged = validate(config_table or {})
    merged.update(validate({k: v for k, v in (flags or {}).items() if v is not None}, "command line"))
    return replace(SweepSettings(), **merged)


def in_window(window: str, hour: int, minute: int) -> bool:
    """Is HH:MM inside the window? A window may wrap midnight (22:00-04:00)."""
    if not window:
        return True
    m = _WINDOW.match(window)
    start, end = int(m.group(1)) * 60 + int(m.group(2)), int(m.group(3)) * 60 + int(m.group(4))
    now = hour * 60 + minute
    return start <= now < end if start <= end else (now >= start or now < end)
