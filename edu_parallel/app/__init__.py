"""The top layer: what a person starts. The command line and the course.

* ``cli.py``: ``edu-parallel`` (run, plan, bench, model, memory, lab, tour, figure): every bad
  option is one line naming the option, the value and the valid range, and exit status 2.
* ``concept.py``, ``comm_concepts.py``, ``training_concepts.py``, ``concepts.py``: what
  ``edu-parallel run NAME`` can run, each checked before any process starts.
* ``model_command.py``, ``memory_command.py``: predictions that start no process.
* ``lab.py``: the lessons in JupyterLab (127.0.0.1, token auth), opened on the course index from
  the learner's own copy (``workspace.py``: copy, refresh, ``--reset``); ``tour.py``: the first
  lesson in a terminal.
* ``course.py`` (with ``course_outline.py``, ``course_pages.py``, ``course_links.py``): the course
  as data (lessons in order, the outline's units and errata) and the index, syllabus and errata
  pages and lesson navigation built from it.
* ``landscape.py`` (libraries, backends) and ``landscape_frameworks.py`` (frameworks mapped to
  this course's modules): lesson 13's tables.
* ``export.py`` (with ``export_html.py``, ``export_probe.py``): ``edu-parallel export --html``, the
  lessons executed into a static site that plays with no kernel and no network.

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
