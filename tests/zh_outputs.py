"""What a Chinese learner reads in a lesson's outputs: no English phrase (issue 31's scan).

Each Chinese lesson runs under nbval (``conftest.py``); for the lessons of :data:`SCANNED`, every
output of every cell is read as the learner reads it, and a run of three or more English words
(``helpers.english_phrases``) fails the cell, naming the lesson, the cell and the phrase:

- text: stdout, stderr and ``text/plain``; ``text/html`` without its tags and style sheet;
- plotly figures: the title, the axis titles, the annotations and the legend's names.

A label a code cell prints goes through ``_()`` (``app/i18n_catalog.py``), or comes from the
package, which translates its own. What is code stays as written: a cell that prints source
(``inspect.getsource``), a trace's records, a tensor's shape (``X (s, h)``), a product of
symbols (``dp x tp x pp``), a paper cited by its authors (``Huang et al.``), and the names in
:data:`ALLOW`.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from typing import Any

from helpers import english_phrases

# the Chinese lessons whose outputs are scanned: all but 13, whose tables quote their sources' own
# titles (datasheets, papers, projects) in English
SCANNED = {
    "00_tour",
    "01_parallelism_map",
    "02_collectives",
    "03_ring_allreduce",
    "04_ring_tree_ps",
    "05_dp_bucketing_overlap",
    "06_zero_fsdp",
    "07_tensor_parallel",
    "08_expert_parallel",
    "09_pipeline",
    "10_3d_planner",
    "11_compression",
    "12_sync_async",
}

ALLOW = (
    "size count type",  # nccl-tests' own column names, as its tables print them (format_bench)
    # the names lesson 06's code gives its runs, the keys the learner indexes them by
    "FSDP per layer",
    "FSDP whole model",
    "FSDP per layer, kept",
    "FSDP per layer,",
    # the mesh coordinates' names, as torch's DeviceMesh has them (lesson 10)
    "rank pp dp tp",
    "rank (pp, dp, tp)",
    # a straggler setting's name (AsyncConfig.straggler_label), the key lesson 12 indexes runs by
    "random worker, exponential",
)
_TAGS = re.compile(r"<[^>]+>")
# a tensor and its shape, as the figures label them: X (s, h), dY (s, ffn/t)
# a paper cited by its authors (Huang et al. 2019), a preset's source in its repr (source='...')
_CITED = re.compile(r"\b[A-Z][A-Za-z-]+ et al\.|\bsource='[^']*'")
# a product of symbols (dp x tp x pp, mb x M) and a trace's record (r0 s0 router ...)
_PRODUCT = re.compile(r"[\w()]+(?: x [\w()]+)+")
_TRACE_LINE = re.compile(r"^\s*r\d+ s\d+ .*$", re.MULTILINE)
_SHAPE = re.compile(r"\b[A-Za-z]{1,3}\s+\((?:[a-z0-9/]+,\s*)+[a-z0-9/]+\)")
_STYLE = re.compile(r"<style.*?</style>", re.DOTALL)


def _text(value: Any) -> str:
    return value.get("text", "") if isinstance(value, dict) else str(value or "")


def output_texts(out: dict) -> Iterator[tuple[str, str]]:
    """``(what, text)`` for every piece of one output that a learner reads."""
    if out.get("output_type") == "stream":
        yield out.get("name", "stream"), out.get("text", "")
        return
    data = out.get("data", {})
    fig = data.get("application/vnd.plotly.v1+json")
    if fig is not None:
        layout = fig.get("layout", {})
        yield "title", _text(layout.get("title"))
        for key, axis in layout.items():
            if key.startswith(("xaxis", "yaxis")) and isinstance(axis, dict):
                yield key, _text(axis.get("title"))
        for note in layout.get("annotations") or []:
            yield "annotation", note.get("text", "")
        for trace in fig.get("data", []):
            if trace.get("showlegend", True) is not False and trace.get("name"):
                yield "legend", trace["name"]
    elif "text/html" in data:
        yield "html", html.unescape(_TAGS.sub(" ", _STYLE.sub(" ", data["text/html"])))
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
            for symbols in (_TRACE_LINE, _SHAPE, _PRODUCT, _CITED):
                plain = symbols.sub(" ", plain)
            found += [f"{what}: {p}" for p in english_phrases(plain, allow=ALLOW)]
    return found
