"""Host checks (CPU, memory, swap, mounts, disk, load, services) and installed software versions.

Pure: judge ``snapshot.host`` / ``snapshot.versions`` against the expectations. One finding per
component ("cpu", "memory", a mount point, a service name, a version key).
"""
from __future__ import annotations

from ..core.expectations import Expectations
from ..core.model import Finding, HostInfo, Mount, Snapshot, Status
from .registry import CONTEXTS, check, finding, skip

GIB = 1024 ** 3
KIB_PER_GIB = 1024 ** 2
_MOUNT_FAULTS = ("hung", "stale")


def _visible_mounts(host: HostInfo) -> dict[str, Mount]:
    """Mount point -> the mount a path lookup sees (the last of a stacked mount point)."""
    return {m.mountpoint: m for m in host.mounts or []}


# ------------------------------------------------------------------------------------------- CPU


@check("host.cpu", needs=("host",), fails_by_default=False,
       fails_on="cpu = {sockets, cores, threads} (written by `config generate`): FAIL when they differ "
                "(SMT or cores offline, a dead socket)")
def cpu(snap: Snapshot, exp: Expectations, t: dict) -> list[Finding]:
    """CPU sockets, physical cores and online threads match the node class (a node booted with SMT or
    cores offline, or a dead socket, shows fewer)."""
    host = snap.host
    figures = {"sockets": host.cpu_sockets, "cores": host.cpu_cores, "threads": host.cpu_threads}
    wanted = {"sockets": exp.cpu_sockets, "cores": exp.cpu_cores, "threads": exp.cpu_threads}
    shown = ", ".join(f"{v} {k}" for k, v in figures.items() if v is not None) or "topology unknown"
    wrong = [f"{figures[k]} {k} (expected {w})" for k, w in wanted.items()
             if w is not None and figures[k] is not None and figures[k] != w]
    unknown = [k for k, w in wanted.items() if w is not None and figures[k] is None]
    metrics = {f"cpu_{k}": v for k, v in figures.items()}
    if wrong:
        return [finding("host.cpu", Status.FAIL, "; ".join(wrong), "cpu", **metrics)]
    if unknown:
        return [finding("host.cpu", Status.ERROR, f"cannot read CPU {', '.join(unknown)}", "cpu",
                        **metrics)]
    model = f" ({host.cpu_model})" if host.cpu_model else ""
    return [finding("host.cpu", Status.PASS, shown + model, "cpu", **metrics)]


# ---------------------------------------------------------------------------------------- memory


@check("host.memory", needs=("host",), contexts=CONTEXTS,
       thresholds={"tolerance": 0.03, "min_available_fraction": 0.05}, fails_by_default=False,
       fails_on="mem_total_gib (written by `config generate`): FAIL when MemTotal is more than tolerance "
                "below it (a lost DIMM); without it low available memory only WARNs")
def memory(snap: Snapshot, exp: Expectations, t: dict) -> list[Finding]:
    """MemTotal is not below the node class's (within a tolerance: a lost DIMM shows as a drop of a few
    per cent) and enough memory is available."""
    host = snap.host
    if host.mem_total_kib is None:
        return [finding("host.memory", Status.ERROR, "MemTotal unreadable", "memory")]
    total_gib = host.mem_total_kib / KIB_PER_GIB
    avail = host.mem_available_kib
    fraction = avail / host.mem_total_kib if avail is not None and host.mem_total_kib else None
    metrics = {"mem_total_gib": total_gib,
               "mem_available_gib": avail / KIB_PER_GIB if avail is not None else None,
               "mem_available_fraction": fraction}
    if exp.mem_total_gib is not None:
        floor = exp.mem_total_gib * (1 - float(t["tolerance"]))
        if total_gib < floor:
            return [finding("host.memory", Status.FAIL,
                            f"MemTotal {total_gib:.1f} GiB (expected {exp.mem_total_gib:g} GiB, "
                            f"at least {floor:.1f})", "memory", **metrics)]
    if fraction is not None and fraction < float(t["min_available_fraction"]):
        return [finding("host.memory", Status.WARN,
                        f"only {fraction:.1%} of {total_gib:.1f} GiB available", "memory", **metrics)]
    return [finding("host.memory", Status.PASS, f"{total_gib:.1f} GiB"
                    + (f", {fraction:.0%} available" if fraction is not None else ""), "memory", **metrics)]


@check("host.swap", needs=("host",), thresholds={"max_used_fraction": 0.5, "forbid": False},
       fails_by_default=False,
       fails_on="threshold forbid = true (`config generate` sets it when the recorded node has no swap): "
                "FAIL when swap is configured; heavy swap use only WARNs")
