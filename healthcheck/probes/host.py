"""Host probe: CPU topology, memory, load, uptime, mounts (+ bounded statvfs), services, processes.

Stdlib only (psutil costs ~40 ms of import on the prolog path). Every read goes through
``proc_root`` / ``sys_root`` so tests point it at fixture trees (tests/fixtures/proc_builder.py).
A missing or unreadable file leaves its field ``None``; this probe never raises for one.
"""
from __future__ import annotations

import errno
import os
if False:  # annotations only (typing is not imported on the hot path)
    from typing import Any, Callable, Iterable  # noqa: F401

from ..core.lazyre import Pattern
from ..core.model import HostInfo, Mount
from ..core.strpath import Path  # pathlib's "/" without its import cost (every prolog probes the host)

# Filesystem types that hold no user data and must never be statvfs'd (autofs would even trigger a mount).
PSEUDO_FSTYPES = frozenset({
    "proc", "sysfs", "cgroup", "cgroup2", "devtmpfs", "devpts", "debugfs", "tracefs", "securityfs",
    "pstore", "bpf", "autofs", "mqueue", "hugetlbfs", "fusectl", "configfs", "binfmt_misc", "nsfs",
    "efivarfs", "rpc_pipefs", "selinuxfs", "nfsd", "ramfs", "fuse.lxcfs", "fuse.portal", "rootfs",
})
# tmpfs is statvfs'd only where running out of it breaks jobs (a full /dev/shm breaks NCCL).
TMPFS_KEEP = frozenset({"/dev/shm", "/tmp", "/var/tmp", "/run"})
# Mount trees that are per-user / per-container plumbing, not node filesystems.
SKIP_PREFIXES = ("/proc/", "/sys/", "/run/user/", "/var/lib/docker/", "/var/lib/kubelet/",
                 "/run/containerd/", "/run/docker/", "/run/netns/")
MAX_PROCESSES = 100_000
MAX_STATVFS = 256
COMM_LEN = 15  # the kernel truncates comm (TASK_COMM_LEN - 1)

StatvfsFn = "Callable[[str], Any]"  # os.statvfs or a stand-in (annotations only)


def is_real_filesystem(mount: Mount) -> bool:
    """Default ``mounts_filter``: block, network, overlay and the tmpfs in TMPFS_KEEP; not pseudo fs."""
    if mount.fstype in PSEUDO_FSTYPES:
        return False
    if mount.mountpoint.startswith(SKIP_PREFIXES):
        return False
    if mount.fstype == "tmpfs":
        return mount.mountpoint in TMPFS_KEEP
    return True


def probe_host(proc_root: str | os.PathLike = "/proc", sys_root: str | os.PathLike = "/sys",
               services: Iterable[str] = (), statvfs: StatvfsFn = os.statvfs,
               hostname: str | None = None,
               mounts_filter: Callable[[Mount], bool] = is_real_filesystem,
               statvfs_timeout: float | None = 2.0, with_processes: bool = True,
               max_processes: int = MAX_PROCESSES) -> HostInfo:
    """Read the host's state. ``statvfs_timeout`` bounds all statvfs calls together (on daemon
    threads, see ``stat_mounts``); a mount that does not answer gets option "hung" and no figures.
    ``statvfs_timeout=None`` calls ``statvfs`` inline (for recorded figures that cannot hang)."""
    proc = Path(proc_root)
    sys_ = Path(sys_root)
    if hostname is None:
        hostname = (_read_text(proc / "sys/kernel/hostname") or "").strip() or None
    info = HostInfo(hostname=hostname)
    _fill_cpu(info, proc, sys_)
    _fill_meminfo(info, _read_text(proc / "meminfo"))
    _fill_loadavg(info, _read_text(proc / "loadavg"))
    uptime = (_read_text(proc / "uptime") or "").split()  # "1209733.52 217752033.60"
    if uptime:
        info.uptime_s = _float(uptime[0])
    mounts_text = _read_text(proc / "mounts")
    if mounts_text is None:
        mounts_text = _read_text(proc / "self" / "mounts")
    if mounts_text is not None:
        info.mounts = parse_mounts(mounts_text)
        stat_mounts(info.mounts, statvfs, mounts_filter, statvfs_timeout)
    services = tuple(services)
    if services or with_processes:
        entries = _scan_processes(proc, max_processes)
        if entries is not None:
            if services:
                info.services = _services_running(proc, services, entries)
            if with_processes:
                info.processes = _process_list(entries)
    return info


