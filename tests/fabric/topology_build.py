"""Render small ibnetdiscover outputs (plain and -p) from a cabling list, for the topology tests.

The golden fabric: 2 leaves and 1 spine, rail-optimized, 4 nodes x 2 HCAs. HCA mlx5_0 of every node
goes to leaf-a (rail 0), mlx5_1 to leaf-b (rail 1); node gpu0N's HCA goes to port N of its leaf; each
leaf has two uplinks (ports 9, 10) to the spine (ports 1-4). Tests plant a fault by editing the list.
"""
from __future__ import annotations

SWITCHES = {"spine-1": ("1000000000000c00", 1), "leaf-a": ("1000000000000a00", 2), "leaf-b": ("1000000000000b00", 3)}
NODES = ("gpu01", "gpu02", "gpu03", "gpu04")
HCAS = ("mlx5_0", "mlx5_1")
LEAF_OF = {"mlx5_0": "leaf-a", "mlx5_1": "leaf-b"}


def ca_guid(desc: str) -> str:
    """"gpu03 mlx5_1" -> "2000000000000310" (node number, HCA number, 0)."""
    node, hca = desc.split()
    return f"20000000000{int(node[3:]):03d}{int(hca.split('_')[1])}0"


def golden() -> list[list]:
    """[[end, end, rate], ...] with end = (device, port); device = a switch name or "gpu01 mlx5_0"."""
    links = []
    for n, node in enumerate(NODES, 1):
        for hca in HCAS:
            links.append([(f"{node} {hca}", 1), (LEAF_OF[hca], n), "4xNDR"])
    for leaf, first in (("leaf-a", 1), ("leaf-b", 3)):
        links.append([(leaf, 9), ("spine-1", first), "4xNDR"])
        links.append([(leaf, 10), ("spine-1", first + 1), "4xNDR"])
    return links


def _guid(device: str) -> str:
    return SWITCHES[device][0] if device in SWITCHES else ca_guid(device)


def _lid(device: str) -> int:
    if device in SWITCHES:
        return SWITCHES[device][1]
    guid = ca_guid(device)
    return 10 + int(guid[-4:-2]) * 2 + int(guid[-2])


def _ports(links) -> dict[str, list]:
    by_device: dict[str, list] = {}
    for one, two, rate in links:
        by_device.setdefault(one[0], []).append((one[1], two, rate))
        by_device.setdefault(two[0], []).append((two[1], one, rate))
    return by_device


def render_plain(links, switch_ports: int = 65) -> str:
    out = ["#", "# Topology file: the healthcheck test fabric (2 leaves, 1 spine, 4 nodes x 2 HCAs)", "#", ""]
    by_device = _ports(links)
    order = [d for d in SWITCHES if d in by_device] + sorted(d for d in by_device if d not in SWITCHES)
    for device in order:
        guid = _guid(device)
        if device in SWITCHES:
            out += ["vendid=0x2c9", "devid=0xd2f2", f"sysimgguid=0x{guid}", f"switchguid=0x{guid}({guid})",
                    f'Switch\t{switch_ports} "S-{guid}"\t\t# "{device}" enhanced port 0 lid {_lid(device)} lmc 0']
            for port, (peer, peer_port), rate in sorted(by_device[device]):
                if peer in SWITCHES:
                    out.append(f'[{port}]\t"S-{_guid(peer)}"[{peer_port}]\t\t# "{peer}" lid {_lid(peer)} {rate}')
                else:
                    pg = _guid(peer)[:-1] + str(peer_port)
                    out.append(f'[{port}]\t"H-{_guid(peer)}"[{peer_port}]({pg})\t\t# "{peer}" lid {_lid(peer)} {rate}')
        else:
            out += ["vendid=0x2c9", "devid=0x1021", f"sysimgguid=0x{guid}", f"caguid=0x{guid}",
                    f'Ca\t2 "H-{guid}"\t\t# "{device}"']
            for port, (peer, peer_port), rate in sorted(by_device[device]):
                kind = "S" if peer in SWITCHES else "H"
                out.append(f'[{port}]({guid[:-1]}{port})\t"{kind}-{_guid(peer)}"[{peer_port}]\t\t# lid {_lid(device)} '
                           f'lmc 0 "{peer}" lid {_lid(peer)} {rate}')
        out.append("")
    return "\n".join(out) + "\n"


def _pguid(device: str, port: int) -> str:
    """What -p prints: a switch's node GUID, a CA's port GUID."""
    return _guid(device) if device in SWITCHES else _guid(device)[:-1] + str(port)


def render_ports(links) -> str:
    """``ibnetdiscover -p``: one line per port, both ends of each link."""
    out = []
    for device, ports in _ports(links).items():
        for port, (peer, peer_port), rate in sorted(ports):
            kind = "SW" if device in SWITCHES else "CA"
            peer_kind = "SW" if peer in SWITCHES else "CA"
            width, speed = rate.split("x")
            out.append(f"{kind} {_lid(device):5d} {port:2d} 0x{_pguid(device, port)} {width}x {speed} - {peer_kind} "
                       f"{_lid(peer):5d} {peer_port:2d} 0x{_pguid(peer, peer_port)} ( '{device}' - '{peer}' )")
    return "\n".join(sorted(out)) + "\n"


def replace(links, end, new_end=None, rate=None) -> list[list]:
    """A copy of ``links`` where the link at ``end`` goes to ``new_end`` instead (None: removed) or
    trains at ``rate``."""
    out = []
    for one, two, old_rate in links:
        if end in (one, two):
            if new_end is None and rate is None:
                continue
            other = two if one == end else one
            out.append([end, new_end if new_end is not None else other, rate or old_rate])
        else:
            out.append([one, two, old_rate])
    return out
