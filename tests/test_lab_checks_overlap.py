"""The learner path's overlap check (``lab_overlap.py``) catches what it looks for, in Chromium.

Planted pages draw real plotly figures with the plotly.js the package ships (the lab's renderer
draws the same SVG): two annotations on top of each other, a subtitle over a subplot's title,
bar text under an annotation and a button over the slider's label must each be named, with the
figure and both texts; the same figures with their labels apart must pass. The real lessons are
checked by ``test_learner_path.py``.
"""

from __future__ import annotations

import json

import plotly.graph_objects as go
import pytest
from lab_driver import chromium_browser
from lab_overlap import overlapping_labels
from plotly.offline import get_plotlyjs

pytestmark = [pytest.mark.browser, pytest.mark.timeout(120)]

_PAGE = """<!doctype html><html><head><meta charset="utf-8"><script>{js}</script></head>
<body><div id="cell"><div id="plot"></div></div></body></html>"""


@pytest.fixture(scope="module")
def page():
    with chromium_browser("the overlap check's planted pages") as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_content(_PAGE.format(js=get_plotlyjs()), wait_until="load")
        yield page
        page.close()


def _draw(page, fig: go.Figure) -> list[str]:
    spec = json.loads(fig.to_json())
    page.evaluate(
        "async s => { const d = document.getElementById('plot'); Plotly.purge(d);"
        " await Plotly.newPlot(d, s.data, s.layout, {displayModeBar: false}); }",
        spec,
    )
    return overlapping_labels(page.query_selector("#cell"))


def _bars(**layout) -> go.Figure:
    fig = go.Figure(go.Bar(x=["e0", "e1", "e7"], y=[4, 9, 20], text=["4", "9", "20"]))
    fig.update_layout(width=700, height=400, title="expert load", **layout)
    return fig


def test_two_annotations_on_one_spot_are_named(page):
    fig = _bars()
    fig.add_annotation(x="e7", y=16, text="mean load 16", showarrow=False)
    fig.add_annotation(x="e7", y=16.5, text="N x capacity = 20", showarrow=False)
    found = _draw(page, fig)
    assert len(found) == 1, found
    assert "'mean load 16'" in found[0] and "'N x capacity = 20'" in found[0], found
    assert 'figure 1 "expert load"' in found[0], found


def test_labels_apart_pass(page):
    fig = _bars(margin=dict(r=160))
    fig.add_annotation(
        x=1.02, xref="paper", y=16, text="mean load 16", showarrow=False, xanchor="left"
    )
    fig.add_annotation(
        x=1.02, xref="paper", y=20, text="N x capacity = 20", showarrow=False, xanchor="left"
    )
    fig.update_layout(xaxis_title="expert", yaxis_title="assignments")
    assert _draw(page, fig) == []


def test_an_annotation_on_a_bars_text_is_named(page):
    fig = _bars()
    fig.update_traces(textposition="inside")
    fig.add_annotation(x="e7", y=19, text="▼ bucket issued", showarrow=False)
    found = _draw(page, fig)
    assert any("bar text '20'" in f and "'▼ bucket issued'" in f for f in found), found


def test_a_marker_on_a_points_number_is_named(page):
    """Lesson 06's sweep: the star of the default drawn over the number of buckets."""
    fig = go.Figure(
        go.Scatter(
            x=[1, 2, 3],
            y=[3, 2, 2],
            text=["8", "2", "1"],
            mode="markers+text",
            textposition="top center",
        )
    )
    fig.add_scatter(x=[2], y=[2.04], mode="markers", marker=dict(symbol="star", size=18))
    fig.update_layout(width=700, height=400, title="sweep")
    found = _draw(page, fig)
    assert any("the marker covers point text '2'" in f for f in found), found
    fig.update_traces(selector=1, y=[2])
    fig.update_traces(selector=0, text=["8", "", "1"])
    fig.update_traces(selector=1, mode="markers+text", text=["2"], textposition="top center")
    assert _draw(page, fig) == []


def test_a_traces_text_on_its_own_markers_passes(page):
    """A grid's cell or a mesh node's name is text drawn on its own marker, by design."""
    fig = go.Figure(
        go.Scatter(
            x=[0, 1, 2],
            y=[0, 0, 0],
            text=["r0", "r1", "r2"],
            mode="markers+text",
            textposition="middle center",
            marker=dict(size=30, symbol="square"),
        )
    )
    fig.update_layout(width=700, height=400, title="mesh")
    assert _draw(page, fig) == []
    fig.add_scatter(x=[1], y=[0], mode="markers", marker=dict(size=30, symbol="circle"))
    assert [f for f in _draw(page, fig) if "point text 'r1'" in f], "another trace's marker"


def test_a_subtitle_over_a_panels_title_is_named(page):
    """Lesson 13's case: the figure's subtitle drawn where the first subplot's title sits."""
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=2, subplot_titles=["NVLink 4", "25 Gb Ethernet"])
    fig.add_bar(x=[1, 2], y=[1, 2], row=1, col=1)
    fig.add_bar(x=[1, 2], y=[2, 1], row=1, col=2)
    fig.update_layout(
        width=800,
        height=400,
        margin=dict(t=60),
        title=dict(
            text="When does compression pay?",
            subtitle=dict(text="speed-up per link"),
            y=0.87,
            yanchor="top",
        ),
    )
    found = _draw(page, fig)
    assert any("annotation 'NVLink 4' overlaps title '" in f for f in found), found


def test_a_button_over_the_sliders_label_is_named(page):
    """The pause button over the slider's "t =" label (issue 36's 06 and zh/03)."""
    frames = [go.Frame(name=str(k), data=[go.Bar(y=[k, 1])]) for k in range(3)]
    steps = [dict(label=str(k), method="animate", args=[[str(k)]]) for k in range(3)]
    fig = go.Figure(go.Bar(y=[0, 1]), frames=frames)
    buttons = [dict(label="▶ Play", method="animate", args=[None])]
    fig.update_layout(
        width=700,
        height=400,
        title="ring",
        updatemenus=[
            dict(
                type="buttons",
                buttons=buttons,
                x=0.0,
                y=-0.08,
                xanchor="left",
                yanchor="top",
                direction="left",
            )
        ],
        sliders=[dict(steps=steps, x=0.0, y=-0.05, len=1.0, currentvalue=dict(prefix="t = "))],
    )
    found = _draw(page, fig)
    assert any("the button '▶ Play' covers slider 't = 0'" in f for f in found), found
    fig.update_layout(updatemenus=[dict(x=0.0, y=1.2, yanchor="bottom")], margin=dict(t=120))
    assert _draw(page, fig) == []


def test_a_title_on_the_figures_left_edge_is_named_and_the_styled_one_passes(page):
    """Lesson 06's subtitle read "ll-reduce hidden": a left-aligned title at the container's
    x = 0 and no pad starts on the figure's edge; viz/style.title_layout pads it in."""
    from edu_parallel.viz.style import title_layout

    edge = _bars()
    edge.update_layout(
        title=dict(text="streams", x=0, xanchor="left", subtitle=dict(text="all-reduce hidden"))
    )
    found = _draw(page, edge)
    assert any("title 'all-reduce hidden' is cut at the figure's left edge" in f for f in found)
    styled = _bars()
    styled.update_layout(title=title_layout("streams", "all-reduce hidden"), margin=dict(t=90))
    assert _draw(page, styled) == []
