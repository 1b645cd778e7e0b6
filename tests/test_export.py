"""``edu-parallel export --html``: a static site whose figures and animations play offline."""

import re
from html import escape as html_escape
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest
from helpers import english_phrases, plotly_outputs
from plotly.offline import get_plotlyjs

from edu_parallel.app.cli import main
from edu_parallel.app.export import site as export
from edu_parallel.app.export.html import (
    LAB_CSS,
    PLOTLY,
    PLOTLY_JS,
    SITE_FILES,
    WIDGET_STATE,
    WIDGET_VIEW,
    first_heading,
    lab_css,
    link_pages,
    static_outputs,
)
from edu_parallel.app.export.index import link_site
from edu_parallel.app.lab import lessons_source
from edu_parallel.core.i18n import language
from edu_parallel.core.units import format_bytes


class Tags(HTMLParser):
    """The ``(tag, attributes)`` of a page; script bodies are data, not tags."""

    def __init__(self, text: str):
        super().__init__()
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, {k: v or "" for k, v in attrs}))


def network_refs(text: str) -> list[str]:
    refs = []
    for tag, attrs in Tags(text).tags:
        for key in ("src", "href") if tag in ("script", "link", "img", "iframe") else ():
            if attrs.get(key, "").startswith(("http://", "https://", "//")):
                refs.append(f"<{tag} {key}={attrs[key]}>")
    return refs


def widget_outputs(nb) -> list[dict]:
    return [
        o
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.outputs
        if WIDGET_VIEW in o.get("data", {})
    ]


@pytest.mark.multiprocess
def test_the_tour_page_has_every_figure_and_plays_offline(tour_site):
    dest, pages, lines = tour_site
    assert [p.name for p in pages] == ["00_tour.ipynb", "zh/00_tour.ipynb"]
    lesson = pages[0]
    assert [line.split()[0] for line in lines] == [
        "00_tour.html",
        "zh/00_tour.html",
        "zh/index.html",
        "index.html",
    ]
    assert all(" s " in line for line in lines[:2])
    text = lesson.page.read_text()
    figures = plotly_outputs(lesson.executed)
    assert len(figures) > 0
    # the tour's only widget is its quiz: a note, no figure of its own
    assert {v["kind"] for v in lesson.views.values()} == {"quiz"}
    assert all(v["figures"] == [] for v in lesson.views.values())
    assert text.count('class="plotly-graph-div"') == len(figures)
    assert text.count("Plotly.newPlot(") == len(figures)
    animations = [f for f in figures if f.get("frames")]
    assert len(animations) > 0
    assert text.count("Plotly.addFrames(") == len(animations)
    # plotly.js and the lab CSS are loaded from files beside the page, which hold them
    scripts = [a["src"] for tag, a in Tags(text).tags if tag == "script" and a.get("src")]
    styles = [a["href"] for tag, a in Tags(text).tags if tag == "link"]
    assert scripts == [PLOTLY_JS] and styles == [LAB_CSS]
    assert (lesson.page.parent / scripts[0]).read_text() == get_plotlyjs()
    assert (lesson.page.parent / styles[0]).read_text() == lab_css()
    assert network_refs(text) == []
    for cdn in ("cdnjs.cloudflare.com", "unpkg.com", "cdn.jsdelivr.net"):
        assert cdn not in text


@pytest.mark.multiprocess
def test_widgets_become_notes_and_the_index_links_resolve(tour_site):
    dest, pages, _ = tour_site
    lesson = pages[0]
    text = lesson.page.read_text()
    widgets = widget_outputs(lesson.executed)
    assert len(widgets) > 0
    assert text.count('class="edu-widget-note"') == len(widgets)
    assert "Interactive widget (quiz): open this lesson in JupyterLab" in text
    assert "VBox(" not in text and WIDGET_VIEW not in text and WIDGET_STATE not in text
    assert f"<title>{lesson.title}</title>" in text and lesson.title.startswith("00")
    index = (dest / "index.html").read_text()
    links = [a["href"] for tag, a in Tags(index).tags if tag == "a"]
    assert "00_tour.html" in links
    local = [h.split("#")[0] for h in links if "://" not in h and not h.startswith("#")]
    assert local and all((dest / href).is_file() for href in local)
    hrefs = [a.get("href", "") for tag, a in Tags(text).tags if tag == "a"]
    assert hrefs[0] == "index.html"  # the page's way back
    local = [h for h in hrefs if not h.startswith(("#", "http://", "https://"))]
    course = {p.stem for p in lessons_source().glob("*.ipynb")}
    assert local and all(Path(h).suffix == ".html" and Path(h).stem in course for h in local)
    assert network_refs(index) == []


