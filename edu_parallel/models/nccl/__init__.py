"""NCCL 2.30.7's own tuning model: how NCCL picks an (algorithm, protocol) pair and what it costs.

* ``constants.py``: base and hardware latencies, protocol caps and factors (``tuning.cc``);
* ``rules.py``: where each pair runs (:class:`NcclSystem`, ``why_not``);
* ``tuning.py``: the time of each pair (:func:`nccl_time`, ``ncclTopoGetAlgoTime``);
* ``selection.py``: the choice and ``NCCL_ALGO``/``NCCL_PROTO`` (:func:`nccl_choose`);
* ``systems.py``: named clusters (:data:`NCCL_SYSTEMS`).

Pure arithmetic; ``models/`` re-exports the public names.
"""

from __future__ import annotations

__all__: list[str] = []
