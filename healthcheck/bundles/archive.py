"""Bundles: what the probes read, recorded so the same judgement runs anywhere.

Layout (every file optional; checks whose sources are absent report skip)::

    meta.json             hostname, time, tool versions, what was collected and what failed
    nvml.json             the GPUs as NVML reported them (GpuInfo list)
    nvidia-smi-q-x.xml    `nvidia-smi -q -x`
    nvidia-smi-q.txt      `nvidia-smi -q`
    nvidia-smi-nvlink-status.txt, nvidia-smi-nvlink-e.txt   `nvidia-smi nvlink --status` / `-e`
    dmesg.txt             `dmesg` (kernel ring buffer)
    ibstat.txt            `ibstat`
    statvfs.json          {mountpoint: [size_bytes, free_bytes, inodes_total, inodes_free]}
    versions.json         the versions probe's result (library versions cannot be re-read offline)
    gpudirect.json        the GPUDirect probe's result (config spaces and the PCI tree's links are not copied)
    nvme-smart-log-<dev>.json, smartctl-<dev>.json (or .txt), storage-devices.json   storage health
    ipmitool-sel.txt, ipmitool-sdr.txt   `ipmitool sel elist` / `sdr elist` (BMC)
    mlxlink-<dev>.txt     `mlxlink -d <dev> -m -c -e` per HCA port (``-p<N>`` suffix for ports past 1)
    nvidia-imex-ctl-q.txt, nvidia-imex-ctl-N.json   `nvidia-imex-ctl -q` / `-N -j` (the IMEX daemon, its domain)
    fabricmanager.log     the tail of /var/log/fabricmanager.log (its NVSwitch errors join the kernel's SXids)
    sys/...  proc/...     the sysfs and procfs files the probes read, same relative paths, no symlinks

GPU facts come from nvml.json, else the XML, else the text output, in that order.
"""
from __future__ import annotations

import json
import os
import stat
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Callable, Iterator

from ..core.model import GpuInfo, ProbeError, Snapshot
from ..safeio.trust import NotARegularFile, read_regular

FABRICMANAGER_LOG = "fabricmanager.log"

# Limits on untrusted bundles (support tickets): a bundle over any of them is refused with a
# BundleError (exit 2), before its contents are extracted or parsed.
MAX_FILE_BYTES = 64 * 1024 * 1024  # one file (tar member or file in a bundle directory), read or extracted
MAX_MEMBER_BYTES = MAX_FILE_BYTES  # older name
MAX_TOTAL_BYTES = 256 * 1024 * 1024  # all of a tarball's members together (what extraction may write)
MAX_MEMBERS = 50_000  # entries of a tarball / a bundle directory (a collected node has a few thousand)


class BundleError(ValueError):
    pass


# ------------------------------------------------------------------------------------- reading


@contextmanager
def opened(path: str | os.PathLike) -> Iterator[Path]:
    """The bundle as a directory: itself, or a safely extracted .tar.gz in a temporary directory."""
    p = Path(path)
    is_dir = p.is_dir()
    if not is_dir and not p.is_file():
        raise BundleError(f"{p}: no such bundle (a directory or a .tar.gz written by `healthcheck collect`)")
    if is_dir and _vet_directory(p):
        yield p  # nobody but us or root can change it: read it where it is
        return
    import tempfile

    with tempfile.TemporaryDirectory(prefix="healthcheck-bundle-") as tmp:
        if is_dir:
            # Others can write it: read a private copy, which nobody can change under the readers.
            root = Path(tmp) / (p.name or p.resolve().name or "bundle")
            _copy_directory(p, root)
            yield root
            return
        _extract(p, Path(tmp))
        entries = list(Path(tmp).iterdir())
        # `collect --output x.tar.gz` stores one top folder; accept a flat archive too.
        root = entries[0] if len(entries) == 1 and entries[0].is_dir() else Path(tmp)
        yield root


