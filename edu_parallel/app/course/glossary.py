"""The glossary's terms in the lessons: ``notebooks/GLOSSARY.md``'s rows, the variants the outline
does not use, and the checks the catalogs and lessons are held to (``tests/test_i18n.py``)."""

from __future__ import annotations

import re
from pathlib import Path

GLOSSARY = Path(__file__).resolve().parents[3] / "notebooks" / "GLOSSARY.md"  # beside the lessons
_ROW = re.compile(r"^\|\s*([^|]+?)\s*\|\s*([^|]+?)\s*\|", re.MULTILINE)


def glossary(path: Path = GLOSSARY) -> list[tuple[re.Pattern, str, str]]:
    """The glossary's rows as (English pattern, English term, Chinese term).

    ``data parallelism (DP)`` matches "data parallelism" (a plural too, any case, whole words);
    ``Gather / Scatter`` with ``收集 / 散射`` gives two rows; ``rank（进程号）`` asks for ``rank``.
    """
    rows = []
    for en, zh in _ROW.findall(path.read_text(encoding="utf-8")):
        if en in ("English", "---") or set(en) <= {"-"}:
            continue
        ens = [e.strip() for e in re.sub(r"\(.*?\)", "", en).split("/")]
        zhs = [z.strip() for z in re.sub(r"（.*?）", "", zh).split("/")]
        if len(ens) != len(zhs):
            ens, zhs = [ens[0]], [zhs[0]]
        for e, z in zip(ens, zhs, strict=True):
            if e and z:
                words = r"[\s-]".join(re.escape(w) for w in e.split())
                rows.append((re.compile(rf"\b{words}(?:s|es)?\b", re.IGNORECASE), e, z))
    return rows


_NOT_USED = re.compile(r"^\|\s*([^|]+?)\s*\|\s*([^|（]+)(?:（[^|]*）)?\s*\|\s*([^|]+?)\s*\|$", re.M)


def variants(path: Path = GLOSSARY) -> list[tuple[str, str]]:
    """The glossary's "not used · 不用" table as (variant, the outline's form): ``("全归约",
    "AllReduce")``. A variant stands only as the gloss right after its form: AllReduce（全归约）."""
    text = path.read_text(encoding="utf-8")
    start = text.index("| not used · 不用 |")
    end = text.find("\n\n", start)
    table = text[start:] if end < 0 else text[start:end]
    return [(v, form.strip()) for _en, form, v in _NOT_USED.findall(table) if v != "---"]


def variant_problems(texts: dict[str, str], path: Path = GLOSSARY) -> list[str]:
    """``where: variant (write form)`` for each variant of the glossary used outside its gloss in
    ``texts`` (``{where: Chinese text}``)."""
    out = []
    for where, text in texts.items():
        for variant, form in variants(path):
            if variant in text.replace(f"{form}（{variant}", ""):
                out.append(f"{where}: {variant} (the outline writes {form})")
    return out


def strip_code(text: str) -> str:
    """Markdown without code spans, code blocks and link targets (names stay English there)."""
    text = re.sub(r"```.*?```", " ", text, flags=re.DOTALL)
    text = re.sub(r"`[^`]*`", " ", text)
    return re.sub(r"\]\([^)]*\)", "]", text)
