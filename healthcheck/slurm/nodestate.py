"""Parse node state from ``scontrol show node`` (Slurm 22.05 and 24.11) and ``sinfo -R``. Pure.

Format facts (Slurm's ``slurm_sprint_node_table()`` in ``src/api/node_info.c``):

- ``-o`` (one-liner) joins what the multi-line form puts on ``"\\n   "``-indented lines with single
  spaces, one node per line. The multi-line form (records separated by blank lines) is accepted too:
  it is turned into the one-line form first, so both go through the same code.
- Fields before ``Reason=`` are ``Key=value`` with values free of spaces, except ``OS=`` (a uname string
  such as ``Linux 6.1.0-18-amd64 #1 SMP PREEMPT_DYNAMIC Debian 6.1.76-1 (2024-02-01)``).
- 22.05: ``LastBusyTime=`` alone, then ``CfgTRES``, ``AllocTRES``, ``CapWatts``, ``CurrentWatts AveWatts``,
  ``ExtSensorsJoules ExtSensorsWatts ExtSensorsTemp``. 24.11: ``LastBusyTime=… ResumeAfterTime=…`` and
  no ``CapWatts``/``ExtSensors*`` (those plugins were removed). Unknown keys are kept, never fatal.
- The tail, in this fixed order and each only when set: ``Reason=<text> [user@time]`` (a reason set
  with newlines continues on lines indented by 7 more spaces; only the first carries the suffix),
  ``Comment=``, ``Extra=``, ``InstanceId= InstanceType=`` (cloud nodes, 23.11+), ``ReservationName=``
  (24.11+). So the Reason is NOT always last, and Reason/Comment/Extra values may contain spaces and
  ``Key=`` look-alikes. A value runs to the next tail key that may follow it; the Reason ends at Slurm's
  `` [user@time]`` suffix when one is followed by the end or a later tail key.
- ``State=`` is ``node_state_string_complete()``: a base state plus ``+FLAG``s, e.g. ``IDLE+DRAIN``,
  ``MIXED+DRAIN`` (draining), ``DOWN+NOT_RESPONDING``, ``IDLE+CLOUD+POWERED_DOWN``. sinfo-style strings
  (``drained``, ``draining``, ``idle*``, ``idle~``) are understood as well.
- Stale reasons (observed on 24.11.5, Debian 13): ``State=RESUME`` leaves the node's ``Reason=`` and its
  ``[user@time]`` in place on the now ``IDLE`` node until a job is next allocated there (22.05 clears it at
  once). ``sinfo -R`` no longer lists it. The parser reports what Slurm prints; ``NodeState.reason_stale``
  says when a reason no longer holds the node, and :func:`without_stale_reason` (``ScontrolBackend``
  applies it) moves it aside so that a resumed node is not mistaken for one an admin still holds.
"""
from __future__ import annotations

import re
from ..core.struct import record as dataclass, field, replace

from ..parsers import ParseError

TAIL_KEYS = ("Reason", "Comment", "Extra", "InstanceId", "InstanceType", "ReservationName")
_TAIL_START = re.compile(r" (Reason|Comment|Extra|InstanceId|InstanceType|ReservationName)=")
_HEAD_KEY = re.compile(r"(?:^| )([A-Za-z][A-Za-z0-9_]*)=")
# Slurm's " [user@time]" after the first reason line; the time is ISO 8601 unless SLURM_TIME_FORMAT is
# set (our backends run scontrol with a clean environment), "Unknown" for a zero time.
_SUFFIX = re.compile(r" \[([^\s@\[\]]+)@(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d|Unknown|None)\]")
_CONTINUATION = " " * 8  # one-liner: " " (line end) + 7 spaces of reason continuation indent
# sinfo short/long state suffix characters -> the flag they stand for (sinfo(1) "NODE STATE CODES")
_SUFFIX_FLAGS = {"*": "NOT_RESPONDING", "~": "POWERED_DOWN", "#": "POWERING_UP", "%": "POWERING_DOWN",
                 "!": "POWER_DOWN", "$": "MAINTENANCE", "@": "REBOOT_REQUESTED", "^": "REBOOT_ISSUED",
                 "-": "PLANNED"}
