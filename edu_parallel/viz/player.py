"""An ipywidgets player for the ring: step through a run, change the ranks or the size, re-run.

:class:`PlayerState` is the thin state (world size, bytes, current frame): one frozen config,
checked when built and changed with :func:`dataclasses.replace`; :class:`RingPlayer` wires widgets
to it (the slider's bounds are the config's :attr:`~PlayerState.LIMITS`) and draws the current
frame with :class:`~edu_parallel.viz.ring.RingDrawing` (the same code as the exported animation).
The ``runner`` is any ``(world_size, nbytes) -> Trace`` callable: the real engine or the
simulation. Everything is driven from Python, so tests set slider values and call
``button.click()``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from ..core.dims import MAX_LOCAL_WORLD_SIZE
from ..core.errors import Checked, Problems, check_int
from ..core.i18n import _
from ..core.trace import Trace
from .controls import WidgetView, error_html, limits, show_in
from .model import SNAPSHOT_BYTES
from .ring import RingDrawing


@dataclass(frozen=True)
class PlayerState(Checked):
    """The player's setting, checked once when built: a bad value raises one ValueError naming
    the field, the value and the valid range (every bad field at once)."""

    LIMITS: ClassVar[dict[str, tuple[int, int]]] = {
        "world_size": (2, MAX_LOCAL_WORLD_SIZE),  # a ring of one rank sends nothing
        "nbytes": (1, SNAPSHOT_BYTES),
    }
    """Ranks of a local cluster; bytes per rank whose values a run records (and the player
    animates)."""

    world_size: int = 4
    """Ranks in the ring, in ``LIMITS["world_size"]``."""
    nbytes: int = 64
    """Bytes per rank, in ``LIMITS["nbytes"]``."""
    step: int = 0
    """The frame shown: 0 = the input, k = after the k-th step; below ``num_frames``."""
    num_frames: int | None = None
    """Frames of the current run (None: not known yet, ``step`` unbounded)."""

    def _check(self) -> list[str]:
        p = Problems()
        for name, (low, high) in self.LIMITS.items():
            self._field(p, name, check_int, low, high)
        frames = None
        if self.num_frames is not None:
            frames = self._field(p, "num_frames", check_int, 1)
        self._field(p, "step", check_int, 0, None if frames is None else frames - 1)
        return p.lines


# the sizes the player offers: 4 B, then four times more, up to what its runs record
SIZES = [4**k for k in range(1, 7) if 4**k <= SNAPSHOT_BYTES]


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
        state = PlayerState(world_size, nbytes)
        self.trace: Trace = runner(state.world_size, state.nbytes)
        self.drawing = RingDrawing(self.trace)
        self.state = replace(state, num_frames=len(self.drawing))
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
            value=state.world_size,
            **limits(PlayerState, "world_size"),
            description=_("ranks"),
            continuous_update=False,
        )
        sizes = sorted(set(SIZES) | {state.nbytes})
        self.size_dropdown = w.Dropdown(
            options=[(f"{s} B", s) for s in sizes], value=state.nbytes, description=_("bytes/rank")
        )
        self.run_button = w.Button(description=_("Run"), button_style="primary", icon="play")
        self.status = w.HTML()
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
                self.output,  # the figure's own title says which step it shows
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
        self.state = replace(self.state, step=step)
        for widget in (self.step_slider, self.play):
            if widget.value != step:
                widget.value = step
        self.render()

    def rerun(self) -> None:
        """Run ``runner`` with the widgets' world size and size, then show frame 0."""
        try:
            new = replace(
                self.state,
                world_size=self.world_slider.value,
                nbytes=self.size_dropdown.value,
                step=0,
                num_frames=None,
            )
        except ValueError as err:
            self.status.value = error_html(err)
            return
        try:
            trace = self.runner(new.world_size, new.nbytes)
            drawing = RingDrawing(trace)
        except Exception as err:  # shown in the widget: a click handler's error is easy to miss
            failed = _("run failed: {error}").format(error=f"{type(err).__name__}: {err}")
            self.status.value = error_html(failed)
            return
        self.trace, self.drawing = trace, drawing
        self.state = replace(new, num_frames=len(self.drawing))
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
        show_in(self.output, self.figure)
