"""Judge a snapshot: select the checks for a context, run them, turn probe failures into findings,
build the verdict. Pure apart from the monotonic clock used for the duration."""
from __future__ import annotations

import time

from ..checks.registry import CONTEXT_KEY, CheckSpec, IndexEntry, index, matches, select, spec as load_spec
from ..core.expectations import Expectations
from ..core.model import Finding, Snapshot, Status, Verdict
from ..probes.live import ABSENT  # why a check was skipped, by missing source: each probe's declaration


class SelectionError(ValueError):
    """``--only`` / ``--skip`` patterns that select nothing (a usage error: exit 2)."""


def closest_names(pattern: str, names: list[str], n: int = 5) -> list[str]:
    """The check names nearest to ``pattern`` (a glob or a misspelt name), best first."""
    import difflib  # noqa: PLC0415 - only on the error path

    stem = pattern.strip("*?[]! ").rstrip(".")
    by_prefix = [name for name in names if stem and name.startswith(stem.split(".")[0] + ".")]
    near = difflib.get_close_matches(stem, names, n=n, cutoff=0.5) or \
        difflib.get_close_matches(stem, names, n=3, cutoff=0.0)
    return list(dict.fromkeys(near + by_prefix))[:n]


def check_patterns(names: list[str], only: list[str] | None = None, skip: list[str] | None = None) -> None:
    """Raise :class:`SelectionError` naming each ``--only``/``--skip`` glob that matches no check of
    ``names``, with the closest names."""
    problems = []
    for option, patterns in (("--only", only), ("--skip", skip)):
        for pattern in patterns or ():
            if not any(matches(name, pattern) for name in names):
                near = closest_names(pattern, names)
                hint = f"closest: {', '.join(near)}; all: `healthcheck checks`" if near \
                    else "see `healthcheck checks`"
                problems.append(f"{option} {pattern!r} matches no check ({hint})")
    if problems:
        raise SelectionError("; ".join(problems))


def choose(specs: dict[str, CheckSpec | IndexEntry], context: str, enabled: list[str] | None,
           only: list[str] | None = None, skip: list[str] | None = None) -> list[CheckSpec | IndexEntry]:
    """The checks to run: :func:`select`, less those matching a ``skip`` glob. Raises
    :class:`SelectionError` when a pattern matches no check, or when ``only``/``skip`` leave
    nothing to run in ``context`` (never a PASS of zero checks)."""
    check_patterns(list(specs), only, skip)
    chosen = select(specs, context, enabled, only)
    if skip:
        chosen = [s for s in chosen if not any(matches(s.name, g) for g in skip)]
    if not chosen and (only or skip):
        asked = " ".join([f"--only {g!r}" for g in only or ()] + [f"--skip {g!r}" for g in skip or ()])
        raise SelectionError(f"{asked} leaves no check to run in context {context!r} "
                             f"(see `healthcheck checks --context {context}`)")
    return chosen


def _without_its_sources(entry: CheckSpec | IndexEntry, snap: Snapshot) -> list[Finding] | None:
    """ERROR when a probe the check needs failed, SKIP when a source it needs is absent (unless the
    check handles absence itself); None when the check is to run. Needs only the index's facts."""
    if entry.handles_missing:
        return None
    for source in entry.needs:
        err = snap.probe_errors.get(source)
        if err is not None:
            what = "did not answer (driver wedged?)" if err.kind == "hang" else f"failed ({err.kind})"
            return [Finding(entry.name, Status.ERROR, f"cannot judge: {source} probe {what}: {err.message}")]
    missing = [s for s in entry.needs if getattr(snap, s) is None]
    if missing:
        return [Finding(entry.name, Status.SKIP, ABSENT[missing[0]])]
    return None


def run_check(spec: CheckSpec, snap: Snapshot, exp: Expectations, context: str = "check") -> list[Finding]:
    """One check on one snapshot in ``context``; never raises (a checker bug becomes an ERROR finding).
    The check's thresholds carry the context under the reserved key ``"_context"`` (CONTEXT_KEY)."""
    early = _without_its_sources(spec, snap)
    if early is not None:
        return early
    thresholds = exp.thresholds_for(spec.name, spec.thresholds)
    thresholds[CONTEXT_KEY] = context
    try:
        findings = list(spec.func(snap, exp, thresholds))
    except Exception as exc:  # a checker bug must not stop the other checks
        return [Finding(spec.name, Status.ERROR, f"check crashed: {type(exc).__name__}: {exc}")]
    if not findings:
        return [Finding(spec.name, Status.SKIP, "nothing to check")]
    for f in findings:
        if f.check != spec.name:
            f.check = spec.name
    return findings


def sources_needed(exp: Expectations, context: str, only: list[str] | None = None,
                   skip: list[str] | None = None) -> frozenset[str]:
    """The snapshot sources the checks of ``context`` need (from the index: nothing imported)."""
    entries = choose(index(), context, list(exp.checks[context]) if context in exp.checks else None, only, skip)
    return frozenset(source for entry in entries for source in entry.needs)


def judge(snap: Snapshot, exp: Expectations, context: str = "check", only: list[str] | None = None,
          started_at: str | None = None, started_monotonic: float | None = None,
          skip: list[str] | None = None) -> Verdict:
    """Run the checks of ``context`` (narrowed by ``only``/``skip`` globs: :func:`choose`, which
    raises :class:`SelectionError` when they select nothing) on ``snap``."""
    started_monotonic = time.monotonic() if started_monotonic is None else started_monotonic
    entries = choose(index(), context, list(exp.checks[context]) if context in exp.checks else None,
                     only, skip)
    findings: list[Finding] = []
    for entry in entries:  # a check's module is imported only when the check is to run
        early = _without_its_sources(entry, snap)
        findings.extend(early if early is not None else run_check(load_spec(entry.name), snap, exp, context))
    return Verdict.of(snap.node, findings, started_at or snap.taken_at,
                      time.monotonic() - started_monotonic, context)
