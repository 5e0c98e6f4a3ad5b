"""What a block device named in the kernel log is, for ``host.events`` (issue 32: the device decides).

For each disk or partition a host event names (``sr0``, ``sdc``, ``nvme0n1p2``, ``loop3``), read from
sysfs and procfs: the disk it is on, whether it is still there, its vendor and model (a BMC's virtual
CD-ROM says so there), whether it is removable, and what it backs: the mountpoints of the disk, its
partitions and everything stacked on them (device-mapper, md: ``holders``), and swap. The check then
drains for an error on a disk in use and not for a provisioning CD-ROM.

Read only when the kernel log holds such an event (the prolog pays nothing otherwise); ``os`` only. Every
root is a parameter for fixture trees; an unreadable file leaves its fact out, never raises.
"""
from __future__ import annotations

import os

MAX_DEVICES = 32  # devices described per run (a storm names the same few)
MAX_USED_BY = 8
MAX_HOLDER_DEPTH = 4


def _read(path: str, limit: int = 256) -> str | None:
    try:
        with open(path, "rb") as handle:
            return handle.read(limit).decode("utf-8", "replace").strip()
    except OSError:
        return None


def _listdir(path: str) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def _mount_sources(proc_root: str) -> list[tuple[str, str]]:
    """(source, mountpoint) of every mount, from ``<proc>/self/mounts`` (octal escapes decoded)."""
    text = _read(os.path.join(proc_root, "self", "mounts"), 1 << 20) or ""
    out = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[0].startswith("/dev/"):
            out.append((fields[0], _unescape(fields[1])))
    return out


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out, i = [], 0
    while i < len(text):
        if text[i] == "\\" and text[i + 1:i + 4].isdigit():
            out.append(chr(int(text[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def _pooled(proc_root: str) -> bool:
    """Whether a mount is a pool whose member disks no mount names (ZFS): a disk that backs no mount
    of ours may then still be in use."""
    text = _read(os.path.join(proc_root, "self", "mounts"), 1 << 20) or ""
    return any(len(f) >= 3 and f[2] == "zfs" for f in (line.split() for line in text.splitlines()))


def _swaps(proc_root: str) -> list[str]:
    text = _read(os.path.join(proc_root, "swaps"), 1 << 16) or ""
    return [line.split()[0] for line in text.splitlines()[1:] if line.split()]


def _stack(sysfs_root: str, disk: str) -> set[str]:
    """The disk, its partitions and everything stacked on any of them (holders, transitively)."""
    block = os.path.join(sysfs_root, "class", "block")
    names = {disk}
    disk_dir = os.path.join(block, disk)
    for entry in _listdir(disk_dir):
        if entry.startswith(disk) and os.path.exists(os.path.join(disk_dir, entry, "partition")):
            names.add(entry)
    todo = list(names)
    for _ in range(MAX_HOLDER_DEPTH):
        nxt = []
        for name in todo:
            for holder in _listdir(os.path.join(block, name, "holders")):
                if holder not in names:
                    names.add(holder)
                    nxt.append(holder)
        todo = nxt
    return names


def _aliases(sysfs_root: str, names: set[str]) -> set[str]:
    """The names a mount may use for ``names``: ``mapper/<dm name>`` for device-mapper devices."""
    out = set(names)
    for name in names:
        if name.startswith("dm-"):
            dm_name = _read(os.path.join(sysfs_root, "class", "block", name, "dm", "name"))
            if dm_name:
                out.add(f"mapper/{dm_name}")
    return out


def _source_name(source: str, dev_root: str) -> str:
    """``/dev/sda1`` -> ``sda1``; ``/dev/mapper/vg-root`` -> ``mapper/vg-root``; a link resolved."""
    rel = source[len("/dev/"):]
    if rel.startswith("mapper/"):
        return rel
    real = os.path.realpath(os.path.join(dev_root, rel))
    return os.path.basename(real) if real.startswith(os.path.realpath(dev_root) + os.sep) else os.path.basename(rel)


def describe_block_device(name: str, sysfs_root: str = "/sys", proc_root: str = "/proc",
                          dev_root: str = "/dev", mounts=None, swaps=None) -> dict:
    """The facts about block device ``name`` (see the module's doc)."""
    block = os.path.join(sysfs_root, "class", "block")
    here = os.path.join(block, name)
    if not os.path.exists(here):
        return {"present": False}
    disk = name
    if os.path.exists(os.path.join(here, "partition")):
        disk = os.path.basename(os.path.dirname(os.path.realpath(here))) or name
    disk_dir = os.path.join(block, disk)
    info: dict = {"present": True, "disk": disk}
    vendor = _read(os.path.join(disk_dir, "device", "vendor")) or ""
    model = _read(os.path.join(disk_dir, "device", "model")) or ""
    if vendor or model:
        info["vendor_model"] = " ".join(v for v in (vendor, model) if v)
    removable = _read(os.path.join(disk_dir, "removable"))
    if removable in ("0", "1"):
        info["removable"] = removable == "1"
    names = _aliases(sysfs_root, _stack(sysfs_root, disk))
    used: list[str] = []
    for source, point in (mounts if mounts is not None else _mount_sources(proc_root)):
        if _source_name(source, dev_root) in names and point not in used:
            used.append(point)
    for source in (swaps if swaps is not None else _swaps(proc_root)):
        if source.startswith("/dev/") and _source_name(source, dev_root) in names and "swap" not in used:
            used.append("swap")
    info["used_by"] = used[:MAX_USED_BY]
    if not used and _pooled(proc_root):
        info["pooled"] = True  # ZFS pools mounted: their member disks show no mount
    return info


def annotate_block_events(events: list, block_classes: frozenset, sysfs_root: str = "/sys",
                          proc_root: str = "/proc", dev_root: str = "/dev") -> None:
    """Put :func:`describe_block_device`'s facts on each host event of ``block_classes`` naming a device
    (``KernelEvent.device_info``); mounts and swaps are read once."""
    wanted = [ev for ev in events if ev.kind == "host" and ev.event_class in block_classes and ev.device]
    if not wanted:
        return
    mounts, swaps = _mount_sources(proc_root), _swaps(proc_root)
    seen: dict[str, dict] = {}
    for ev in wanted:
        if ev.device not in seen:
            if len(seen) >= MAX_DEVICES or "/" in ev.device or ev.device.startswith("."):
                continue
            seen[ev.device] = describe_block_device(ev.device, sysfs_root, proc_root, dev_root, mounts, swaps)
        ev.device_info = seen[ev.device]
