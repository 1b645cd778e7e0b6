"""``python -m edu_parallel`` is the ``edu-parallel`` command."""

from .app.cli import entry

entry()
