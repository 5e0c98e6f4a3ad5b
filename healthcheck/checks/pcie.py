"""PCIe link checks for HCAs (sysfs view).

Unlike GPUs, which drop to 2.5 GT/s at idle to save power, ConnectX HCAs keep their trained link:
a current speed or width below the device's own maximum is a real degradation (reseat, riser, slot,
upstream switch), so it FAILs without any expectation. Expectations (``pcie_by_address`` first, then
``pcie_by_kind["hca"]``) add a floor on generation and width: a card that trains at its own maximum
but sits in a slower slot, or is a slower card than the node class should have, FAILs too.
"""
from __future__ import annotations

from ..core.expectations import Expectations, PcieExpect
from ..core.model import Finding, PcieLink, Snapshot, Status, normalize_pci_bus_id
from .registry import CONTEXTS, check, finding, skip


def _expectation(link: PcieLink, exp: Expectations) -> PcieExpect | None:
    for addr, want in exp.pcie_by_address.items():
        if normalize_pci_bus_id(addr) == link.pci_bus_id:
            return want
    return exp.pcie_by_kind.get(link.kind)


def _gen(gen: int | None, gts: float | None) -> str:
    if gen is not None:
        return f"gen{gen}"
    return f"{gts:g} GT/s" if gts is not None else "?"


def link_problems(link: PcieLink, want: PcieExpect | None) -> list[str]:
    """Why this link is degraded: below its own maximum, or below the expectation."""
    problems: list[str] = []
    cur_w, max_w = link.width_current, link.width_max
    if cur_w is not None and max_w is not None and cur_w < max_w:
        problems.append(f"width x{cur_w} of x{max_w}")
    cur_s, max_s = link.speed_current_gts, link.speed_max_gts
    if cur_s is not None and max_s is not None and cur_s < max_s - 0.01:
        problems.append(f"speed {_gen(link.gen_current, cur_s)} ({cur_s:g} GT/s) of "
                        f"{_gen(link.gen_max, max_s)} ({max_s:g} GT/s)")
    if want is not None:
        if want.gen is not None and link.gen_current is not None and link.gen_current < want.gen:
            problems.append(f"gen{link.gen_current} below expected gen{want.gen}")
        if want.width is not None and cur_w is not None and cur_w < want.width:
            problems.append(f"x{cur_w} below expected x{want.width}")
    return problems


@check("pcie.hca.link", needs=("pcie_links",), contexts=CONTEXTS, fails_by_default=True,
       fails_on="an HCA's PCIe link below its own maximum speed or width (reseat, riser, slot, upstream "
                "switch); with pcie: below the expected generation or width")
def pcie_hca_link(snap: Snapshot, exp: Expectations, t: dict) -> list[Finding]:
    """Every HCA's PCIe link runs at its maximum speed and width (HCAs do not down-train at idle),
    and at least at the generation and width the node class expects. Runs in the prolog and epilog
    too: four sysfs files per HCA (the PCI bus walk reads vendor and class of every function)."""
    name = "pcie.hca.link"
    hcas = [link for link in snap.pcie_links or [] if link.kind == "hca"]
    if not hcas:
        return skip(name, "no HCA on the PCI bus")
    out: list[Finding] = []
    for link in hcas:
        component = link.name or link.pci_bus_id
        metrics = {"gen_current": link.gen_current, "gen_max": link.gen_max,
                   "width_current": link.width_current, "width_max": link.width_max,
                   "speed_current_gts": link.speed_current_gts}
        problems = link_problems(link, _expectation(link, exp))
        where = f" at {link.pci_bus_id}" if link.name else ""
        if problems:
            out.append(finding(name, Status.FAIL, f"PCIe link degraded{where}: " + "; ".join(problems),
                               component, **metrics))
        elif link.width_current is None and link.speed_current_gts is None:
            out.append(finding(name, Status.ERROR, f"PCIe link state unreadable{where}", component))
        else:
            out.append(finding(name, Status.PASS, f"{_gen(link.gen_current, link.speed_current_gts)} "
                               f"x{link.width_current if link.width_current is not None else '?'}{where}",
                               component, **metrics))
    return out
