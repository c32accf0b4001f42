"""The layers hold: no import cycles (imports inside functions and TYPE_CHECKING blocks count) and no arrow
against the order readers -> store -> floor/budgets -> analysis -> compare -> report -> cli.

The import graph is read from the source with ``ast``, so the test sees what a reader of the code sees."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Source folders and the package each installs as (pyproject.toml's package-dir).
SOURCES = {"tracekit": "tracekit", "parsers": "tracekit.parsers", "floor": "tracekit.floor",
           "budgets": "tracekit.budgets"}
# Leaf modules anyone may import; they import only each other.
BASE = {"tracekit", "tracekit.errors", "tracekit.intervals", "tracekit.files", "tracekit.progress"}
# Packages by layer: a module may import modules of its own layer or a lower one.
LAYERS = {"tracekit.schema": 0, "tracekit.parsers": 1, "tracekit.store": 2, "tracekit.floor": 3, "tracekit.budgets": 3,
          "tracekit.analysis": 4, "tracekit.compare": 5, "tracekit.report": 6, "tracekit.api": 7, "tracekit.cli": 7,
          "tracekit.__main__": 7}
# The one arrow against the layers: the package's module ``__getattr__`` loads its API on first use (PEP 562),
# so ``import tracekit`` imports nothing above the base (test_the_api_arrow_is_lazy checks that).
LAZY = {("tracekit", "tracekit.api")}


def module_files() -> dict[str, Path]:
    """Every module of the package, by its installed dotted name."""
    found: dict[str, Path] = {}
    for folder, package in SOURCES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join([package, *parts])] = path
    return found


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The package modules that ``name`` imports anywhere in its source (top level, functions, TYPE_CHECKING)."""
    is_package = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            targets = [f"{module}.{a.name}" if f"{module}.{a.name}" in known else module for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:  # `import a.b.c` names a.b.c; attributes fall back to the module
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


def import_graph() -> dict[str, set[str]]:
    files = module_files()
    known = set(files)
    return {name: {t for t in imports_of(name, path, known) if (name, t) not in LAZY} for name, path in files.items()}


def layer(module: str) -> int:
    if module in BASE:
        return 0
    for prefix, number in LAYERS.items():
        if module == prefix or module.startswith(prefix + "."):
            return number
    raise AssertionError(f"{module} is in no layer: add it to LAYERS or BASE")


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_graph_is_read() -> None:
    graph = import_graph()
    assert "tracekit.analysis.options" in graph["tracekit.analysis.analyze"]
    assert "tracekit.floor" in graph  # the floor package itself
    assert len(graph) > 60


def test_cycle_finder_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles() -> None:
    assert cycles(import_graph()) == []


def test_no_arrow_against_the_layers() -> None:
    wrong = [f"{m} (layer {layer(m)}) imports {t} (layer {layer(t)})"
             for m, targets in import_graph().items() for t in sorted(targets)
             if (m in BASE and t not in BASE) or layer(t) > layer(m)]
    assert wrong == []


def test_floor_imports_nothing_of_tracekit() -> None:
    wrong = [f"{m} imports {t}" for m, targets in import_graph().items() if m.startswith("tracekit.floor")
             for t in targets if not t.startswith("tracekit.floor")]
    assert wrong == []


@pytest.mark.parametrize("module", ["tracekit.report.render", "tracekit.analysis.analyze"])
def test_lower_layers_do_not_see_the_cli(module: str) -> None:
    graph = import_graph()
    seen, todo = set(), [module]
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo.extend(graph[m])
    assert not any(m.startswith("tracekit.cli") for m in seen)


def test_the_api_arrow_is_lazy() -> None:
    """The package imports its API only inside a function (its module ``__getattr__``), never at import."""
    tree = ast.parse((ROOT / "tracekit" / "__init__.py").read_text())
    top = [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
    assert all(not (a.name.startswith("tracekit.") or (getattr(n, "module", "") or "").startswith("tracekit"))
               for n in top for a in n.names)
    inside = [a.name for f in tree.body if isinstance(f, ast.FunctionDef) for n in ast.walk(f)
              if isinstance(n, ast.Import) for a in n.names]
    assert inside == ["tracekit.api"]
