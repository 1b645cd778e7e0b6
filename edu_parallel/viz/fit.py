"""Does a figure fit a notebook's output area, readably? The rules every renderer keeps.

JupyterLab's output area is about 968 px wide with the default theme, so a figure is at most
:data:`MAX_WIDTH_PX` wide (a wider plotly figure scrolls sideways and hides panels; a wider PNG is
shrunk, and its labels with it). Every label is at least :data:`MIN_FONT_PX` tall. Plotly's
modebar (the toolbar, top right, ``.modebar {top: 2px}`` with 22 px buttons in plotly.js) covers
the top :data:`MODEBAR_PX` of a figure, so a title starts below it. The play / pause buttons of an
animation stay clear of the slider and its current-value label. Every frame of an animation names
every trace (:func:`whole_frames`): plotly.js redraws only the traces a frame names, and erases the
other traces of the same kind and subplot, so a frame that moves only a cursor blanks the bars.

:func:`fit_problems` checks a plotly or a matplotlib figure against these rules and returns one line
per problem (empty: it fits). Plotly geometry: paper coordinates span the plot area, the figure's
size less its margins (https://plotly.com/python/reference/layout/); a title with ``yref``
"container" and ``y`` "auto" is centred in the top margin (plotly.js ``src/plots/plots.js``).
Matplotlib
figures display as PNG at 100 dpi (:mod:`edu_parallel.viz.figure`), so 1 pt is 100/72 px.
"""

from __future__ import annotations

import io
import struct
from typing import Any

from ..core.width import width as display_width

MAX_WIDTH_PX = 940  # JupyterLab 4: a 968 px output area gives its output 955 px (Chromium)
MIN_FONT_PX = 11
MODEBAR_PX = 30
DEFAULT_FONT_PX = 12  # plotly's layout.font.size default
LINE_HEIGHT = 1.3  # plotly.js line spacing, in font sizes
BUTTON_PAD_PX = 12  # plotly.js updatemenus: text offset on each side of a button's label
BUTTONS_GAP_PX = 16  # between the pause button and the slider's current-value label
GLYPH_EM = 0.62  # average glyph width of the default font (Open Sans / Arial), in font sizes,
# per display column (core/width.py): a CJK character takes two, about one font size
PNG_DPI = 100
MAX_WIDTH_IN = (MAX_WIDTH_PX - 20) / PNG_DPI  # a matplotlib figure; its tight bbox adds px
LABEL_PT = MIN_FONT_PX * 72 / PNG_DPI + 0.1  # a matplotlib label of 11 px at PNG_DPI


# ------------------------------------------------------------------ helpers renderers share
def title_margin(lines: int, font_px: int = 15, gap_px: int = 12) -> int:
    """Top margin (px) for a title of ``lines`` lines centred in it below the modebar."""
    return int(2 * MODEBAR_PX + LINE_HEIGHT * font_px * lines + 2 * gap_px)


def title_y(height: float, lines: int, font_px: float = 15) -> float:
    """``title.y`` (container, ``yanchor`` "top") that puts a title of ``lines`` lines just below
    the modebar. plotly.js centres a multi-line title on its anchor line's position, so the block
    starts (lines - 1) / 2 lines above it (measured in Chromium, plotly.js 3)."""
    return 1 - (MODEBAR_PX + 6 + (lines - 1) * LINE_HEIGHT * font_px / 2) / height


def buttons_px(labels: list[str], font_px: int = DEFAULT_FONT_PX) -> float:
    """Estimated width (px) of a row of plotly buttons with these labels, from their display
    width (a CJK character takes two columns). Measured in Chromium at 12 px: "▶ play" and
    "❚❚ pause" take 63 and 85 px (estimated 71 and 86), "▶ 播放" and "❚❚ 暂停" 62 and 72 px
    (estimated 71 and 78)."""
    return sum(GLYPH_EM * font_px * display_width(lab) + 2 * BUTTON_PAD_PX + 2 for lab in labels)