@pytest.mark.multiprocess
def test_the_index_is_the_labs_index_in_both_languages_and_its_links_land(tour_site):
    """index.html is notebooks/index.ipynb rendered (its title, its learning-path table with each
    lesson's own number), zh/index.html the Chinese one; each links the other, and its links to
    lessons lead to the pages the site has (the tour here), the others named but not linked."""
    dest, _, _ = tour_site
    source = lessons_source()
    for name, other in (("index", "zh/index.html"), ("zh/index", "../index.html")):
        nb = nbformat.read(source / f"{name}.ipynb", as_version=4)
        text = (dest / f"{name}.html").read_text()
        assert f"<title>{first_heading(nb, name)}</title>" in text
        path = next(c.source for c in nb.cells if c.get("id") == "index-path")
        labels = re.findall(r"\[(\d\d · [^\]]+)\]\(\d\d_", path)
        assert len(labels) == len(export.lesson_files(source)) > 10
        assert all(html_escape(label, quote=False) in text for label in labels)
        assert "<table" in text and "<ol>" not in text
        links = [a["href"] for tag, a in Tags(text).tags if tag == "a" and a.get("href")]
        local = [h.split("#")[0] for h in links if "://" not in h and not h.startswith("#")]
        assert other in local
        here = (dest / name).parent
        assert all((here / h).resolve().is_file() for h in local), local
        assert not [h for h in local if h.endswith(".ipynb")]
        lessons = {h for h in local if re.match(r"\d\d_", Path(h).name)}
        assert lessons == {"00_tour.html"}, lessons
        assert 'class="edu-nav"' not in text  # no "all lessons" link to itself
    zh = (dest / "zh/00_tour.html").read_text()
    assert [a["src"] for t, a in Tags(zh).tags if t == "script" and a.get("src")] == [
        f"../{PLOTLY_JS}"
    ]
    assert [a.get("href") for t, a in Tags(zh).tags if t == "a"][0] == "index.html"  # zh index


def test_an_index_links_the_pages_the_site_has_and_names_the_others():
    text = (
        "English · [简体中文](zh/index.ipynb) · [Glossary](GLOSSARY.md)\n"
        "| [00 · Tour](00_tour.ipynb) | [U1](syllabus.ipynb#U1) | [03 · Ring](03_ring.ipynb) |\n"
        "[web](https://x.org/a.ipynb) [up](../index.ipynb)"
    )
    have = {"zh/index.html", "GLOSSARY.md", "00_tour.html", "syllabus.html"}
    assert link_site(text, "index.ipynb", have.__contains__) == (
        "English · [简体中文](zh/index.html) · [Glossary](GLOSSARY.md)\n"
        "| [00 · Tour](00_tour.html) | [U1](syllabus.html#U1) | 03 · Ring |\n"
        "[web](https://x.org/a.ipynb) up"
    )
    zh = "[English](../index.ipynb) · [03 · 环形](03_ring.ipynb)"
    assert link_site(zh, "zh/index.ipynb", {"index.html"}.__contains__) == (
        "[English](../index.html) · 03 · 环形"
    )


