"""The hooks' memory of the network error counters between runs (issue 32), for ``net.errors``,
``net.ethtool`` and ``net.link.flaps``: growth over a window, not totals over the uptime.

Every hook run that read the ports (prolog, epilog, HealthCheckProgram) hands its reading to
:func:`keep_readings`: the RDMA ports' counters (``Snapshot.ib_ports``), the Ethernet ports' sysfs
statistics (``net_ports``) and, where HealthCheckProgram ran it, ``ethtool -S`` (``net_ethtool``), only
the counters ``policies.netcounters`` keeps. For each counter it compares the value with the last one
kept, records the growth with the interval it happened in (:class:`~healthcheck.core.model.NetGrowth`:
``from_s`` .. ``at_s``), keeps 24 h of growth in ``<state_dir>/net-counters.txt``, and puts the whole
memory on the snapshot (``Snapshot.net_window``) for the pure checks.

Rules (none of them may turn a reboot or a reload into a FAIL):
- a new port, or a port whose PCI address, board or driver changed (a replaced card): its series starts
  afresh, nothing counted;
- another boot (``/proc/sys/kernel/random/boot_id``): every port rebases, nothing counted across it (the
  counters restarted at 0; what they show now happened since boot, mostly the link coming up);
- any kept counter of a port smaller than before (a driver reload, ``perfquery -R``, a port reset): that
  port rebases, nothing counted for that interval; said in the series' notes;
- an IBA PortCounters value at its width's maximum (``link_downed`` 255, ``symbol_error`` 65535) stopped
  counting: named in ``saturated`` (the check WARNs: clear the counters);
- a counter absent from this reading (ethtool runs only in HealthCheckProgram) keeps its last value and
  time: its next growth spans the whole interval, and the check counts only growth wholly inside its window.

The file is plain lines (no json: the prolog writes it), rewritten atomically (0600, a folder that must
be root's alone when root runs it), without fsync (cheap state, written before every job). One that
cannot be read or parsed is replaced (said in the returned note), never trusted in part. Two hooks
writing at once lose one reading, not growth: the values are absolute, the next run counts from the
last one kept. os/time only.
"""
from __future__ import annotations

import os

from ..core.model import NetGrowth, NetSeries, NetWindow, Snapshot
from ..policies.netcounters import MAX_WINDOW_H, WIDTH_BITS, kept

FILE_NAME = "net-counters.txt"
MAGIC = "healthcheck-net-window 1"
RETAIN_S = MAX_WINDOW_H * 3600.0  # growth kept this long; a port unseen this long is forgotten
MAX_FILE_BYTES = 1 << 20
MAX_PORTS = 128
MAX_GROWTH = 512  # growth records per port (the oldest go first)
MAX_NOTES = 4
# The file is rewritten when a counter moved or a port came or went, else at most every REFRESH_S: a
# growth then starts at most this long before the reading that last saw the counter unchanged (the
# prolog's usual run reads and leaves the file: ~0.2 ms instead of ~1.5 ms with the write).
REFRESH_S = 600.0
_KEPT = {group: kept(group) for group in ("rdma", "netdev", "ethtool")}


def _shape(ports: dict[str, _Port]) -> dict:
    """What a rewrite would change beyond the read times."""
    return {c: (p.identity, p.since_s, {n: v for n, (v, _at) in p.values.items()}, len(p.growth), len(p.notes))
            for c, p in ports.items()}


def window_path(state_dir: str) -> str:
    return os.path.join(state_dir, FILE_NAME)


class _Port:
    __slots__ = ("identity", "since_s", "seen_s", "values", "growth", "notes")

    def __init__(self, identity: str, since_s: float, seen_s: float) -> None:
        self.identity = identity
        self.since_s = since_s
        self.seen_s = seen_s
        self.values: dict[str, tuple[int, float]] = {}  # counter -> (value, read at)
        self.growth: list[tuple[str, float, float, int]] = []  # (counter, from_s, at_s, increment)
        self.notes: list[str] = []


def _word(text: object) -> str:
    """A component or identity as one word of the file."""
    word = "_".join(str(text).split()) if text is not None else ""
    return word[:200] or "-"


def _time(text: str) -> float:
    value = float(text)
    if not value == value or not 0 <= value < 1e11:  # NaN, infinities, nonsense
        raise ValueError(f"bad time {text!r}")
    return value


