"""Which optional extra a command needs, and one clear error when it is not installed.

The node install (``pip install healthcheck``) holds click, nvidia-ml-py and ClusterShell only: the
Slurm hooks and ``healthcheck check`` need nothing else. The rest comes in extras (pyproject.toml,
docs/deploy.md): a command that needs one calls :func:`require_for` (or :func:`require`) before it
imports the library, and a missing library becomes :class:`MissingExtra` with a message that names the
extra and the install line, instead of a traceback from deep inside the command.

Presence is looked up with ``importlib.util.find_spec`` (nothing is imported: checking costs no import
time). No click here: the CLI turns :class:`MissingExtra` into its usage failure.
"""
from __future__ import annotations

import importlib.util
import sys

# extra -> the top-level modules our code imports from it (pyproject.toml's [project.optional-dependencies];
# tests/packaging/test_extras.py keeps the two in step)
EXTRAS: dict[str, tuple[str, ...]] = {
    "history": ("sqlalchemy", "alembic", "pandas", "numpy", "psycopg"),
    "parquet": ("pyarrow",),
    "burnin": ("numpy",),
    "gpu": ("torch", "numpy"),
    "cupy": ("cupy", "numpy"),
    "slurm": ("pyslurm",),
}

# command path (after ``healthcheck``) -> the extra it needs; the longest matching prefix wins. Commands
# not listed (check, checks, collect, config, parse, fabric, drill, slurm, burnin report/submit) need
# nothing beyond the node install. `history export --format parquet` needs [parquet] too: the export
# code asks for it itself (healthcheck.history.queries).
COMMANDS: dict[str, str] = {
    "history": "history",
    "db": "history",
    "report": "history",
    "sweep": "history",
    "burnin fleet-digests": "history",
    "burnin run": "burnin",
}


def install_line(extra: str) -> str:
    """The command that installs ``extra`` into this interpreter. Not ``pip install 'healthcheck[x]'``: that
    name on the public package index is another project. From the checkout this package runs from (an
    editable install, the README's way) the line names that folder; otherwise the folder or wheel it was
    installed from, which only the admin knows."""
    import os

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if os.path.isfile(os.path.join(root, "pyproject.toml")):
        return f"{sys.executable} -m pip install -e '{root}[{extra}]'"
    return f"{sys.executable} -m pip install '<the healthcheck checkout or wheel you installed>[{extra}]'"


class MissingExtra(Exception):
    """A command needs an optional extra that is not installed. ``str()`` is the whole message."""

    def __init__(self, extra: str, missing: list[str], needed_by: str | None = None):
        self.extra, self.missing, self.needed_by = extra, list(missing), needed_by
        who = needed_by or "this"
        super().__init__(f"{who} needs the [{extra}] extra: {install_line(extra)} "
                         f"(not installed: {', '.join(self.missing)})")


def installed(module: str) -> bool:
    """True when the top-level module ``module`` can be found (already imported, or importable)."""
    if module in sys.modules:
        return sys.modules[module] is not None
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a finder refused it, or a broken half-installed package
        return False


def missing(extra: str) -> list[str]:
    """The modules of ``extra`` that are not installed (empty: the extra is there)."""
    try:
        modules = EXTRAS[extra]
    except KeyError:
        raise ValueError(f"unknown extra {extra!r}: one of {', '.join(sorted(EXTRAS))}") from None
    return [m for m in modules if not installed(m)]


def require(extra: str, needed_by: str | None = None) -> None:
    """Raise :class:`MissingExtra` unless every module of ``extra`` is installed.

    ``needed_by`` names what needs it in the message (``"healthcheck report"``)."""
    absent = missing(extra)
    if absent:
        raise MissingExtra(extra, absent, needed_by)


def extra_for(command: str) -> str | None:
    """The extra a command path needs (``"history export"`` -> ``"history"``), or None."""
    words = command.split()
    for n in range(len(words), 0, -1):
        extra = COMMANDS.get(" ".join(words[:n]))
        if extra:
            return extra
    return None


def require_for(command: str) -> None:
    """:func:`require` the extra of a command path (nothing when it needs none)."""
    extra = extra_for(command)
    if extra:
        require(extra, f"healthcheck {command}")
