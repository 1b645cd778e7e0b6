"""An ipywidgets explorer for pipeline schedules: pick a schedule, P, M, v and the cost ratios.

:class:`PipelineState` is the thin state: one frozen config, checked once when it is built and
changed with :func:`dataclasses.replace` (a bad value raises its one-line message, the widget
shows it and keeps the last valid state). :class:`PipelineWidget` wires controls to it (their
bounds are the config's :attr:`~PipelineState.LIMITS`) and, on every change, shows the Gantt
(:func:`~edu_parallel.viz.pipeline.pipeline_gantt`), the bubble (measured or simulated, and by
formula), the peak stashed activations per stage, and says where the figure came from: a REAL run
(``run_small``, small configurations only) or the SIMULATION of the same plan (``time_schedule``).
Everything is driven from Python, so tests set widget values and call ``button.click()``. Nothing
here imports torch; ``run_small`` may.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from ..core.dims import MAX_LOCAL_WORLD_SIZE
from ..core.errors import (
    Checked,
    Problems,
    check_choice,
    check_int,
    check_non_negative,
    check_positive,
)
from ..core.i18n import _
from ..core.trace import Trace
from ..pipeline_parallel.builders import MAX_MICROBATCHES, SCHEDULES, build_schedule
from ..pipeline_parallel.timing import Timeline, bubble_formula, time_schedule
from .controls import WidgetView, kept_html, limits, show_in
from .pipeline import pipeline_gantt, pipeline_view
from .pipeline_memory import activation_memory_figure

MAX_GANTT_BOXES = 20_000  # above this the Gantt is not drawn (illegible, and slow in a browser)


@dataclass(frozen=True)
class PipelineState(Checked):
    """The explorer's setting: a schedule and its parameters, checked once when built.

    A bad value raises one ValueError naming the field, the value and the valid range (every bad
    field at once). Whether the schedule can be built from them (interleaved needs M a multiple
    of P) is :func:`~edu_parallel.pipeline_parallel.builders.build_schedule`'s to say.
    """

    LIMITS: ClassVar[dict[str, tuple[int, int]]] = {
        "P": (2, 64),
        "M": (1, MAX_MICROBATCHES),
        "v": (1, 4),
    }
    """The explorer's bounds: what it simulates (and draws) in well under a second."""

    schedule: str = "1f1b"
    """One of :data:`~edu_parallel.pipeline_parallel.builders.SCHEDULES`."""
    P: int = 4  # noqa: N815 - the literature's names
    """Pipeline ranks, in ``LIMITS["P"]`` (a real run: at most the widget's ``real_max_ranks``)."""
    M: int = 8  # noqa: N815
    """Microbatches per step, in ``LIMITS["M"]``."""
    v: int = 2
    """Model chunks per rank, in ``LIMITS["v"]``; only ``"interleaved"`` uses them."""
    tb_over_tf: float = 1.0
    """t_b / t_f > 0: the input-gradient pass against the forward."""
    tw_over_tf: float = 1.0
    """t_w / t_f >= 0: the weight-gradient pass against the forward."""

    def _check(self) -> list[str]:
        p = Problems()
        self._field(p, "schedule", check_choice, SCHEDULES)
        for name, (low, high) in self.LIMITS.items():
            self._field(p, name, check_int, low, high)
        self._field(p, "tb_over_tf", check_positive)
        self._field(p, "tw_over_tf", check_non_negative)
        return p.lines

    @property
    def chunks(self) -> int:
        """The ``v`` the schedule uses: ``v`` for interleaved, else 1."""
        return self.v if self.schedule == "interleaved" else 1

    def times(self, t_f: float = 1.0) -> tuple[float, float, float]:
        """``(t_f, t_b, t_w)`` for a forward time ``t_f``."""
        return t_f, t_f * self.tb_over_tf, t_f * self.tw_over_tf

    def describe(self) -> str:
        v = f", v={self.chunks}" if self.schedule == "interleaved" else ""
        return f"{self.schedule!r}, P={self.P}, M={self.M}{v}"


