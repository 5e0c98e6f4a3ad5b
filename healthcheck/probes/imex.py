"""The IMEX daemon through ``nvidia-imex-ctl -q`` and ``nvidia-imex-ctl -N -j`` (issue 33), through the
subprocess seam, under one deadline. HealthCheckProgram, ``check``, ``collect`` and the burn-in only: the
check that needs it (``nvlink.imex``) does not run in the prolog or epilog, so a hook never starts it.

Not installed: None (the source is absent). A call that fails, times out or prints something unparsable
leaves ``ImexInfo.error`` set (the daemon not answering its command service is what the check judges).
"""
from __future__ import annotations

import time

from ..core.model import ImexInfo

TOOL = "nvidia-imex-ctl"
QUERY = [TOOL, "-q"]
DOMAIN = [TOOL, "-N", "-j"]
# bundle file name of each command's output (bundles/archive.py)
QUERY_FILE = "nvidia-imex-ctl-q.txt"
DOMAIN_FILE = "nvidia-imex-ctl-N.json"
MAX_TOOL_OUTPUT = 4 * 1024 * 1024


def read_imex(deadline_s: float = 10.0, run=None, which=None) -> tuple[ImexInfo | None, dict[str, str]]:
    """(the daemon and its domain, raw outputs by bundle file name); (None, {}) without the tool."""
    from ..safeio import subproc

    if (which or subproc.which)(TOOL) is None:
        return None, {}
    end = time.monotonic() + deadline_s
    raw: dict[str, str] = {}
    errors: list[str] = []
    for argv, name in ((QUERY, QUERY_FILE), (DOMAIN, DOMAIN_FILE)):
        res, why = subproc.run_until(argv, end, "IMEX", run=run, max_output=MAX_TOOL_OUTPUT)
        if res is not None and res.stdout:
            raw[name] = res.stdout
        if why:
            errors.append(why)
        elif not res.ok and not res.stdout.strip():
            errors.append(f"{' '.join(argv)}: {subproc.failure_text(res)}")
    info = imex_from_outputs(raw.get(QUERY_FILE), raw.get(DOMAIN_FILE))
    if errors:
        info.error = "; ".join(([info.error] if info.error else []) + errors)
    return info, raw


def imex_from_outputs(query: str | None, domain: str | None) -> ImexInfo:
    """ImexInfo from the recorded outputs (either may be missing: noted in ``error``)."""
    from ..parsers import ParseError
    from ..parsers.imex import parse_imex_domain, parse_imex_query

    info = ImexInfo()
    problems = []
    if query is not None:
        try:
            info.daemon_status = parse_imex_query(query)
        except ParseError as exc:
            problems.append(str(exc))
    if domain is not None:
        try:
            info.domain_status, info.peers = parse_imex_domain(domain)
        except ParseError as exc:
            problems.append(str(exc))
    info.error = "; ".join(problems) or None
    return info


def imex_from_bundle(read) -> ImexInfo | None:
    """From a bundle's ``nvidia-imex-ctl-q.txt`` / ``nvidia-imex-ctl-N.json`` (``read(name)`` -> text or
    None); None when the bundle has neither."""
    query, domain = read(QUERY_FILE), read(DOMAIN_FILE)
    if query is None and domain is None:
        return None
    return imex_from_outputs(query, domain)