def _extract(archive: Path, target: Path) -> None:
    import tarfile

    try:
        with tarfile.open(archive, "r:*") as tar:
            members = []
            total = 0
            for count, member in enumerate(tar):
                if count >= MAX_MEMBERS:
                    raise BundleError(f"{archive}: more than {MAX_MEMBERS} entries")
                name = member.name
                if name.startswith("/") or ".." in Path(name).parts:
                    raise BundleError(f"{archive}: refusing entry outside the bundle: {name!r}")
                if not (member.isfile() or member.isdir()) or member.issparse():
                    raise BundleError(f"{archive}: refusing non-regular entry {name!r} (links, devices)")
                total += member.size
                if member.size > MAX_FILE_BYTES:
                    raise BundleError(f"{archive}: entry {name!r} too large: {member.size} bytes "
                                      f"(limit {MAX_FILE_BYTES} per file)")
                if total > MAX_TOTAL_BYTES:
                    raise BundleError(f"{archive}: entries too large together: over {MAX_TOTAL_BYTES} bytes")
                members.append(member)
            tar.extractall(target, members=members, filter="data")
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise BundleError(f"{archive}: not a readable .tar.gz bundle: {exc}") from exc


def _vet_directory(root: Path) -> bool:
    """Refuse a bundle folder that would make us read outside it or block: a symlink whose target
    leaves it (``nvidia-smi-q-x.xml -> /etc/shadow``, ``sys -> /sys``), a hard link (a regular file with
    more than one name may be another file's), a FIFO, socket or device (a read could hang), a file over
    MAX_FILE_BYTES, more than MAX_MEMBERS entries. Symlinks inside it (a sysfs-like tree with relative
    links) are accepted. True when only this user or root can change it (then it is read in place);
    otherwise it is read through a private copy (:func:`_copy_directory`)."""
    from .files import vet_tree

    return vet_tree(root, max_file_bytes=MAX_FILE_BYTES, max_entries=MAX_MEMBERS, error=BundleError)


def _copy_directory(root: Path, target: Path) -> None:
    """Copy a bundle folder others can write into the private ``target``, with the refusals of
    :func:`_vet_directory` and MAX_TOTAL_BYTES in all. Entries are opened through folder descriptors
    without following links and checked again once open (:func:`bundle_files.copy_tree_safely`): a
    folder changed while it is read gives a BundleError naming the entry, never a read of a symlink
    swapped in, a wait on a FIFO or a mix of two files."""
    from .files import copy_tree_safely

    copy_tree_safely(root, target, max_file_bytes=MAX_FILE_BYTES, max_total_bytes=MAX_TOTAL_BYTES,
                     max_entries=MAX_MEMBERS, error=BundleError)


def snapshot_from_bundle(path: str | os.PathLike, services: tuple[str, ...] = (),
                         services_for: Callable[[str], tuple[str, ...]] | None = None) -> Snapshot:
    """Read a bundle. ``services_for(node)`` names the services to look for once the bundle's node
    name is known (its class's expectations); else ``services``."""
    with opened(path) as root:
        return _read(root, str(path), services, services_for)


def _text(root: Path, name: str) -> str | None:
    """A top-level file of the bundle as text (undecodable bytes replaced), None when absent; at most
    MAX_FILE_BYTES (BundleError beyond: a parser never sees an unbounded input)."""
    f = root / name
    if not f.is_file():
        return None
    try:
        data = read_regular(str(f), f"bundle file {name}", MAX_FILE_BYTES)
    except NotARegularFile as exc:  # a FIFO, device or folder; over the limit per bundle file
        raise BundleError(str(exc)) from exc
    except OSError as exc:
        raise BundleError(f"{name}: cannot read: {exc.strerror or exc}") from exc
    return data.decode("utf-8", "replace")


