"""The package's gettext catalog: extract, update, compile, check (Babel, as ``pybabel`` would).

One ``.po`` file per module that has messages, beside the others under ``locale/zh_CN/package/``
(``quiz/banks/ddp.py`` -> ``locale/zh_CN/package/quiz/banks_ddp.po``), so that each module's
messages are translated and reviewed in one place. A lesson's code cells are a source too: a label
a cell prints goes through ``_()`` (``from edu_parallel.core.i18n import _``), and its messages
live in ``locale/zh_CN/package/lessons/06_dp_bucketing_overlap.po``: the Chinese lesson runs the
same code and prints them in Chinese. ``--compile`` merges them into the one catalog
the package reads, ``edu_parallel/core/locale/zh_CN/LC_MESSAGES/edu_parallel.mo``.

    python -m edu_parallel.app.i18n_catalog --update edu_parallel/quiz/banks/ddp.py
    python -m edu_parallel.app.i18n_catalog --compile
    python -m edu_parallel.app.i18n_catalog --check      # exit 1 and one line per problem

Extraction is Babel's Python extractor with the keywords ``_`` and ``N_`` (``core/i18n.py``).
"""

from __future__ import annotations

import argparse
import io
import json
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from babel.messages.catalog import Catalog
from babel.messages.extract import extract, extract_from_file
from babel.messages.mofile import read_mo, write_mo
from babel.messages.pofile import read_po, write_po

from ..core.i18n import DOMAIN, LOCALE_DIR, reload_catalogs

PACKAGE = Path(__file__).resolve().parents[1]
REPO = PACKAGE.parent
PO_ROOT = REPO / "locale" / "zh_CN" / "package"
NOTEBOOKS = REPO / "notebooks"
MO_PATH = LOCALE_DIR / "zh_CN" / "LC_MESSAGES" / f"{DOMAIN}.mo"
KEYWORDS = {"_": None, "N_": None}
PLACEHOLDER = re.compile(r"\{([^{}]*)\}|(%\([a-z_]+\)[sdr]|%[sdr])")  # str.format and %


def modules(root: Path = PACKAGE) -> list[Path]:
    """Every Python module of the package, then (for the package itself) every lesson whose
    code cells are a source of messages, in a stable order."""
    found = sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)
    if root == PACKAGE:
        found += sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    return found


def _found(pieces: Iterable[tuple[int, Any]]) -> list[tuple[str, int]]:
    seen: dict[str, int] = {}
    for line, msg in pieces:
        if isinstance(msg, str) and msg and msg not in seen:
            seen[msg] = line
    return list(seen.items())


def extract_messages(path: Path) -> list[tuple[str, int]]:
    """The messages of one source as ``(msgid, line)``, in source order, first line per msgid;
    for a lesson, the line is the code cell's number (1 for its first cell)."""
    if path.suffix != ".ipynb":
        return _found((m[0], m[1]) for m in extract_from_file("python", path, KEYWORDS))
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    pieces = []
    for number, cell in enumerate(cells, start=1):
        if cell["cell_type"] == "code":
            code = "".join(cell["source"]).encode("utf-8")
            pieces += [(number, m[1]) for m in extract("python", io.BytesIO(code), KEYWORDS)]
    return _found(pieces)


def po_path(module: Path, root: Path = PACKAGE, po_root: Path = PO_ROOT) -> Path:
    """Where ``module``'s translations live (a lesson's: ``lessons/<stem>.po``)."""
    if module.suffix == ".ipynb":
        return po_root / "lessons" / f"{module.stem}.po"
    return po_root / module.resolve().relative_to(root).with_suffix(".po")


def read(path: Path) -> Catalog:
    with path.open("rb") as f:
        return read_po(f, locale="zh_CN", domain=DOMAIN)


