"""The ring animation: ranks on a circle, their chunks filling up with partial sums, step by step.

:func:`ring_animation` builds a plotly figure with one *frame* per step (plus the input) and a
play button and slider, so it plays in an exported HTML file with no kernel. :class:`RingDrawing`
holds the per-step drawing code; :func:`ring_step_figure` and the ipywidgets player
(:mod:`edu_parallel.viz.player`) reuse it for a single step.

Traces of the figure, in order: 0 cells, 1 reduce arrows, 2 reduce heads, 3 copy arrows,
4 copy heads, 5 arrow labels (these six change per frame), 6 rank names (static).
Cell ``customdata`` is ``[rank, chunk, value]``; arrow-head ``customdata`` is
``[src, dst, chunk, nbytes]``.
"""

from __future__ import annotations

import math
from typing import Any

from ..core.i18n import N_, _
from ..core.trace import Trace
from ..core.width import wrap_text
from .controls import play_controls
from .fit import MODEBAR_PX, title_y, whole_frames
from .model import Arrow, RingFrames, StepView, arrow_hover, build_frames
from .plotly_figure import Figure
from .style import LABEL, MUTED, OP_COLORS, SOFT_INK, WIDTH, text_color

ANIMATED_TRACES = [0, 1, 2, 3, 4, 5]
_MARGIN = dict(l=20, r=20, t=110, b=70)
_ARROW_LEGEND = {
    "reduce": N_("reduce (+): receiver adds"),
    "copy": N_("copy (=): receiver overwrites"),
}


