"""One executed lesson as a static HTML page that needs no kernel and no network.

nbconvert's ``lab`` template drops the plotly mimetype (``application/vnd.plotly.v1+json``) and
loads require.js, MathJax, mermaid and the widget manager from CDNs. Here:

* every plotly output becomes a ``div`` + ``script`` (:func:`plotly.io.to_html` without plotly.js);
  plotly.js itself is one file of the site, :data:`PLOTLY_JS` beside the pages, loaded by a
  relative ``<script src>``, so figures and frame animations (play button, slider) work offline
  and the 4.8 MB of plotly.js are written once per site, not once per page; beside it, inline,
  the package's script that keeps pausing an animation out of the console (``animation_js.py``);
* the lab template's CSS (its stylesheet, light theme and code highlighting, 260 KB) is the
  site's :data:`LAB_CSS`, linked by every page (:func:`site_files` writes both);
* every widget view (quiz, exercise panel, explorer, progress bar) becomes a one-line note, then
  its kernel-free counterpart when the package offers one (see ``probe.py``), else what it
  showed when the lesson ran (its HTML texts and the outputs of its Output areas; not for quizzes,
  whose answers need the kernel);
* links between lessons (``06_dp_bucketing_overlap.ipynb``) point to the ``.html`` pages.

References: nbconvert templates (https://nbconvert.readthedocs.io/en/latest/customizing.html),
plotly offline HTML (https://plotly.com/python/interactive-html-export/), the widget state that
nbclient stores (https://ipywidgets.readthedocs.io/en/stable/embedding.html).
"""

from __future__ import annotations

import copy
import html
import re
from collections.abc import Iterable
from typing import Any

from ...core.i18n import N_, _, get_language
from .. import animation_js

PLOTLY = "application/vnd.plotly.v1+json"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
TEXT_MODELS = ("HTMLModel", "HTMLMathModel", "LabelModel")
NOTE_ONLY = ("quiz", "progress bar")  # a snapshot of these would mislead: answers need a kernel
# a page's <html lang>, by the language it is rendered in (BCP 47: Chinese as written in China)
HTML_LANG = {"en": "en", "zh": "zh-CN"}

PLOTLY_JS = "plotly.min.js"  # the site's one copy of plotly.js, beside the pages
LAB_CSS = "lab.css"  # the lab template's CSS, once per site
SITE_FILES = (PLOTLY_JS, LAB_CSS)  # what every page loads: see site_files

PAGE_TEMPLATE = """{%- extends 'index.html.j2' -%}
{%- block html_head_js_requirejs -%}
<script charset="utf-8" src="{{ resources.plotly_js_file }}"></script>
<script>{{ resources.animation_js }}</script>
{%- endblock html_head_js_requirejs -%}
{% block notebook_css %}<link rel="stylesheet" href="{{ resources.lab_css_file }}">{% endblock %}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{% block jupyter_widgets %}{% endblock jupyter_widgets %}
{% block extra_css %}<style>
.edu-nav { padding: 8px 0 4px; font-size: 14px; }
.edu-widget-note { border-left: 4px solid #1e88e5; background: #f3f8fd; padding: 6px 10px; }
</style>{% endblock extra_css %}
{%- block body_header -%}
{{ super() }}
{%- if resources.edu_nav %}
<nav class="edu-nav"><a href="index.html">&larr; {{ resources.edu_nav }}</a></nav>
{%- endif %}
{%- endblock body_header -%}
"""

# renders only the CSS that the lab template would inline in a page's head (see lab_css)
CSS_TEMPLATE = """{%- extends 'index.html.j2' -%}
{%- block header -%}
{% for css in resources.inlining.css -%}<style type="text/css">{{ css }}</style>{% endfor %}
{{ self.notebook_css() }}
{%- endblock header -%}
{%- block body_header -%}{%- endblock body_header -%}
{%- block body_loop -%}{%- endblock body_loop -%}
{%- block body_footer -%}{%- endblock body_footer -%}
{%- block footer -%}{%- endblock footer -%}
"""


