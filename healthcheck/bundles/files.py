"""Bundle files on disk, both ways.

Writing (`healthcheck collect`): which sysfs and procfs files a bundle records, exactly what the probes
read, copied as plain files (symlinks resolved, so the bundle holds no links), at most MAX_FILE_BYTES
each, never blocking (a FIFO or device where an attribute was expected is left out).

Reading an untrusted bundle folder (:func:`copy_tree_safely`): copied into a private directory first,
entry by entry through directory descriptors, so whoever can write the folder cannot swap a file for a
symlink, a FIFO or another file between our check and our read: every reader then reads the copy.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Callable

from ..safeio.trust import read_bounded  # the one bounded read loop

MAX_FILE_BYTES = 1024 * 1024
# PCI vendors whose devices the probes look at: NVIDIA, Mellanox/NVIDIA networking.
VENDORS = ("0x10de", "0x15b3")
PCI_FILES = ("vendor", "device", "class", "current_link_speed", "current_link_width",
             "max_link_speed", "max_link_width")
IB_DEVICE_FILES = ("fw_ver", "hca_type", "board_id", "node_guid")
IB_PORT_FILES = ("state", "phys_state", "rate", "link_layer")
MODULES = ("nvidia", "mlx5_core", "mlx_compat")
PROC_FILES = ("cpuinfo", "meminfo", "loadavg", "uptime", "mounts", "sys/kernel/osrelease",
              "driver/nvidia/version")
PROC_PID_FILES = ("comm", "status", "cmdline")


def _read_small(src: Path) -> bytes | None:
    """At most MAX_FILE_BYTES of a regular file (symlinks followed: sysfs reaches attributes through
    device links); None when it cannot be read or is not a regular file. O_NONBLOCK: a FIFO or device
    put where an attribute was expected is not waited on."""
    try:
        fd = os.open(src, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError:
        return None  # unreadable attribute (permissions, write-only, device gone)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return read_bounded(fd, MAX_FILE_BYTES)
    except OSError:
        return None
    finally:
        os.close(fd)


def _copy(src: Path, dst: Path) -> None:
    data = _read_small(src)
    if data is None:
        return
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_bytes(data)


def copy_sys(sys_root: Path, out: Path) -> None:
    devices = sys_root / "bus" / "pci" / "devices"
    for dev in sorted(devices.glob("*")) if devices.is_dir() else []:
        vendor = (_read_small(dev / "vendor") or b"").decode("ascii", "replace").strip()
        if vendor not in VENDORS:
            continue
        target = out / "bus" / "pci" / "devices" / dev.name
        for name in PCI_FILES:
            _copy(dev / name, target / name)
        if (dev / "physfn").exists():
            (target / "physfn").mkdir(parents=True, exist_ok=True)
        for ib in (dev / "infiniband").glob("*") if (dev / "infiniband").is_dir() else []:
            (target / "infiniband" / ib.name).mkdir(parents=True, exist_ok=True)
    ib_class = sys_root / "class" / "infiniband"
    for hca in sorted(ib_class.glob("*")) if ib_class.is_dir() else []:
        target = out / "class" / "infiniband" / hca.name
        for name in IB_DEVICE_FILES:
            _copy(hca / name, target / name)
        for port in sorted((hca / "ports").glob("*")):
            for name in IB_PORT_FILES:
                _copy(port / name, target / "ports" / port.name / name)
            for group in ("counters", "hw_counters"):
                for counter in sorted((port / group).glob("*")):
                    _copy(counter, target / "ports" / port.name / group / counter.name)
    for module in MODULES:
        _copy(sys_root / "module" / module / "version", out / "module" / module / "version")


def copy_proc(proc_root: Path, out: Path) -> None:
    for name in PROC_FILES:
        _copy(proc_root / name, out / name)
    for entry in os.scandir(proc_root) if proc_root.is_dir() else []:
        if entry.name.isdigit():
            for name in PROC_PID_FILES:
                _copy(proc_root / entry.name / name, out / entry.name / name)


# ------------------------------------------------------------------------- reading a bundle folder


def vet_tree(src: str | os.PathLike, *, max_file_bytes: int, max_entries: int,
             error: Callable[[str], Exception]) -> bool:
    """Check the folder ``src`` where it is (lstat only, nothing opened) and say whether it is private:
    reachable without symlinks, and it, every entry in it and every folder above it owned by this
    user or root and writable by nobody else (a folder above may be sticky, like /tmp). Only then can
    it be read in place: nobody else can swap an entry between a check and a read. Either way
    ``error(message)`` is raised for a symlink leading out of the folder, a hard link, a FIFO, socket
    or device, a file over ``max_file_bytes``, more than ``max_entries`` entries."""
    label = os.fspath(src)
    try:
        real_root = os.path.realpath(src)
    except OSError as exc:
        raise error(f"cannot read bundle folder {label!r}: {exc.strerror or exc}") from exc
    private = real_root == os.path.abspath(src) and _private_above(real_root)
    count = 0
    for folder, dirs, files in os.walk(src, onerror=lambda exc: _walk_error(exc, error)):
        for name in dirs + files:
            count += 1
            if count > max_entries:
                raise error(f"{label}: more than {max_entries} entries")
            full = os.path.join(folder, name)
            rel = os.path.relpath(full, src)
            try:
                st = os.lstat(full)
            except OSError as exc:
                raise error(f"{label}: cannot read entry {rel!r}: {exc.strerror or exc}") from exc
            private = private and _owned_unwritable(st)
            if stat.S_ISLNK(st.st_mode):
                try:  # a link we may not follow (/proc/1/cwd) is refused, not an internal error
                    target, text = os.path.realpath(full), os.readlink(full)
                except OSError as exc:
                    raise error(f"{label}: cannot read symlink {rel!r}: {exc.strerror or exc}") from exc
                if os.path.commonpath([real_root, target]) != real_root:
                    raise error(f"{label}: refusing symlink {rel!r} to {text!r}, outside the bundle")
            elif stat.S_ISREG(st.st_mode):
                if st.st_nlink > 1:
                    raise error(f"{label}: refusing hard link {rel!r} ({st.st_nlink} names): a bundle holds plain copies")
                if st.st_size > max_file_bytes:
                    raise error(f"{label}: refusing {rel!r}: {st.st_size} bytes (limit {max_file_bytes} per file)")
            elif not stat.S_ISDIR(st.st_mode):
                raise error(f"{label}: refusing non-regular entry {rel!r} (FIFO, socket or device)")
    return private


def _walk_error(exc: OSError, error: Callable[[str], Exception]) -> None:
    raise error(f"cannot read bundle folder {exc.filename!r}: {exc.strerror or exc}")


def _owned_unwritable(st: os.stat_result) -> bool:
    """Owned by this user or root; group/other write only on a symlink (its mode means nothing)."""
    if st.st_uid not in (0, os.geteuid()):
        return False
    return stat.S_ISLNK(st.st_mode) or not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _private_above(real_root: str) -> bool:
    """The folder and those above it: nobody else may rename or replace them (sticky folders owned
    by root or this user, like /tmp, are fine: others cannot rename what is not theirs there)."""
    folder = real_root
    while True:
        try:
            st = os.stat(folder)
        except OSError:
            return False
        if st.st_uid not in (0, os.geteuid()):
            return False
        if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not (folder != real_root and st.st_mode & stat.S_ISVTX):
            return False
        parent = os.path.dirname(folder)
        if parent == folder:
            return True
        folder = parent


# --------------------------------------------------------------------- reading an untrusted folder

_OPEN = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
MAX_DEPTH = 64  # folders inside folders (a collected bundle: sys/bus/pci/devices/X/infiniband/Y: 7)


def copy_tree_safely(src: str | os.PathLike, dst: str | os.PathLike, *, max_file_bytes: int,
                     max_total_bytes: int, max_entries: int, error: Callable[[str], Exception]) -> None:
    """Copy the untrusted folder ``src`` into ``dst`` (created here, mode 0700, in a private place).

    Each entry is lstat'ed relative to its folder's descriptor; only regular files and folders are
    opened, with O_NOFOLLOW | O_NONBLOCK (a symlink swapped in meanwhile fails to open, a FIFO does
    not block), and fstat'ed: it must still be the same file (device, inode, type). A file
    whose size or mtime changes while it is read is refused. Symlinks are recreated as they are and,
    once all is copied, must resolve inside ``dst`` (a relative link between bundle files is fine).
    Raises ``error(message)`` naming the entry for: symlinks leading out, hard links, FIFOs, sockets,
    devices, an entry that changed while being read, a file over ``max_file_bytes``, more than
    ``max_entries`` entries or ``max_total_bytes`` in all, folders nested deeper than MAX_DEPTH. The
    folder ``src`` itself may be a symlink (the caller named it)."""
    copier = _TreeCopy(os.fspath(src), os.fspath(dst), max_file_bytes, max_total_bytes, max_entries, error)
    try:
        top = os.open(src, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise error(f"{copier.label}: cannot read the bundle folder: {exc.strerror or exc}") from exc
    try:
        copier.mkdir("")
        copier.folder(top, "", 0)
    finally:
        os.close(top)
    copier.check_links()


class _TreeCopy:
    def __init__(self, label: str, dst: str, max_file: int, max_total: int, max_entries: int,
                 error: Callable[[str], Exception]) -> None:
        self.label, self.dst, self.error = label, dst, error
        self.max_file, self.max_total, self.max_entries = max_file, max_total, max_entries
        self.entries = self.total = 0
        self.links: list[tuple[str, str]] = []

    def fail(self, message: str, exc: OSError | None = None) -> Exception:
        detail = f" ({exc.strerror or exc})" if exc is not None else ""
        return self.error(f"{self.label}: {message}{detail}")

    def mkdir(self, rel: str) -> None:
        try:
            os.mkdir(os.path.join(self.dst, rel), 0o700)
        except OSError as exc:
            raise self.fail("cannot copy the bundle to a private folder", exc) from exc

    def folder(self, fd: int, rel: str, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise self.fail(f"refusing {rel!r}: folders nested deeper than {MAX_DEPTH}")
        try:
            names = sorted(os.listdir(fd))
        except OSError as exc:
            raise self.fail(f"cannot read bundle folder {rel or '.'!r}", exc) from exc
        for name in names:
            self.entries += 1
            if self.entries > self.max_entries:
                raise self.fail(f"more than {self.max_entries} entries")
            self.entry(fd, name, os.path.join(rel, name), depth)

    def entry(self, fd: int, name: str, rel: str, depth: int) -> None:
        try:
            before = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except OSError as exc:
            raise self.fail(f"cannot read entry {rel!r}", exc) from exc
        if stat.S_ISLNK(before.st_mode):
            self.symlink(fd, name, rel)
        elif stat.S_ISDIR(before.st_mode):
            child = self.open(fd, name, rel, before, os.O_DIRECTORY)
            try:
                self.mkdir(rel)
                self.folder(child, rel, depth + 1)
            finally:
                os.close(child)
        elif stat.S_ISREG(before.st_mode):
            if before.st_nlink > 1:
                raise self.fail(f"refusing hard link {rel!r} ({before.st_nlink} names): a bundle holds plain copies")
            if before.st_size > self.max_file:
                raise self.fail(f"refusing {rel!r}: {before.st_size} bytes (limit {self.max_file} per file)")
            self.regular(fd, name, rel, before)
        else:
            raise self.fail(f"refusing non-regular entry {rel!r} (FIFO, socket or device)")

    def open(self, fd: int, name: str, rel: str, before: os.stat_result, extra: int) -> int:
        try:
            child = os.open(name, _OPEN | extra, dir_fd=fd)
        except OSError as exc:  # ELOOP: now a symlink; ENOTDIR, ENOENT: replaced or removed
            raise self.fail(f"refusing {rel!r}: it changed while being read", exc) from exc
        now = os.fstat(child)
        if (now.st_dev, now.st_ino, stat.S_IFMT(now.st_mode)) != \
                (before.st_dev, before.st_ino, stat.S_IFMT(before.st_mode)):
            os.close(child)
            raise self.fail(f"refusing {rel!r}: it changed while being read (replaced by another file)")
        return child

    def regular(self, fd: int, name: str, rel: str, before: os.stat_result) -> None:
        child = self.open(fd, name, rel, before, 0)
        try:
            data = read_bounded(child, self.max_file + 1)
            after = os.fstat(child)
        except OSError as exc:
            raise self.fail(f"cannot read entry {rel!r}", exc) from exc
        finally:
            os.close(child)
        if len(data) > self.max_file:
            raise self.fail(f"refusing {rel!r}: over the limit of {self.max_file} bytes per file (it grew)")
        if (after.st_size, after.st_mtime_ns) != (before.st_size, before.st_mtime_ns) or len(data) != after.st_size:
            raise self.fail(f"refusing {rel!r}: it changed while being read (size or time)")
        self.total += len(data)
        if self.total > self.max_total:
            raise self.fail(f"entries too large together: over {self.max_total} bytes")
        try:
            out = os.open(os.path.join(self.dst, rel), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                          | os.O_CLOEXEC, 0o600)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(out, view):]
            finally:
                os.close(out)
        except OSError as exc:
            raise self.fail("cannot copy the bundle to a private folder", exc) from exc

    def symlink(self, fd: int, name: str, rel: str) -> None:
        try:
            text = os.readlink(name, dir_fd=fd)
        except OSError as exc:
            raise self.fail(f"cannot read entry {rel!r}", exc) from exc
        try:
            os.symlink(text, os.path.join(self.dst, rel))
        except OSError as exc:
            raise self.fail("cannot copy the bundle to a private folder", exc) from exc
        self.links.append((rel, text))

    def check_links(self) -> None:
        """Every copied link must resolve inside the copy (which nobody else can change)."""
        real_root = os.path.realpath(self.dst)
        for rel, text in self.links:
            target = os.path.realpath(os.path.join(self.dst, rel))
            if os.path.commonpath([real_root, target]) != real_root:
                raise self.fail(f"refusing symlink {rel!r} to {text!r}, outside the bundle")


def copy_host_counters(sysfs_root, out) -> None:
    """Record the EDAC and AER files under ``out`` (a bundle's ``sys/``) at the same relative paths,
    and for every function with AER files its vendor, device and class (and the name folders that
    say what sits behind it), so that a bundle is read back like the live node."""
    from ..probes.host_counters import AER_FILES, AER_ID_FILES, EDAC_DIMM_FILES, EDAC_MC, EDAC_MC_FILES

    sysfs_root, out = Path(sysfs_root), Path(out)
    mc_base = sysfs_root / EDAC_MC
    for mc in sorted(mc_base.glob("mc*")) if mc_base.is_dir() else []:
        for name in EDAC_MC_FILES:
            _copy(mc / name, out / EDAC_MC / mc.name / name)
        for sub in sorted(list(mc.glob("dimm*")) + list(mc.glob("rank*"))):
            for name in EDAC_DIMM_FILES:
                _copy(sub / name, out / EDAC_MC / mc.name / sub.name / name)
    devices = sysfs_root / "bus" / "pci" / "devices"
    for dev in sorted(devices.glob("*")) if devices.is_dir() else []:
        if not any((dev / name).is_file() for name in AER_FILES):
            continue
        target = out / "bus" / "pci" / "devices" / dev.name
        for name in AER_FILES + AER_ID_FILES:
            _copy(dev / name, target / name)
        for sub in ("infiniband", "nvme", "net"):
            for child in (dev / sub).glob("*") if (dev / sub).is_dir() else []:
                (target / sub / child.name).mkdir(parents=True, exist_ok=True)
