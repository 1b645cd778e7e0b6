"""The exercises themselves, one file per algorithm, named for it: each an :class:`Exercise`
(its cases, its judge, its reference solution), listed in ``exercises/registry.py``."""

from __future__ import annotations

__all__: list[str] = []
