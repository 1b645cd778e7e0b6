"""The lessons in 简体中文: one English notebook, its prose translated cell by cell, code shared.

Each lesson's markdown cells have their Chinese in ``locale/zh_CN/notebooks/{stem}.po``, a gettext
catalog keyed by the cell's id (``msgctxt``), never by its position. An entry keeps the English
source it was translated from (``msgid``) and that source's hash (``#. source-sha256 …``), so when
an English cell changes, its translation is known to be out of date, and the diff shows what
changed. The comments of its code cells are messages of the same catalog (``code_comments.py``).
The Chinese notebook ``notebooks/zh/{stem}.ipynb`` is built from the English one: every code cell
the same code with its comments in Chinese, every markdown cell replaced by its translation, and
one code cell before the first code cell that switches the package's messages to Chinese
(``set_language("zh")``).

    python -m edu_parallel.app.course.notebook_i18n --update 03_ring_allreduce  # new, changed cells
    python -m edu_parallel.app.course.notebook_i18n --check               # one line per problem

The Chinese notebooks themselves are written by
``python -m edu_parallel.app.course.lessons --write``, with the course pages and each lesson's
navigation cell.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import io
import sys
from pathlib import Path

from babel.messages.catalog import Catalog
from babel.messages.pofile import read_po, write_po

from . import code_comments
from .glossary import glossary, strip_code
from .links import load

REPO = Path(__file__).resolve().parents[3]
NOTEBOOKS = REPO / "notebooks"
ZH_FOLDER = "zh"
CATALOGS = REPO / "locale" / "zh_CN" / "notebooks"
LANGUAGE_CELL_ID = "zh-language"
LANGUAGE_SOURCE = (
    "# 本课的输出、测验和图表使用中文；改为 set_language('en') 即切换为英文。\n"
    "import edu_parallel\n"
    "\n"
    'edu_parallel.set_language("zh")'
)
HASH_TAG = "source-sha256 "
SKIP_IDS = ("course-nav",)  # generated in each language by course.py, never translated


def source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def digest(text: str) -> str:
    """The first 16 hex digits of the text's SHA-256: stored beside each translation."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def catalog_path(stem: str, catalogs: Path = CATALOGS) -> Path:
    return catalogs / f"{stem}.po"


def prose_cells(nb: dict) -> list[dict]:
    """The cells that are translated: markdown, except the generated navigation cell."""
    return [c for c in nb["cells"] if c["cell_type"] == "markdown" and c["id"] not in SKIP_IDS]


def read(path: Path) -> Catalog:
    if not path.is_file():
        return Catalog(locale="zh_CN")
    with path.open("rb") as f:
        return read_po(f, locale="zh_CN")


