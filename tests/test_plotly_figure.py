"""The package's plotly figures display as plotly's own ``plotly_mimetype`` renderer displays them,
without importing nbformat (``viz/plotly_figure.py``); elsewhere plotly's path runs unchanged."""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
import plotly.graph_objects as go
from helpers import fresh_python
from nbclient import NotebookClient
from plotly.subplots import make_subplots

from edu_parallel.viz.plotly_figure import MIMETYPE, Figure, mimetype_bundle, plain_mimetype_kernel

VIZ = Path(__file__).resolve().parents[1] / "edu_parallel" / "viz"


def _animated():
    fig = make_subplots(figure=Figure(), rows=1, cols=2, subplot_titles=["a", "b"])
    fig.add_trace(go.Bar(x=["r0", "r1"], y=[1, 2]), row=1, col=1)
    fig.add_trace(go.Scatter(x=[0, 1], y=[3, 4], name="ring"), row=1, col=2)
    fig.frames = [go.Frame(data=[go.Bar(y=[k, k + 1])], name=str(k)) for k in range(3)]
    fig.update_layout(title="t", updatemenus=[{"type": "buttons", "buttons": []}])
    return fig


def test_the_bundle_is_plotlys_mimetype_renderers():
    import plotly.io as pio

    fig = _animated()
    assert isinstance(fig, go.Figure) and fig.layout.xaxis2 is not None  # subplots kept
    expected = pio.renderers._build_mime_bundle(fig.to_dict(), "plotly_mimetype")
    assert mimetype_bundle(fig) == expected
    assert list(expected) == [MIMETYPE]


def test_it_is_a_plotly_figure_that_pickles_and_copies():
    import copy
    import pickle

    fig = _animated()
    for again in (pickle.loads(pickle.dumps(fig)), copy.deepcopy(fig)):
        assert type(again) is type(fig) and again.to_dict() == fig.to_dict()
        again.add_trace(go.Bar(y=[5]), row=1, col=2)  # the subplot grid came along


def test_a_renderer_module_loads_no_plotly():
    fresh_python("import edu_parallel.viz.bars, edu_parallel.viz.plotly_figure", absent=["plotly"])


def test_outside_a_kernel_plotly_decides():
    assert not plain_mimetype_kernel()  # pytest is no ipykernel shell
    fig = _animated()
    assert fig._repr_mimebundle_() == go.Figure(fig)._repr_mimebundle_()


def test_every_plotly_renderer_builds_the_package_figure():
    """No renderer builds a plain ``go.Figure`` or plain subplots: each would pay nbformat's import
    at its first display."""
    plain = []
    for path in sorted(set(VIZ.glob("*.py")) - {VIZ / "plotly_figure.py"}):
        text = path.read_text()
        for n, line in enumerate(text.splitlines(), start=1):
            if "go.Figure(" in line:
                plain.append(f"{path.name}:{n}: {line.strip()}")
        for call in re.finditer(r"make_subplots\((?!\s*figure=Figure\(\))", text):
            if not text[call.start() - 5 : call.start()].endswith("def "):
                n = text[: call.start()].count("\n") + 1
                plain.append(f"{path.name}:{n}: make_subplots without figure=Figure()")
        if text.count("fig = px.") != text.count("fig = Figure(fig)"):
            plain.append(f"{path.name}: a plotly express figure not turned into Figure")
    assert not plain, "\n".join(plain)


def _kernel_outputs(cells: list[str]) -> list[list[dict]]:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    return [c.outputs for c in nb.cells]


def test_in_a_kernel_the_figure_draws_without_nbformat_and_follows_a_chosen_renderer():
    outs = _kernel_outputs(
        [
            "from edu_parallel.viz.plotly_figure import Figure\n"
            "fig = Figure(data=[{'type': 'bar', 'y': [1, 2]}])\nfig",
            "from IPython.display import display\ndisplay(fig)",
            "import sys\nprint('nbformat' in sys.modules, 'plotly.io._renderers' in sys.modules)",
            "import json\nimport plotly.io as pio\n"
            "print(json.dumps(pio.renderers._build_mime_bundle(fig.to_dict(), 'plotly_mimetype')))",
            "pio.renderers.default = 'json'\nfig",
        ]
    )
    shown, displayed, loaded, plotly_own, chosen = outs
    assert shown[0]["data"].keys() == {MIMETYPE} and displayed[0]["data"].keys() == {MIMETYPE}
    assert loaded[0]["text"].split() == ["False", "False"], "nbformat was imported to draw"
    assert shown[0]["data"][MIMETYPE] == json.loads(plotly_own[0]["text"])[MIMETYPE]
    assert "application/json" in chosen[0]["data"] and MIMETYPE not in chosen[0]["data"]
