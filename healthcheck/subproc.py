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
