"""The entry point slurmd runs: ``python -I -m healthcheck.hook.run prolog|epilog|slurm-check``.

Lean on purpose (no click, pandas, SQLAlchemy, NumPy, rich: a test checks). One run:

1. load the config (a config that cannot be loaded never drains: report, exit 0);
2. apply actions queued by earlier runs that could not reach slurmctld;
3. probe and judge in a forked child under the context's budget (watchdog): a hung probe costs the
   budget, never the node; a run past its budget is a FAIL of its own (``node.responsive``);
4. decide (policy: ownership rules), act through the Slurm backend (queue the action if slurmctld is
   unreachable), record run and action in the node-local spool;
5. exit: prolog 1 when it drained the node (Slurm then requeues the job), else 0.

Environment used: SLURMD_NODENAME, SLURM_JOB_ID, SLURM_JOB_USER, SLURM_JOB_UID (set by slurmd),
HEALTHCHECK_CONFIG (else ``--config FILE``, else /etc/healthcheck/healthcheck.toml).
"""
from __future__ import annotations

import os
import sys
import time

CONTEXTS = ("prolog", "epilog", "slurm-check")
KERNEL_CACHE = "kernel-events.cache"  # in the node's state dir: the last run's kernel-log events
DEFAULT_CONFIG = "/etc/healthcheck/healthcheck.toml"


def log(message: str) -> None:
    """slurmd keeps a hook's stderr in its log: one line, our prefix, no raw control characters
    (messages carry node names, paths and tool output that must not forge log lines)."""
    from ..output.render import clean

    try:
        sys.stderr.write(f"healthcheck: {clean(message)}\n")
        sys.stderr.flush()
    except OSError:
        pass


def _args(argv: list[str]) -> tuple[str, str | None]:
    if not argv or argv[0] not in CONTEXTS:
        raise SystemExit(f"usage: python -m healthcheck.hook.run {{{'|'.join(CONTEXTS)}}} [--config FILE]")
    config = None
    if "--config" in argv[1:]:
        i = argv.index("--config")
        if i + 1 >= len(argv):
            raise SystemExit("--config needs a file")
        config = argv[i + 1]
    return argv[0], config


def resolve(argv: list[str]) -> tuple[str, str, str, str | None]:
    """(context, node, config path, job id) of a run: its arguments, then the environment slurmd set."""
    context, config_path = _args(list(argv))
    node = os.environ.get("SLURMD_NODENAME") or os.uname().nodename.split(".")[0]
    job_id = os.environ.get("SLURM_JOB_ID") or None
    return context, node, config_path or os.environ.get("HEALTHCHECK_CONFIG") or DEFAULT_CONFIG, job_id


# Shares of the hook's budget (slurm.conf's view: the hook must end within it, whatever slurmctld does).
PRE_SHARE = 0.2  # queued actions and the re-check of our last drain, before the checks
# kept for the Slurm calls after the checks (state, drain cap, drain/resume): min(max(15 %, 0.5 s), 3 s)
POST_SHARE, POST_MIN_S, POST_MAX_S = 0.15, 0.5, 3.0
END_MARGIN_S = 0.1  # the spool record and exit, after the last Slurm call


def child_budget(budget: float, t0: float, now: float | None = None) -> float:
    """The probing and judging child's share of a run's ``budget`` counted from ``t0``: what is left of
    it now, less the Slurm calls after the checks and the end margin (at least 0.1 s or half the budget)."""
    post = min(max(POST_SHARE * budget, POST_MIN_S), POST_MAX_S, budget / 3)
    now = time.monotonic() if now is None else now
    return max(t0 + budget - post - END_MARGIN_S - now, min(0.1, budget / 2))