def _plotly_pieces() -> list[str]:
    """Three 2000-character pieces of plotly.js (start, middle, end): one in a page means the
    page inlines plotly.js, in full or in part."""
    js = get_plotlyjs()
    return [js[i : i + 2000] for i in (0, len(js) // 2, len(js) - 2000)]


@pytest.mark.multiprocess
def test_the_site_holds_plotly_js_once_and_its_size_is_counted(tour_site):
    dest, pages, _ = tour_site
    files = sorted(f for f in dest.rglob("*") if f.is_file())
    names = sorted(f.relative_to(dest).as_posix() for f in files)
    pages_of = ["00_tour.html", "index.html", "zh/00_tour.html", "zh/index.html"]
    assert names == sorted([*pages_of, "GLOSSARY.md", *SITE_FILES])
    pieces = _plotly_pieces()
    for page in (f for f in files if f.suffix == ".html"):
        assert not any(piece in page.read_text() for piece in pieces), f"{page.name} inlines it"
    size = export.site_size(dest, lessons_source())
    total = sum(f.stat().st_size for f in files)
    assert (size.total, size.files) == (total, len(files))
    biggest = max(pages, key=lambda p: p.page.stat().st_size).page  # the tour, en or zh
    assert (size.largest, size.largest_bytes) == (biggest, biggest.stat().st_size)
    # the tour's page is its prose, code, one animation and a note: not plotly.js (4.8 MB) nor
    # the lab CSS (260 KB), which the site holds once
    assert size.largest_bytes < 250_000
    shared = sum((dest / name).stat().st_size for name in SITE_FILES)
    assert shared >= len(get_plotlyjs()) and total < shared + 250_000


def test_links_between_lessons_point_to_the_pages():
    stems = ["03_ring_allreduce", "06_dp_bucketing_overlap", "index"]
    text = (
        "see [bucketing](06_dp_bucketing_overlap.ipynb#overlap), [the ring](./03_ring_allreduce"
        ".ipynb), <a href='index.ipynb'>the index</a>, [a gist](https://x.org/05_dp_bucketing"
        "_overlap.ipynb) and [mine](my_notes.ipynb)"
    )
    assert link_pages(text, stems) == (
        "see [bucketing](06_dp_bucketing_overlap.html#overlap), [the ring](./03_ring_allreduce"
        ".html), <a href='index.html'>the index</a>, [a gist](https://x.org/05_dp_bucketing"
        "_overlap.ipynb) and [mine](my_notes.ipynb)"
    )


def _model(name: str, **state) -> dict:
    return {"model_name": name, "model_module": "@jupyter-widgets/controls", "state": state}


def _panel_and_bar() -> tuple[list, dict, dict]:
    """Two widget views as a cell's outputs, the widget state and what the kernel said: an
    exercise panel (its verdict, a figure in its Output, a button) and a progress bar."""
    figure = {"data": [{"type": "bar", "y": [1, 2]}], "layout": {}}
    state = {
        "box": _model("VBoxModel", children=["IPY_MODEL_verdict", "IPY_MODEL_out", "IPY_MODEL_b"]),
        "verdict": _model("HTMLModel", value="<b>FAIL exercise 03</b>"),
        "out": _model(
            "OutputModel",
            outputs=[{"output_type": "display_data", "data": {PLOTLY: figure}, "metadata": {}}],
        ),
        "b": _model("ButtonModel", description="Hint"),
        "bar": _model("HBoxModel", children=["IPY_MODEL_p"]),
        "p": _model("FloatProgressModel", value=3.0),
    }
    outputs = [
        nbformat.v4.new_output("display_data", data={WIDGET_VIEW: {"model_id": m}})
        for m in ("box", "bar")
    ]
    return outputs, state, {"box": {"kind": "exercise panel", "figures": []}}


def test_a_widget_without_a_counterpart_keeps_what_it_showed():
    html = [o["data"]["text/html"] for o in static_outputs(*_panel_and_bar())]
    assert len(html) == 4
    assert html[0].count("Interactive widget (exercise panel): below, what it showed") == 1
    assert html[1] == "<b>FAIL exercise 03</b>"
    assert 'class="plotly-graph-div"' in html[2] and '"y":[1,2]' in html[2]
    assert "Progress bar" in html[3]


def test_the_widget_notes_read_in_the_pages_language():
    notes = {}
    for lang in ("en", "zh"):
        with language(lang):
            html = [o["data"]["text/html"] for o in static_outputs(*_panel_and_bar())]
        notes[lang] = re.sub(r"<[^>]+>", " ", f"{html[0]}\n{html[3]}")
    assert len(english_phrases(notes["en"])) == 4, notes["en"]  # the scan reads both notes
    assert english_phrases(notes["zh"]) == [], notes["zh"]
    assert "交互组件（练习面板）" in notes["zh"] and "进度条" in notes["zh"]


def _notebook(folder: Path, name: str, *cells) -> None:
    nb = nbformat.v4.new_notebook(cells=list(cells))
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nbformat.write(nb, folder / name)


def test_a_failing_lesson_is_named_in_one_line_and_the_pages_before_it_stay(
    tmp_path, monkeypatch, capsys
):
    lessons = tmp_path / "lessons"
    lessons.mkdir()
    md, code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
    _notebook(
        lessons, "00_ok.ipynb", md("# 00 · Fine\nnext: [the bad one](01_bad.ipynb)"), code("1 + 1")
    )
    _notebook(lessons, "01_bad.ipynb", md("# 01 · Bad"), code("x = 1\nraise ValueError('boom')"))
    monkeypatch.setattr(export, "lessons_source", lambda: lessons)
    dest = tmp_path / "site"
    assert main(["export", "--html", str(dest), "--timeout", "60"]) == 1
    out, err = capsys.readouterr()
    assert out.startswith("00_ok.html")
    first = err.splitlines()[0]
    assert first == "error: lesson 01_bad failed in the cell `x = 1`: ValueError: boom"
    written = sorted(p.name for p in dest.iterdir())
    assert written == sorted(["00_ok.html", "index.html", *SITE_FILES])
    assert 'href="01_bad.html"' in (dest / "00_ok.html").read_text()
    assert "00 · Fine" in (dest / "index.html").read_text()
    assert sorted(p.name for p in lessons.iterdir()) == ["00_ok.ipynb", "01_bad.ipynb"]


def test_the_export_ends_with_the_sites_size_and_its_largest_page(tmp_path, monkeypatch, capsys):
    lessons = tmp_path / "lessons"
    lessons.mkdir()
    md, code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
    _notebook(lessons, "00_small.ipynb", md("# 00 · Small"), code("1 + 1"))
    _notebook(lessons, "01_large.ipynb", md("# 01 · Large"), code("print('x' * 20_000)"))
    monkeypatch.setattr(export, "lessons_source", lambda: lessons)
    dest = tmp_path / "site"
    assert main(["export", "--html", str(dest), "--timeout", "60"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    files = list(dest.iterdir())
    assert len(files) == 3 + len(SITE_FILES)
    total = format_bytes(sum(f.stat().st_size for f in files))
    largest = format_bytes((dest / "01_large.html").stat().st_size)
    assert last == (
        f"the site: {total} in {len(files)} files; its largest page: 01_large.html ({largest})"
    )


def _two_language_course(folder: Path) -> None:
    """Lessons 00 and 01 and an index, in English and in ``zh/``; each index links the other and
    the lessons, the Chinese one the English lessons too."""
    md, code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
    (folder / "zh").mkdir(parents=True)
    for name, title in (("00_a", "00 · A"), ("01_b", "01 · B"), ("zh/00_a", "00 · 甲")):
        _notebook(folder, f"{name}.ipynb", md(f"# {title}"), code("1 + 1"))
    _notebook(folder, "zh/01_b.ipynb", md("# 01 · 乙"), code("1 + 1"))
    en = "# Course\nEnglish · [简体中文](zh/index.ipynb) · [00 · A](00_a.ipynb)"
    _notebook(folder, "index.ipynb", md(en + " · [01 · B](01_b.ipynb)"))
    zh = (
        "# 课程\n[English](../index.ipynb) · 简体中文 · [00 · 甲](00_a.ipynb)"
        " · [01 · 乙](01_b.ipynb) · [00 · A](../00_a.ipynb) · [01 · B](../01_b.ipynb)"
    )
    _notebook(folder, "zh/index.ipynb", md(zh))


def _local_links(page: Path) -> list[str]:
    hrefs = [a.get("href", "") for tag, a in Tags(page.read_text()).tags if tag == "a"]
    return [h for h in hrefs if h and "://" not in h and not h.startswith("#")]


def _html_lang(page: Path) -> str:
    return next(a.get("lang", "") for tag, a in Tags(page.read_text()).tags if tag == "html")


@pytest.mark.multiprocess
def test_one_language_runs_only_its_pages_and_its_index_links_the_other_languages_pages(
    tmp_path, monkeypatch, capsys
):
    """``--lang en`` then ``--lang zh`` into one folder: each runs its own pages and index only;
    the English index names the Chinese one (not written yet), the Chinese index links the
    English pages the folder holds and names the lesson that neither export wrote."""
    lessons = tmp_path / "lessons"
    _two_language_course(lessons)
    monkeypatch.setattr(export, "lessons_source", lambda: lessons)
    dest = tmp_path / "site"
    args = ["export", "--html", str(dest), "--lessons", "00", "--timeout", "60", "--lang"]
    assert main([*args, "en"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in out[:2]] == ["00_a.html", "index.html"]
    assert str((dest / "index.html").resolve()) in out[2]
    assert not (dest / "zh").exists()
    assert _local_links(dest / "index.html") == ["00_a.html"]  # 简体中文 and 01 · B: named
    assert "简体中文" in (dest / "index.html").read_text()
    assert main([*args, "zh"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in out[:2]] == ["zh/00_a.html", "zh/index.html"]
    assert str((dest / "zh" / "index.html").resolve()) in out[2]
    names = sorted(f.relative_to(dest).as_posix() for f in dest.rglob("*") if f.is_file())
    pages = ["00_a.html", "index.html", "zh/00_a.html", "zh/index.html"]
    assert names == sorted([*pages, *SITE_FILES])
    zh_index = dest / "zh" / "index.html"
    assert _local_links(zh_index) == ["../index.html", "00_a.html", "../00_a.html"]
    assert "01 · 乙" in zh_index.read_text() and "01 · B" in zh_index.read_text()
    assert [_html_lang(dest / p) for p in pages] == ["en", "en", "zh-CN", "zh-CN"]
    assert "全部课程" in (dest / "zh" / "00_a.html").read_text()  # its way back, in Chinese
    assert "all lessons" in (dest / "00_a.html").read_text()


def test_the_language_is_checked_before_any_work(tmp_path):
    dest = tmp_path / "new"
    with pytest.raises(ValueError, match=r"^--lang='fr' is not valid: expected one of en, zh"):
        export.export_site(dest, ["00"], lang="fr")
    assert not dest.exists()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--lessons", "99"], "--lessons='99' is not valid: expected a lesson number or name"),
        (["--lessons", "03", "tour"], "--lessons='tour' is not valid"),
        (["--timeout", "0"], "--timeout=0.0 is not valid: expected a number of seconds in [0.1,"),
        (["--lang", "fr"], "argument --lang: invalid choice: 'fr' (choose from "),
    ],
)
def test_bad_arguments_are_one_line_before_any_work(tmp_path, capsys, args, expected):
    dest = tmp_path / "new"
    assert main(["export", "--html", str(dest), *args]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and expected in err
    assert not dest.exists()


def test_the_unknown_lesson_error_names_the_lessons(capsys, tmp_path):
    assert main(["export", "--html", str(tmp_path), "--lessons", "99"]) == 2
    assert "lessons: 00, 01, 02, 03" in capsys.readouterr().err


def test_the_site_folder_must_be_a_writable_folder(tmp_path, capsys):
    a_file = tmp_path / "page.html"
    a_file.write_text("")
    for dest in (a_file, a_file / "site", ""):
        assert main(["export", "--html", str(dest), "--lessons", "00"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: --html=") and "a folder (existing or new)" in err
        assert len(err.strip().splitlines()) == 1