# ---------------------------------------------------------------------------------------------- files


def _read_text(path: Path, limit: int = 4 * 1024 * 1024) -> str | None:
    try:
        with open(path, "rb") as fh:
            return fh.read(limit).decode("utf-8", "replace")
    except (OSError, ValueError):
        return None


def _int(text: str | None) -> int | None:
    try:
        return int(text.strip()) if text is not None else None
    except ValueError:
        return None


def _float(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


# ------------------------------------------------------------------------------------------------ CPU


def _fill_cpu(info: HostInfo, proc: Path, sys_: Path) -> None:
    """x86 /proc/cpuinfo has "physical id"/"core id"/"model name" per processor; ARM (aarch64) has
    none of them (only "CPU implementer"/"CPU part"): topology then comes from sysfs. POWER names the
    model in a "cpu" key."""
    text = _read_text(proc / "cpuinfo")
    threads = 0
    sockets: set[str] = set()
    cores: set[tuple[str, str]] = set()
    model = None
    if text:
        block: dict[str, str] = {}
        for line in text.splitlines() + [""]:
            if not line.strip():
                if "processor" in block:
                    threads += 1
                    phys, core = block.get("physical id"), block.get("core id")
                    if phys is not None:
                        sockets.add(phys)
                        if core is not None:
                            cores.add((phys, core))
                    if model is None:
                        model = block.get("model name") or block.get("cpu") or None
                block = {}
                continue
            key, sep, value = line.partition(":")
            if sep:
                block[key.strip()] = value.strip()
    info.cpu_model = model
    if threads and sockets:
        info.cpu_threads, info.cpu_sockets = threads, len(sockets)
        info.cpu_cores = len(cores) or None
        return
    # sysfs topology (ARM, or a cpuinfo without "physical id")
    sys_threads, sys_sockets, sys_cores = _sysfs_topology(sys_)
    info.cpu_threads = threads or sys_threads
    info.cpu_sockets = sys_sockets
    info.cpu_cores = sys_cores


def parse_cpu_list(text: str) -> list[int]:
    """Kernel cpu list syntax "0-95,128-191" / "0" / "" -> sorted ids. Bad pieces are ignored."""
    ids: set[int] = set()
    for piece in text.strip().split(","):
        lo, sep, hi = piece.partition("-")
        try:
            if sep:
                ids.update(range(int(lo), int(hi) + 1))
            elif piece:
                ids.add(int(piece))
        except ValueError:
            continue
    return sorted(ids)


def _sysfs_topology(sys_: Path) -> tuple[int | None, int | None, int | None]:
    cpu_dir = sys_ / "devices/system/cpu"
    online_text = _read_text(cpu_dir / "online")
    online = parse_cpu_list(online_text) if online_text is not None else None
    if online is None:
        try:
            online = sorted(int(n[3:]) for n in os.listdir(cpu_dir) if n.startswith("cpu") and n[3:].isdigit())
        except OSError:
            online = []
    packages: set[int] = set()
    cores: set[tuple[int, int]] = set()
    for cpu in online:
        topo = cpu_dir / f"cpu{cpu}" / "topology"
        pkg = _int(_read_text(topo / "physical_package_id"))
        core = _int(_read_text(topo / "core_id"))
        if pkg is None:
            continue
        packages.add(pkg)
        if core is not None:
            cores.add((pkg, core))
    return (len(online) or None, len(packages) or None, len(cores) or None)


# ---------------------------------------------------------------------------------- memory, load


def _fill_meminfo(info: HostInfo, text: str | None) -> None:
    """/proc/meminfo lines "MemTotal:       2113470196 kB" (kB means KiB)."""
    if not text:
        return
    wanted = {"MemTotal": "mem_total_kib", "MemAvailable": "mem_available_kib",
              "SwapTotal": "swap_total_kib", "SwapFree": "swap_free_kib"}
    for line in text.splitlines():
        key, sep, rest = line.partition(":")
        attr = wanted.get(key.strip())
        if sep and attr:
            parts = rest.split()
            if parts:
                setattr(info, attr, _int(parts[0]))


def _fill_loadavg(info: HostInfo, text: str | None) -> None:
    """/proc/loadavg: "0.52 0.58 0.59 1/1234 56789"."""
    parts = text.split() if text else []
    if len(parts) >= 3:
        info.load_1m, info.load_5m, info.load_15m = (_float(p) for p in parts[:3])


# ---------------------------------------------------------------------------------------- mounts

_OCTAL = Pattern(r"\\([0-7]{3})")


def unescape_mount_field(text: str) -> str:
    """/proc/mounts escapes space, tab, newline and backslash as \\040 \\011 \\012 \\134."""
    if "\\" not in text:  # nearly every field: no pattern compiled on the prolog's path
        return text
    return _OCTAL.sub(lambda m: chr(int(m.group(1), 8)), text)


def parse_mounts(text: str) -> list[Mount]:
    """/proc/mounts (fstab format: device mountpoint fstype options dump pass); short lines skipped."""
    mounts = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 4:
            continue
        mounts.append(Mount(unescape_mount_field(parts[0]), unescape_mount_field(parts[1]), parts[2],
                            parts[3].split(",")))
    return mounts


def stat_mounts(mounts: list[Mount], statvfs: StatvfsFn, mounts_filter: Callable[[Mount], bool],
                timeout: float | None) -> None:
    """Fill size/free/inodes for the mounts ``mounts_filter`` accepts, in place.

    The statvfs calls share one deadline and run as ``bounded.walk`` runs calls: one after the other on
    one daemon thread, and a new thread takes over the rest whenever one stalls, so a hung NFS/Lustre
    mount costs at most ``timeout`` and cannot hold up the others; a late one gets option "hung".
    Only the last (visible) mount of a stacked mount point is stat'ed: statvfs sees that one.
    A stale NFS handle (ESTALE) gets option "stale"; other errors leave the figures None.
    """
    last: dict[str, Mount] = {}
    for mount in mounts:
        last[mount.mountpoint] = mount
    targets = [m for m in last.values() if _accepts(mounts_filter, m)][:MAX_STATVFS]
    results: dict[int, Any] = {}

    def work(i: int, path: str) -> None:
        try:
            results[i] = statvfs(path)
        except OSError as exc:
            results[i] = exc
        except Exception as exc:  # an injected statvfs misbehaving must not kill the probe
            results[i] = exc

    if timeout is None:  # recorded figures: nothing can hang, no threads needed
        for i, mount in enumerate(targets):
            work(i, mount.mountpoint)
        _apply_statvfs(targets, results, alive=lambda i: False)
        return
    from .bounded import Task, walk

    tasks = [Task(lambda i=i, path=mount.mountpoint: work(i, path)) for i, mount in enumerate(targets)]
    walk(tasks, [timeout] * len(tasks))
    _apply_statvfs(targets, results, alive=lambda i: tasks[i].is_alive())


def _apply_statvfs(targets: list[Mount], results: dict[int, Any], alive: Callable[[int], bool]) -> None:
    for i, mount in enumerate(targets):
        if alive(i) or i not in results:
            if "hung" not in mount.options:
                mount.options.append("hung")
            continue
        result = results[i]
        if isinstance(result, OSError):
            if result.errno == errno.ESTALE and "stale" not in mount.options:
                mount.options.append("stale")
            continue
        if isinstance(result, Exception):
            continue
        try:
            frsize = result.f_frsize or result.f_bsize
            mount.size_bytes = int(result.f_blocks * frsize)
            mount.free_bytes = int(result.f_bavail * frsize)
            mount.inodes_total = int(result.f_files)
            mount.inodes_free = int(result.f_favail)
        except (AttributeError, TypeError, ValueError):
            mount.size_bytes = mount.free_bytes = mount.inodes_total = mount.inodes_free = None


def _accepts(mounts_filter: Callable[[Mount], bool], mount: Mount) -> bool:
    try:
        return bool(mounts_filter(mount))
    except Exception:
        return False


# ----------------------------------------------------------------------------- services, processes


def _scan_processes(proc: Path, limit: int) -> list[tuple[int, str, int | None, str]] | None:
    """(pid, comm, uid, state letter) from /proc/<pid>/status ("Name:", "State:", "Uid:" real uid).
    None when the proc root cannot be listed. Processes that exit meanwhile are skipped."""
    try:
        names = os.listdir(proc)
    except OSError:
        return None
    entries = []
    for name in names:
        if not name.isdigit():
            continue
        if len(entries) >= limit:
            break
        text = _read_text(proc / name / "status", limit=8192)
        if text is None:
            continue
        comm, uid, state = None, None, ""
        for line in text.splitlines():
            key, _, value = line.partition(":")
            if key == "Name":
                comm = value.strip()
            elif key == "State":
                state = value.strip()[:1]
            elif key == "Uid":
                fields = value.split()
                uid = _int(fields[0]) if fields else None
                break  # Name, State and Uid come first; stop before the long tail
        if comm is None:
            comm = (_read_text(proc / name / "comm", limit=64) or "").strip()
        entries.append((int(name), comm, uid, state))
    entries.sort()
    return entries


def _argv0_name(cmdline: str | None) -> str | None:
    """Basename of argv[0]. Daemons that rewrite their title ("sshd: /usr/sbin/sshd -D [listener]")
    put it all in argv[0]: take its first word without a trailing ':'."""
    if not cmdline:
        return None
    first = cmdline.split("\0", 1)[0].strip()
    if not first:
        return None
    return os.path.basename(first.split()[0].rstrip(":")) or None


def _services_running(proc: Path, services: tuple[str, ...],
                      entries: list[tuple[int, str, int | None, str]]) -> dict[str, bool]:
    """A service runs when a non-zombie process has its name as comm (comm is cut at 15 chars:
    "nvidia-persistenced" shows as "nvidia-persiste") or as argv[0]'s basename. cmdline is read only
    for services the cheap comm pass did not find."""
    live = [(pid, comm) for pid, comm, _, state in entries if state not in ("Z", "X")]
    comms = {comm for _, comm in live}
    running = {s: (s in comms or (len(s) > COMM_LEN and s[:COMM_LEN] in comms)) for s in services}
    missing = {s for s, ok in running.items() if not ok}
    if missing:
        for pid, _ in live:
            name = _argv0_name(_read_text(proc / str(pid) / "cmdline", limit=4096))
            if name in missing:
                running[name] = True
                missing.discard(name)
                if not missing:
                    break
    return running


def _process_list(entries: list[tuple[int, str, int | None, str]]) -> list[dict[str, Any]]:
    users: dict[int, str] = {}
    out = []
    for pid, comm, uid, _ in entries:
        user = None
        if uid is not None:
            if uid not in users:
                users[uid] = _user_name(uid)
            user = users[uid]
        out.append({"pid": pid, "uid": uid, "user": user, "comm": comm})
    return out


def _user_name(uid: int) -> str:
    try:
        import pwd

        return pwd.getpwuid(uid).pw_name
    except (KeyError, ImportError, OverflowError):
        return str(uid)
