"""The import graph that ``test_layers.py`` judges: every module of a package, every import
between them (module level, inside functions, through a folder's lazy export table), the
chains of imports from a module, and the cycles of a graph. The rules, and the tables of
layers they read, are in ``test_layers.py``."""

from __future__ import annotations

import ast
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

LAZY_TABLE = "_LAZY"  # a package __init__'s {name: "submodule"} table, loaded on first use


@dataclass(frozen=True)
class Import:
    """``importer`` imports ``target`` (dotted module names) at ``path:line``."""

    importer: str
    target: str
    path: str
    line: int
    in_function: bool = False
    lazy: bool = False  # an entry of a lazy export table, loaded on attribute access

    def where(self) -> str:
        return f"{self.path}:{self.line}"


class ImportGraph:
    """Every module of a package and every import between them, parsed with :mod:`ast`; the
    rules that judge them are :class:`test_layers.Package`'s."""

    def __init__(self, root: Path):
        self.root = root
        self.name = root.name
        self.files: dict[str, Path] = {}
        for path in sorted(root.rglob("*.py")):
            parts = list(path.relative_to(root.parent).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            self.files[".".join(parts)] = path
        self.lazy = {m: self._lazy_table(m) for m in self.files}
        self.imports = [i for m in self.files for i in self._imports_of(m)]

    def rel(self, module: str) -> str:
        return str(self.files[module].relative_to(self.root.parent))

    def is_package(self, module: str) -> bool:
        return self.files[module].name == "__init__.py"

    def folder(self, module: str) -> str | None:
        """The layer folder of ``module`` (None for the top-level package and ``__main__``)."""
        parts = module.split(".")
        return parts[1] if len(parts) > 1 and module not in self._top_level() else None

    def _top_level(self) -> set[str]:
        return {self.name, f"{self.name}.__main__"}

    def _lazy_table(self, module: str) -> dict[str, str]:
        if not self.is_package(module):
            return {}
        tree = ast.parse(self.files[module].read_text())
        for node in tree.body:
            if (
                isinstance(node, (ast.Assign, ast.AnnAssign))
                and any(
                    isinstance(t, ast.Name) and t.id == LAZY_TABLE
                    for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
                )
                and isinstance(node.value, ast.Dict)
            ):
                return {
                    k.value: f"{module}.{v.value}"
                    for k, v in zip(node.value.keys, node.value.values, strict=True)
                    if isinstance(k, ast.Constant) and isinstance(v, ast.Constant)
                }
        return {}

    def _resolve(self, module: str, node: ast.ImportFrom) -> str | None:
        if node.level:
            base = module.split(".")
            if not self.is_package(module):
                base.pop()
            base = base[: len(base) - (node.level - 1)]
            return ".".join(base + ([node.module] if node.module else []))
        if node.module and (node.module == self.name or node.module.startswith(self.name + ".")):
            return node.module
        return None

    def _targets(self, base: str, names: list[str]) -> list[str]:
        """What ``from base import names`` loads: submodules, lazy entries, else ``base``."""
        out = []
        for name in names:
            if f"{base}.{name}" in self.files:
                out.append(f"{base}.{name}")
            elif name in self.lazy.get(base, {}):
                out.append(self.lazy[base][name])
            else:
                out.append(base)
        return out

    def _imports_of(self, module: str) -> list[Import]:
        path = self.files[module]
        tree = ast.parse(path.read_text(), str(path))
        found: list[Import] = []
        rel = self.rel(module)

        def visit(node: ast.AST, in_function: bool) -> None:
            for child in ast.iter_child_nodes(node):
                inner = in_function or isinstance(
                    child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
                )
                if isinstance(child, ast.ImportFrom):
                    base = self._resolve(module, child)
                    if base is not None:
                        for t in self._targets(base, [a.name for a in child.names]):
                            found.append(Import(module, t, rel, child.lineno, in_function))
                elif isinstance(child, ast.Import):
                    for a in child.names:
                        if a.name == self.name or a.name.startswith(self.name + "."):
                            found.append(Import(module, a.name, rel, child.lineno, in_function))
                visit(child, inner)

        visit(tree, False)
        for target in sorted(set(self.lazy[module].values())):
            found.append(Import(module, target, rel, 1, lazy=True))
        return found

    def reaches(self, start: str, folder: str) -> list[Import] | None:
        """The chain of imports by which loading ``start`` loads a module of ``folder``."""
        graph: dict[str, list[Import]] = defaultdict(list)
        for i in self.imports:
            if not i.lazy:
                graph[i.importer].append(i)
        seen, todo = {start: []}, [start]
        while todo:
            m = todo.pop(0)
            if self.folder(m) == folder:
                return seen[m]
            nexts = list(graph.get(m, ()))
            parts = m.split(".")  # loading a.b.c runs a/__init__ and a/b/__init__ first
            nexts += [Import(m, ".".join(parts[:k]), "", 0) for k in range(1, len(parts))]
            for i in nexts:
                if i.target in self.files and i.target not in seen:
                    seen[i.target] = [*seen[m], i]
                    todo.append(i.target)
        return None


def _cycles(edges: dict[str, dict[str, Import]]) -> list[list[str]]:
    """One cycle per strongly connected component with more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    comps: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(comp)

    for v in list(edges):
        if v not in index:
            connect(v)
    return [_one_cycle(sorted(c)[0], set(c), edges) for c in comps]


def _one_cycle(start: str, comp: set[str], edges: dict[str, dict[str, Import]]) -> list[str]:
    """A shortest cycle through ``start`` inside its component (breadth first)."""
    prev: dict[str, str] = {}
    todo = [start]
    while todo:
        v = todo.pop(0)
        for w in edges.get(v, {}):
            if w == start:
                path = [v]
                while path[-1] != start:
                    path.append(prev[path[-1]])
                return path[::-1]
            if w in comp and w not in prev:
                prev[w] = v
                todo.append(w)
    return [start]  # pragma: no cover - a component always has a cycle
