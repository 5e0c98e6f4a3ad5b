"""The package's import graph: no circles, and only the CLI imports click.

Every module of ``healthcheck`` is parsed with :mod:`ast` (nothing is imported). Every ``import`` and
``from ... import`` counts, at module level and inside functions alike; relative imports are resolved;
``from pkg import name`` is an edge to ``pkg.name`` when that is a module of the package, else to
``pkg``. Only bodies of ``if TYPE_CHECKING:`` are left out (they never run). A package's ``__init__``
is not counted as imported by every import of one of its modules (as import-linter/grimp do): an
edge goes to the module named.

A circle is a strongly connected component of more than one module. A lazy import on the hot path
that closes a circle may be allowed in ``ALLOWED_LAZY_EDGES`` with its one-line reason; the test
also fails when an allowed edge no longer exists, is at module level, or no longer closes a circle.
"""
from __future__ import annotations

import ast
from collections import defaultdict, deque
from pathlib import Path

import pytest

import healthcheck

PACKAGE = "healthcheck"
ROOT = Path(healthcheck.__file__).resolve().parent

# (importer, imported) -> why the import stays inside a function although it closes a circle.
# Empty: no circle needs one. An entry must be a function-level import that closes a circle.
ALLOWED_LAZY_EDGES: dict[tuple[str, str], str] = {}


# The command-line modules (the healthcheck.cli package; flat cli_*.py until it is complete): the only
# ones that may import click.
def is_cli(module: str) -> bool:
    return module == f"{PACKAGE}.cli" or module.startswith((f"{PACKAGE}.cli.", f"{PACKAGE}.cli_"))


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules(root: Path) -> dict[str, Path]:
    return {_module_name(p, root): p for p in sorted(root.rglob("*.py")) if "__pycache__" not in p.parts}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


class _Imports(ast.NodeVisitor):
    """(imported name, line, at module level?) for every import statement that can run."""

    def __init__(self, module: str, is_package: bool) -> None:
        self.module = module
        self.package = module if is_package else module.rpartition(".")[0]
        self.found: list[tuple[str, list[str], int, bool]] = []  # (base, names, line, module level)
        self.depth = 0

    def _nested(self, node: ast.AST) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _nested

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test):
            for child in node.orelse:
                self.visit(child)
            return
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.found.append((alias.name, [], node.lineno, self.depth == 0))

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            parts = self.package.split(".")
            up = node.level - 1
            if up >= len(parts):
                raise AssertionError(f"{self.module}:{node.lineno}: relative import beyond the package")
            base = ".".join(parts[: len(parts) - up] if up else parts)
            base = f"{base}.{node.module}" if node.module else base
        else:
            base = node.module or ""
        self.found.append((base, [a.name for a in node.names], node.lineno, self.depth == 0))


def _targets(base: str, names: list[str], modules: dict[str, Path]) -> set[str]:
    """The package modules an import statement loads (the named ones, not their parent packages)."""
    out: set[str] = set()
    if not names:
        # `import a.b.c` loads a.b.c; the nearest existing module if c is not one of ours.
        name = base
        while name and name not in modules:
            name = name.rpartition(".")[0]
        if name:
            out.add(name)
        return out
    plain = False
    for name in names:
        if f"{base}.{name}" in modules:
            out.add(f"{base}.{name}")
        else:
            plain = True
    if plain:
        name = base
        while name and name not in modules:
            name = name.rpartition(".")[0]
        if name:
            out.add(name)
    return out


