"""The check registry: one decorated function per check, discovered from the modules of this package.

A check is a pure function ``fn(snapshot, expectations, thresholds) -> list[Finding]``:
no I/O, no clock (the snapshot carries ``taken_at``), no globals. ``thresholds`` is the decorator's
defaults overlaid with the config's overrides for this check, plus one reserved key: ``"_context"``
(:data:`CONTEXT_KEY`), the context the judge (pipeline.judge) judges in (one of :data:`CONTEXTS`; read it with
``t.get("_context")``, absent when a test calls the function directly). No check may declare a
threshold of that name, and the config refuses one. Adding a check = one decorated function in
one module of ``healthcheck/checks/`` + its test, then ``python -m healthcheck.checks
--write-index`` (a test fails while the index is stale).

**The index** (``checks/_index.py``, generated from the decorators): each check's module, ``needs``,
contexts, ``handles_missing`` and default thresholds, as plain literals. Selecting the checks of a
context, validating a config's check names and thresholds, and skipping a check whose source is absent
all read the index alone; a check module is imported only when one of its checks is about to run
(:func:`spec`). So a prolog on a node without GPUs imports no GPU check module at all.
"""
from __future__ import annotations

import os
if False:  # annotations only (typing is not imported on the hot path)
    from typing import Any, Callable, Iterable  # noqa: F401

from ..core.model import CONTEXTS, Finding, Snapshot, Status
from ..core.struct import field, record as dataclass
# SOURCES: the snapshot attributes a check may need, one per probe declared in probes.live.PROBES; the
# probe that fills each one reports errors under the same key.
from ..probes.live import SOURCES

# The reserved threshold key under which the judge passes the context to every check.
CONTEXT_KEY = "_context"
# Contexts a check runs in unless it says otherwise / the config overrides: everything but the prolog,
# whose budget is tens of milliseconds.
DEFAULT_CONTEXTS = frozenset({"check", "slurm-check", "burnin"})
FAST_CONTEXTS = frozenset(CONTEXTS) - {"epilog"}


@dataclass(frozen=True)
class CheckSpec:
    name: str
    func: Callable[..., list[Finding]]
    needs: tuple[str, ...]
    contexts: frozenset[str]
    thresholds: dict[str, Any] = field(default_factory=dict)
    description: str = ""
    # Called even when a needed source is absent (e.g. gpu.count fails when GPUs are expected
    # but none could be seen); otherwise the judge reports SKIP for it.
    handles_missing: bool = False
    # Can it FAIL with no expectations file and its default thresholds? True: ``fails_on`` names the
    # faults it fails on by default. False: it is informational until configured, and ``fails_on``
    # says what setting makes it fail. None: not declared here (healthcheck.checks.catalog_doc holds the
    # answer for the modules that do not declare it yet; a test requires one of the two).
    fails_by_default: bool | None = None
    fails_on: str = ""


_REGISTRY: dict[str, CheckSpec] = {}


def check(name: str, *, needs: Iterable[str], contexts: Iterable[str] = DEFAULT_CONTEXTS,
          thresholds: dict[str, Any] | None = None, handles_missing: bool = False,
          fails_by_default: bool | None = None, fails_on: str = ""):
    """Register ``fn`` as check ``name``. Its docstring's first paragraph is its documentation.

    ``fails_by_default``/``fails_on``: whether the check can FAIL without any configuration, and on
    what fault (or, when it cannot, which setting makes it fail); shown by `healthcheck checks`."""
    needs = tuple(needs)
    for source in needs:
        if source not in SOURCES:
            raise ValueError(f"check {name}: unknown source {source!r}")
    if thresholds and CONTEXT_KEY in thresholds:
        raise ValueError(f"check {name}: threshold name {CONTEXT_KEY!r} is reserved (the judge's context)")
    contexts = frozenset(contexts)
    if not contexts <= set(CONTEXTS):
        raise ValueError(f"check {name}: unknown contexts {sorted(contexts - set(CONTEXTS))}")

    def register(fn):
        if name in _REGISTRY and _REGISTRY[name].func.__qualname__ != fn.__qualname__:
            raise ValueError(f"check {name} registered twice")
        doc = (fn.__doc__ or "").strip().split("\n\n")[0]
        _REGISTRY[name] = CheckSpec(name, fn, needs, contexts, dict(thresholds or {}),
                                    " ".join(doc.split()), handles_missing, fails_by_default, fails_on)
        return fn

    return register


@dataclass(frozen=True)
class IndexEntry:
    """What the index knows of a check without importing it (duck-types CheckSpec for selection)."""
    name: str
    module: str
    needs: tuple[str, ...]
    contexts: frozenset[str]
    handles_missing: bool = False
    thresholds: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)