def whole_frames(fig: Any) -> Any:
    """Make every frame of ``fig`` name every trace, in the figure's order; returns ``fig``.

    A frame that carries only some traces (``traces=[k]``) leaves the others out of the
    transition, and plotly.js then removes their marks (every bar of a Gantt whose frames move
    only the time cursor). A trace a frame did not carry gets a stub of its type (``{"type":
    "bar"}``): the frame's data is merged into the trace, so the stub changes nothing and the
    trace stays drawn. Frames that already name every trace, or carry no data, are kept."""
    n = len(fig.data)
    frames = list(fig.frames or ())
    if all(_whole(f, n) for f in frames):
        return fig
    stubs = [{"type": t.type} for t in fig.data]
    whole = []
    for frame in frames:
        if _whole(frame, n):
            whole.append(frame)
            continue
        spec = frame.to_plotly_json()
        carried = dict(zip(_frame_traces(frame), spec.get("data", []), strict=False))
        spec["data"] = [carried.get(i, stubs[i]) for i in range(n)]
        spec["traces"] = list(range(n))
        whole.append(spec)
    fig.frames = whole
    return fig


def _whole(frame: Any, n: int) -> bool:
    """Whether a frame names all ``n`` traces, or none (a frame of layout only redraws them all)."""
    return _frame_traces(frame) in ([], list(range(n)))


def _frame_traces(frame: Any) -> list[int]:
    """The trace indices a frame's data goes to (plotly: ``traces``, else 0, 1, ...)."""
    data = frame.get("data") if isinstance(frame, dict) else frame.data
    traces = frame.get("traces") if isinstance(frame, dict) else frame.traces
    return list(traces) if traces is not None else list(range(len(data or ())))


# ------------------------------------------------------------------ the checker
def fit_problems(fig: Any) -> list[str]:
    """Every way ``fig`` (plotly or matplotlib) breaks the rules above, one line each."""
    if hasattr(fig, "to_plotly_json"):
        return _plotly_problems(fig)
    if hasattr(fig, "savefig"):
        return _matplotlib_problems(fig)
    raise ValueError(
        f"fig={type(fig).__name__} is not valid: expected a plotly or matplotlib figure"
    )


def _matplotlib_problems(fig: Any) -> list[str]:
    from matplotlib.text import Text

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=PNG_DPI, bbox_inches="tight")
    width = struct.unpack(">I", buf.getvalue()[16:20])[0]  # PNG IHDR: width, height
    out = [] if width <= MAX_WIDTH_PX else [f"PNG is {width} px wide > {MAX_WIDTH_PX}"]
    for text in fig.findobj(Text):
        px = text.get_fontsize() * PNG_DPI / 72
        if text.get_visible() and text.get_text().strip() and px < MIN_FONT_PX - 0.05:
            out.append(f"text {text.get_text()[:30]!r} is {px:.1f} px < {MIN_FONT_PX}")
    return list(dict.fromkeys(out))  # one line per distinct problem


