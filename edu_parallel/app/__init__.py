"""The top layer: what a person starts. The command line and the course.

* ``cli.py``: ``edu-parallel`` (run, plan, bench, model, memory, exercise, lab, export, tour,
  figure): every bad option is one line naming the option, the value and the valid range, and exit
  status 2, before any process starts.
* ``concepts/``: what ``edu-parallel run NAME`` can run, one file per family; each concept's
  ``check`` returns one validated, frozen config that its run receives unchanged.
* ``model_command.py``, ``nccl_command.py``, ``memory_command.py``, ``planner_command.py``:
  predictions that start no process; ``exercise_command.py``: the grader in a shell.
* ``lab.py``: the lessons in JupyterLab (127.0.0.1, token auth), opened on the course index from
  the learner's own copy (``workspace.py``: copy, refresh, ``--reset``); ``tour.py``: the first
  lesson in a terminal; ``paths.py``: output paths checked before a run.
* ``course/``: the course as data (lessons in order, the outline's units and errata, lesson 15's
  landscape) and the index, syllabus and errata pages and lesson navigation built from it, with the
  lessons' Chinese prose.
* ``export/``: ``edu-parallel export --html``, the lessons executed into a static site that plays
  with no kernel and no network.
* ``i18n_catalog.py``: the package's gettext catalog (extract, update, compile, check).

May import every other folder; nothing imports it. Building the parser loads no torch.
"""

from __future__ import annotations

from ..core.lazy import lazy_exports

_LAZY = {
    "main": "cli",
    "CONCEPTS": "concepts.registry",
    "Concept": "concepts.base",
    "run_lab": "lab",
    "LESSONS": "course.lessons",
    "export_site": "export.site",
    "run_tour": "tour",
    "libraries_table": "course.landscape",
    "backend_table": "course.landscape",
    "frameworks_table": "course.frameworks",
}
__getattr__, __dir__, __all__ = lazy_exports(__name__, _LAZY)