def _read(root: Path, label: str, services: tuple[str, ...],
          services_for: Callable[[str], tuple[str, ...]] | None = None) -> Snapshot:
    meta = {}
    raw_meta = _text(root, "meta.json")
    if raw_meta is not None:
        try:
            meta = json.loads(raw_meta)
        except (ValueError, RecursionError) as exc:
            raise BundleError(f"{label}: meta.json is not JSON: {exc}") from exc
        if not isinstance(meta, dict):
            raise BundleError(f"{label}: meta.json must hold an object")
    node = str(meta.get("hostname") or root.name)
    if services_for is not None:
        services = tuple(services_for(node))
    snap = Snapshot(node=node, taken_at=str(meta.get("time") or ""), source=f"bundle:{label}")
    sys_root, proc_root = root / "sys", root / "proc"

    def guarded(source: str, fn):
        try:
            setattr(snap, source, fn())
        except Exception as exc:  # noqa: BLE001 - any reader failure is data for the checks
            snap.probe_errors[source] = ProbeError("error", f"{type(exc).__name__}: {exc}")

    if (sys_root / "bus" / "pci" / "devices").is_dir():
        from ..probes.nvml import nvidia_gpu_present
        from ..probes.pcie import probe_pcie_links

        guarded("gpu_pci_devices", lambda: nvidia_gpu_present(str(sys_root)))
        guarded("pcie_links", lambda: probe_pcie_links(str(sys_root)))
    guarded("gpus", lambda: _gpus(root, snap))
    dmesg = _text(root, "dmesg.txt")
    if dmesg is not None:
        from ..parsers.host_events import parse_host_events
        from ..parsers.kernel_log import parse_kernel_log

        guarded("kernel_events", lambda: parse_kernel_log(dmesg) + parse_host_events(dmesg))
        fm_log = _text(root, FABRICMANAGER_LOG)
        if fm_log is not None and snap.kernel_events is not None:  # NVSwitch errors the fabric manager logged
            from ..parsers.fabricmanager import parse_fabricmanager_log

            guarded("kernel_events", lambda: snap.kernel_events + parse_fabricmanager_log(fm_log))
    guarded("ib_ports", lambda: _ib_ports(root, sys_root))
    if proc_root.is_dir():
        guarded("host", lambda: _host(root, proc_root, sys_root, services, node))
    guarded("versions", lambda: _versions(root, sys_root, proc_root, snap))
    gpudirect = _text(root, "gpudirect.json")
    if gpudirect is not None:  # an older bundle leaves the source absent (its checks SKIP)
        from ..core.model import GpuDirectInfo, from_dict

        guarded("gpudirect", lambda: from_dict(GpuDirectInfo, json.loads(gpudirect)))
    _storage_and_bmc(root, meta, guarded)
    _host_counters(root, sys_root, guarded)
    from ..probes.imex import DOMAIN_FILE, QUERY_FILE, imex_from_bundle

    if (root / QUERY_FILE).is_file() or (root / DOMAIN_FILE).is_file():  # else (older bundle): source absent
        guarded("imex", lambda: imex_from_bundle(lambda name: _text(root, name)))
    recorded = meta.get("probe_errors") or {}
    if not isinstance(recorded, dict):
        raise BundleError(f"{label}: meta.json probe_errors must be an object")
    for source, err in recorded.items():
        if not isinstance(err, dict):
            raise BundleError(f"{label}: meta.json probe_errors[{source!r}] must be an object")
        if getattr(snap, source, None) is None and source not in snap.probe_errors:
            snap.probe_errors[source] = ProbeError(str(err.get("kind", "error")), str(err.get("message", "")))
    return snap


def _gpus(root: Path, snap: Snapshot):
    raw = _text(root, "nvml.json")
    if raw is not None:
        data = json.loads(raw)
        if not isinstance(data, list):
            raise BundleError("nvml.json must hold a list of GPUs")
        snap.gpu_source = "nvml"
        from ..core.model import from_dict

        return [from_dict(GpuInfo, g) for g in data]
    from ..parsers.nvidia_smi import parse_nvidia_smi

    for name, source in (("nvidia-smi-q-x.xml", "nvidia-smi-xml"), ("nvidia-smi-q.txt", "nvidia-smi-text")):
        text = _text(root, name)
        if text is not None:
            snap.gpu_source = source
            try:
                gpus = parse_nvidia_smi(text).gpus
            except ValueError as exc:
                raise ValueError(f"{name}: {exc}") from exc
            return _with_nvlinks(root, snap, gpus)
    return None


NVLINK_FILES = ("nvidia-smi-nvlink-status.txt", "nvidia-smi-nvlink-e.txt")


def _with_nvlinks(root: Path, snap: Snapshot, gpus: list[GpuInfo]) -> list[GpuInfo]:
    """`nvidia-smi -q` carries no NVLink state: take it from the `nvlink --status` / `-e` recordings.
    A recording that does not parse is reported under ``gpus.nvlink`` (the NVLink checks say error)."""
    from ..parsers import ParseError
    from ..parsers.nvlink import apply_to_gpus, merge_nvlinks, parse_nvlink_errors, parse_nvlink_status

    parsed = []
    for name, parse in zip(NVLINK_FILES, (parse_nvlink_status, parse_nvlink_errors)):
        text = _text(root, name)
        try:
            parsed.append(parse(text) if text is not None else {})
        except ParseError as exc:
            snap.probe_errors["gpus.nvlink"] = ProbeError("error", f"{name}: {exc}")
            return gpus
    if not any(parsed):
        return gpus
    return apply_to_gpus(gpus, merge_nvlinks(*parsed))


