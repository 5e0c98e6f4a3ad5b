"""GPU usage checks: is the GPU free of leftovers (processes, allocated memory) between jobs?

Checks: gpu.processes, gpu.memory_used.

Contexts: prolog (a job must get clean GPUs: leftover processes or memory from the previous job
mean out-of-memory errors or shared GPUs), epilog (the job's processes should be gone when it ends:
a survivor is a stuck/unkillable process, often a driver problem) and interactive ``check``.
Not ``slurm-check`` nor ``burnin``: HealthCheckProgram runs periodically while jobs are running,
and burn-in runs its own load, so busy GPUs are normal there. A pure check cannot know the context,
so the default is WARN; a site sets ``fail_if_any`` / ``fail`` in its thresholds to make leftovers
drain the node (thresholds apply to every context that runs the check). A process the finished job
left behind is judged in the epilog by ``job.stray_processes`` (killed by default).
"""
from __future__ import annotations

from ..expectations import Expectations
from ..model import Finding, GpuInfo, Snapshot, Status
from .gpu_inventory import each_gpu, not_reported
from .registry import check, finding

USAGE_CONTEXTS = frozenset({"check", "prolog", "epilog"})


def _basename(name: str | None) -> str:
    if not name:
        return "?"
    return name.rstrip("/").rsplit("/", 1)[-1] or name


@check("gpu.processes", needs=("gpus",), contexts=USAGE_CONTEXTS,
       thresholds={"fail_if_any": False, "ignore_names": []})
def gpu_processes(snap: Snapshot, exp: Expectations, t: dict) -> list[Finding]:
    """No compute process holds the GPU (outside a job).

    Processes present -> WARN naming pids and names (FAIL when threshold ``fail_if_any`` is true). Processes whose name (basename) is in ``ignore_names``
    (e.g. "nvidia-cuda-mps-server" where MPS is run on purpose) are not counted.
    SKIP when the process list is not reported.
    """
    name = "gpu.processes"
    bad = Status.FAIL if t.get("fail_if_any") else Status.WARN
    ignored = {str(n) for n in (t.get("ignore_names") or ())}

    def judge(g: GpuInfo) -> Finding:
        if g.processes is None:
            return not_reported(name, g, "process list")
        procs = [p for p in g.processes if _basename(p.name) not in ignored]
        if not procs:
            return finding(name, Status.PASS, "no compute process", g.component, processes=0)
        listed = ", ".join(f"{p.pid} ({_basename(p.name)})" for p in procs[:8])
        more = f" and {len(procs) - 8} more" if len(procs) > 8 else ""
        noun = "process" if len(procs) == 1 else "processes"
        return finding(name, bad, f"{len(procs)} compute {noun} on GPU: {listed}{more}", g.component,
                       processes=len(procs))

    return each_gpu(name, snap, judge, ("processes",))


@check("gpu.memory_used", needs=("gpus",), contexts=USAGE_CONTEXTS,
       thresholds={"max_used_mib": 1024, "fail": False})
def gpu_memory_used(snap: Snapshot, exp: Expectations, t: dict) -> list[Finding]:
    """GPU memory in use (outside a job) stays below ``max_used_mib``.

    Above the limit (1024 MiB) -> WARN, FAIL when threshold ``fail`` is true. The default leaves room
    for what the driver itself holds: recent drivers report reserved memory apart and show a few MiB
    used on an idle H100, older ones count a reservation of a few hundred MiB as used.
    SKIP when memory use is not reported.
    """
    name = "gpu.memory_used"
    limit = t.get("max_used_mib")
    bad = Status.FAIL if t.get("fail") else Status.WARN

    def judge(g: GpuInfo) -> Finding:
        used = g.memory_used_mib
        if used is None:
            return not_reported(name, g, "memory use")
        metrics = {"memory_used_mib": used, "memory_total_mib": g.memory_total_mib}
        total = f" of {g.memory_total_mib:g}" if g.memory_total_mib is not None else ""
        text = f"memory used {used:g}{total} MiB"
        if limit is not None and used > limit:
            return finding(name, bad, f"{text} (limit {limit:g} MiB)", g.component, **metrics)
        return finding(name, Status.PASS, text, g.component, **metrics)

    return each_gpu(name, snap, judge, ("memory_used_mib",))
