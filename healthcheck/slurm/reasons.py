"""The reasons we set on Slurm nodes: one fixed prefix, sanitised text, a bounded length. Pure.

Format (exact; tests pin it)::

    healthcheck: <check>[ <component>]: <message>[ (+N more)][ (K unjudged)][ [run <run_id>]]

e.g. ``healthcheck: gpu.ecc.uncorrected gpu3: uncorrected ECC errors: volatile 2 [run 1a2b3c4d]``.

- ``<check>`` is reduced to ``[A-Za-z0-9._-]`` (others become ``_``), ``<component>`` to
  ``[A-Za-z0-9._:/-]``; ``<run_id>`` to ``[A-Za-z0-9-]`` and 36 characters (a UUID fits).
- ``(K unjudged)``: K checks of the same run ended in ERROR (could not judge); ``healthcheck check`` on
  the node says what to do about each. An ERROR alone never drains.
- The whole reason is at most :data:`MAX_REASON` characters. When it would be longer the *message* is cut
  (ending in ``...``); prefix, check, component, ``(+N more)`` and the run tag always survive.
- Slurm appends its own `` [user@time]`` when it shows a reason (``scontrol show node``); the parser in
  :mod:`healthcheck.slurm.nodestate` strips it, so :func:`is_ours` sees the text exactly as we set it.

Why sanitise at all, when the reason goes to ``scontrol`` as ONE argv element ``Reason=<text>`` (no
shell)? Because the text is stored by slurmctld and shown in ``sinfo``/``scontrol`` output that admins
read in terminals and that scripts (ours included) parse line by line: newlines would break the
one-line-per-node output, ANSI escapes would repaint an admin's terminal, quotes and backslashes are
what naive shell-based tooling trips over, and Slurm keeps reasons in its state files, so they stay short.
"""
from __future__ import annotations

from ..core.lazyre import Pattern

REASON_PREFIX = "healthcheck:"
MAX_REASON = 200

_ANSI = Pattern(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?")  # CSI and OSC sequences
_WHITESPACE_CONTROLS = "\t\n\r\x0b\x0c"
_DROPPED = "\"'\\"
_RUN_TAG = r"( \(\d+ unjudged\))?( \[run [A-Za-z0-9-]{1,36}\])?$"  # compiled on use (re caches it)


def sanitise(text: str, limit: int = MAX_REASON) -> str:
    """Printable ASCII only, one line, no quotes or backslashes, whitespace collapsed, at most ``limit``.

    ANSI CSI/OSC escape sequences are removed whole; tabs/newlines/CR become spaces; any other control
    character or non-ASCII character becomes ``?``; ``"``, ``'`` and ``\\`` are dropped. ``=`` stays
    (harmless inside one argv element). Text longer than ``limit`` ends in ``...``.
    """
    if not isinstance(text, str):
        text = str(text)
    if limit < 1:
        return ""
    text = _ANSI.sub("", text[: max(limit, 1) * 8 + 4096])  # bound the work on 10 KB+ inputs
    out = []
    for ch in text:
        if ch in _WHITESPACE_CONTROLS:
            out.append(" ")
        elif ch in _DROPPED:
            continue
        elif " " <= ch <= "~":
            out.append(ch)
        else:
            out.append("?")
    clean = " ".join("".join(out).split())
    if len(clean) > limit:
        clean = clean[: limit - 3].rstrip() + "..." if limit > 3 else clean[:limit].rstrip()
    return clean


def _token(text: str | None, allowed: str, limit: int) -> str:
    import re  # on use: a healthy prolog names no check in a reason

    return re.sub(f"[^{allowed}]", "_", sanitise(text or "", limit))


def _check_name(check: str) -> str:
    return _token(check, r"A-Za-z0-9._\-", 64) or "unknown"


def _component(component: str | None) -> str:
    return _token(component, r"A-Za-z0-9._:/\-", 48) if component else ""


def _run_tag(run_id: str | None) -> str:
    if not run_id:
        return ""
    import re

    rid = re.sub(r"[^A-Za-z0-9-]", "", sanitise(run_id, 64))[:36]
    return f" [run {rid}]" if rid else ""


def _assemble(check: str, component: str | None, message: str, more: int, run_id: str | None,
              unjudged: int = 0) -> str:
    head = f"{REASON_PREFIX} {_check_name(check)}"
    comp = _component(component)
    if comp:
        head += f" {comp}"
    head += ":"
    tail = (f" (+{more} more)" if more > 0 else "") + (f" ({unjudged} unjudged)" if unjudged > 0 else "") \
        + _run_tag(run_id)
    room = MAX_REASON - len(head) - len(tail) - 1  # 1 for the space before the message
    msg = sanitise(message, room) if room > 0 else ""
    return f"{head} {msg}{tail}" if msg else f"{head}{tail}"


def make_reason(check: str, component: str | None, message: str, run_id: str | None = None) -> str:
    """Our reason for one failing check (format in the module docstring); always ``is_ours``."""
    return _assemble(check, component, message, 0, run_id)


def make_reason_multi(failures: list[tuple[str, str | None, str]], run_id: str | None = None,
                      unjudged: int = 0) -> str:
    """One reason for several failing checks: names the first, then ``(+N more)``, then
    ``(K unjudged)`` when ``unjudged`` checks of the run could not judge (ERROR).

    ``failures`` is a list of ``(check, component, message)`` in the caller's order of importance.
    """
    if not failures:
        raise ValueError("make_reason_multi needs at least one failure")
    check, component, message = failures[0]
    return _assemble(check, component, message, len(failures) - 1, run_id, unjudged)


def is_ours(reason: str | None) -> bool:
    """True only for reasons that start with our fixed prefix (Slurm's ``[user@time]`` already stripped)."""
    return isinstance(reason, str) and reason.startswith(REASON_PREFIX)


def without_run(reason: str | None) -> str | None:
    """The reason without its trailing ``(K unjudged)`` and ``[run <id>]``: two runs failing for the same
    cause compare equal."""
    if reason is None:
        return None
    import re

    return re.sub(_RUN_TAG, "", reason)


def reason_check(reason: str | None) -> str | None:
    """The check a reason of ours names first (``healthcheck: gpu.xid gpu3: ...`` -> ``gpu.xid``);
    None for a reason that is not ours or names none."""
    if not is_ours(reason):
        return None
    head = reason[len(REASON_PREFIX):].strip().split(":", 1)[0].split(" ", 1)[0]
    return head or None


def slurm_time_epoch(text: str | None) -> float | None:
    """A time as Slurm prints it (local ISO 8601 without offset: ``2026-12-03T14:00:00``) -> epoch
    seconds; None when absent or unreadable."""
    if not text:
        return None
    from datetime import datetime

    try:
        return datetime.fromisoformat(text).timestamp()
    except (ValueError, OverflowError, OSError):
        return None
