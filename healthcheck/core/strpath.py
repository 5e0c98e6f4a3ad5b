"""``Path``: a path held as a string, with the few pathlib operations the hooks' modules use (``/``,
``name``, ``parent``, ``read_bytes``, ``unlink``, ``stat``, ``iterdir``, ``exists``). Importing pathlib
costs several ms (it brings urllib.parse and ipaddress), paid before every job by the prolog; this costs
nothing. It is a ``str`` (and so an ``os.PathLike`` for ``open``/``os`` calls)."""
from __future__ import annotations

import os


class Path(str):
    __slots__ = ()

    def __new__(cls, value: str | os.PathLike = "."):
        return super().__new__(cls, os.fspath(value))

    def __truediv__(self, other) -> "Path":
        return Path(os.path.join(self, os.fspath(other)))

    def __fspath__(self) -> str:
        return str.__str__(self)

    @property
    def name(self) -> str:
        return os.path.basename(self)

    @property
    def parent(self) -> "Path":
        return Path(os.path.dirname(self) or ".")

    def read_bytes(self) -> bytes:
        with open(self, "rb") as fh:
            return fh.read()

    def unlink(self, missing_ok: bool = False) -> None:
        try:
            os.unlink(self)
        except FileNotFoundError:
            if not missing_ok:
                raise

    def stat(self) -> os.stat_result:
        return os.stat(self)

    def exists(self) -> bool:
        return os.path.exists(self)

    def is_dir(self) -> bool:
        return os.path.isdir(self)

    def iterdir(self):
        return (self / name for name in os.listdir(self))
