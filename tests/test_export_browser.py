"""The exported site in a real Chromium, offline: the tour's page in English and in Chinese draws
every figure from the site's plotly.js, plays its animations, asks for nothing on a network and,
in Chinese, draws its Chinese in a font that covers it (``app/fonts.py``: ``fc-list :lang=zh``).

The site is the session's one export of lesson 00 (``conftest.tour_site``), both languages.
"""

import os
import re
import shutil
import subprocess
from pathlib import Path

import matplotlib
import pytest
from helpers import plotly_outputs
from lab_driver import CHROMIUM_FLAGS, chromium_browser, cjk_fontconfig, find_chromium

from edu_parallel.app import fonts
from edu_parallel.app.export.html import PLOTLY_JS

LANGS = ("en", "zh")
# the tour's text, in Chinese, that the font check reads: its title and its quiz's note
CJK_TEXT = ("h1", ".edu-widget-note")
_CJK = re.compile(r"[\u3000-\u303f\u3400-\u9fff\uff00-\uffef]")  # CJK and its punctuation


def page_of(tour_site, lang: str):
    """The tour's :class:`~edu_parallel.app.export.site.ExportedLesson` in ``lang``."""
    return next(
        p for p in tour_site[1] if p.name == ("zh/" if lang == "zh" else "") + "00_tour.ipynb"
    )


def cjk_families(env: dict[str, str]) -> set[str]:
    """The font families fontconfig says cover Chinese, under ``env`` (the browser's): the
    package's own check (``fonts.FC_LIST``), one family per name it lists."""
    out = subprocess.run(fonts.FC_LIST, env=env, capture_output=True, text=True, check=True)
    return {name.strip() for line in out.stdout.splitlines() for name in line.split(",")}


def latin_fontconfig(folder: Path) -> dict[str, str]:
    """Environment for a Chromium whose only fonts are matplotlib's DejaVu: no CJK font at all."""
    ttf = Path(matplotlib.get_data_path()) / "fonts" / "ttf"
    conf = folder / "latin.conf"
    conf.write_text(
        '<?xml version="1.0"?>\n<fontconfig>\n'
        f"  <dir>{ttf}</dir>\n  <cachedir>{folder / 'fontcache'}</cachedir>\n</fontconfig>\n"
    )
    return {**os.environ, "FONTCONFIG_FILE": str(conf)}


