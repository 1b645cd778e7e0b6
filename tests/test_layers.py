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

import textwrap
from collections import defaultdict
from pathlib import Path

import pytest
from helpers import fresh_python
from layers_checker import Import, ImportGraph, _cycles

ROOT = Path(__file__).resolve().parents[1] / "edu_parallel"

# folder -> the folders it may import from (its own folder always). Read bottom-up.
_TRAINING = ("core", "plans", "engine", "models", "memory", "comm")
# the tiny models and the task that the data-parallel lessons train (lessons 06, 07, 13, 14)
_TASK = (*_TRAINING, "task")
# DDP, then what builds on its comm-hook seam: compression and asynchronous training
_DATA = ("data_parallel", "zero", "compression", "async_training")
PARALLELISMS = (*_DATA, "tensor_parallel", "expert_parallel", "pipeline_parallel")
COMPOSED = (
    "planner",
    "parallel_3d",
    "roofline",
)  # lesson 12: the parallelisms together, planned and run
# what the renderers and quizzes read: the parallelisms' pure modules, the composed ones and the
# failure lab's cases as data (debugging/config.py)
READ = (*PARALLELISMS, "strategy_map", *COMPOSED, "debugging")
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
    # Lesson 16: failures made to happen on the ranks, each diagnosed from the flight records.
    "debugging": _TRAINING,
    "strategy_map": (*_TASK, *PARALLELISMS),
    # Lesson 11: each strategy's bytes become time, measured on the ranks and modelled for GPUs.
    "roofline": (*_TASK, *PARALLELISMS, "strategy_map", "planner"),
    # The planner is arithmetic over the models and the memory calculator: pure, no engine.
    "planner": ("core", "models", "memory"),
    # DP x TP x PP (x EP) composed on one mesh of ranks; its byte counts are the planner's.
    "parallel_3d": (*_TASK, *PARALLELISMS, "strategy_map", "planner"),
    # Renderers and quizzes read traces, plans, models and formulas; the reach rule below keeps
    # them off the engine even where a folder they read also holds a runner.
    "viz": ("core", "plans", "models", "memory", "task", *READ),
    "quiz": ("core", "plans", "models", "memory", "task", *READ),
    # Exercises run the learner's code on the ranks and draw it with the lessons' renderers.
    "exercises": (*_TASK, *PARALLELISMS, "strategy_map", *COMPOSED, "viz", "quiz", "debugging"),
    "app": (
        *_TASK,
        *PARALLELISMS,
        "strategy_map",
        *COMPOSED,
        "viz",
        "quiz",
        "exercises",
        "debugging",
    ),
}
TOP_LEVEL = ("__init__", "__main__")  # the only modules outside a folder
PURE = ("core", "plans", "models", "memory", "planner", "viz", "quiz")  # never reach engine/
ENGINE = "engine"


class Package(ImportGraph):
    """The package's import graph, judged by the rules above with the tables of layers."""

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
