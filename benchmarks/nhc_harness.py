"""Run LBNL NHC (a tree the user has: never shipped with this project) on the host checks our prolog's
host checks cover, safely, for benchmarks/bench_prolog.py: CPU counts, memory, swap, free memory, loopback,
`/` mounted read-write, free and used space, two file tests, load average (11 NHC config lines; issue 15
counts them as "12 host checks").

Accepted trees: a source checkout (``nhc`` and ``scripts/*.nhc`` side by side) or an install root
(``usr/sbin/nhc`` or ``sbin/nhc`` with ``etc/nhc/scripts``), e.g. ``/`` for a node where the package is
installed. Safety: every path NHC writes is in a scratch directory (log, results file, PID file, state
and run directories, sysconfig, helpers); ``NHC_RM=none`` and ``MARK_OFFLINE=0`` (no resource manager is
ever called, no node marked); ``SYSLOG_CMD`` and ``logger`` on PATH are a stub that discards its input.
The config is generated from this machine's /proc so that every check passes here (a failing NHC check
raises with NHC's log: a benchmark of a failing run would measure the wrong path).
"""
from __future__ import annotations

import os
from pathlib import Path

# the check functions the config calls, each defined by one of the tree's scripts/*.nhc
CHECK_FUNCTIONS = ("check_hw_cpuinfo", "check_hw_physmem", "check_hw_swap", "check_hw_mem_free", "check_hw_eth",
                   "check_fs_mount_rw", "check_fs_free", "check_fs_used", "check_file_test", "check_ps_loadavg")


class NhcTreeError(ValueError):
    pass


def find_tree(root: str) -> tuple[Path, Path]:
    """(the nhc driver script, its scripts directory) under ``root``; a clear error otherwise."""
    base = Path(root)
    scripts = [base / "nhc", base / "sbin" / "nhc", base / "usr" / "sbin" / "nhc", base / "bin" / "nhc",
               base / "usr" / "bin" / "nhc"]
    dirs = [base / "scripts", base / "etc" / "nhc" / "scripts", base / "nhc" / "scripts"]
    driver = next((p for p in scripts if p.is_file()), None)
    incdir = next((d for d in dirs if d.is_dir() and any(d.glob("*.nhc"))), None)
    if driver is None:
        raise NhcTreeError(f"--nhc {root}: no nhc script (looked for {', '.join(str(p) for p in scripts)})")
    if incdir is None:
        raise NhcTreeError(f"--nhc {root}: no scripts/*.nhc (looked in {', '.join(str(d) for d in dirs)})")
    defined = "\n".join(p.read_text(errors="replace") for p in incdir.glob("*.nhc"))
    missing = [f for f in CHECK_FUNCTIONS if f"function {f}" not in defined and f"{f}()" not in defined]
    if missing:
        raise NhcTreeError(f"--nhc {root}: {incdir} defines none of: {', '.join(missing)} (NHC 1.4 or later needed)")
    return driver, incdir


def host_facts(proc: str = "/proc") -> dict[str, int]:
    """Counts as NHC's check_hw_cpuinfo reads them (sockets = distinct physical ids, cores = sockets x
    "cpu cores", threads = sockets x "siblings"; a /proc/cpuinfo without physical ids counts every
    processor once for all three) and /proc/meminfo's totals in kB."""
    processors, phys, cores, siblings = 0, set(), None, None
    with open(f"{proc}/cpuinfo") as f:
        for line in f:
            key, _, value = line.partition(":")
            key, value = key.strip(), value.strip()
            if key == "processor":
                processors += 1
            elif key == "physical id":
                phys.add(value)
            elif key == "cpu cores":
                cores = int(value)
            elif key == "siblings":
                siblings = int(value)
    if not phys or cores is None:
        facts = {"sockets": processors, "cores": processors, "threads": processors}
    else:
        facts = {"sockets": len(phys), "cores": len(phys) * cores,
                 "threads": len(phys) * (siblings if siblings is not None else cores)}
    with open(f"{proc}/meminfo") as f:
        mem = {k.strip(): int(v.split()[0]) for k, _, v in (line.partition(":") for line in f) if v.strip()}
    facts.update(mem_kb=mem["MemTotal"], swap_kb=mem.get("SwapTotal", 0))
    facts["cpus"] = os.cpu_count() or 1
    return facts


