"""Checks that a learner can move through the course: every link lands, and Next leads through it.

Lessons are copied into the learner's workspace as notebooks only (``workspace.py``), with the
Chinese ones in its ``zh/`` folder and the glossary (``GLOSSARY.md``) beside the index, so a
relative link must name a notebook (or the glossary) of the same folder, or cross between the two
languages: ``zh/NAME.ipynb`` from the English folder, ``../NAME.ipynb`` from the Chinese one. A
notebook's ``#anchor`` must be a heading of it, as JupyterLab names headings (the heading's text,
spaces as ``-``). The chain starts at the course index and follows the ``Next:`` (Chinese:
``下一课：``) link of each notebook's last cell until it is back at the index.

Each check returns a list of problems, one line each, naming the notebook and the link; an empty
list means it passed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

LINK = re.compile(r"\]\(([^)\s]+)\)")
NEXT = re.compile(r"(?:Next: |下一课：)\[[^\]]*\]\(([^)\s#]+)\)")
PREVIOUS = re.compile(r"(?:Previous: |上一课：)\[[^\]]*\]\(([^)\s#]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
EXTERNAL = ("http://", "https://", "mailto:")
DOCUMENTS = (".md",)  # files other than notebooks that the workspace copies (the glossary)
ZH = "zh"  # the Chinese notebooks' folder, inside the English one


def load(path: Path) -> dict:
    """A notebook as JSON."""
    return json.loads(path.read_text(encoding="utf-8"))


def markdown(nb: dict) -> list[str]:
    """The source of every markdown cell, in order."""
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown"]


def anchors(nb: dict) -> set[str]:
    """The anchors JupyterLab gives the notebook's headings (text with spaces as ``-``)."""
    return {m.group(1).replace(" ", "-") for text in markdown(nb) for m in HEADING.finditer(text)}


def links(nb: dict) -> list[str]:
    """Every markdown link target of the notebook."""
    return [m.group(1) for text in markdown(nb) for m in LINK.finditer(text)]


def _other_language(folder: Path, file: str) -> Path | None:
    """Where ``file`` lands when it crosses between the languages (``zh/x.ipynb`` from the
    English folder, ``../x.ipynb`` or ``../GLOSSARY.md`` from the Chinese one), else None."""
    where, _, name = file.partition("/")
    if not name or "/" in name or not name.endswith((".ipynb", *DOCUMENTS)):
        return None
    if where == ZH and folder.name != ZH:
        return folder / ZH / name
    if where == ".." and folder.name == ZH:
        return folder.parent / name
    return None


def broken_links(folder: Path) -> list[str]:
    """Links of ``folder``'s notebooks that do not land on a notebook (and heading) of the course:
    one in ``folder``, or its counterpart in the other language's folder; or on the glossary."""
    folder = Path(folder)
    books = {p.name: load(p) for p in sorted(folder.glob("*.ipynb"))}
    documents = {p.name for p in folder.iterdir() if p.suffix in DOCUMENTS}
    problems = []
    for name, nb in books.items():
        for target in links(nb):
            if target.startswith(EXTERNAL):
                continue
            file, _, anchor = target.partition("#")
            file = file or name
            other = _other_language(folder, file)
            if other is not None:
                if not other.is_file():
                    problems.append(f"{name}: link {target}: no such notebook in the course")
                elif other.suffix == ".ipynb" and anchor and anchor not in anchors(load(other)):
                    problems.append(f"{name}: link {target}: {file} has no heading #{anchor}")
            elif file in documents:
                continue
            elif file not in books:
                why = "no such notebook in the course folder"
                if not file.endswith(".ipynb") or "/" in file:
                    why = "not a notebook of the course folder (a workspace holds notebooks only)"
                problems.append(f"{name}: link {target}: {why}")
            elif anchor and anchor not in anchors(books[file]):
                problems.append(f"{name}: link {target}: {file} has no heading #{anchor}")
    return problems


def nav_target(nb: dict, pattern: re.Pattern[str] = NEXT) -> str | None:
    """The ``Next:`` (or ``Previous:``) link of the notebook's last cell, if it has one (in
    either language)."""
    last = nb["cells"][-1] if nb["cells"] else None
    if last is None or last["cell_type"] != "markdown":
        return None
    found = pattern.search("".join(last["source"]))
    return found.group(1) if found else None


def chain(folder: Path, start: str) -> tuple[list[str], list[str]]:
    """Follow ``Next:`` from ``start``: (the notebooks visited after it, problems on the way)."""
    folder = Path(folder)
    visited: list[str] = []
    here = start
    while True:
        nxt = nav_target(load(folder / here))
        if nxt is None:
            return visited, [f"{here}: its last cell has no 'Next: [...](...)' link"]
        if nxt == start:
            return visited, []
        if nxt in visited:
            return visited, [f"{here}: Next leads back to {nxt}, a loop that misses the index"]
        if not (folder / nxt).is_file():
            return visited, [f"{here}: Next leads to missing {nxt}"]
        visited.append(nxt)
        here = nxt


def chain_problems(folder: Path, start: str, lessons: list[str]) -> list[str]:
    """Problems with the path through the course: from ``start``, Next must visit ``lessons`` in
    this order, each once, and return to ``start``; each Previous must point one step back."""
    visited, problems = chain(folder, start)
    if not problems and visited != lessons:
        problems.append(f"{start}: Next visits {visited}, expected {lessons}")
    if problems:
        return problems
    previous = [start, *lessons[:-1]]
    for name, back in zip(lessons, previous, strict=True):
        found = nav_target(load(Path(folder) / name), PREVIOUS)
        if found != back:
            problems.append(f"{name}: Previous links to {found}, expected {back}")
    return problems