DRAIN_FLAGS = frozenset({"DRAIN", "DRAINED", "DRAINING", "FAIL", "FAILING"})
_BUSY_STATES = frozenset({"ALLOCATED", "MIXED", "COMPLETING"})
# Besides a drain/fail and DOWN, the flags under which a node is held out of service on someone's word, so
# that its reason still says why (a reboot or a power-down asked for). Not MAINTENANCE/RESERVED: those come
# from a reservation, not from the node's reason.
_HOLD_FLAGS = frozenset({"REBOOT_REQUESTED", "REBOOT_ISSUED", "POWER_DOWN", "POWERING_DOWN"})


@dataclass(frozen=True)
class NodeState:
    name: str
    state: str  # base state, upper case: "IDLE", "ALLOCATED", "MIXED", "DOWN", "UNKNOWN", "FUTURE", ...
    flags: frozenset[str] = frozenset()  # "DRAIN", "NOT_RESPONDING", "CLOUD", "POWERED_DOWN", ...
    reason: str | None = None  # as set, without Slurm's " [user@time]" suffix
    reason_user: str | None = None
    reason_time: str | None = None  # as Slurm prints it (ISO 8601 local time)
    comment: str | None = None
    extra: str | None = None
    fields: dict[str, str] = field(default_factory=dict, compare=False, hash=False, repr=False)

    @property
    def drained(self) -> bool:
        """Drain requested: DRAIN flag (scontrol) or DRAINED/DRAINING (sinfo), or FAIL/FAILING."""
        return self.state in DRAIN_FLAGS or bool(self.flags & DRAIN_FLAGS)

    @property
    def draining(self) -> bool:
        """Drain requested but jobs still run (``MIXED+DRAIN``, ``ALLOCATED+DRAIN``, sinfo ``draining``)."""
        return self.state == "DRAINING" or (self.drained and (self.state in _BUSY_STATES
                                                              or "COMPLETING" in self.flags))

    @property
    def down(self) -> bool:
        return self.state == "DOWN" or "DOWN" in self.flags

    @property
    def not_responding(self) -> bool:
        return "NOT_RESPONDING" in self.flags

    @property
    def held(self) -> bool:
        """Out of service on someone's word: drained/failing, down, or a reboot/power-down asked for."""
        return self.drained or self.down or bool(self.flags & _HOLD_FLAGS)

    @property
    def reason_stale(self) -> bool:
        """A reason left on a node that nothing holds any more: Slurm 24.11 keeps the last reason after
        ``State=RESUME`` until a job is allocated to the node (22.05 clears it). It says nothing about the
        node now, so it must not make the node look held by an admin (or by us)."""
        return self.reason is not None and not self.held


def without_stale_reason(node: NodeState) -> NodeState:
    """``node`` as the drain/resume rules must see it: a stale reason (see ``NodeState.reason_stale``)
    moved to ``fields["StaleReason"]`` (with ``StaleReasonUser``/``StaleReasonTime`` when known) and
    ``reason``/``reason_user``/``reason_time`` None. A node whose reason holds it is returned unchanged."""
    if not node.reason_stale:
        return node
    fields = dict(node.fields)
    fields["StaleReason"] = node.reason or ""
    if node.reason_user:
        fields["StaleReasonUser"] = node.reason_user
    if node.reason_time:
        fields["StaleReasonTime"] = node.reason_time
    return replace(node, reason=None, reason_user=None, reason_time=None, fields=fields)


