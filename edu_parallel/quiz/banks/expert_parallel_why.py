"""Lesson 09's questions on why, which draw no parameter: what the all-to-all volume grows with
(U7), what a hot expert does to the traffic matrix, and why the counts travel first.

The bank is ``expert_parallel.py``. References: Lepikhin et al. 2020 (GShard), Fedus et al. 2021
(Switch Transformers).
"""

from __future__ import annotations

from typing import Any

from ...core.i18n import _
from ..questions import MultipleChoice


def q_a2a_scales_with(d: Any, run: Any) -> MultipleChoice:
    """What the all-to-all volume of one MoE layer grows with (errata U7)."""
    return MultipleChoice(
        _(
            "The outline says expert parallelism 'communicates a lot'. What does the all-to-all"
            " volume of one MoE layer grow with?"
        ),
        [
            _("The activations: tokens × k × hidden size, whatever the number of experts"),
            _("The expert parameters, like the data-parallel all-reduce of the gradients"),
            _("The number of experts E: each expert adds one message of the whole batch"),
            _("Nothing much: tokens stay on their rank and only the router weights move"),
        ],
        0,
        _(
            "Tokens travel, weights do not: each exchange moves at most T·k rows of h values"
            " per rank (fewer with drops). Adding experts adds parameters, not traffic; the"
            " lesson measures the same bytes for E = 4 and 16."
        ),
        key="a2a_scales_with",
    )


def q_hot_column(d: Any, run: Any) -> MultipleChoice:
    """What a skewed router does to the dispatch traffic matrix."""
    return MultipleChoice(
        _(
            "A skewed router sends most tokens to expert 0 (on rank 0), and the capacity factor"
            " is large enough that nothing is dropped. What happens to the dispatch traffic"
            " matrix (row = from, column = to)?"
        ),
        [
            _("Column 0 gets hot: every rank sends most of its rows to rank 0"),
            _("Row 0 gets hot: rank 0 sends most of the dispatch traffic to the others"),
            _("Nothing changes: an all-to-all moves the same bytes between every pair"),
            _("The diagonal gets hot: the tokens stay on the rank that holds them"),
        ],
        0,
        _(
            "Rows are senders, columns receivers: all ranks send to the hot expert's rank,"
            " whose link and compute become the bottleneck. With a small capacity factor the"
            " column is capped instead and tokens are dropped."
        ),
        key="hot_column",
    )


def q_counts_first(d: Any, run: Any) -> MultipleChoice:
    """Why the layer exchanges counts before the tokens."""
    return MultipleChoice(
        _(
            "Why does the layer run a small all_to_all_single of counts before the token"
            " all-to-all?"
        ),
        [
            _("Each receiver must know how many rows arrive from each rank to size its buffer"),
            _("To synchronise the ranks' clocks, so that the trace's timings line up"),
            _("To send each rank's router weights to the ranks that hold its experts"),
            _("It is not needed: all_to_all_single infers the sizes from the tensors it gets"),
        ],
        0,
        _(
            "all_to_all_single with variable splits needs input and output split sizes on every"
            " rank; the sender knows its own, the receiver learns them from the counts exchange"
            " (E integers per rank). Static-shape implementations (GShard on TPU) skip it by"
            " padding every expert buffer to the capacity."
        ),
        key="counts_first",
    )