class Handoff:
    """What the resident agent hands the hook with a run: the one public seam between them (issue 31).
    The hook run alone (slurmd's own process, ``healthcheck.hook.client``) gives only ``t0``.

    ``t0``: when the hook started (``time.monotonic()``; the agent's worker gets the wrapper's): the budget
    counts from it. ``started``: the run's start as recorded (``utc_now_iso()``; default: now).
    ``hook_pid``: the hook's process when the run happens elsewhere (the agent's worker): the epilog never
    takes it or its callers for the job's. ``prepared``: a child forked and warmed ahead
    (``watchdog.prepare(agent.work.run_task, ...)``, the agent's spares) that probes and judges instead of
    a fork now. ``on_budget(seconds)``: told the context's budget once the config is read (the agent's
    client waits that long). ``on_acting(exit status)``: told right before a drain is asked of Slurm, with
    the status the run will exit with (1 for the prolog): the wrapper exits with it should the worker end
    before ``on_decided`` (it fails closed: never 0 on a node we drained). ``on_decided(exit status)``:
    told once the verdict and the Slurm action are settled, before the bookkeeping (baseline, spool
    record, gate): the agent answers its wrapper then."""

    __slots__ = ("t0", "started", "hook_pid", "prepared", "on_budget", "on_acting", "on_decided")

    def __init__(self, t0: float | None = None, started: str | None = None, hook_pid: int | None = None,
                 prepared=None, on_budget=None, on_acting=None, on_decided=None):
        self.t0, self.started, self.hook_pid, self.prepared = t0, started, hook_pid, prepared
        self.on_budget, self.on_acting, self.on_decided = on_budget, on_acting, on_decided


def main(argv: list[str] | None = None, handoff: Handoff | None = None) -> int:
    """One hook run: ``argv`` (default: the command line's) ``CONTEXT [--config FILE]``; ``handoff``: what
    the caller hands it (:class:`Handoff`; none: a run in slurmd's own process, started now)."""
    handoff = handoff or Handoff()
    t0, started, hook_pid, prepared = handoff.t0, handoff.started, handoff.hook_pid, handoff.prepared
    on_budget, on_acting, on_decided = handoff.on_budget, handoff.on_acting, handoff.on_decided
    t0 = time.monotonic() if t0 is None else t0
    context, node, config_path, job_id = resolve(sys.argv[1:] if argv is None else argv)
    if context == "prolog":  # the fast path first: nothing else is imported when the gate vouches
        from .. import __version__
        from .gate import fast_prolog

        if fast_prolog(node, job_id, config_path, t0, __version__) == 0:
            return 0
    if started is None:
        from ..core.clock import utc_now_iso

        started = utc_now_iso()
    from ..spool.entries import new_run_id

    run_id = new_run_id()
    try:  # inside the default budget: a FIFO or a huge file at the config path cannot hold the hook
        config, exp = _load_within(config_path, node, default_settings().budget(context))
    except Exception as exc:  # a config that cannot be read never drains a node
        log(f"{context} on {node}: config not used, nothing judged: {exc}")
        return 0
    settings = config.slurm if config else default_settings()
    state_dir = os.path.join(settings.state_dir, node)
    budget = settings.budget(context)
    if on_budget is not None:
        on_budget(budget)
    end = t0 + budget
    from ..slurm import actions

    # built on first use (a healthy prolog never needs it); every call bounded by the phase's deadline
    backend = actions.LazyBackend(settings, deadline=t0 + PRE_SHARE * budget)
    acknowledged: list[str] = []
    try:
        actions.apply_pending(backend, state_dir, settings, log, node)
        acknowledged = actions.reconcile_before_checks(backend, node, state_dir, log)
    except Exception as exc:  # noqa: BLE001 - the checks always run
        log(f"{context} on {node}: queued actions not applied: {type(exc).__name__}: {exc}")

    budget_of_child = child_budget(budget, t0)
    state_read = None

    def read_state() -> None:  # HealthCheckProgram reads the node's state whatever it finds: meanwhile
        nonlocal state_read
        if context == "slurm-check":
            backend.deadline = end - END_MARGIN_S
            try:
                state_read = actions.StateRead(backend, node)
            except Exception as exc:  # noqa: BLE001 - no thread: the state is read after the checks
                log(f"{context} on {node}: the node's state is read after the checks ({type(exc).__name__}: {exc})")

    if prepared is not None and not prepared.alive():
        prepared.discard()  # still warming, or gone: a child of its own, as without the agent
        prepared = None
    if prepared is not None:
        umask = os.umask(0o022)
        os.umask(umask)
        try:
            cwd = os.getcwd()
        except OSError:  # a directory removed under us: "/", as adopt() does
            cwd = "/"
        # the child was forked before this run: it takes this process's environment, directory and umask
        # (agentclient.process_context reads the same; it cannot be imported here: it imports this module)
        task = {"context": context, "node": node, "config": config_path, "job_id": job_id, "state_dir": state_dir,
                "started": started, "budget": budget_of_child, "acknowledged": list(acknowledged),
                "env": dict(os.environ), "cwd": cwd, "umask": umask, "hook_pid": hook_pid}
        outcome = prepared.run(task, budget_of_child, started=read_state)
    else:
        from .watchdog import run_in_child

        outcome = run_in_child(lambda: work(context, node, exp, settings, job_id, state_dir, started,
                                             budget_of_child, acknowledged, hook_pid),
                               budget_of_child, started=read_state)
    findings, counters, facts, events = _findings_of(outcome, budget, context)
    from ..core.model import Verdict

    verdict = Verdict.of(node, findings, started, time.monotonic() - t0, context)
    backend.deadline = end - END_MARGIN_S
    def before_act(decision) -> None:  # the agent's wrapper fails closed from here on
        if decision.action == "drain" and context == "prolog" and settings.on_fail("prolog") == "drain":
            on_acting(1)

    decision = actions.decide_and_act(context, verdict, node, settings, backend, state_dir, run_id, log, events,
                                      state_read, before_act=before_act if on_acting is not None else None,
                                      domain=lambda: nvlink_domain(config, settings, node))
    verdict.duration_s = time.monotonic() - t0
    if verdict.status.value in ("fail", "error") or decision.action != "none":
        log(f"{context} on {node}: {verdict.status.value}; {decision.action}: {decision.why}"
            + (f" ({decision.reason})" if decision.reason else ""))
    drained_for = [f for f in verdict.failing if f.check not in decision.held]
    # prolog 1: Slurm requeues the job (see prolog_epilog/README.md for what each version does)
    code = 1 if context == "prolog" and drained_for and settings.on_fail("prolog") == "drain" else 0
    if on_decided is not None:  # the agent's wrapper exits now: verdict and action are settled
        on_decided(code)
    # the bookkeeping: the job's baseline (read by its epilog), the spool record, the prolog's gate
    if context == "prolog" and job_id and counters is not None:
        actions.save_baseline(state_dir, job_id, counters, log)
    actions.record(settings.spool_dir, verdict, decision, run_id, job_id, config_path, log)
    _update_gate(context, node, verdict, decision, settings, facts, config_path, state_dir, run_id)
    return code


