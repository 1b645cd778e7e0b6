"""Every lesson's bank, registered: :data:`BANKS`, :data:`QUESTION_SETS` and :func:`get_quiz`
as :mod:`.registry` holds them, once each bank module has been imported.

A bank registers itself when its module is imported (:func:`.registry.register_bank`), and
``edu_parallel.quiz`` loads its names on first use, so ``from edu_parallel.quiz import ring_quiz``
imports one bank. Asking for the registry by lesson name (``get_quiz("03_ring_allreduce")``,
``BANKS``) comes here, which imports them all first.
"""

from __future__ import annotations

import importlib

from .registry import BANKS, QUESTION_SETS, get_quiz

BANK_MODULES = (  # one per lesson bank, in course order
    "tour",
    "strategy_map",
    "collectives",
    "ring",
    "algorithms",
    "nccl",
    "ddp",
    "zero",
    "tensor_parallel",
    "expert_parallel",
    "pipeline",
    "roofline",
    "parallel_3d",
    "compression",
    "async_training",
    "landscape",
    "debugging",
)

for _module in BANK_MODULES:
    importlib.import_module(f"{__package__}.banks.{_module}")

__all__ = ["BANKS", "QUESTION_SETS", "get_quiz"]
