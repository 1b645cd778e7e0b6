"""ZeRO explorer widget: model, GPUs, stage, precision, offload and GPU memory in; bytes per GPU
with a breakdown, the largest model that fits and communication per step out, all from
:mod:`edu_parallel.memory.model_states`. Thin state (:class:`ZeroState`, one frozen config of the
calculator's inputs, checked by its rules when built and changed with
:func:`dataclasses.replace`) plus a renderer; testable without a browser. No torch import.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..core.errors import Checked, Problems, bad_value, check_choice, check_int, check_positive
from ..core.i18n import _
from ..core.units import format_bytes
from ..memory.communication import comm_estimate
from ..memory.model_states import (
    OFFLOAD_STAGES,
    OFFLOADS,
    PRECISIONS,
    ZERO_STAGE_NAMES,
    ZERO_STAGES,
    largest_model_that_fits,
    model_state_bytes,
)
from ..memory.presets import PRESETS, count_params
from .controls import WidgetView, kept_html, show_in
from .memory_ledger import category_name
from .style import ERROR_HTML, OK_HTML
from .zero import memory_bars


def check_model(name: str, value: Any) -> str | float:
    """``value`` as a preset name of :data:`~edu_parallel.memory.presets.PRESETS`, or as a
    parameter count > 0 (a number, or its text: ``"1e9"``); else a ValueError saying so."""
    if isinstance(value, str):
        if value in PRESETS:
            return value
        try:
            value = float(value)
        except ValueError:
            options = ", ".join(map(repr, PRESETS))
            valid = _("one of {options} or a parameter count > 0").format(options=options)
            raise bad_value(name, value, valid) from None
    return check_positive(name, value)


@dataclass(frozen=True)
class ZeroState(Checked):
    """The calculator's inputs, checked once when built by its rules (parameters > 0, GPUs >= 1,
    a stage of :data:`~edu_parallel.memory.model_states.ZERO_STAGES`, an offload that the stage
    supports): one ValueError names every bad field."""

    model: str | float = "zero-7.5b"
    """A preset of :data:`edu_parallel.memory.presets.PRESETS`, or a parameter count > 0."""
    gpus: int = 64
    """Data-parallel GPUs (>= 1)."""
    stage: int = 1
    """The ZeRO stage, one of ``ZERO_STAGES`` (0: plain data parallelism)."""
    precision: str = "mixed"
    """One of :data:`edu_parallel.memory.model_states.PRECISIONS`."""
    offload: str = "none"
    """One of :data:`edu_parallel.memory.model_states.OFFLOADS` that ``stage`` supports."""
    gpu_gib: float = 80.0
    """The memory of one GPU, in GiB (> 0)."""

    def _check(self) -> list[str]:
        p = Problems()
        self._field(p, "model", check_model)
        self._field(p, "gpus", check_int, 1)
        stage = self._field(p, "stage", check_int, ZERO_STAGES[0], ZERO_STAGES[-1])
        self._field(p, "precision", check_choice, PRECISIONS)
        offload = self._field(p, "offload", check_choice, OFFLOADS)
        if stage is not None and offload is not None and stage not in OFFLOAD_STAGES[offload]:
            allowed = ", ".join(repr(o) for o in OFFLOADS if stage in OFFLOAD_STAGES[o])
            valid = _("one of {options} with stage={stage}").format(options=allowed, stage=stage)
            p.add(bad_value("offload", offload, valid))
        self._field(p, "gpu_gib", check_positive)
        return p.lines

    @property
    def params(self) -> float:
        """The parameter count: the preset's (counted from its shape) or the number given."""
        if isinstance(self.model, str):
            return float(count_params(PRESETS[self.model]))
        return float(self.model)

    @property
    def gpu_bytes(self) -> float:
        return self.gpu_gib * 1024**3

    def describe(self) -> str:
        model = (
            self.model
            if isinstance(self.model, str)
            else _("{n} parameters").format(n=f"{self.params:.4g}")
        )
        off = f", offload={self.offload}" if self.offload != "none" else ""
        return (
            _("{model} on {gpus} GPUs of {gib} GiB, {stage}, {precision}").format(
                model=model,
                gpus=self.gpus,
                gib=f"{self.gpu_gib:g}",
                stage=ZERO_STAGE_NAMES[self.stage],
                precision=self.precision,
            )
            + off
        )