class Graph:
    def __init__(self, root: Path = ROOT) -> None:
        package = root.name
        self.modules = _modules(root)
        # edges[a][b] = [(line, module level?), ...]
        edges: dict[str, dict[str, list[tuple[int, bool]]]] = defaultdict(lambda: defaultdict(list))
        self.edges: dict[str, dict[str, list[tuple[int, bool]]]] = {}
        self.click: list[str] = []
        for module, path in self.modules.items():
            visitor = _Imports(module, path.name == "__init__.py")
            visitor.visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
            for base, names, line, top in visitor.found:
                if base == "click" or base.startswith("click."):
                    self.click.append(f"{module}:{line}")
                if base != package and not base.startswith(package + "."):
                    continue
                for target in _targets(base, names, self.modules):
                    if target != module:
                        edges[module][target].append((line, top))
        # Plain dicts from here on: a look-up must never add an edge.
        self.edges = {a: dict(targets) for a, targets in edges.items()}

    def adjacency(self, skip: set[tuple[str, str]] = frozenset()) -> dict[str, set[str]]:
        return {a: {b for b in targets if (a, b) not in skip} for a, targets in self.edges.items()}


def strongly_connected(adj: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative; components of more than one module, each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    nodes = sorted(set(adj) | {b for targets in adj.values() for b in targets})
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(adj.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(adj.get(child, ())))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return sorted(out)


def shortest_cycle(adj: dict[str, set[str]], start: str, within: set[str]) -> list[str] | None:
    """start -> ... -> start by the fewest imports, staying inside ``within``; None when none."""
    parent: dict[str, str] = {}
    queue = deque([start])
    seen = {start}
    while queue:
        node = queue.popleft()
        for child in sorted(adj.get(node, ())):
            if child not in within:
                continue
            if child == start:
                path = [node]
                while path[-1] != start:
                    path.append(parent[path[-1]])
                return list(reversed(path)) + [start]
            if child not in seen:
                seen.add(child)
                parent[child] = node
                queue.append(child)
    return None


def describe_cycles(graph: Graph, adj: dict[str, set[str]]) -> list[str]:
    """Each circle found, modules in import order, each import with its line (``lazy`` when in a function)."""
    lines: list[str] = []
    for component in strongly_connected(adj):
        members = set(component)
        lines.append(f"circle of {len(component)} modules: {', '.join(component)}")
        printed: set[tuple[str, ...]] = set()
        for start in component:
            cycle = shortest_cycle(adj, start, members)
            if cycle is None:
                continue
            turn = cycle[:-1].index(min(cycle[:-1]))
            key = tuple(cycle[turn:-1] + cycle[:turn])
            if key in printed:
                continue
            printed.add(key)
            steps = []
            for a, b in zip(cycle, cycle[1:]):
                where = ", ".join(f"{line}{'' if top else ' lazy'}" for line, top in graph.edges[a][b])
                steps.append(f"{a} (line {where})")
            lines.append("  " + " -> ".join(steps) + f" -> {cycle[-1]}")
    return lines


@pytest.fixture(scope="module")
def graph() -> Graph:
    return Graph()


def test_the_graph_sees_the_package(graph):
    # Guards the parser: module-level, function-level and relative imports are all seen.
    assert len(graph.modules) > 100
    assert "healthcheck.core.model" in graph.edges["healthcheck.pipeline.judge"]
    assert "healthcheck.parsers.nvidia_smi_tree" in graph.edges["healthcheck.parsers.nvidia_smi_text"]
    lazy = [(a, b) for a, targets in graph.edges.items() for b, uses in targets.items()
            if any(not top for _, top in uses)]
    assert lazy, "imports inside functions must be counted"


def test_no_import_circles(graph):
    adj = graph.adjacency(skip=set(ALLOWED_LAZY_EDGES))
    cycles = describe_cycles(graph, adj)
    print("\n".join(cycles))
    assert not cycles, "import circles in the package:\n" + "\n".join(cycles)


def allow_list_problems(graph: Graph, allowed: dict[tuple[str, str], str]) -> list[str]:
    """Entries of an allow-list that are stale, not lazy, without a reason, or close no circle."""
    problems = []
    for (a, b), reason in allowed.items():
        uses = graph.edges.get(a, {}).get(b)
        if not reason.strip():
            problems.append(f"{a} -> {b}: give the reason")
        if not uses:
            problems.append(f"{a} -> {b} is allowed but no longer imported: drop it from the allow-list")
            continue
        if any(top for _, top in uses):
            problems.append(f"{a} -> {b} is allowed as lazy but imported at module level")
        adj = graph.adjacency(skip=set(allowed) - {(a, b)})
        if not any(a in c and b in c for c in strongly_connected(adj)):
            problems.append(f"{a} -> {b} closes no circle: it needs no place on the allow-list")
    return problems


def test_allowed_lazy_edges_are_real_lazy_and_needed(graph):
    problems = allow_list_problems(graph, ALLOWED_LAZY_EDGES)
    assert not problems, "\n".join(problems)


def test_only_the_cli_imports_click(graph):
    library = [where for where in graph.click if not is_cli(where.split(":")[0])]
    assert not library, "library modules importing click (only healthcheck.cli* may):\n" + "\n".join(library)


# ------------------------------------------------------------------------------ the test's own logic

def test_the_cli_is_told_apart_from_the_library():
    assert is_cli("healthcheck.cli") and is_cli("healthcheck.cli.sweep") and is_cli("healthcheck.cli_report")
    assert not is_cli("healthcheck.client") and not is_cli("healthcheck.sweep.finish")


def test_cycles_are_found_and_printed_in_order():
    adj = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"f"}, "f": {"e"}}
    assert strongly_connected(adj) == [["a", "b", "c"], ["e", "f"]]
    assert shortest_cycle(adj, "b", {"a", "b", "c"}) == ["b", "c", "a", "b"]
    assert strongly_connected({"a": {"b"}, "b": {"c"}}) == []


