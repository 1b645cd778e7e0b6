"""Two languages, one course: every message and every lesson in English and 简体中文.

* the package's messages: Babel extracts every ``_()``/``N_()`` string from the source, and each
  must have a Chinese translation with the same placeholders in the compiled catalog;
* ``_()`` never runs at import time (a constant would be frozen in the language of the import);
* the lessons: every English markdown cell has a Chinese translation made from its current text
  (the stored source hash matches), and each Chinese notebook has the English code cells, unchanged;
* a planted missing translation, a planted changed cell and a planted import-time ``_()`` are
  each reported, so the checks can fail.
"""

from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path

import pytest
from helpers import cli

from edu_parallel.app import i18n_catalog
from edu_parallel.app.course import code_comments, glossary, notebook_i18n
from edu_parallel.app.course.code_comments import comments, strip_comments, too_long
from edu_parallel.app.course.errata import ERRATA
from edu_parallel.app.course.lessons import ERRATA_BOXES, LESSONS
from edu_parallel.core import i18n
from edu_parallel.core.errors import check_int
from edu_parallel.core.i18n import _, get_language, language, set_language

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "edu_parallel"
NOTEBOOKS = ROOT / "notebooks"


def _chinese(text: str) -> bool:
    return any("\u4e00" <= ch <= "\u9fff" for ch in text)


# --- choosing the language -------------------------------------------------------------------


def test_set_language_the_environment_and_the_locale_choose_in_that_order(monkeypatch):
    monkeypatch.delenv("EDU_PARALLEL_LANG", raising=False)
    for var in ("LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG"):
        monkeypatch.delenv(var, raising=False)
    assert get_language() == "en"  # no locale at all: English
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    assert get_language() == "zh"
    monkeypatch.setenv("EDU_PARALLEL_LANG", "en")
    assert get_language() == "en"  # the variable beats the locale
    try:
        assert set_language("zh-Hans") == "zh"  # the call beats the variable
        assert get_language() == "zh"
        with language("en"):
            assert get_language() == "en"
        assert get_language() == "zh"
    finally:
        set_language(None)
    assert get_language() == "en"


def test_a_bad_language_is_one_line_naming_the_option(monkeypatch):
    with pytest.raises(
        ValueError, match=r"^language='fr' is not valid: expected one of 'en', 'zh'"
    ):
        set_language("fr")
    monkeypatch.setenv("EDU_PARALLEL_LANG", "klingon")
    with pytest.raises(ValueError, match=r"^EDU_PARALLEL_LANG='klingon' is not valid"):
        get_language()
    assert _("a number > 0") == "a number > 0"  # messages still show, in English


def test_an_error_reads_in_the_learners_language_with_the_same_numbers():
    messages = {}
    for lang in ("en", "zh"):
        with language(lang), pytest.raises(ValueError) as err:
            check_int("world_size", 0, 2, 8)
        messages[lang] = str(err.value)
    assert messages["en"] == "world_size=0 is not valid: expected an integer in [2, 8]"
    assert _chinese(messages["zh"]) and "world_size=0" in messages["zh"]
    assert "[2, 8]" in messages["zh"]


def test_the_command_line_speaks_chinese_when_asked():
    out = cli("run", "ring", "--world-size", "0", lang="zh")
    assert out.returncode != 0
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and _chinese(lines[0]) and "0" in lines[0], out.stderr
    bad = cli("tour", "--lang", "fr")
    assert bad.returncode != 0 and "--lang" in bad.stderr and "'fr'" in bad.stderr
    named = cli("tour", lang="klingon")
    assert named.returncode == 2 and named.stdout == ""
    assert named.stderr.strip() == (
        "error: EDU_PARALLEL_LANG='klingon' is not valid: expected one of 'en', 'zh'"
        " (also zh_CN, zh-Hans, en_US)"
    )


# --- the package's messages ------------------------------------------------------------------


def test_every_message_of_the_package_has_a_chinese_translation():
    problems = i18n_catalog.problems()
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems[:40])


def test_the_catalog_is_used_at_run_time():
    with language("zh"):
        assert _chinese(_("{name}={value!r} is not valid: expected {valid}"))
    with language("en"):
        assert _("a number > 0") == "a number > 0"


