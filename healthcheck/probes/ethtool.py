"""``ethtool -S <if>`` for the counters a driver keeps only there (issue 32), through the subprocess seam.

Which ports: the physical Ethernet ports (``probes.netdev.ethernet_ports``) whose driver is in
:data:`DRIVERS`: mlx5 keeps its physical-layer counters (``rx_crc_errors_phy``, ``rx_symbol_err_phy``,
``link_down_events_phy``) and its pause-storm counters in ``ethtool -S`` alone, not in sysfs. Other
drivers' ports are judged from sysfs (``statistics/``) and get no process. What is kept of the output:
the counters ``policies.netcounters`` knows for the ``ethtool`` group.

Where: HealthCheckProgram, ``check``, the burn-in (the check that needs it, ``net.ethtool``, does not run
in the prolog or epilog, so a hook before a job never starts ethtool). One deadline for all ports, one
port after the other (ethtool -S answers in milliseconds). No ethtool installed: None (SKIP, saying so).
"""
from __future__ import annotations

import time

from ..core.model import NetEthtool
from ..policies.netcounters import kept

DRIVERS = ("mlx5_core",)
MAX_OUTPUT = 2 * 1024 * 1024  # a 256-channel mlx5 port prints ~10,000 lines
_KEPT = kept("ethtool")


def argv(name: str) -> list[str]:
    return ["ethtool", "-S", name]


def _safe_name(name: str) -> bool:
    return bool(name) and len(name) <= 15 and not name.startswith("-") and all(
        c.isalnum() or c in "_.:-@" for c in name)


def targets(sysfs_root: str = "/sys") -> list[str]:
    """The netdevs whose driver keeps counters only in ethtool."""
    import os

    from .netdev import ethernet_ports

    out = []
    for name, _folder, device in ethernet_ports(sysfs_root):
        try:
            driver = os.path.basename(os.readlink(os.path.join(device, "driver")))
        except OSError:
            continue
        if driver in DRIVERS and _safe_name(name):
            out.append(name)
    return out


def from_output(name: str, text: str) -> NetEthtool:
    """One port's ``ethtool -S`` text -> its kept counters (an error when nothing parses)."""
    from ..parsers import ParseError
    from ..parsers.ethtool import parse_ethtool_stats

    try:
        counters = parse_ethtool_stats(text)
    except ParseError as exc:
        return NetEthtool(name, error=str(exc))
    return NetEthtool(name, {k: v for k, v in counters.items() if k in _KEPT})


def probe_ethtool(sysfs_root: str = "/sys", deadline_s: float = 10.0, run=None, which=None
                  ) -> list[NetEthtool] | None:
    """Every target port's counters; None without ethtool; [] when no port needs it."""
    from ..safeio import subproc

    names = targets(sysfs_root)
    if not names:
        return []
    if (which or subproc.which)("ethtool") is None:
        return None
    end = time.monotonic() + deadline_s
    out = []
    for name in names:
        res, why = subproc.run_until(argv(name), end, "ethtool", run=run, max_output=MAX_OUTPUT)
        if why:
            out.append(NetEthtool(name, error=why))
        elif res.returncode != 0 or not res.stdout.strip():
            out.append(NetEthtool(name, error=f"{' '.join(argv(name))}: {subproc.failure_text(res)}"))
        else:
            out.append(from_output(name, res.stdout))
    return out
