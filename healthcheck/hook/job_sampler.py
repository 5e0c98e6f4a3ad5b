"""The job sampler (issue 32.6): a job hung in a collective, reported within minutes, not a quarter hour.

HealthCheckProgram samples each GPU every ``HealthCheckInterval`` (300 s), so ``gpu.stalled`` (three
samples) speaks 600-900 s after a stall, past PyTorch's 10-minute NCCL timeout. The resident agent
(:mod:`healthcheck.agent.main`) therefore forks a short-lived child every ``[slurm] job_sample_interval_s``
(30 s) that runs :func:`sample` once and exits:

1. Slurm's job cgroups are listed (:func:`slurm_jobs`, a few ``listdir`` calls, no NVML): no job on the
   node, nothing is sampled (a job that ended has its samples cleared here);
2. otherwise NVML is opened, each GPU's utilisation, power, power limit and compute pids read, and NVML
   shut down again (:func:`healthcheck.probes.nvml.sample_gpus`: no session outlives the sample);
3. each pid's job comes from ``/proc/<pid>/cgroup`` (:func:`healthcheck.hook.gpu_samples.job_of`); a GPU's
   samples are kept while the same job runs on it (a new job, no job, or a gap starts them afresh);
4. the pure half judges (``gpu.stalled`` with ``job_samples`` readings in a row, and
   :func:`healthcheck.checks.gpu_usage.job_node_summary`); the first time a job's GPUs are pinned on this
   node, one spool run record (context ``job-sample``, status WARN, the job id and its node list) and a
   line in the agent's journal say so; when the job runs on again, a PASS record says that. The sampler
   never asks Slurm for anything: a stall drains no node, the healthy ranks' nor the culprit's.

The summaries of each job on this node stay in ``<state_dir>/job-samples.json``;
``healthcheck job stalls JOB`` gathers every node's (``srun --overlap``, or files) and names the nodes
whose GPUs differ from the rest (:func:`healthcheck.checks.gpu_usage.odd_nodes`). docs/job-stalls.md.
Lean imports (os, json, time): the agent forks this every 30 s.
"""
from __future__ import annotations

import json
import os
import time

from ..core.model import GpuInfo, GpuSample

FILE_NAME = "job-samples.json"
FORMAT_VERSION = 1
CONTEXT = "job-sample"
KEEP = 8  # samples kept per GPU (job_samples' default needs 4)
INTERVAL_S = 30.0
MAX_FILE_BYTES = 1 << 20
MAX_GPUS = 64
_V1_CONTROLLERS = ("freezer", "memory", "cpuset", "devices", "cpu,cpuacct")


def samples_path(state_dir: str) -> str:
    return os.path.join(state_dir, FILE_NAME)


def _listdir(path: str) -> list[str] | None:
    try:
        return os.listdir(path)
    except OSError:
        return None


def slurm_jobs(cgroup_root: str = "/sys/fs/cgroup") -> set[str] | None:
    """The ids of the Slurm jobs with a cgroup on this node: cgroup v2 (``system.slice/*slurmstepd.scope/
    job_<id>``) or v1 (``<controller>/slurm/uid_<uid>/job_<id>``). None when neither hierarchy is there
    (no Slurm cgroup plugin: the GPUs' processes alone say whether a job runs)."""
    found, jobs = False, set()
    for scope in [n for n in _listdir(os.path.join(cgroup_root, "system.slice")) or [] if n.endswith("slurmstepd.scope")]:
        names = _listdir(os.path.join(cgroup_root, "system.slice", scope))
        if names is not None:
            found = True
            jobs.update(n[4:] for n in names if n.startswith("job_") and n[4:].isdigit())
    for controller in _V1_CONTROLLERS:
        base = os.path.join(cgroup_root, controller, "slurm")
        uids = _listdir(base)
        if uids is None:
            continue
        found = True
        for uid in uids:
            if uid.startswith("uid_"):
                jobs.update(n[4:] for n in _listdir(os.path.join(base, uid)) or []
                            if n.startswith("job_") and n[4:].isdigit())
        break  # one controller's tree lists every job
    return jobs if found else None


