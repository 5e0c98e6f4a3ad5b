"""Files that steer a root process must be trusted (like sshd's StrictModes): owned by root and not
writable by anyone else, and so must every directory above them, or anyone who can write there could
make the prolog drain (or resume) any node."""
from __future__ import annotations

import os
import stat


class UntrustedFile(PermissionError):
    pass


def check_trusted(path: str, what: str = "file") -> None:
    """Raise UntrustedFile naming the path and the fix when ``path`` (or a directory above it) is not
    owned by root or is group/world writable. A sticky directory owned by root (``/tmp``) is accepted:
    nobody else can rename or remove what is in it."""
    real = os.path.realpath(path)
    check_trusted_stat(os.stat(real), real, what)
    folder = os.path.dirname(real)
    while True:
        st = os.stat(folder)
        sticky = bool(st.st_mode & stat.S_ISVTX)
        if st.st_uid != 0:
            raise UntrustedFile(f"directory {folder} (above {what} {real}) is owned by uid {st.st_uid}, not "
                                f"root: refusing it as root (fix: chown root {folder})")
        if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not sticky:
            raise UntrustedFile(f"directory {folder} (above {what} {real}) is writable by group or others: "
                                f"refusing it as root (fix: chmod go-w {folder})")
        parent = os.path.dirname(folder)
        if parent == folder:
            return
        folder = parent


def check_trusted_stat(st: os.stat_result, path: str, what: str = "file") -> None:
    """The file's own part of :func:`check_trusted`, on a stat result: owned by root, not writable by group
    or others (UntrustedFile otherwise). Given ``os.fstat`` of a file opened with ``O_NOFOLLOW``, it
    judges what is read, not what a path named a moment before: for a file root's daemons write into a
    folder root does not keep alone (``/var/log`` is root:syslog 0775 on Debian and Ubuntu), where a file
    swapped in by another user is that user's and is refused."""
    if st.st_uid != 0:
        raise UntrustedFile(f"{what} {path} is owned by uid {st.st_uid}, not root: refusing it as root "
                            f"(fix: chown root:root {path})")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise UntrustedFile(f"{what} {path} is writable by group or others (mode {stat.S_IMODE(st.st_mode):o}): "
                            f"refusing it as root (fix: chmod go-w {path})")


def running_as_root() -> bool:
    return os.geteuid() == 0


def make_dirs(path: str | os.PathLike[str], mode: int = 0o755) -> None:
    """Create ``path`` and every missing parent with ``mode`` exactly, whatever the umask (existing
    folders are left as they are). OSError when one cannot be created."""
    missing = []
    current = os.path.abspath(os.fspath(path))
    while not os.path.isdir(current):
        missing.append(current)
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    for folder in reversed(missing):
        try:
            os.mkdir(folder, mode & 0o777)
        except FileExistsError:
            if os.path.isdir(folder):
                continue
            raise
        os.chmod(folder, mode & 0o777)


def make_private(path: str) -> None:
    """Create ``path`` and every missing parent with mode 0700, whatever the umask (``os.makedirs``
    gives the parents 0777 & ~umask: a world-writable state directory under umask 0). Directories that
    already exist are left as they are. OSError when one cannot be created (read-only or full /var)."""
    make_dirs(path, 0o700)


MAX_TRUSTED_FILE_BYTES = 4 << 20  # a site config, Xid policy or references file: real ones are < 64 KiB


class NotARegularFile(OSError):
    pass


def read_regular(path: str, what: str = "file", limit: int = MAX_TRUSTED_FILE_BYTES) -> bytes:
    """The bytes of ``path``, which must be a regular file of at most ``limit`` bytes (symlinks to one
    are followed: whether the target may be trusted is :func:`check_trusted`'s decision). A FIFO,
    socket, device or folder is refused before it is opened and again after (fstat of what was
    opened, with ``O_NONBLOCK`` so that a FIFO swapped in between cannot block), never read: a FIFO
    at the config path must not hang the prolog. OSError (``NotARegularFile`` for these refusals)
    (the message says what and why; the caller names the file); a file that grows past the limit while
    it is read is refused too."""
    st = os.stat(path)
    _regular(st, path, what, limit)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0))
    try:
        st = os.fstat(fd)
        _regular(st, path, what, limit)
        data = read_bounded(fd, limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise NotARegularFile(f"{what} grew over {limit} bytes while it was read: refusing it")
    return data


def read_bounded(fd: int, limit: int) -> bytes:
    """Up to ``limit`` bytes from the open file ``fd`` (until end of file), 1 MiB a read: the one
    bounded read loop (:func:`read_regular`, the bundle readers). Read ``limit + 1`` to tell a file
    of exactly ``limit`` bytes from a longer one."""
    chunks, left = [], limit
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _regular(st: os.stat_result, path: str, what: str, limit: int) -> None:
    if not stat.S_ISREG(st.st_mode):
        kind = ("a FIFO" if stat.S_ISFIFO(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode)
                else "a directory" if stat.S_ISDIR(st.st_mode) else "a device" if stat.S_ISCHR(st.st_mode)
                or stat.S_ISBLK(st.st_mode) else "a special file")
        raise NotARegularFile(f"{what} is {kind}, not a regular file: refusing to read it")
    if st.st_size > limit:
        raise NotARegularFile(f"{what} is {st.st_size} bytes, over the limit of {limit} bytes "
                              f"({limit >> 20} MiB) for it: refusing to read it")
