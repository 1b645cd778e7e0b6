"""The mesh of a 3D run: its ranks as a grid, who talks in each dimension, and how much, over time.

:func:`mesh_figure` draws the (pp, dp, tp) cube flat: x = pipeline stage, y = data-parallel
replica, the TP ranks of a (stage, replica) cell side by side (Megatron-LM's rank order, Narayanan
et al. 2021, arXiv 2104.04473 §3; :meth:`edu_parallel.core.dims.ParallelDims.coords`). Buttons
TP / PP / DP (/ EP) colour the ranks by their group of that dimension and draw the edges of who
talks in it (:data:`~edu_parallel.viz.mesh_data.EDGE_RULES`), each as wide as the bytes the pair
moved, labelled with them; hovering shows both directions' bytes and the messages. Frames replay
the step's time: each shows the bytes every edge has moved by then, and an edge lights up in the
frame where its events happen. Every number is read off the trace
(:func:`~edu_parallel.viz.mesh_data.mesh_data`, checked against the report); plotly is imported
inside the functions.
"""

from __future__ import annotations

from typing import Any

from ..core.i18n import _
from .controls import play_controls
from .fit import fit_layout
from .mesh_data import EDGE_RULES, MeshData, mesh_data
from .plotly_figure import Figure
from .style import INK, LABEL, PANEL, PANEL_LINE, TITLE_FONT_PX, WIDTH, series_color

Y_STEP = 1.5  # rows (replicas) apart, in x units (TP ranks are 1 apart)
CURVE_POINTS = 15
MARGIN = {"l": 90, "r": 30, "t": 130, "b": 150}
LIT, SEEN, DARK = 1.0, 0.45, 0.12  # edge opacity: active in the frame, talked before, not yet


def format_bytes(n: float) -> str:
    """1536 -> '1.5 KiB', three significant digits (labels stay short)."""
    unit = "B"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            break
        n /= 1024
    return f"{n:.3g} {unit}"


def rank_xy(mesh: MeshData, rank: int) -> tuple[float, float]:
    """Where ``rank`` sits: its stage's cell, its TP place in it, its replica's row."""
    c, tp = mesh.dims.coords(rank), mesh.dims.tp
    return c["pp"] * (tp + 1) + c["tp"], -c["dp"] * Y_STEP


def _curve(p: tuple[float, float], q: tuple[float, float]) -> tuple[list[float], list[float]]:
    """A quadratic Bezier from p to q bulging sideways (overlapping pairs stay apart)."""
    (x0, y0), (x1, y1) = p, q
    dx, dy = x1 - x0, y1 - y0
    bulge = 0.2  # times the length: passes over the ranks between p and q
    cx, cy = (x0 + x1) / 2 - dy * bulge, (y0 + y1) / 2 + dx * bulge
    ts = [i / (CURVE_POINTS - 1) for i in range(CURVE_POINTS)]
    xs = [(1 - t) ** 2 * x0 + 2 * t * (1 - t) * cx + t**2 * x1 for t in ts]
    ys = [(1 - t) ** 2 * y0 + 2 * t * (1 - t) * cy + t**2 * y1 for t in ts]
    return xs, ys


def _group_index(mesh: MeshData, dim: str) -> dict[int, int]:
    return {r: i for i, g in enumerate(mesh.groups(dim)) for r in g}


def _edge_style(
    edge: dict[str, Any], before: dict[str, Any] | None, top: float
) -> tuple[float, float]:
    """(line width, opacity) of an edge that has moved ``edge["bytes"]`` so far."""
    width = 1.0 + 9.0 * edge["bytes"] / top if edge["bytes"] else 1.0
    if not edge["messages"]:
        return width, DARK
    lit = before is None or edge["messages"] > before["messages"]
    return width, LIT if lit else SEEN


def _edge_hover(dim: str, pair: tuple[int, int], edge: dict[str, Any]) -> str:
    a, b = pair
    return (
        f"{dim.upper()}: rank {a} ↔ rank {b}<br>"
        + _("{size} in {n} messages").format(size=format_bytes(edge["bytes"]), n=edge["messages"])
        + f"<br>{a} → {b}: {format_bytes(edge['sent'][a])}"
        f"<br>{b} → {a}: {format_bytes(edge['sent'][b])}"
    )


