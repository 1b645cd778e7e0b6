"""The planner explorer (lesson 10): pick a model and a cluster, see every configuration ranked.

:class:`PlannerState` is the thin, validated state (model preset, nodes, GPUs per node, GPU,
global batch, sequence length, compute efficiency, memory budget); :class:`PlannerWidget` wires
sliders and dropdowns to it and, on every change, re-plans with
:func:`~edu_parallel.planner.plan` (thousands of configurations in well under a second) and shows
a one-line status, the top-5 table (:func:`~edu_parallel.planner.configs_table`), the Pareto
figure (:func:`~edu_parallel.viz.planner.pareto_figure`) and the time terms of the top 5
(:func:`~edu_parallel.viz.planner.time_terms_figure`). An input nothing fits shows the planner's
one-line error in the status instead of a traceback. Driven from Python: tests set control values
and read ``result``, ``figure`` and ``status``. No torch import.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

from ..core.errors import bad_value, check_choice, check_int
from ..core.i18n import _
from ..memory.presets import PRESETS
from ..planner import GPUS, TERMS, ClusterSpec, PlannerResult, configs_table, plan
from .controls import WidgetView, show_in
from .planner import layout_label, pareto_figure, time_terms_figure

NODES_RANGE = (1, 4096)
GPUS_PER_NODE_RANGE = (1, 16)
BATCH_RANGE = (1, 1 << 20)
SEQ_RANGE = (1, 1 << 20)
BUDGET_GB_RANGE = (1.0, 10_000.0)
TOP = 5
ERROR_STYLE = "color:#b00"


@dataclass
class PlannerState:
    """Validated explorer state; every assignment is checked.

    ``model``: a preset of :data:`edu_parallel.memory.presets.PRESETS`; ``nodes`` in [1, 4096];
    ``gpus_per_node`` in [1, 16]; ``gpu``: one of :data:`edu_parallel.planner.GPUS`;
    ``global_batch`` (sequences) and ``seq`` (tokens) in [1, 2^20]; ``efficiency``, the fraction
    of peak FLOP/s the matmuls reach, in (0, 1]; ``memory_budget_gb`` per GPU in [1, 10000], or
    None for the GPU's memory. A bad value raises ValueError naming the field, the value and the
    valid range.
    """

    model: str = "llama3-70b"
    nodes: int = 8
    gpus_per_node: int = 8
    gpu: str = "h100"
    global_batch: int = 512
    seq: int = 4096
    efficiency: float = 0.5
    memory_budget_gb: float | None = None

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "model":
            value = check_choice("model", value, PRESETS)
        elif name == "nodes":
            value = check_int("nodes", value, *NODES_RANGE)
        elif name == "gpus_per_node":
            value = check_int("gpus_per_node", value, *GPUS_PER_NODE_RANGE)
        elif name == "gpu":
            value = check_choice("gpu", value, GPUS)
        elif name == "global_batch":
            value = check_int("global_batch", value, *BATCH_RANGE)
        elif name == "seq":
            value = check_int("seq", value, *SEQ_RANGE)
        elif name == "efficiency":
            value = _number("efficiency", value, 0.0, 1.0, _("a number in (0, 1]"), open_low=True)
        elif name == "memory_budget_gb" and value is not None:
            low, high = BUDGET_GB_RANGE
            valid = _("None or a number in [{low}, {high}]").format(
                low=f"{low:g}", high=f"{high:g}"
            )
            value = _number(name, value, low, high, valid)
        object.__setattr__(self, name, value)

    @property
    def cluster(self) -> ClusterSpec:
        return ClusterSpec(self.nodes, self.gpus_per_node, self.gpu)

    @property
    def memory_budget(self) -> float | None:
        """Bytes per GPU, or None (the GPU's memory)."""
        return None if self.memory_budget_gb is None else self.memory_budget_gb * 1e9

    def describe(self) -> str:
        text = _(
            "{model} on {nodes} x {gpus} {gpu}, batch {batch} x {seq} tokens, efficiency {eff}"
        ).format(
            model=self.model,
            nodes=self.nodes,
            gpus=self.gpus_per_node,
            gpu=self.gpu,
            batch=self.global_batch,
            seq=self.seq,
            eff=f"{self.efficiency:g}",
        )
        if self.memory_budget_gb is None:
            return text
        return text + ", " + _("budget {budget} GB").format(budget=f"{self.memory_budget_gb:g}")


def _number(name: str, value: Any, low: float, high: float, valid: str, open_low=False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise bad_value(name, value, valid)
    x = float(value)
    if not (low < x if open_low else low <= x) or not x <= high:
        raise bad_value(name, value, valid)
    return x


def _options(values: list[int], current: int) -> list[int]:
    return sorted({*values, current})


def status_line(result: PlannerResult) -> str:
    """``"606 feasible of 7116; best: 8×2×4 v4 Z3 mb1 M64 sel-rc, 31.2 s per step, ..."``."""
    b = result.best
    return _(
        "{ok} feasible of {total}; best: {config}, {step} s per step, {tokens} tokens/s, "
        "MFU {mfu}, {memory} GB per GPU"
    ).format(
        ok=len(result.feasible),
        total=len(result.configs),
        config=layout_label(b),
        step=f"{b.step_time_s:.3g}",
        tokens=f"{b.tokens_per_s:,.0f}",
        mfu=f"{b.mfu:.1%}",
        memory=f"{b.memory_bytes_per_gpu / 1e9:.1f}",
    )


def top_table(result: PlannerResult, top: int = TOP) -> Any:
    """The ``top`` configurations as a DataFrame (:func:`configs_table` without the terms)."""
    df = configs_table(result, top=top)
    drop = ["ep", "feasible", "reason", *(f"{t}_s" for t in TERMS)]
    return df.drop(columns=[c for c in drop if c in df.columns])


def table_html(df: Any) -> str:
    formats = {
        "memory_gb": "{:.1f}".format,
        "step_s": "{:.3g}".format,
        "tokens_per_s": "{:,.0f}".format,
        "mfu": "{:.1%}".format,
    }
    shown = df.copy()
    for col, fmt in formats.items():
        if col in shown.columns:
            shown[col] = shown[col].map(fmt)
    return shown.to_html(index=False, border=0)


class PlannerWidget(WidgetView):
    """Controls for a model and a cluster, and the planner's ranking of every configuration.

    Attributes after each update: ``state`` (the last valid :class:`PlannerState`), ``result``
    (the :class:`~edu_parallel.planner.PlannerResult`, None when nothing fits), ``error`` (the
    planner's one-line error, else None), ``figure`` (the Pareto figure), ``terms_figure``
    (the top 5's time terms), ``table`` (the top-5 DataFrame), ``status`` (an HTML widget: the
    one-line summary, or the error).
    """

    def __init__(
        self,
        model: str = "llama3-70b",
        nodes: int = 8,
        gpus_per_node: int = 8,
        gpu: str = "h100",
        global_batch: int = 512,
        seq: int = 4096,
        efficiency: float = 0.5,
        memory_budget_gb: float | None = None,
    ) -> None:
        s = PlannerState(
            model, nodes, gpus_per_node, gpu, global_batch, seq, efficiency, memory_budget_gb
        )
        import ipywidgets as w

        self.state = s
        self.result: PlannerResult | None = None
        self.error: str | None = None
        self.figure: Any = None
        self.terms_figure: Any = None
        self.table: Any = None
        slider = dict(continuous_update=False)
        self.model_dropdown = w.Dropdown(
            options=list(PRESETS), value=s.model, description=_("model")
        )
        self.gpu_dropdown = w.Dropdown(options=list(GPUS), value=s.gpu, description="GPU")
        self.nodes_slider = w.SelectionSlider(
            options=_options([2**k for k in range(13)], s.nodes),
            value=s.nodes,
            description=_("nodes"),
            **slider,
        )
        self.gpus_slider = w.SelectionSlider(
            options=_options([1, 2, 4, 8, 16], s.gpus_per_node),
            value=s.gpus_per_node,
            description=_("GPUs/node"),
            **slider,
        )
        self.batch_slider = w.SelectionSlider(
            options=_options([2**k for k in range(15)], s.global_batch),
            value=s.global_batch,
            description=_("batch"),
            **slider,
        )
        self.seq_slider = w.SelectionSlider(
            options=_options([2**k for k in range(9, 17)], s.seq),
            value=s.seq,
            description=_("seq"),
            **slider,
        )
        self.efficiency_slider = w.FloatSlider(
            value=s.efficiency, min=0.05, max=1.0, step=0.05, description=_("efficiency"), **slider
        )
        self.budget_box = w.FloatText(
            value=s.memory_budget_gb or 0.0, description=_("budget GB"), step=10
        )
        self.status = w.HTML()
        self.table_html = w.HTML()
        self.pareto_output = w.Output()
        self.terms_output = w.Output()
        self.controls = [
            self.model_dropdown,
            self.gpu_dropdown,
            self.nodes_slider,
            self.gpus_slider,
            self.batch_slider,
            self.seq_slider,
            self.efficiency_slider,
            self.budget_box,
        ]
        for control in self.controls:
            control.observe(lambda _: self.update(), names="value")
        note = w.HTML(
            "<small>"
            + _(
                "budget GB: memory per GPU the plan may use (0: the GPU's memory). Batch in"
                " sequences, seq in tokens; efficiency: the fraction of peak FLOP/s reached."
            )
            + "</small>"
        )
        self.widget = w.VBox(
            [
                w.HBox([self.model_dropdown, self.gpu_dropdown, self.budget_box]),
                w.HBox([self.nodes_slider, self.gpus_slider, self.efficiency_slider]),
                w.HBox([self.batch_slider, self.seq_slider]),
                note,
                self.status,
                self.table_html,
                self.pareto_output,
                self.terms_output,
            ]
        )
        self.update()

    def read_controls(self) -> PlannerState:
        """A validated state from the controls (raises ValueError naming the bad field)."""
        budget = self.budget_box.value
        return PlannerState(
            self.model_dropdown.value,
            self.nodes_slider.value,
            self.gpus_slider.value,
            self.gpu_dropdown.value,
            self.batch_slider.value,
            self.seq_slider.value,
            round(self.efficiency_slider.value, 6),
            None if budget == 0 else budget,
        )

    def update(self) -> None:
        """Read and validate the controls, re-plan, then draw (or show the planner's error)."""
        try:
            new = self.read_controls()
        except ValueError as err:
            self.status.value = _("{error} (showing the last valid setting)").format(
                error=_error_html(err)
            )
            return
        self.state = new
        try:
            result = plan(
                new.model,
                new.cluster,
                new.global_batch,
                new.seq,
                efficiency=new.efficiency,
                memory_budget=new.memory_budget,
            )
        except ValueError as err:  # nothing fits or nothing divides: the planner's one line
            self.result, self.error = None, str(err)
            self.figure = self.terms_figure = self.table = None
            self.status.value, self.table_html.value = _error_html(err), ""
            self.render()
            return
        self.result, self.error = result, None
        self.status.value = f"<b>{html.escape(status_line(result), quote=False)}</b>"
        self.table = top_table(result)
        self.table_html.value = table_html(self.table)
        self.figure = pareto_figure(result, infeasible=False)  # small: nbclient stalls on MBs
        self.terms_figure = time_terms_figure(result, top=TOP)
        self.render()

    def render(self) -> None:
        """Show the figures in the output areas (only inside a kernel)."""
        show_in(self.pareto_output, self.figure)
        show_in(self.terms_output, self.terms_figure)


def _error_html(err: Exception, tail: str = "") -> str:
    return f"<b style='{ERROR_STYLE}'>{html.escape(str(err), quote=False)}</b>{tail}"
