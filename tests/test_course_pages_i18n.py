"""The course's other pages in Chinese hold no English prose (issue 31's scan): the index, the
syllabus and the errata, as the site shows them (and the lab, from the same markdown).

Each page is read as a learner reads it: its HTML without tags, and a run of three or more English
words (``helpers.english_phrases``) is a finding. Not prose, and so not read (:data:`NOT_PROSE`):
style sheets and scripts, code (``<pre>``: the code cells; ``<code>``: identifiers and commands
as typed), titles of cited works as their authors wrote them (``<cite>``), and a function's
signature, as the index's progress table lists each exercise (``my_zero1_step(ctx, params, ...)``).
Proper names (Megatron-LM, torch.distributed) and the outline's terms (AllReduce, bubble) are
one word each to the scan, so no list of allowed phrases is needed.
"""

import re
from html.parser import HTMLParser

import nbformat
import pytest
from helpers import english_phrases

from edu_parallel.app.export.index import page_name
from edu_parallel.app.export.site import page_html
from edu_parallel.app.lab import lessons_source

PAGES = ("index", "syllabus", "errata")
NOT_PROSE = {
    "style": "the page's CSS",
    "script": "plotly.js's calls, the animation script",
    "pre": "code cells, as written",
    "code": "identifiers and commands, as typed",
    "cite": "the titles of cited works, as their authors wrote them",
}
_SIGNATURE = re.compile(r"\b[A-Za-z_]\w*\([^()]*(?:\)|\.\.\.)")  # my_1f1b(stages, microbatches)
_BLOCKS = {"p", "li", "tr", "td", "th", "h1", "h2", "h3", "h4", "div", "br", "blockquote", "nav"}
_HAN = re.compile(r"[\u4e00-\u9fff]")


class PageText(HTMLParser):
    """The text of a page as a learner reads it: one line per block, no element of NOT_PROSE."""

    def __init__(self, html: str):
        super().__init__()
        self.skipping = 0
        self.parts: list[str] = []
        self.feed(html)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.skipping += tag in NOT_PROSE
        if tag in _BLOCKS:
            self.parts.append("\n")

    def handle_endtag(self, tag):
        self.skipping -= tag in NOT_PROSE and self.skipping > 0

    def handle_data(self, data):
        if not self.skipping:
            self.parts.append(data)

    @property
    def text(self) -> str:
        return "".join(self.parts)


def english_on_page(html: str) -> list[str]:
    """Every English phrase of the page's prose (see the module's doc)."""
    return english_phrases(_SIGNATURE.sub(" ", PageText(html).text))


def rendered(name: str) -> str:
    """The page of the course file ``name`` as the export writes it: a page without code cells
    (the syllabus, the errata) is the same whether or not a kernel ran it."""
    source = lessons_source()
    nb = nbformat.read(source / name, as_version=4)
    assert not [c for c in nb.cells if c.cell_type == "code"], f"{name} has code: run it"
    return page_html(nb, {}, name, source)[1]


def page_in(tour_site, name: str) -> str:
    """The page of ``name`` (``zh/index.ipynb``...): the index as the session's export ran it
    (its progress table included), the others rendered as the export renders them."""
    if name.endswith("index.ipynb"):
        return (tour_site[0] / page_name(name)).read_text()
    return rendered(name)


@pytest.mark.multiprocess
@pytest.mark.parametrize("page", PAGES)
def test_the_chinese_course_pages_hold_no_english_phrase(tour_site, page):
    zh, en = (page_in(tour_site, f"{lang}{page}.ipynb") for lang in ("zh/", ""))
    assert len(_HAN.findall(PageText(zh).text)) > 300  # the page's prose was read, in Chinese
    assert english_on_page(zh) == [], english_on_page(zh)
    assert len(english_on_page(en)) > 10  # the same scan reads the English page's prose


def test_the_scan_finds_an_english_phrase_planted_in_a_chinese_page():
    page = rendered("zh/syllabus.ipynb")
    assert english_on_page(page) == []

    def planted(html: str) -> list[str]:
        return english_on_page(page.replace("</h1>", f"</h1>\n{html}", 1))

    assert planted("<p>每个单元 the learning goals of each unit</p>") == [
        "the learning goals of each unit"
    ]
    assert planted("<td>Time to run</td>") == ["Time to run"]
    # not prose: code as typed, a cited title, a function's signature
    assert planted("<p>运行 <code>edu-parallel lab --reset all the lessons</code></p>") == []
    assert planted("<p>见 <cite>Efficient Large-Scale Language Model Training</cite></p>") == []
    assert planted("<td>my_tree_reduce(ctx, tensor, root)</td>") == []
