"""The package's architecture, proved from its source: folders are layers, arrows only point down.

The rules (README, "Where code goes"):

* ``edu_parallel/`` holds ``__init__.py``, ``__main__.py`` and the folders of :data:`LAYERS`;
* a module imports only from its own folder and the folders :data:`LAYERS` lists for it;
* no import cycle between modules (module-level, inside functions, or through a folder's lazy
  export table) nor between folders;
* no module of the package is imported inside a function: imports sit at the top of the file, and
  a folder that must stay light loads its names on first use through its ``__init__`` table;
* the pure layers (:data:`PURE`) never reach ``engine/`` through any chain of imports, counting the
  ``__init__.py`` of every package an import passes through;
* ``core/`` imports nothing else of the package.

Each rule reports the offending file and line;
:func:`test_a_planted_violation_of_every_rule_is_caught` builds a small package that breaks every
rule and checks that each break is named.
"""

from __future__ import annotations

import ast
import textwrap
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import fresh_python

ROOT = Path(__file__).resolve().parents[1] / "edu_parallel"

# folder -> the folders it may import from (its own folder always). Read bottom-up.
_TRAINING = ("core", "plans", "engine", "models", "memory", "comm")
# the tiny models and the task that the data-parallel lessons train (lessons 05, 06, 11, 12)
_TASK = (*_TRAINING, "task")
# DDP, then what builds on its comm-hook seam: compression and asynchronous training
_DATA = ("data_parallel", "zero", "compression", "async_training")
PARALLELISMS = (*_DATA, "tensor_parallel", "expert_parallel", "pipeline_parallel")
COMPOSED = ("planner", "parallel_3d")  # lesson 10: the parallelisms together, planned and run
LAYERS: dict[str, tuple[str, ...]] = {
    "core": (),
    "plans": ("core",),
    "engine": ("core", "plans"),
    "models": ("core", "plans"),
    "memory": ("core",),
    "comm": ("core", "plans", "engine", "models"),
    "task": _TRAINING,
    "data_parallel": _TASK,
    "zero": _TASK,
    "compression": (*_TASK, "data_parallel"),
    "async_training": (*_TASK, "data_parallel"),
    "tensor_parallel": _TRAINING,
    "expert_parallel": _TRAINING,
    "pipeline_parallel": _TRAINING,
    "strategy_map": (*_TASK, *PARALLELISMS),
    # The planner is arithmetic over the models and the memory calculator: pure, no engine.
    "planner": ("core", "models", "memory"),
    # DP x TP x PP (x EP) composed on one mesh of ranks; its byte counts are the planner's.
    "parallel_3d": (*_TASK, *PARALLELISMS, "strategy_map", "planner"),
    # Renderers and quizzes read traces, plans, models and formulas; the reach rule below keeps
    # them off the engine even where a folder they read also holds a runner.
    "viz": ("core", "plans", "models", "memory", "task", *PARALLELISMS, "strategy_map", *COMPOSED),
    "quiz": ("core", "plans", "models", "memory", "task", *PARALLELISMS, "strategy_map", *COMPOSED),
    # Exercises run the learner's code on the ranks and draw it with the lessons' renderers.
    "exercises": (*_TASK, *PARALLELISMS, "strategy_map", *COMPOSED, "viz", "quiz"),
    "app": (*_TASK, *PARALLELISMS, "strategy_map", *COMPOSED, "viz", "quiz", "exercises"),
}
TOP_LEVEL = ("__init__", "__main__")  # the only modules outside a folder
PURE = ("core", "plans", "models", "memory", "planner", "viz", "quiz")  # never reach engine/
ENGINE = "engine"
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


