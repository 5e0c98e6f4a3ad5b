"""The config file's sections (every table but ``[defaults]``, ``[class.NAME]`` and ``[xid]``): one
registry, one shape.

Each section belongs to the subsystem that applies it, and that subsystem validates it with one
function of one shape: ``validate(table: dict) -> Settings``, raising ``ValueError`` (or a subclass)
whose message names the key. :class:`healthcheck.config.schema.Validator` dispatches every section
through this table and turns the error into a ``ConfigError`` at the file's line
(:func:`healthcheck.config.schema.validate_section` does the same for one table on its own). A
validator may raise :class:`SectionError` to name the key exactly; otherwise the key is found in
the message.

Validators are named by module path and function name, not imported here: a module is imported
only when its section is present in the file (or asked for). ``hot`` marks the sections the Slurm
hooks read before every job; the hooks' load validates only those and leaves the others raw until
something asks for them (:meth:`healthcheck.config.model.Config.section`), so a site file with a
``[fleet]`` or ``[fabric.counters]`` table costs the prolog nothing.

To add a section: one :class:`Section` line below, its validator in the owning module, a test in
``tests/config/test_sections.py``. A dotted name (``burnin.rdma``) is a sub-table of another section
(taken out of ``[burnin]`` before ``[burnin]`` is validated) or of a container that has no settings
of its own (``[fabric]``: only its registered sub-tables are allowed).

Imports nothing: the hooks import this module before every job.
"""
from __future__ import annotations


class SectionError(ValueError):
    """A section's value that cannot be used, naming its key (``key``; a dotted path for nested keys)."""

    def __init__(self, key: str, message: str):
        super().__init__(message)
        self.key = key


class Section:
    """One section: its name in the file, the function that validates it, whether the hooks need it,
    and (for the sections older than this registry) the :class:`~healthcheck.config.model.Config`
    attribute that also answers it."""

    __slots__ = ("name", "module", "function", "hot", "attr")

    def __init__(self, name: str, module: str, function: str, hot: bool = False, attr: str | None = None):
        self.name, self.module, self.function, self.hot, self.attr = name, module, function, hot, attr

    def validator(self):
        """The validate function, its module imported now (the point of the registry: not before)."""
        return getattr(__import__(self.module, fromlist=(self.function,)), self.function)

    def __repr__(self) -> str:
        return f"Section({self.name!r}, {self.module}.{self.function})"


_SCHEMA = "healthcheck.config.schema"  # the adapters of the two sections validated by the config itself

SECTIONS: dict[str, Section] = {s.name: s for s in (
    Section("slurm", _SCHEMA, "slurm_section", hot=True, attr="slurm"),  # -> SlurmSettings (cached: its values)
    Section("history", _SCHEMA, "history_section", attr="history_db_url"),  # -> the database URL or None
    Section("burnin", "healthcheck.burnin.settings", "validate", attr="burnin"),  # -> the clean [burnin] table
    Section("burnin.rdma", "healthcheck.burnin.rdma", "validate"),  # -> RdmaSettings
    Section("sweep", "healthcheck.sweep.settings", "validate", attr="sweep"),  # -> the clean [sweep] table
    Section("topology", "healthcheck.config.topology", "validate", attr="topology"),  # -> {level: {group: nodeset}}
    Section("fabric.counters", "healthcheck.fabric.counters", "validate"),  # -> CounterSettings
    Section("fabric.node", "healthcheck.fabric.nodetopo", "validate"),  # -> TopoExpect
    Section("fabric.consistency", "healthcheck.fabric.software", "validate"),  # -> software.Settings
    Section("fleet", "healthcheck.analysis.fleetsettings", "validate"),  # -> FleetSettings
)}

# The top-level tables of the file: the node classes' and the sections' (a container such as "fabric"
# only through its sub-tables).
TOP_LEVEL = ("defaults", "class", "xid", *dict.fromkeys(name.split(".")[0] for name in SECTIONS))


# What a validator may raise for a bad table: ValueError by contract; the others are a validator that
# did not expect the value's type (e.g. a list where it reads a table), still the file's fault.
SECTION_ERRORS = (ValueError, TypeError, AttributeError, KeyError, IndexError)


def section_message(name: str, exc: BaseException) -> str:
    """The message of a validator's error, naming the section when it does not already."""
    text = str(exc) if not isinstance(exc, KeyError) else f"missing key {exc}"
    if not isinstance(exc, ValueError):
        text = f"cannot be read ({type(exc).__name__}: {text})"
    return text if name in text else f"[{name}] {text}"


def children(parent: str) -> tuple[str, ...]:
    """The last name part of the sections registered inside ``parent`` (``burnin`` -> ``("rdma",)``)."""
    prefix = parent + "."
    return tuple(name[len(prefix):] for name in SECTIONS if name.startswith(prefix))
