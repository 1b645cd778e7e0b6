"""The scan of the Chinese lessons' outputs (``zh_outputs.py``, run by ``conftest.py`` on every
cell of the scanned lessons under nbval) names what it looks for, and only that."""

from __future__ import annotations

from zh_outputs import SCANNED, english_in_outputs

from edu_parallel.app.course.lessons import LESSONS


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


def test_the_scanned_lessons_are_lessons():
    assert SCANNED <= {lesson.stem for lesson in LESSONS}
