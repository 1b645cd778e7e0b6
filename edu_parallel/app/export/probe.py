"""Kernel side of ``edu-parallel export``: what each widget a cell displayed was, and its
kernel-free counterpart.

After a cell displays widgets, the exporter runs :func:`publish_offline_views` in the same kernel
(without touching the history): for each widget view it finds the Python object that owns it (an
object in the namespace or the output history holding a widget of that view), names its kind
(``quiz``, ``exercise panel``, ...) and, where the package offers one, builds a plotly-frames
animation that plays in a static page (a :class:`~edu_parallel.viz.RingPlayer` becomes
:func:`~edu_parallel.viz.ring.RingDrawing.animation` of the same run). The answer is one display
output of :data:`MIMETYPE` that the exporter reads and drops.

Reference: ipywidgets keeps every live widget by ``model_id``
(https://ipywidgets.readthedocs.io/en/stable/examples/Widget%20Low%20Level.html).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

from ...core.i18n import N_

MIMETYPE = "application/vnd.edu-parallel.offline+json"

KINDS = {
    "edu_parallel.quiz.widget.QuizWidget": N_("quiz"),
    "edu_parallel.exercises.feedback.Feedback": N_("exercise panel"),
    "edu_parallel.viz.player.RingPlayer": N_("ring player"),
    "edu_parallel.viz.zero_widget.ZeroWidget": N_("ZeRO memory explorer"),
    "edu_parallel.viz.pipeline_widget.PipelineWidget": N_("pipeline explorer"),
}  # in English; the page's note shows them in its language (html.widget_note)


def _ring_player(owner: Any) -> list[Any]:
    return [owner.drawing.animation()]


# class -> the kernel-free figures that stand for it (plotly figures that play with no kernel)
COUNTERPARTS: dict[str, Callable[[Any], list[Any]]] = {
    "edu_parallel.viz.player.RingPlayer": _ring_player,
}


def _qualname(obj: Any) -> str:
    return f"{type(obj).__module__}.{type(obj).__qualname__}"


def _live_widgets() -> dict[str, Any]:
    from ipywidgets import widgets

    instances = getattr(widgets.widget, "_instances", None)  # ipywidgets 8
    return dict(instances if instances is not None else widgets.Widget.widgets)


def _descendants(widget: Any) -> Iterator[Any]:
    yield widget
    for child in getattr(widget, "children", ()) or ():
        yield from _descendants(child)


def _held_widgets(obj: Any) -> Iterator[Any]:
    """The widgets an object holds: in its attributes, or in lists, tuples or dicts there."""
    from ipywidgets import Widget

    if isinstance(obj, type | ModuleType | Widget):  # a widget's own traits are not a view
        return
    for value in getattr(obj, "__dict__", {}).values():
        if isinstance(value, dict):
            items = list(value.values())
        elif isinstance(value, list | tuple):
            items = list(value)
        else:
            items = [value]
        yield from (item for item in items if isinstance(item, Widget))


def find_owner(view: Any, candidates: list[Any]) -> Any | None:
    """The first candidate that holds ``view`` or a widget inside it, else None."""
    inside = {id(w) for w in _descendants(view)}
    for obj in candidates:
        if any(id(w) in inside for w in _held_widgets(obj)):
            return obj
    return None


def describe(model_id: str, candidates: list[Any]) -> dict[str, Any]:
    """``{"kind": ..., "figures": [plotly JSON, ...]}`` for the widget view ``model_id``."""
    import plotly.io as pio

    view = _live_widgets().get(model_id)
    owner = find_owner(view, candidates) if view is not None else None
    name = _qualname(owner) if owner is not None else ""
    make = COUNTERPARTS.get(name)
    figures = [json.loads(pio.to_json(fig)) for fig in make(owner)] if make else []
    return {"kind": KINDS.get(name, ""), "figures": figures}


def publish_offline_views(model_ids: list[str], execution_count: int | None) -> None:
    """Display one :data:`MIMETYPE` output: ``{model_id: describe(model_id)}``."""
    from IPython import get_ipython
    from IPython.display import publish_display_data

    shell = get_ipython()
    namespace = shell.user_ns if shell is not None else {}
    history = namespace.get("Out", {})
    candidates = [history[execution_count]] if execution_count in history else []
    candidates += [v for k, v in list(namespace.items()) if not k.startswith("_")]
    candidates += list(history.values())
    publish_display_data({MIMETYPE: {m: describe(m, candidates) for m in model_ids}})
