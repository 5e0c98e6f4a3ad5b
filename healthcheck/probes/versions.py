"""Installed software versions: kernel, NVIDIA driver, CUDA, VBIOS, NCCL, rdma-core, OFED, HCA firmware.

Cheapest truthful source first: sysfs/procfs files and library file names (globbed, no subprocess).
The only tool call is ``ofed_info -s`` (2 s deadline), made only when the mlx_compat module file does
not give the OFED version and the tool is installed. A version that cannot be found is left out.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Callable, Iterable

from ..safeio import subproc
from ..core.model import GpuInfo

DEFAULT_LIB_DIRS = (
    "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib/powerpc64le-linux-gnu",
    "/usr/local/lib", "/usr/lib64", "/usr/lib", "/opt/nccl/lib", "/usr/local/nccl/lib",
)
OFED_INFO_TIMEOUT_S = 2.0

_VERSION = re.compile(r"\d+(?:\.\d+)+")
_NCCL = re.compile(r"libnccl\.so\.(\d+)\.(\d+)\.(\d+)$")
# rdma-core builds libibverbs.so.1.<ABI>.<PACKAGE_VERSION>: 1.14.50.0 is rdma-core 50.0; MLNX_OFED's
# rdma-core spells its package version like "2307mlnx47.1" and keeps that in the file name.
_IBVERBS = re.compile(r"libibverbs\.so\.1\.(\d+)\.(.+)$")
# `ofed_info -s`: "MLNX_OFED_LINUX-23.10-1.1.9.0:" (MLNX_OFED) / "OFED-internal-24.10-1.1.4:" (DOCA).
_OFED = re.compile(r"(\d+\.\d+-[\d.]*\d)")


def probe_versions(sys_root: str | os.PathLike = "/sys", proc_root: str | os.PathLike = "/proc",
                   lib_dirs: Iterable[str] = DEFAULT_LIB_DIRS,
                   run: Callable[..., subproc.Result] = subproc.run,
                   gpus: list[GpuInfo] | None = None) -> dict[str, str]:
    """Versions by key (kernel, driver, cuda, vbios, nccl, rdma_core, ofed, hca_firmware, mlx5_core)."""
    sys_ = Path(sys_root)
    proc = Path(proc_root)
    lib_dirs = tuple(lib_dirs)
    names = library_names(lib_dirs)
    found: dict[str, str | None] = {
        "kernel": _read_line(proc / "sys/kernel/osrelease"),
        "driver": _driver_version(sys_, proc),
        "cuda": _distinct(g.cuda_driver_version for g in gpus or []),
        "vbios": _distinct(g.vbios for g in sorted(gpus or [], key=lambda g: g.index)),
        "nccl": nccl_version(lib_dirs, names),
        "rdma_core": rdma_core_version(lib_dirs, names),
        "ofed": _ofed_version(sys_, run),
        "hca_firmware": _hca_firmware(sys_),
        "mlx5_core": _read_line(sys_ / "module/mlx5_core/version"),
    }
    return {key: value for key, value in found.items() if value}


def _read_line(path: Path) -> str | None:
    try:
        with open(path, "rb") as fh:
            text = fh.read(4096).decode("utf-8", "replace").strip()
    except (OSError, ValueError):
        return None
    return text.splitlines()[0].strip() if text else None


def _distinct(values: Iterable[str | None]) -> str | None:
    """Distinct non-empty values in first-seen order, comma-joined ("a" when all GPUs agree)."""
    seen: list[str] = []
    for value in values:
        if value and value not in seen:
            seen.append(value)
    return ",".join(seen) or None


def _driver_version(sys_: Path, proc: Path) -> str | None:
    """/sys/module/nvidia/version ("550.54.15"), else /proc/driver/nvidia/version:
    "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Thu Feb 22 ..." (proprietary) or
    "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build ..." (open)."""
    version = _read_line(sys_ / "module/nvidia/version")
    if version:
        return version
    line = _read_line(proc / "driver/nvidia/version")
    if not line:
        return None
    _, sep, rest = line.partition("Kernel Module")
    match = _VERSION.search(rest if sep else line)
    return match.group(0) if match else None


LIB_PREFIXES = ("libnccl.so.", "libibverbs.so.1.")


def library_names(lib_dirs: Iterable[str]) -> list[str]:
    """The names in ``lib_dirs`` that a version is read from (``LIB_PREFIXES``): one listing per folder,
    no pattern (/usr/lib/x86_64-linux-gnu holds over a thousand names; a glob per library, fnmatch over
    each name, cost HealthCheckProgram ~3 ms a run)."""
    names = []
    for folder in lib_dirs:
        try:
            names.extend(name for name in os.listdir(folder) if name.startswith(LIB_PREFIXES))
        except OSError:  # not there, not a folder, not readable
            continue
    return names


def _names_starting(lib_dirs: Iterable[str], prefix: str, names: list[str] | None) -> list[str]:
    """What the glob ``prefix*`` matches in ``lib_dirs`` (``names``: their :func:`library_names`, listed once)."""
    return [name for name in (library_names(lib_dirs) if names is None else names) if name.startswith(prefix)]


def nccl_version(lib_dirs: Iterable[str], names: list[str] | None = None) -> str | None:
    """Highest libnccl.so.X.Y.Z across ``lib_dirs`` ("2.21.5")."""
    best = None
    for name in _names_starting(lib_dirs, "libnccl.so.", names):
        match = _NCCL.match(name)
        if match:
            key = tuple(int(x) for x in match.groups())
            best = max(best, key) if best else key
    return ".".join(map(str, best)) if best else None


def rdma_core_version(lib_dirs: Iterable[str], names: list[str] | None = None) -> str | None:
    """rdma-core release from libibverbs' file name: libibverbs.so.1.14.50.0 -> "50.0"."""
    best: tuple | None = None
    for name in _names_starting(lib_dirs, "libibverbs.so.1.", names):
        match = _IBVERBS.match(name)
        if match:
            version = match.group(2)
            key = (tuple(int(x) for x in re.findall(r"\d+", version)), version)
            best = max(best, key) if best else key
    return best[1] if best else None


def _ofed_version(sys_: Path, run: Callable[..., subproc.Result]) -> str | None:
    """MLNX_OFED/DOCA-OFED: /sys/module/mlx_compat/version when the module exports one, else
    ``ofed_info -s``; normalised to "23.10-1.1.9.0" where the text has that shape. Inbox drivers
    (no mlx_compat, no ofed_info) give None."""
    text = _read_line(sys_ / "module/mlx_compat/version")
    if not text:
        try:
            result = run(["ofed_info", "-s"], timeout=OFED_INFO_TIMEOUT_S)
        except (FileNotFoundError, OSError):  # subproc.ToolNotFound is a FileNotFoundError
            return None
        if not getattr(result, "ok", False):
            return None
        lines = [ln.strip() for ln in result.stdout.splitlines() if ln.strip()]
        text = lines[0].rstrip(":") if lines else None
    if not text:
        return None
    match = _OFED.search(text)
    return match.group(1) if match else text


def _hca_firmware(sys_: Path) -> str | None:
    """Distinct /sys/class/infiniband/<dev>/fw_ver values, sorted ("28.39.1002")."""
    try:
        devices = sorted((sys_ / "class/infiniband").iterdir())
    except OSError:
        return None
    versions = {v for v in (_read_line(d / "fw_ver") for d in devices) if v}
    return ",".join(sorted(versions)) or None
