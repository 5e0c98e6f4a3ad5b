"""Physical Ethernet ports and their error counters, read from ``<sysfs_root>/class/net`` (issue 32).

Layout read (kernel Documentation/ABI/testing/sysfs-class-net and sysfs-class-net-statistics)::

    class/net/<if>                -> ../../devices/pci0000:15/.../0000:1a:00.0/net/<if>
    class/net/<if>/type              "1" (ARPHRD_ETHER; IPoIB is 32 and judged as an RDMA port)
    class/net/<if>/device         -> ../../../0000:1a:00.0   (absent for lo, bonds, bridges, veth)
    class/net/<if>/device/driver  -> .../bus/pci/drivers/mlx5_core
    class/net/<if>/device/infiniband/<dev>   the RDMA device on the same PCI function (RoCE)
    class/net/<if>/dev_port          "0": the port of that device (RDMA port = dev_port + 1)
    class/net/<if>/operstate         "up" | "down" | ...
    class/net/<if>/carrier_down_count   link downs since the driver created the netdev (kernel >= 4.16)
    class/net/<if>/statistics/<name>    rx_crc_errors, rx_frame_errors, ... (every driver)

Only the counters the network checks keep are read (``policies.netcounters.kept``: ~10 files a port,
not the 23 of ``statistics/``). os calls only: the prolog reads this. A port or file that cannot be read
is left out; the probe never raises for one port.
"""
from __future__ import annotations

import os

from ..core.model import NetPort, normalize_pci_bus_id
from ..policies.netcounters import kept
from .infiniband import parse_counter
from .pcie import list_dir, parse_or_none, read_text, resolve_in_root

ARPHRD_ETHER = "1"
_KEPT = kept("netdev")
_STATS = tuple(sorted(n for n in _KEPT if n != "carrier_down_count"))
_HEX = "0123456789abcdef"


def _is_pci_address(name: str) -> bool:
    """"0000:1a:00.0" (os-only: no re on the prolog's path)."""
    parts = name.lower().split(":")
    if len(parts) != 3 or "." not in parts[2]:
        return False
    bus_dev, _, fn = parts[2].partition(".")
    return (4 <= len(parts[0]) <= 8 and len(parts[1]) == 2 and len(bus_dev) == 2 and fn in "01234567"
            and len(fn) == 1 and all(c in _HEX for c in parts[0] + parts[1] + bus_dev))


def _link_name(path: str) -> str | None:
    try:
        return os.path.basename(os.readlink(path).rstrip("/")) or None
    except OSError:
        return None


def _resolve(root: str, real_root: str, rel: str) -> str:
    """``rel`` under ``root`` with its links followed: the kernel's own (relative) links resolve inside
    the tree with one realpath; anything else (a bundle's absolute ``/sys/...`` links) through
    ``resolve_in_root``, which never leaves the root (the prolog reads this: ~10 us against ~90)."""
    real = os.path.realpath(os.path.join(root, rel))
    if real.startswith(real_root + os.sep):
        return real
    return resolve_in_root(root, rel)


def ethernet_ports(sysfs_root: str = "/sys") -> list[tuple[str, str, str]]:
    """(name, folder, device folder) of every physical Ethernet netdev, by name."""
    root = os.path.abspath(sysfs_root)
    real_root = os.path.realpath(root)
    out = []
    net = _resolve(root, real_root, "class/net")
    for name in list_dir(net):
        if name.startswith(".") or "/" in name:
            continue
        plain = os.path.join(net, name)
        kind = read_text(os.path.join(plain, "type"))
        if kind is not None and kind != ARPHRD_ETHER:
            continue  # not Ethernet (lo, IPoIB): decided before any link is resolved
        if not os.path.lexists(os.path.join(plain, "device")):
            continue  # virtual (bond, bridge, veth, vlan, ifb): no device link
        folder = _resolve(root, real_root, f"class/net/{name}")
        device = _resolve(root, real_root, f"class/net/{name}/device")
        if not os.path.isdir(device) or read_text(os.path.join(folder, "type")) != ARPHRD_ETHER:
            continue
        out.append((name, folder, device))
    return out


def _rdma_port(folder: str, device: str) -> str | None:
    devs = [d for d in list_dir(os.path.join(device, "infiniband")) if not d.startswith(".")]
    if len(devs) != 1:
        return None
    dev_port = parse_or_none(parse_counter, read_text(os.path.join(folder, "dev_port")))
    return f"{devs[0]}:{(dev_port or 0) + 1}"


def probe_net_ports(sysfs_root: str = "/sys", rdma_only: bool = False) -> list[NetPort]:
    """Every physical Ethernet port; [] when there is none (or no ``class/net``). ``rdma_only``: only the
    ports of an RDMA device (RoCE: the job's fabric), what the prolog and epilog read; a management NIC's
    counters are left to HealthCheckProgram and ``check`` (the memory keeps them between those runs)."""
    ports = []
    for name, folder, device in ethernet_ports(sysfs_root):
        rdma = _rdma_port(folder, device)
        if rdma_only and rdma is None:
            continue
        counters: dict[str, int] = {}
        stats = os.path.join(folder, "statistics")
        for counter in _STATS:
            value = parse_or_none(parse_counter, read_text(os.path.join(stats, counter)))
            if value is not None:
                counters[counter] = value
        downs = parse_or_none(parse_counter, read_text(os.path.join(folder, "carrier_down_count")))
        if downs is not None:
            counters["carrier_down_count"] = downs
        addr = _link_name(os.path.join(folder, "device")) or ""
        if not _is_pci_address(addr):  # "../.." or a copied folder: the resolved folder's name
            addr = os.path.basename(device)
        ports.append(NetPort(
            name=name,
            driver=_link_name(os.path.join(device, "driver")),
            pci_bus_id=normalize_pci_bus_id(addr) if _is_pci_address(addr) else None,
            rdma=rdma,
            operstate=read_text(os.path.join(folder, "operstate")) or None,
            counters=counters,
        ))
    return ports
