"""Measure the prolog hook as slurmd runs it, interleaved with the bare interpreter and, given one, LBNL NHC.

Setup (reproducible, from the project's fixtures): the prolog wrapper rendered from the package's own
template (healthcheck/deploy/templates/prolog.sh, as `healthcheck slurm install-hooks` writes it: a
bash script), executed as slurmd executes a hook (its path, the kernel reading its #! line),
SLURMD_NODENAME and SLURM_JOB_ID set, in its own process group.
The drain backend is never called on a healthy node; the spool record is written (with fsync) as in
production, under a temporary directory.

Cases, run round-robin (one of each per round, >= 20 rounds) so machine noise hits all alike:
  interpreter            python -I -c pass
  prolog, default        the default prolog check set, no bundle: host checks (memory, disks, mounts)
                         live on this machine, GPU checks skipped (no NVIDIA GPU): the NHC-equivalent case
  prolog, 8-GPU bundle   the same hook reading an 8-GPU H100 bundle (GPUs through nvml.json, PCIe and
                         InfiniBand sysfs, kernel log) built from the tests' fixtures; host facts live
  prolog, fast mode      prolog_mode = "fast" (the gate of a healthy HealthCheckProgram run, re-verified
                         live); left out, with a note, when the gate cannot be written
  epilog                 the epilog of the same job (job 1: its baseline from the prolog runs, the job's
                         processes looked for), without and through the agent
  HealthCheckProgram     the slurm-check hook (healthcheck.sh: all its checks, the node's state read each
                         run) through the agent; scontrol is a stub printing an idle node's line, so the
                         RPC to slurmctld (milliseconds on a real cluster) is not in the figure
  ... through the agent  the default and 8-GPU cases with the node's warm agent listening (started as its
                         systemd unit starts it): the hook's bash hands its work to a worker forked from
                         it, at the agent's door (healthcheck/agent/door.py). The cases above run with
                         no agent (no door: the hook's bash runs its Python client, whose connect fails,
                         and the hook runs in that process: an install without the agent)
  ... the agent's socket the prolog through the agent as the hooks reached it before the door: the
                         Python client (python -IS) connecting to the agent's socket
  ... no bash in front   the prolog without the agent, its Python client started directly (the hooks
                         were Python scripts before the door): what the hook's bash costs an install
                         without the agent
  bash, nothing          a bash script that only exits: the floor of any hook written in bash
  the door's floor       the installed prolog hook knocking at a stand-in for the agent that answers at
                         once and judges nothing (benchmarks/door_floor.py): bash's start, the knock and
                         one hand-over, the least a hook at the door costs before any check runs
  NHC (--nhc DIR)        LBNL NHC from a tree the user has, on the same host checks (see nhc_harness.py:
                         scratch directories for everything it writes, NHC_RM=none, MARK_OFFLINE=0,
                         a stub logger)

    .venv/bin/python benchmarks/bench_prolog.py [--pairs 30] [--nhc DIR] [--gap-ms 150]

Prints medians, p90, the ratios (to the interpreter, to NHC) and peak RSS (ru_maxrss of the largest
process of each run's tree, read under GNU time in 5 extra rounds: see _measure.py), and the memory
the agent keeps resident between jobs. Figures are recorded in docs/performance.md; not part of the test run.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _measure import RunFailed, interleaved, loadavg, median, p90, run_once  # noqa: E402

INTERPRETER = "python -I -c pass (interpreter)"
DEFAULT = "prolog, default checks, host live (NHC-equivalent)"
GPU8 = "prolog, 8-GPU bundle + host live"
FAST = 'prolog, prolog_mode = "fast"'
AGENT = "prolog, default checks, host live, through the warm agent"
AGENT8 = "prolog, 8-GPU bundle + host live, through the warm agent"
SOCKET = "prolog, default checks, host live, through the agent's socket (Python client)"
NO_BASH = "prolog, default checks, host live, no agent, Python client with no bash in front"
EPILOG = "epilog, default checks, host live"
EPILOG_AGENT = "epilog, default checks, host live, through the warm agent"
HCP_AGENT = "HealthCheckProgram (slurm-check), through the warm agent, scontrol stubbed"
# What `scontrol -o show node bench1` prints for an idle node in service (the benchmark has no slurmctld:
# HealthCheckProgram reads the node's state each run, so its RPC is left out of the figure; see --help).
NODE_LINE = ("NodeName=bench1 Arch=x86_64 CoresPerSocket=1 CPUAlloc=0 CPUTot=2 State=IDLE "
             "Partitions=main Reason=(null)")
NHC = "NHC, same host checks"
BASH_FLOOR = "bash, nothing (the floor of a hook in bash)"
DOOR_FLOOR = "prolog hook at a stand-in door answering at once (the door's floor: nothing judged)"


def wrapper(work: Path, name: str, config: Path, agent: Path, hook: str = "prolog.sh",
            python: str = sys.executable) -> Path:
    """The installed hook ``hook`` for ``config`` and the agent socket ``agent``, rendered by the package."""
    from healthcheck.deploy.install import package_path, render

    path = work / f"{name}.sh"
    path.write_text(render(hook, python=python, config=str(config), agent=str(agent),
                           site=package_path(sys.executable)))
    path.chmod(0o755)
    return path


def wait_for_files(proc, paths: list, what: str, timeout_s: float = 60) -> None:
    """Wait until every path exists (what ``proc`` creates as it starts); SystemExit once it ended or
    ``timeout_s`` passed."""
    import time

    deadline = time.monotonic() + timeout_s
    while not all(Path(p).exists() for p in paths):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"{what} did not start (exit {proc.poll()})")
        time.sleep(0.02)


def start_agent(work: Path, name: str, env: dict[str, str], argv: list[str] | None = None,
                stderr=None):
    """The warm agent for config ``name``, as its systemd unit starts it (``argv``: the command that
    starts it, default ``python -I -m healthcheck.agent.main``); (process, socket)."""
    import subprocess
    import time

    from healthcheck.core.agentpaths import paths_for

    sock = work / f"run-{name}" / "agent.sock"
    proc = subprocess.Popen([*(argv or [sys.executable, "-I", "-m", "healthcheck.agent.main"]), "--socket",
                             str(sock), "--config", str(work / f"{name}.toml")], env=env, cwd="/",
                            stdout=subprocess.DEVNULL, stderr=stderr or subprocess.DEVNULL)
    wait_for_files(proc, [sock, *paths_for(str(sock))], f"the agent for {name} (socket, door and pid file)")
    time.sleep(0.2)  # its spares forked
    return proc, sock


def agent_memory_mib(proc) -> str:
    """Resident memory of an agent and the processes it keeps waiting: RSS of the agent, PSS of all
    (shared pages counted once across them)."""
    pids, todo = [], [proc.pid]
    while todo:  # the agent, its spares and their prepared children
        pid = todo.pop()
        pids.append(pid)
        try:
            todo += [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
        except OSError:
            pass
    pss, counted = 0, 0
    for pid in pids:
        try:
            rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
        except OSError:  # a worker that has just exited
            continue
        counted += 1
        pss += sum(int(line.split()[1]) for line in rollup.splitlines() if line.startswith("Pss:"))
    rss = next(int(line.split()[1]) for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines()
               if line.startswith("VmRSS:"))
    return (f"agent RSS {rss / 1024:.1f} MiB; the agent and its {counted - 1} waiting processes (spare workers and "
            f"their prepared children) PSS {pss / 1024:.1f} MiB")


def start_door_floor(work: Path, env: dict[str, str]):
    """The stand-in door (benchmarks/door_floor.py) and the prolog hook knocking at it, rendered with a
    Python that does not exist: a hook the stand-in did not answer fails (exit 127) instead of being
    measured on its fallback. Returns (process, hook)."""
    import subprocess

    from healthcheck.core.agentpaths import paths_for

    sock = work / "run-floor" / "agent.sock"
    proc = subprocess.Popen([sys.executable, "-I", str(ROOT / "benchmarks" / "door_floor.py"), str(sock)], env=env,
                            cwd="/", stdout=subprocess.DEVNULL)
    wait_for_files(proc, list(paths_for(str(sock))), "the stand-in door")
    hook = wrapper(work, "floor", work / "default.toml", sock, python="/nonexistent/python")
    return proc, hook


def setup(work: Path) -> dict[str, Path]:
    from healthcheck.bundles.collect import collect_bundle
    from tests.bundles.test_bundles import make_node

    node = make_node(work / "node")
    full, _ = collect_bundle(str(work / "full"), options=node)
    hardware = work / "bundles" / "bench1"
    shutil.copytree(full, hardware)
    shutil.rmtree(hardware / "proc")  # host facts come from this machine, live
    (hardware / "statvfs.json").unlink()
    stub = work / "scontrol"  # answers the state read; a drain or resume would fail loudly (none is due)
    stub.write_text(f'#!/bin/sh\n[ "$1 $2 $3" = "-o show node" ] || exit 1\necho "{NODE_LINE}"\n')
    stub.chmod(0o755)
    slurm = f'\n[slurm]\nstate_dir = "{work}/state"\nspool_dir = "{work}/spool"\nscontrol = "{stub}"\n'
    bodies = {"default": slurm,
              "gpu8": f'[defaults]\nbundle = "{work}/bundles/{{node}}"\n' + slurm,
              "fast": f'[defaults]\nbundle = "{work}/bundles/{{node}}"\n' + slurm + 'prolog_mode = "fast"\n'}
    wrappers = {}
    for name, body in bodies.items():
        config = work / f"{name}.toml"
        config.write_text(body)
        # no agent listens there: the hook runs in the wrapper's process (an install without the agent)
        wrappers[name] = wrapper(work, name, config, work / "no-agent" / "agent.sock")
        if name in ("default", "gpu8"):
            wrappers[f"{name}-agent"] = wrapper(work, f"{name}-agent", config, work / f"run-{name}" / "agent.sock")
    default = work / "default.toml"
    wrappers["epilog"] = wrapper(work, "epilog", default, work / "no-agent" / "agent.sock", "epilog.sh")
    wrappers["epilog-agent"] = wrapper(work, "epilog-agent", default, work / "run-default" / "agent.sock", "epilog.sh")
    wrappers["check-agent"] = wrapper(work, "check-agent", default, work / "run-default" / "agent.sock",
                                      "healthcheck.sh")
    return wrappers


def fast_gate(work: Path, env: dict[str, str]) -> str | None:
    """Write the fast prolog's gate with one healthy HealthCheckProgram run; the reason when it cannot."""
    argv = [sys.executable, "-I", "-c",
            "from healthcheck.hook.run import run; run()",
            "slurm-check", "--config", str(work / "fast.toml")]
    try:
        run_once(argv, env)
    except RunFailed as exc:
        return str(exc)
    if not (Path(env["HEALTHCHECK_CACHE_DIR"]) / "prolog-gate-bench1").exists():
        return "the healthy slurm-check run wrote no gate"
    return None


