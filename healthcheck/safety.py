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
    st = os.stat(real)
    if st.st_uid != 0:
        raise UntrustedFile(f"{what} {real} is owned by uid {st.st_uid}, not root: refusing it as root "
                            f"(fix: chown root:root {real})")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise UntrustedFile(f"{what} {real} is writable by group or others (mode {stat.S_IMODE(st.st_mode):o}): "
                            f"refusing it as root (fix: chmod go-w {real})")
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


def running_as_root() -> bool:
    return os.geteuid() == 0


def make_private(path: str) -> None:
    """Create ``path`` and every missing parent with mode 0700, whatever the umask (``os.makedirs``
    gives the parents 0777 & ~umask: a world-writable state directory under umask 0). Directories that
    already exist are left as they are. OSError when one cannot be created (read-only or full /var)."""
    missing = []
    current = os.path.abspath(path)
    while not os.path.isdir(current):
        missing.append(current)
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    for folder in reversed(missing):
        try:
            os.mkdir(folder, 0o700)
        except FileExistsError:
            continue
        os.chmod(folder, 0o700)
