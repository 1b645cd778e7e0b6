"""``edu-parallel export --html``: the lessons executed into a static site that plays with no
kernel and no network.

* ``plan.py``: every argument checked once, before any lesson runs (:class:`SitePlan`);
* ``site.py``: run each lesson in a temporary copy, write the pages (:func:`export_site`);
* ``index.py``: the index of each language, its links to the pages the site holds;
* ``html.py``: one page from an executed notebook (widgets as notes), and the files every page
  loads, once per site (``plotly.min.js``, ``lab.css``);
* ``probe.py``: what a kernel reports back while a lesson runs.
"""

from __future__ import annotations

__all__: list[str] = []