def parse_state(text: str) -> tuple[str, frozenset[str]]:
    """``IDLE+DRAIN`` -> ("IDLE", {"DRAIN"}); sinfo ``drain*`` -> ("DRAIN", {"NOT_RESPONDING"})."""
    raw = text.strip()
    if not raw:
        raise ParseError("empty node state")
    flags: set[str] = set()
    while raw and raw[-1] in _SUFFIX_FLAGS:
        flags.add(_SUFFIX_FLAGS[raw[-1]])
        raw = raw[:-1]
    parts = [p for p in raw.upper().split("+")]
    if not parts or any(not re.fullmatch(r"[A-Z][A-Z0-9_]*", p) for p in parts):
        raise ParseError(f"unrecognised node state {text!r}")
    base = {"ALLOC": "ALLOCATED", "MIX": "MIXED", "DRAIN": "DRAIN", "DRNG": "DRAINING",
            "COMP": "COMPLETING", "RESV": "RESERVED", "MAINT": "MAINTENANCE", "UNK": "UNKNOWN",
            "NO_RESPOND": "NOT_RESPONDING"}.get(parts[0], parts[0])
    flags.update("NOT_RESPONDING" if p == "NO_RESPOND" else p for p in parts[1:])
    return base, frozenset(flags)


def _one_line_records(text: str) -> list[str]:
    """Records as one-liners: ``-o`` lines as they are, multi-line records joined (see module doc)."""
    records: list[str] = []
    for line in text.replace("\r\n", "\n").split("\n"):
        if not line.strip():
            continue
        if line.startswith("   ") and records:
            records[-1] += " " + line[3:]
        elif line.startswith("NodeName="):
            records.append(line.rstrip("\n"))
        elif line.startswith("Node data as of") or line.startswith("No nodes in the system"):
            continue
        else:
            raise ParseError(f"not a `scontrol show node` line: {line[:80]!r}")
    return records


def _split_tail(tail: str) -> dict[str, str]:
    """``Reason=... Comment=... Extra=...`` (starts with one tail key) -> values, in TAIL_KEYS order."""
    out: dict[str, str] = {}
    pos = 0
    while pos < len(tail):
        m = re.match(r"(\w+)=", tail[pos:])
        if not m or m.group(1) not in TAIL_KEYS:
            raise ParseError(f"unexpected text after the node fields: {tail[pos:pos + 60]!r}")
        key = m.group(1)
        later = TAIL_KEYS[TAIL_KEYS.index(key) + 1:]
        start = pos + m.end()
        nxt = re.compile(r" (" + "|".join(later) + r")=") if later else None
        if key == "Reason":
            end = _reason_end(tail, start, nxt)
        else:
            found = nxt.search(tail, start) if nxt else None
            end = found.start() if found else len(tail)
        out[key] = tail[start:end]
        pos = end + 1 if end < len(tail) else end
    return out


def _reason_end(tail: str, start: int, nxt: re.Pattern | None) -> int:
    """End of the Reason value: after its suffix (+ continuation lines), before the next tail key."""
    for suf in _SUFFIX.finditer(tail, start):
        rest = tail[suf.end():]
        if not rest or rest.startswith(_CONTINUATION) or (nxt is not None and nxt.match(rest)):
            found = nxt.search(tail, suf.end()) if nxt else None
            return found.start() if found else len(tail)
    found = nxt.search(tail, start) if nxt else None
    return found.start() if found else len(tail)


def _reason_parts(value: str) -> tuple[str | None, str | None, str | None]:
    """``text [user@time]<8 spaces>more`` -> ("text\\nmore", user, time)."""
    user = when = None
    suf = None
    for m in _SUFFIX.finditer(value):
        rest = value[m.end():]
        if not rest.strip() or rest.startswith(_CONTINUATION):
            suf = m
            break
    if suf is not None:
        user, when = suf.group(1), suf.group(2)
        lines = [value[:suf.start()]] + [p for p in value[suf.end():].split(_CONTINUATION) if p]
        text = "\n".join(lines)
    else:
        text = value
    text = text.rstrip()
    return (text or None), user, when