def _fonts(node: Any, path: str, out: list[tuple[str, float]]) -> None:
    """(path, size) of every font size set anywhere under ``node`` (a plotly JSON dict)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("hoverlabel", "hovertemplate", "customdata", "meta"):
                continue  # shown on hover only, or data
            if key.endswith("font") and isinstance(value, dict) and "size" in value:
                sizes = (
                    value["size"] if isinstance(value["size"], list | tuple) else [value["size"]]
                )
                out.extend((f"{path}.{key}", float(s)) for s in sizes if s is not None)
            _fonts(value, f"{path}.{key}", out)
    elif isinstance(node, list | tuple):
        for i, value in enumerate(node):
            _fonts(value, f"{path}[{i}]", out)


def _columns(layout: dict[str, Any]) -> int:
    """How many distinct x domains (columns of subplots) the layout has."""
    domains = {
        tuple(round(d, 3) for d in ax.get("domain", (0, 1)))
        for key, ax in layout.items()
        if key.startswith("xaxis") and isinstance(ax, dict)
    }
    return max(1, len(domains))


def _title_box(layout: dict[str, Any], title: dict[str, Any], height: float) -> tuple[float, float]:
    """Top and bottom (px from the figure's top) of a plotly title."""
    text = str(title.get("text") or "")
    font = float(title.get("font", {}).get("size") or layout.get("font", {}).get("size") or 15)
    h = LINE_HEIGHT * font * (text.count("<br>") + 1)
    sub = title.get("subtitle", {})
    if sub.get("text"):
        h += LINE_HEIGHT * float(sub.get("font", {}).get("size") or 0.7 * font)
    top_margin = float(layout.get("margin", {}).get("t", 100))
    y, anchor = title.get("y", "auto"), title.get("yanchor", "auto")
    if title.get("yref", "container") != "container":
        return 0.0, 0.0  # paper titles sit above the plot area, not checked
    if y == "auto":
        centre = top_margin / 2
        return centre - h / 2, centre + h / 2
    if anchor == "auto":
        anchor = "top" if y > 2 / 3 else "bottom" if y < 1 / 3 else "middle"
    pos = (1 - float(y)) * height + float(
        title.get("pad", {}).get("t", 0) if anchor == "top" else 0
    )
    top = {"top": pos, "middle": pos - h / 2, "bottom": pos - h}[anchor]
    return top, top + h


def _plotly_problems(fig: Any) -> list[str]:
    spec = fig.to_plotly_json()
    layout = spec["layout"]
    out = []
    width, height = layout.get("width"), layout.get("height") or 450
    if width is None and _columns(layout) > 1:
        out.append(f"{_columns(layout)} columns of panels but no layout.width")
    if width is not None and width > MAX_WIDTH_PX:
        out.append(f"layout.width={width} > {MAX_WIDTH_PX}")
    sizes: list[tuple[str, float]] = []
    _fonts(spec.get("data", []), "data", sizes)
    _fonts(layout, "layout", sizes)
    for frame in spec.get("frames", []):
        _fonts(frame, "frames[*]", sizes)  # one line for all frames
    out += [f"{where}.size={s:g} < {MIN_FONT_PX}" for where, s in sizes if s < MIN_FONT_PX]
    margin = layout.get("margin", {})
    titles = [layout.get("title", {})] + [
        f.get("layout", {}).get("title", {}) for f in spec.get("frames", [])
    ]
    for i, title in enumerate(titles):
        if not title.get("text"):
            continue
        top, bottom = _title_box(layout, {**layout.get("title", {}), **title}, height)
        where = "layout.title" if i == 0 else f"frames[{i - 1}].title"
        if top < MODEBAR_PX - 0.5:
            out.append(
                f"{where} starts {top:.0f} px from the top, under the modebar ({MODEBAR_PX})"
            )
        if bottom > margin.get("t", 100) + 0.5:
            out.append(f"{where} ends {bottom:.0f} px down, below margin.t={margin.get('t', 100)}")
    out += _controls_problems(layout, width or 700, height)
    n = len(spec.get("data", []))
    for i, frame in enumerate(spec.get("frames", [])):
        if not _whole(frame, n):
            out.append(
                f"frames[{i}] carries traces {_frame_traces(frame)} of {n}: the others blank while"
                " it plays (whole_frames)"
            )
            break  # one line: the first partial frame
    return list(dict.fromkeys(out))


def _controls_problems(layout: dict[str, Any], width: float, height: float) -> list[str]:
    """Play buttons overlapping a slider (its current-value label sits at its top left)."""
    margin = {"l": 80, "r": 80, "t": 100, "b": 80} | layout.get("margin", {})
    plot_w = width - margin["l"] - margin["r"]
    plot_h = height - margin["t"] - margin["b"]

    def px(x: float, y: float) -> tuple[float, float]:
        return margin["l"] + x * plot_w, margin["t"] + (1 - y) * plot_h

    out = []
    for menu in layout.get("updatemenus", []):
        if menu.get("type") != "buttons" or menu.get("visible") is False:
            continue
        font = float(menu.get("font", {}).get("size") or DEFAULT_FONT_PX)
        labels = [b.get("label", "") for b in menu.get("buttons", [])]
        w = buttons_px(labels, font) if menu.get("direction") in ("left", "right") else 0.0
        w = w or max(buttons_px([lab], font) for lab in labels)
        h = LINE_HEIGHT * font + 8
        x0, y0 = px(menu.get("x", -0.05), menu.get("y", 1))
        x0 -= {"left": 0, "center": w / 2, "right": w}.get(menu.get("xanchor", "right"), w)
        y0 -= {"top": 0, "middle": h / 2, "bottom": h}.get(menu.get("yanchor", "top"), 0)
        for slider in layout.get("sliders", []):
            sx, sy = px(slider.get("x", 0), slider.get("y", 0))
            sw = slider.get("len", 1) * plot_w
            pad = {"t": 20, "l": 0} | slider.get("pad", {})
            sx += pad["l"]
            # current value (a line of text), then the rail and its tick labels: ~ 3 lines + pad
            sh = pad["t"] + 3 * LINE_HEIGHT * DEFAULT_FONT_PX + 20
            if slider.get("yanchor", "top") != "top":
                sy -= sh / (2 if slider.get("yanchor") == "middle" else 1)
            apart = x0 + w <= sx or sx + sw <= x0 or y0 + h <= sy or sy + sh <= y0
            if not apart:
                out.append(
                    f"play buttons ({x0:.0f}..{x0 + w:.0f} px, {y0:.0f}..{y0 + h:.0f}) overlap the"
                    f" slider ({sx:.0f}..{sx + sw:.0f} px, {sy:.0f}..{sy + sh:.0f})"
                )
    return out


def fit_layout(fig: Any) -> Any:
    """Put ``fig``'s title just below the modebar with room under it, and its slider right of its
    play buttons, and make every frame whole (:func:`whole_frames`); returns ``fig``. The top
    margin grows to hold the tallest title of any frame, and the figure grows with it, so the plot
    area keeps its size."""
    whole_frames(fig)
    layout = fig.layout
    texts = [layout.title.text] + [f.layout.title.text for f in fig.frames if f.layout.title]
    if any(texts):
        font = layout.title.font.size or 15
        lines = max(str(t or "").count("<br>") + 1 for t in texts)
        h = LINE_HEIGHT * font * lines + (LINE_HEIGHT * 12 if layout.title.subtitle.text else 0)
        top = layout.margin.t if layout.margin.t is not None else 100
        need = int(MODEBAR_PX + 6 + h + 16)
        height = layout.height or 450
        if top < need:
            fig.update_layout(margin_t=need, height=height + need - top)
            height += need - top
        y = title_y(height, lines, font)
        fig.update_layout(title=dict(y=y, yref="container", yanchor="top", pad_t=0))
    if layout.sliders and layout.updatemenus and layout.width:
        margin = layout.margin
        plot_w = layout.width - (margin.l if margin.l is not None else 80)
        plot_w -= margin.r if margin.r is not None else 80
        menu = layout.updatemenus[0]
        labels = [b.label or "" for b in menu.buttons]
        need = buttons_px(labels, menu.font.size or DEFAULT_FONT_PX) + BUTTONS_GAP_PX
        need += (menu.x or 0) * plot_w
        for slider in layout.sliders:
            start = (slider.x or 0) * plot_w + (slider.pad.l or 0)
            if need > start:  # never nearer the buttons than its renderer placed it
                slider.pad.l = round((slider.pad.l or 0) + need - start)
    return fig