def _ib_ports(root: Path, sys_root: Path):
    if (sys_root / "class" / "infiniband").is_dir() or (sys_root / "bus").is_dir():
        from ..probes.infiniband import probe_ib_ports

        return probe_ib_ports(str(sys_root))
    text = _text(root, "ibstat.txt")
    if text is None:
        return None
    from ..parsers.ibstat import parse_ibstat

    result = parse_ibstat(text)
    return getattr(result, "ports", result)


def _host(root: Path, proc_root: Path, sys_root: Path, services, node: str):
    from ..probes.host import probe_host

    figures = json.loads(_text(root, "statvfs.json") or "{}")

    def statvfs(mountpoint: str):
        if mountpoint not in figures:
            raise FileNotFoundError(mountpoint)
        return _Statvfs(*figures[mountpoint])

    return probe_host(proc_root=str(proc_root), sys_root=str(sys_root), services=services,
                      statvfs=statvfs, hostname=node, statvfs_timeout=None)


class _Statvfs:
    """Quacks like os.statvfs_result for the four figures the host probe reads."""

    def __init__(self, size: int, free: int, inodes: int, inodes_free: int):
        self.f_frsize = self.f_bsize = 1
        self.f_blocks, self.f_bavail, self.f_bfree = size, free, free
        self.f_files, self.f_favail, self.f_ffree = inodes, inodes_free, inodes_free


def _versions(root: Path, sys_root: Path, proc_root: Path, snap: Snapshot):
    raw = _text(root, "versions.json")
    if raw is not None:
        data = json.loads(raw)
        if not isinstance(data, dict):
            raise BundleError("versions.json must hold an object")
        return {str(k): str(v) for k, v in data.items()}
    if not (sys_root.is_dir() or proc_root.is_dir()):
        return None
    from ..probes.versions import probe_versions

    return probe_versions(sys_root=str(sys_root), proc_root=str(proc_root), lib_dirs=(), gpus=snap.gpus)


def _storage_and_bmc(root: Path, meta: dict, guarded) -> None:
    """smartctl-<dev>.json / nvme-smart-log-<dev>.json (+ storage-devices.json) and ipmitool-sel.txt /
    ipmitool-sdr.txt: read like the live probes' outputs (healthcheck.probes.storage / .bmc)."""
    from ..probes.bmc import bmc_from_bundle
    from ..probes.storage import storage_from_bundle

    names = [p.name for p in root.iterdir() if p.is_file()]
    guarded("storage", lambda: storage_from_bundle(names, lambda name: _text(root, name)))
    guarded("bmc", lambda: bmc_from_bundle(names, lambda name: _text(root, name), meta))


def _host_counters(root: Path, sys_root: Path, guarded) -> None:
    """EDAC and AER sysfs files (sys/devices/system/edac, sys/bus/pci/devices/*/aer_dev_*) and the
    mlxlink-<dev>.txt outputs: read like the live probes (healthcheck.probes.host_counters / .mlxlink).
    A bundle without them (older, or a node without EDAC/AER) leaves the source absent."""
    from ..probes.host_counters import EDAC_MC, probe_edac, probe_pcie_aer
    from ..probes.mlxlink import mlxlink_from_bundle

    if (sys_root / EDAC_MC).is_dir():
        guarded("edac", lambda: probe_edac(str(sys_root)))
    devices = sys_root / "bus" / "pci" / "devices"
    if devices.is_dir() and any(devices.glob("*/aer_dev_*")):
        guarded("pcie_aer", lambda: probe_pcie_aer(str(sys_root)))
    names = [p.name for p in root.iterdir() if p.is_file() and p.name.startswith("mlxlink-")]
    if names:
        guarded("mlxlink", lambda: mlxlink_from_bundle(names, lambda name: _text(root, name)))


# ------------------------------------------------------------------------------------ writing


