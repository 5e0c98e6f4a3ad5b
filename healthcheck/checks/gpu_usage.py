"""GPU usage checks: is the GPU free of leftovers (processes, allocated memory) between jobs?

Checks: gpu.processes, gpu.memory_used, gpu.stalled. Also the pure half of the job sampler (issue 32.6):
:func:`job_node_summary` (one node's GPUs of one job) and :func:`odd_nodes` (across the job's nodes, the
ones whose GPUs differ from the rest: the likely culprit of a stalled collective).

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

from ..core.expectations import Expectations
from ..core.model import Finding, GpuInfo, GpuSample, Snapshot, Status
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
    for what the driver itself holds: recent drivers report reserved memory apart (nvidia-smi, and NVML's
    second memory call, which the probe uses: 616 MiB reserved and 0 used on an idle H200, driver 580);
    older ones count a reservation of a few hundred MiB as used.
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


# ------------------------------------------------------------------------------- gpu.stalled


def is_stalled_sample(sample: GpuSample, idle_w: float | None, limit_w: float | None, t: dict) -> bool:
    """One reading looks like a GPU hung in a collective: a compute process on it, utilisation at or
    above ``min_util_pct`` and power near idle (within ``idle_margin_fraction`` of the power limit above
    the GPU's learnt idle power, else at most ``max_power_fraction`` of the limit)."""
    util, power = sample.utilization_gpu_pct, sample.power_draw_w
    if util is None or power is None or not sample.pids or not limit_w or limit_w <= 0:
        return False
    if util < float(t.get("min_util_pct") or 0):
        return False
    if idle_w is not None:
        return power <= idle_w + float(t.get("idle_margin_fraction") or 0) * limit_w
    return power <= float(t.get("max_power_fraction") or 0) * limit_w


def _shared_jobs(samples: list[GpuSample]) -> tuple[list[str], list[int]]:
    """The job ids (and pids) every sample shares: the same job stalled throughout."""
    jobs = set(samples[0].jobs)
    pids = set(samples[0].pids)
    for s in samples[1:]:
        jobs &= set(s.jobs)
        pids &= set(s.pids)
    return sorted(jobs), sorted(pids)


@check("gpu.stalled", needs=("gpus",), contexts=("slurm-check",),
       thresholds={"samples": 3, "min_util_pct": 95, "idle_margin_fraction": 0.1, "max_power_fraction": 0.2,
                   "fail": False, "job_samples": 4},
       fails_by_default=False,
       fails_on="threshold fail = true: FAIL for a GPU busy at near-idle power for `samples` runs in a row; "
                "by default WARN naming the job")
def gpu_stalled(snap: Snapshot, exp: Expectations, t: dict) -> list[Finding]:
    """A GPU hung inside a collective (the signature behind NCCL watchdog timeouts): for the last
    ``samples`` (3) HealthCheckProgram runs in a row, the same job's process on it, utilisation at or above
    ``min_util_pct`` (95 %: a kernel is resident, spinning) and power near idle: within
    ``idle_margin_fraction`` (0.1) of the power limit above the idle power learnt for this GPU (the
    lowest draw seen with no compute process), or at most ``max_power_fraction`` (0.2) of the limit
    before any idle reading (an H100 SXM idles at 60-75 W of 700 W and draws several hundred under any
    real kernel). WARN naming the job and its processes (``fail`` true: FAIL): a stalled collective is
    most often the victim of a peer rank or the network, so by default it does not drain this node.
    The samples are kept between runs in the state directory (healthcheck.hook.gpu_samples);
    SKIP where there is no history (any context but HealthCheckProgram, or the first runs).
    The agent's job sampler (healthcheck.hook.job_sampler, every 30 s while a job holds the node) judges its
    own denser samples with this check and ``job_samples`` (4) in place of ``samples``: a stall is
    recorded within 2 minutes, always as WARN (it never drains; docs/job-stalls.md).
    """
    name = "gpu.stalled"
    need = max(1, int(t.get("samples") or 1))
    bad = Status.FAIL if t.get("fail") else Status.WARN

    def judge(g: GpuInfo) -> Finding:
        history = g.samples
        if history is None:
            return finding(name, Status.SKIP, "no sample history (kept by HealthCheckProgram)", g.component)
        if len(history) < need:
            return finding(name, Status.SKIP, f"{len(history)} of {need} samples so far", g.component)
        recent = history[-need:]
        stalled = [is_stalled_sample(s, g.idle_power_w, g.power_limit_w, t) for s in recent]
        metrics = {"stalled_samples": sum(stalled), "utilization_gpu_pct": recent[-1].utilization_gpu_pct,
                   "power_draw_w": recent[-1].power_draw_w}
        jobs, pids = _shared_jobs(recent)
        if all(stalled) and (jobs or pids):
            who = f"job {', '.join(jobs)}" if jobs else "the same processes"
            idle = f"idle {g.idle_power_w:g} W" if g.idle_power_w is not None else "no idle reading yet"
            powers = ", ".join(f"{s.power_draw_w:g}" for s in recent)
            utils = ", ".join(f"{s.utilization_gpu_pct:g}" for s in recent)
            return finding(name, bad, f"{who} (pids {', '.join(map(str, pids[:8]))}) looks stalled in a "
                           f"collective: {need} samples in a row at {utils} % utilisation with power near idle "
                           f"({powers} W; {idle}, limit {g.power_limit_w:g} W, {recent[0].taken_at} to "
                           f"{recent[-1].taken_at}); check the job's NCCL logs and its peers",
                           g.component, **metrics)
        last = recent[-1]
        state = "no compute process" if not last.pids else \
            f"{_num(last.utilization_gpu_pct)} % utilisation at {_num(last.power_draw_w)} W"
        return finding(name, Status.PASS, f"not stalled ({state}; {sum(stalled)} of the last {need} samples "
                       "busy at near-idle power)", g.component, **metrics)

    return each_gpu(name, snap, judge, ())


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:g}"