def _load_within(path: str, node: str, limit_s: float):
    """Load the config under a SIGALRM timer of ``limit_s``: past it, TimeoutError (the hook then
    judges nothing and exits 0, as for any config it cannot use)."""
    import _signal as signal  # the C module signal.py wraps: signal.py's enums import enum (~3 ms)

    def expired(_signum, _frame):
        raise TimeoutError(f"{path}: not loaded within {limit_s:g} s (a FIFO, a device or a huge file?)")

    try:
        previous = signal.signal(signal.SIGALRM, expired)
    except ValueError:  # not the main thread (tests calling main() from a thread): no timer
        return load_config(path, node)
    signal.setitimer(signal.ITIMER_REAL, limit_s)
    try:
        return load_config(path, node)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _update_gate(context, node, verdict, decision, settings, facts, config_path, state_dir, run_id) -> None:
    """A healthy HealthCheckProgram run (re)writes the prolog's gate; any failing run removes it."""
    from .gate import remove_gate, write_gate

    healthy = verdict.status.value in ("pass", "warn", "skip") and decision.action in ("none", "resume")
    if context == "slurm-check" and healthy and settings.prolog_mode == "fast" and facts is not None:
        from .. import __version__

        try:
            write_gate(node, config_path, facts, max_age_s=settings.prolog_gate_max_age_s, state_dir=state_dir,
                       spool_dir=settings.spool_dir, run_id=run_id, version=__version__)
        except (OSError, ValueError) as exc:
            log(f"prolog gate not written: {exc}")
            remove_gate(node)
    elif not healthy or context == "slurm-check":
        remove_gate(node)


def default_settings():
    from ..config.slurm_settings import SlurmSettings

    return SlurmSettings()


