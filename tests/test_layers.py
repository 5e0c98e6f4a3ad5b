"""The package order as data (issue 31): the layers of ``healthcheck`` from the CLI down to the shared
vocabulary. An import goes from a package to one of a strictly lower layer, never up and never sideways
to another package of the same layer; every package is in exactly one layer (a new one must be placed
here); and no module uses a private name (``_x``) of another module, imported or as ``module._x``.

Imports inside functions count (the graph of ``tests/test_import_graph.py``, which also asserts there is
no circle). A package is the first level below ``healthcheck`` (``healthcheck.hook.run`` is in
``slurm``); the root package ``healthcheck`` itself (its version) counts as the bottom layer.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.test_import_graph import Graph

# Top to bottom. Packages of one layer do not import each other.
LAYERS: list[tuple[str, ...]] = [
    ("cli",),                 # the command line: the only importer of click
    ("sweep",),               # the nightly sweep: burn-in, report, Slurm and history together
    ("drill", "report"),      # fault drills on a cluster; the readiness report
    ("burnin",),              # GEMM, bandwidth, DCGM, nccl-tests and the job step that judges them
    ("agent",),               # the resident agent that serves the hooks
    ("hook",),                # what slurmd runs: Prolog, Epilog, HealthCheckProgram
    ("slurm",),               # the Slurm library the hook, burn-in, sweep and drill share
    ("deploy",),              # install-hooks: renders the hooks and the agent's unit (core.agentpaths, safeio)
    ("history",),             # the run history: schema, migrations, ingest, frames
    ("analysis",),            # pandas analyses of those frames
    ("fabric",),              # the InfiniBand fabric against its design; counters; node topology
    ("config",),              # the site config, its sections and node classes; generate; topology
    ("pipeline",),            # the spine: acquire a snapshot, judge it
    ("output", "bundles"),    # verdict writers; recorded bundles
    ("checks",),              # pure checks and their registry
    ("probes",),              # live readers of the node (sysfs, procfs, NVML, tools)
    ("parsers",),             # pure parsers of tool outputs
    ("policies", "spool"),    # policies as data; the node-local spool
    ("safeio",),              # safe file and subprocess I/O
    ("core", ""),             # the shared vocabulary; "" is the root package healthcheck
]

# Old module paths kept for what an earlier release installed on the nodes (hooks and the agent's unit):
# each only forwards to its new home, and nothing in the package imports it.
FORWARDERS = {
    "healthcheck.slurm.agentclient": "healthcheck.hook.client",
    "healthcheck.slurm.hooks": "healthcheck.hook.run",
    "healthcheck.slurm.agent": "healthcheck.agent.main",
}


def package_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def layer_index(layers: list[tuple[str, ...]]) -> dict[str, int]:
    index: dict[str, int] = {}
    for i, layer in enumerate(layers):
        for package in layer:
            assert package not in index, f"{package!r} is in two layers"
            index[package] = i
    return index


def layer_problems(graph: Graph, layers: list[tuple[str, ...]]) -> list[str]:
    """Every import that goes up a layer or sideways, and every package no layer names."""
    index = layer_index(layers)
    problems = []
    packages = {package_of(m) for m in graph.modules}
    for package in sorted(packages - set(index)):
        problems.append(f"package {package!r} is in no layer: place it in LAYERS")
    for a, targets in sorted(graph.edges.items()):
        if a in FORWARDERS:
            continue
        pa = package_of(a)
        for b, uses in sorted(targets.items()):
            pb = package_of(b)
            if pa == pb or pa not in index or pb not in index:
                continue
            if index[pb] <= index[pa]:
                where = ", ".join(f"{line}{'' if top else ' lazy'}" for line, top in uses)
                how = "sideways (same layer)" if index[pb] == index[pa] else "up"
                problems.append(f"{a} (line {where}) imports {b}: {how}, {pa} -> {pb}")
    return problems


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    package = module if is_package else module.rpartition(".")[0]
    if not node.level:
        return node.module or ""
    parts = package.split(".")
    base = ".".join(parts[: len(parts) - (node.level - 1)])
    return f"{base}.{node.module}" if node.module else base


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_name_uses(modules: dict[str, Path]) -> list[str]:
    """``from X import _name`` and ``mod._name`` where X / mod is another module of the package; a private
    module (the generated ``checks._index``) only from within its own package."""
    found = []
    for module, path in sorted(modules.items()):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        bound: dict[str, str] = {}  # local name -> our module it names
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module != "__future__":
                base = _resolve(module, path.name == "__init__.py", node)
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    if full in modules:
                        bound[alias.asname or alias.name] = full
                        if _private(alias.name) and base != module.rpartition(".")[0] and base != module:
                            found.append(f"{module}:{node.lineno} imports the private module {full}")
                    elif base in modules and base != module and _private(alias.name):
                        found.append(f"{module}:{node.lineno} imports {alias.name} from {base}")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in modules and alias.asname:
                        bound[alias.asname] = alias.name
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and _private(node.attr)
                    and bound.get(node.value.id, module) != module):
                found.append(f"{module}:{node.lineno} uses {bound[node.value.id]}.{node.attr}")
    return found


@pytest.fixture(scope="module")
def graph() -> Graph:
    return Graph()


def test_imports_go_down_the_layers(graph):
    problems = layer_problems(graph, LAYERS)
    assert not problems, "imports against the package order (tests/test_layers.py LAYERS):\n" + "\n".join(problems)


def test_no_module_uses_another_modules_private_names(graph):
    found = private_name_uses(graph.modules)
    assert not found, "private names used across modules (make them public, or move the code):\n" + "\n".join(found)


def test_forwarders_only_forward_and_nothing_imports_them(graph):
    for old, new in FORWARDERS.items():
        tree = ast.parse(graph.modules[old].read_text(encoding="utf-8"))
        body = [node for node in tree.body if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))]
        imports = [node for node in body if isinstance(node, ast.ImportFrom)]
        assert len(imports) == 1 and _resolve(old, False, imports[0]) == new, old
        rest = [node for node in body if node is not imports[0]]
        assert all(isinstance(node, ast.If) and "__main__" in ast.unparse(node.test) for node in rest), old
    importers = sorted(f"{a} -> {b}" for a, targets in graph.edges.items() for b in targets if b in FORWARDERS)
    assert not importers, "the package imports a forwarder instead of the module's new home:\n" + "\n".join(importers)


def reaches(graph: Graph, start: str) -> set[str]:
    """Every module of the package that importing the modules of ``start`` (a package) may import, lazily
    included, forwarders excepted."""
    adj = {a: set(targets) for a, targets in graph.edges.items()}
    seen: set[str] = set()
    todo = [m for m in graph.modules if package_of(m) == start]
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        todo.extend(adj.get(module, ()))
    return seen


@pytest.mark.parametrize("program", ["burnin", "sweep", "drill", "report", "deploy"])
def test_the_slurm_library_users_reach_neither_the_hook_nor_the_agent(graph, program):
    """Issue 31: burn-in, sweep and drill share the Slurm library, not what slurmd runs on the nodes. The
    layer order alone allows what is below them; this says the hook and the agent are not reached even
    through another package (drill -> deploy -> ... was such a path)."""
    found = sorted(m for m in reaches(graph, program) if package_of(m) in ("hook", "agent"))
    assert not found, f"{program} reaches the node programs: {found}"


def test_the_top_level_holds_packages_only():
    root = Path(__file__).resolve().parents[1] / "healthcheck"
    loose = sorted(p.name for p in root.glob("*.py") if p.name not in ("__init__.py", "__main__.py"))
    assert not loose, f"modules loose beside the packages: {loose} (give each a package)"


# ------------------------------------------------------------------------------ the test's own logic

def _package(tmp_path: Path, files: dict[str, str]) -> Graph:
    pkg = tmp_path / "healthcheck"
    for rel, text in files.items():
        path = pkg / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for folder in [pkg, *[p for p in pkg.rglob("*") if p.is_dir()]]:
        (folder / "__init__.py").touch()
    return Graph(pkg)


def test_an_upward_a_sideways_and_an_unplaced_import_are_each_named(tmp_path):
    graph = _package(tmp_path, {
        "top/a.py": "from ..low import b\n",                 # down: fine
        "low/b.py": "def f():\n    from ..top import a\n",  # up, inside a function
        "side/c.py": "from ..low import b\n",                # down from a same-layer sibling: fine
        "low/d.py": "from ..side2 import e\n",               # sideways
        "side2/e.py": "x = 1\n",
        "stray/f.py": "x = 1\n",
    })
    layers = [("top",), ("side",), ("low", "side2"), ("",)]
    assert layer_problems(graph, layers) == [
        "package 'stray' is in no layer: place it in LAYERS",
        "healthcheck.low.b (line 2 lazy) imports healthcheck.top.a: up, low -> top",
        "healthcheck.low.d (line 1) imports healthcheck.side2.e: sideways (same layer), low -> side2",
    ]
    with pytest.raises(AssertionError, match="two layers"):
        layer_index([("a",), ("a",)])


def test_private_names_across_modules_are_found_own_ones_and_private_modules_are_not(tmp_path):
    graph = _package(tmp_path, {
        "a/m.py": "_x = 1\ndef _f():\n    return _x\n",
        "a/n.py": "from .m import _x\nfrom . import m\nfrom . import _gen\nm._f()\n_gen.TABLE\nm.__name__\n",
        "a/_gen.py": "TABLE = {}\n",
        "a/o.py": "import healthcheck.a.m as mm\nmm._x\n",
        "b/p.py": "from ..a import _gen\n",
    })
    assert private_name_uses(graph.modules) == [
        "healthcheck.a.n:1 imports _x from healthcheck.a.m",
        "healthcheck.a.n:4 uses healthcheck.a.m._f",
        "healthcheck.a.o:2 uses healthcheck.a.m._x",
        "healthcheck.b.p:1 imports the private module healthcheck.a._gen",
    ]
