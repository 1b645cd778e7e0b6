"""An ipywidgets player for the ring: step through a run, change the ranks or the size, re-run.

:class:`PlayerState` is the thin, validated state (world size, bytes, current frame);
:class:`RingPlayer` wires widgets to it and draws the current frame with
:class:`~edu_parallel.viz.ring.RingDrawing` (the same code as the exported animation). The
``runner`` is any ``(world_size, nbytes) -> Trace`` callable: the real engine or the simulation.
Everything is driven from Python, so tests set slider values and call ``button.click()``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..core.errors import check_int
from ..core.i18n import _
from ..core.trace import Trace
from .controls import WidgetView, show_in
from .ring import RingDrawing

WORLD_RANGE = (2, 16)
NBYTES_RANGE = (1, 4096)  # snapshots (the animated values) are kept up to 4096 bytes per rank
SIZES = [4, 16, 64, 256, 1024, 4096]


@dataclass
class PlayerState:
    """Validated player state. ``step`` is a frame index: 0 = input, k = after the k-th step.

    ``num_frames`` (when known) bounds ``step`` to ``[0, num_frames - 1]``. Every assignment is
    checked; a bad value raises ValueError naming the field, the value and the valid range.
    """

    world_size: int = 4
    nbytes: int = 64
    step: int = 0
    num_frames: int | None = None

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "world_size":
            value = check_int("world_size", value, *WORLD_RANGE)
        elif name == "nbytes":
            value = check_int("nbytes", value, *NBYTES_RANGE)
        elif name == "num_frames" and value is not None:
            value = check_int("num_frames", value, 1)
            step = self.__dict__.get("step", 0)
            if step > value - 1:
                raise ValueError(
                    _(
                        "num_frames={value!r} is not valid: expected an integer > step={step}"
                    ).format(value=value, step=step)
                )
        elif name == "step":
            frames = self.__dict__.get("num_frames")
            value = check_int("step", value, 0, frames - 1 if frames else None)
        object.__setattr__(self, name, value)


class RingPlayer(WidgetView):
    """Widgets to play a run step by step and re-run it with other settings.

    ``.widget`` is the top-level container; ``.figure`` the plotly figure of the current frame;
    ``.trace`` the current run. ``runner(world_size, nbytes)`` is called once at construction and
    again by the Run button.
    """

    def __init__(
        self, runner: Callable[[int, int], Trace], world_size: int = 4, nbytes: int = 64
    ) -> None:
        import ipywidgets as w

        self.runner = runner
        self.state = PlayerState(world_size, nbytes)
        self.trace: Trace = runner(world_size, nbytes)
        self.drawing = RingDrawing(self.trace)
        self.state.num_frames = len(self.drawing)
        self.figure: Any = None
        self._syncing = False
        last = len(self.drawing) - 1
        self.play = w.Play(value=0, min=0, max=last, step=1, interval=1000, description=_("play"))
        self.step_slider = w.IntSlider(
            value=0, min=0, max=last, description=_("step"), continuous_update=True
        )
        self.back_button = w.Button(description=_("\u25c0 back"), layout=w.Layout(width="80px"))
        self.forward_button = w.Button(description=_("next \u25b6"), layout=w.Layout(width="80px"))
        self.world_slider = w.IntSlider(
            value=world_size,
            min=WORLD_RANGE[0],
            max=WORLD_RANGE[1],
            description=_("ranks"),
            continuous_update=False,
        )
        sizes = sorted(set(SIZES) | {nbytes})
        self.size_dropdown = w.Dropdown(
            options=[(f"{s} B", s) for s in sizes], value=nbytes, description=_("bytes/rank")
        )
        self.run_button = w.Button(description=_("Run"), button_style="primary", icon="play")
        self.status = w.HTML()
        self.caption = w.HTML()
        self.output = w.Output()
        self.play.observe(lambda ch: self._go(ch["new"]), names="value")
        self.step_slider.observe(lambda ch: self._go(ch["new"]), names="value")
        self.back_button.on_click(lambda _: self._go(self.state.step - 1))
        self.forward_button.on_click(lambda _: self._go(self.state.step + 1))
        self.run_button.on_click(lambda _: self.rerun())
        self.widget = w.VBox(
            [
                w.HBox([self.play, self.back_button, self.forward_button, self.step_slider]),
                w.HBox([self.world_slider, self.size_dropdown, self.run_button]),
                self.status,
                self.caption,
                self.output,
            ]
        )
        self._describe_run()
        self.render()

    # ----------------------------------------------------------------- actions
    def _go(self, step: int) -> None:
        """Move to frame ``step`` (clamped), keeping slider and play button in sync."""
        step = min(max(int(step), 0), len(self.drawing) - 1)
        if self._syncing or (step == self.state.step and self.figure is not None):
            return
        self.state.step = step
        for widget in (self.step_slider, self.play):
            if widget.value != step:
                widget.value = step
        self.render()

    def rerun(self) -> None:
        """Run ``runner`` with the widgets' world size and size, then show frame 0."""
        try:
            new = PlayerState(self.world_slider.value, self.size_dropdown.value)
        except ValueError as err:
            self.status.value = f"<b style='color:#b00'>{err}</b>"
            return
        try:
            trace = self.runner(new.world_size, new.nbytes)
            drawing = RingDrawing(trace)
        except Exception as err:  # shown in the widget: a click handler's error is easy to miss
            failed = _("run failed: {error}").format(error=f"{type(err).__name__}: {err}")
            self.status.value = f"<b style='color:#b00'>{failed}</b>"
            return
        self.trace, self.drawing = trace, drawing
        new.num_frames = len(self.drawing)
        self.state = new
        self._syncing = True
        try:
            for widget in (self.step_slider, self.play):
                widget.value = 0
                widget.max = len(self.drawing) - 1
        finally:
            self._syncing = False
        self._describe_run()
        self.render()

    def _describe_run(self) -> None:
        m = self.trace.meta
        self.status.value = _(
            "{concept} on {n} ranks, {nbytes} B per rank, {steps} steps (source: {source})"
        ).format(
            concept=m.get("concept", _("run")),
            n=self.state.world_size,
            nbytes=m.get("nbytes", self.state.nbytes),
            steps=len(self.drawing) - 1,
            source=m.get("source", "?"),
        )

    def render(self) -> None:
        """Draw the current frame into ``self.figure`` and, in a kernel, the output area."""
        self.figure = self.drawing.figure(self.state.step)
        self.caption.value = f"<b>{self.drawing.title(self.state.step)}</b>"
        show_in(self.output, self.figure)
