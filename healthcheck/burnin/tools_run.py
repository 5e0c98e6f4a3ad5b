"""Run the external diagnostics of the burn-in: ``dcgmi diag``, ``fio`` (and, for nccl_run.py, any
tool) (I/O only; judged in judge_tools.py). Each run has a deadline, goes through the one subprocess seam, and returns the raw text
with the exit status; an absent tool is reported as such (the phase is skipped, not failed)."""
from __future__ import annotations

import os
from dataclasses import dataclass

from ..safeio import subproc


@dataclass
class ToolRun:
    tool: str
    argv: list[str]
    stdout: str = ""
    stderr: str = ""
    returncode: int | None = None
    timed_out: bool = False
    missing: bool = False
    error: str | None = None
    duration_s: float = 0.0


def run_tool(tool: str, argv: list[str], timeout_s: float, env: dict[str, str] | None = None) -> ToolRun:
    """``argv`` through the subprocess seam with the job-step environment (or ``env``); an absent
    tool comes back ``missing``, a deadline passed ``timed_out`` with ``error`` set, never raises."""
    run = ToolRun(tool, argv)
    try:
        res = subproc.run(argv, timeout=timeout_s, env=env if env is not None else subproc.job_env())
    except subproc.ToolNotFound as exc:
        run.missing, run.error = True, str(exc)
        return run
    except OSError as exc:
        run.error = f"cannot start {argv[0]}: {exc.strerror or exc}"
        return run
    run.argv, run.stdout, run.stderr = res.argv, res.stdout, res.stderr
    run.returncode, run.timed_out, run.duration_s = res.returncode, res.timed_out, res.duration_s
    if res.timed_out:
        run.error = f"did not finish within {timeout_s:g} s (killed)"
    return run


def dcgm_diag(dcgmi: str, level: int, timeout_s: float, gpu_ids: list[int] | None = None) -> ToolRun:
    """``dcgmi diag -r LEVEL -j`` (JSON; the parser also reads the text table when a DCGM build prints
    that instead). dcgmi exits non-zero when a test fails: the output is what counts."""
    argv = [dcgmi, "diag", "-r", str(level), "-j"]
    if gpu_ids:
        argv[2:2] = ["-i", ",".join(str(i) for i in gpu_ids)]
    return run_tool("dcgmi", argv, timeout_s)


def fio_job(fio: str, directory: str, rw: str, size_bytes: int, runtime_s: float, timeout_s: float,
            block: str = "1M", numjobs: int = 4, iodepth: int = 32) -> ToolRun:
    """One fio job against ``directory`` (a test file fio creates there and we remove), JSON output."""
    if not os.path.isdir(directory):
        run = ToolRun("fio", [fio])
        run.error = f"storage path {directory} is not a directory"
        return run
    name = f"healthcheck-burnin-{rw}"
    argv = [fio, f"--name={name}", f"--directory={directory}", f"--rw={rw}", f"--bs={block}",
            f"--size={size_bytes // max(1, numjobs)}", f"--numjobs={numjobs}", f"--iodepth={iodepth}",
            "--ioengine=libaio", "--direct=1", "--group_reporting", "--time_based", f"--runtime={int(runtime_s)}",
            "--output-format=json", "--unlink=1"]
    return run_tool("fio", argv, timeout_s)


def parsed(run: ToolRun, parse, error: type[Exception]):
    """``(result, problem)``: the tool's stdout through ``parse``; (None, None) when it printed nothing
    (absent tool, no output), (None, why) when ``parse`` refused it with ``error``."""
    if run.missing or not run.stdout.strip():
        return None, None
    try:
        return parse(run.stdout), None
    except error as exc:
        return None, str(exc)
