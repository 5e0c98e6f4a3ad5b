"""The one subprocess seam: argument lists only, a fixed executable resolved once, a deadline, bounded
output, and a process-group kill when the deadline passes or the output overflows (so a hung or flooding
child and its children all go, and neither can hold the caller past its deadline or fill its memory)."""
from __future__ import annotations

import os
import signal
import subprocess  # (imports selectors) only where a tool is run: the prolog runs none
import time
from ..core.struct import record as dataclass

# Directories searched for tools; PATH of a slurmd child is often minimal, and root must not trust
# a user-writable PATH. Override per call with an absolute path.
SAFE_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
# Environment passed to children: fixed PATH and locale, nothing inherited by default.
SAFE_ENV = {"PATH": ":".join(SAFE_PATH), "LC_ALL": "C", "LANG": "C"}
# Bytes kept of each of stdout and stderr by default: far above any tool output we parse (nvidia-smi -q -x
# of a 16-GPU node is about 2 MB, ibnetdiscover of a 2,000-node fabric about 10 MB), far below what
# would hurt a node. A tool that writes more is killed (see run()).
MAX_OUTPUT_BYTES = 64 * 1024 * 1024
REAP_GRACE_S = 0.1  # after SIGKILL: how long to wait for the child's exit status before leaving it
_CHUNK = 64 * 1024


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
    """What one run gave. ``returncode`` is None when we killed the child (deadline or output limit);
    ``timed_out``: the deadline passed; ``truncated``: stdout or stderr exceeded ``max_output`` bytes, what
    was read up to the limit is kept, and a line saying so ends ``stderr``."""

    argv: list[str]
    returncode: int | None  # None when killed by us
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool = False
    truncated: bool = False

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out and not self.truncated


_RESOLVED: dict[str, str] = {}


def which(tool: str) -> str | None:
    """Absolute path of ``tool`` from SAFE_PATH (never the caller's PATH); cached per process."""
    if os.path.isabs(tool):
        return tool if os.access(tool, os.X_OK) else None
    if tool not in _RESOLVED:
        found = next((os.path.join(d, tool) for d in SAFE_PATH
                      if os.path.isfile(os.path.join(d, tool)) and os.access(os.path.join(d, tool), os.X_OK)),
                     None)
        if found is None:
            return None
        _RESOLVED[tool] = found
    return _RESOLVED[tool]


def run(argv: list[str], timeout: float, env: dict[str, str] | None = None,
        max_output: int = MAX_OUTPUT_BYTES, deadline: float | None = None) -> Result:
    """Run ``argv`` (no shell) for at most ``timeout`` seconds, and never past ``deadline`` (a
    ``time.monotonic()`` instant, e.g. the end of a hook's budget) when one is given.

    Output is read as it comes, never more than ``max_output`` bytes of each stream: at the limit the
    reading stops and the child's process group is killed (``truncated``). At the deadline the group is
    killed (``timed_out``). Either way the call returns within about ``REAP_GRACE_S`` of its deadline. A
    deadline already past starts nothing (``timed_out``, duration 0). Raises ToolNotFound when the tool is
    absent, ValueError for an argv that is not a non-empty list or a limit that is not positive.
    """
    if not argv or not isinstance(argv, list):
        raise ValueError("argv must be a non-empty list")
    if not isinstance(max_output, int) or max_output <= 0:
        raise ValueError(f"max_output must be a positive number of bytes, got {max_output!r}")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:  # NaN too
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    exe = which(argv[0])
    if exe is None:
        raise ToolNotFound(f"{argv[0]}: not found in {':'.join(SAFE_PATH)}")
    full = [exe, *argv[1:]]
    start = time.monotonic()
    end = start + timeout if deadline is None else min(start + timeout, deadline)
    if end <= start:
        return Result(full, None, "", "healthcheck: not started, its deadline had passed\n", 0.0, timed_out=True)
    proc = subprocess.Popen(full, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=dict(env or SAFE_ENV),
                            start_new_session=True, close_fds=True)
    try:
        out, err, timed_out, truncated = _read_bounded(proc, end, max_output)
        if not (timed_out or truncated):
            try:  # the child closed its output; it may still run
                proc.wait(timeout=max(end - time.monotonic(), 0.001))
            except subprocess.TimeoutExpired:
                timed_out = True
    finally:
        killed = proc.returncode is None
        if killed:  # deadline, output limit, or an exception in the parent: never leave it running
            _kill_group(proc)
            try:
                proc.wait(timeout=REAP_GRACE_S)
            except subprocess.TimeoutExpired:
                pass  # uninterruptible sleep: subprocess reaps it on a later call
        for stream in (proc.stdout, proc.stderr):
            stream.close()
    note = ""
    if truncated:
        note = f"\nhealthcheck: output exceeded {max_output} bytes: stopped reading, process group killed\n"
    elif timed_out:
        note = f"\nhealthcheck: no exit within {end - start:.3g} s: process group killed\n"
    return Result(full, None if killed else proc.returncode, out.decode("utf-8", "replace"),
                  err.decode("utf-8", "replace") + note, time.monotonic() - start, timed_out, truncated)


def run_until(argv: list[str], end: float, what: str, run=None,
              max_output: int = MAX_OUTPUT_BYTES) -> tuple[Result | None, str | None]:
    """One of a probe's tool calls under its shared deadline ``end`` (a ``time.monotonic()`` instant):
    ``(result, None)``, or ``(result or None, why)`` with one line naming the call when it was not started
    (``what``'s deadline had passed), could not start (OSError: absent, not executable), or gave no answer
    in time. Exit codes and output are the caller's to judge. ``run``: this module's ``run`` (tests pass a
    fake)."""
    label = " ".join(argv)
    timeout = end - time.monotonic()
    if timeout <= 0:
        return None, f"{label}: not run, the {what} deadline had passed"
    try:
        res = (run or globals()["run"])(argv, timeout=timeout, deadline=end, max_output=max_output)
    except OSError as exc:
        return None, f"{label}: {exc}"
    if res.timed_out:
        return res, f"{label}: no answer within the deadline"
    return res, None


def failure_text(res: Result) -> str:
    """``exit N: <the last line of stderr>`` (or ``no output``) of a call that failed."""
    why = (res.stderr or "").strip().splitlines()
    return f"exit {res.returncode}: {why[-1][:200] if why else 'no output'}"


def _read_bounded(proc: subprocess.Popen, end: float, max_output: int) -> tuple[bytes, bytes, bool, bool]:
    """Read stdout and stderr until both close, ``end`` passes, or one exceeds ``max_output``."""
    bufs = {proc.stdout.fileno(): bytearray(), proc.stderr.fileno(): bytearray()}
    import selectors

    with selectors.DefaultSelector() as sel:
        for fd in bufs:
            sel.register(fd, selectors.EVENT_READ)
        while sel.get_map():
            remaining = end - time.monotonic()
            if remaining <= 0:
                return bytes(bufs[proc.stdout.fileno()]), bytes(bufs[proc.stderr.fileno()]), True, False
            for key, _ in sel.select(remaining):
                chunk = os.read(key.fd, _CHUNK)
                if not chunk:
                    sel.unregister(key.fd)
                    continue
                buf = bufs[key.fd]
                room = max_output - len(buf)
                buf += chunk[:room]
                if len(chunk) > room:
                    return bytes(bufs[proc.stdout.fileno()]), bytes(bufs[proc.stderr.fileno()]), False, True
    return bytes(bufs[proc.stdout.fileno()]), bytes(bufs[proc.stderr.fileno()]), False, False


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