def verify(work: Path, label: str, argv: list[str], env: dict[str, str], gpus: bool) -> str:
    """Run a hook case once and read its spool record: it must have judged (a run that fell back to
    "config not used, nothing judged" exits 0 too, in a fraction of the time) and passed, with its GPU
    checks judged on the bundle when ``gpus``. Returns a summary of what it judged."""
    import json

    spool = work / "spool" / "records.jsonl"
    if spool.exists():
        spool.unlink()
    import time

    run_once(argv, env)
    deadline = time.monotonic() + 10  # through the agent the record is written just after the answer

    def recorded() -> list[dict]:  # complete lines only: the file may be caught between its creation and write
        lines = spool.read_text().splitlines(keepends=True) if spool.exists() else []
        return [r for r in map(json.loads, (x for x in lines if x.endswith("\n"))) if r.get("kind") == "run"]

    runs = recorded()
    while not runs and time.monotonic() < deadline:
        time.sleep(0.01)
        runs = recorded()
    if not runs:
        raise SystemExit(f"{label}: no run recorded in the spool: the hook judged nothing (run the wrapper "
                         f"by hand to see why: {' '.join(argv)})")
    statuses = [r["status"] for r in runs[-1]["results"]]
    judged = [r["check"] for r in runs[-1]["results"] if r["status"] != "skip"]
    if runs[-1]["status"] != "pass" or not judged:
        raise SystemExit(f"{label}: the run is {runs[-1]['status']} with {len(judged)} checks judged: "
                         "the benchmark measures a healthy node")
    if gpus and not any(c.startswith("gpu.") for c in judged):
        raise SystemExit(f"{label}: no GPU check judged: the bundle was not read")
    counts = {k: statuses.count(k) for k in sorted(set(statuses))}
    return f"{label}: {len(statuses)} checks, " + ", ".join(f"{v} {k}" for k, v in counts.items())


