"""A plotly figure that shows itself in JupyterLab without loading plotly's renderer machinery.

Every plotly renderer of the package returns a :class:`Figure`: a ``plotly.graph_objects.Figure``
in every respect (``isinstance``, ``update_layout``, ``write_html``, ``show``), except how Jupyter
displays it. A plain figure's first display in a kernel imports ``plotly.io._renderers``, which
imports nbformat, whose JSON-schema validator imports ``rfc3987_syntax``, which builds a grammar
at import: about 1.3 s before the first figure of every lesson appears, spent on a check that the
figure never needs.

Where plotly itself would pick its ``plotly_mimetype`` renderer (an ipykernel shell, no
``PLOTLY_RENDERER``, none of the hosted notebooks plotly detects: Colab, Kaggle, VS Code, ...),
:meth:`Figure._repr_mimebundle_` builds the bundle with that renderer's own class,
alone; ``tests/test_plotly_figure.py`` checks they are equal. Anywhere
else, and once a learner has set ``plotly.io.renderers.default`` to anything else, plotly's own
path runs.
"""

from __future__ import annotations

import os
import sys
from functools import cache
from typing import Any

MIMETYPE = "application/vnd.plotly.v1+json"  # what JupyterLab's plotly extension draws
# environments where plotly's renderer detection picks something other than ``plotly_mimetype``
# (plotly/io/_renderers.py, "Set default renderer")
HOSTED_VARS = (
    "PLOTLY_RENDERER",
    "COLAB_NOTEBOOK_ID",
    "AZURE_NOTEBOOKS_HOST",
    "VSCODE_PID",
    "NTERACT_EXE",
    "COCALC_PROJECT_ID",
    "DATABRICKS_RUNTIME_VERSION",
)
RENDERERS = "plotly.io._renderers"


def plain_mimetype_kernel() -> bool:
    """True where plotly would display through its ``plotly_mimetype`` renderer alone."""
    loaded = sys.modules.get(RENDERERS)
    if loaded is not None:  # plotly's renderers are set up: follow what they say now
        return loaded.renderers.default == "plotly_mimetype"
    if any(var in os.environ for var in HOSTED_VARS) or os.path.exists("/kaggle/input"):
        return False
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return (
        shell is not None
        and type(shell).__name__ == "ZMQInteractiveShell"
        and type(shell).__module__.startswith("ipykernel.")
    )


def mimetype_bundle(fig: Any) -> dict[str, Any]:
    """The bundle plotly's ``plotly_mimetype`` renderer returns for ``fig``, built by that
    renderer's class (``plotly.io._base_renderers``, which needs no nbformat)."""
    from plotly.io._base_renderers import PlotlyRenderer

    return PlotlyRenderer().to_mimebundle(fig.to_dict())


@cache
def figure_class() -> type:
    """The ``go.Figure`` subclass, built at the first figure (plotly loads then, not at import)."""
    import plotly.graph_objects as go

    class PackageFigure(go.Figure):
        """``go.Figure`` that displays as the plotly mimetype without importing nbformat (see
        the module doc)."""

        def _repr_mimebundle_(self, include=None, exclude=None, validate=True, **kwargs):
            if kwargs or not plain_mimetype_kernel():
                return super()._repr_mimebundle_(include, exclude, validate, **kwargs)
            return mimetype_bundle(self)

        def _ipython_display_(self):
            if not plain_mimetype_kernel():
                return super()._ipython_display_()
            from IPython.display import display

            display(mimetype_bundle(self), raw=True)

        def __reduce__(self):  # pickled (and copied) through :func:`Figure`, by its props
            _cls, args = super().__reduce__()
            return (Figure, args)

    PackageFigure.__module__ = __name__
    return PackageFigure


def Figure(*args: Any, **kwargs: Any) -> Any:  # noqa: N802 - it stands for the class
    """A new figure of :func:`figure_class`, built as ``go.Figure(*args, **kwargs)`` is;
    ``make_subplots(..., figure=Figure())`` gives subplots."""
    return figure_class()(*args, **kwargs)
