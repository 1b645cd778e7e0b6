"""The course as data, and the pages built from it.

* ``lessons.py``: the lessons in order, what each teaches and shows, the index, syllabus and errata
  pages, and ``python -m edu_parallel.app.course.lessons --write``;
* ``outline.py``: the outline's 19 units and its errata; ``pages.py``: the pages' cells;
  ``links.py``: lesson navigation;
* ``landscape.py`` (libraries, backends) and ``frameworks.py`` (frameworks mapped to this course's
  modules): lesson 15's tables;
* ``notebook_i18n.py``: each lesson's prose in Chinese, per cell id, with source hashes.
"""

from __future__ import annotations

__all__: list[str] = []
