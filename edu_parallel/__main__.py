"""``python -m edu_parallel`` is the ``edu-parallel`` command."""

import sys

from .cli import main

sys.exit(main())