class PipelineWidget(WidgetView):
    """Controls for a pipeline schedule, and what it does: Gantt, bubble, peak activations.

    ``run_small(schedule, P, M, v, t_f, t_b, t_w)``, when given, runs the plan for real and
    returns an object with ``.timeline`` (a Timeline, e.g. the executed order retimed in units of
    t_f, or a Trace of measured times: the axis says which),
    ``.bubble_fraction_retimed`` and ``.peak_activations_per_stage`` (a list, or a method
    returning one); it is used when ``P <= real_max_ranks`` and ``M <= real_max_microbatches``.
    Everything else is the SIMULATION of the same plan, and ``source_html`` says which, and why.

    Attributes after each update: ``state``, ``source`` (``"real"`` or ``"simulation"``),
    ``timeline`` (what is drawn), ``simulated`` (the simulated Timeline, always), ``result``
    (``run_small``'s result or None), ``gantt`` and ``memory_figure`` (plotly figures; ``gantt``
    is None above :data:`MAX_GANTT_BOXES` boxes), ``bubble`` (the fraction shown), ``peaks``.
    """

    def __init__(
        self,
        run_small: Callable[..., Any] | None = None,
        schedule: str = "1f1b",
        P: int = 4,  # noqa: N803
        M: int = 8,  # noqa: N803
        v: int = 2,
        tb_over_tf: float = 1.0,
        tw_over_tf: float = 1.0,
        *,
        real_max_ranks: int = 4,
        real_max_microbatches: int = 8,
        real_t_f: float = 1.0,
    ) -> None:
        import ipywidgets as w

        self.run_small = run_small
        self.state = PipelineState(schedule, P, M, v, tb_over_tf, tw_over_tf)
        low = PipelineState.LIMITS["P"][0]  # a real run is on the local cluster's ranks
        self.real_max_ranks = check_int("real_max_ranks", real_max_ranks, low, MAX_LOCAL_WORLD_SIZE)
        self.real_max_microbatches = check_int("real_max_microbatches", real_max_microbatches, 1)
        self.real_t_f = check_positive("real_t_f", real_t_f)
        self.source = ""
        self.result: Any = None
        self.timeline: Timeline | Trace | None = None
        self.simulated: Timeline | None = None
        self.gantt: Any = None
        self.memory_figure: Any = None
        self.bubble: float | None = None
        self.peaks: list[float] = []
        s = self.state
        self.schedule_dropdown = w.Dropdown(
            options=list(SCHEDULES), value=s.schedule, description=_("schedule")
        )
        self.ranks_slider = w.IntSlider(
            value=s.P,
            **limits(PipelineState, "P"),
            description=_("P ranks"),
            continuous_update=False,
        )
        self.microbatches_box = w.BoundedIntText(
            value=s.M, **limits(PipelineState, "M"), description=_("M micro")
        )
        self.chunks_slider = w.IntSlider(
            value=s.v,
            **limits(PipelineState, "v"),
            description=_("v chunks"),
            continuous_update=False,
        )
        self.tb_box = w.FloatText(value=s.tb_over_tf, description="t_b / t_f", step=0.25)
        self.tw_box = w.FloatText(value=s.tw_over_tf, description="t_w / t_f", step=0.25)
        self.run_button = w.Button(description=_("Run again"), icon="play", button_style="primary")
        self.status = w.HTML()
        self.source_html = w.HTML()
        self.bubble_html = w.HTML()
        self.peaks_html = w.HTML()
        self.gantt_output = w.Output()
        self.memory_output = w.Output()
        self.controls = [
            self.schedule_dropdown,
            self.ranks_slider,
            self.microbatches_box,
            self.chunks_slider,
            self.tb_box,
            self.tw_box,
        ]
        for control in self.controls:
            control.observe(lambda _: self.update(), names="value")
        self.run_button.on_click(lambda _: self.update())
        note = w.HTML(
            "<small>"
            + _(
                "t_b is the input-gradient pass (I), t_w the weight-gradient pass (W): "
                "zb-h1 runs them apart; gpipe, 1f1b and interleaved run one full backward (B) of "
                "t_b + t_w. Times are in units of t_f."
            )
            + "</small>"
        )
        self.widget = w.VBox(
            [
                w.HBox([self.schedule_dropdown, self.ranks_slider, self.microbatches_box]),
                w.HBox([self.chunks_slider, self.tb_box, self.tw_box, self.run_button]),
                note,
                self.status,
                self.source_html,
                self.bubble_html,
                self.peaks_html,
                self.gantt_output,
                self.memory_output,
            ]
        )
        self.update()

    # ----------------------------------------------------------------- decisions
    def why_simulated(self, state: PipelineState) -> str | None:
        """Why ``state`` is not run for real (None: it is)."""
        if self.run_small is None:
            return _("no real runner was given (run_small=None)")
        if state.P > self.real_max_ranks or state.M > self.real_max_microbatches:
            return _(
                "P={p}, M={m} is too large for a real run here (real runs: "
                "P <= {max_p} and M <= {max_m})"
            ).format(
                p=state.P, m=state.M, max_p=self.real_max_ranks, max_m=self.real_max_microbatches
            )
        return None

    # ----------------------------------------------------------------- update
    def update(self) -> None:
        """Read the controls into the state, simulate (and run for real when small), then draw."""
        self.chunks_slider.disabled = self.schedule_dropdown.value != "interleaved"
        try:
            new = replace(
                self.state,
                schedule=self.schedule_dropdown.value,
                P=self.ranks_slider.value,
                M=self.microbatches_box.value,
                v=self.chunks_slider.value,
                tb_over_tf=self.tb_box.value,
                tw_over_tf=self.tw_box.value,
            )
        except ValueError as err:
            self.status.value = kept_html(err)
            return
        try:
            plan = build_schedule(new.schedule, new.P, new.M, new.chunks)
        except ValueError as err:
            failed = _("{setting} cannot be built: {error}").format(
                setting=new.describe(), error=err
            )
            self.status.value = kept_html(failed)
            return
        t_f, t_b, t_w = new.times()
        self.simulated = time_schedule(plan, t_f, t_b, t_w)
        formula = bubble_formula(new.schedule, new.P, new.M, new.chunks, t_f, t_b, t_w)
        reason = self.why_simulated(new)
        result = None
        if reason is None:
            assert self.run_small is not None
            rt_f, rt_b, rt_w = new.times(self.real_t_f)
            try:
                result = self.run_small(new.schedule, new.P, new.M, new.chunks, rt_f, rt_b, rt_w)
            except Exception as err:  # shown in the widget: a handler's error is easy to miss
                reason = _("the real run failed: {error}").format(
                    error=f"{type(err).__name__}: {err}"
                )
        self.state, self.result, self.status.value = new, result, ""
        if result is not None:
            self._show_real(new, result, formula)
        else:
            self._show_simulated(new, reason or "", formula)
        self.render()

    def _show_real(self, new: PipelineState, result: Any, formula: dict[str, Any]) -> None:
        self.source = "real"
        self.timeline = result.timeline
        peaks = result.peak_activations_per_stage
        self.peaks = list(peaks() if callable(peaks) else peaks)
        self.bubble = float(result.bubble_fraction_retimed)
        label = getattr(result, "time_label", None)
        rt = ", ".join(
            f"{n}={x:g}"
            for n, x in zip(("t_f", "t_b", "t_w"), new.times(self.real_t_f), strict=True)
        )
        if isinstance(self.timeline, Timeline):
            shows = _(
                "the order the ranks really executed, as the run reports it (a Timeline: "
                "times in units of t_f, not wall-clock)"
            )
        else:
            shows = _("the run's trace ({label})").format(
                label=pipeline_view(self.timeline, label).time_label
            )
        self.source_html.value = _(
            "<b>Source: REAL run</b> of {setting} (run_small with {times}); the Gantt shows "
            "{shows}."
        ).format(setting=new.describe(), times=rt, shows=shows)
        sim = self.simulated.bubble_fraction() if self.simulated else float("nan")
        self.bubble_html.value = _(
            "bubble: <b>{bubble}</b> of rank-time, the real run's executed order retimed "
            "with its stage times; the same plan simulated: {simulated}; {formula}"
        ).format(
            bubble=f"{self.bubble:.1%}", simulated=f"{sim:.1%}", formula=_formula_text(formula)
        )
        head = _("REAL run of {setting}").format(setting=new.describe())
        title = _("{head}: bubble {bubble} of rank-time (real run)").format(
            head=head, bubble=f"{self.bubble:.1%}"
        )
        self._figures(title, head, label, "measured")

    def _show_simulated(self, new: PipelineState, reason: str, formula: dict[str, Any]) -> None:
        assert self.simulated is not None
        self.source = "simulation"
        self.timeline = self.simulated
        self.peaks = [float(p) for p in self.simulated.peak_activations_per_stage()]
        self.bubble = self.simulated.bubble_fraction()
        self.source_html.value = _(
            "<b>Source: SIMULATION</b> of the same plan, {setting} (time_schedule: "
            "modelled times, not measured), because {reason}."
        ).format(setting=new.describe(), reason=reason)
        self.bubble_html.value = _(
            "bubble: <b>{bubble}</b> of rank-time simulated; {formula}"
        ).format(bubble=f"{self.bubble:.1%}", formula=_formula_text(formula))
        head = _("SIMULATION of {setting}").format(setting=new.describe())
        title = _("{head}: bubble {bubble} of rank-time").format(
            head=head, bubble=f"{self.bubble:.1%}"
        )
        self._figures(title, head, None, "simulated")

    def _figures(self, title: str, head: str, label: str | None, how: str) -> None:
        assert self.timeline is not None
        view = pipeline_view(self.timeline, label)
        unit = (
            _("microbatches, simulated") if how == "simulated" else _("as the real run counts them")
        )
        shown = " · ".join(f"s{s} {p:g}" for s, p in enumerate(self.peaks[:16]))
        more = (
            " · "
            + _("... ({n} more, max {max})").format(
                n=len(self.peaks) - 16, max=f"{max(self.peaks):g}"
            )
            if len(self.peaks) > 16
            else ""
        )
        self.peaks_html.value = _("peak stashed activations per stage ({unit}): {peaks}").format(
            unit=unit, peaks=shown + more
        )
        if len(view.boxes) > MAX_GANTT_BOXES:
            self.gantt = None
            self.status.value = _(
                "Gantt not drawn: {n} boxes (> {limit}) would be "
                "illegible; the numbers above come from the full run."
            ).format(n=len(view.boxes), limit=MAX_GANTT_BOXES)
        else:
            self.gantt = pipeline_gantt(self.timeline, title, time_label=label)
        how_text = _("measured") if how == "measured" else _("simulated")
        self.memory_figure = activation_memory_figure(
            self.timeline,
            _("{head}: stashed activations per stage ({how})").format(head=head, how=how_text),
            time_label=label,
        )

    def render(self) -> None:
        """Show the figures in the output areas (only inside a kernel)."""
        show_in(self.gantt_output, self.gantt)
        show_in(self.memory_output, self.memory_figure)


def _formula_text(f: dict[str, Any]) -> str:
    return _(
        "formula: {share} of total time (GPipe convention) = "
        "{relative} relative to the ideal time (Megatron convention); "
        "{formula}; exact when {exact_when}."
    ).format(
        share=f"{f['share_of_total']:.1%}",
        relative=f"{f['relative_to_ideal']:.1%}",
        formula=_(f["formula"]),
        exact_when=_(f["exact_when"]),
    )