def write(catalog: Catalog, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    write_po(buf, catalog, width=100, omit_header=True, sort_output=False)
    path.write_bytes(buf.getvalue())


def update(
    module: Path, root: Path = PACKAGE, po_root: Path = PO_ROOT, memory: Catalog | None = None
) -> Path | None:
    """Bring ``module``'s ``.po`` in line with its source: new messages empty, gone ones dropped,
    translations kept. A message that moved here from another module keeps its translation from
    ``memory`` (every catalog merged, read before any is rewritten). Returns the ``.po`` path, or
    None when the module has no messages."""
    found = extract_messages(module)
    out = po_path(module, root, po_root)
    old = read(out) if out.is_file() else Catalog(locale="zh_CN", domain=DOMAIN)
    if not found:
        if out.is_file():
            out.unlink()
        return None
    memory = merged(po_root)[0] if memory is None else memory
    new = Catalog(locale="zh_CN", domain=DOMAIN)
    rel = module.resolve().relative_to(root.parent).as_posix()
    for msgid, line in found:
        prev = old.get(msgid) or memory.get(msgid)
        new.add(msgid, prev.string if prev else "", locations=[(rel, line)])
    write(new, out)
    return out


def catalogs(po_root: Path = PO_ROOT) -> dict[Path, Catalog]:
    return {p: read(p) for p in sorted(po_root.rglob("*.po"))}


def merged(po_root: Path = PO_ROOT) -> tuple[Catalog, list[str]]:
    """All translations in one catalog, and a line per msgid translated two different ways."""
    out = Catalog(locale="zh_CN", domain=DOMAIN)
    problems = []
    for path, cat in catalogs(po_root).items():
        for m in cat:
            if not m.id or not m.string:
                continue
            have = out.get(m.id)
            if have is not None and have.string != m.string:
                problems.append(
                    f"{path.relative_to(po_root)}: {m.id!r} is translated differently elsewhere"
                    f" ({have.string!r} vs {m.string!r})"
                )
                continue
            out.add(m.id, m.string)
    return out, problems


def mo_bytes(cat: Catalog) -> bytes:
    buf = io.BytesIO()
    write_mo(buf, cat)
    return buf.getvalue()


def compile_catalog(po_root: Path = PO_ROOT, mo: Path = MO_PATH) -> list[str]:
    """Write the ``.mo`` the package reads; return the conflicts (not written when any)."""
    cat, problems = merged(po_root)
    if problems:
        return problems
    mo.parent.mkdir(parents=True, exist_ok=True)
    mo.write_bytes(mo_bytes(cat))
    reload_catalogs()
    return []


def placeholders(text: str) -> list[str]:
    """The message's placeholders, ``{name}`` and ``%(name)s``/``%s``, sorted."""
    literal = text.replace("{{", "").replace("}}", "")  # str.format's escaped braces
    return sorted(a or b for a, b in PLACEHOLDER.findall(literal))


def problems(
    sources: Iterable[Path] | None = None,
    root: Path = PACKAGE,
    po_root: Path = PO_ROOT,
    mo: Path = MO_PATH,
) -> list[str]:
    """Every message without a translation, every translation that drops or invents a
    placeholder, every ``.po`` out of line with its module, and a stale ``.mo``. One line each."""
    out: list[str] = []
    for module in modules(root) if sources is None else sources:
        found = extract_messages(module)
        if not found:
            continue
        path = po_path(module, root, po_root)
        rel = module.resolve().relative_to(root.parent).as_posix()
        cat = read(path) if path.is_file() else Catalog(locale="zh_CN")
        for msgid, line in found:
            m = cat.get(msgid)
            if m is None or not m.string:
                out.append(f"{rel}:{line}: no Chinese translation for {msgid!r}")
            elif placeholders(m.string) != placeholders(msgid):
                out.append(
                    f"{rel}:{line}: the translation of {msgid!r} has placeholders"
                    f" {placeholders(m.string)}, the English {placeholders(msgid)}"
                )
            elif "fuzzy" in m.flags:
                out.append(f"{rel}:{line}: the translation of {msgid!r} is marked fuzzy")
    cat, conflicts = merged(po_root)
    out += conflicts
    if not conflicts:
        have = read_mo(io.BytesIO(mo.read_bytes())) if mo.is_file() else Catalog()
        want = {m.id: m.string for m in cat if m.id}
        got = {m.id: m.string for m in have if m.id}
        if want != got:
            out.append(
                f"{mo.name} is not compiled from the .po files"
                " (run: python -m edu_parallel.app.i18n_catalog --compile)"
            )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m edu_parallel.app.i18n_catalog")
    parser.add_argument("--update", nargs="*", metavar="MODULE", help="update these modules' .po")
    parser.add_argument("--update-all", action="store_true", help="update every module's .po")
    parser.add_argument("--compile", action="store_true", help="write the .mo")
    parser.add_argument("--check", action="store_true", help="list every missing translation")
    args = parser.parse_args(argv)
    targets = modules() if args.update_all else [Path(m) for m in args.update or []]
    memory = merged()[0] if targets else None
    for module in targets:
        path = update(module, memory=memory)
        if path is not None:
            print(f"updated {path.relative_to(REPO)}")
    if args.compile:
        conflicts = compile_catalog()
        for line in conflicts:
            print(line, file=sys.stderr)
        if conflicts:
            return 1
        print(f"wrote {MO_PATH.relative_to(REPO)}")
    if args.check:
        found = problems()
        for line in found:
            print(line)
        return 1 if found else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