def write(cat: Catalog, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    write_po(buf, cat, width=0, omit_header=True, sort_output=False, include_previous=True)
    path.write_bytes(buf.getvalue())


def entries(cat: Catalog) -> dict[str, object]:
    """The catalog's messages of markdown cells, by cell id (code comments are not among them)."""
    return {m.context: m for m in cat if m.id and m.context and not code_comments.is_comment(m)}


def stored_hash(message) -> str:
    for comment in message.auto_comments:
        if comment.startswith(HASH_TAG):
            return comment[len(HASH_TAG) :].strip()
    return ""


def update(stem: str, notebooks: Path = NOTEBOOKS, catalogs: Path = CATALOGS) -> list[str]:
    """Bring the lesson's catalog in line with its English cells; return what needs translating.

    A new cell gets an empty entry; a changed cell keeps its old translation marked fuzzy, with
    the English it was made from as ``#| msgid`` (the previous source); a removed cell is dropped.
    """
    nb = load(notebooks / f"{stem}.ipynb")
    path = catalog_path(stem, catalogs)
    cat = read(path)
    old = entries(cat)
    new = Catalog(locale="zh_CN")
    todo = []
    for c in prose_cells(nb):
        text = source(c)
        prev = old.get(c["id"])
        if prev is not None and prev.id == text:
            keep = {"auto_comments": prev.auto_comments, "flags": prev.flags}
            new.add(text, prev.string, context=c["id"], **keep)
            if not prev.string or "fuzzy" in prev.flags:
                todo.append(c["id"])
            continue
        flags, previous = (), None
        if prev is not None and prev.string:
            flags, previous = ("fuzzy",), prev.id
        new.add(
            text,
            prev.string if prev is not None else "",
            context=c["id"],
            auto_comments=[HASH_TAG + digest(text)],
            flags=flags,
            previous_id=previous,
        )
        todo.append(c["id"])
    todo += code_comments.add_comments(new, nb, code_comments.translations(cat))
    write(new, path)
    return todo


def set_translations(
    stem: str,
    translations: dict[str, str],
    notebooks: Path = NOTEBOOKS,
    catalogs: Path = CATALOGS,
    comments: dict[str, str] | None = None,
) -> None:
    """Record ``translations`` (cell id -> Chinese markdown) as made from the current English, and
    ``comments`` (a code comment's English text -> its Chinese, in whichever cell it is)."""
    nb = load(notebooks / f"{stem}.ipynb")
    english = {c["id"]: source(c) for c in prose_cells(nb)}
    unknown = sorted(set(translations) - set(english))
    if unknown:
        raise ValueError(f"{stem}: no markdown cell with id {', '.join(unknown)}")
    texts = {text for _cid, text in code_comments.lesson_comments(nb)}
    if comments and set(comments) - texts:
        raise ValueError(f"{stem}: no code comment reads {sorted(set(comments) - texts)[0]!r}")
    path = catalog_path(stem, catalogs)
    cat = read(path)
    old = entries(cat)
    new = Catalog(locale="zh_CN")
    for cid, text in english.items():
        if cid in translations:
            new.add(
                text,
                translations[cid].strip("\n"),
                context=cid,
                auto_comments=[HASH_TAG + digest(text)],
            )
        elif cid in old:
            m = old[cid]
            new.add(
                m.id,
                m.string,
                context=cid,
                auto_comments=m.auto_comments,
                flags=m.flags,
                previous_id=m.previous_id or None,
            )
        else:
            new.add(text, "", context=cid, auto_comments=[HASH_TAG + digest(text)])
    have = code_comments.translations(cat)
    for cid, text in code_comments.lesson_comments(nb):
        if comments and text in comments:
            have[(cid, text)] = comments[text]
    code_comments.add_comments(new, nb, have)
    write(new, path)


def problems(stem: str, notebooks: Path = NOTEBOOKS, catalogs: Path = CATALOGS) -> list[str]:
    """One line per English cell whose Chinese is missing, out of date or fuzzy."""
    nb = load(notebooks / f"{stem}.ipynb")
    path = catalog_path(stem, catalogs)
    if not path.is_file():
        return [f"{stem}: no Chinese catalog ({path.relative_to(path.parents[3])})"]
    have = entries(read(path))
    out = []
    for c in prose_cells(nb):
        cid, text = c["id"], source(c)
        m = have.get(cid)
        first = text.splitlines()[0][:60] if text else ""
        if m is None or not m.string:
            out.append(f"{stem}: cell {cid} ({first!r}) has no Chinese translation")
        elif stored_hash(m) != digest(text) or m.id != text:
            out.append(
                f"{stem}: cell {cid} ({first!r}) changed in English since it was translated"
                f" (source-sha256 {stored_hash(m) or 'missing'}, now {digest(text)})"
            )
        elif "fuzzy" in m.flags:
            out.append(f"{stem}: cell {cid} ({first!r}) is marked fuzzy")
    have_comments = code_comments.translations(read(path))
    out += [
        f"{stem}: code cell {cid}: the comment {text[:60]!r} has no Chinese translation"
        for cid, text in code_comments.lesson_comments(nb)
        if (cid, text) not in have_comments
    ]
    gone = sorted(set(have) - {c["id"] for c in prose_cells(nb)})
    out += [
        f"{stem}: the catalog translates cell {cid}, which the lesson no longer has" for cid in gone
    ]
    return out


def term_problems(stem: str, notebooks: Path = NOTEBOOKS, catalogs: Path = CATALOGS) -> list[str]:
    """Glossary terms the lesson's English prose uses whose Chinese term its Chinese never uses."""
    nb = load(notebooks / f"{stem}.ipynb")
    english = strip_code("\n".join(source(c) for c in prose_cells(nb)))
    have = entries(read(catalog_path(stem, catalogs)))
    chinese = "\n".join(m.string for m in have.values() if m.string)
    if not chinese:
        return []
    return [
        f"{stem}: the English says {en!r}, the Chinese never says {zh!r} (notebooks/GLOSSARY.md)"
        for pattern, en, zh in glossary()
        if pattern.search(english) and zh not in chinese
    ]


def language_cell() -> dict:
    return {
        "cell_type": "code",
        "execution_count": None,
        "id": LANGUAGE_CELL_ID,
        "metadata": {"tags": ["language"]},
        "outputs": [],
        "source": LANGUAGE_SOURCE.splitlines(keepends=True),
    }


def translated(nb: dict, stem: str, catalogs: Path = CATALOGS) -> dict:
    """The Chinese notebook: markdown from the catalog (English where none is current), the code
    cells' code identical and their comments in Chinese where the catalog has them, the language
    cell before the first code cell."""
    cat = read(catalog_path(stem, catalogs))
    have, comments = entries(cat), code_comments.translations(cat)
    cells = []
    for c in nb["cells"]:
        c = copy.deepcopy(c)
        if c["cell_type"] == "code" and not any(x["id"] == LANGUAGE_CELL_ID for x in cells):
            cells.append(language_cell())
        if c["cell_type"] == "markdown" and c["id"] not in SKIP_IDS:
            m = have.get(c["id"])
            if m is not None and m.string and m.id == source(c) and "fuzzy" not in m.flags:
                c["source"] = m.string.splitlines(keepends=True)
        if c["cell_type"] == "code":
            c = code_comments.translated_cell(c, comments)
        cells.append(c)
    meta = copy.deepcopy(nb.get("metadata", {}))
    meta["language_info"] = {**meta.get("language_info", {}), "name": "python"}
    meta["edu_parallel"] = {"language": "zh", "source": f"../{stem}.ipynb"}
    return {**nb, "metadata": meta, "cells": cells}


def lessons(notebooks: Path = NOTEBOOKS) -> list[str]:
    return sorted(p.stem for p in notebooks.glob("[0-9][0-9]_*.ipynb"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m edu_parallel.app.course.notebook_i18n")
    parser.add_argument("--update", nargs="*", metavar="STEM", help="update these lessons' .po")
    parser.add_argument("--check", action="store_true", help="list every missing translation")
    parser.add_argument("--terms", nargs="*", metavar="STEM", help="glossary terms not used")
    args = parser.parse_args(argv)
    for stem in args.terms or []:
        for line in term_problems(stem):
            print(line)
    for stem in args.update or []:
        todo = update(stem)
        print(f"{stem}: {len(todo)} cells to translate" + (f" ({', '.join(todo)})" if todo else ""))
    if args.check:
        found = [line for stem in lessons() for line in problems(stem)]
        for line in found:
            print(line)
        return 1 if found else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
