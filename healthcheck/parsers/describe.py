"""Human-readable summaries of parser results for `healthcheck parse` (no --json)."""
from __future__ import annotations


def _gpu_line(g) -> str:
    if g.lost:
        return f"gpu{g.index} {g.pci_bus_id or '?'}: LOST: {g.error or 'no answer'}"
    facts = [
        f"{g.name or '?'}",
        f"bus {g.pci_bus_id or '?'}",
        f"ecc {'on' if g.ecc_mode_current else 'off' if g.ecc_mode_current is False else '?'}",
        f"unc vol/agg {g.ecc_uncorrected_volatile}/{g.ecc_uncorrected_aggregate}",
        f"remap pend {g.remap_pending}",
        f"temp {g.temperature_c}C",
        f"pcie gen{g.pcie_gen_current}/{g.pcie_gen_max} x{g.pcie_width_current}/{g.pcie_width_max}",
    ]
    if g.throttle_reasons:
        facts.append("throttle " + ",".join(g.throttle_reasons))
    if g.fabric_state:
        facts.append(f"fabric {g.fabric_state}")
    return f"gpu{g.index}: " + "; ".join(facts)


def describe(kind: str, result) -> str:
    if kind == "nvidia-smi":
        head = f"nvidia-smi {result.format}: {len(result.gpus)} GPUs, driver {result.driver_version}, " \
               f"CUDA {result.cuda_version}"
        return "\n".join([head] + [_gpu_line(g) for g in result.gpus])
    if kind == "kernel-log":
        return nvidia_events(result)
    ports = getattr(result, "ports", result)
    lines = [f"{len(ports)} ports"]
    for p in ports:
        lines.append(f"{p.device}:{p.port} {p.state} {p.phys_state} {p.rate_gbps} Gb/s {p.link_layer} "
                     f"fw {p.firmware}")
    for err in getattr(result, "errors", []) or []:
        lines.append(f"error: {err}")
    return "\n".join(lines)



def when(e) -> str:
    """A kernel event's time as printed: its wall time, else its uptime, else "?"."""
    return e.time or (f"{e.uptime_s:.3f}s" if e.uptime_s is not None else "?")


def nvidia_events(events) -> str:
    nvidia = [e for e in events if e.kind != "host"]
    lines = [f"{len(nvidia)} NVIDIA kernel events" if nvidia else "no NVIDIA kernel events"]
    for e in nvidia:
        what = f"Xid {e.xid}" if e.kind == "xid" else e.kind
        proc = f" pid={e.pid} {e.process}" if e.pid is not None else ""
        lines.append(f"{when(e)} {e.pci_bus_id or '-'} {what}{proc}: {e.message}")
    return "\n".join(lines)
