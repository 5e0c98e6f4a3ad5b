"""Where a node's snapshot comes from: its bundle when the expectations name one (``bundle =
"/srv/bundles/{node}"``), else live probes. Shared by `healthcheck check` and the Slurm hooks."""
from __future__ import annotations

from ..core.expectations import Expectations
from ..core.model import Snapshot


def snapshot_for(node: str, exp: Expectations, started_at: str, sysfs_root: str | None = None,
                 proc_root: str | None = None, deadlines_s: dict[str, float] | None = None,
                 sources: frozenset[str] | None = None, processes: bool = True,
                 kernel_cache: str | None = None, nvml_close: bool = True,
                 net_rdma_only: bool = False, fabricmanager_log: str | None = None) -> Snapshot:
    """Probe ``node`` (this machine) live, or read the bundle its class maps it to; a bundle without
    ``proc/`` gets the host facts (memory, disks, mounts, services) of this machine, probed live.

    ``sources``: the snapshot sources the checks to run need (None: all); live probing skips the rest.
    ``processes``: record the host's process table (no check reads it: the hooks leave it out).
    ``kernel_cache``: a file for the last run's kernel-log events (the hooks; see probes.kernel_cache).
    ``nvml_close``: False in a process that exits once it has answered (the hooks' child): NVML's session
    is left to that exit (probes.nvml.probe_gpus).
    ``fabricmanager_log``: the fabric manager's log, whose NVSwitch errors of this boot join the kernel's
    events (``probes.live.fabricmanager_log_for(context)``: HealthCheckProgram and ``check`` only).

    Raises BundleError when a mapped bundle cannot be read (the caller decides: a usage error at a
    terminal, a checker ERROR in a hook — never a drain)."""
    sysfs_root = sysfs_root or exp.sysfs_root
    proc_root = proc_root or exp.proc_root
    path = exp.bundle_for(node)
    if path:
        from ..bundles.archive import snapshot_from_bundle

        snap = snapshot_from_bundle(path, services=exp.services)
        snap.node = node
        if snap.host is None and "host" not in snap.probe_errors and (sources is None or "host" in sources):
            # a bundle of hardware only (no proc/): the host part is this machine, probed live
            from ..probes.host import probe_host

            snap.host = probe_host(proc_root=proc_root, sys_root=sysfs_root, services=exp.services,
                                   hostname=node)
        return snap
    from ..probes.live import LiveOptions, snapshot_live

    opts = LiveOptions(sysfs_root, proc_root, exp.services, node=node, processes=processes,
                       kernel_cache=kernel_cache, nvml_close=nvml_close, net_rdma_only=net_rdma_only,
                       fabricmanager_log=fabricmanager_log)
    if deadlines_s is not None:
        opts.deadlines_s = dict(deadlines_s)
    return snapshot_live(opts, started_at, sources)