def _dim_traces(mesh: MeshData, dim: str, visible: bool) -> list[Any]:
    """The edges (one trace each), their labels and the ranks coloured by group, of ``dim``."""
    import plotly.graph_objects as go

    groups, where = mesh.groups(dim), _group_index(mesh, dim)
    edges = mesh.edges(dim)
    top = max((e["bytes"] for d in mesh.shown_dims for e in mesh.edges(d).values()), default=1)
    traces, mx, my, text, hover = [], [], [], [], []
    for pair, edge in sorted(edges.items()):
        xs, ys = _curve(rank_xy(mesh, pair[0]), rank_xy(mesh, pair[1]))
        width, opacity = _edge_style(edge, None, top or 1)
        g = where[pair[0]]
        traces.append(
            go.Scatter(
                x=xs,
                y=ys,
                mode="lines",
                line={"color": series_color(g), "width": width},
                opacity=opacity,
                hoverinfo="skip",
                visible=visible,
                showlegend=False,
                meta={"role": "edge", "dim": dim, "ranks": list(pair), "group": groups[g]}
                | {"bytes": edge["bytes"], "messages": edge["messages"]},
            )
        )
        mx.append(xs[CURVE_POINTS // 2])
        my.append(ys[CURVE_POINTS // 2])
        text.append(format_bytes(edge["bytes"]))
        hover.append(_edge_hover(dim, pair, edge))
    traces.append(
        go.Scatter(
            x=mx,
            y=my,
            mode="markers+text",
            text=text,
            textposition="top center",
            textfont={"size": 11, "color": LABEL},
            marker={"size": 7, "color": LABEL},
            hovertext=hover,
            hoverinfo="text",
            visible=visible,
            showlegend=False,
            meta={"role": "labels", "dim": dim},
        )
    )
    traces.append(_rank_trace(mesh, dim, visible))
    return traces


def _rank_trace(mesh: MeshData, dim: str, visible: bool) -> Any:
    import plotly.graph_objects as go

    n, data = mesh.dims.world_size, mesh.report
    groups, where = mesh.groups(dim), _group_index(mesh, dim)
    sent, msgs = data["per_rank_sent_bytes_by_group"], data["per_rank_messages_by_group"]
    hover = []
    for r in range(n):
        c = mesh.dims.coords(r)
        lines = [
            _("rank {rank}: stage {stage}, replica {replica}, TP rank {tp}").format(
                rank=r, stage=c["pp"], replica=c["dp"], tp=c["tp"]
            )
        ]
        lines.append(_("{dim} group {group}").format(dim=dim.upper(), group=groups[where[r]]))
        lines += [
            _("sent in {dim}: {size} ({n} msgs)").format(
                dim=k.upper(), size=format_bytes(sent[r].get(k, 0)), n=msgs[r].get(k, 0)
            )
            for k in mesh.shown_dims
        ]
        hover.append("<br>".join(lines))
    xy = [rank_xy(mesh, r) for r in range(n)]
    return go.Scatter(
        x=[p[0] for p in xy],
        y=[p[1] for p in xy],
        mode="markers+text",
        text=[f"<b>r{r}</b>" for r in range(n)],
        textfont={"size": 12, "color": "white"},
        marker={
            "size": 34,
            "color": [series_color(where[r]) for r in range(n)],
            "line": {"color": INK, "width": 1},
        },
        hovertext=hover,
        hoverinfo="text",
        visible=visible,
        showlegend=False,
        meta={"role": "ranks", "dim": dim},
    )


def _coords_trace(mesh: MeshData) -> Any:
    """Each rank's (pp, dp, tp) under its marker, in every view."""
    import plotly.graph_objects as go

    n = mesh.dims.world_size
    xy = [rank_xy(mesh, r) for r in range(n)]
    coords = [mesh.dims.coords(r) for r in range(n)]
    return go.Scatter(
        x=[p[0] - 0.22 for p in xy],
        y=[p[1] - 0.34 for p in xy],
        mode="text",
        text=[f"({c['pp']},{c['dp']},{c['tp']})" for c in coords],
        textfont={"size": 11, "color": LABEL},
        hoverinfo="skip",
        showlegend=False,
        meta={"role": "coords"},
    )


def _frame_data(mesh: MeshData, until: float, before: float | None) -> list[Any]:
    """Edge widths, opacities and labels of every dimension at time ``until``."""
    import plotly.graph_objects as go

    top = max((e["bytes"] for d in mesh.shown_dims for e in mesh.edges(d).values()), default=1)
    out = []
    for dim in mesh.shown_dims:
        now = mesh.edges(dim, until)
        then = mesh.edges(dim, before) if before is not None else None
        for pair, edge in sorted(now.items()):
            width, opacity = _edge_style(edge, then[pair] if then else None, top or 1)
            meta = {"role": "edge", "dim": dim, "ranks": list(pair), "bytes": edge["bytes"]}
            out.append(go.Scatter(line={"width": width}, opacity=opacity, meta=meta))
        items = sorted(now.items())
        out.append(
            go.Scatter(
                text=[format_bytes(e["bytes"]) for _p, e in items],
                hovertext=[_edge_hover(dim, p, e) for p, e in items],
            )
        )
    return out


def _title(mesh: MeshData, until: float | None) -> str:
    d = mesh.dims
    head = _("The mesh of {layout}: {n} ranks, (pp, dp, tp)").format(
        layout=mesh.report.get("layout", ""), n=d.world_size
    )
    t0, t1 = mesh.span()
    moved = " · ".join(
        f"{k.upper()} {format_bytes(sum(e['bytes'] for e in mesh.edges(k, until).values()))}"
        for k in mesh.shown_dims
    )
    when = (
        _("whole step")
        if until is None
        else _("t = {t} of {total} ms").format(
            t=f"{1000 * (until - t0):.0f}", total=f"{1000 * (t1 - t0):.0f}"
        )
    )
    return f"{head}<br>" + _("{when} · bytes moved: {moved}").format(when=when, moved=moved)


def _rule_text(dim: str) -> str:
    """The note on which pairs a dimension's edges join: ``"TP: ring neighbours ..."``."""
    return _("{dim}: {rule}, width ∝ bytes").format(dim=dim.upper(), rule=_(EDGE_RULES[dim]))


def mesh_figure(report: Any, trace: Any = None, frames: int = 20) -> Any:
    """The ranks of a 3D run as a grid (plotly), with TP / PP / DP (/ EP) buttons and the step's
    traffic animated over ``frames`` instants. ``report``: a Report3D (its ``.trace`` is read), or
    its ``to_json_dict()`` with ``trace``."""
    import plotly.graph_objects as go

    mesh = mesh_data(report, trace)
    if isinstance(frames, bool) or not isinstance(frames, int) or not 2 <= frames <= 60:
        raise ValueError(
            _("frames={value!r} is not valid: expected an integer in [2, 60]").format(value=frames)
        )
    dims, shown = mesh.dims, mesh.shown_dims
    traces, owner = [_coords_trace(mesh)], ["all"]
    for i, dim in enumerate(shown):
        part = _dim_traces(mesh, dim, visible=i == 0)
        traces += part
        owner += [dim] * len(part)
    fig = Figure(traces)
    t0, t1 = mesh.span()
    times = [t0 + (t1 - t0) * (k + 1) / frames for k in range(frames)]
    times[-1] = t1  # the last frame holds every transfer
    animated = [i for i, t in enumerate(traces) if t.meta["role"] in ("edge", "labels")]
    fig.frames = [
        go.Frame(
            name=str(k),
            data=_frame_data(mesh, t, times[k - 1] if k else t0 - 1.0),
            traces=animated,
            layout={"title": {"text": _title(mesh, t)}},
        )
        for k, t in enumerate(times)
    ]
    cols = (dims.pp - 1) * (dims.tp + 1) + dims.tp - 1  # x of the last rank
    width = int(min(WIDTH, max(640, MARGIN["l"] + MARGIN["r"] + 110 * (cols + 1.6))))
    plot_h = 170 + 130 * (dims.dp - 1)
    plot_w = width - MARGIN["l"] - MARGIN["r"]
    buttons = [
        {
            "label": dim.upper(),
            "method": "update",
            "args": [
                {"visible": [o in ("all", dim) for o in owner]},
                {"annotations[0].text": _rule_text(dim)},
            ],
        }
        for dim in shown
    ]
    controls = play_controls(
        [str(k) for k in range(frames)],
        duration_ms=250,
        labels=[f"{1000 * (t - t0):.0f} ms" for t in times],
        prefix="t = ",
        y=-70 / plot_h,
        plot_px=plot_w,
    )
    controls["sliders"][0]["active"] = frames - 1
    controls["updatemenus"].append(
        {"type": "buttons", "direction": "right", "x": 0, "y": 1, "xanchor": "left"}
        | {"yanchor": "bottom", "pad": {"b": 6}, "active": 0, "buttons": buttons}
    )
    fig.update_layout(
        **controls,
        title={"text": _title(mesh, None), "font": {"size": TITLE_FONT_PX}},
        width=width,
        height=int(plot_h + MARGIN["t"] + MARGIN["b"]),
        margin=MARGIN,
        plot_bgcolor="white",
        annotations=[
            {
                "text": _rule_text(shown[0]),
                "xref": "paper",
                "yref": "paper",
                "x": 1,
                "y": 1,
                "xanchor": "right",
                "yanchor": "bottom",
                "yshift": 8,
                "showarrow": False,
                "font": {"size": 12},
            }
        ],
        xaxis={
            "tickvals": [s * (dims.tp + 1) + (dims.tp - 1) / 2 for s in range(dims.pp)],
            "ticktext": [_("stage {stage}").format(stage=s) for s in range(dims.pp)],
            "range": [-0.8, cols + 0.8],
            "showgrid": False,
            "zeroline": False,
            "fixedrange": True,
        },
        yaxis={
            "tickvals": [-d * Y_STEP for d in range(dims.dp)],
            "ticktext": [_("replica {replica}").format(replica=d) for d in range(dims.dp)],
            "range": [-(dims.dp - 1) * Y_STEP - 0.8, 0.8],
            "showgrid": False,
            "zeroline": False,
            "fixedrange": True,
        },
    )
    for s in range(dims.pp):
        for d in range(dims.dp):
            x0 = s * (dims.tp + 1)
            fig.add_shape(
                type="rect",
                x0=x0 - 0.45,
                x1=x0 + dims.tp - 0.55,
                y0=-d * Y_STEP - 0.5,
                y1=-d * Y_STEP + 0.5,
                line={"color": PANEL_LINE, "width": 1},
                fillcolor=PANEL,
                layer="below",
            )
    return fit_layout(fig)
