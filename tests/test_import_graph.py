"""No import cycles in ``src/plait`` (issue 19): every import counts, lazy or TYPE_CHECKING.

The graph is built from the source text (``ast``), one node per module; ``from a.b
import c`` points at ``a.b.c`` when that is a module, else at ``a.b`` (a package's
``__init__``). A cycle would mean two modules that cannot be understood, tested or
replaced apart — e.g. the CLI and the command modules it registers, or the service and
the refinery that took the whole service back.
"""

from __future__ import annotations

import ast
from pathlib import Path

import plait

ROOT = Path(plait.__file__).parent


def _modules(root: Path) -> dict[str, Path]:
    out = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _targets(node: ast.AST, package: str, modules: dict[str, Path]) -> list[str]:
    """The modules one import statement depends on: ``import a.b`` names ``a.b``;
    ``from a.b import c`` names ``a.b.c`` when that is a module, and ``a.b`` itself
    whenever ``a.b`` is a package.

    The package edge is stricter than Python: ``from a.b import c`` reads ``a.b``'s
    namespace first, so for a *name* ``a/b/__init__`` re-exports it is a real cycle (the
    name is missing while the package is half initialised); for a *submodule* Python
    falls back to importing it and nothing breaks, yet the edge is kept as a rule —
    modules inside ``plait`` name the module they import (``from plait.errors import
    X``), never the package that re-exports it. ``import a.b.c as m`` names the module
    and adds no package edge: it never reads a package's namespace."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    base = node.module or ""
    if node.level:
        parts = package.split(".")[: len(package.split(".")) - node.level + 1]
        base = ".".join([*parts, base] if base else parts)
    targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
    if base in modules and modules[base].name == "__init__.py":
        targets.append(base)
    return targets


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """module → the modules of ``root``'s package it imports anywhere in its body."""
    modules = _modules(root)

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            for target in _targets(node, package, modules):
                if target.split(".")[0] != root.name:
                    continue
                resolved = resolve(target)
                if resolved is not None and resolved != name:
                    graph[name].add(resolved)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph[node]):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_graph_sees_lazy_and_type_checking_imports() -> None:
    graph = import_graph()
    assert "plait.retrieval.pipeline" in graph["plait.search"]
    assert "plait.searcher" in graph["plait.ask"]  # a TYPE_CHECKING import
    assert "plait.refinery" in graph["plait.service"]  # an import inside a method
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def _package(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def test_a_cycle_through_the_package_init_is_a_cycle(tmp_path: Path) -> None:
    """Regression: ``from plait import errors`` in plait.client_errors (imported by
    plait.client, which plait/__init__ re-exports) was drawn as an edge to plait.errors
    only, so the cycle client_errors → plait → client → client_errors went unseen."""
    pkg = _package(
        tmp_path / "pkg",
        {
            "__init__.py": "from pkg.client import Client\n",
            "errors.py": "class Error(Exception): ...\n",
            "client.py": "from pkg.client_errors import fail\nclass Client: ...\n",
            "client_errors.py": "from pkg import errors\ndef fail() -> None: ...\n",
            "sub/__init__.py": "from pkg.sub.a import A\n",
            "sub/a.py": "class A: ...\n",
            "sub/b.py": "from . import a\n",
        },
    )
    graph = import_graph(pkg)
    assert graph["pkg.client_errors"] == {"pkg", "pkg.errors"}  # before: {"pkg.errors"}
    assert graph["pkg.sub.b"] == {"pkg.sub", "pkg.sub.a"}  # a relative import from a package, too
    assert cycles(graph) == [["pkg", "pkg.client", "pkg.client_errors"]]
    # the way d016c4c fixed it: the module, not the package
    (pkg / "client_errors.py").write_text("import pkg.errors as errors\ndef fail() -> None: ...\n", encoding="utf-8")
    assert cycles(import_graph(pkg)) == []


def test_src_plait_has_no_import_cycle() -> None:
    assert cycles(import_graph()) == []