class ZeroWidget(WidgetView):
    """Controls for a ZeRO configuration, and what the calculator says about it.

    Everything is computed by :mod:`edu_parallel.memory.model_states`: ``estimate``
    (``model_state_bytes`` for the chosen stage), ``compare`` (the same for every stage the offload
    allows), ``largest`` (``largest_model_that_fits`` the chosen GPU memory, parameters), ``comm``
    (``comm_estimate``: bytes each GPU sends per step), ``fits`` (model states within the GPU
    memory). ``figure`` is the stacked-bar figure (:func:`memory_bars`), ``summary`` an HTML
    widget with the numbers and formulas. Driven from Python: tests set control values.
    """

    def __init__(
        self,
        model: str | float = "zero-7.5b",
        gpus: int = 64,
        stage: int = 1,
        precision: str = "mixed",
        offload: str = "none",
        gpu_gib: float = 80.0,
    ) -> None:
        import ipywidgets as w

        self.state = ZeroState(model, gpus, stage, precision, offload, gpu_gib)
        self.estimate: Any = None
        self.compare: dict[str, Any] = {}
        self.largest: int = 0
        self.comm: Any = None
        self.fits = False
        self.figure: Any = None
        s = self.state
        presets = list(PRESETS)
        custom = not isinstance(s.model, str)
        self.model_dropdown = w.Dropdown(
            options=[(p, p) for p in presets] + [(_("custom"), "custom")],
            value="custom" if custom else s.model,
            description=_("model"),
        )
        self.params_box = w.FloatText(
            value=s.params / 1e9, description=_("params (B)"), step=0.5, disabled=not custom
        )
        self.gpus_box = w.IntText(value=s.gpus, description="GPUs")
        self.stage_buttons = w.ToggleButtons(
            options=[(ZERO_STAGE_NAMES[k], k) for k in ZERO_STAGES],
            value=s.stage,
            description=_("stage"),
        )
        self.precision_dropdown = w.Dropdown(
            options=list(PRECISIONS), value=s.precision, description=_("precision")
        )
        self.offload_dropdown = w.Dropdown(
            options=list(OFFLOADS), value=s.offload, description=_("offload")
        )
        self.gpu_box = w.FloatText(value=s.gpu_gib, description=_("GPU GiB"), step=8)
        self.status = w.HTML()
        self.summary = w.HTML()
        self.output = w.Output()
        self.controls = [
            self.model_dropdown,
            self.params_box,
            self.gpus_box,
            self.stage_buttons,
            self.precision_dropdown,
            self.offload_dropdown,
            self.gpu_box,
        ]
        for control in self.controls:
            control.observe(lambda _: self.update(), names="value")
        self.widget = w.VBox(
            [
                w.HBox([self.model_dropdown, self.params_box, self.gpus_box]),
                self.stage_buttons,
                w.HBox([self.precision_dropdown, self.offload_dropdown, self.gpu_box]),
                self.status,
                self.summary,
                self.output,
            ]
        )
        self.update()

    def read_controls(self) -> ZeroState:
        """The state with the controls' values (raises the config's ValueError on a bad one)."""
        custom = self.model_dropdown.value == "custom"
        self.params_box.disabled = not custom
        return replace(
            self.state,
            model=self.params_box.value * 1e9 if custom else self.model_dropdown.value,
            gpus=self.gpus_box.value,
            stage=self.stage_buttons.value,
            precision=self.precision_dropdown.value,
            offload=self.offload_dropdown.value,
            gpu_gib=self.gpu_box.value,
        )

    def update(self) -> None:
        """Read and validate the controls, ask the calculator, then draw."""
        try:
            new = self.read_controls()
        except ValueError as err:
            self.status.value = kept_html(err)
            return
        params = new.params
        self.estimate = model_state_bytes(params, new.gpus, new.stage, new.precision, new.offload)
        self.compare = {
            ZERO_STAGE_NAMES[k]: model_state_bytes(params, new.gpus, k, new.precision, new.offload)
            for k in OFFLOAD_STAGES[new.offload]
        }
        self.largest = largest_model_that_fits(
            new.gpu_bytes, new.gpus, new.stage, new.precision, new.offload
        )
        self.comm = comm_estimate(params, new.gpus, new.stage, new.precision)
        self.fits = self.estimate.bytes_per_gpu <= new.gpu_bytes
        self.state, self.status.value = new, ""
        self.summary.value = self.summary_html()
        self.render()

    def summary_html(self) -> str:
        """The numbers shown under the controls."""
        s, est = self.state, self.estimate
        verdict = (
            f"<b style='color:{OK_HTML}'>" + _("fits") + "</b>"
            if self.fits
            else f"<b style='color:{ERROR_HTML}'>" + _("does not fit") + "</b>"
        )
        parts = ", ".join(
            f"{category_name(c)} {format_bytes(b)}" for c, b in est.breakdown.items() if b
        )
        cpu = (
            "<br>"
            + _("CPU memory per GPU (offloaded): {size}").format(
                size=f"<b>{format_bytes(est.cpu_bytes_per_gpu)}</b>"
            )
            if est.cpu_bytes_per_gpu
            else ""
        )
        return (
            _("{setting} ({n} parameters)").format(
                setting=f"<b>{s.describe()}</b>", n=f"{s.params:,.0f}"
            )
            + "<br>"
            + _(
                "Model states per GPU: {size} ({nbytes} B) of {gpu}: {verdict} "
                "(activations not counted)"
            ).format(
                size=f"<b>{format_bytes(est.bytes_per_gpu)}</b>",
                nbytes=f"{est.bytes_per_gpu:,.0f}",
                gpu=format_bytes(s.gpu_bytes),
                verdict=verdict,
            )
            + f"<br>{parts}{cpu}<br>"
            + _(
                "Largest model whose states fit {gib} GiB per GPU here: {largest} ({exact})"
            ).format(
                gib=f"{s.gpu_gib:g}",
                largest="<b>"
                + _("{n} B parameters").format(n=f"{self.largest / 1e9:,.2f}")
                + "</b>",
                exact=f"{self.largest:,}",
            )
            + "<br>"
            + _("Communication per step, sent by each GPU: {size}").format(
                size=f"<b>{format_bytes(self.comm.bytes_per_gpu)}</b>"
            )
            + f"<br><small>{est.formula}<br>{self.comm.formula}</small>"
        )

    def render(self) -> None:
        """Draw the stacked bars into ``self.figure`` and, in a kernel, the output area."""
        s = self.state
        self.figure = memory_bars(
            self.compare,
            title=_("Model states per GPU: {setting}").format(setting=s.describe()),
            gpu_bytes=s.gpu_bytes,
            highlight=ZERO_STAGE_NAMES[s.stage],
        )
        show_in(self.output, self.figure)