def plotly_div(figure: dict[str, Any]) -> str:
    """A figure as a ``div`` and the script that draws it; plotly.js must be on the page."""
    import plotly.io as pio

    return pio.to_html(
        figure, include_plotlyjs=False, full_html=False, auto_play=False, validate=False
    )


def html_output(text: str) -> Any:
    import nbformat

    return nbformat.v4.new_output("display_data", data={"text/html": text})


def widget_note(kind: str, shown: str) -> Any:
    """The one line that stands for a widget, in the current language: its kind (a name of
    :data:`.probe.KINDS`, ``widget`` or ``progress bar``), what follows, how to use it."""
    name = html.escape(_(kind))
    lab = "<code>edu-parallel lab</code>"
    if kind == "progress bar":
        line = _("Progress bar: it moves while the lesson runs in JupyterLab.")
    elif shown == "counterpart":
        line = _(
            "Interactive widget ({kind}): below, the same run as an animation; open this lesson"
            " in JupyterLab ({lab}) to change it."
        )
    elif shown == "snapshot":
        line = _(
            "Interactive widget ({kind}): below, what it showed when the lesson ran; open this"
            " lesson in JupyterLab ({lab}) to use it."
        )
    else:
        line = _("Interactive widget ({kind}): open this lesson in JupyterLab ({lab}) to use it.")
    return html_output(f'<p class="edu-widget-note">{line.format(kind=name, lab=lab)}</p>')


def _children(state: dict[str, Any], model_id: str) -> list[str]:
    children = state.get(model_id, {}).get("state", {}).get("children", [])
    return [c.removeprefix("IPY_MODEL_") for c in children if isinstance(c, str)]


def _walk(state: dict[str, Any], model_id: str) -> Iterable[str]:
    yield model_id
    for child in _children(state, model_id):
        yield from _walk(state, child)


def fallback_kind(state: dict[str, Any], model_id: str) -> str:
    """A kind read from the widget state, for views whose owner the kernel could not name."""
    names = {state.get(m, {}).get("model_name", "") for m in _walk(state, model_id)}
    return N_("progress bar") if any(n.endswith("ProgressModel") for n in names) else N_("widget")


def snapshot(state: dict[str, Any], model_id: str) -> list[Any]:
    """What the view showed: its non-empty HTML texts and its Output areas' outputs, in order."""
    import nbformat

    outputs: list[Any] = []
    for m in _walk(state, model_id):
        model = state.get(m, {})
        values = model.get("state", {})
        if model.get("model_name") in TEXT_MODELS and str(values.get("value", "")).strip():
            outputs.append(html_output(str(values["value"])))
        elif model.get("model_name") == "OutputModel":
            outputs += [nbformat.from_dict(o) for o in values.get("outputs", [])]
    return outputs


def static_outputs(outputs: list[Any], state: dict[str, Any], views: dict[str, Any]) -> list[Any]:
    """``outputs`` with plotly figures as HTML and widget views replaced (see module doc)."""
    result: list[Any] = []
    for out in outputs:
        data = out.get("data", {})
        if PLOTLY in data:
            result.append(html_output(plotly_div(data[PLOTLY])))
        elif WIDGET_VIEW in data:
            model_id = data[WIDGET_VIEW].get("model_id", "")
            view = views.get(model_id, {})
            kind = view.get("kind") or fallback_kind(state, model_id)
            figures = view.get("figures", [])
            shown = snapshot(state, model_id) if kind not in NOTE_ONLY and not figures else []
            what = "counterpart" if figures else "snapshot" if shown else "note"
            result.append(widget_note(kind, what))
            result += [html_output(plotly_div(f)) for f in figures]
            result += static_outputs(shown, state, views)
        else:
            result.append(out)
    return result


