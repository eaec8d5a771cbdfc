"""The package's import graph, and the two rules that keep its layers one-way.

The layers are: ``planner`` (pure planning) and ``intrin`` (instructions and the host
encode) at the bottom, ``dispatch`` (the ``copy_async`` variant) above them, and the tools
(``explain``, ``demo``, ``testing``) on top. A lower layer that imports a higher one makes
every change to the dispatch a change to the instructions too, and an import cycle makes
the import order matter. :func:`check` finds both from the source text alone (``ast``,
every import statement, including those inside functions), so it needs no TVM.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

#: (importer package, forbidden package): modules under the first never import the second.
LAYER_RULES: tuple[tuple[str, str], ...] = (
    ("tvm_tma.intrin", "tvm_tma.dispatch"),
    ("tvm_tma.planner", "tvm_tma.dispatch"),
    ("tvm_tma.planner", "tvm_tma.intrin"),
)


def _module_name(path: Path, root: Path, package: str) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([package, *parts])


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    keep = len(base) - node.level + (1 if is_package else 0)
    prefix = base[:keep]
    return ".".join(prefix + ([node.module] if node.module else []))


def module_graph(root: Path | str, package: str = "tvm_tma") -> dict[str, set[str]]:
    """``module -> modules of the package it imports`` for every ``.py`` under ``root``."""
    root = Path(root)
    names = {_module_name(p, root, package): p for p in sorted(root.rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for module, path in names.items():
        is_package = path.name == "__init__.py"
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(module, is_package, node)
                for alias in node.names:
                    submodule = f"{base}.{alias.name}"
                    targets.add(submodule if submodule in names else base)
        graph[module] = {t for t in targets if t == package or t.startswith(package + ".")}
    return graph


def _inside(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def layer_violations(graph: Mapping[str, Iterable[str]],
                     rules: Iterable[tuple[str, str]] = LAYER_RULES) -> list[str]:
    """``"importer -> imported"`` for every import a layer rule forbids."""
    found = []
    for importer, forbidden in rules:
        for module, targets in graph.items():
            if _inside(module, importer):
                found += [f"{module} -> {t}" for t in sorted(targets) if _inside(t, forbidden)]
    return found


def cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Every strongly connected group of two or more modules (Tarjan), and self-imports."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1 or node in graph.get(node, ()):
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def check(root: Path | str, package: str = "tvm_tma") -> list[str]:
    """Every layer violation and import cycle of the package under ``root`` (empty: clean)."""
    graph = module_graph(root, package)
    problems = [f"layer: {v}" for v in layer_violations(graph)]
    problems += [f"cycle: {' -> '.join(c)}" for c in cycles(graph)]
    return problems


if __name__ == "__main__":
    import sys

    here = Path(__file__).resolve().parents[1]
    problems = check(here)
    print("\n".join(problems) or "import graph: one-way, no cycles")
    sys.exit(1 if problems else 0)
