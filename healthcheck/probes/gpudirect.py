"""GPUDirect RDMA readiness of the host, from sysfs and procfs (roots as parameters).

What it reads, and why (NVIDIA's GPUDirect RDMA guide; the checks are in checks/gpudirect.py):

- **peer memory**: ``<sys>/module/nvidia_peermem`` (the driver's peer-memory client, R470+) or
  ``<sys>/module/nv_peer_mem`` (the older out-of-tree one) exists when the module is loaded: the HCA
  driver can then register GPU memory;
- **dma-buf**, the other way in: the NVIDIA open kernel module (``<proc>/driver/nvidia/version`` says
  ``Open Kernel Module``), a driver of R515 or later (``<sys>/module/nvidia/version``) and a kernel of
  5.12 or later (``<proc>/sys/kernel/osrelease``: ib_umem_dmabuf);
- **IOMMU**: the entries of ``<sys>/class/iommu`` (none: no IOMMU enabled), the IOMMU words of
  ``<proc>/cmdline`` (``iommu=pt``, ``intel_iommu=on``, ``amd_iommu=off``, ``iommu.passthrough=1``) and,
  per GPU and HCA, ``<sys>/bus/pci/devices/<addr>/iommu_group/type`` (``identity``: pass-through;
  ``DMA``/``DMA-FQ``: every DMA translated, the peer-to-peer path of GPUDirect among them);
- **ACS** on the bridges between each GPU and the HCA nearest it (the deepest common ancestor in the
  sysfs device tree): each bridge's ``config`` (parsers/pci_config.py: its port type and ACS control
  register; the kernel returns the extended space, where ACS lives, to root only).
"""
from __future__ import annotations

import os

from ..core.lazyre import Pattern
from ..core.model import GpuDirectInfo, GpuNicPath, PciBridgeAcs, normalize_pci_bus_id
from .pcie import list_dir, read_text, resolve_in_root

PEERMEM_MODULES = ("nvidia_peermem", "nv_peer_mem")
IOMMU_WORDS = ("iommu", "intel_iommu", "amd_iommu", "iommu.passthrough", "iommu.strict")
_PCI_ADDR = Pattern(r"^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")
MAX_CONFIG_READ = 4096


def pci_chain(sysfs_root: str, address: str) -> list[str]:
    """The PCI addresses from the root port down to ``address`` (itself last), from where
    ``bus/pci/devices/<address>`` leads in ``devices/pci<domain>:<bus>/...``; [] when not there."""
    path = resolve_in_root(os.path.abspath(sysfs_root), f"bus/pci/devices/{address}")
    if not os.path.exists(path):
        return []
    return [normalize_pci_bus_id(p) or p for p in path.split(os.sep) if _PCI_ADDR.match(p)]


def common_depth(a: list[str], b: list[str]) -> int:
    """How many leading bridges two chains share (pure)."""
    depth = 0
    for x, y in zip(a[:-1], b[:-1]):
        if x != y:
            break
        depth += 1
    return depth


def nearest(gpu_chain: list[str], hcas: dict[str, list[str]]) -> tuple[str, int] | None:
    """(HCA name, shared depth) of the HCA whose chain shares the most bridges with the GPU's (ties:
    the first by name); None without HCAs (pure)."""
    best = None
    for name in sorted(hcas):
        depth = common_depth(gpu_chain, hcas[name])
        if best is None or depth > best[1]:
            best = (name, depth)
    return best


def read_config(sysfs_root: str, address: str) -> bytes | None:
    path = os.path.join(resolve_in_root(os.path.abspath(sysfs_root), f"bus/pci/devices/{address}"), "config")
    try:
        with open(path, "rb") as fh:
            return fh.read(MAX_CONFIG_READ)
    except OSError:
        return None


def bridge_acs(sysfs_root: str, address: str) -> PciBridgeAcs:
    from ..parsers import ParseError
    from ..parsers.pci_config import acs_control, port_type

    data = read_config(sysfs_root, address)
    if data is None:
        return PciBridgeAcs(address)
    try:
        return PciBridgeAcs(address, port_type(data), acs_control(data))
    except ParseError:
        return PciBridgeAcs(address)


def _hca_addresses(sysfs_root: str) -> dict[str, str]:
    """RDMA device name -> its PCI address (the ``device`` link of ``class/infiniband/<name>``)."""
    root = os.path.abspath(sysfs_root)
    out = {}
    for name in list_dir(resolve_in_root(root, "class/infiniband")):
        target = os.path.basename(resolve_in_root(root, f"class/infiniband/{name}/device"))
        if _PCI_ADDR.match(target):
            out[name] = normalize_pci_bus_id(target) or target
    return out


def _iommu_type(sysfs_root: str, address: str) -> str | None:
    path = resolve_in_root(os.path.abspath(sysfs_root), f"bus/pci/devices/{address}/iommu_group/type")
    return read_text(path) or None


def probe_gpudirect(sysfs_root: str = "/sys", proc_root: str = "/proc",
                    gpus: list[str] | None = None) -> GpuDirectInfo:
    """The node's GPUDirect facts (see the module docstring). ``gpus``: the GPUs' PCI addresses
    (default: the NVIDIA GPUs on the PCI bus)."""
    from .pcibus import nvidia_gpu_present

    sysfs_root, proc_root = os.path.abspath(sysfs_root), os.path.abspath(proc_root)
    info = GpuDirectInfo()
    info.peermem_module = next((m for m in PEERMEM_MODULES
                                if os.path.isdir(os.path.join(sysfs_root, "module", m))), None)
    info.nvidia_driver = read_text(os.path.join(sysfs_root, "module", "nvidia", "version")) or None
    version = read_text(os.path.join(proc_root, "driver", "nvidia", "version"))
    if version is not None:
        info.nvidia_open = "open kernel module" in version.lower()
    info.kernel = read_text(os.path.join(proc_root, "sys", "kernel", "osrelease")) or None
    cmdline = read_text(os.path.join(proc_root, "cmdline")) or ""
    info.cmdline_iommu = [w for w in cmdline.split() if w.split("=", 1)[0] in IOMMU_WORDS][:16]
    iommu = os.path.join(sysfs_root, "class", "iommu")
    info.iommu_units = len(list_dir(iommu)) if os.path.isdir(iommu) else 0
    gpus = sorted(gpus) if gpus is not None else nvidia_gpu_present(sysfs_root)
    hcas = _hca_addresses(sysfs_root)
    for address in [*gpus, *hcas.values()]:
        kind = _iommu_type(sysfs_root, address)
        if kind:
            info.iommu_group_types[address] = kind
    chains = {name: pci_chain(sysfs_root, addr) for name, addr in hcas.items()}
    chains = {name: chain for name, chain in chains.items() if chain}
    for gpu in gpus:
        chain = pci_chain(sysfs_root, gpu)
        found = nearest(chain, chains) if chain else None
        if found is None:
            continue
        name, depth = found
        hca_chain = chains[name]
        below = [a for a in chain[depth:-1]] + [a for a in hca_chain[depth:-1]]
        common = chain[depth - 1] if depth else None
        bridges = ([common] if common else []) + below
        info.paths.append(GpuNicPath(gpu, name, hcas[name], common,
                                     [bridge_acs(sysfs_root, b) for b in dict.fromkeys(bridges)]))
    return info