def test_a_lazy_circle_and_a_library_click_import_are_caught(tmp_path):
    pkg = tmp_path / "healthcheck"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .sub import b\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from ..a import x\n    import click\n")
    graph = Graph(pkg)
    cycles = describe_cycles(graph, graph.adjacency())
    assert cycles == ["circle of 2 modules: healthcheck.a, healthcheck.sub.b",
                      "  healthcheck.a (line 1) -> healthcheck.sub.b (line 2 lazy) -> healthcheck.a"]
    assert graph.click == ["healthcheck.sub.b:3"]
    lazy = ("healthcheck.sub.b", "healthcheck.a")
    assert describe_cycles(graph, graph.adjacency(skip={lazy})) == []
    assert allow_list_problems(graph, {lazy: "on the hot path"}) == []
    assert allow_list_problems(graph, {lazy: " "}) == [f"{lazy[0]} -> {lazy[1]}: give the reason"]
    assert "healthcheck.a -> healthcheck.sub.b is allowed as lazy but imported at module level" in \
        allow_list_problems(graph, {lazy: "r", ("healthcheck.a", "healthcheck.sub.b"): "r"})
    assert allow_list_problems(graph, {("healthcheck.a", "healthcheck.sub"): "r"}) == [
        "healthcheck.a -> healthcheck.sub is allowed but no longer imported: drop it from the allow-list"]


def test_relative_and_function_level_imports_are_resolved():
    source = (
        "from . import sibling\n"
        "from ..model import Snapshot\n"
        "import healthcheck.parsers.nvidia_smi_tree\n"
        "if TYPE_CHECKING:\n"
        "    from healthcheck import runner\n"
        "def f():\n"
        "    from .other import thing\n"
    )
    visitor = _Imports("healthcheck.parsers.x", is_package=False)
    visitor.visit(ast.parse(source))
    found = [(base, names, top) for base, names, _, top in visitor.found]
    assert found == [
        ("healthcheck.parsers", ["sibling"], True),
        ("healthcheck.model", ["Snapshot"], True),
        ("healthcheck.parsers.nvidia_smi_tree", [], True),
        ("healthcheck.parsers.other", ["thing"], False),
    ]
    modules = {"healthcheck.parsers": Path(), "healthcheck.parsers.sibling": Path(), "healthcheck": Path()}
    assert _targets("healthcheck.parsers", ["sibling", "ParseError"], modules) == {
        "healthcheck.parsers.sibling", "healthcheck.parsers"}
    assert _targets("healthcheck.parsers.nope", [], modules) == {"healthcheck.parsers"}