def report(samples: dict[str, dict[str, list[float]]], pairs: int, load_before: str) -> None:
    floor = median(samples[INTERPRETER]["ms"])
    nhc = median(samples[NHC]["ms"]) if NHC in samples else None
    print(f"\nrounds (interleaved, one run of each case per round): {pairs}; cpus: {os.cpu_count()}; "
          f"python {sys.version.split()[0]}; load average before {load_before}, after {loadavg()}\n")
    print("| case | median ms | p90 ms | × interpreter | × NHC | peak RSS MiB (median / max) |")
    print("|---|---|---|---|---|---|")
    for label, s in samples.items():
        med = median(s["ms"])
        rss = s["rss_kib"]
        ratio_nhc = f"{med / nhc:.2f}" if nhc else "–"
        peak = f"{median(rss) / 1024:.1f} / {max(rss) / 1024:.1f}" if rss else "n/a (no GNU time)"
        print(f"| {label} | {med:.1f} | {p90(s['ms']):.1f} | {med / floor:.2f} | {ratio_nhc} | {peak} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", "--runs", type=int, default=30, help="rounds of all cases (>= 20; default 30)")
    parser.add_argument("--nhc", metavar="DIR", help="an LBNL NHC source tree or install root (nhc + scripts/*.nhc)")
    parser.add_argument("--gap-ms", type=float, default=150.0,
                        help="pause before each run (default 150: on a node, hooks come seconds apart; the "
                             "previous run's leftover work, such as an agent replacing its spare, is then done; "
                             "0: back to back, each run sharing the CPUs with the previous one's leftovers)")
    args = parser.parse_args()
    if args.pairs < 20:
        parser.error("--pairs: at least 20 rounds (medians of fewer interleaved pairs are not quoted)")
    py = sys.executable
    with tempfile.TemporaryDirectory(prefix="bench-prolog-") as tmp:
        work = Path(tmp)
        env = {"PATH": "/usr/bin:/bin", "SLURMD_NODENAME": "bench1", "SLURM_JOB_ID": "1", "SLURM_JOB_UID": "1000",
               "SLURM_JOB_USER": "alice",
               "HEALTHCHECK_CACHE_DIR": f"{tmp}/cache"}
        wrappers = setup(work)
        from healthcheck.deploy.install import python_part

        cases = {INTERPRETER: ([py, "-I", "-c", "pass"], env),
                 SOCKET: ([py, "-IS", "-c", python_part(wrappers["default-agent"].read_text()), "prolog"], env),
                 DEFAULT: ([str(wrappers["default"])], env),
                 NO_BASH: ([py, "-IS", "-c", python_part(wrappers["default"].read_text()), "prolog"], env),
                 GPU8: ([str(wrappers["gpu8"])], env)}
        agents = [start_agent(work, name, env) for name in ("default", "gpu8")]
        floor_proc, floor_hook = start_door_floor(work, env)
        nothing = work / "nothing.sh"
        nothing.write_text("#!/bin/bash\nexit 0\n")
        nothing.chmod(0o755)
        cases[BASH_FLOOR] = ([str(nothing)], env)
        cases[DOOR_FLOOR] = ([str(floor_hook)], env)
        # The order: each case through an agent follows a case that did not use that agent, as on a node,
        # where hooks come seconds apart. (Right behind another hook on the same agent, a hook pays on 2
        # cores for that one's replacement spare, a fork and a warm-up: docs/performance.md.)
        cases[AGENT] = ([str(wrappers["default-agent"])], env)
        cases[AGENT8] = ([str(wrappers["gpu8-agent"])], env)

        # its own cache dir: a slurm-check run of a config without the fast mode removes the node's gate,
        # which the fast-mode case reads
        cases[HCP_AGENT] = ([str(wrappers["check-agent"])], {**env, "HEALTHCHECK_CACHE_DIR": f"{tmp}/cache-hcp"})
        cases[EPILOG] = ([str(wrappers["epilog"])], env)
        cases[EPILOG_AGENT] = ([str(wrappers["epilog-agent"])], env)
        why = fast_gate(work, env)
        if why is None:
            cases[FAST] = ([str(wrappers["fast"])], env)
        else:
            print(f"note: fast-mode case left out: {why}", file=sys.stderr)
        if args.nhc:
            from nhc_harness import NhcTreeError, command

            try:
                cases[NHC] = command(args.nhc, str(work / "nhc"))
            except (NhcTreeError, OSError) as exc:
                raise SystemExit(str(exc)) from exc
        try:
            for label, gpus in ((DEFAULT, False), (GPU8, True), (AGENT, False), (AGENT8, True), (SOCKET, False),
                                (NO_BASH, False), (EPILOG, False), (EPILOG_AGENT, False), (HCP_AGENT, False)):
                print(verify(work, label, *cases[label], gpus=gpus), file=sys.stderr)
            run_once(*cases[DOOR_FLOOR])  # exit 127 unless the stand-in answered at its door
            load_before = loadavg()
            try:
                samples = interleaved(cases, args.pairs, gap_s=max(0.0, args.gap_ms) / 1000)
            except RunFailed as exc:
                log = work / "nhc" / "log" / "nhc.log"
                tail = f"\nNHC's log ({log.name}):\n{log.read_text(errors='replace')[-2000:]}" if log.exists() else ""
                raise SystemExit(f"a case failed (a benchmark of a failing run measures the wrong path): {exc}{tail}")
            report(samples, args.pairs, load_before)
            print(f"pause before each run: {max(0.0, args.gap_ms):g} ms")
            print(f"\nresident between jobs: {agent_memory_mib(agents[0][0])}")
        finally:
            for proc in (*(p for p, _ in agents), floor_proc):
                proc.terminate()
                proc.wait(timeout=30)


if __name__ == "__main__":
    main()