@pytest.fixture(scope="module")
def font_env(tmp_path_factory):
    """The browser's fonts: this machine's and the package's CJK font (mplfonts), so that the
    Chinese draws in CI too; fontconfig must then list a font for Chinese (the lab's check)."""
    env = cjk_fontconfig(tmp_path_factory.mktemp("fonts"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FONTCONFIG_FILE", env["FONTCONFIG_FILE"])
        found = fonts.has_cjk_font()
    if found is None:
        pytest.skip("no fc-list here: the Chinese pages' font check needs fontconfig")
    assert found, "fontconfig lists no font for Chinese, even with the package's"
    return env


@pytest.fixture(scope="module")
def chromium(font_env):
    with chromium_browser("the site's browser test", env=font_env) as browser:
        yield browser


DRAWN = """() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(() => done({
    plotly: typeof window.Plotly,
    lang: document.documentElement.lang,
    labTheme: getComputedStyle(document.body).getPropertyValue("--jp-layout-color0").trim(),
    figures: [...document.querySelectorAll(".plotly-graph-div")].map(div => ({
        drawn: div.querySelector(".main-svg") !== null && (div._fullData || []).length > 0,
        frames: ((div._transitionData || {})._frames || []).length,
    })),
}))))"""
OWN_TEXT = (
    """el => [...el.childNodes].filter(n => n.nodeType === 3).map(n => n.textContent).join("")"""
)


def glyph_fonts(tab, selector: str) -> tuple[str, dict[str, int]]:
    """The text of the first element ``selector`` finds (its own text nodes) and the glyphs
    Chromium drew it with, by font family (DevTools' ``CSS.getPlatformFontsForNode``)."""
    cdp = tab.context.new_cdp_session(tab)
    try:
        cdp.send("DOM.enable")
        cdp.send("CSS.enable")
        root = cdp.send("DOM.getDocument")["root"]["nodeId"]
        node = cdp.send("DOM.querySelector", {"nodeId": root, "selector": selector})["nodeId"]
        assert node, f"no {selector} on the page"
        used = cdp.send("CSS.getPlatformFontsForNode", {"nodeId": node})["fonts"]
    finally:
        cdp.detach()
    return tab.eval_on_selector(selector, OWN_TEXT), {
        f["familyName"]: f["glyphCount"] for f in used
    }


def undrawn_chinese(tab, families: set[str]) -> list[str]:
    """For each of :data:`CJK_TEXT`: a line when its Chinese characters outnumber the glyphs that
    a font covering Chinese drew (the others are empty boxes)."""
    problems = []
    for selector in CJK_TEXT:
        text, used = glyph_fonts(tab, selector)
        chinese = len(_CJK.findall(text))
        covered = sum(n for family, n in used.items() if family in families)
        if chinese == 0 or covered < chinese:
            problems.append(f"{selector}: {chinese} Chinese characters, {covered} drawn ({used})")
    return problems


def _open_offline(browser, page: Path, fonts_of: set[str] | None = None):
    """``page`` opened from disk with every network request refused: what :data:`DRAWN` reads,
    the page's script errors, the network addresses it asked for and, with ``fonts_of`` (the
    families that cover Chinese), :func:`undrawn_chinese`."""
    tab = browser.new_page()
    errors: list[str] = []
    asked: list[str] = []
    tab.on("pageerror", lambda error: errors.append(str(error)))

    def refuse(route):
        asked.append(route.request.url)
        route.abort()

    tab.route(re.compile(r"^(https?|wss?)://"), refuse)
    try:
        tab.goto(page.resolve().as_uri(), wait_until="load")
        seen = tab.evaluate(DRAWN)
        undrawn = undrawn_chinese(tab, fonts_of) if fonts_of is not None else []
        return seen, errors, asked, undrawn
    finally:
        tab.close()


@pytest.mark.browser
@pytest.mark.multiprocess
@pytest.mark.parametrize("lang", LANGS)
def test_the_page_draws_offline_in_chromium_from_the_sites_plotly_js(
    tour_site, chromium, font_env, tmp_path, lang
):
    dest = tour_site[0]
    lesson = page_of(tour_site, lang)
    families = cjk_families(font_env) if lang == "zh" else None
    seen, errors, asked, undrawn = _open_offline(chromium, lesson.page, families)
    assert (errors, asked, undrawn) == ([], [], [])
    assert seen["lang"] == {"en": "en", "zh": "zh-CN"}[lang]
    assert seen["plotly"] == "object" and seen["labTheme"] != ""
    animations = [f for f in plotly_outputs(lesson.executed) if f.get("frames")]
    assert len(seen["figures"]) == len(plotly_outputs(lesson.executed)) > 0
    assert all(f["drawn"] for f in seen["figures"])
    assert sorted(f["frames"] for f in seen["figures"] if f["frames"]) == sorted(
        len(a["frames"]) for a in animations
    )
    # the same page without plotly.min.js beside it, or with a wrong path to it, draws nothing:
    # the checks above fail for a page that lost its plotly.js
    where = lesson.page.relative_to(dest)
    alone = tmp_path / "alone" / where
    alone.parent.mkdir(parents=True)
    shutil.copy(lesson.page, alone)
    wrong = tmp_path / "wrong" / where
    shutil.copytree(dest, tmp_path / "wrong")
    text = lesson.page.read_text()
    src = "../" * (len(where.parts) - 1) + PLOTLY_JS
    wrong.write_text(text.replace(f'src="{src}"', f'src="js/{PLOTLY_JS}"'))
    assert wrong.read_text() != text
    for broken in (alone, wrong):
        seen, errors, _, _ = _open_offline(chromium, broken)
        assert seen["plotly"] == "undefined" and not any(f["drawn"] for f in seen["figures"])
        assert any("Plotly is not defined" in e for e in errors)


@pytest.mark.browser
@pytest.mark.multiprocess
def test_without_a_cjk_font_the_chinese_page_is_found_undrawn(
    tour_site, chromium, font_env, tmp_path
):
    """The font check can fail: a Chromium with no font for Chinese (matplotlib's DejaVu only)
    draws the tour's Chinese as empty boxes, fontconfig lists no font for it, and the check names
    the title and the note (their glyphs are not from a family that covers Chinese)."""
    env = latin_fontconfig(tmp_path)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FONTCONFIG_FILE", env["FONTCONFIG_FILE"])
        found = fonts.has_cjk_font()
    if found is None:
        pytest.skip("no fc-list here: the Chinese pages' font check needs fontconfig")
    assert found is False and cjk_families(env) == set()
    browser = chromium.browser_type.launch(
        executable_path=find_chromium(), args=CHROMIUM_FLAGS, env=env
    )  # beside the module's, in the same Playwright
    try:
        zh = page_of(tour_site, "zh").page
        *_, undrawn = _open_offline(browser, zh, cjk_families(font_env))
    finally:
        browser.close()
    assert [line.split(":")[0] for line in undrawn] == list(CJK_TEXT), undrawn


@pytest.mark.browser
@pytest.mark.multiprocess
@pytest.mark.parametrize("lang", LANGS)
def test_the_pages_animations_play_and_pause_with_no_page_error(tour_site, chromium, lang):
    """Play, sampled while it runs, then pause, on every animation of the page from disk: its
    marks stay drawn (lab_animation.py) and pausing raises no page error (app/animation_js.py)."""
    from lab_animation import collect_page_errors, play_problems

    tab = chromium.new_page(viewport={"width": 1400, "height": 1000})
    try:
        errors = collect_page_errors(tab)
        tab.goto(page_of(tour_site, lang).page.resolve().as_uri(), wait_until="load")
        plots = [
            p
            for p in tab.query_selector_all(".js-plotly-plot")
            if p.evaluate("g => ((g._transitionData || {})._frames || []).length > 1")
        ]
        assert plots, "the tour page has no animation to play"
        for plot in plots:
            assert play_problems(plot, samples=4, every_s=0.4) == ([], True)
        assert errors == []
    finally:
        tab.close()