class Package:
    """Every module of a package and every import between them, parsed with :mod:`ast`."""

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

    # ---------------------------------------------------------------- the rules
    def misplaced_modules(self) -> list[str]:
        folders = set(LAYERS)
        out = []
        for m in self.files:
            parts = m.split(".")
            if len(parts) == 2 and parts[1] not in TOP_LEVEL and not self.is_package(m):
                out.append(f"{self.rel(m)}: a module outside the layer folders {sorted(folders)}")
            elif len(parts) >= 2 and parts[1] not in folders and parts[1] not in TOP_LEVEL:
                out.append(f"{self.rel(m)}: folder {parts[1]!r} is not a layer of LAYERS")
        return out

    def layer_violations(self) -> list[str]:
        out = []
        for i in self.imports:
            src, dst = self.folder(i.importer), self.folder(i.target)
            if src is None or dst is None or src == dst or src not in LAYERS:
                if src is not None and dst is None and i.target == self.name:
                    out.append(f"{i.where()}: {i.importer} imports the top-level package")
                continue
            if dst not in LAYERS[src]:
                out.append(
                    f"{i.where()}: {src}/ may not import {dst}/ ({i.importer} -> {i.target}); "
                    f"{src}/ may import {', '.join(LAYERS[src]) or 'nothing else'}"
                )
        return out

    def function_level_imports(self) -> list[str]:
        return [
            f"{i.where()}: {i.importer} imports {i.target} inside a function"
            for i in self.imports
            if i.in_function
        ]

    def module_cycles(self) -> list[str]:
        edges: dict[str, dict[str, Import]] = defaultdict(dict)
        for i in self.imports:
            if i.target in self.files and i.target != i.importer:
                edges[i.importer].setdefault(i.target, i)
        return [self._cycle_text(c, edges) for c in _cycles(edges)]

    def folder_cycles(self) -> list[str]:
        edges: dict[str, dict[str, Import]] = defaultdict(dict)
        for i in self.imports:
            src, dst = self.folder(i.importer), self.folder(i.target)
            if src and dst and src != dst:
                edges[src].setdefault(dst, i)
        return [self._cycle_text(c, edges) for c in _cycles(edges)]

    @staticmethod
    def _cycle_text(cycle: list[str], edges: dict[str, dict[str, Import]]) -> str:
        hops = [edges[a][b] for a, b in zip(cycle, cycle[1:] + cycle[:1], strict=True)]
        return (
            "import cycle: "
            + " -> ".join(f"{h.importer} ({h.where()})" for h in hops)
            + f" -> {cycle[0]}"
        )

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

    def reach_violations(self) -> list[str]:
        out = []
        for m in self.files:
            if self.folder(m) in PURE:
                chain = self.reaches(m, ENGINE)
                if chain is not None:
                    steps = " -> ".join(f"{i.target} ({i.where() or 'package'})" for i in chain)
                    out.append(
                        f"{self.rel(m)}: {self.folder(m)}/ reaches {ENGINE}/: {m} -> {steps}"
                    )
        return out

    def all_violations(self) -> dict[str, list[str]]:
        return {
            "misplaced": self.misplaced_modules(),
            "layers": self.layer_violations(),
            "function imports": self.function_level_imports(),
            "module cycles": self.module_cycles(),
            "folder cycles": self.folder_cycles(),
            "reach": self.reach_violations(),
        }


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


@pytest.fixture(scope="module")
def package() -> Package:
    return Package(ROOT)


@pytest.mark.parametrize(
    "rule",
    ["misplaced", "layers", "function imports", "module cycles", "folder cycles", "reach"],
)
def test_the_package_keeps_its_layers(package: Package, rule: str) -> None:
    problems = package.all_violations()[rule]
    assert not problems, "\n".join(problems)


def test_core_imports_nothing_else_of_the_package(package: Package) -> None:
    bad = [
        f"{i.where()}: core imports {i.target}"
        for i in package.imports
        if package.folder(i.importer) == "core" and package.folder(i.target) not in ("core",)
    ]
    assert not bad, "\n".join(bad)


