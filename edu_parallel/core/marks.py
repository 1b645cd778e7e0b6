"""Readers of ``mark`` events: the rank x rank traffic of all-to-all exchanges.

Every ``all_to_all_single`` of the MoE layer is followed by a
:data:`~edu_parallel.core.schema.SPLITS_MARK` mark holding the bytes the rank sent to
(``send_bytes[d]``) and received from each peer, and with a subgroup the peers' global ranks
(``peers[d]``). :func:`traffic_matrix` adds them up; a renderer or a report reads the matrix from
the trace, never from the run that wrote it.
"""

from __future__ import annotations

from .errors import check_choice
from .schema import EXCHANGES, SPLITS_MARK
from .trace import Trace


def traffic_matrix(
    trace: Trace, exchange: str = "dispatch", step: int | None = None
) -> list[list[int]]:
    """``[s][d]`` bytes rank s sent to rank d in ``exchange`` (summed over steps, or one ``step``),
    read from the split marks each rank wrote after its ``all_to_all_single`` (global ranks, also
    when the exchange ran in a subgroup). The diagonal is a local copy, not on the wire."""
    check_choice("exchange", exchange, EXCHANGES)
    n = trace.world_size
    m = [[0] * n for _ in range(n)]
    for e in trace.events:
        a = e.attrs or {}
        if e.kind == "mark" and e.op == SPLITS_MARK and a.get("exchange") == exchange:
            if step is None or a.get("step") == step:
                peers = a.get("peers") or range(n)  # group rank -> global rank
                for d, b in zip(peers, a["send_bytes"], strict=True):
                    m[e.rank][d] += b
    return m


def off_diagonal_sent(matrix: list[list[int]]) -> list[int]:
    """Bytes each rank put on the wire: its row without the diagonal (the local copy)."""
    return [sum(b for d, b in enumerate(row) if d != s) for s, row in enumerate(matrix)]