_INDEX: dict[str, IndexEntry] | None = None


def index() -> dict[str, IndexEntry]:
    """name -> IndexEntry, from the generated ``_index.py`` (no check module imported). Without the
    file (a development tree before the first --write-index), from the imported modules."""
    global _INDEX
    if _INDEX is None:
        try:
            from ._index import CHECKS
        except ImportError:
            CHECKS = _index_rows(load_all())
        _INDEX = {name: IndexEntry(name, module, tuple(needs), frozenset(contexts), missing, dict(thresholds))
                  for name, (module, needs, contexts, missing, thresholds) in CHECKS.items()}
    return _INDEX


def spec(name: str) -> CheckSpec:
    """The full spec of one check: its module is imported now (only this one)."""
    found = _REGISTRY.get(name)
    if found is None:
        # __import__, not importlib.import_module: the importlib package (and warnings) cost the hook ~1 ms
        __import__(f"{__package__}.{index()[name].module}")
        found = _REGISTRY[name]
    return found


def _index_rows(specs: dict[str, CheckSpec]) -> dict[str, tuple]:
    return {name: (s.func.__module__.rsplit(".", 1)[-1], tuple(s.needs), tuple(sorted(s.contexts)),
                   s.handles_missing, dict(s.thresholds)) for name, s in sorted(specs.items())}


def index_source() -> str:
    """The text of ``_index.py`` for the checks as the modules declare them now."""
    import ast

    rows = _index_rows(load_all())
    lines = ['"""Generated by `python -m healthcheck.checks --write-index` from the @check',
             'decorators: do not edit (tests/checks/test_check_index.py fails while it is stale)."""',
             "# name: (module, needs, contexts, handles_missing, default thresholds)",
             "CHECKS = {"]
    for name, row in rows.items():
        text = repr(row)
        try:
            same = ast.literal_eval(text) == row
        except (ValueError, SyntaxError):
            same = False
        if not same:
            raise ValueError(f"check {name}: default thresholds must be plain literals, got {row[4]!r}")
        lines.append(f"    {name!r}: {text},")
    lines.append("}")
    return "\n".join(lines) + "\n"


def write_index() -> str:
    path = os.path.join(os.path.dirname(__file__), "_index.py")
    from ..safeio.atomic import atomic_write

    atomic_write(path, index_source(), 0o644)
    return path


def load_all() -> dict[str, CheckSpec]:
    """Import every check module of this package once; return the registry (name -> spec)."""
    folder = os.path.dirname(__file__)
    for name in sorted(os.listdir(folder)):
        stem, ext = os.path.splitext(name)
        if ext == ".py" and stem != "registry" and not stem.startswith("_"):
            __import__(f"{__package__}.{stem}")
    return dict(sorted(_REGISTRY.items()))


def matches(name: str, pattern: str) -> bool:
    """``fnmatch.fnmatchcase(name, pattern)``; the usual shapes (``gpu.ecc``, ``gpu.*``) without
    importing fnmatch, whose ``re`` and ``enum`` cost the prolog ~3 ms."""
    if "[" not in pattern and "?" not in pattern:
        star = pattern.find("*")
        if star < 0:
            return name == pattern
        if star == len(pattern) - 1:
            return name.startswith(pattern[:-1])
    import fnmatch  # brackets, ?, or more than a trailing *

    return fnmatch.fnmatchcase(name, pattern)


def select(specs: dict[str, CheckSpec], context: str, enabled: list[str] | None = None,
           only: list[str] | None = None) -> list[CheckSpec]:
    """The checks to run in ``context``: the config's glob list for that context when it has one,
    else each check's own default contexts; then narrowed by ``--only`` globs."""
    if enabled is not None:
        chosen = [s for s in specs.values() if any(matches(s.name, g) for g in enabled)]
    else:
        chosen = [s for s in specs.values() if context in s.contexts or context == "check"]
    if only:
        chosen = [s for s in chosen if any(matches(s.name, g) for g in only)]
    return chosen


# ------------------------------------------------------------------ helpers for check authors


def finding(spec_name: str, status: Status, message: str, component: str | None = None,
            **metrics: float) -> Finding:
    return Finding(spec_name, status, message, component,
                   {k: float(v) for k, v in metrics.items() if v is not None})


def skip(name: str, message: str, component: str | None = None) -> list[Finding]:
    return [Finding(name, Status.SKIP, message, component)]


def present_gpus(snapshot: Snapshot):
    """GPUs that answered (lost ones are judged by gpu.lost alone)."""
    return [g for g in (snapshot.gpus or []) if not g.lost]

