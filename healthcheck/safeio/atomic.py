"""Writes that a planted link cannot redirect and a umask cannot loosen (os, stat, errno and the os-only
healthcheck.safeio.trust: the prolog imports this).

Every file the suite writes goes through here:

- :func:`atomic_write` / :class:`atomic_file`: the whole file or nothing. A temporary file with a
  random name beside the target, created ``O_CREAT | O_EXCL | O_NOFOLLOW`` (a link planted under any
  name we could pick is never opened), ``fchmod`` to the mode asked whatever the umask, written,
  fsync'ed, renamed over the target (``os.replace`` replaces a link put there, never writes through
  it), then the folder fsync'ed where the filesystem allows. On any failure the temporary is removed and
  the target is as it was.
- :func:`open_append`: the spool's append-only file, opened ``O_APPEND | O_NOFOLLOW``; only a regular
  file with one name, owned by us, is written (a hard link to another file is refused too).
- :func:`check_private_dir`: as root, a folder that steers or receives root's writes (spool, state,
  cache) must be root's alone: not a symlink, owned by root, not writable by group or others, and so
  every directory above it (a sticky root-owned one like /tmp excepted), as healthcheck.safeio.trust asks
  of the config.
- :func:`make_dirs`: missing folders created with an explicit mode, not 0777 & ~umask.
- :func:`unlink_if_present`: the one removal of a file that may already be gone (quietly, for our own
  temporaries; loudly for any other error, for the spool's rotation).
"""
from __future__ import annotations

import errno
import os
import stat

from .trust import UntrustedFile, check_trusted, make_dirs  # noqa: F401 - make_dirs re-exported

TEMP_SUFFIX = ".tmp"


class UnsafePath(PermissionError):
    """A file or folder refused because someone else could redirect or read our write; the message
    names the path and the fix."""


def temp_name(path: str) -> str:
    """A fresh temporary name beside ``path``: ``.<name>.<random>.tmp`` (hidden, never a glob match for
    the real files, and ending in .tmp so that cleaners recognise it)."""
    folder, name = os.path.split(path)
    return os.path.join(folder, f".{name[:200]}.{os.urandom(8).hex()}{TEMP_SUFFIX}")


def _create_temp(path: str, mode: int) -> tuple[str, int]:
    for _ in range(8):
        tmp = temp_name(path)
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode & 0o777)
        except FileExistsError:
            continue  # 64 random bits taken (or a planted link there): pick another name
        try:
            os.fchmod(fd, mode & 0o777)  # whatever the umask
        except OSError:
            os.close(fd)
            unlink_if_present(tmp, quiet=True)
            raise
        return tmp, fd
    raise FileExistsError(errno.EEXIST, "no free temporary name", temp_name(path))