def swap(snap: Snapshot, exp: Expectations, t: dict) -> list[Finding]:
    """Swap is not heavily used (and absent where the config forbids it)."""
    total, free = snap.host.swap_total_kib, snap.host.swap_free_kib
    if total is None:
        return [finding("host.swap", Status.ERROR, "SwapTotal unreadable", "swap")]
    if total == 0:
        return [finding("host.swap", Status.PASS, "no swap", "swap", swap_total_gib=0)]
    used = (total - free) / total if free is not None else None
    metrics = {"swap_total_gib": total / KIB_PER_GIB, "swap_used_fraction": used}
    if t.get("forbid"):
        return [finding("host.swap", Status.FAIL, f"{total / KIB_PER_GIB:.1f} GiB swap configured "
                        "(swap is forbidden on this node class)", "swap", **metrics)]
    if used is not None and used > float(t["max_used_fraction"]):
        return [finding("host.swap", Status.WARN, f"{used:.0%} of swap used", "swap", **metrics)]
    used_text = f", {used:.0%} used" if used is not None else ""
    return [finding("host.swap", Status.PASS, f"{total / KIB_PER_GIB:.1f} GiB swap{used_text}",
                    "swap", **metrics)]


# ---------------------------------------------------------------------------------------- mounts


@check("host.mounts", needs=("host",), contexts=CONTEXTS, fails_by_default=True,
       fails_on="a hung or stale mount, / read-only; with mounts: a listed mount missing or read-only")
def mounts(snap: Snapshot, exp: Expectations, t: dict) -> list[Finding]:
    """Expected mount points are present and read-write (unless listed as read-only); no mount hangs
    or has a stale handle. Without expectations: "/" must be read-write."""
    host = snap.host
    if host.mounts is None:
        return [finding("host.mounts", Status.ERROR, "mount table unreadable")]
    visible = _visible_mounts(host)
    out: list[Finding] = []
    judged: set[str] = set()
    wanted = list(exp.mounts) if exp.mounts else ["/"]
    for point in wanted:
        judged.add(point)
        mount = visible.get(point)
        if mount is None:
            out.append(finding("host.mounts", Status.FAIL, f"{point} not mounted", point))
            continue
        faults = [o for o in _MOUNT_FAULTS if o in mount.options]
        if faults:
            out.append(finding("host.mounts", Status.FAIL,
                               f"{point} ({mount.fstype} {mount.device}) {' and '.join(faults)}", point))
        elif mount.read_only and point not in exp.ro_mounts:
            out.append(finding("host.mounts", Status.FAIL, f"{point} mounted read-only", point))
        else:
            mode = "ro" if mount.read_only else "rw"
            out.append(finding("host.mounts", Status.PASS, f"{point} {mount.fstype} {mode}", point))
    for point, mount in visible.items():
        if point in judged:
            continue
        faults = [o for o in _MOUNT_FAULTS if o in mount.options]
        if faults:
            out.append(finding("host.mounts", Status.FAIL,
                               f"{point} ({mount.fstype} {mount.device}) {' and '.join(faults)}", point))
    return out


@check("host.disk", needs=("host",), contexts=CONTEXTS,
       thresholds={"paths": ["/", "/tmp", "/var", "/dev/shm"], "min_free_fraction": 0.05,
                   "min_free_gib": 1.0, "warn_free_fraction": 0.1}, fails_by_default=True,
       fails_on="a listed mount point below min_free_fraction (5 %) or min_free_gib (1 GiB) free space, "
                "or below 5 % free inodes (jobs fail writing)")
def disk(snap: Snapshot, exp: Expectations, t: dict) -> list[Finding]:
    """Free space and free inodes on the listed mount points (those that are mount points here) are
    above the floors. The absolute floor (min_free_gib) is not applied to filesystems smaller than
    twice that floor."""
    visible = _visible_mounts(snap.host)
    min_frac, warn_frac = float(t["min_free_fraction"]), float(t["warn_free_fraction"])
    min_bytes = float(t["min_free_gib"]) * GIB
    out: list[Finding] = []
    for point in t["paths"]:
        mount = visible.get(point)
        if mount is None:
            continue
        if not mount.size_bytes or mount.free_bytes is None:
            why = "hung" if "hung" in mount.options else "no statvfs figures"
            out.append(finding("host.disk", Status.ERROR, f"{point}: free space unknown ({why})", point))
            continue
        free_frac = mount.free_bytes / mount.size_bytes
        inode_frac = (mount.inodes_free / mount.inodes_total
                      if mount.inodes_total and mount.inodes_free is not None else None)
        metrics = {"free_gib": mount.free_bytes / GIB, "free_fraction": free_frac,
                   "inodes_free_fraction": inode_frac}
        status, problems = Status.PASS, []
        abs_floor = mount.size_bytes >= 2 * min_bytes and mount.free_bytes < min_bytes
        if free_frac < min_frac or abs_floor:
            status = Status.FAIL
            problems.append(f"{mount.free_bytes / GIB:.2f} GiB free ({free_frac:.1%})")
        elif free_frac < warn_frac:
            status = Status.WARN
            problems.append(f"{free_frac:.1%} space free")
        if inode_frac is not None and inode_frac < min_frac:
            status = Status.FAIL
            problems.append(f"{inode_frac:.1%} inodes free")
        elif inode_frac is not None and inode_frac < warn_frac:
            status = status if status is Status.FAIL else Status.WARN
            problems.append(f"{inode_frac:.1%} inodes free")
        message = f"{point}: " + ("; ".join(problems) if problems
                                  else f"{mount.free_bytes / GIB:.1f} GiB free ({free_frac:.0%})")
        out.append(finding("host.disk", status, message, point, **metrics))
    return out or skip("host.disk", "none of the listed paths is a mount point")


