"""``python -m edu_parallel`` is the ``edu-parallel`` command."""

import sys

from .app.cli import main

sys.exit(main())
