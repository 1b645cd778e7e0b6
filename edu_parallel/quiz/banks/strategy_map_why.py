"""Lesson 01's questions on what the strategies split, which draw no parameter: what each one
splits across the ranks (U1) and what the measured memory table says of the outline's claim.

The bank is ``strategy_map.py``. References: Shoeybi et al. 2019 (Megatron-LM), Korthikanti et al.
2022 (sequence parallelism).
"""

from __future__ import annotations

from typing import Any

from ...core.i18n import _
from ..questions import MultipleChoice


def q_what_splits(d: Any, run: Any) -> MultipleChoice:
    """What each strategy splits across the ranks (U1)."""
    return MultipleChoice(
        _("What does each strategy split across the ranks (U1)?"),
        [
            _(
                "DP the batch, TP the weight matrices inside a layer, PP the layers, EP the"
                " experts of a MoE layer"
            ),
            _(
                "DP the weight matrices inside each layer, TP the batch, PP the experts of a"
                " MoE layer, EP the layers"
            ),
            _(
                "DP the layers, TP the optimizer state, PP the batch, EP the tokens' hidden"
                " dimension"
            ),
            _("All four split the batch; they differ only in which collective they use"),
        ],
        0,
        _(
            "The lesson's split picture, read from what each rank held: DP full copies with"
            " 1/N of the batch, TP 1/t of W1, b1 and W2 (b2 replicated), PP whole blocks on"
            " one rank each, EP E/N experts per block with the router replicated."
        ),
        key="what_splits",
    )


def q_memory_errata(d: Any, run: Any) -> MultipleChoice:
    """Errata: does DP 'not save memory' while TP, PP and EP 'split it'?"""
    return MultipleChoice(
        _(
            "The outline says DP 'does not save memory' while TP, PP and EP 'split it'. What"
            " did the measured table show for the lesson's model?"
        ),
        [
            _(
                "Right for parameters only: DP holds 1/N of the activations, TP without"
                " sequence parallelism more than DP"
            ),
            _(
                "Right for both: DP keeps a full copy of parameters and activations, the"
                " other three split both by their degree"
            ),
            _(
                "Wrong for parameters: every strategy holds all of them, and only the"
                " activations are split"
            ),
            _("PP holds no activations: each stage passes them on to the next stage at once"),
        ],
        0,
        _(
            "Per-rank activation bytes come from the tensors autograd saved on each rank: DP"
            " 1/N, TP 1/t of the 4h-wide ones but all of the h-wide ones (TP+SP splits those"
            " along the sequence too and gathers W1's input again in backward: DP's level, for"
            " one more all-gather per block), PP its own blocks (times the microbatches in"
            " flight), EP its tokens plus routing bookkeeping. Memory saving depends on WHAT"
            " you count."
        ),
        key="memory_errata",
    )
