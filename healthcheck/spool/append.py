"""The spool's write side, lean enough for the prolog's fast path (os, fcntl, errno and time only: no
json, pathlib or dataclasses): the lock, rotation, and one durable append of an already encoded line.
:mod:`healthcheck.spool.store` builds records on it and reads them back; the layout and the failure model
are described there.

Planted links: the record file and the lock are opened ``O_NOFOLLOW`` (a symlink or hard link put there
is refused, never written through), and as root the spool directory must be root's alone (not a
symlink, owned by root, not writable by group or others, nor any directory above it): otherwise
SpoolError names the directory and the fix, and the caller goes on without the record."""
from __future__ import annotations

import errno
import fcntl
import os
import time

from ..safeio.atomic import check_private_dir, make_dirs, open_append, unlink_if_present

CURRENT = "records.jsonl"
LOCK = ".lock"
MAX_LINE_BYTES = 1 << 20  # 1 MiB, newline excluded
DEFAULT_MAX_BYTES = 64 << 20
DEFAULT_KEEP = 5  # rotated files kept besides the current one (logrotate's "rotate 5")
LOCK_TIMEOUT_S = 2.0


class SpoolError(Exception):
    """The spool could not be written (``errno`` holds the OS error number when there was one)."""

    def __init__(self, message: str, errno_: int | None = None) -> None:
        super().__init__(message)
        self.errno = errno_


def new_record_id() -> str:
    """A random (version 4) UUID as 32 hex digits, like ``uuid.uuid4().hex`` without importing uuid
    (a few ms on the prolog's path)."""
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
    raw[8] = (raw[8] & 0x3F) | 0x80  # RFC 4122 variant
    return raw.hex()


def append_line(spool_dir: str, line: bytes, max_bytes: int = DEFAULT_MAX_BYTES,
                keep: int = DEFAULT_KEEP, durable: bool = True) -> str:
    """Append one encoded record (ending in a newline) to ``spool_dir/records.jsonl``, rotating first
    when it would take the file over ``max_bytes``; return the file's path. SpoolError for any OS
    failure.

    ``durable``: fsync the line before returning. The hooks pass False for a healthy run with no
    action (an fsync costs 5-10 ms before every job; the kernel writes the page within seconds, and a
    crash in between loses one "healthy" line, never a failure or a drain)."""
    directory = os.fspath(spool_dir)
    try:
        _ensure_dir(directory)
        check_private_dir(directory, "spool directory")
        with locked(directory, fcntl.LOCK_EX):
            path = os.path.join(directory, CURRENT)
            try:
                size = os.stat(path).st_size
            except FileNotFoundError:
                size = 0
            if size > 0 and size + len(line) > max_bytes:
                _rotate(directory, keep)
            _append_line(path, line, durable)
        return path
    except SpoolError:
        raise
    except OSError as exc:
        raise SpoolError(f"spool {directory}: {exc.strerror or exc}", exc.errno) from exc


def _ensure_dir(directory: str) -> None:
    if os.path.isdir(directory):
        return
    parent = os.path.dirname(os.path.abspath(directory))
    make_dirs(parent, 0o700)
    try:
        os.mkdir(directory, 0o700)
    except FileExistsError:
        return
    os.chmod(directory, 0o700)  # whatever the umask
    _fsync_dir(parent)


def _append_line(path: str, line: bytes, durable: bool = True) -> None:
    """One write under the lock; a failure part-way truncates back to the previous size."""
    fd, created = open_append(path, 0o600)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            line = b"\n" + line  # end a partial line left by a crash: it is reported, ours is whole
        try:
            _write_all(fd, line)
            if durable:
                os.fsync(fd)
        except OSError:
            try:
                os.ftruncate(fd, size)
            except OSError:
                pass
            raise
    finally:
        os.close(fd)
    if created and durable:
        _fsync_dir(os.path.dirname(os.path.abspath(path)))


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if written <= 0:
            raise OSError(errno.EIO, "short write")
        view = view[written:]


def _rotate(directory: str, keep: int) -> None:
    """records.jsonl -> .1 -> .2 ... ; the file beyond ``keep`` is deleted."""
    base = os.path.join(directory, CURRENT)
    if keep < 1:
        unlink_if_present(base)
    else:
        unlink_if_present(f"{base}.{keep}")
        for n in range(keep - 1, 0, -1):
            older = f"{base}.{n}"
            if os.path.exists(older):
                os.replace(older, f"{base}.{n + 1}")
        os.replace(base, f"{base}.1")
    _fsync_dir(directory)


def _fsync_dir(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class locked:
    """flock on ``spool_dir/.lock``, retried without blocking up to LOCK_TIMEOUT_S.

    With ``optional`` (readers), a lock file that cannot be opened (read-only copy of a spool) means
    reading without the lock."""

    def __init__(self, directory: str, mode: int, optional: bool = False) -> None:
        self.directory, self.mode, self.optional = directory, mode, optional
        self.fd: int | None = None

    def __enter__(self) -> "locked":
        path = os.path.join(self.directory, LOCK)
        try:
            self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError:
            if self.optional:
                return self
            raise
        deadline = time.monotonic() + LOCK_TIMEOUT_S
        while True:
            try:
                fcntl.flock(self.fd, self.mode | fcntl.LOCK_NB)
                return self
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(self.fd)
                    self.fd = None
                    if self.optional:
                        return self
                    raise SpoolError(f"spool {self.directory}: lock busy for {LOCK_TIMEOUT_S} s",
                                     errno.EWOULDBLOCK) from None
                time.sleep(0.005)

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            os.close(self.fd)  # releases the flock
