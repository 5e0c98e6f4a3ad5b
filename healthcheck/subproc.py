"""The one subprocess seam: argument lists only, a fixed executable resolved once, a deadline, and a
process-group kill when the deadline passes (so a hung child and its children all go)."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass

# Directories searched for tools; PATH of a slurmd child is often minimal, and root must not trust
# a user-writable PATH. Override per call with an absolute path.
SAFE_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
# Environment passed to children: fixed PATH and locale, nothing inherited by default.
SAFE_ENV = {"PATH": ":".join(SAFE_PATH), "LC_ALL": "C", "LANG": "C"}


# What a job step launched by us (srun, mpirun, nccl-tests) needs from the job's environment: Slurm's
# step context, the communication libraries' settings. Everything else (PATH, LD_PRELOAD, PYTHON*) stays out.
JOB_ENV_PREFIXES = ("SLURM_", "SLURMD_", "NCCL_", "CUDA_", "UCX_", "OMPI_", "PMIX_", "PMI_", "FI_", "HWLOC_",
                    "NVIDIA_")
JOB_ENV_KEEP = ("LD_LIBRARY_PATH", "HOME", "USER", "TMPDIR")


def job_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    """SAFE_ENV plus the job-step variables of ``environ`` (default: this process's environment)."""
    environ = os.environ if environ is None else environ
    env = dict(SAFE_ENV)
    for key, value in environ.items():
        if key in JOB_ENV_KEEP or key.startswith(JOB_ENV_PREFIXES):
            env[key] = value
    return env


def node_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    """For a process that runs on this node alone inside a job step (``all_reduce_perf -g 8``): the job
    env without the step's process-manager context (PMI/PMIx/OMPI ranks, SLURM_PROCID, SLURM_STEP_*),
    which would make an MPI-built binary believe it is one rank of the enclosing step."""
    env = job_env(environ)
    step_only = ("PMI_", "PMIX_", "OMPI_", "SLURM_STEP", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID",
                 "SLURM_TASK", "SLURM_NTASKS", "SLURM_NPROCS", "SLURM_SRUN", "SLURM_LAUNCH", "SLURM_DISTRIBUTION")
    return {k: v for k, v in env.items() if not k.startswith(step_only)}


class ToolNotFound(FileNotFoundError):
    pass


@dataclass
class Result:
    argv: list[str]
    returncode: int | None  # None when killed at the deadline
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out


_RESOLVED: dict[str, str] = {}


def which(tool: str) -> str | None:
    """Absolute path of ``tool`` from SAFE_PATH (never the caller's PATH); cached per process."""
    if os.path.isabs(tool):
        return tool if os.access(tool, os.X_OK) else None
    if tool not in _RESOLVED:
        found = shutil.which(tool, path=os.pathsep.join(SAFE_PATH))
        if found is None:
            return None
        _RESOLVED[tool] = found
    return _RESOLVED[tool]


def run(argv: list[str], timeout: float, env: dict[str, str] | None = None,
        max_output: int = 64 * 1024 * 1024) -> Result:
    """Run ``argv`` (no shell) with a deadline. Raises ToolNotFound when the tool is absent."""
    if not argv or not isinstance(argv, list):
        raise ValueError("argv must be a non-empty list")
    exe = which(argv[0])
    if exe is None:
        raise ToolNotFound(f"{argv[0]}: not found in {':'.join(SAFE_PATH)}")
    full = [exe, *argv[1:]]
    start = time.monotonic()
    proc = subprocess.Popen(full, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=dict(env or SAFE_ENV),
                            start_new_session=True, close_fds=True)
    try:
        out, err = proc.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        try:
            out, err = proc.communicate(timeout=1.0)
        except subprocess.TimeoutExpired:  # stuck in uninterruptible sleep: abandon it
            out, err = b"", b""
        timed_out = True
    return Result(full, None if timed_out else proc.returncode,
                  out[:max_output].decode("utf-8", "replace"), err[:max_output].decode("utf-8", "replace"),
                  time.monotonic() - start, timed_out)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
