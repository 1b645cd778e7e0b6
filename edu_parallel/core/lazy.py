"""A folder's public names, loaded on first use (PEP 562).

A folder whose modules import torch lists its names in a table ``_LAZY = {name: "module"}`` and
hands it to :func:`lazy_exports`. Importing the folder, or a pure module inside it (a schedule, a
formula), then costs nothing; ``from edu_parallel.tensor_parallel import run_tp`` loads the module
that defines ``run_tp`` when it is asked for. ``tests/test_layers.py`` reads the same tables.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_exports(
    package: str, table: dict[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """``(__getattr__, __dir__, __all__)`` for ``package``, whose ``table`` maps each public name
    to the submodule (relative to ``package``) that defines it."""

    def __getattr__(name: str) -> Any:
        if name in table:
            return getattr(importlib.import_module(f"{package}.{table[name]}"), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted(table)

    return __getattr__, __dir__, sorted(table)
