"""What the learner path's browser pass checks on an animated plotly figure, read from the page.

A figure is a ``.js-plotly-plot`` element handle. Before Play, every panel (a cartesian subplot
that holds a visible trace) has drawn marks: bar, marker and line paths (a bar of zero, drawn
flat or as ``M0,0Z``, is no mark), or images. While Play runs, the figure is sampled several
times, and the marks of a layer drawn at frame 0 (a panel's bars, its markers and lines) never
all vanish (lesson 10's Gantt blanked its bars while its cursor went on moving). Neither
play button covers the slider's current-value label ("ent: 0" under the pause button). Page
errors (``pageerror``: an uncaught exception or an unhandled promise rejection) are collected
from the moment :func:`collect_page_errors` is called: during Run All, Play and pause.
"""

from __future__ import annotations

import time
from typing import Any

# marks per panel (subplot id: "xy", "x2y2") and layer ("barlayer", "scatterlayer"): only the
# panels a visible trace is drawn in
_MARKS = """g => {
  const panels = new Set((g._fullData || [])
    .filter(t => t.visible === true && t.xaxis && t.yaxis)
    .map(t => t.xaxis + t.yaxis));
  const drawn = e => {
    if (e.tagName.toLowerCase() === 'image') return true;
    if (['', 'M0,0Z'].includes((e.getAttribute('d') || '').trim())) return false;
    const box = e.getBBox();  // a bar of zero is a flat path: no mark
    return e.closest('.bars') ? box.width > 0.5 && box.height > 0.5 : box.width + box.height > 0;
  };
  const out = {};
  for (const sp of g.querySelectorAll('.cartesianlayer .subplot')) {
    const id = [...sp.classList].find(c => c !== 'subplot');
    if (!panels.has(id)) continue;
    out[id] = {};
    for (const e of sp.querySelectorAll('.overplot path, .overplot image')) {
      const layer = (e.closest('.mlayer') || {classList: ['marks']}).classList[0];
      out[id][layer] = (out[id][layer] || 0) + (drawn(e) ? 1 : 0);
    }
  }
  return out;
}"""

_FRAME = "g => String((g._fullLayout || {})._currentFrame ?? '')"

# the play buttons that cover the slider's current-value label, as "label over text"
_COVERED = """g => {
  const box = e => e.getBoundingClientRect();
  const meet = (a, b) =>
    a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
  const out = [];
  for (const value of g.querySelectorAll('.slider-group > text.slider-label')) {
    if (!(value.textContent || '').trim()) continue;
    for (const button of g.querySelectorAll('.updatemenu-button')) {
      if (meet(box(button), box(value)))
        out.push(`${button.textContent.trim()} over ${value.textContent.trim()}`);
    }
  }
  return out;
}"""


def collect_page_errors(page: Any) -> list[str]:
    """A list that fills with every ``pageerror`` of ``page`` from now on (its message)."""
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error) or repr(error)))
    return errors


def marks(plot: Any) -> dict[str, dict[str, int]]:
    """Drawn marks per panel and layer of the figure, as it is now."""
    return plot.evaluate(_MARKS)


def _vanished(before: dict[str, dict[str, int]], now: dict[str, dict[str, int]]) -> list[str]:
    """The layers ("barlayer in xy") that had marks before and have none now."""
    return [
        f"{layer.removesuffix('layer')} in {panel}"
        for panel, layers in before.items()
        for layer, n in layers.items()
        if n and not now.get(panel, {}).get(layer)
    ]


def _button(plot: Any, words: tuple[str, ...]) -> Any:
    for button in plot.query_selector_all(".updatemenu-button"):
        text = (button.text_content() or "").lower()
        if any(w in text for w in words):
            return button
    return None


def frame_zero_problems(plot: Any, name: str = "figure") -> tuple[list[str], dict]:
    """What the animated figure shows before Play: one line per panel with no marks, and per
    play button over the slider's current-value label; and the marks per panel and layer."""
    plot.scroll_into_view_if_needed()
    first = marks(plot)
    out = [
        f"{name}: panel {p} has no marks at frame 0"
        for p, n in first.items()
        if not any(n.values())
    ]
    return out + [f"{name}: {c}" for c in plot.evaluate(_COVERED)], first


def play_problems(
    plot: Any, samples: int = 6, every_s: float = 0.3, name: str = "figure"
) -> tuple[list[str], bool]:
    """Press Play on an animated figure, sample it ``samples`` times ``every_s`` apart, press
    pause; returns one line per problem seen (a panel with no marks at frame 0, a sample where a
    layer of a panel that was drawn at frame 0, its bars or its markers and lines, has no mark
    left, a play button over the slider's label) and whether the frame moved."""
    out, first = frame_zero_problems(plot, name)
    play = _button(plot, ("▶", "play", "播放"))
    if play is None:
        return [*out, f"{name}: an animation without a Play button"], False
    before = plot.evaluate(_FRAME)
    play.click()
    frames = []
    for k in range(samples):
        time.sleep(every_s)
        gone, frame = _vanished(first, marks(plot)), plot.evaluate(_FRAME)
        frames.append(frame)
        if gone:
            where = ", ".join(gone)
            out.append(f"{name}: no {where} drawn at sample {k + 1} of {samples} (frame {frame})")
    pause = _button(plot, ("❚", "pause", "暂停"))
    if pause is not None:
        pause.click()
        time.sleep(0.3)  # an error of the interrupted animation surfaces now
    return out, any(f != before for f in frames)
