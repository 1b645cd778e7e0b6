"""What a learner reads in a lesson's plotly figures, checked in the browser: no label on a label.

One check, a function of a page (a lab's lesson cell, or a planted page in
``tests/test_lab_checks_overlap.py``):

- :func:`overlapping_labels`: for every plotly figure in the scope, the bounding boxes of its text
  labels as drawn (annotations, the title and subtitle, axis titles, legend entries, the slider's
  labels and current value, the buttons' labels, text on bars and points) and of its controls
  (the buttons of an update menu, the slider's rail and grip). Two labels that overlap by more
  than :data:`SLACK_PX` in both directions are named, and so is a control that covers a label
  that is not its own, and a point's marker drawn over a data label of another trace (an
  annotation, text on a bar or point; a trace's text on its own markers is meant). A label that
  starts or ends within :data:`EDGE_PX` of the figure's edge (or beyond it) is named too: its
  first or last letter is cut. The boxes are the browser's (``getBoundingClientRect``), so a
  wider Chinese label is measured as drawn.
"""

from __future__ import annotations

from typing import Any

SLACK_PX = 2  # a glyph box is a little taller than its ink: two lines touching are not an overlap
EDGE_PX = 1  # a label closer than this to the figure's left or right edge has its letters cut

OVERLAPS_JS = """(scope, [slack, edge]) => {
  const out = [];
  const LABELS = [
    ['annotation', '.annotation .annotation-text'],
    ['title', 'text.gtitle, text.gtitle-subtitle'],
    ['axis title', 'text[class$="title"][class^="x"], text[class$="title"][class^="y"]'],
    ['legend', '.legend text.legendtext, .legend text.legendtitletext'],
    ['button', '.updatemenu-button text'],
    ['slider', '.slider-group text.slider-label, .slider-group text.slider-current-value'],
    ['bar text', 'text.bartext'],
    ['point text', '.textpoint text'],
  ];
  const CONTROLS = [
    ['button', '.updatemenu-button'],
    ['slider rail', '.slider-group rect.slider-rail-rect'],
    ['slider grip', '.slider-group rect.slider-grip-rect'],
  ];
  // a marker drawn on a data label (a star on a point's number, a triangle on a bar's name)
  const MARKERS = '.scatterlayer path.point';
  const DATA_LABELS = ['annotation', 'bar text', 'point text'];
  const shown = e => {
    for (let n = e; n && n.nodeType === 1; n = n.parentNode) {
      const s = getComputedStyle(n);
      if (s.display === 'none' || s.visibility === 'hidden' || +s.opacity === 0) return false;
    }
    const r = e.getBoundingClientRect();
    return r.width > 0 && r.height > 0;
  };
  const plots = scope.matches && scope.matches('.js-plotly-plot')
    ? [scope] : [...scope.querySelectorAll('.js-plotly-plot')];
  plots.forEach((plot, i) => {
    const title = plot.querySelector('text.gtitle');
    const name = `figure ${i + 1} "${((title && title.textContent) || '').slice(0, 50)}"`;
    const labels = [];
    const taken = new Set();
    for (const [kind, sel] of LABELS) {
      for (const e of plot.querySelectorAll(sel)) {
        if (taken.has(e) || !shown(e)) continue;
        const text = (e.textContent || '').trim();
        if (!text) continue;
        taken.add(e);
        labels.push({kind, text, e, r: e.getBoundingClientRect()});
      }
    }
    const controls = [];
    for (const [kind, sel] of CONTROLS) {
      for (const e of plot.querySelectorAll(sel)) {
        if (!shown(e)) continue;
        const text = (e.textContent || '').trim();
        controls.push({kind, text, e, r: e.getBoundingClientRect()});
      }
    }
    for (const e of plot.querySelectorAll(MARKERS)) {
      if (!shown(e)) continue;
      controls.push({kind: 'marker', text: '', e, r: e.getBoundingClientRect(),
                     trace: e.closest('.trace')});
    }
    const svg = plot.querySelector('.main-svg');
    const frame = svg ? svg.getBoundingClientRect() : null;
    for (const l of frame ? labels : []) {
      if (l.r.left < frame.left + edge || l.r.right > frame.right - edge) {
        const side = l.r.left < frame.left + edge ? 'left' : 'right';
        out.push(`${name}: ${l.kind} '${l.text.slice(0, 40)}' is cut at the figure's ${side} edge`);
      }
    }
    const cut = (a, b) => [Math.min(a.right, b.right) - Math.max(a.left, b.left),
                           Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top)];
    const said = l => `${l.kind} '${l.text.slice(0, 40)}'`;
    for (let a = 0; a < labels.length; a++) {
      for (let b = a + 1; b < labels.length; b++) {
        const [w, h] = cut(labels[a].r, labels[b].r);
        if (w > slack && h > slack) {
          out.push(`${name}: ${said(labels[a])} overlaps ${said(labels[b])} `
                   + `by ${Math.round(w)} x ${Math.round(h)} px`);
        }
      }
    }
    for (const c of controls) {
      for (const l of labels) {
        if (c.e.contains(l.e)) continue;  // a button's own label
        if (c.kind === 'marker' && !DATA_LABELS.includes(l.kind)) continue;
        // a trace's own text on its own markers (a grid's cell, a mesh node's name) is meant
        if (c.kind === 'marker' && c.trace && c.trace.contains(l.e)) continue;
        const [w, h] = cut(c.r, l.r);
        if (w > slack && h > slack) {
          const what = c.text ? `${c.kind} '${c.text.slice(0, 20)}'` : c.kind;
          out.push(`${name}: the ${what} covers ${said(l)} `
                   + `by ${Math.round(w)} x ${Math.round(h)} px`);
        }
      }
    }
  });
  return out;
}"""


def overlapping_labels(
    scope: Any, slack_px: float = SLACK_PX, edge_px: float = EDGE_PX
) -> list[str]:
    """One line per pair of overlapping labels, control over a label, or label cut at the edge,
    in the plotly figures of ``scope`` (an element handle: a cell, a figure, a page's body),
    naming the figure and the labels."""
    return scope.evaluate(OVERLAPS_JS, [slack_px, edge_px])