def link_pages(source: str, stems: Iterable[str]) -> str:
    """Markdown/HTML links to ``NAME.ipynb`` (a lesson or the index) point to ``NAME.html``."""
    names = "|".join(re.escape(s) for s in sorted(stems, key=len, reverse=True))
    if not names:
        return source
    pattern = re.compile(rf"(\]\(\s*<?|href=[\"'])((?:\./)?(?:{names}))\.ipynb(?=[#)>\"'\s])")
    return pattern.sub(lambda m: f"{m.group(1)}{m.group(2)}.html", source)


def static_notebook(nb: Any, views: dict[str, Any], stems: Iterable[str]) -> Any:
    """A copy of the executed ``nb`` ready for HTML: no widget state, no kernel-only output."""
    page = copy.deepcopy(nb)
    widgets = page.metadata.pop("widgets", {})
    state = widgets.get(WIDGET_STATE, {}).get("state", {})
    stems = list(stems)
    for cell in page.cells:
        if cell.cell_type == "markdown":
            cell.source = link_pages(cell.source, stems)
        elif cell.cell_type == "code":
            cell.outputs = static_outputs(cell.get("outputs", []), state, views)
    return page


def _exporter(template: str, **options: Any) -> Any:
    """nbconvert's ``lab`` HTML exporter rendering ``template`` (a template of this module); its
    ``html_lang`` is the page's ``<html lang>`` (nbconvert's own ``language_code`` takes ISO 639-1
    codes only, ``zh`` but not ``zh-CN``)."""
    from jinja2 import DictLoader
    from nbconvert import HTMLExporter

    class PageExporter(HTMLExporter):
        html_lang = "en"

        def _init_resources(self, resources: Any) -> Any:
            resources = super()._init_resources(resources)
            resources["language_code"] = self.html_lang
            return resources

    templates = {"edu_parallel_page.html.j2": PAGE_TEMPLATE, "edu_parallel_css.j2": CSS_TEMPLATE}
    return PageExporter(
        template_name="lab",
        extra_loaders=[DictLoader(templates)],
        template_file=template,
        **options,
    )


def render_page(page: Any, title: str, root: str = "", nav: bool = True) -> str:
    """The page's HTML (nbconvert ``lab`` template), in the current language (its ``<html lang>``,
    :data:`HTML_LANG`, and its link back); it loads :data:`PLOTLY_JS` and :data:`LAB_CSS` from the
    site's folder (``root``: the way there, ``"../"`` from ``zh/``) and nothing from a network;
    ``nav``: a link back to the index (not on the index itself)."""
    from traitlets.config import Config

    # the code-highlighting CSS this preprocessor inlines is in LAB_CSS
    no_inline_css = Config({"CSSHTMLHeaderPreprocessor": {"enabled": False}})
    exporter = _exporter("edu_parallel_page.html.j2", config=no_inline_css, embed_images=True)
    exporter.html_lang = HTML_LANG[get_language()]
    resources = {
        "metadata": {"name": title},
        "plotly_js_file": root + PLOTLY_JS,
        "animation_js": animation_js.script(),  # pausing is no console error (animation_js.py)
        "lab_css_file": root + LAB_CSS,
        "edu_nav": _("all lessons") if nav else "",
    }
    body, _resources = exporter.from_notebook_node(page, resources=resources)
    return body


def lab_css() -> str:
    """The CSS the ``lab`` template inlines in each page: code highlighting, then its
    ``notebook_css`` block (stylesheet, light theme, print rules), as one stylesheet."""
    import nbformat

    styles, _resources = _exporter("edu_parallel_css.j2").from_notebook_node(
        nbformat.v4.new_notebook()
    )
    return re.sub(r"</?style[^>]*>", "", styles).strip() + "\n"


def site_files() -> dict[str, str]:
    """The files every page loads, by name: written once per site, beside the pages."""
    from plotly.offline import get_plotlyjs

    files = {PLOTLY_JS: get_plotlyjs(), LAB_CSS: lab_css()}
    return {name: files[name] for name in SITE_FILES}


def first_heading(nb: Any, default: str) -> str:
    """The text of the first markdown heading, e.g. ``Lesson 03: ring all-reduce``."""
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                match = re.match(r"\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$", line)
                if match:
                    return match.group(1)
    return default
