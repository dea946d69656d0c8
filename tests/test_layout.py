"""The layout's rules, checked on the source: no import cycles (counting imports inside functions too, which only
hide a cycle from the interpreter; imports for annotations under ``if TYPE_CHECKING:`` never run and do not count),
and no module over 600 lines. docs/development.md explains the packages."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "libs" / "common" / "evalsi"
MAX_LINES = 600


def _is_generated(path: Path) -> bool:
    return path.name.endswith(("_pb2.py", "_pb2_grpc.py", "_pb2.pyi"))


def _modules() -> dict[str, Path]:
    modules = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if _is_generated(path):
            continue
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        modules[name] = path
    return modules


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node that can run: all of them but the bodies of ``if TYPE_CHECKING:`` (imports for annotations)."""
    nodes: list[ast.AST] = []
    pending = [tree]
    while pending:
        node = pending.pop()
        nodes.append(node)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            pending.extend(node.orelse)
            continue
        pending.extend(ast.iter_child_nodes(node))
    return nodes


def _imported(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Every evalsi module ``name`` imports, anywhere in it, with the packages whose ``__init__`` that runs."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            targets = [module] + [f"{module}.{alias.name}" for alias in node.names]
        for target in targets:
            parts = target.split(".")
            for end in range(1, len(parts) + 1):
                candidate = ".".join(parts[:end])
                # A module's own parent packages are already imported when it runs: not an edge.
                if candidate in modules and candidate != name and not name.startswith(candidate + "."):
                    found.add(candidate)
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            advanced = False
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
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
                    found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_the_package_has_no_import_cycles() -> None:
    modules = _modules()
    assert "evalsi.runs.driver" in modules  # the walk sees the package
    graph = {name: _imported(name, path, modules) for name, path in modules.items()}
    cycles = _cycles(graph)
    assert not cycles, "import cycles (imports inside functions count):\n" + "\n".join(" <-> ".join(c) for c in cycles)


@pytest.mark.parametrize("name", sorted(_modules()))
def test_no_module_is_over_600_lines(name: str) -> None:
    lines = len(_modules()[name].read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{name} has {lines} lines; split it by concept (at most {MAX_LINES})"
