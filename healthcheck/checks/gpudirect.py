"""GPUDirect RDMA readiness (pure, over ``Snapshot.gpudirect``: probes/gpudirect.py says what is read).

A node class that sends GPU memory over its NICs declares it: ``gpudirect = true`` in its
``[class.NAME]``. There, each check FAILs where GPUDirect is not ready; elsewhere a problem is a SKIP
that names it ("not required by the class"), never a drain. Without NVIDIA GPUs or HCAs: SKIP.

- ``gpudirect.peermem``: the HCA driver can register GPU memory: ``nvidia_peermem`` (or the older
  ``nv_peer_mem``) loaded, or the dma-buf path possible (open kernel module, driver R515+, kernel
  5.12+; NVIDIA's GPUDirect RDMA guide, "Using dma-buf").
- ``gpudirect.acs``: no PCIe switch port between a GPU and the HCA nearest it redirects peer traffic
  (ACS ``ReqRedir+``, ``CmpltRedir+`` or ``EgressCtrl+``: requests and completions sent up to the root
  complex, and through the IOMMU, instead of across the switch; NVIDIA: "disable ACS" on the switches
  of a GPUDirect path). ``SrcValid`` alone redirects nothing and is not judged. Root ports are not
  judged (a path through the root complex crosses it whatever ACS says; said in the message).
- ``gpudirect.iommu``: the GPUs and HCAs are not behind a translating IOMMU (their IOMMU group's type
  ``DMA``/``DMA-FQ``: every peer-to-peer DMA translated, at best slower, often refused without ATS);
  ``identity`` (``iommu=pt``) or no IOMMU passes.
"""
from __future__ import annotations

from ..core.expectations import Expectations
from ..core.model import GpuDirectInfo, Snapshot, Status
from .registry import check, finding, skip

REDIRECT_BITS = ("ReqRedir", "CmpltRedir", "EgressCtrl")
SWITCH_PORTS = ("upstream", "downstream")
TRANSLATED = ("DMA", "DMA-FQ")
DMABUF_DRIVER = 515
DMABUF_KERNEL = (5, 12)
_NOT_REQUIRED = "not required: the node class does not declare gpudirect = true"


def _version(text: str | None, parts: int) -> tuple[int, ...] | None:
    """The leading numbers of a version string ("6.8.0-45-generic" -> (6, 8)); None without one."""
    numbers: list[int] = []
    for piece in (text or "").replace("-", ".").split(".")[:parts]:
        digits = ""
        for c in piece:
            if not c.isdigit():
                break
            digits += c
        if not digits:
            break
        numbers.append(int(digits))
    return tuple(numbers) or None


def dmabuf_missing(info: GpuDirectInfo) -> list[str]:
    """What the dma-buf path lacks ([] when it is possible)."""
    missing = []
    if info.nvidia_open is not True:
        missing.append("the NVIDIA open kernel module" + (" (the proprietary one is loaded)"
                                                          if info.nvidia_open is False else ""))
    driver = _version(info.nvidia_driver, 1)
    if driver is None or driver[0] < DMABUF_DRIVER:
        missing.append(f"driver R{DMABUF_DRIVER}+ (have {info.nvidia_driver or 'none'})")
    kernel = _version(info.kernel, 2)
    if kernel is None or kernel < DMABUF_KERNEL:
        missing.append(f"kernel {DMABUF_KERNEL[0]}.{DMABUF_KERNEL[1]}+ (have {info.kernel or 'unknown'})")
    return missing


def _problem(name: str, exp: Expectations, message: str, component: str | None = None):
    if exp.gpudirect:
        return finding(name, Status.FAIL, message, component)
    return finding(name, Status.SKIP, f"{message}; {_NOT_REQUIRED}", component)


def _no_gpu(snap: Snapshot) -> bool:
    return not snap.gpu_pci_devices and not snap.gpus and not (snap.gpudirect and snap.gpudirect.nvidia_driver)


@check("gpudirect.peermem", needs=("gpudirect",), fails_by_default=False,
       fails_on="with gpudirect = true in the node class: neither nvidia_peermem loaded nor the dma-buf path "
                "possible (open kernel module, driver R515+, kernel 5.12+)")
def gpudirect_peermem(snap: Snapshot, exp: Expectations, t: dict):
    """The HCA driver can register GPU memory: the ``nvidia_peermem`` module is loaded, or dma-buf can
    be used (NVIDIA open kernel module, driver R515+, kernel 5.12+). FAILs only where the node class
    declares ``gpudirect = true``."""
    name, info = "gpudirect.peermem", snap.gpudirect
    if _no_gpu(snap):
        return skip(name, "no NVIDIA GPU or driver on this node")
    if info.peermem_module:
        return [finding(name, Status.PASS, f"{info.peermem_module} loaded: the HCA driver can register GPU memory")]
    missing = dmabuf_missing(info)
    if not missing:
        return [finding(name, Status.PASS, f"dma-buf possible (open kernel module, driver {info.nvidia_driver}, "
                        f"kernel {info.kernel}); nvidia_peermem not loaded")]
    return [_problem(name, exp, "GPUDirect RDMA not ready: nvidia_peermem not loaded (modprobe nvidia_peermem) "
                     f"and dma-buf needs {'; '.join(missing)}")]


