"""The prolog's import graph is explicit (issue 15): on a healthy node, the hook imports nothing beyond
the interpreter's own start-up but the modules listed here. Not a timing: a new import on the path
fails this test until it is added here, on purpose, with its reason (docs/performance.md).

Run as the installed hook runs it (the rendered script, ``-IS``, with no agent listening: the hook then
does the site set-up and runs in its process; the job's environment),
judging this machine live (host checks, InfiniBand, the kernel log, the PCI bus), the run recorded in a
spool."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from healthcheck.deploy.install import package_path, python_part, render

# Ours: the hook, the config and its cache, the lazy check index, the live probes the prolog needs, the
# checks that run (host, InfiniBand, kernel log; GPU checks only with GPUs on the bus), the verdict,
# the spool record and the job's baseline.
OURS = {
    "healthcheck", "healthcheck.slurm", "healthcheck.hook", "healthcheck.hook.run", "healthcheck.hook.gate",
    "healthcheck.config.slurm_settings", "healthcheck.slurm.actions", "healthcheck.slurm.ledger",
    "healthcheck.slurm.policy", "healthcheck.slurm.reasons", "healthcheck.hook.watchdog",
    "healthcheck.slurm.baseline", "healthcheck.core.struct", "healthcheck.core.model", "healthcheck.spool.entries",
    "healthcheck.pipeline.judge", "healthcheck.core.expectations", "healthcheck.config",
    "healthcheck.config.model", "healthcheck.config.loading",  # not its schema: the cache holds the file validated
    "healthcheck.safeio.trust", "healthcheck.safeio.tomlcache", "healthcheck.policies.xid", "healthcheck.policies.host_events",
    "healthcheck.policies.loader",
    "healthcheck.checks", "healthcheck.checks.registry", "healthcheck.checks._index",
    "healthcheck.checks.host", "healthcheck.checks.host_events", "healthcheck.checks.infiniband",
    "healthcheck.checks.gpu_xid", "healthcheck.checks.gpu_inventory", "healthcheck.checks.gpu_responsive",
    "healthcheck.policies.throttle", "healthcheck.pipeline.acquire", "healthcheck.probes", "healthcheck.probes.live",
    "healthcheck.probes.pcibus", "healthcheck.probes.host", "healthcheck.probes.infiniband",
    "healthcheck.probes.pcie", "healthcheck.parsers", "healthcheck.parsers.kernel_log",
    "healthcheck.parsers.host_events", "healthcheck.core.lazylog", "healthcheck.safeio.atomic",
    "healthcheck.spool.append", "healthcheck.spool.store", "healthcheck.output.render", "healthcheck.core.strpath",
    # issue 21: the EDAC and AER counters (os-only sysfs reads; uncorrectable errors since boot FAIL before
    # a job) and the HCA PCIe link, judged in the prolog; their check modules where there is data
    "healthcheck.probes.host_counters", "healthcheck.checks.host_counters", "healthcheck.checks.pcie",
    # patterns compiled on first use: a healthy node compiles none of the kernel-log parser's
    "healthcheck.core.lazyre",
    # the spool record and the baseline written without json; probe deadlines without threading; the
    # kernel log read from /dev/kmsg and parsed only when something that could be an event was logged
    "healthcheck.core.jsonwrite", "healthcheck.probes.bounded", "healthcheck.probes.kmsg", "healthcheck.probes.kernel_cache",
    # the wrappers' entry: it tries the node's warm agent first (none here: the hook runs in this process)
    "healthcheck.hook.client",
    # issue 31: the ground floor's packages (each __init__ a docstring only)
    "healthcheck.core", "healthcheck.safeio", "healthcheck.spool", "healthcheck.policies", "healthcheck.pipeline",
    "healthcheck.output",
    "healthcheck.core.clock",  # the run's start time (it was judge's; the hook's parent no longer imports the judge)
    # issue 32: the Ethernet/RoCE ports' sysfs counters (os-only reads, ~10 files a port), the rules as data
    # (no imports), the memory of their growth between runs (a plain-lines file, os only) and the checks
    # judging growth in a window and link downs as strikes (docs/network.md, docs/performance.md)
    "healthcheck.probes.netdev", "healthcheck.policies.netcounters", "healthcheck.hook.net_window",
    "healthcheck.checks.network",
}
# The standard library beyond start-up: the C JSON string escaper (jsonwrite), the C SHA-256 (config
# hash), errno, fcntl (the spool's lock), math (finite-number checks), select (the watchdog), _socket (the
# wrappers' client of the warm agent: the C module, not socket.py and its enums) and __future__.
# Not re, enum, functools, collections, json, threading, signal, datetime, importlib: each cost the prolog
# milliseconds before every job (docs/performance.md); the hot path has its own lean stand-ins.
STDLIB = {"__future__", "_json", "_sha256", "_sha2", "errno", "fcntl", "math", "select", "pwd", "_socket"}
FORBIDDEN = {"typing", "dataclasses", "inspect", "ast", "subprocess", "hashlib", "tempfile", "tomllib", "pathlib",
             "shutil", "uuid", "click", "pandas", "numpy", "sqlalchemy", "rich", "logging", "socket",
             "re", "enum", "functools", "collections", "json", "threading", "signal", "datetime", "importlib",
             "fnmatch", "zlib", "warnings"}
# what the dmesg fallback (no readable /dev/kmsg) needs: a subprocess and what it imports
DMESG_FALLBACK = {"subprocess", "selectors", "_posixsubprocess", "locale", "_locale", "contextlib", "collections.abc",
                  "signal", "enum", "functools", "collections", "threading", "re", "warnings", "types", "operator",
                  "keyword", "reprlib", "itertools", "_weakrefset", "copyreg", "_collections", "_functools",
                  "_operator", "heapq", "_heapq"}


def imported(argv: list[str], env: dict[str, str]) -> set[str]:
    proc = subprocess.run([sys.executable, "-X", "importtime", *argv], capture_output=True, text=True,
                          env=env, cwd="/", timeout=120)
    return {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}


def test_the_prolog_imports_only_its_allow_list(tmp_path):
    config = tmp_path / "site.toml"
    config.write_text(f'[slurm]\nstate_dir = "{tmp_path / "state"}"\nspool_dir = "{tmp_path / "spool"}"\n'
                      f'scontrol = "/bin/false"\n')
    env = {"PATH": "/usr/bin:/bin", "SLURMD_NODENAME": "node1", "SLURM_JOB_ID": "4242",
           "SLURM_JOB_USER": "root", "SLURM_JOB_UID": "0", "HEALTHCHECK_CACHE_DIR": str(tmp_path / "cache")}
    floor = imported(["-I", "-c", "pass"], env)  # the interpreter as the issue measures it: with its site set-up
    # the installed prolog (no agent listening there: the hook runs in its process), as slurmd runs it
    hook = tmp_path / "prolog.sh"
    hook.write_text(render("prolog.sh", sys.executable, str(config), agent=str(tmp_path / "none.sock"),
                           site=package_path(sys.executable)))
    code = python_part(hook.read_text())  # what the hook's bash runs when no agent takes it
    for _ in range(2):  # the second run is the steady state: config, policies and index from the cache
        modules = imported(["-IS", "-c", code, "prolog"], env)
    records = [json.loads(line) for line in (tmp_path / "spool" / "records.jsonl").read_text().splitlines()]
    assert records[-1]["kind"] == "run" and records[-1]["context"] == "prolog"
    extra = modules - floor
    allowed_ours, allowed_std, forbidden = set(OURS), set(STDLIB), set(FORBIDDEN)
    if not os.access("/dev/kmsg", os.R_OK):  # the kernel log then comes from a dmesg process
        forbidden -= DMESG_FALLBACK
        allowed_ours |= {"healthcheck.safeio.subproc"}
        allowed_std |= {m for m in extra if m in DMESG_FALLBACK or m.startswith("re.")}
    from healthcheck.probes.pcibus import nvidia_gpu_present

    if nvidia_gpu_present():  # a GPU node: NVML and the GPU checks are the prolog's business too
        allowed_ours |= {m for m in extra if m.startswith(("healthcheck.checks.gpu_", "healthcheck.probes.nvml"))}
        allowed_std |= {m for m in extra if m.split(".")[0] == "pynvml"}
    assert not (extra & forbidden), sorted(extra & forbidden)
    ours = {m for m in extra if m.split(".")[0] == "healthcheck"}
    assert ours - allowed_ours == set(), f"new modules on the prolog's path: {sorted(ours - allowed_ours)}"
    unknown = {m for m in extra - ours if m not in allowed_std}
    assert unknown == set(), f"new standard-library modules on the prolog's path: {sorted(unknown)}"
