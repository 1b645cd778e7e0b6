"""``edu-parallel export --html``: a static site whose figures and animations play offline."""

from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest
from plotly.offline import get_plotlyjs

from edu_parallel.app.cli import main
from edu_parallel.app.export import site as export
from edu_parallel.app.export.html import PLOTLY, WIDGET_VIEW, link_pages, static_outputs
from edu_parallel.app.lab import lessons_source


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


def plotly_outputs(nb) -> list[dict]:
    return [
        o["data"][PLOTLY]
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.outputs
        if PLOTLY in o.get("data", {})
    ]


def widget_outputs(nb) -> list[dict]:
    return [
        o
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.outputs
        if WIDGET_VIEW in o.get("data", {})
    ]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    dest = tmp_path_factory.mktemp("site") / "new" / "site"  # created by the export
    lines: list[str] = []
    pages = export.export_site(dest, ["00"], timeout=120, progress=lines.append)
    return dest, pages, lines


@pytest.mark.multiprocess
def test_the_tour_page_has_every_figure_and_plays_offline(site):
    dest, pages, lines = site
    assert [p.name for p in pages] == ["00_tour.ipynb"]
    lesson = pages[0]
    assert len(lines) == 1 and lines[0].startswith("00_tour.html") and " s " in lines[0]
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
    assert text.count(get_plotlyjs()) == 1
    assert network_refs(text) == []
    without_js = text.replace(get_plotlyjs(), "")
    for cdn in ("cdnjs.cloudflare.com", "unpkg.com", "cdn.jsdelivr.net"):
        assert cdn not in without_js


@pytest.mark.multiprocess
def test_widgets_become_notes_and_the_index_links_resolve(site):
    dest, pages, _ = site
    lesson = pages[0]
    text = lesson.page.read_text()
    widgets = widget_outputs(lesson.executed)
    assert len(widgets) > 0
    assert text.count('class="edu-widget-note"') == len(widgets)
    assert "Interactive widget (quiz): open this lesson in JupyterLab" in text
    assert "VBox(" not in text and WIDGET_VIEW not in text
    assert f"<title>{lesson.title}</title>" in text and lesson.title.startswith("00")
    index = (dest / "index.html").read_text()
    links = [a["href"] for tag, a in Tags(index).tags if tag == "a"]
    assert links == ["00_tour.html"]
    assert all((dest / href).is_file() for href in links)
    hrefs = [a.get("href", "") for tag, a in Tags(text).tags if tag == "a"]
    assert hrefs[0] == "index.html"  # the page's way back
    local = [h for h in hrefs if not h.startswith(("#", "http://", "https://"))]
    course = {p.stem for p in lessons_source().glob("*.ipynb")}
    assert local and all(Path(h).suffix == ".html" and Path(h).stem in course for h in local)
    assert network_refs(index) == []


def test_links_between_lessons_point_to_the_pages():
    stems = ["03_ring_allreduce", "05_dp_bucketing_overlap", "index"]
    text = (
        "see [bucketing](05_dp_bucketing_overlap.ipynb#overlap), [the ring](./03_ring_allreduce"
        ".ipynb), <a href='index.ipynb'>the index</a>, [a gist](https://x.org/05_dp_bucketing"
        "_overlap.ipynb) and [mine](my_notes.ipynb)"
    )
    assert link_pages(text, stems) == (
        "see [bucketing](05_dp_bucketing_overlap.html#overlap), [the ring](./03_ring_allreduce"
        ".html), <a href='index.html'>the index</a>, [a gist](https://x.org/05_dp_bucketing"
        "_overlap.ipynb) and [mine](my_notes.ipynb)"
    )


def _model(name: str, **state) -> dict:
    return {"model_name": name, "model_module": "@jupyter-widgets/controls", "state": state}


def test_a_widget_without_a_counterpart_keeps_what_it_showed():
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
    views = {"box": {"kind": "exercise panel", "figures": []}}
    html = [o["data"]["text/html"] for o in static_outputs(outputs, state, views)]
    assert len(html) == 4
    assert html[0].count("Interactive widget (exercise panel): below, what it showed") == 1
    assert html[1] == "<b>FAIL exercise 03</b>"
    assert 'class="plotly-graph-div"' in html[2] and '"y":[1,2]' in html[2]
    assert "Progress bar" in html[3]


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
    assert sorted(p.name for p in dest.iterdir()) == ["00_ok.html", "index.html"]
    assert 'href="01_bad.html"' in (dest / "00_ok.html").read_text()
    assert "00 · Fine" in (dest / "index.html").read_text()
    assert sorted(p.name for p in lessons.iterdir()) == ["00_ok.ipynb", "01_bad.ipynb"]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--lessons", "99"], "--lessons='99' is not valid: expected a lesson number or name"),
        (["--lessons", "03", "tour"], "--lessons='tour' is not valid"),
        (["--timeout", "0"], "--timeout=0.0 is not valid: expected a number of seconds > 0"),
    ],
)
def test_bad_arguments_are_one_line_before_any_work(tmp_path, capsys, args, expected):
    dest = tmp_path / "new"
    assert main(["export", "--html", str(dest), *args]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and expected in err
    assert not dest.exists()


def test_the_unknown_lesson_error_names_the_lessons(capsys, tmp_path):
    assert main(["export", "--html", str(tmp_path), "--lessons", "14"]) == 2
    assert "lessons: 00, 01, 02, 03" in capsys.readouterr().err


def test_the_site_folder_must_be_a_writable_folder(tmp_path, capsys):
    a_file = tmp_path / "page.html"
    a_file.write_text("")
    for dest in (a_file, a_file / "site", ""):
        assert main(["export", "--html", str(dest), "--lessons", "00"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: --html=") and "a folder (existing or new)" in err
        assert len(err.strip().splitlines()) == 1