@check("gpudirect.acs", needs=("gpudirect",), fails_by_default=False,
       fails_on="with gpudirect = true in the node class: a PCIe switch port between a GPU and its nearest HCA "
                "with ACS ReqRedir+, CmpltRedir+ or EgressCtrl+ (or its ACS unreadable: ERROR)")
def gpudirect_acs(snap: Snapshot, exp: Expectations, t: dict):
    """No PCIe switch port between a GPU and the HCA nearest it redirects peer-to-peer traffic to the
    root complex (ACS ReqRedir, CmpltRedir, EgressCtrl off). FAILs only where the node class declares
    ``gpudirect = true``; an ACS register that could not be read (not root) is then an ERROR."""
    name, info = "gpudirect.acs", snap.gpudirect
    if _no_gpu(snap):
        return skip(name, "no NVIDIA GPU on this node")
    if not info.paths:
        return skip(name, "no GPU with an HCA on its PCI tree")
    out = []
    for path in info.paths:
        comp = f"{path.gpu}->{path.hca}"
        switch = [b for b in path.bridges if b.port_type in SWITCH_PORTS]
        unknown = [b.pci_bus_id for b in path.bridges if b.port_type is None]
        if not switch and unknown:
            message = (f"PCIe port type of {', '.join(unknown)} not readable (the config space beyond 64 bytes "
                       "needs root)")
            out.append(finding(name, Status.ERROR if exp.gpudirect else Status.SKIP,
                               message if exp.gpudirect else f"{message}; {_NOT_REQUIRED}", comp))
            continue
        if not switch:
            out.append(finding(name, Status.PASS, f"GPU {path.gpu} and {path.hca} share no PCIe switch: the path "
                               "crosses the root complex (ACS not in play; slower than a shared switch)", comp))
            continue
        unread = [b.pci_bus_id for b in switch if b.acs_ctl is None]
        bad = [(b.pci_bus_id, [k for k in REDIRECT_BITS if b.acs_ctl.get(k)]) for b in switch if b.acs_ctl]
        bad = [(addr, bits) for addr, bits in bad if bits]
        if bad:
            text = ", ".join(f"{addr} {'+ '.join(bits)}+" for addr, bits in bad)
            out.append(_problem(name, exp, f"ACS redirects peer traffic between GPU {path.gpu} and {path.hca}: "
                                f"{text} (disable ACS on the switch: BIOS or setpci)"[:300], comp))
        elif unread:
            message = f"ACS of {', '.join(unread)} not readable (the PCI extended config space needs root)"
            out.append(finding(name, Status.ERROR if exp.gpudirect else Status.SKIP,
                               message if exp.gpudirect else f"{message}; {_NOT_REQUIRED}", comp))
        else:
            out.append(finding(name, Status.PASS, f"no ACS redirect on the {len(switch)} switch port(s) between "
                               f"GPU {path.gpu} and {path.hca}", comp))
    return out


@check("gpudirect.iommu", needs=("gpudirect",), fails_by_default=False,
       fails_on="with gpudirect = true in the node class: a GPU or HCA behind a translating IOMMU "
                "(iommu_group type DMA or DMA-FQ; use iommu=pt)")
def gpudirect_iommu(snap: Snapshot, exp: Expectations, t: dict):
    """The GPUs and HCAs are not behind a translating IOMMU: their IOMMU group's type is ``identity``
    (``iommu=pt``) or there is no IOMMU. FAILs only where the node class declares ``gpudirect = true``."""
    name, info = "gpudirect.iommu", snap.gpudirect
    if _no_gpu(snap):
        return skip(name, "no NVIDIA GPU on this node")
    cmdline = " ".join(info.cmdline_iommu) or "no IOMMU option on the kernel command line"
    translated = sorted(addr for addr, kind in info.iommu_group_types.items() if kind in TRANSLATED)
    if translated:
        shown = ", ".join(f"{a} ({info.iommu_group_types[a]})" for a in translated[:6])
        more = f" and {len(translated) - 6} more" if len(translated) > 6 else ""
        return [_problem(name, exp, f"IOMMU translates DMA of {shown}{more}: GPUDirect peer traffic is translated "
                         f"or refused ({cmdline}; boot with iommu=pt)"[:300])]
    if not info.iommu_units:
        return [finding(name, Status.PASS, f"no IOMMU enabled ({cmdline})")]
    return [finding(name, Status.PASS, f"IOMMU in pass-through for the GPUs and HCAs ({cmdline})",
                    iommu_units=info.iommu_units)]