class RingDrawing:
    """Geometry and per-step plotly traces for one trace (see the module docstring)."""

    def __init__(self, trace: Trace, title: str | None = None):
        self.trace = trace
        self.frames: RingFrames = build_frames(trace)
        self.user_title = title
        n, c = self.frames.world_size, self.frames.num_chunks
        self.radius = max((c + 1.6) / (2 * math.sin(math.pi / max(n, 2))), 2.4)
        self.centers = [
            (
                self.radius * math.cos(math.pi / 2 - 2 * math.pi * r / n),
                self.radius * math.sin(math.pi / 2 - 2 * math.pi * r / n),
            )
            for r in range(n)
        ]
        self.half_span = self.radius + c / 2 + 1.2  # x: rows stick out sideways
        self.half_height = self.radius + 1.8  # y: a row plus its rank name
        self.width = int(min(WIDTH, 560 + 36 * n + 6 * n * c))
        plot_px = self.width - _MARGIN["l"] - _MARGIN["r"]
        self.cell_px = 0.92 * plot_px / (2 * self.half_span)
        self.plot_height = round(plot_px * self.half_height / self.half_span)
        self.label_compact, self.font_px = self._fit_labels()
        self.title_lines = lines = max(self.title(i).count("<br>") + 1 for i in range(len(self)))
        # below the modebar: the title's lines, then the colour key
        self.margin = dict(_MARGIN, t=MODEBAR_PX + 6 + 20 * lines + 30)

    @property
    def labels_shown(self) -> str:
        """What the cells print (:meth:`RingFrames.legend_text`): rank sets, counts or nothing."""
        return "none" if not self.font_px else "counts" if self.label_compact else "ranks"

    @property
    def height(self) -> int:
        """The still figure's height (px): the plot and its margins."""
        return self.plot_height + self.margin["t"] + self.margin["b"]

    def __len__(self) -> int:
        return len(self.frames.steps)

    # ----------------------------------------------------------------- geometry
    def cell_xy(self, rank: int, chunk: int) -> tuple[float, float]:
        """Centre of a rank's chunk cell in data coordinates (cells are 1 x 1)."""
        cx, cy = self.centers[rank]
        return cx + chunk - (self.frames.num_chunks - 1) / 2, cy

    def _fit_labels(self) -> tuple[bool, float]:
        """Full contributor sets if they fit in a cell, else counts, else no text (font 0)."""
        fr = self.frames
        longest = max(
            (
                len(fr.label(v, r, k))
                for v in fr.steps
                for r in range(fr.world_size)
                for k in range(fr.num_chunks)
            ),
            default=1,
        )
        font = min(13.0, 0.85 * self.cell_px / (0.62 * max(longest, 1)))
        if font >= 8 or fr.mode == "value":
            return False, font if font >= 6 else 0.0
        font = min(13.0, 0.5 * self.cell_px)
        return True, font if font >= 6 else 0.0

    def _curve(self, a: Arrow) -> tuple[list[float], list[float]]:
        """Points of an arrow from the source cell to the destination cell, leaving and entering
        the (horizontal) rows vertically so it does not cross other cells; ends cut short."""
        k = a.chunk if a.chunk is not None else (self.frames.num_chunks - 1) / 2
        x0, y0 = self.cell_xy(a.src, k)  # type: ignore[arg-type]
        x3, y3 = self.cell_xy(a.dst, k)  # type: ignore[arg-type]
        up0 = _sign(y3 - y0) or -_sign(y0) or 1.0
        up3 = _sign(y0 - y3) or -_sign(y3) or 1.0
        h = 0.8 + 0.4 * abs(y3 - y0) + (0.15 * abs(x3 - x0) if abs(y3 - y0) < 1 else 0.0)
        x1, y1, x2, y2 = x0, y0 + up0 * h, x3, y3 + up3 * h
        pts = []
        for i in range(25):
            t = i / 24
            u = 1 - t
            pts.append(
                (
                    u**3 * x0 + 3 * u * u * t * x1 + 3 * u * t * t * x2 + t**3 * x3,
                    u**3 * y0 + 3 * u * u * t * y1 + 3 * u * t * t * y2 + t**3 * y3,
                )
            )
        cut = 0.72  # keep the ends outside both cells
        while len(pts) > 3 and math.dist(pts[0], (x0, y0)) < cut:
            pts.pop(0)
        while len(pts) > 3 and math.dist(pts[-1], (x3, y3)) < cut:
            pts.pop()
        return [p[0] for p in pts], [p[1] for p in pts]

    # ----------------------------------------------------------------- per-step traces
    def title(self, index: int) -> str:
        """The figure title of frame ``index`` (0 = input)."""
        text = "<br>".join(wrap_text(self.frames.steps[index].title, self.width // 8))
        return f"<b>{self.user_title}</b><br>{text}" if self.user_title else text

    def traces(self, index: int) -> list[Any]:
        """The six animated plotly traces of frame ``index`` (0 = input, k = after step k-1)."""
        import plotly.graph_objects as go

        fr, view = self.frames, self.frames.steps[index]
        xs, ys, colors, texts, hovers, data, edge, width, ink = [], [], [], [], [], [], [], [], []
        for r in range(fr.world_size):
            for k in range(fr.num_chunks):
                x, y = self.cell_xy(r, k)
                xs.append(x)
                ys.append(y)
                colors.append(fr.color(view, r, k))
                texts.append(fr.label(view, r, k, self.label_compact) if self.font_px else "")
                ink.append(text_color(colors[-1]))
                hovers.append(fr.hover(view, r, k))
                data.append([r, k, view.values[r][k]])
                op = view.changed.get((r, k))
                edge.append(OP_COLORS.get(op, MUTED) if op else SOFT_INK)
                width.append(3.5 if op else 1.0)
        cells = go.Scatter(
            x=xs,
            y=ys,
            mode="markers+text",
            text=texts,
            hovertext=hovers,
            hoverinfo="text",
            customdata=data,
            textfont=dict(size=self.font_px or 1, color=ink),
            marker=dict(
                symbol="square", size=self.cell_px, color=colors, line=dict(color=edge, width=width)
            ),
            name="chunks",
            showlegend=False,
        )
        out = [cells]
        lx, ly, lt = [], [], []
        for op in ("reduce", "copy"):
            arrows = [a for a in view.arrows if (a.op == "copy") == (op == "copy")]
            out.extend(self._arrow_traces(arrows, op))
            if fr.world_size <= 8:
                for a in arrows:
                    px, py = self._curve(a)
                    lx.append(px[len(px) * 2 // 5])  # off-centre: crossing arrows keep apart
                    ly.append(py[len(py) * 2 // 5])
                    lt.append(a.text().split(" ", 1)[1] if a.chunk is not None else "")
        out.append(
            go.Scatter(
                x=lx,
                y=ly,
                mode="text",
                text=lt,
                hoverinfo="skip",
                showlegend=False,
                textfont=dict(size=11, color=LABEL),
                name="arrow labels",
            )
        )
        return out

    def _arrow_traces(self, arrows: list[Arrow], op: str) -> list[Any]:
        import plotly.graph_objects as go

        lx: list[float | None] = []
        ly: list[float | None] = []
        hx, hy, angle, data, hover = [], [], [], [], []
        for a in arrows:
            px, py = self._curve(a)
            lx += px + [None]
            ly += py + [None]
            hx.append(px[-1])
            hy.append(py[-1])
            angle.append(math.degrees(math.atan2(px[-1] - px[-2], py[-1] - py[-2])))
            data.append([a.src, a.dst, a.chunk, a.nbytes])
            hover.append(arrow_hover(a))
        color = OP_COLORS[op]
        line = go.Scatter(
            x=lx,
            y=ly,
            mode="lines",
            line=dict(color=color, width=2.5),
            hoverinfo="skip",
            name=_(_ARROW_LEGEND[op]),
            legendgroup=op,
        )
        heads = go.Scatter(
            x=hx,
            y=hy,
            mode="markers",
            hovertext=hover,
            hoverinfo="text",
            customdata=data,
            marker=dict(symbol="arrow", size=16, angle=angle, color=color),
            name=f"{op} heads",
            legendgroup=op,
            showlegend=False,
        )
        return [line, heads]

    def static_traces(self) -> list[Any]:
        """Rank names above each row."""
        import plotly.graph_objects as go

        xs = [c[0] for c in self.centers]
        ys = [c[1] + (-1.0 if c[1] < -1e-6 else 1.0) for c in self.centers]  # outward
        text = [f"<b>rank {r}</b>" for r in range(self.frames.world_size)]
        return [
            go.Scatter(
                x=xs,
                y=ys,
                mode="text",
                text=text,
                hoverinfo="skip",
                showlegend=False,
                textfont=dict(size=13),
                name="ranks",
            )
        ]

    def layout(self, index: int) -> dict[str, Any]:
        """Fixed axes (equal scale), size, title of frame ``index`` and the colour key."""
        axis = dict(range=[-self.half_span, self.half_span], visible=False, fixedrange=True)
        return dict(
            title=dict(
                text=self.title(index),
                x=0.5,
                xanchor="center",
                y=title_y(self.height, self.title_lines),
                yanchor="top",
                yref="container",
                font=dict(size=15),
            ),
            width=self.width,
            height=self.height,
            margin=self.margin,
            xaxis=axis,
            yaxis=dict(
                axis, range=[-self.half_height, self.half_height], scaleanchor="x", scaleratio=1
            ),
            plot_bgcolor="white",
            legend=dict(orientation="h", x=0.5, xanchor="center", y=-0.02),
            annotations=[
                dict(
                    text=self.frames.legend_text(self.labels_shown),
                    xref="paper",
                    yref="paper",
                    x=0.5,
                    y=1.0,
                    xanchor="center",
                    yanchor="bottom",
                    showarrow=False,
                    font=dict(size=11, color=LABEL),
                )
            ],
        )

    def figure(self, index: int) -> Any:
        """A plotly figure of frame ``index`` alone."""
        return Figure(data=self.traces(index) + self.static_traces(), layout=self.layout(index))

    def animation(self) -> Any:
        """The figure with all frames, a play/pause button and a step slider."""
        import plotly.graph_objects as go

        fig = self.figure(0)
        names = [_frame_name(v) for v in self.frames.steps]
        labels = [
            _("input") if v.step < 0 else n for v, n in zip(self.frames.steps, names, strict=True)
        ]
        fig.frames = [
            go.Frame(
                name=names[i],
                data=self.traces(i),
                traces=ANIMATED_TRACES,
                layout=dict(title=dict(text=self.title(i))),
            )
            for i in range(len(self))
        ]
        plot_px = self.width - self.margin["l"] - self.margin["r"]
        controls = play_controls(names, duration_ms=1100, labels=labels, y=-0.06, plot_px=plot_px)
        fig.update_layout(**controls)
        height = self.height + 60
        y = title_y(height, self.title_lines)
        fig.update_layout(margin=dict(self.margin, b=130), height=height, title_y=y)
        return whole_frames(fig)


def _sign(v: float) -> float:
    return 0.0 if abs(v) < 1e-9 else math.copysign(1.0, v)


def _frame_name(view: StepView) -> str:
    return "input" if view.step < 0 else str(view.step + 1)


def ring_animation(trace: Trace, title: str | None = None) -> Any:
    """A plotly figure animating ``trace`` step by step (frames, play button and slider).

    Cells show each rank's chunks (coloured by how many ranks are summed in for the
    ``"powers_of_two"`` input, else by value); arrows show the step's transfers. Plays in an
    exported HTML file (``fig.write_html(path)``) with no kernel.
    """
    return RingDrawing(trace, title).animation()


def ring_step_figure(trace: Trace, step: int, title: str | None = None) -> Any:
    """A plotly figure of one frame: ``step=0`` the input, ``step=k`` after the k-th step."""
    drawing = RingDrawing(trace, title)
    if not 0 <= step < len(drawing):
        raise ValueError(
            _("step={step!r} is not valid: expected an integer in [0, {last}]").format(
                step=step, last=len(drawing) - 1
            )
        )
    return drawing.figure(step)
