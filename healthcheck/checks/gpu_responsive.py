"""gpu.responsive: the GPU driver answered at all."""
from __future__ import annotations

from ..core.model import Finding, Snapshot, Status
from .registry import CONTEXTS, check


@check("gpu.responsive", needs=("gpus",), contexts=CONTEXTS, handles_missing=True)
def gpu_responsive(snap: Snapshot, exp, t) -> list[Finding]:
    """FAIL when the GPU probe did not return within its deadline (the driver is wedged: every job on
    this node would hang too) or when NVIDIA GPUs sit on the PCI bus but neither NVML nor nvidia-smi can
    query them (driver not loaded, RmInitAdapter failures). SKIP on nodes without NVIDIA GPUs."""
    name = "gpu.responsive"
    err = snap.probe_errors.get("gpus")
    on_bus = len(snap.gpu_pci_devices or [])
    if err is not None and err.kind == "hang":
        return [Finding(name, Status.FAIL, f"GPU driver did not answer: {err.message} (driver wedged)",
                        None, {"gpus_on_pci_bus": float(on_bus)})]
    if err is not None:
        status = Status.FAIL if on_bus else Status.ERROR
        where = f"{on_bus} NVIDIA GPUs on the PCI bus but the driver cannot be queried: " if on_bus else ""
        return [Finding(name, status, f"{where}{err.message}", None, {"gpus_on_pci_bus": float(on_bus)})]
    if snap.gpus is None:
        return [Finding(name, Status.SKIP, "no NVIDIA GPU on this node")]
    duration = snap.probe_durations_s.get("gpus")
    metrics = {"probe_s": duration} if duration is not None else {}
    return [Finding(name, Status.PASS, f"GPU driver answered for {len(snap.gpus)} GPUs", None, metrics)]