# The config the warm agent loaded before its workers fork (agentwork.keep_warm): {(path, node):
# (identity, config, expectations)}, used while the file is the one loaded (same real path, device,
# inode, size and mtime), else the file is loaded as ever. Empty in a hook's own process.
warm_configs: dict = {}


def identity(path: str):
    try:
        real = os.path.realpath(path)
        st = os.stat(real)
    except OSError:
        return None
    return real, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def load_config(path: str, node: str):
    from ..config import default_expectations, load

    if warm_configs:
        kept = warm_configs.get((path, node))
        if kept is not None and kept[0] == identity(path):
            return kept[1], kept[2]
    if not os.path.exists(path):
        if path != DEFAULT_CONFIG:
            raise FileNotFoundError(f"{path}: no such config file")
        return None, default_expectations()
    config = load(path, use_cache=True)
    return config, config.expectations_for(node)


def nvlink_domain(config, settings, node: str) -> tuple[str, list[str]] | None:
    """This node's group of the ``[topology]`` level ``[slurm] drain_cap_level`` names (its NVLink domain)
    and the group's nodes, for the drain cap; None when none is declared or the table cannot be used
    (said in the log: the partition's cap still applies). Read only when the cap is evaluated."""
    level = settings.drain_cap_level
    if not level or config is None:
        return None
    try:
        from ..config.topology import groups_of, members

        table = config.section("topology")
        group = groups_of(table, [node])[node].get(level)
        return (f"{level} {group}", members(table, level, group)) if group else None
    except Exception as exc:  # noqa: BLE001 - a bad table never stops a drain decision
        log(f"drain cap: [topology.{level}] not used ({type(exc).__name__}: {exc})")
        return None


def snapshot(context, node, exp, state_dir, started, budget):
    """In the child: what the checks of ``context`` need, probed live (or read from the node's bundle),
    every probe's deadline inside ``budget`` so that a hung GPU is judged (gpu.responsive) in time."""
    from ..pipeline.acquire import snapshot_for
    from ..pipeline.judge import sources_needed
    from ..probes import live

    deadlines = {name: min(value, max(0.2, budget * 0.6)) for name, value in live.DEFAULT_DEADLINES_S.items()}
    return snapshot_for(node, exp, started, deadlines_s=deadlines, sources=sources_needed(exp, context),
                        processes=False, kernel_cache=os.path.join(state_dir, KERNEL_CACHE), nvml_close=False,
                        net_rdma_only=context in ("prolog", "epilog"),
                        fabricmanager_log=live.fabricmanager_log_for(context))  # HealthCheckProgram only


def work(context, node, exp, settings, job_id, state_dir, started, budget, acknowledged=(), hook_pid=None):
    """In the child: probe, add the job's facts, judge. Returns plain data for the parent. The child exits
    once it has answered, so NVML's session is left to that exit."""
    from ..pipeline.judge import judge

    snap = snapshot(context, node, exp, state_dir, started, budget)
    if context == "epilog" and job_id:
        snap.job = _job_facts(job_id, settings, state_dir, snap, hook_pid)
    if context == "slurm-check" and snap.gpus:  # earlier readings of each GPU, for gpu.stalled
        from .gpu_samples import keep_samples

        note = keep_samples(state_dir, snap)
        if note:
            log(f"slurm-check on {node}: {note}")
    if snap.net_ports is not None:  # read for net.errors / net.link.flaps: keep the counters' growth
        from .net_window import keep_readings

        note = keep_readings(state_dir, snap)
        if note:
            log(f"{context} on {node}: {note}")
    # the keys of the events a drain now would be for (acknowledged once that drain ends): kernel-log
    # events (Xid and host events) and BMC SEL records
    events = []
    snap.acknowledged_events = list(acknowledged)
    if snap.kernel_events:
        from ..checks.gpu_xid import event_key

        snap.boot_id = snap.boot_id or _boot_id()
        events = [event_key(ev, snap.boot_id) for ev in snap.kernel_events]
    if snap.bmc is not None and snap.bmc.events:
        from ..checks.bmc import event_keys

        events += event_keys(snap.bmc)
    verdict = judge(snap, exp, context)
    counters = facts = None
    if context == "prolog" and job_id:
        from ..slurm.baseline import counters_of

        counters = counters_of(snap)
    if context == "slurm-check" and settings.prolog_mode == "fast":
        from .gatefacts import gate_facts

        facts = gate_facts(snap, exp)
    return {"findings": [f.to_dict() for f in verdict.findings], "counters": counters, "facts": facts,
            "events": events}