def write_bundle(snap: Snapshot, output: str | os.PathLike, raw: dict[str, str],
                 sysfs_root: str = "/sys", proc_root: str = "/proc", statvfs=os.statvfs,
                 meta_extra: dict | None = None) -> Path:
    """Write a bundle from a live snapshot plus the raw tool outputs ``raw`` (file name -> text).

    Built in a private (0700) folder, then published whole: a tarball through
    :class:`healthcheck.safeio.atomic.atomic_file` (a link planted at the output or at any temporary name is
    replaced or never opened, not written through), a folder by renaming the private one into place.
    Files are 0644 and folders 0755 whatever the umask; missing parent folders are created 0755."""
    out = Path(os.path.abspath(os.fspath(output)))
    tarball = out.name.endswith((".tar.gz", ".tgz"))
    import shutil
    import tarfile
    import tempfile

    from ..safeio.atomic import atomic_file, make_dirs

    if not tarball and (out.is_symlink() or (out.exists() and (not out.is_dir() or any(out.iterdir())))):
        raise BundleError(f"{out}: exists and is not an empty folder; choose a new path")
    try:
        make_dirs(out.parent, 0o755)
        work = tempfile.mkdtemp(prefix=".healthcheck-collect-", dir=None if tarball else str(out.parent))
    except OSError as exc:
        raise BundleError(f"{out}: cannot write there: {exc.strerror or exc}") from None
    try:
        folder = Path(work) / (out.name.split(".")[0] if tarball else "bundle")
        _fill_bundle(folder, snap, raw, sysfs_root, proc_root, statvfs, meta_extra)
        _publish_modes(folder)
        try:
            if tarball:
                with atomic_file(out, 0o644) as fh:
                    with tarfile.open(name=out.name, mode="w:gz", fileobj=fh) as tar:
                        tar.add(folder, arcname=folder.name)
            else:
                os.rename(folder, out)  # onto a missing name or an empty folder, never through a link
        except OSError as exc:
            raise BundleError(f"{out}: cannot write the bundle: {exc.strerror or exc}") from None
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


def _fill_bundle(folder: Path, snap: Snapshot, raw: dict[str, str], sysfs_root: str, proc_root: str,
                 statvfs, meta_extra: dict | None) -> None:
    folder.mkdir()
    from .files import copy_host_counters, copy_proc, copy_sys

    copy_sys(Path(sysfs_root), folder / "sys")
    copy_host_counters(Path(sysfs_root), folder / "sys")  # EDAC and AER counters
    copy_proc(Path(proc_root), folder / "proc")
    for name, text in raw.items():
        (folder / name).write_text(text)
    if snap.gpus is not None and snap.gpu_source == "nvml":
        (folder / "nvml.json").write_text(json.dumps([asdict(g) for g in snap.gpus], indent=1))
    if snap.gpudirect is not None:
        (folder / "gpudirect.json").write_text(json.dumps(asdict(snap.gpudirect), indent=1, sort_keys=True))
    if snap.versions is not None:
        (folder / "versions.json").write_text(json.dumps(snap.versions, indent=1, sort_keys=True))
    (folder / "statvfs.json").write_text(json.dumps(_statvfs_figures(snap, statvfs), indent=1))
    meta = {"hostname": snap.node, "time": snap.taken_at, "files": sorted(raw),
            "probe_errors": {k: asdict(v) for k, v in snap.probe_errors.items()}}
    meta.update(meta_extra or {})
    (folder / "meta.json").write_text(json.dumps(meta, indent=1, sort_keys=True))


def _publish_modes(folder: Path) -> None:
    """Folders 0755 and files 0644 in the private build folder (written under any umask), so that the
    bundle and the tarball's members are readable, never writable, by others."""
    for parent, dirs, files in os.walk(folder):
        os.chmod(parent, 0o755)
        for name in files:
            path = os.path.join(parent, name)
            if stat.S_ISREG(os.lstat(path).st_mode):
                os.chmod(path, 0o644)


def _statvfs_figures(snap: Snapshot, statvfs) -> dict[str, list[int]]:
    figures = {}
    for mount in (snap.host.mounts if snap.host and snap.host.mounts else []):
        if mount.size_bytes is not None and mount.free_bytes is not None:
            figures[mount.mountpoint] = [mount.size_bytes, mount.free_bytes,
                                         mount.inodes_total or 0, mount.inodes_free or 0]
    return figures
