"""``edu-parallel export --html``: the lessons executed into a static site that plays with no
kernel and no network.

* ``site.py``: run each lesson in a temporary copy, write the pages (:func:`export_site`);
* ``html.py``: one page from an executed notebook (widgets as notes), and the files every page
  loads, once per site (``plotly.min.js``, ``lab.css``);
* ``probe.py``: what a kernel reports back while a lesson runs.
"""

from __future__ import annotations

__all__: list[str] = []