def _planted(tmp_path: Path, source: str, translations: dict[str, str]) -> list[str]:
    pkg = tmp_path / "pkg"
    (pkg / "quiz").mkdir(parents=True)
    module = pkg / "quiz" / "bank.py"
    module.write_text(source)
    po_root = tmp_path / "po"
    i18n_catalog.update(module, root=pkg, po_root=po_root)
    po = i18n_catalog.po_path(module, pkg, po_root)
    cat = i18n_catalog.read(po)
    for m in cat:
        if m.id in translations:
            m.string = translations[m.id]
            if m.string.startswith("FUZZY"):
                m.flags.add("fuzzy")
    i18n_catalog.write(cat, po)
    mo = tmp_path / "x.mo"
    i18n_catalog.compile_catalog(po_root, mo)
    return i18n_catalog.problems([module], root=pkg, po_root=po_root, mo=mo)


def test_a_lessons_code_cells_are_a_source_of_messages(tmp_path):
    """A label a code cell prints goes through ``_()``: the catalog finds it in the lesson (a
    magic and a markdown cell around it), keeps it in ``lessons/<stem>.po``, and asks for its
    Chinese until it has one."""
    book = tmp_path / "notebooks" / "05_planted.ipynb"
    book.parent.mkdir()
    cells = [
        {"cell_type": "markdown", "id": "m", "metadata": {}, "source": ["_('not code')"]},
        {
            "cell_type": "code",
            "id": "a",
            "metadata": {},
            "outputs": [],
            "execution_count": None,
            "source": ["%%time\n", "from edu_parallel.core.i18n import _\n", "x = 1"],
        },
        {
            "cell_type": "code",
            "id": "b",
            "metadata": {},
            "outputs": [],
            "execution_count": None,
            "source": [
                "print(_('bytes per rank: {n}').format(n=x))\n",
                "print(_('bytes per rank: {n}'))",
            ],
        },
    ]
    book.write_text(
        json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
    )
    assert i18n_catalog.extract_messages(book) == [("bytes per rank: {n}", 3)]
    pkg, po_root = tmp_path / "pkg", tmp_path / "po"
    pkg.mkdir()
    po = i18n_catalog.update(book, root=pkg, po_root=po_root)
    assert po == po_root / "lessons" / "05_planted.po"
    mo = tmp_path / "x.mo"
    found = i18n_catalog.problems([book], root=pkg, po_root=po_root, mo=mo)
    assert (
        found[0] == "notebooks/05_planted.ipynb:3: no Chinese translation for 'bytes per rank: {n}'"
    )
    cat = i18n_catalog.read(po)
    cat.get("bytes per rank: {n}").string = "每个 rank 的字节数：{n}"
    i18n_catalog.write(cat, po)
    i18n_catalog.compile_catalog(po_root, mo)
    assert i18n_catalog.problems([book], root=pkg, po_root=po_root, mo=mo) == []


def test_the_real_lessons_are_sources_of_the_catalog():
    lessons = [m for m in i18n_catalog.modules() if m.suffix == ".ipynb"]
    assert [m.stem for m in lessons] == [lesson.stem for lesson in LESSONS]


SOURCE = (
    "from ..core.i18n import _\n\n\n"
    "def ask(n):\n"
    "    return _('How many bytes does rank {r} send?').format(r=n), _('A planted message')\n"
)


def test_a_planted_missing_translation_is_reported(tmp_path):
    found = _planted(
        tmp_path, SOURCE, {"How many bytes does rank {r} send?": "rank {r} 发送多少字节？"}
    )
    assert found == ["pkg/quiz/bank.py:5: no Chinese translation for 'A planted message'"]


def test_a_translation_that_loses_a_placeholder_or_is_fuzzy_is_reported(tmp_path):
    found = _planted(
        tmp_path,
        SOURCE,
        {"How many bytes does rank {r} send?": "发送多少字节？", "A planted message": "FUZZY 一条"},
    )
    assert len(found) == 2
    assert "has placeholders [], the English ['r']" in found[0]
    assert "is marked fuzzy" in found[1]