def unlink_if_present(path: str | os.PathLike[str], *, quiet: bool = False) -> None:
    """Remove ``path``; a file that is not there is never an error (someone else removed it first).

    ``quiet=True`` also swallows every other OSError: for cleanup of our own temporaries on a path that
    is already failing (this module's writers), where the original error is the one to report.
    ``quiet=False`` (the default) lets any other OSError propagate: for removals the caller relies on,
    such as the spool's rotation (healthcheck.spool.append), where a file we could not delete must not
    pass for deleted."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError:
        if not quiet:
            raise


def fsync_dir(folder: str) -> None:
    """Make a rename or a new name in ``folder`` durable, where the filesystem allows it."""
    try:
        fd = os.open(folder or ".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if written <= 0:
            raise OSError(errno.EIO, "short write")
        view = view[written:]


def atomic_write(path: str | os.PathLike[str], data: bytes | str, mode: int = 0o600, *,
                 private_dir: bool = False, durable: bool = True) -> None:
    """Replace ``path`` with ``data`` (str is written as UTF-8) atomically, file mode ``mode`` exactly.

    ``private_dir``: as root, refuse (:class:`UnsafePath`) unless the folder passes
    :func:`check_private_dir` (spool, state and cache folders). ``durable``: fsync the file and the
    folder (False: still whole-or-nothing for readers, but a crash may leave the old file or none: for
    state that is cheap to lose, written before every job). OSError for any failure; the target is
    then untouched and no temporary file is left."""
    path = os.fspath(path)
    if isinstance(data, str):
        data = data.encode("utf-8")
    folder = os.path.dirname(os.path.abspath(path))
    if private_dir:
        check_private_dir(folder)
    tmp, fd = _create_temp(path, mode)
    try:
        try:
            _write_all(fd, data)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        unlink_if_present(tmp, quiet=True)
        raise
    if durable:
        fsync_dir(folder)


class atomic_file:
    """``with atomic_file(path, 0o644) as fh: fh.write(b"...")``: :func:`atomic_write` for writers that
    stream (tarfile, csv, parquet). ``fh`` is a binary file; the target is replaced only when the block
    ends without an exception (then the temporary is removed). Do not close ``fh`` yourself."""

    def __init__(self, path: str | os.PathLike[str], mode: int = 0o600, *, private_dir: bool = False) -> None:
        self.path = os.fspath(path)
        self.mode = mode
        self.private_dir = private_dir
        self.folder = os.path.dirname(os.path.abspath(self.path))
        self.tmp: str | None = None
        self.fh = None

    def __enter__(self):
        if self.private_dir:
            check_private_dir(self.folder)
        self.tmp, fd = _create_temp(self.path, self.mode)
        try:
            self.fh = os.fdopen(fd, "wb")
        except BaseException:
            os.close(fd)
            unlink_if_present(self.tmp, quiet=True)
            raise
        return self.fh

    def __exit__(self, exc_type, exc, tb) -> bool:
        fh, tmp = self.fh, self.tmp
        if exc_type is not None:
            try:
                fh.close()
            except OSError:
                pass
            unlink_if_present(tmp, quiet=True)
            return False
        try:
            try:
                fh.flush()
                os.fsync(fh.fileno())
            finally:
                fh.close()
            os.replace(tmp, self.path)
        except BaseException:
            unlink_if_present(tmp, quiet=True)
            raise
        fsync_dir(self.folder)
        return False


def open_append(path: str | os.PathLike[str], mode: int = 0o600) -> tuple[int, bool]:
    """Open ``path`` for appending (``O_RDWR | O_APPEND``, so the caller may also ``pread``), creating
    it with ``mode`` exactly; return (fd, created).

    Never through a symlink (``O_NOFOLLOW``); :class:`UnsafePath` when the file is not a regular file,
    has more than one name (a hard link to someone else's file) or is not ours. A file of ours with a
    looser mode is brought back to ``mode``."""
    path = os.fspath(path)
    base = os.O_RDWR | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0)
    for _ in range(4):
        try:
            fd = os.open(path, base | os.O_CREAT | os.O_EXCL, mode & 0o777)
            created = True
        except FileExistsError:
            try:
                fd = os.open(path, base | os.O_NONBLOCK)  # a FIFO planted there does not block the open
                created = False
            except FileNotFoundError:
                continue  # removed (rotated) in between: create it
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise UnsafePath(errno.ELOOP, f"{path} is a symlink: refusing to write through it "
                                                  f"(fix: remove the link)") from None
                raise
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise UnsafePath(errno.EPERM, f"{path} is not a regular file: refusing to write to it")
            if st.st_nlink != 1:
                raise UnsafePath(errno.EPERM, f"{path} has {st.st_nlink} names (a hard link): refusing to "
                                              f"write to it (fix: remove it)")
            if st.st_uid != os.geteuid():
                raise UnsafePath(errno.EPERM, f"{path} is owned by uid {st.st_uid}, not {os.geteuid()}: "
                                              f"refusing to write to it (fix: remove it)")
            if created or stat.S_IMODE(st.st_mode) != mode & 0o777:
                os.fchmod(fd, mode & 0o777)
            if not created:
                os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
        return fd, created
    raise OSError(errno.EAGAIN, "created and removed repeatedly while opening", path)


def check_private_dir(folder: str | os.PathLike[str], what: str = "directory") -> None:
    """As root, :class:`UnsafePath` unless ``folder`` is a real directory (not a symlink) owned by root
    and not writable by group or others, and so is every directory above it (a sticky root-owned one,
    like /tmp, is accepted above it). Not root: nothing to check (what we write is ours to lose)."""
    if os.geteuid() != 0:
        return
    folder = os.fspath(folder)
    st = os.lstat(folder)
    if stat.S_ISLNK(st.st_mode):
        raise UnsafePath(errno.EPERM, f"{what} {folder} is a symlink: refusing it as root "
                                      f"(fix: name the real directory, {os.path.realpath(folder)})")
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafePath(errno.ENOTDIR, f"{what} {folder} is not a directory")
    try:
        check_trusted(folder, what)
    except UntrustedFile as exc:
        raise UnsafePath(errno.EPERM, str(exc)) from None


