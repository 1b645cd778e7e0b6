"""The planner explorer (lesson 12): pick a model and a cluster, see every configuration ranked.

:class:`PlannerState` is the thin state: one frozen config of the planner's inputs (model preset,
nodes, GPUs per node, GPU, global batch, sequence length, compute efficiency, memory budget),
checked by the planner's own rules (:class:`~edu_parallel.planner.ClusterSpec` and
:class:`~edu_parallel.planner.PlannerInputs`, built once by the check and handed to
:func:`~edu_parallel.planner.plan` as is) when built, and changed with
:func:`dataclasses.replace`. :class:`PlannerWidget` wires sliders and dropdowns to it and, on
every change, re-plans with :func:`~edu_parallel.planner.plan` (thousands of configurations in
well under a second) and shows a one-line status, the top-5 table
(:func:`~edu_parallel.planner.configs_table`), the Pareto figure
(:func:`~edu_parallel.viz.planner.pareto_figure`) and the time terms of the top 5
(:func:`~edu_parallel.viz.planner.time_terms_figure`). A bad control or an input nothing fits
shows a one-line error in the status instead of a traceback. Driven from Python: tests set
control values and read ``result``, ``figure`` and ``status``. No torch import.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field, replace
from typing import Any

from ..core.errors import Checked, Problems, check_positive
from ..core.i18n import _
from ..memory.presets import PRESETS
from ..planner import GPUS, TERMS, ClusterSpec, PlannerInputs, PlannerResult, configs_table, plan
from .controls import WidgetView, error_html, kept_html, show_in
from .planner import layout_label, pareto_figure, time_terms_figure

# The values the sliders offer; any value the planner accepts can be given from Python.
NODES_OPTIONS = tuple(2**k for k in range(13))
GPUS_PER_NODE_OPTIONS = (1, 2, 4, 8, 16)
BATCH_OPTIONS = tuple(2**k for k in range(15))
SEQ_OPTIONS = tuple(2**k for k in range(9, 17))
TOP = 5
STAND_IN_CLUSTER = ClusterSpec(1, 1)  # checks the other fields while the cluster is bad


@dataclass(frozen=True)
class PlannerState(Checked):
    """The explorer's inputs to :func:`~edu_parallel.planner.plan`, checked once when built by
    the planner's own rules: one ValueError names every bad field, in the planner's words."""

    model: str = "llama3-70b"
    """A preset of :data:`edu_parallel.memory.presets.PRESETS`."""
    nodes: int = 8
    """Nodes of the cluster (>= 1; nodes x GPUs per node within the topology's limit)."""
    gpus_per_node: int = 8
    """GPUs in each node (>= 1): tensor parallelism stays inside a node."""
    gpu: str = "h100"
    """One of :data:`edu_parallel.planner.GPUS`."""
    global_batch: int = 512
    """Sequences per step (>= 1)."""
    seq: int = 4096
    """Tokens per sequence (>= 1)."""
    efficiency: float = 0.5
    """The fraction of peak FLOP/s the matmuls reach, in (0, 1]."""
    memory_budget_gb: float | None = None
    """Memory per GPU the plan may use, in GB (> 0), or None for the GPU's memory."""
    inputs: PlannerInputs = field(init=False, repr=False, compare=False)
    """What :func:`~edu_parallel.planner.plan` is given: the inputs built (checked) once here."""

    def _check(self) -> list[str]:
        p = Problems()
        cluster = None
        try:
            cluster = ClusterSpec(self.nodes, self.gpus_per_node, self.gpu)
        except ValueError as exc:
            p.add(exc)
        gb = None
        if self.memory_budget_gb is not None:
            gb = self._field(p, "memory_budget_gb", check_positive)
        try:  # the planner's check of the rest (a stand-in cluster when this one is bad)
            inputs = PlannerInputs(
                self.model,
                cluster or STAND_IN_CLUSTER,
                self.global_batch,
                self.seq,
                self.efficiency,
                None if gb is None else gb * 1e9,
            )
        except ValueError as exc:
            p.add(exc)
        else:
            object.__setattr__(self, "inputs", inputs)
            for name in ("global_batch", "seq", "efficiency"):
                object.__setattr__(self, name, getattr(inputs, name))
        if cluster is not None:
            object.__setattr__(self, "nodes", cluster.nodes)
            object.__setattr__(self, "gpus_per_node", cluster.gpus_per_node)
        return p.lines

    @property
    def cluster(self) -> ClusterSpec:
        """The cluster of ``nodes``, ``gpus_per_node`` and ``gpu``."""
        return self.inputs.cluster

    @property
    def memory_budget(self) -> float | None:
        """Bytes per GPU, or None (the GPU's memory)."""
        return self.inputs.memory_budget

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


def _options(values: tuple[int, ...], current: int) -> list[int]:
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
            options=_options(NODES_OPTIONS, s.nodes),
            value=s.nodes,
            description=_("nodes"),
            **slider,
        )
        self.gpus_slider = w.SelectionSlider(
            options=_options(GPUS_PER_NODE_OPTIONS, s.gpus_per_node),
            value=s.gpus_per_node,
            description=_("GPUs/node"),
            **slider,
        )
        self.batch_slider = w.SelectionSlider(
            options=_options(BATCH_OPTIONS, s.global_batch),
            value=s.global_batch,
            description=_("batch"),
            **slider,
        )
        self.seq_slider = w.SelectionSlider(
            options=_options(SEQ_OPTIONS, s.seq),
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
        """The state with the controls' values (raises the config's ValueError on a bad one)."""
        budget = self.budget_box.value
        return replace(
            self.state,
            model=self.model_dropdown.value,
            nodes=self.nodes_slider.value,
            gpus_per_node=self.gpus_slider.value,
            gpu=self.gpu_dropdown.value,
            global_batch=self.batch_slider.value,
            seq=self.seq_slider.value,
            efficiency=round(self.efficiency_slider.value, 6),
            memory_budget_gb=None if budget == 0 else budget,
        )

    def update(self) -> None:
        """Read and validate the controls, re-plan, then draw (or show the planner's error)."""
        try:
            new = self.read_controls()
        except ValueError as err:
            self.status.value = kept_html(err)
            return
        self.state = new
        try:
            result = plan(new.inputs)  # checked when the state was built: not again
        except ValueError as err:  # nothing fits or nothing divides: the planner's one line
            self.result, self.error = None, str(err)
            self.figure = self.terms_figure = self.table = None
            self.status.value, self.table_html.value = error_html(err), ""
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
