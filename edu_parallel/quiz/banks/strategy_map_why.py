"""Lesson 01's questions that draw no number: what each strategy splits across the ranks and what
travels between them (U1), which strategy answers which need, and what the measured memory table
says of the outline's claim.

The bank is ``strategy_map.py``. References: Shoeybi et al. 2019 (Megatron-LM); Huang et al. 2019
(GPipe); Lepikhin et al. 2020 (GShard).
"""

from __future__ import annotations

from typing import Any

from ...core.i18n import N_, _
from ..questions import MultipleChoice

# What a learner needs, the strategy that answers it first (0 DP, 1 TP, 2 PP, 3 EP), and why.
NEEDS: tuple[tuple[str, int, str], ...] = (
    (
        N_("the model fits on one GPU, and you want more sequences trained per second"),
        0,
        N_(
            "DP: every rank trains the whole model on its own share of the batch, and the ranks"
            " sum their gradients once per step. It needs the model to fit on one GPU."
        ),
    ),
    (
        N_(
            "one layer's weight matrices are too large for one GPU, and the GPUs of a node share"
            " fast links"
        ),
        1,
        N_(
            "TP: it splits the matrices inside the layer, which PP cannot do (PP keeps each layer"
            " whole). Its traffic sits inside every block, so it stays on the fast links of a node."
        ),
    ),
    (
        N_(
            "the model's layers together are too large for one GPU, and the links between"
            " nodes are slow"
        ),
        2,
        N_(
            "PP: each stage holds some of the layers, and only the activations at a stage's"
            " border travel, to the next stage only: little traffic, fit for slow links."
        ),
    ),
    (
        N_("a mixture-of-experts model whose experts hold most of its parameters"),
        3,
        N_(
            "EP: each rank holds some of the experts, and every token travels to the ranks of"
            " the experts its router picked, then back."
        ),
    ),
)
CHOICES = (
    N_("DP: split the batch"),
    N_("TP: split the weight matrices inside a layer"),
    N_("PP: split the layers"),
    N_("EP: split the experts"),
)


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
            " 1/N of the batch, TP 1/N of W1, b1 and W2 (b2 replicated), PP whole blocks on"
            " one rank each, EP E/N experts per block with the router replicated."
        ),
        key="what_splits",
    )


def q_what_travels(d: Any, run: Any) -> MultipleChoice:
    """What travels between the ranks under each strategy, read off the pictures."""
    return MultipleChoice(
        _("What travels between the ranks in the lesson's run?"),
        [
            _(
                "DP gradients, once after backward; TP activations inside every block, in both"
                " passes; PP activations and their gradients to the next stage; EP tokens"
            ),
            _(
                "DP activations inside every block, in both passes; TP gradients, once after"
                " backward; PP tokens to the ranks of their experts; EP nothing at all"
            ),
            _(
                "DP nothing, as every rank holds the whole model; TP tokens to the ranks of"
                " their experts; PP gradients, once after backward; EP activations"
            ),
            _(
                "All four send only gradients, once after backward; they differ in how many"
                " ranks take part"
            ),
        ],
        0,
        _(
            "Read from the bytes each rank sent, by pass: DP's all-reduce sums the gradients"
            " after backward; TP all-reduces each block's partial outputs in forward and their"
            " gradients in backward; a PP stage sends activations forward and gradients back to"
            " its neighbours only; EP's all-to-all carries tokens to their experts and back, and"
            " a small all-reduce sums the copied router's gradients."
        ),
        key="what_travels",
    )


def q_which_strategy(d: Any, run: Any) -> MultipleChoice:
    """Which strategy answers a need first: why each one exists."""
    need, right, why = NEEDS[d.need]
    return MultipleChoice(
        _("Which strategy answers this need first: {need}?").format(need=_(need)),
        [_(c) for c in CHOICES],
        right,
        _(why),
        params={"need": d.need},
        key="which_strategy",
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
            "Per-rank activation bytes come from the tensors each rank kept for backward: DP"
            " 1/N of them, TP all of the h-wide ones, since every TP rank computes on every"
            " token (lesson 08's sequence parallelism splits those too), PP its own blocks'"
            " (times the microbatches in flight, lesson 10), EP its tokens' and their routing."
            " Whether a strategy saves memory depends on WHAT you count."
        ),
        key="memory_errata",
    )
