"""What the warm agent's processes run around the hook (:mod:`healthcheck.agent.main`): the config kept
warm before the workers fork, a worker taking the wrapper's environment, and the prepared child's task
and warm-up. Kept out of :mod:`hooks`, whose every line a hook started by slurmd loads."""
from __future__ import annotations

import os

from ..hook import run as hooks


def keep_warm(path: str, node: str) -> None:
    """Load ``path`` for ``node`` now and keep it for later runs in this process and its forks (the agent)."""
    identity = hooks.identity(path)
    config, exp = hooks.load_config(path, node)
    if identity is not None and config is not None and identity == hooks.identity(path):
        hooks.warm_configs[(path, node)] = (identity, config, exp)


def adopt(env: dict, cwd: str, umask: int) -> None:
    """Take another process's environment, working directory and umask (the agent's worker takes the
    wrapper's, its prepared child the worker's): the hook then runs as in the wrapper's own process."""
    os.environ.clear()
    os.environ.update(env)
    os.umask(umask)
    try:
        os.chdir(cwd)
    except OSError:
        os.chdir("/")


def run_task(task: dict):
    """``work`` for a task handed to a prepared child, in the environment, directory and umask of the run
    that handed it; the config by path (the warm one while the file is unchanged, as the parent read it)."""
    adopt(task["env"], task["cwd"], task["umask"])
    config, exp = hooks.load_config(task["config"], task["node"])
    settings = config.slurm if config else hooks.default_settings()
    return hooks.work(task["context"], task["node"], exp, settings, task["job_id"], task["state_dir"],
                      task["started"], task["budget"], task["acknowledged"], task.get("hook_pid"))


# The contexts a prepared child warms itself for: the hooks on a job's path. HealthCheckProgram's own
# sources (storage, BMC, mlxlink) run tools: never in a warm-up.
WARM_CONTEXTS = ("prolog", "epilog")


def warm_run(config_path: str, node: str) -> None:
    """Probe and judge once for the prolog and the epilog, and scan /proc as the epilog does, keeping
    nothing but an open reader of the kernel's ring buffer (a prepared child's warming): the pages, the
    compiled patterns and the kernel's file caches a run touches are then in place. No GPU call (a wedged
    GPU must be found by the run, within its deadline), no tool run and nothing written. A warm-up held
    up (a process whose environ cannot be read, a slow mount) only means the run forks its own child
    (``Prepared.alive``)."""
    from ..pipeline.acquire import snapshot_for
    from ..pipeline.judge import judge, sources_needed
    from ..core.clock import utc_now_iso

    _config, exp = hooks.load_config(config_path, node)
    sources = frozenset().union(*(sources_needed(exp, context) for context in WARM_CONTEXTS)) - {"gpus", "job"}
    snap = snapshot_for(node, exp, utc_now_iso(), sources=sources, processes=False)
    judge(snap, exp, "prolog")
    from ..core.model import JobInfo
    from ..probes.jobprocs import find_job_processes

    # the epilog's scan of /proc, for a job no process belongs to (~1 ms off its run; nothing is killed),
    # and its job checks judged on that
    snap.job = JobInfo(job_id="0", stray_processes=find_job_processes("0"))
    judge(snap, exp, "epilog")
    import time

    from ..probes.kmsg import KMSG, keep_reading

    try:  # the run then reads only what the kernel logged since (kmsg.read_raw)
        keep_reading(KMSG, time.monotonic() + 2.5)
    except OSError:
        pass  # not readable here: the run reads it as ever (or runs dmesg)


def warm_nvml() -> bool:
    """Import pynvml where the PCI bus shows an NVIDIA GPU: ~10-25 ms of imports (ctypes.util and what it
    pulls in) each GPU node's hook would pay. Only the module: NVML's library is loaded, and a GPU
    touched, by a run's nvmlInit (a session is never kept open between runs: it would stand in the way of
    a GPU reset). False when the bus shows a GPU and pynvml cannot be imported (the run reports it)."""
    from ..probes.pcibus import nvidia_gpu_present

    try:
        if not nvidia_gpu_present():
            return True
        import pynvml  # noqa: F401, PLC0415
    except Exception:  # noqa: BLE001 - an unreadable bus or a broken pynvml: the run probes and reports it
        return False
    return True