def _count(text: str) -> int:
    if not text.isascii() or not text.isdigit() or len(text) > 24:
        raise ValueError(f"bad count {text!r}")
    return int(text)


def parse(text: str) -> tuple[str | None, dict[str, _Port]]:
    """The file's text -> (boot id, ports by component); ValueError for anything malformed."""
    lines = text.split("\n")
    if not lines or lines[0] != MAGIC:
        raise ValueError(f"not a {MAGIC!r} file")
    boot: str | None = None
    ports: dict[str, _Port] = {}
    port: _Port | None = None
    for number, line in enumerate(lines[1:], 2):
        if not line:
            continue
        kind, _, rest = line.partition(" ")
        words = rest.split(" ")
        if kind == "boot" and len(words) == 1:
            boot = None if words[0] == "-" else words[0]
        elif kind == "port" and len(words) == 4:
            if len(ports) >= MAX_PORTS:
                raise ValueError(f"more than {MAX_PORTS} ports")
            port = ports[words[0]] = _Port(words[1], _time(words[2]), _time(words[3]))
        elif kind == "v" and len(words) == 3 and port is not None:
            port.values[words[0]] = (_count(words[1]), _time(words[2]))
        elif kind == "g" and len(words) == 4 and port is not None:
            port.growth.append((words[0], _time(words[1]), _time(words[2]), _count(words[3])))
        elif kind == "n" and port is not None:
            port.notes.append(rest[:300])
        else:
            raise ValueError(f"line {number}: cannot read {line[:60]!r}")
    return boot, ports


def render(boot: str | None, ports: dict[str, _Port]) -> str:
    out = [MAGIC, f"boot {_word(boot)}"]
    for component, port in ports.items():
        out.append(f"port {_word(component)} {_word(port.identity)} {port.since_s:.3f} {port.seen_s:.3f}")
        out.extend(f"v {name} {value} {at:.3f}" for name, (value, at) in sorted(port.values.items()))
        out.extend(f"g {name} {since:.3f} {at:.3f} {inc}" for name, since, at, inc in port.growth)
        out.extend(f"n {' '.join(note.split())[:300]}" for note in port.notes[-MAX_NOTES:])
    return "\n".join(out) + "\n"


