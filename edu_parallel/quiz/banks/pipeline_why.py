"""Lesson 10's questions on why, which draw no parameter: what 1F1B changes compared with GPipe
(errata E2) and torch's name for ZB-H1's input-gradient pass.

The bank is ``pipeline.py``. References: Narayanan et al. 2021 (PipeDream-Flush, 1F1B), Qi et al.
2023 (Zero Bubble), torch.distributed.pipelining's ``_ComputationType``.
"""

from __future__ import annotations

from typing import Any

from ...core.i18n import _
from ..questions import MultipleChoice


def q_errata_e2(d: Any, run: Any) -> MultipleChoice:
    """Errata E2: what 1F1B changes compared with GPipe."""
    return MultipleChoice(
        _("What does 1F1B (PipeDream-Flush) change compared with GPipe, for the same P and M?"),
        [
            _("Same bubble; stashed activations drop from M to at most P per stage"),
            _("No bubble: each stage starts a backward as soon as it can, so none idles"),
            _("Half the bubble, with the same activation memory as GPipe per stage"),
            _("Same bubble; stashed activations drop from P to one per stage"),
        ],
        0,
        _(
            "Errata E2: 1F1B starts each microbatch's backward early, so a stage holds at most"
            " P-i microbatches (GPipe: all M). The fill and drain are unchanged, so the bubble"
            " is the same; interleaving or zero-bubble schedules are what shrink it."
        ),
        key="errata_e2",
    )


def q_torch_i_name(d: Any, run: Any) -> MultipleChoice:
    """torch's action name for the input-gradient pass of ZB-H1."""
    return MultipleChoice(
        _(
            "torch.distributed.pipelining writes a schedule's actions as '1F0', '1I0', '1W0'"
            " and '1B0'. In ZB-H1, which one is the pass that must reach stage 0 quickly (it"
            " sends the gradient of the stage's input), while another one waits to fill the"
            " bubble?"
        ),
        [
            _("I: the input gradient; W (weight gradient) is deferred, B is a full backward"),
            _("B: the backward; W is the weight gradient and I is unused"),
            _("W: the weight gradient is on the critical path; I waits"),
            _("F: the forward; ZB-H1 defers the backward B as a whole"),
        ],
        0,
        _(
            "torch's _ComputationType: F forward, I BACKWARD_INPUT, W BACKWARD_WEIGHT, B"
            " FULL_BACKWARD. The Zero Bubble paper calls the input-gradient pass 'B'; written"
            " next to a W under torch's names it would be a full backward, and torch's"
            " validator rejects it."
        ),
        key="torch_i_name",
    )