def _import_time_calls(path: Path) -> list[str]:
    """``_()`` calls that run when the module is imported: at module level, in a class body, in a
    default argument value or a decorator."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []

    def visit(node: ast.AST, runs_at_import: bool) -> None:
        if (
            runs_at_import
            and isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "_"
        ):
            out.append(f"{path.relative_to(path.parents[2])}:{node.lineno}")
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            args = node.args
            for default in [*args.defaults, *args.kw_defaults]:
                if default is not None:
                    visit(default, runs_at_import)
            for deco in getattr(node, "decorator_list", []):
                visit(deco, runs_at_import)
            for child in node.body if isinstance(node.body, list) else [node.body]:
                visit(child, False)
            return
        for child in ast.iter_child_nodes(node):
            visit(child, runs_at_import)

    visit(tree, True)
    return out


def test_no_message_is_translated_at_import_time():
    found = [hit for path in i18n_catalog.modules() for hit in _import_time_calls(path)]
    assert not found, "_() at import time (use N_() and translate where shown): " + ", ".join(found)


def test_a_planted_import_time_translation_is_caught(tmp_path):
    path = tmp_path / "edu_parallel" / "viz" / "bad.py"
    path.parent.mkdir(parents=True)
    path.write_text(
        "from ..core.i18n import _, N_\n"
        "TITLE = _('Ring')\n"
        "OK = N_('Ring')\n"
        "class A:\n    label = _('Play')\n"
        "def f(x=_('x')):\n    return _('fine')\n"
    )
    assert [h.rsplit(":", 1)[1] for h in _import_time_calls(path)] == ["2", "5", "6"]


def _python_source(path: Path) -> str:
    if path.suffix != ".ipynb":
        return path.read_text(encoding="utf-8")
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    lines = "\n".join(code).splitlines()
    return "\n".join(line for line in lines if not line.lstrip().startswith(("%", "!")))


def _rebinds(path: Path) -> list[str]:
    """Places where ``_`` is assigned (``for x, _ in ...``, ``_ = ...``, a parameter ``_``) in a
    scope that also calls ``_()``: there the call would not reach gettext. A lesson is one scope:
    its code cells share the kernel's namespace (IPython's magics left out)."""
    tree = ast.parse(_python_source(path))
    scopes = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
    comprehensions = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
    out = []

    def scan(scope: ast.AST) -> tuple[list[int], list[int]]:
        stores, calls = [], []
        stack = list(ast.iter_child_nodes(scope))
        while stack:
            node = stack.pop()
            if isinstance(node, (*scopes, *comprehensions)):
                continue
            if isinstance(node, ast.Name) and node.id == "_" and isinstance(node.ctx, ast.Store):
                stores.append(node.lineno)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                if node.func.id == "_":
                    calls.append(node.lineno)
            stack.extend(ast.iter_child_nodes(node))
        if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = scope.args
            stores += [scope.lineno for x in [*a.args, *a.kwonlyargs] if x.arg == "_"]
        return stores, calls

    module_stores, _calls = scan(tree)
    for scope in [tree, *(n for n in ast.walk(tree) if isinstance(n, scopes[:2]))]:
        stores, calls = scan(scope)
        if scope is not tree and calls and module_stores:
            stores = stores + module_stores
        if stores and calls:
            out.append(f"{path.name}:{min(stores)} rebinds _ where _() is called")
    return out


def test_the_gettext_name_is_never_rebound():
    found = [hit for path in i18n_catalog.modules() for hit in _rebinds(path)]
    assert not found, found


def test_a_planted_rebinding_is_caught(tmp_path):
    path = tmp_path / "bad.py"
    path.write_text(
        "from edu_parallel.core.i18n import _\n"
        "def f(rows):\n    for name, _ in rows:\n        pass\n    return _('x')\n"
        "def g(rows):\n    return [n for n, _ in rows], _('the comprehension has its own _')\n"
    )
    assert _rebinds(path) == ["bad.py:3 rebinds _ where _() is called"]
    book = tmp_path / "11_bad.ipynb"  # a lesson: one namespace across its cells
    cells = [
        {"cell_type": "code", "source": ["%%time\n", "from edu_parallel.core.i18n import _"]},
        {"cell_type": "markdown", "source": ["_ = 'prose'"]},
        {"cell_type": "code", "source": ["_, reports = sweep()\n"]},
        {"cell_type": "code", "source": ["print(_('a label'))"]},
    ]
    book.write_text(json.dumps({"cells": cells}))
    assert _rebinds(book) == ["11_bad.ipynb:2 rebinds _ where _() is called"]


# --- the lessons -----------------------------------------------------------------------------


def test_every_lesson_has_a_current_chinese_translation_of_every_cell():
    problems = [line for lesson in LESSONS for line in notebook_i18n.problems(lesson.stem)]
    assert not problems, f"{len(problems)} cells:\n" + "\n".join(problems[:40])


def test_the_chinese_lessons_use_the_glossarys_terms():
    problems = [line for lesson in LESSONS for line in notebook_i18n.term_problems(lesson.stem)]
    assert not problems, "\n".join(problems)


def _chinese_texts() -> dict[str, str]:
    """Every Chinese text a learner reads: each message of the package's catalogs and of the
    lessons' catalogs (the zh notebooks, pages and figures come from them), and the README."""
    texts = {}
    for po, cat in i18n_catalog.catalogs().items():
        texts |= {f"{po.name}: {m.id!s:.50}": m.string for m in cat if m.id and m.string}
    for lesson in LESSONS:
        cat = notebook_i18n.read(notebook_i18n.catalog_path(lesson.stem))
        texts |= {f"{lesson.stem} {m.context}": m.string for m in cat if m.id and m.string}
    texts["README.md"] = (ROOT / "README.md").read_text(encoding="utf-8")
    return {k: v if isinstance(v, str) else "\n".join(v) for k, v in texts.items()}


