"""The one script that keeps pausing an animation out of the browser's console, in the lab and in
the offline site.

Pressing pause (or a slider step while Play runs) interrupts Play's ``Plotly.animate`` call;
plotly.js rejects that call's promise with no reason, and its buttons never catch it, so every
pause printed "Uncaught (in promise) undefined" (a ``pageerror``). The animation itself stops as
it should. The figure's JSON cannot change that (every ``mode`` that stops an animation discards
its queued frames, and the last one rejects), so a page-level ``unhandledrejection`` listener
marks exactly that rejection handled: no reason, on a page that shows a plotly animation.

The script is one file, :data:`EXTENSION` ``/static/remoteEntry.<hash>.js``:

* for JupyterLab it is a federated extension (its ``package.json`` names the file, and the file
  registers a plugin container in ``window._JUPYTERLAB`` as a webpack build would); ``edu-parallel
  lab`` adds :data:`LABEXTENSIONS` to the lab's ``extra_labextensions_path``;
* the offline site inlines it in every page (``export/html.py``).

The file's name carries the first 12 hex digits of its SHA-256, as a webpack build's would:
JupyterLab serves extension files as immutable, so a changed script must have a new name
(``tests/test_lab.py`` checks that they agree).
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

LABEXTENSIONS = Path(__file__).resolve().parent / "jupyter_config" / "labextensions"
NAME = "edu-parallel-animations"
EXTENSION = LABEXTENSIONS / NAME


def script_path() -> Path:
    """The script's file, as the extension's ``package.json`` names it."""
    package = json.loads((EXTENSION / "package.json").read_text(encoding="utf-8"))
    return EXTENSION / package["jupyterlab"]["_build"]["load"]


@cache
def script() -> str:
    """The script's text (the offline site inlines it)."""
    return script_path().read_text(encoding="utf-8")


def lab_args() -> list[str]:
    """The JupyterLab option that loads the extension."""
    return [f"--LabApp.extra_labextensions_path={LABEXTENSIONS}"]
