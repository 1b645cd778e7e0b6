"""What a Chinese learner reads in a lesson's outputs: no English phrase (issue 31's scan).

Each Chinese lesson runs once (``conftest.py``): in the browser pass, which reads the notebook as
the lab saves it (:func:`english_in_notebook`) and the text its widgets show on the page
(:func:`english_in_widgets`), or under nbval (``conftest.ZhOutputScan``). Every
output of every cell is read as the learner reads it, and a run of three or more English words
(``helpers.english_phrases``) fails the lesson, naming the cell and the phrase:

- text: stdout, stderr and ``text/plain``; ``text/html`` without its tags and style sheet;
- plotly figures, and each frame of an animated one: the title, the axis titles, the annotations,
  the legend's names, the text drawn on or beside the marks (``text``), what hovering shows
  (``hovertemplate`` without its ``%{...}`` fields, ``hovertext``, string ``customdata``), and the
  labels of the Play/pause buttons and of the slider;
- matplotlib figures (PNG): every visible text artist, which ``viz.figure`` keeps in the PNG's
  output metadata (``TEXT_KEY``).

A label a code cell prints goes through ``_()`` (``app/i18n_catalog.py``), or comes from the
package, which translates its own. What is code stays as written: a cell that prints source
(``inspect.getsource``), a trace's records, a tensor's shape (``X (s, h)``), a product of
symbols (``dp x tp x pp``), a tuple of them (``(pp, dp, tp)``), a paper cited by its authors
(``Huang et al.``), and the names in :data:`ALLOW`. Another program's own words, quoted as it
prints them and marked ``lang="en"`` (HTML's mark of a passage in another language than the
page's: ``viz.quoted``, torch's error messages in lesson 16), are English on purpose: a Chinese
learner reads torch's messages in English on a cluster too, under a caption that says so.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from typing import Any

from helpers import SHOWN_NAMES, english_phrases

from edu_parallel.viz.figure import TEXT_KEY

ALLOW = (
    *SHOWN_NAMES,
    # the names lesson 07's code gives its runs, the keys the learner indexes them by
    "FSDP per layer",
    "FSDP whole model",
    "FSDP per layer, kept",
    "FSDP per layer,",
    # the mesh coordinates' names, as torch's DeviceMesh has them (lesson 12)
    "rank (pp, dp, tp)",
    # a straggler setting's name (AsyncConfig.straggler_label), the key lesson 14 indexes runs by
    "random worker, exponential",
    # an organisation's own name, the vendor column of lesson 15's libraries table
    "Intel (UXL Foundation)",
)
_TAGS = re.compile(r"<[^>]+>")
# a tensor and its shape, as the figures label them: X (s, h), dY (s, ffn/t)
# a paper cited by its authors (Huang et al. 2019), a preset's source in its repr (source='...')
_CITED = re.compile(r"\b[A-Z][A-Za-z-]+ et al\.|\bsource='[^']*'")
# a product of symbols (dp x tp x pp, mb x M) and a trace's record (r0 s0 router ...)
_PRODUCT = re.compile(r"[\w()]+(?: x [\w()]+)+")
_TRACE_LINE = re.compile(r"^\s*r\d+ s\d+ .*$", re.MULTILINE)
_SHAPE = re.compile(r"\b[A-Za-z]{1,3}\s+\((?:[a-z0-9/]+,\s*)+[a-z0-9/]+\)")
_TUPLE = re.compile(r"\((?:[a-z]{1,3},\s*)+[a-z]{1,3}\)")  # a tuple of symbols: (pp, dp, tp)
_STYLE = re.compile(r"<style.*?</style>", re.DOTALL)
_FOREIGN = re.compile(r'<(\w+)\b[^>]*\blang="en"[^>]*>.*?</\1>', re.DOTALL)  # quoted, verbatim


def _text(value: Any) -> str:
    return value.get("text", "") if isinstance(value, dict) else str(value or "")


_FIELD = re.compile(r"%\{[^}]*\}|<extra>.*?</extra>")  # a hovertemplate's fields, and its extra


def _strings(value: Any) -> Iterator[str]:
    """Each string in ``value``: a string, or a list of them (nested, as customdata can be)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _strings(v)


