"""Realistic run/action records, as healthcheck/slurm/actions.py writes them (an 8-GPU H100 node)."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

T0 = datetime(2026, 5, 1, 8, 0, tzinfo=timezone.utc)


def run_record(node: str, i: int, status: str = "pass", gpus: int = 8, run_id: str | None = None,
               when: datetime | None = None) -> dict:
    """Run number ``i`` of ``node``: one gpu.ecc finding per GPU (with counters and temperature),
    plus ib.ports and pcie.link_width findings."""
    started = when or (T0 + timedelta(hours=i))
    results = [{"check": "gpu.ecc", "status": status if g == 3 else "pass",
                "message": f"GPU{g}: {i * (g == 3)} correctable ECC errors", "component": f"GPU{g}",
                "metrics": {"ecc_sbe_volatile": float(i * (g == 3)), "temperature_c": 41.0 + g}}
               for g in range(gpus)]
    results += [{"check": "ib.ports", "status": "pass", "message": "8/8 ports Active at 400 Gb/s",
                 "component": None, "metrics": {}},
                {"check": "pcie.link_width", "status": "pass", "message": "x16", "component": "0000:18:00.0",
                 "metrics": {"width": 16.0}}]
    return {"kind": "run", "run_id": run_id or f"{node}-{i:06d}".ljust(32, "0"), "node": node,
            "context": "prolog", "job_id": str(1000 + i), "started_at": started.isoformat().replace("+00:00", "Z"),
            "duration_s": 0.031, "status": status, "results": results, "config_hash": "3f1c9a0b2d4e5f60",
            "tool_version": "0.1.0"}


def action_record(node: str, i: int, action: str = "drain") -> dict:
    return {"kind": "action", "record_id": f"act-{node}-{i:06d}", "run_id": f"{node}-{i:06d}".ljust(32, "0"),
            "node": node, "time": (T0 + timedelta(hours=i, seconds=1)).isoformat(), "action": action,
            "reason": f"healthcheck: gpu.ecc GPU3 [run {i}]" if action == "drain" else None,
            "job_id": str(1000 + i), "context": "prolog", "why": "gpu.ecc failed", "checks": ["gpu.ecc"]}


def write_spool(spool_dir, records) -> None:
    from healthcheck.spool import store as spool

    for rec in records:
        spool.append(spool_dir, rec)
