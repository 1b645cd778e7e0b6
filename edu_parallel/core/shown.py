"""Tables whose headers are shown in the learner's language, while code indexes them in English.

A lesson indexes a table's columns by their English names (``zero_table(r)[["vs DP"]]``) in both
languages, since the Chinese lessons run the same code cells. So a table keeps its English column
names, and only its display (``repr``, ``print``, the HTML Jupyter shows) passes them through
:func:`~edu_parallel.core.i18n._`. The headers are marked ``N_("...")`` where the table is built.

    return shown(pd.DataFrame(rows).set_index(N_("phase")), values=(N_("both phases"),))

* :class:`ShownFrame`: a ``pandas.DataFrame`` that stays one through selection, ``.T``,
  ``.round()``; its data, labels and arithmetic are those of the plain frame;
* :func:`shown`: wrap a frame; its column labels and axis names are translated when shown, and so
  are the row labels listed in ``values`` (text a learner reads, never a value code compares).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from .i18n import _, get_language


class ShownFrame(pd.DataFrame):
    """A DataFrame shown with translated headers (see the module docstring)."""

    _metadata = ["_shown_labels"]
    _shown_labels: Mapping[Any, str] = {}  # label -> the message it is shown as

    @property
    def _constructor(self):  # pandas' subclassing protocol: selections stay ShownFrames
        return ShownFrame

    def translated(self) -> pd.DataFrame:
        """A plain DataFrame with the headers (and listed labels) in the current language."""
        plain = pd.DataFrame(self, copy=False)
        if get_language() == "en":
            return plain
        labels = self._shown_labels  # the built frame's headers, whichever axis they are on now

        def tr(label: Any) -> Any:
            return _(labels[label]) if isinstance(label, str) and label in labels else label

        plain = plain.rename(index=tr, columns=tr)
        plain.index = plain.index.set_names([tr(n) for n in plain.index.names])
        plain.columns = plain.columns.set_names([tr(n) for n in plain.columns.names])
        return plain

    # Shown whole: pandas cuts a cell past 50 characters to "...", and a table of prose (a
    # citation, what a model leaves out) would lose the words the lesson sends the reader to.
    # In the notebook's HTML a long cell wraps inside its column instead.

    def __repr__(self) -> str:
        with pd.option_context("display.max_colwidth", None):
            return repr(self.translated())

    def _repr_html_(self) -> str | None:
        with pd.option_context("display.max_colwidth", None):
            return self.translated()._repr_html_()

    def to_string(self, *args: Any, **kwargs: Any) -> str:  # type: ignore[override]
        with pd.option_context("display.max_colwidth", None):
            return self.translated().to_string(*args, **kwargs)


def shown(
    frame: pd.DataFrame, values: Iterable[str] = (), messages: Mapping[str, str] | None = None
) -> ShownFrame:
    """``frame`` as a :class:`ShownFrame`: its column labels, axis names and the row or column
    labels in ``values`` are shown in the current language; the frame itself is unchanged.
    ``messages``: a label shown through another message than itself (a header whose English
    word is translated differently elsewhere): ``{"buckets": N_("buckets (count)")}``."""
    out = ShownFrame(frame)
    columns = frame.columns
    headers = (
        {v for level in columns.levels for v in level}
        if isinstance(columns, pd.MultiIndex)
        else set(columns)
    )
    names = {*frame.index.names, *columns.names}
    labels = {*headers, *names, *values} - {None}
    out._shown_labels = {label: label for label in labels} | dict(messages or {})
    return out