def test_the_chinese_uses_the_outlines_words_not_their_variants():
    """AllReduce, AllGather, ReduceScatter, all-to-all, bubble, 微批, 3D 并行: the outline's
    forms (notebooks/GLOSSARY.md); 全归约 and the like only as the gloss at first use."""
    texts = _chinese_texts()
    assert len(texts) > 1000
    problems = glossary.variant_problems(texts)
    assert not problems, f"{len(problems)} texts:\n" + "\n".join(problems[:40])


def test_a_planted_variant_is_named_and_its_gloss_is_not():
    texts = {"ok": "环形 AllReduce（全归约）：先 ReduceScatter", "bad": "一次全交换和 20 个微批次"}
    assert glossary.variant_problems(texts) == [
        "bad: 全交换 (the outline writes all-to-all)",
        "bad: 微批次 (the outline writes 微批)",
    ]


def test_each_lesson_glosses_the_outlines_collectives_at_first_use():
    """A lesson that names AllReduce (or AllGather, ReduceScatter, all-to-all, bubble) explains
    it once in Chinese: the gloss follows its first use in the lesson."""
    missing = []
    for lesson in LESSONS:
        cat = notebook_i18n.read(notebook_i18n.catalog_path(lesson.stem))
        zh = "\n".join(m.string for m in cat if m.id and isinstance(m.string, str))
        for variant, form in glossary.variants():
            if form.isascii() and form in zh and f"{form}（{variant}" not in zh:
                missing.append(f"{lesson.stem}: {form} without （{variant}）")
    assert not missing, missing


def test_a_planted_change_to_an_english_cell_is_reported(tmp_path):
    stem = "03_ring_allreduce"
    books, catalogs = tmp_path / "notebooks", tmp_path / "catalogs"
    books.mkdir()
    catalogs.mkdir()
    shutil.copy(NOTEBOOKS / f"{stem}.ipynb", books)
    shutil.copy(notebook_i18n.catalog_path(stem), catalogs)
    assert notebook_i18n.problems(stem, books, catalogs) == []
    nb = json.loads((books / f"{stem}.ipynb").read_text(encoding="utf-8"))
    cell = next(c for c in nb["cells"] if c["cell_type"] == "markdown")
    cell["source"] = [*cell["source"], "\nA sentence added in English."]
    new = {"cell_type": "markdown", "id": "planted-new", "metadata": {}, "source": ["New."]}
    nb["cells"].insert(3, new)
    (books / f"{stem}.ipynb").write_text(json.dumps(nb), encoding="utf-8")
    found = notebook_i18n.problems(stem, books, catalogs)
    assert len(found) == 2, found
    assert f"cell {cell['id']}" in found[0] and "changed in English" in found[0]
    assert "cell planted-new" in found[1] and "no Chinese translation" in found[1]
    # --update keeps the old translation as fuzzy with the English it was made from
    todo = notebook_i18n.update(stem, books, catalogs)
    assert set(todo) == {cell["id"], "planted-new"}
    text = notebook_i18n.catalog_path(stem, catalogs).read_text(encoding="utf-8")
    assert "#, fuzzy" in text and "#| msgid" in text
    zh = notebook_i18n.translated(nb, stem, catalogs)
    shown = next(c for c in zh["cells"] if c["id"] == cell["id"])
    assert "".join(shown["source"]) == "".join(cell["source"])  # English until re-translated