def test_the_graph_is_not_empty(package: Package) -> None:
    """The checker sees the real package: every folder, and hundreds of imports between them."""
    assert {package.folder(m) for m in package.files} >= set(LAYERS)
    assert len(package.imports) > 300
    assert package.reaches(f"{package.name}.comm.allreduce", ENGINE)


def test_lazy_tables_name_real_modules_and_names(package: Package) -> None:
    """Every entry of a folder's lazy table loads and has the name it promises."""
    names = [(m, n) for m, table in package.lazy.items() for n in table]
    assert len(names) > 50
    code = "import importlib\n" + "\n".join(
        f"getattr(importlib.import_module({m!r}), {n!r})" for m, n in names
    )
    fresh_python(code, absent=())


def test_no_public_name_is_also_a_module_name(package: Package) -> None:
    """``from edu_parallel.comm import calibrate`` must mean one thing: a folder exports no name
    that is also one of its modules (importing the module would replace the name)."""
    clashes = []
    for pkg in (m for m in package.files if package.is_package(m)):
        code = f"import importlib; print(' '.join(importlib.import_module({pkg!r}).__all__))"
        names = set(fresh_python(code, absent=()).stdout.split())
        clashes += [f"{pkg}.{n}" for n in sorted(names) if f"{pkg}.{n}" in package.files]
    assert not clashes, f"names that are also modules: {clashes}"


def test_pure_layers_import_without_torch(package: Package) -> None:
    """Renderers, quizzes, plans and models load without torch (and so without the engine),
    and every folder's ``__init__`` is light: its names load on first use."""
    light = [m for m in package.files if package.folder(m) in PURE or package.is_package(m)]
    fresh_python("".join(f"import {m}\n" for m in light))  # and torch was not imported


# ------------------------------------------------------------------ the checker catches each rule
PLANTED = {
    "core/__init__.py": "",
    "core/ok.py": "X = 1\n",
    "core/up.py": "from ..viz.draw import draw\n",  # layers: core may import nothing
    "plans/__init__.py": "",
    "plans/a.py": "from .b import B\nA = 1\n",  # module cycle a <-> b
    "plans/b.py": "B = 2\n\ndef f():\n    from .a import A\n    return A\n",  # function import
    "engine/__init__.py": "",
    "engine/run.py": "from ..core.ok import X\n",
    "comm/__init__.py": '_LAZY = {"go": "go"}\n',
    "comm/go.py": "from ..engine.run import X as go\n",
    "viz/__init__.py": "",
    "viz/draw.py": "from ..comm import go\n\ndef draw():\n    return go\n",  # reach (lazy entry)
    "loose.py": "Y = 1\n",  # misplaced
}


def test_a_planted_violation_of_every_rule_is_caught(tmp_path: Path) -> None:
    root = tmp_path / "planted"
    for name, text in {"__init__.py": "", **PLANTED}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text))
    found = Package(root).all_violations()
    text = {rule: "\n".join(lines) for rule, lines in found.items()}
    assert "planted/loose.py" in text["misplaced"]
    assert "planted/core/up.py:1: core/ may not import viz/" in text["layers"]
    assert (
        "planted/plans/b.py:4: planted.plans.b imports planted.plans.a inside a function"
        in (text["function imports"])
    )
    assert "planted.plans.a (planted/plans/a.py:1)" in text["module cycles"]
    assert "planted.plans.b (planted/plans/b.py:4)" in text["module cycles"]
    assert "core" in text["folder cycles"] and "viz" in text["folder cycles"]
    assert "planted/viz/draw.py: viz/ reaches engine/" in text["reach"]
    assert "planted.comm.go (planted/viz/draw.py:1)" in text["reach"]
    assert "planted/core/up.py: core/ reaches engine/" in text["reach"]
    # and the clean modules are not blamed
    blamed = [line.split(":")[0] for line in sum(found.values(), [])]
    assert "planted/engine/run.py" not in blamed and "planted/core/ok.py" not in blamed
