"""Render a verdict: text for people, JSON (the contract), Prometheus text exposition format."""
from __future__ import annotations

import json
from collections import OrderedDict

from ..core.model import Status, Verdict, worst
from ..core.textsafe import clean

# The JSON contract's version (``--format json``): bumped when a key is removed or changes meaning;
# added keys do not bump it. 1: node, status, context, started_at, duration_s, results[].
SCHEMA_VERSION = 1


def render(verdict: Verdict, fmt: str, color: bool = False, verbose: bool = False, snapshot=None) -> str:
    """``snapshot`` (optional, Prometheus only): the judged snapshot, for each GPU's UUID label."""
    if fmt == "json":
        return json.dumps({"schema_version": SCHEMA_VERSION, **verdict.to_dict()}, indent=2) + "\n"
    if fmt == "prometheus":
        return prometheus(verdict, snapshot)
    return text(verdict, color, verbose)


def error_advice(check: str, message: str) -> str:
    """What to do next about an ERROR result (the checker could not judge; it never drains)."""
    text = message.lower()
    if text.startswith("check crashed"):
        return "a bug in the check: report it with a bundle of the node (healthcheck collect)"
    if "did not answer" in text:
        return "the driver did not answer: gpu.responsive judges the node; reboot if it persists"
    if text.startswith("cannot judge:"):
        return ("the probe failed: rerun `healthcheck check -v`; if it keeps failing, fix the tool or "
                "driver it reads and collect a bundle (healthcheck collect)")
    if " answered " in text:
        return ("the driver answered a field with an error: rerun; if it persists, collect a bundle "
                "(healthcheck collect), then reset the GPU or reboot")
    return f"rerun `healthcheck check --only {check} -v`; collect a bundle (healthcheck collect) if it persists"


def text(verdict: Verdict, color: bool = False, verbose: bool = False) -> str:
    """One line per non-passing component; one line per check whose components all passed.
    Everything taken from the input is passed through :func:`clean` (no raw control characters)."""
    def paint(status: Status) -> str:
        label = status.value.upper().ljust(5)
        if not color:
            return label
        colors = {Status.FAIL: "31;1", Status.ERROR: "35;1", Status.WARN: "33", Status.SKIP: "2",
                  Status.PASS: "32"}
        return f"\033[{colors[status]}m{label}\033[0m"

    by_check: OrderedDict[str, list] = OrderedDict()
    for f in verdict.findings:
        by_check.setdefault(clean(f.check), []).append(f)
    worst_of = {check: worst(f.status for f in findings) for check, findings in by_check.items()}
    n_skipped = sum(s is Status.SKIP for s in worst_of.values())
    n_error = sum(s is Status.ERROR for s in worst_of.values())
    counts = f"{len(by_check) - n_skipped - n_error} judged, {n_skipped} skipped"
    if n_error:
        counts += f", {n_error} could not judge"
    lines = [f"{clean(verdict.node)}: {paint(verdict.status).strip()}  "
             f"({counts}; {verdict.duration_s:.3f} s, context {clean(verdict.context)})"]
    width = max((len(c) for c in by_check), default=10)
    skipped: OrderedDict[str, list[str]] = OrderedDict()  # reason -> checks skipped for it
    errors: OrderedDict[str, list[str]] = OrderedDict()  # message -> checks that ERRORed with it (one probe)
    for check, findings in by_check.items():
        status = worst_of[check]
        if not verbose and status is Status.SKIP:
            skipped.setdefault(clean(findings[0].message), []).append(check)
            continue
        if not verbose and status is Status.ERROR and all(f.status is Status.ERROR for f in findings) \
                and len({f.message for f in findings}) == 1 and not any(f.component for f in findings):
            errors.setdefault(clean(findings[0].message), []).append(check)  # one line per probe failure
            continue
        if not verbose and status is Status.PASS:
            comps = [f.component for f in findings if f.component and f.status is Status.PASS]
            what = (f"{len(comps)} component{'s' if len(comps) != 1 else ''} ok"
                    if len(comps) > 1 else clean(findings[0].message))
            lines.append(f"  {paint(Status.PASS)} {check.ljust(width)}  {what}")
            continue
        for f in findings:
            if not verbose and f.status in (Status.PASS, Status.SKIP):
                continue
            comp = f" [{clean(f.component)}]" if f.component else ""
            lines.append(f"  {paint(f.status)} {check.ljust(width)}  {clean(f.message)}{comp}")
    for message, checks in errors.items():
        names = checks[0] if len(checks) == 1 else f"{len(checks)} checks ({', '.join(checks)})"
        lines.append(f"  {paint(Status.ERROR)} {names}: {message}")
    for reason, checks in skipped.items():
        names = checks[0] if len(checks) == 1 else f"{len(checks)} checks ({', '.join(checks)})"
        lines.append(f"  {paint(Status.SKIP)} {names}: {reason}")
    advice: OrderedDict[str, list[str]] = OrderedDict()  # what to do -> checks that ERRORed
    for f in verdict.findings:
        if f.status is Status.ERROR:
            names = advice.setdefault(error_advice(f.check, f.message), [])
            if clean(f.check) not in names:
                names.append(clean(f.check))
    if advice:
        count = sum(f.status is Status.ERROR for f in verdict.findings)
        lines.append(f"  next: {count} ERROR result{'s' if count != 1 else ''} (the checker could not judge; "
                     "not a verdict on the node; does not drain by default):")
        lines += [f"    {', '.join(checks)}: {what}" for what, checks in advice.items()]
    return "\n".join(lines) + "\n"


def prometheus(verdict: Verdict, snapshot=None) -> str:
    """Text exposition format for node_exporter's textfile collector (:mod:`healthcheck.output.prometheus`,
    imported only here: the Slurm hooks import this module for :func:`clean` and never render it).
    One way: :mod:`prometheus` imports :mod:`textsafe`, never this module."""
    from .prometheus import prometheus as render_prometheus  # noqa: PLC0415 - off the hooks' import path

    return render_prometheus(verdict, snapshot)


def exit_code(verdict: Verdict, strict: bool = False) -> int:
    """0 healthy (pass/warn/skip, and error: the checker could not judge), 1 any fail
    (healthcheck.core.exitcodes). ``strict`` (``check --strict``, for scripts and pdsh loops): a check
    that could not judge (ERROR) is 6, unavailable, instead of 0; a FAIL is still 1."""
    from ..core.exitcodes import FAIL, OK, UNAVAILABLE

    if verdict.status is Status.FAIL:
        return FAIL
    if strict and any(f.status is Status.ERROR for f in verdict.findings):
        return UNAVAILABLE
    return OK