@pytest.mark.parametrize("lesson", [lesson.stem for lesson in LESSONS])
def test_the_chinese_lesson_has_the_english_code_and_chinese_prose(lesson):
    en = json.loads((NOTEBOOKS / f"{lesson}.ipynb").read_text(encoding="utf-8"))
    path = NOTEBOOKS / "zh" / f"{lesson}.ipynb"
    assert path.is_file(), f"{path} is missing: python -m edu_parallel.app.course.lessons --write"
    zh = json.loads(path.read_text(encoding="utf-8"))
    code = [c for c in zh["cells"] if c["cell_type"] == "code"]
    assert code[0]["id"] == notebook_i18n.LANGUAGE_CELL_ID
    assert 'set_language("zh")' in "".join(code[0]["source"])

    def strip(cells: list[dict]) -> list[tuple[str, str]]:
        return [
            (c["id"], strip_comments("".join(c["source"])))
            for c in cells
            if c["cell_type"] == "code"
        ]

    assert strip(code[1:]) == strip(en["cells"]), "the code cells differ from the English ones"
    # and their comments read in Chinese, but where the translation keeps the English (code)
    kept = {
        text
        for (_cid, text), zh_text in code_comments.translations(
            notebook_i18n.read(notebook_i18n.catalog_path(lesson))
        ).items()
        if zh_text == text
    }
    english = [
        k.text
        for c in code[1:]
        for k in comments("".join(c["source"]))
        if not _chinese(k.text) and k.text not in kept
    ]
    assert not english, f"comments left in English: {english}"
    assert not [line for c in code for line in too_long("".join(c["source"]))]
    assert [c["id"] for c in zh["cells"] if c["id"] != notebook_i18n.LANGUAGE_CELL_ID] == [
        c["id"] for c in en["cells"]
    ]
    english_only = [
        c["id"]
        for c in zh["cells"]
        if c["cell_type"] == "markdown" and not _chinese("".join(c["source"]))
    ]
    assert not english_only, f"markdown cells without Chinese: {english_only}"
    assert all(not c.get("outputs") for c in code), "the notebook is stored with outputs"


@pytest.mark.parametrize("erratum", [e.id for e in ERRATA])
def test_each_errata_box_quotes_the_outline_first_in_both_languages(erratum):
    quotes = next(e.outline_zh for e in ERRATA if e.id == erratum)
    stem, cell_id = ERRATA_BOXES[erratum]
    for folder, label in ((NOTEBOOKS, "English"), (NOTEBOOKS / "zh", "Chinese")):
        nb = json.loads((folder / f"{stem}.ipynb").read_text(encoding="utf-8"))
        text = "".join(next(c for c in nb["cells"] if c["id"] == cell_id)["source"])
        text = text.replace("\\*", "*")  # markdown escapes the outline's asterisks
        for quote in quotes:
            assert quote in text, f"{label} {stem} {cell_id} does not quote {quote!r}"
        first = min(text.index(q) for q in quotes)
        assert first < len(text) // 2 or len(text) < 400, f"{label} {stem}: quote it first"


def test_the_template_asks_for_both_languages():
    template = (ROOT / "docs" / "LESSON_TEMPLATE.md").read_text(encoding="utf-8")
    assert "notebook_i18n" in template and "zh/" in template


def test_the_catalogs_hold_no_stale_module():
    """Every package .po belongs to a source (a module, or a lesson's code cells) that still has
    messages."""
    sources = [m for m in i18n_catalog.modules() if i18n_catalog.extract_messages(m)]
    assert any(m.suffix == ".ipynb" for m in sources)  # the lessons' labels are sources too
    homes = {i18n_catalog.po_path(m) for m in sources}
    stale = [
        p.relative_to(i18n_catalog.PO_ROOT).as_posix()
        for p in i18n_catalog.PO_ROOT.rglob("*.po")
        if p not in homes
    ]
    assert not stale, stale


def test_the_package_finds_its_catalog_when_installed():
    assert i18n_catalog.MO_PATH.is_file() and i18n_catalog.MO_PATH.parent.parent.parent == (
        i18n.LOCALE_DIR
    )
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert "core/locale/*/LC_MESSAGES/*.mo" in pyproject
    assert '"share/edu-parallel/notebooks/zh"' in pyproject
