"""What ``edu-parallel run NAME`` runs: one file per family, each a :class:`Concept` whose
``check`` returns one validated, frozen config that the run receives unchanged.

* ``base.py``: :class:`Concept`; ``registry.py``: :data:`CONCEPTS` by name and alias;
* ``comm.py`` (ring, all-reduce, the collectives), ``ddp.py``, ``zero.py`` (ZeRO and FSDP2),
  ``compression.py``, ``async_training.py``, ``tensor_parallel.py``, ``expert_parallel.py``,
  ``pipeline.py``, ``strategy_map.py``, ``parallel_3d.py``.
"""

from __future__ import annotations

__all__: list[str] = []
