"""The NVSwitch fabric manager's log on a live node (issue 33): the NVSwitch errors it logged in this boot,
as the SXid events a bundle's copy of it gives (``parsers.fabricmanager``), for ``gpu.xid``.

``live._kernel_events`` adds them to ``kernel_events`` (as a bundle's ``fabricmanager.log`` joins its
``dmesg.txt``) where a log scan belongs: HealthCheckProgram and ``check`` (``live.fabricmanager_log_for``),
never the prolog or epilog; and only where the PCI bus shows NVIDIA GPUs.

- **Absent** (no fabric manager on this node: no NVSwitch, or a compute tray whose switches are managed
  elsewhere): ``None``; nothing is judged and nothing said.
- **Bounded**: its last :data:`TAIL_BYTES` (what ``healthcheck collect`` records, :func:`read_tail` for
  both), a regular file only, opened without following a link and without blocking (a FIFO put there
  cannot hold the run); scanned only when the tail holds an NVSwitch error.
- **Trusted**: what it says can drain the node, so as root the file opened must be root's and not
  writable by group or others (``safeio.trust.check_trusted_stat``; its folder is not asked: ``/var/log``
  is root:syslog 0775 on Debian and Ubuntu). Refused, unreadable: OSError (``gpu.xid`` says ERROR).
- **This boot only**: the kernel's ring buffer holds one boot; the fabric manager's log spans reboots.
  A line whose local time is before this boot (now less ``/proc/uptime``, :data:`BOOT_SLACK_S` allowed
  for a clock stepped at start-up) is left out, so an SXid a reboot cleared does not drain the node again.
  The lines kept carry their time in UTC (``2024-12-19T19:17:49Z``): ``gpu.xid`` judges them as the
  kernel's SXids, and a drain for one is acted on once (``event_key``: the boot and that time).
"""
from __future__ import annotations

import os
import time

LOG_PATH = "/var/log/fabricmanager.log"
TAIL_BYTES = 4 * 1024 * 1024  # its last 4 MiB: the recent NVSwitch errors
# a line up to this long before the boot still counts: the clock may be stepped once the node is up, and a
# GPU server's reboot (firmware, then the driver, then the fabric manager) takes minutes, not one
BOOT_SLACK_S = 60.0
_MARK = b"detected NVSwitch"  # parsers.fabricmanager's mark of an error line
_WHAT = "fabric manager log"


def read_tail(path: str = LOG_PATH, limit: int = TAIL_BYTES) -> bytes | None:
    """The last ``limit`` bytes of the log at ``path``; None when there is no such file. OSError when it is
    not a regular file, is a link, cannot be read or (as root) is not root's alone (``UntrustedFile``)."""
    from ..safeio.trust import NotARegularFile, check_trusted_stat, read_bounded, running_as_root

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
                     | getattr(os, "O_NOCTTY", 0))
    except FileNotFoundError:
        return None
    try:
        import stat

        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotARegularFile(f"{_WHAT} {path} is not a regular file: refusing to read it")
        if running_as_root():
            check_trusted_stat(st, path, _WHAT)
        if st.st_size > limit:
            os.lseek(fd, st.st_size - limit, os.SEEK_SET)
        return read_bounded(fd, limit)
    finally:
        os.close(fd)


def probe_fabricmanager(path: str = LOG_PATH, proc_root: str = "/proc", now: float | None = None) -> list | None:
    """The NVSwitch errors (``KernelEvent``, kind "sxid") the log at ``path`` holds from this boot, in log
    order; None without the file. ``now``: the wall clock (seconds since the epoch; tests fix it).
    OSError as :func:`read_tail`; ParseError (a ValueError) when the tail is not text it can scan."""
    data = read_tail(path)
    if data is None:
        return None
    if _MARK not in data:
        return []
    from ..parsers.fabricmanager import parse_fabricmanager_log

    events = parse_fabricmanager_log(data.decode("utf-8", "replace"))
    return this_boot(events, boot_epoch(proc_root, now))


def this_boot(events: list, boot: float | None) -> list:
    """``events`` whose local time (the fabric manager writes the node's local time) is no earlier than
    ``boot`` (seconds since the epoch) less :data:`BOOT_SLACK_S`, their time rewritten in UTC. An event
    whose time cannot be read is kept (counted: the conservative side, as gpu.xid counts an event of
    unknown age); ``boot`` None keeps them all."""
    kept = []
    for ev in events:
        when = _local_epoch(ev.time)
        if when is not None:
            if boot is not None and when < boot - BOOT_SLACK_S:
                continue
            ev.time = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when))
        kept.append(ev)
    return kept


def boot_epoch(proc_root: str = "/proc", now: float | None = None) -> float | None:
    """When this boot began (seconds since the epoch): ``now`` less ``/proc/uptime``; None unreadable."""
    try:
        fd = os.open(os.path.join(proc_root, "uptime"), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        text = os.read(fd, 128).decode("ascii", "replace")
    except OSError:
        return None
    finally:
        os.close(fd)
    try:
        uptime = float(text.split()[0])
    except (IndexError, ValueError):
        return None
    if not 0 <= uptime < 1e10:  # inf, nan (never equal to itself) and nonsense
        return None
    return (time.time() if now is None else now) - uptime


def _local_epoch(stamp: str | None) -> float | None:
    """``2024-12-19T19:17:49`` (the parser's naive local time) -> seconds since the epoch, None if not one."""
    if not stamp or len(stamp) != 19:
        return None
    try:
        fields = (int(stamp[0:4]), int(stamp[5:7]), int(stamp[8:10]), int(stamp[11:13]), int(stamp[14:16]),
                  int(stamp[17:19]))
        return time.mktime(fields + (0, 0, -1))  # -1: the zone's rules say whether summer time applied
    except (ValueError, OverflowError):
        return None
