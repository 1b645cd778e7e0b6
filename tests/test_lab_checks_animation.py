"""The learner path's animation checks (``lab_animation.py``) catch what they look for, in Chromium.

Planted figures are drawn with the installed plotly package's plotly.js, with the package's play
controls: an animation whose frames empty its bars, one whose frames move only a cursor (plotly.js
erases the bars they leave out: lesson 10's Gantt), a panel with no marks at frame 0 (lesson
06's ZeRO-1) and a slider whose label sits under the pause button must be named; the same
figures made whole, with all their panels drawn and the slider clear of the buttons, must pass.
The real lessons are checked by ``test_learner_path.py``.
"""

from __future__ import annotations

import json

import pytest
from lab_animation import collect_page_errors, marks, play_problems
from lab_driver import chromium_browser

from edu_parallel.viz.controls import play_controls
from edu_parallel.viz.fit import whole_frames

pytestmark = [pytest.mark.browser, pytest.mark.timeout(180)]

FRAMES = 16
DRAW = """async spec => {
  const g = document.getElementById('fig');
  Plotly.purge(g);
  await Plotly.newPlot(g, spec);
  await new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)));
}"""


@pytest.fixture(scope="module")
def browser():
    with chromium_browser("the animation checks' planted pages") as browser:
        yield browser


def _new_page(browser, *scripts: str):
    """A page with the figure's ``div``, plotly.js and ``scripts``."""
    from plotly.offline import get_plotlyjs

    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_content('<html><body><div id="fig" style="width: 900px"></div></body></html>')
    for script in (get_plotlyjs(), *scripts):
        page.add_script_tag(content=script)
    return page


@pytest.fixture(scope="module")
def page(browser):
    page = _new_page(browser)
    yield page
    page.close()


def _draw(page, fig):
    page.evaluate(DRAW, json.loads(fig.to_json()))
    return page.query_selector("#fig")


def _bars(k: int, panels: int = 2, empty_panel: bool = False):
    import plotly.graph_objects as go

    return [
        go.Bar(
            x=["rank 0", "rank 1"],
            y=[0, 0] if (empty_panel and p == 1 and k == 0) else [1 + k, 2 + k],
            xaxis=f"x{p + 1 if p else ''}",
            yaxis=f"y{p + 1 if p else ''}",
        )
        for p in range(panels)
    ]


def _animation(frame_data, prefix="event: ", slider_x=None, redraw=True, panels=2, base=None):
    """Bars in ``panels`` side-by-side panels, FRAMES frames of ``frame_data(k)`` (a frame's
    data, and its ``traces``), and the package's play controls."""
    import plotly.graph_objects as go

    names = [str(k) for k in range(FRAMES)]
    fig = go.Figure(base if base is not None else _bars(0, panels))
    fig.frames = [go.Frame(name=n, **frame_data(k)) for k, n in enumerate(names)]
    domains = [(p / panels + 0.02, (p + 1) / panels - 0.02) for p in range(panels)]
    axes = {f"xaxis{p + 1 if p else ''}": dict(domain=d) for p, d in enumerate(domains)}
    axes |= {f"yaxis{p + 1 if p else ''}": dict(range=[0, 20]) for p in range(panels)}
    controls = play_controls(names, duration_ms=250, prefix=prefix, slider_x=slider_x, y=-0.15)
    controls["updatemenus"][0]["buttons"][0]["args"][1]["frame"]["redraw"] = redraw
    fig.update_layout(width=900, height=450, margin=dict(l=80, r=20, t=40, b=120), **axes)
    return fig.update_layout(**controls)


def test_a_whole_animation_with_every_panel_drawn_passes(page):
    plot = _draw(page, _animation(lambda k: dict(data=_bars(k))))
    assert marks(plot) == {"xy": {"barlayer": 2}, "x2y2": {"barlayer": 2}}
    problems, moved = play_problems(plot, samples=6, every_s=0.4)
    assert problems == [] and moved


@pytest.mark.parametrize("quiet", [False, True])
def test_pause_raises_a_page_error_unless_the_packages_script_is_on_the_page(browser, quiet):
    """plotly.js rejects an interrupted Play with no reason, uncaught: a page error at every
    pause. The lab's extension and the site's pages carry the script that marks it handled."""
    from edu_parallel.app.animation_js import script

    page = _new_page(browser, *([script()] if quiet else []))
    try:
        errors = collect_page_errors(page)
        problems, moved = play_problems(_draw(page, _animation(lambda k: dict(data=_bars(k)))))
        assert problems == [] and moved
        page.evaluate("() => { Promise.reject(new Error('a real error')); }")  # still reported
        page.wait_for_timeout(300)
        assert errors == ([] if quiet else ["undefined"]) + ["a real error"]
    finally:
        page.close()


def test_frames_that_empty_the_bars_are_named(page):
    import plotly.graph_objects as go

    def empty(k):
        return dict(data=[go.Bar(x=[], y=[]), go.Bar(x=[], y=[])])

    problems, moved = play_problems(_draw(page, _animation(empty)), samples=6, every_s=0.4)
    assert moved and len(problems) == 6, problems
    assert all("no bar in xy, bar in x2y2 drawn at sample" in p for p in problems)


def test_frames_that_move_only_a_cursor_blank_the_bars_until_made_whole(page):
    """lesson 10's Gantt: bars, and a cursor that the frames move (``traces=[cursor]``)."""
    import plotly.graph_objects as go

    base = [*_bars(0, panels=1), go.Scatter(x=[0, 0], y=[0, 20], mode="lines")]

    def cursor(k):
        return dict(data=[go.Scatter(x=[k / 16, k / 16])], traces=[1])

    fig = _animation(cursor, redraw=False, panels=1, base=base)
    problems, _moved = play_problems(_draw(page, fig), samples=4, every_s=0.4, name="gantt")
    assert problems and all(p.startswith("gantt: no bar in xy drawn at sample") for p in problems)
    whole = whole_frames(_animation(cursor, redraw=False, panels=1, base=base))
    assert play_problems(_draw(page, whole), samples=4, every_s=0.4) == ([], True)


def test_a_panel_with_no_marks_at_frame_0_is_named(page):
    base = _bars(0, empty_panel=True)
    fig = _animation(lambda k: dict(data=_bars(k, empty_panel=True)), base=base)
    plot = _draw(page, fig)
    assert marks(plot) == {"xy": {"barlayer": 2}, "x2y2": {"barlayer": 0}}
    problems, moved = play_problems(plot, samples=2, every_s=0.4, name="zero")
    assert problems == ["zero: panel x2y2 has no marks at frame 0"] and moved


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_slider_label_under_the_pause_button_is_named(page, lang):
    from edu_parallel.core.i18n import language

    with language(lang):
        covered = _animation(lambda k: dict(data=_bars(k)), slider_x=0.1)  # 80 px
        placed = _animation(lambda k: dict(data=_bars(k)))
    problems, _moved = play_problems(_draw(page, covered), samples=1, every_s=0.2)
    pause = "❚❚ pause" if lang == "en" else "❚❚ 暂停"
    assert problems == [f"figure: {pause} over event: 0"], problems
    assert play_problems(_draw(page, placed), samples=1, every_s=0.2)[0] == []