def _boot_id() -> str | None:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as fh:
            return fh.read(64).strip() or None
    except (OSError, ValueError):
        return None


def _job_facts(job_id, settings, state_dir, snap, hook_pid=None):
    from ..core.model import JobInfo
    from ..probes.jobprocs import ancestors, find_job_processes, kill_all
    from ..slurm.baseline import counters_of, discard, growth, load, source_of

    uid = os.environ.get("SLURM_JOB_UID")
    job = JobInfo(job_id=job_id, user=os.environ.get("SLURM_JOB_USER"),
                  uid=int(uid) if uid and uid.isdigit() else None, stray_action=settings.epilog_stray_processes)
    # the hook's callers (slurmd, a site's Epilog= script) carry the job's id; for a job run as root, its
    # uid too: through the agent they are not this process's ancestors, so they are named here
    callers = ancestors(pid=hook_pid) if isinstance(hook_pid, int) and hook_pid > 1 else set()
    strays = find_job_processes(job_id, job_uid=job.uid, exclude=callers)
    if strays and settings.epilog_stray_processes == "kill":
        job.killed = kill_all(strays)
        strays = find_job_processes(job_id, job_uid=job.uid, exclude=callers)
    job.stray_processes = strays
    try:
        before = load(state_dir, job_id)
    except (OSError, ValueError):
        before = None
    if before is not None:
        job.counter_growth = growth(before, counters_of(snap))
        job.baseline_source = source_of(state_dir, job_id)
        try:
            discard(state_dir, job_id)
        except OSError:
            pass
    return job


def _findings_of(outcome, budget: float, context: str):
    from ..core.model import Finding, Status

    if outcome.status == "ok" and isinstance(outcome.value, dict):
        findings = [Finding.from_dict(f) for f in outcome.value["findings"]]
        return findings, outcome.value.get("counters"), outcome.value.get("facts"), outcome.value.get("events")
    if outcome.status == "timeout":
        return [Finding("node.responsive", Status.FAIL,
                        f"{context} checks did not finish within their {budget:g} s budget "
                        "(a probe is hung: driver or filesystem wedged)")], None, None, None
    return [Finding("node.responsive", Status.ERROR,
                    f"{context} checker crashed: {outcome.error or 'no result'}")], None, None, None


def guarded_main(argv: list[str] | None = None, handoff: Handoff | None = None) -> int:
    """A bug of ours must never drain a node: Slurm drains on a non-zero prolog/epilog exit, so an
    unexpected exception is logged and the hook exits 0 (the checks' own FAILs still exit 1)."""
    try:
        return main(argv, handoff)
    except SystemExit:
        raise
    except BaseException as exc:  # noqa: BLE001 - the last line of defence
        log(f"internal error, nothing judged: {type(exc).__name__}: {exc}")
        return 0


def run() -> None:
    """``python -m healthcheck.hook.run``: ``guarded_main()``, then leave without the interpreter's
    teardown (the installed hooks do the same through ``agentclient.run`` when no agent answers).

    Tearing down the ~60 modules a run imported costs ~5 ms before every job and does nothing a hook
    needs: every file it wrote is closed and synced (spool record, baseline, ledger). So: the atexit
    handlers run (the watchdog's reaping of children abandoned at a deadline), stdout and stderr are
    flushed, then ``os._exit``. A usage error (SystemExit) leaves the usual way, with its message."""
    leave(guarded_main())


def leave(code: int) -> None:
    watchdog = sys.modules.get("healthcheck.hook.watchdog")
    if watchdog is not None:  # the checks' child, killed once its result came: dead by now, as a rule
        watchdog.reap_abandoned(0.0)
    atexit = sys.modules.get("atexit")  # never imported: no handler was registered
    if atexit is not None:
        try:
            atexit._run_exitfuncs()  # what the interpreter's exit would run
        except BaseException:  # noqa: BLE001 - an exit handler's error must not change the exit status
            pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:  # noqa: BLE001 - a closed or broken stream (slurmd gone): exit anyway
            pass
    os._exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    run()