def parse_node_line(line: str) -> NodeState:
    """One ``scontrol -o show node`` line -> NodeState."""
    line = line.rstrip("\n")
    if not line.startswith("NodeName="):
        raise ParseError(f"node line does not start with NodeName=: {line[:80]!r}")
    tail_at = _TAIL_START.search(line)
    head, tail = (line[:tail_at.start()], line[tail_at.start() + 1:]) if tail_at else (line, "")
    keys = list(_HEAD_KEY.finditer(head))
    fields: dict[str, str] = {}
    for i, m in enumerate(keys):
        end = keys[i + 1].start() if i + 1 < len(keys) else len(head)
        fields.setdefault(m.group(1), head[m.end():end].strip())
    name = fields.get("NodeName", "")
    if not name or " " in name:
        raise ParseError(f"node line without a node name: {line[:80]!r}")
    if "State" not in fields:
        raise ParseError(f"node {name}: no State= field")
    state, flags = parse_state(fields["State"])
    tails = _split_tail(tail) if tail else {}
    reason, user, when = _reason_parts(tails["Reason"]) if "Reason" in tails else (None, None, None)
    fields.update({k: v for k, v in tails.items() if k != "Reason"})
    return NodeState(name=name, state=state, flags=flags, reason=reason, reason_user=user,
                     reason_time=when, comment=tails.get("Comment"), extra=tails.get("Extra"),
                     fields=fields)


def parse_scontrol_nodes(text: str) -> dict[str, NodeState]:
    """``scontrol -o show node [NAME]`` (or the multi-line form) -> {name: NodeState}.

    Empty output (no nodes) gives ``{}``; anything that is not node records raises ParseError.
    """
    if not isinstance(text, str):
        raise ParseError("scontrol output must be text")
    if "\x00" in text:
        raise ParseError("NUL byte in scontrol output")
    nodes: dict[str, NodeState] = {}
    for record in _one_line_records(text):
        node = parse_node_line(record)
        nodes[node.name] = node
    return nodes


SINFO_REASONS_FORMAT = "%N|%E|%u|%H|%T"
SINFO_REASONS_ARGV = ["sinfo", "-R", "-h", "-N", "-o", SINFO_REASONS_FORMAT]
_SINFO_FIELDS = {"%N", "%n", "%E", "%u", "%H", "%T", "%t"}


def parse_sinfo_reasons(text: str, fmt: str = SINFO_REASONS_FORMAT
                        ) -> dict[str, tuple[str, str | None, str | None]]:
    """``sinfo -R -h -N -o FMT`` -> {node: (reason, user, time)}.

    ``FMT`` is ``|``-separated sinfo fields, default ``%N|%E|%u|%H|%T`` (node, reason, user who set it,
    time, long state). ``-N`` gives one line per node. The reason (``%E``) may itself contain ``|``:
    fields before it are split from the left, fields after it from the right. sinfo prints ``Unknown``
    for a time it does not have and ``(null)``/``none`` for a missing user.
    """
    if not isinstance(text, str) or "\x00" in text:
        raise ParseError("sinfo output must be text without NUL bytes")
    keys = fmt.split("|")
    if set(keys) - _SINFO_FIELDS or "%E" not in keys or not ({"%N", "%n"} & set(keys)):
        raise ValueError(f"unsupported sinfo reason format {fmt!r}")
    at = keys.index("%E")
    out: dict[str, tuple[str, str | None, str | None]] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        left = line.split("|", at)
        if len(left) != at + 1:
            raise ParseError(f"not a `sinfo -R -o '{fmt}'` line: {line[:80]!r}")
        right = left[-1].rsplit("|", len(keys) - at - 1) if len(keys) - at - 1 else [left[-1]]
        if len(right) != len(keys) - at:
            raise ParseError(f"not a `sinfo -R -o '{fmt}'` line: {line[:80]!r}")
        row = dict(zip(keys, [p.strip() for p in left[:-1] + right]))
        name = row.get("%N", row.get("%n", ""))
        if not name or " " in name:
            raise ParseError(f"not a `sinfo -R -o '{fmt}'` line: {line[:80]!r}")
        user, when = row.get("%u", ""), row.get("%H", "")
        out[name] = (row["%E"], None if user in ("", "(null)", "none", "N/A") else user,
                     None if when in ("", "Unknown", "None", "N/A") else when)
    return out