def load(state_dir: str) -> tuple[str | None, dict[str, _Port], str | None]:
    """(boot id, ports, note): the note says why an existing file was not used (it is then rewritten)."""
    path = window_path(state_dir)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        return None, {}, None
    except OSError as exc:
        return None, {}, f"{path}: not readable ({exc}), started afresh"
    try:
        raw = os.read(fd, MAX_FILE_BYTES + 1)
    except OSError as exc:
        return None, {}, f"{path}: not readable ({exc}), started afresh"
    finally:
        os.close(fd)
    if len(raw) > MAX_FILE_BYTES:
        return None, {}, f"{path}: over {MAX_FILE_BYTES} bytes, started afresh"
    try:
        boot, ports = parse(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        return None, {}, f"{path}: {exc}, started afresh"
    return boot, ports, None


def readings(snap: Snapshot) -> dict[str, tuple[str | None, dict[str, int]]]:
    """This run's kept counters by component: {component: (identity or None, {counter: value})}."""
    out: dict[str, tuple[str | None, dict[str, int]]] = {}
    for port in snap.ib_ports or []:
        values = {k: v for k, v in port.counters.items() if k in _KEPT["rdma"]}
        out[port.component] = (f"{port.pci_bus_id or '-'}|{port.board_id or port.hca_type or '-'}", values)
    for net in snap.net_ports or []:
        values = {k: v for k, v in net.counters.items() if k in _KEPT["netdev"]}
        out[net.name] = (f"{net.pci_bus_id or '-'}|{net.driver or '-'}", values)
    for eth in snap.net_ethtool or []:
        if eth.error is None:
            identity, values = out.get(eth.name, (None, {}))
            values = dict(values)
            values.update((k, v) for k, v in eth.counters.items() if k in _KEPT["ethtool"])
            out[eth.name] = (identity, values)
    return out


def _saturated(name: str, value: int) -> bool:
    bits = WIDTH_BITS.get(name)
    return bits is not None and value == (1 << bits) - 1


def update(boot: str | None, ports: dict[str, _Port], new_boot: str | None,
           current: dict[str, tuple[str | None, dict[str, int]]], now_s: float) -> dict[str, _Port]:
    """The memory after this reading (pure: the file's content in, the new content out)."""
    rebooted = boot is not None and new_boot is not None and boot != new_boot
    kept_ports: dict[str, _Port] = {}
    for component, (identity, values) in current.items():
        port = ports.get(component)
        if port is not None and identity is not None and port.identity not in ("-", identity):
            port.growth, port.values, why = [], {}, f"another device ({port.identity} -> {identity})"
            port.notes.append(f"started afresh at {now_s:.0f}: {why}")
            port.since_s = now_s
        if port is None:
            port = _Port(identity or "-", now_s, now_s)
        elif rebooted:
            port.values = {}
            port.since_s = now_s
            port.notes.append(f"rebased at {now_s:.0f}: the node rebooted (counters restart at 0, not counted)")
        if identity is not None:
            port.identity = identity
        dropped = [k for k, v in values.items() if k in port.values and v < port.values[k][0]]
        if dropped:
            port.notes.append(f"rebased at {now_s:.0f}: {', '.join(sorted(dropped)[:3])} went down "
                              "(counters reset: driver reload, port reset or perfquery -R; not counted)")
            port.since_s = now_s
            for name, value in values.items():
                port.values[name] = (value, now_s)
        else:
            for name, value in values.items():
                before = port.values.get(name)
                if before is not None and value > before[0]:
                    port.growth.append((name, before[1], now_s, value - before[0]))
                port.values[name] = (value, now_s)
        port.seen_s = now_s
        kept_ports[component] = port
    for component, port in ports.items():  # ports not read this time: kept a while (another context's)
        if component not in kept_ports and now_s - port.seen_s <= RETAIN_S and len(kept_ports) < MAX_PORTS:
            if rebooted:
                port.values = {}
            kept_ports[component] = port
    for port in kept_ports.values():
        port.growth = [g for g in port.growth if now_s - g[2] <= RETAIN_S][-MAX_GROWTH:]
        port.notes = port.notes[-MAX_NOTES:]
    return dict(list(kept_ports.items())[:MAX_PORTS])


def window_of(ports: dict[str, _Port], now_s: float, notes: list[str]) -> NetWindow:
    series = []
    for component, port in sorted(ports.items()):
        grouped: dict[tuple[float, float], dict[str, int]] = {}
        for name, since, at, inc in port.growth:
            bucket = grouped.setdefault((since, at), {})
            bucket[name] = bucket.get(name, 0) + inc
        series.append(NetSeries(component, port.since_s,
                                [NetGrowth(f, a, c) for (f, a), c in sorted(grouped.items(), key=lambda x: x[0][1])],
                                list(port.notes),
                                sorted(n for n, (v, _at) in port.values.items() if _saturated(n, v))))
    return NetWindow(now_s, series, notes)


def boot_id(proc_root: str = "/proc") -> str | None:
    try:
        fd = os.open(os.path.join(proc_root, "sys/kernel/random/boot_id"), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return os.read(fd, 64).decode("ascii", "replace").strip() or None
    except OSError:
        return None
    finally:
        os.close(fd)


def keep_readings(state_dir: str, snap: Snapshot, now_s: float | None = None,
                  proc_root: str = "/proc") -> str | None:
    """Add this run's reading to the memory, put it on ``snap.net_window`` and write it back. Returns
    None, or a note to log (an unusable file, one that could not be written): never raises for I/O."""
    import time

    now_s = time.time() if now_s is None else now_s
    boot, ports, note = load(state_dir)
    before, written_s = _shape(ports), max((p.seen_s for p in ports.values()), default=0.0)
    new_boot = boot_id(proc_root)
    ports = update(boot, ports, new_boot, readings(snap), now_s)
    notes = [note] if note else []
    snap.net_window = window_of(ports, now_s, notes)
    if not note and (new_boot or boot) == boot and _shape(ports) == before and (
            not ports or 0 <= now_s - written_s < REFRESH_S):
        return None  # nothing grew, nothing new (or no port at all): the file stays (read times <= REFRESH_S old)
    try:
        from ..safeio.atomic import atomic_write, make_dirs

        make_dirs(state_dir, 0o700)
        atomic_write(window_path(state_dir), render(new_boot or boot, ports), 0o600, private_dir=True,
                     durable=False)
    except (OSError, ValueError) as exc:
        problem = f"network counters not written to {window_path(state_dir)}: {exc}"
        return f"{note}; {problem}" if note else problem
    return note