# ------------------------------------------------------------- the job sampler's view (issue 32.6)


def job_node_summary(node: str, job_id: str, gpus: list[GpuInfo], t: dict) -> dict:
    """One node's GPUs of one job, from their samples (``GpuInfo.samples``, the newest last): how many
    are pinned (the last ``job_samples`` readings all busy at near-idle power, by :func:`is_stalled_sample`,
    the job on each), since when, and the latest utilisation and power. Pure; plain data (JSON) so that
    the nodes' summaries can be gathered and compared by :func:`odd_nodes`."""
    need = max(1, int(t.get("job_samples") or t.get("samples") or 1))
    pinned, unpinned, since, utils, fractions, powers, judged = [], [], [], [], [], [], True
    for g in gpus:
        history = [s for s in (g.samples or []) if job_id in s.jobs]
        if not history:
            continue
        last = history[-1]
        if last.utilization_gpu_pct is not None:
            utils.append(last.utilization_gpu_pct)
        if last.power_draw_w is not None:
            powers.append(last.power_draw_w)
            if g.power_limit_w:
                fractions.append(last.power_draw_w / g.power_limit_w)
        if len(history) < need:
            judged = False
            unpinned.append(g.index)
            continue
        recent = history[-need:]
        if all(is_stalled_sample(s, g.idle_power_w, g.power_limit_w, t) for s in recent):
            pinned.append(g.index)
            since.append(recent[0].taken_at)
        else:
            unpinned.append(g.index)
    return {"node": node, "job": job_id, "gpus": len(pinned) + len(unpinned), "pinned": sorted(pinned),
            "not_pinned": sorted(unpinned), "judged": judged,
            "pinned_since": min(since) if since else None,
            "utilization_gpu_pct": _mean(utils), "power_draw_w": _mean(powers),
            "power_fraction": _mean(fractions)}


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 3) if values else None


def odd_nodes(summaries: list[dict], nodes: list[str] | None = None) -> dict:
    """Across the nodes of one job (:func:`job_node_summary` of each; ``nodes``: the job's node list,
    where known), which nodes differ from the rest. A node is *pinned* when every GPU it runs the job on
    is pinned. When some nodes are pinned and others are not, the ranks on the pinned nodes wait in a
    collective for the ones that are not: those are named ``odd`` (the likely culprit: busy at higher power,
    idle, or no GPU process of the job left). Every node pinned: ``odd`` is empty (the whole job waits: the fabric, or
    a rank outside these nodes). No node pinned: no stall. A node without a judged summary (too few
    samples, no sampler, unreachable) is ``unknown``, never named. Pure."""
    by_node = {s.get("node"): s for s in summaries if isinstance(s, dict) and s.get("node")}
    known = [n for n, s in by_node.items() if s.get("judged")]
    pinned = sorted(n for n in known if by_node[n].get("gpus") and not by_node[n].get("not_pinned"))
    others = sorted(n for n in known if n not in pinned)
    unknown = sorted((set(nodes or ()) | set(by_node)) - set(known))
    stalled = bool(pinned)
    odd = others if stalled else []
    if not stalled:
        why = "no node's GPUs are pinned at idle power: not stalled"
    elif odd:
        parts = []
        for n in odd:
            s = by_node[n]
            power = f"{s['power_draw_w']:g} W" if s.get("power_draw_w") is not None else "power n/a"
            util = f"{s['utilization_gpu_pct']:g} %" if s.get("utilization_gpu_pct") is not None else "util n/a"
            parts.append(f"{n} (GPUs {','.join(map(str, s['not_pinned']))} not pinned: {util} at {power})"
                         if s.get("gpus") else f"{n} (no GPU process of the job)")
        why = (f"{len(pinned)} node(s) pinned at idle power wait in a collective; the likely culprit: "
               + "; ".join(parts))
    else:
        why = ("every node's GPUs are pinned at idle power: the whole job waits (suspect the fabric, or a rank "
               "on a node without samples)")
    return {"stalled": stalled, "pinned": pinned, "odd": odd, "unknown": unknown, "why": why}