# ------------------------------------------------------------------------------------------ load


@check("host.load", needs=("host",), thresholds={"warn_per_cpu": 2.0, "fail_per_cpu": None},
       fails_by_default=False,
       fails_on="threshold fail_per_cpu: FAIL above it; by default a high load only WARNs")
def load(snap: Snapshot, exp: Expectations, t: dict) -> list[Finding]:
    """The 1-minute load per online CPU is below the thresholds. (Run in a prolog, the load still
    reflects the previous job; the check is off there by default.)"""
    host = snap.host
    if host.load_1m is None or not host.cpu_threads:
        return [finding("host.load", Status.ERROR, "load average or CPU count unreadable", "load")]
    per_cpu = host.load_1m / host.cpu_threads
    metrics = {"load_1m": host.load_1m, "load_per_cpu": per_cpu}
    text = f"load {host.load_1m:.2f} on {host.cpu_threads} CPUs ({per_cpu:.2f} per CPU)"
    fail_at = t.get("fail_per_cpu")
    if fail_at is not None and per_cpu > float(fail_at):
        return [finding("host.load", Status.FAIL, text, "load", **metrics)]
    if t.get("warn_per_cpu") is not None and per_cpu > float(t["warn_per_cpu"]):
        return [finding("host.load", Status.WARN, text, "load", **metrics)]
    return [finding("host.load", Status.PASS, text, "load", **metrics)]


# -------------------------------------------------------------------------------------- services


@check("host.services", needs=("host",), contexts=CONTEXTS, fails_by_default=False,
       fails_on="services (written by `config generate`): FAIL when a listed service has no running "
                "process; without the list it SKIPs")
def services(snap: Snapshot, exp: Expectations, t: dict) -> list[Finding]:
    """Every expected service (slurmd, munged, nvidia-persistenced, ...) has a running process."""
    if not exp.services:
        return skip("host.services", "no services expected (set services in the node class, or record a "
                                     "node with `healthcheck config generate`, to require them)")
    seen = snap.host.services or {}
    out = []
    for name in exp.services:
        if name not in seen:
            out.append(finding("host.services", Status.ERROR, f"{name} was not probed", name))
        elif seen[name]:
            out.append(finding("host.services", Status.PASS, f"{name} running", name))
        else:
            out.append(finding("host.services", Status.FAIL, f"{name} not running", name))
    return out


# -------------------------------------------------------------------------------------- versions


def version_matches(expected: str, actual: str) -> bool:
    """Exact match, or prefix match when ``expected`` ends in "*". A comma list (one value per GPU or
    HCA that differ) matches only when every item does."""
    items = [a.strip() for a in actual.split(",")]
    if expected.endswith("*"):
        return all(a.startswith(expected[:-1]) for a in items)
    return all(a == expected for a in items)


@check("sw.versions", needs=("versions",), fails_by_default=False,
       fails_on="versions (written by `config generate`): FAIL when an installed version differs or is "
                "missing; without them it lists the versions and PASSes")
def versions(snap: Snapshot, exp: Expectations, t: dict) -> list[Finding]:
    """Installed versions (driver, CUDA, NCCL, OFED, rdma-core, kernel, VBIOS, HCA firmware) are the
    ones the node class expects; "550.*" matches by prefix."""
    found = snap.versions or {}
    if not exp.versions:
        listing = ", ".join(f"{k} {v}" for k, v in sorted(found.items())) or "no versions found"
        return [finding("sw.versions", Status.PASS, f"{listing} (informational: no [class.NAME.versions] "
                        "expected; `healthcheck config generate` records them)")]
    out = []
    for key, expected in sorted(exp.versions.items()):
        actual = found.get(key)
        if actual is None:
            out.append(finding("sw.versions", Status.FAIL, f"{key} not found (expected {expected})", key))
        elif version_matches(expected, actual):
            out.append(finding("sw.versions", Status.PASS, f"{key} {actual}", key))
        else:
            out.append(finding("sw.versions", Status.FAIL, f"{key} {actual} (expected {expected})", key))
    return out
