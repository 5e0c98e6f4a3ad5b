"""What a healthy HealthCheckProgram run puts in the prolog's gate (see gate.py): the live facts that
would reveal a fault since, computed from the snapshot it judged, and the job-baseline counters."""
from __future__ import annotations

import os

from ..core.expectations import Expectations
from ..core.model import Snapshot


def sysfs_root_of(snap: Snapshot, exp: Expectations) -> str | None:
    """Where the snapshot's sysfs facts can be re-read: the bundle's sys/ folder, or the live root.
    None for a tarball bundle (nothing to re-read: the gate then vouches on its age alone)."""
    if snap.source.startswith("bundle:"):
        path = snap.source[len("bundle:"):]
        return os.path.join(path, "sys") if os.path.isdir(os.path.join(path, "sys")) else None
    return exp.sysfs_root or "/sys"


def gate_facts(snap: Snapshot, exp: Expectations) -> dict:
    from ..slurm.baseline import counters_of

    facts: dict = {"exists": [], "equals": [], "mount": list(exp.mounts), "counters": counters_of(snap)}
    root = sysfs_root_of(snap, exp)
    if root is None:
        return facts
    gpus = snap.gpu_pci_devices if snap.gpu_pci_devices is not None else \
        [g.pci_bus_id for g in (snap.gpus or []) if g.pci_bus_id]
    for bdf in gpus:
        path = os.path.join(root, "bus", "pci", "devices", bdf)
        if os.path.exists(path):
            facts["exists"].append(path)
    for port in snap.ib_ports or []:
        if port.state != "ACTIVE":
            continue
        path = os.path.join(root, "class", "infiniband", port.device, "ports", str(port.port), "state")
        try:
            with open(path, "rb") as fh:
                content = fh.read(256).decode("ascii", "replace").strip()
        except OSError:
            continue
        if "ACTIVE" in content:
            facts["equals"].append((path, content))
    return facts