def _layout_texts(layout: dict) -> Iterator[tuple[str, str]]:
    yield "title", _text(layout.get("title"))
    for key, axis in layout.items():
        if key.startswith(("xaxis", "yaxis")) and isinstance(axis, dict):
            yield key, _text(axis.get("title"))
    for note in layout.get("annotations") or []:
        yield "annotation", note.get("text", "")
    for menu in layout.get("updatemenus") or []:
        for button in menu.get("buttons") or []:
            yield "button", button.get("label", "")
    for slider in layout.get("sliders") or []:
        yield "slider", _text((slider.get("currentvalue") or {}).get("prefix"))
        for step in slider.get("steps") or []:
            yield "slider", str(step.get("label", ""))


def _trace_texts(trace: dict) -> Iterator[tuple[str, str]]:
    if trace.get("showlegend", True) is not False and trace.get("name"):
        yield "legend", trace["name"]
    for key in ("text", "hovertext"):
        for text in dict.fromkeys(_strings(trace.get(key))):
            yield key, text
    template = trace.get("hovertemplate")
    for text in dict.fromkeys(_strings(template)):
        yield "hover", _FIELD.sub(" ", text)
    if template and "customdata" in " ".join(_strings(template)):
        for text in dict.fromkeys(_strings(trace.get("customdata"))):
            yield "hover", text


def figure_texts(fig: dict) -> Iterator[tuple[str, str]]:
    """``(what, text)`` for every piece of a plotly figure's JSON that a learner reads."""
    yield from _layout_texts(fig.get("layout", {}))
    for trace in fig.get("data", []):
        yield from _trace_texts(trace)
    for frame in fig.get("frames") or []:
        yield from _layout_texts(frame.get("layout") or {})
        for trace in frame.get("data") or []:
            yield from _trace_texts(trace)


def _joined(value: Any) -> Any:
    """A text as one string: a saved notebook keeps it as a list of lines (nbformat's
    multiline strings), a kernel's message as one string."""
    return "".join(value) if isinstance(value, list) else value


def output_texts(out: dict) -> Iterator[tuple[str, str]]:
    """``(what, text)`` for every piece of one output that a learner reads."""
    if out.get("output_type") == "stream":
        yield out.get("name", "stream"), _joined(out.get("text", ""))
        return
    data = {mime: _joined(value) for mime, value in out.get("data", {}).items()}
    fig = data.get("application/vnd.plotly.v1+json")
    if fig is not None:
        yield from figure_texts(fig)
    elif "text/html" in data:
        page = _FOREIGN.sub(" ", _STYLE.sub(" ", data["text/html"]))
        yield "html", html.unescape(_TAGS.sub(" ", page))
    elif "image/png" in data:
        for text in (out.get("metadata") or {}).get("image/png", {}).get(TEXT_KEY, []):
            yield "png", text
    elif "text/plain" in data:
        yield "text/plain", data["text/plain"]


def english_in_outputs(source: str, outputs: list[dict]) -> list[str]:
    """``what: phrase`` for each English phrase in the outputs of a cell with ``source``."""
    if "inspect.getsource" in source:
        return []  # the cell shows code, which is written in English
    found = []
    for out in outputs:
        for what, text in output_texts(out):
            plain = re.sub(r"<br>|</?[bi]>", " ", text)
            for symbols in (_TRACE_LINE, _SHAPE, _TUPLE, _PRODUCT, _CITED):
                plain = symbols.sub(" ", plain)
            found += [f"{what}: {p}" for p in english_phrases(plain, allow=ALLOW)]
    return list(dict.fromkeys(found))  # a label repeated in every frame is named once


def english_in_notebook(nb: dict) -> list[str]:
    """``Cell N: what: phrase`` for each English phrase in the outputs of a notebook as JSON
    (``nbformat``'s schema; the browser pass reads it as JupyterLab saved it), N counted from 0
    over the code cells, as nbval names them (``notebooks/zh/NN.ipynb::Cell N``)."""
    code = [c for c in nb.get("cells", []) if c.get("cell_type") == "code"]
    found = []
    for n, cell in enumerate(code):
        source = "".join(cell.get("source", ""))
        found += [f"Cell {n}: {f}" for f in english_in_outputs(source, cell.get("outputs", []))]
    return found


def english_in_widgets(texts: list[str]) -> list[str]:
    """``widget N: phrase`` for each English phrase in the text the lesson's widgets show on the
    page (read by the browser pass: a widget's labels and values live in the kernel and the page,
    not in the saved notebook), with the same exceptions as a cell's text output."""
    found = []
    for n, text in enumerate(texts):
        stream = {"output_type": "stream", "name": f"widget {n}", "text": text}
        found += english_in_outputs("", [stream])
    return found