def config_text(facts: dict[str, int], file_test_pairs: bool = False) -> str:
    """The host checks of the comparison, one NHC config line each, thresholds this machine passes
    (sizes in kB, which every NHC version reads; the positional check_fs_mount_rw form, which 1.4 and
    later read). ``file_test_pairs``: the tree's check_file_test reads operator-file pairs (``-r F -f F``,
    NHC 1.4's scripts) rather than operators then files (``-r -f F``)."""
    mem, swap, load = facts["mem_kb"], facts["swap_kb"], 64 * facts["cpus"]
    lines = [
        f"check_hw_cpuinfo {facts['sockets']} {facts['cores']} {facts['threads']}",  # CPU counts
        f"check_hw_physmem {mem // 2} {mem * 2}",  # memory
        f"check_hw_swap 0 {max(swap * 2, 1)}",  # swap
        "check_hw_mem_free 1024",  # free memory
        "check_hw_eth lo",  # loopback
        "check_fs_mount_rw /",  # / mounted read-write
        "check_fs_free / 1%",  # free space
        "check_fs_used / 99%",  # used space
        # two file tests
        "check_file_test -r /etc/passwd -f /etc/passwd" if file_test_pairs else "check_file_test -r -f /etc/passwd",
        "check_file_test -d /tmp -x /tmp" if file_test_pairs else "check_file_test -d -x /tmp",
        f"check_ps_loadavg {load} {load} {load}",  # load average
    ]
    return "".join(f"* || {line}\n" for line in lines)


def command(root: str, scratch: str) -> tuple[list[str], dict[str, str]]:
    """argv and environment of one NHC run confined to ``scratch`` (created here)."""
    driver, incdir = find_tree(root)
    s = Path(scratch)
    for sub in ("etc", "log", "run", "state", "sysconfig", "helpers", "bin"):
        (s / sub).mkdir(parents=True, exist_ok=True)
    (s / "etc" / "nhc.conf").write_text(config_text(host_facts(), _file_test_takes_pairs(incdir)))
    (s / "sysconfig" / "nhc").write_text("# empty: no site settings\n")
    stub = s / "bin" / "logger"
    stub.write_text("#!/bin/sh\ncat >/dev/null\nexit 0\n")
    stub.chmod(0o755)
    path = f"{s / 'bin'}:/sbin:/usr/sbin:/bin:/usr/bin"
    settings = {  # given as NAME=value arguments too: NHC resets PATH and unsets its paths at start-up
        "PATH": path, "NHC_RM": "none", "MARK_OFFLINE": "0", "ONLINE_NODE": ":", "OFFLINE_NODE": ":",
        "CONFDIR": str(s / "etc"), "INCDIR": str(incdir), "HELPERDIR": str(s / "helpers"),
        "LOGDIR": str(s / "log"), "RUNDIR": str(s / "run"), "STATEDIR": str(s / "state"),
        "SYSCONFIGDIR": str(s / "sysconfig"), "RESULTFILE": str(s / "run" / "nhc.status"),
        "SYSLOG_CMD": f"{stub} -t", "DETACHED_MODE": "0",
    }
    env = {"PATH": path, "HOME": str(s), "LANG": "C", "HOSTNAME": "bench1",
           # NHC 1.5's start-up reads these before its arguments: keep it off /etc/sysconfig and /etc/default
           "NHC_CFG_GLOBAL": str(s / "sysconfig" / "nhc"), "NHC_CFG_SYSCONFIGDIR": str(s / "sysconfig"),
           "NHC_CFG_CONFDIR": str(s / "etc"), "NHC_CFG_INCDIR": str(incdir),
           "NHC_CFG_HELPERDIR": str(s / "helpers"), "NHC_CFG_LOGDIR": str(s / "log"),
           "NHC_CFG_RUNDIR": str(s / "run"), "NHC_CFG_STATEDIR": str(s / "state"),
           "NHC_CFG_LIBEXECDIR": str(s / "helpers"),
           **{k: v for k, v in settings.items() if k != "PATH"}}
    log = str(s / "log" / "nhc.log")
    if _takes_log_option(driver):
        log_args = ["-l", log]
    else:  # NHC 1.4 has no -l: it reads LOGFILE, a shell redirection, from its environment
        log_args, env["LOGFILE"] = [], f">>{log}"
    argv = ["/bin/bash", str(driver), "-D", str(s / "etc"), "-c", str(s / "etc" / "nhc.conf"),
            *log_args, "-t", "30",
            *(f"{k}={v}" for k, v in settings.items() if k != "SYSLOG_CMD")]
    # SYSLOG_CMD holds a space: NHC eval's each NAME=value argument, so it travels in the environment only
    return argv, env


def _takes_log_option(driver: Path) -> bool:
    """Whether the driver's option parsing has ``-l <logfile>`` (NHC 1.4.1 and later)."""
    import re

    return any("l:" in m.group(1) for m in re.finditer(r'getopts\s+"([^"]*)"', driver.read_text(errors="replace")))


def _file_test_takes_pairs(incdir: Path) -> bool:
    """Whether the scripts' check_file_test reads operator-file pairs (its loop takes ``OP="$1"`` and
    ``ARG="$2"`` two by two), as NHC 1.4's do."""
    for path in incdir.glob("*.nhc"):
        text = path.read_text(errors="replace")
        start = text.find("function check_file_test()")
        if start >= 0:
            body = text[start:text.find("\n}", start)]
            return 'OP="$1"' in body and 'ARG="$2"' in body
    return False
