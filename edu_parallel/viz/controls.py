"""The controls every animated figure and every widget shares.

* :func:`play_controls`: the play / pause buttons and the frame slider of a plotly figure whose
  frames are named; they run in exported HTML too, without a kernel.
* :func:`show_in` and :class:`WidgetView`: how a widget puts a figure into its output area (only
  inside a kernel, so the widget's state and figures stay testable without a browser) and how it
  displays itself in a notebook.
* :func:`limits`, :func:`error_html`, :func:`kept_html`: what every widget does the same way. A
  widget holds one frozen, checked config (its state) and changes it with
  :func:`dataclasses.replace`; a bad value then raises the config's own one-line message, shown by
  :func:`kept_html` while the last valid state stays; a slider's bounds are the config's limits.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from ..core.i18n import N_, _
from .fit import BUTTONS_GAP_PX, DEFAULT_FONT_PX, buttons_px
from .style import ERROR_HTML

PLAY_LABELS = (N_("▶ play"), N_("❚❚ pause"))
STEP_PREFIX = N_("step: ")


def play_controls(
    names: Sequence[str],
    *,
    duration_ms: int,
    labels: Sequence[str] | None = None,
    prefix: str | None = STEP_PREFIX,
    y: float = -0.06,
    slider_y: float | None = None,
    slider_x: float | None = None,
    plot_px: float | None = None,
    transition_ms: int = 0,
    redraw: bool = True,
    font_size: int | None = None,
) -> dict[str, Any]:
    """``updatemenus`` and ``sliders`` for ``fig.update_layout``: play (one frame every
    ``duration_ms``), pause, and a slider with one step per frame name (``labels`` shown instead
    of the names; ``prefix`` None hides the current value; the default prefix and the buttons'
    labels are translated). ``y`` places the buttons in paper
    coordinates, the slider just above them unless ``slider_y`` says otherwise. The slider starts
    right of the buttons: at ``slider_x`` (paper), or else where the buttons start, padded (its
    ``pad.l``, in px) by the buttons' width in px (:func:`.fit.buttons_px`, from the labels'
    display width: 播放 is wider than "play") and a gap, so that its current-value label is never
    under the pause button, however plotly narrows the plot area for a legend. ``plot_px`` is
    accepted for the callers that pass it; px need no plot width."""
    play = {
        "frame": {"duration": duration_ms, "redraw": redraw},
        "transition": {"duration": transition_ms},
        "fromcurrent": True,
        "mode": "immediate",
    }
    jump = {**play, "frame": {"duration": 0, "redraw": True}, "transition": {"duration": 0}}
    pause = {"frame": {"duration": 0, "redraw": False}, "mode": "immediate"}
    play_labels = [_(label) for label in PLAY_LABELS]
    if prefix == STEP_PREFIX:
        prefix = _(STEP_PREFIX)
    pad_l = 0.0
    if slider_x is None:  # the menu has no font of its own: plotly draws it in the default size
        slider_x, pad_l = 0.0, round(buttons_px(play_labels, DEFAULT_FONT_PX) + BUTTONS_GAP_PX)
    font = {} if font_size is None else {"font": {"size": font_size}}
    current = {"visible": False} if prefix is None else {"prefix": prefix, **font}
    steps = [
        {"label": label, "method": "animate", "args": [[name], jump]}
        for name, label in zip(names, names if labels is None else labels, strict=True)
    ]
    return {
        "updatemenus": [
            {
                "type": "buttons",
                "direction": "left",
                "x": 0.0,
                "y": y,
                "xanchor": "left",
                "yanchor": "top",
                "showactive": False,
                "buttons": [
                    {"label": play_labels[0], "method": "animate", "args": [None, play]},
                    {"label": play_labels[1], "method": "animate", "args": [[None], pause]},
                ],
            }
        ],
        "sliders": [
            {
                "active": 0,
                "x": slider_x,
                "len": 1.0 - slider_x,
                "pad": {"t": 20, "l": pad_l},
                "y": y + 0.02 if slider_y is None else slider_y,
                "yanchor": "top",
                "currentvalue": current,
                **font,
                "steps": steps,
            }
        ],
    }


def show_in(output: Any, figure: Any, clear: bool = True) -> None:
    """Show ``figure`` in ``output`` (an ``ipywidgets.Output``), replacing what it showed (or
    below it: ``clear=False``); does nothing outside a kernel, so a widget can be driven and
    checked without a browser."""
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:  # pragma: no cover - ipywidgets depends on IPython
        return
    if get_ipython() is None:
        return
    with output:
        if clear:
            output.clear_output(wait=True)
        if figure is not None:
            display(figure)


class WidgetView:
    """A widget class whose ``widget`` attribute is its ipywidgets box; notebooks display it."""

    widget: Any

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.widget._repr_mimebundle_(**kwargs)


def limits(config: Any, name: str) -> dict[str, Any]:
    """``{"min": low, "max": high}`` of field ``name``: its bounds in ``config.LIMITS``, the one
    home of the limits the config checks, for a slider or a bounded box."""
    low, high = config.LIMITS[name]
    return {"min": low, "max": high}


def error_html(error: Exception | str) -> str:
    """A one-line error as HTML: bold, red, escaped."""
    return f"<b style='color:{ERROR_HTML}'>{html.escape(str(error), quote=False)}</b>"


def kept_html(error: Exception | str) -> str:
    """The error and that the widget still shows its last valid setting."""
    return _("{error} (showing the last valid setting)").format(error=error_html(error))