def load(state_dir: str) -> dict:
    """The kept state ({"gpus": {key: {...}}, "jobs": {job: {...}}}); empty when absent or unusable
    (never trusted in part)."""
    empty = {"gpus": {}, "jobs": {}}
    try:
        fd = os.open(samples_path(state_dir), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return empty
    try:
        raw = os.read(fd, MAX_FILE_BYTES + 1)
    except OSError:
        return empty
    finally:
        os.close(fd)
    try:
        data = json.loads(raw.decode("utf-8")) if len(raw) <= MAX_FILE_BYTES else None
    except (UnicodeDecodeError, ValueError):
        data = None
    if not isinstance(data, dict) or data.get("version") != FORMAT_VERSION \
            or not isinstance(data.get("gpus"), dict) or not isinstance(data.get("jobs"), dict):
        return empty
    return {"gpus": dict(list(data["gpus"].items())[:MAX_GPUS]), "jobs": data["jobs"],
            "summaries": data.get("summaries") if isinstance(data.get("summaries"), dict) else {}}


def _num(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value else None


def _sample_of(data: dict) -> GpuSample:
    return GpuSample(taken_at=str(data.get("taken_at", ""))[:64], utilization_gpu_pct=_num(data.get("util")),
                     power_draw_w=_num(data.get("power")),
                     pids=[p for p in data.get("pids") or [] if isinstance(p, int)][:64],
                     jobs=[j for j in data.get("jobs") or [] if isinstance(j, str)][:64])


def gpus_of(state: dict) -> list[GpuInfo]:
    """The kept GPUs as GpuInfo with their samples (what the pure half judges)."""
    out = []
    for key, entry in state["gpus"].items():
        if not isinstance(entry, dict):
            continue
        out.append(GpuInfo(index=int(entry.get("index") or 0), uuid=key, power_limit_w=_num(entry.get("limit")),
                           idle_power_w=_num(entry.get("idle")),
                           samples=[_sample_of(s) for s in entry.get("samples") or [] if isinstance(s, dict)]))
    return sorted(out, key=lambda g: g.index)


def _job_nodes(pids: list[int], proc_root: str) -> str | None:
    """The job's node list (SLURM_JOB_NODELIST of one of its processes), where one says."""
    for pid in pids[:4]:
        try:
            fd = os.open(os.path.join(proc_root, str(pid), "environ"), os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            env = os.read(fd, 256 * 1024)
        except OSError:
            continue
        finally:
            os.close(fd)
        for item in env.split(b"\0"):
            if item.startswith(b"SLURM_JOB_NODELIST="):
                value = item[len(b"SLURM_JOB_NODELIST="):].decode("utf-8", "replace")[:4096]
                if value and all(c.isalnum() or c in "-_.,[]" for c in value):
                    return value
    return None


def _iso(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(epoch))


def sample(state_dir: str, node: str, spool_dir: str | None, thresholds: dict, *, now: float | None = None,
           nvml=None, proc_root: str = "/proc", cgroup_root: str = "/sys/fs/cgroup", interval_s: float = INTERVAL_S,
           config_path: str | None = None, log=None) -> dict:
    """One sample of this node (see the module's text). Returns {"sampled": bool, "summaries": {job:
    summary}, "reported": [jobs newly stalled], "cleared": [jobs no longer stalled], "note": str|None}.
    Never raises for I/O: a file it cannot read starts afresh, one it cannot write is the note."""
    from ..checks.gpu_usage import job_node_summary

    now = time.time() if now is None else now
    result = {"sampled": False, "summaries": {}, "reported": [], "cleared": [], "note": None}
    here = slurm_jobs(cgroup_root)
    state = load(state_dir)
    if here is not None and not here:  # no job on the node: no NVML; what was kept goes
        if state["gpus"] or state["jobs"]:
            result["cleared"] = _clear_reports(state, set(), node, spool_dir, config_path, now, result, log)
            result["note"] = _write(state_dir, {"gpus": {}, "jobs": {}, "summaries": {}}, now)
        return result
    from ..probes.nvml import NvmlUnavailable, sample_gpus
    from .gpu_samples import job_of, load as hcp_load

    try:
        readings = sample_gpus(nvml)
    except NvmlUnavailable as exc:
        result["note"] = f"job sample not taken: {exc}"
        return result
    result["sampled"] = True
    learnt = hcp_load(state_dir)[0]  # HealthCheckProgram's idle power per GPU, where it learnt one
    max_gap = max(3.0 * interval_s, 90.0)
    jobs_by_pid: dict[int, str | None] = {}
    gpus: dict[str, dict] = {}
    pids_of_job: dict[str, list[int]] = {}
    for reading in readings[:MAX_GPUS]:
        key = reading.get("key") or f"index:{reading['index']}"
        entry = state["gpus"].get(key) if isinstance(state["gpus"].get(key), dict) else {}
        if reading.get("error") and reading.get("power_draw_w") is None:
            continue
        pids = reading.get("pids") or []
        for pid in pids:
            if pid not in jobs_by_pid:
                jobs_by_pid[pid] = job_of(pid, proc_root)
            if jobs_by_pid[pid]:
                pids_of_job.setdefault(jobs_by_pid[pid], []).append(pid)
        jobs = sorted({jobs_by_pid[p] for p in pids if jobs_by_pid[p]})
        power = reading.get("power_draw_w")
        idle = _num(entry.get("idle"))
        hcp_idle = (learnt.get(key) or {}).get("idle_power_w")
        if hcp_idle is not None:
            idle = hcp_idle if idle is None else min(idle, hcp_idle)
        if not pids and power is not None and power >= 0:
            idle = power if idle is None else min(idle, power)
        current = {"t": now, "taken_at": _iso(now), "util": reading.get("utilization_gpu_pct"), "power": power,
                   "pids": pids, "jobs": jobs}
        history = [s for s in entry.get("samples") or [] if isinstance(s, dict)]
        if not jobs or not history or history[-1].get("jobs") != jobs \
                or not 0 <= now - (_num(history[-1].get("t")) or 0.0) <= max_gap:
            history = []
        history = (history + [current])[-KEEP:] if jobs else []
        gpus[key] = {"index": reading["index"], "limit": reading.get("power_limit_w"), "idle": idle,
                     "samples": history}
    state["gpus"] = gpus
    judged = gpus_of(state)
    running = set(pids_of_job) | (here or set())
    t = dict(thresholds)
    t["fail"] = False  # a stall seen by the sampler is WARN, whatever HealthCheckProgram's gpu.stalled does
    for job in sorted(running):
        of_job = [g for g in judged if g.samples and job in g.samples[-1].jobs]
        summary = job_node_summary(node, job, of_job, t)
        result["summaries"][job] = summary
        kept = state["jobs"].get(job) if isinstance(state["jobs"].get(job), dict) else {}
        if summary["pinned"] and not kept.get("reported"):
            kept["job_nodes"] = kept.get("job_nodes") or _job_nodes(pids_of_job.get(job, []), proc_root)
            _record(node, job, of_job, t, spool_dir, config_path, now, kept.get("job_nodes"), result, log)
            kept["reported"] = _iso(now)
            result["reported"].append(job)
        elif not summary["pinned"] and kept.get("reported"):
            _record_clear(node, job, "runs on (its GPUs are no longer pinned at idle power)", spool_dir,
                          config_path, now, kept.get("job_nodes"), result, log)
            kept["reported"] = None
            result["cleared"].append(job)
        state["jobs"][job] = kept
    result["cleared"] += _clear_reports(state, running, node, spool_dir, config_path, now, result, log)
    state["summaries"] = result["summaries"]
    note = _write(state_dir, state, now)
    result["note"] = "; ".join(n for n in (result["note"], note) if n) or None
    return result


def _clear_reports(state: dict, running: set[str], node, spool_dir, config_path, now, result, log) -> list[str]:
    """Jobs that ended: their entries go; one whose stall was reported gets its PASS record."""
    ended = []
    for job, kept in list(state["jobs"].items()):
        if job in running:
            continue
        del state["jobs"][job]
        if isinstance(kept, dict) and kept.get("reported"):
            _record_clear(node, job, "ended", spool_dir, config_path, now, kept.get("job_nodes"), result, log)
            ended.append(job)
    return ended


def _record(node, job, gpus, t, spool_dir, config_path, now, job_nodes, result, log) -> None:
    from ..checks.gpu_usage import gpu_stalled
    from ..core.model import Snapshot

    need = max(1, int(t.get("job_samples") or t.get("samples") or 1))
    snap = Snapshot(node=node, taken_at=_iso(now), gpus=[_only_job(g, job) for g in gpus])
    findings = gpu_stalled(snap, None, dict(t, samples=need))
    _append(node, job, findings, spool_dir, config_path, now, job_nodes, result)
    if log:
        pinned = [f.component for f in findings if f.status.value == "warn"]
        log(f"job {job} looks stalled in a collective on {node}: {', '.join(pinned)} busy at near-idle power for "
            f"{need} samples in a row (recorded as WARN; `healthcheck job stalls {job}` names the node that differs)")


def _only_job(gpu: GpuInfo, job: str) -> GpuInfo:
    gpu.samples = [s for s in gpu.samples or [] if job in s.jobs]
    return gpu


def _record_clear(node, job, how, spool_dir, config_path, now, job_nodes, result, log) -> None:
    from ..checks.registry import finding
    from ..core.model import Status

    _append(node, job, [finding("gpu.stalled", Status.PASS, f"job {job} {how}; its stall was reported earlier")],
            spool_dir, config_path, now, job_nodes, result)
    if log:
        log(f"job {job} on {node}: {how}")


def _append(node, job, findings, spool_dir, config_path, now, job_nodes, result) -> None:
    if not spool_dir:
        return
    from ..core.model import Verdict
    from ..spool.append import append_line
    from ..spool.entries import new_run_id, run_record
    from ..spool.store import SpoolError, encode

    verdict = Verdict.of(node, findings, _iso(now), 0.0, CONTEXT)
    try:
        append_line(spool_dir, encode(run_record(verdict, new_run_id(), job, config_path, job_nodes)), durable=True)
    except (SpoolError, ValueError, OSError) as exc:
        result["note"] = f"spool not written for job {job}: {exc}"


def _write(state_dir: str, state: dict, now: float) -> str | None:
    from ..safeio.atomic import atomic_write, make_dirs

    data = {"version": FORMAT_VERSION, "taken_at": _iso(now), "gpus": state["gpus"], "jobs": state["jobs"],
            "summaries": state.get("summaries") or {}}
    try:
        make_dirs(state_dir, 0o700)
        atomic_write(samples_path(state_dir), json.dumps(data, allow_nan=False), 0o600, private_dir=True,
                     durable=False)
    except (OSError, ValueError) as exc:
        return f"job samples not written to {samples_path(state_dir)}: {exc}"
    return None


def settings_for(config_path: str | None, node: str):
    """(state dir of this node, spool dir, gpu.stalled's thresholds, interval in seconds; 0: off) from the
    hooks' config (the agent's warm copy while the file is unchanged)."""
    from ..checks.registry import index
    from .run import DEFAULT_CONFIG, default_settings, load_config

    config, exp = load_config(config_path or DEFAULT_CONFIG, node)
    settings = config.slurm if config else default_settings()
    thresholds = exp.thresholds_for("gpu.stalled", index()["gpu.stalled"].thresholds)
    return os.path.join(settings.state_dir, node), settings.spool_dir, thresholds, settings.job_sample_interval_s


def run_once(config_path: str | None, node: str, log=None) -> int:
    """What the agent's sampler child runs: one sample with the config's settings. 0, always (a sampler
    never fails anything; what went wrong is logged)."""
    try:
        state_dir, spool_dir, thresholds, interval = settings_for(config_path, node)
        if interval <= 0:
            return 0
        from ..probes.pcibus import nvidia_gpu_present

        if not nvidia_gpu_present():
            return 0
        result = sample(state_dir, node, spool_dir, thresholds, interval_s=interval, config_path=config_path, log=log)
        if result["note"] and log:
            log(result["note"])
    except Exception as exc:  # noqa: BLE001 - the sampler never stops the agent; said in its journal
        if log:
            log(f"job sample failed: {type(exc).__name__}: {exc}")
    return 0


def show(state_dir: str, job: str | None = None) -> list[dict]:
    """This node's summaries as the last sample left them (all jobs, or ``job``'s)."""
    summaries = load(state_dir).get("summaries") or {}
    return [s for j, s in sorted(summaries.items()) if isinstance(s, dict) and (job is None or j == job)]


def main(argv: list[str] | None = None) -> int:
    """``python -I -m healthcheck.hook.job_sampler [--config FILE] [--show [JOB]]``: one sample (a systemd
    timer's way without the agent), or this node's summaries as JSON lines (what ``healthcheck job stalls``
    gathers from each node of a job through ``srun``)."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(prog="python -m healthcheck.hook.job_sampler")
    parser.add_argument("--config", default=os.environ.get("HEALTHCHECK_CONFIG"))
    parser.add_argument("--show", nargs="?", const="", default=None, metavar="JOB")
    args = parser.parse_args(argv)
    node = os.environ.get("SLURMD_NODENAME") or os.uname().nodename.split(".")[0]

    def log(message: str) -> None:
        sys.stderr.write(f"healthcheck job sampler: {message}\n")

    if args.show is not None:
        state_dir = settings_for(args.config, node)[0]
        for summary in show(state_dir, args.show or None) or [{"node": node, "job": args.show or None, "gpus": 0,
                                                                   "pinned": [], "not_pinned": [], "judged": False}]:
            sys.stdout.write(json.dumps(summary, sort_keys=True) + "\n")
        return 0
    return run_once(args.config, node, log)


if __name__ == "__main__":
    raise SystemExit(main())
