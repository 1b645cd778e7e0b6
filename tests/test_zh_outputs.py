"""The scan of the Chinese lessons' outputs (``zh_outputs.py``: the browser pass runs it on each
lesson as the lab saves it, ``conftest.py`` on each cell under nbval) names what it looks for,
and only that."""

from __future__ import annotations

import pandas as pd
from zh_outputs import english_in_notebook, english_in_outputs, english_in_widgets

from edu_parallel.core.i18n import language
from edu_parallel.viz import quoted, wrapped
from edu_parallel.viz.figure import TEXT_KEY

PLOTLY = "application/vnd.plotly.v1+json"


def stream(text: str) -> dict:
    return {"output_type": "stream", "name": "stdout", "text": text}


def plotly(title: str, legend: str, note: str) -> dict:
    fig = {
        "data": [
            {"type": "bar", "name": legend},
            {"type": "bar", "name": "hidden", "showlegend": False},
        ],
        "layout": {
            "title": {"text": title},
            "xaxis": {"title": {"text": "rank"}},
            "annotations": [{"text": note}],
        },
    }
    return {"output_type": "display_data", "data": {"application/vnd.plotly.v1+json": fig}}


def test_english_labels_in_text_html_and_figures_are_named():
    outputs = [
        stream("每个 rank 发送的字节数：[48, 48]\nbytes received per rank: [48, 48]\n"),
        {
            "output_type": "execute_result",
            "data": {
                "text/html": "<style>tr th { x }</style><table><th>sent per step</th></table>",
                "text/plain": "ignored when there is html",
            },
        },
        plotly("bytes per rank over time", "AllReduce", "mean load of experts"),
    ]
    assert english_in_outputs("print(x)", outputs) == [
        "stdout: bytes received per rank:",
        "html: sent per step",
        "title: bytes per rank over time",
        "annotation: mean load of experts",
    ]


def test_chinese_outputs_code_and_the_allowed_names_pass():
    chinese = [
        stream("与 dist.all_reduce 一致： True | 每个 rank 发送的字节数： [48, 48, 48, 48]\n"),
        stream("size count type\n"),  # nccl-tests' column names
        plotly("每个 rank 的显存（按类别）", "AllReduce（全归约）", "每个专家的平均负载 16"),
        plotly("列并行的 nn.Linear(h, ffn)", "dY (s, ffn/t)", "X (s, h)"),  # shapes are symbols
        stream("GPipe 的 bubble（Huang et al. 2019）\n"),  # a citation
        stream("r0 s0 router          compute router 512 B  [0.003, 0.016]\n"),  # a trace record
        stream("布局 dp x tp x pp = 2 x 2 x 2，mb x M\n"),  # products of symbols
    ]
    assert english_in_outputs("print(x)", chinese) == []
    code = [stream("def traced_hello(ctx: RankContext, nbytes: int) -> list[float]:\n")]
    assert english_in_outputs("print(inspect.getsource(demos.traced_hello))", code) == []


def test_hover_text_marks_frames_buttons_and_png_labels_are_read():
    """What a learner reads only by hovering, pressing Play or looking at a PNG is scanned too;
    a hovertemplate's ``%{...}`` fields and a tuple of symbols are not words."""
    trace = {
        "type": "bar",
        "name": "每 rank",
        "hovertemplate": "掉队者 %{x}<br>%{customdata}<extra>%{fullData.name}</extra>",
        "customdata": [["time to target"], ["到达目标的时间"]],
        "text": ["bytes on the wire", "48 B"],
    }
    frame = {"layout": {"title": {"text": "whole step moved"}}, "data": [{"hovertext": "上一步"}]}
    layout = {
        "title": {"text": "网格 (pp, dp, tp)"},
        "updatemenus": [{"buttons": [{"label": "▶ 播放"}, {"label": "play it again"}]}],
        "sliders": [{"currentvalue": {"prefix": "t = "}, "steps": [{"label": "step one two"}]}],
    }
    fig = {"data": [trace], "layout": layout, "frames": [frame]}
    png = {
        "output_type": "display_data",
        "data": {"image/png": "iVBOR", "text/plain": "<Figure>"},
        "metadata": {"image/png": {TEXT_KEY: ["rank 0", "changed by reduce (+: adds)"]}},
    }
    outputs = [{"output_type": "display_data", "data": {PLOTLY: fig}}, png]
    assert english_in_outputs("fig", outputs) == [
        "button: play it again",
        "slider: step one two",
        "text: bytes on the wire",
        "hover: time to target",
        "title: whole step moved",
        "png: changed by reduce",
    ]


def test_a_saved_notebook_names_the_code_cell_as_nbval_does():
    cells = [
        {"cell_type": "markdown", "source": "# 第 03 课"},
        {"cell_type": "code", "source": "print(1)", "outputs": [stream("每个 rank\n")]},
        {"cell_type": "markdown", "source": "看"},
        {  # as a saved notebook holds text: a list of lines
            "cell_type": "code",
            "source": ["print(", "2)"],
            "outputs": [
                {"output_type": "stream", "name": "stdout", "text": ["ok\n", "sent per step"]}
            ],
        },
    ]
    assert english_in_notebook({"cells": cells}) == ["Cell 1: stdout: sent per step"]


def test_the_text_a_widget_shows_is_read_too():
    shown = ["先预测，再运行\n答案（单位：µs）", "bucket size (MiB)\n25", "rank 0 rank 1 rank 2"]
    assert english_in_widgets(shown) == ["widget 1: bucket size (MiB)"]


def html(text: str) -> dict:
    return {"output_type": "display_data", "data": {"text/html": text}}


def test_another_programs_words_quoted_as_english_pass_and_the_caption_does_not():
    """``viz.quoted`` marks torch's own message ``lang="en"``; the caption is the learner's."""
    torch_says = "Rank 3 failed to pass monitoredBarrier in 1000 ms"
    with language("zh"):
        shown = quoted(torch_says, by="torch")._repr_html_()
    assert english_in_outputs("", [html(shown)]) == []
    unmarked = html(f"<div>{torch_says}</div>")
    assert english_in_outputs("", [unmarked]) == ["html: failed to pass monitoredBarrier in"]
    with language("en"):  # an English caption is found: only the quoted passage is exempt
        caption = quoted(torch_says, by="torch")._repr_html_()
    found = english_in_outputs("", [html(caption)])
    assert found == ["html: torch's own words, as it prints them (in"]
    table = pd.DataFrame({"format": ["NCCL INFO Channel <c> of <n>"], "what": ["记录"]})
    styled = wrapped(table, english=["format"]).to_html()
    assert english_in_outputs("", [html(styled)]) == []
