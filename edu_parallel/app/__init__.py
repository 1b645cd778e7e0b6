"""The top layer: what a person starts. The command line and the course.

* ``cli.py``: ``edu-parallel`` (run, plan, bench, model, memory, lab, tour, figure): every bad
  option is one line naming the option, the value and the valid range, and exit status 2.
* ``concept.py``, ``comm_concepts.py``, ``training_concepts.py``, ``concepts.py``: what
  ``edu-parallel run NAME`` can run, each checked before any process starts.
* ``model_command.py``, ``memory_command.py``: predictions that start no process.
* ``lab.py``: the lessons in JupyterLab (127.0.0.1, token auth); ``tour.py``: the first lesson in
  a terminal.

May import every other folder; nothing imports it. Building the parser loads no torch.
"""

from __future__ import annotations

from ..core.lazy import lazy_exports

_LAZY = {
    "main": "cli",
    "CONCEPTS": "concepts",
    "Concept": "concept",
    "run_lab": "lab",
    "run_tour": "tour",
}
__getattr__, __dir__, __all__ = lazy_exports(__name__, _LAZY)
