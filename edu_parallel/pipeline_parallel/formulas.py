"""The pipeline bubble as the literature writes it, and the times a run retimes with.

Two conventions for the same bubble (ERRATA E3), both exact for GPipe and 1F1B with ``t_comm = 0``
(any t_f, t_b, t_w, any M >= 1; checked against :func:`~edu_parallel.pipeline_parallel.timing.
time_schedule` by the tests):

* share of total time, GPipe (Huang et al. 2019, §2.3): ``(P-1)/(M+P-1)``;
* relative to the ideal (bubble-free) time, Megatron-LM 2021 (Narayanan et al., arXiv 2104.04473,
  §2.2.1): ``(P-1)/M``. They are the same number: ``r = s/(1-s)``.

1F1B (PipeDream-Flush) has the *same* bubble as GPipe; it only bounds the stashed activations
(ERRATA E2). Interleaving v chunks per rank divides the bubble by v: ``(1/v)(P-1)/M`` (§2.2.2;
exact when M is a multiple of P; with ``t_comm > 0`` the run is ``2(Pv-1) t_comm`` longer).
ZB-H1 (Qi et al. 2023, arXiv 2401.10241, §2.1) splits the backward into I (input gradient, the
paper's "B") and W and shrinks the bubble to ``(P-1)(t_f + t_b - t_w)`` per rank: exact when
``M >= P`` and ``t_w <= min(t_f, t_b)``. :func:`default_times` gives a run's times when none are
passed: the paper's T_F = T_B = T_W for ZB-H1 (its §2 assumes equal passes), so its gain shows.
Pure Python.
"""

from __future__ import annotations

from typing import Any

from ..core.errors import check_choice, check_int, check_non_negative, check_positive
from ..core.i18n import N_
from .builders import SCHEDULES


def default_times(schedule: str) -> dict[str, float]:
    """``{"t_f", "t_b", "t_w"}`` a run retimes with when none are given, one full backward =
    two forwards in both. ZB-H1: Qi et al.'s handcrafted schedules assume equal passes, T_F =
    T_B = T_W (arXiv 2401.10241 §2), so I and W each take half of the backward: 1 and 1. The
    others have no W pass to time apart: t_b = 2, t_w = 0 (B costs t_b + t_w either way)."""
    check_choice("schedule", schedule, SCHEDULES)
    if schedule == "zb-h1":
        return {"t_f": 1.0, "t_b": 1.0, "t_w": 1.0}
    return {"t_f": 1.0, "t_b": 2.0, "t_w": 0.0}


def gpipe_bubble(num_ranks: int, num_microbatches: int) -> float:
    """``(P-1)/(M+P-1)``: idle share of total time (GPipe, Huang et al. 2019, §2.3)."""
    p = check_int("num_ranks", num_ranks, 1)
    m = check_int("num_microbatches", num_microbatches, 1)
    return (p - 1) / (m + p - 1)


def megatron_bubble(num_ranks: int, num_microbatches: int) -> float:
    """``(P-1)/M``: bubble time relative to the ideal time (Narayanan et al. 2021, §2.2.1)."""
    p = check_int("num_ranks", num_ranks, 1)
    m = check_int("num_microbatches", num_microbatches, 1)
    return (p - 1) / m


def interleaved_bubble(num_ranks: int, num_microbatches: int, chunks: int) -> float:
    """``(1/v)(P-1)/M``: interleaved 1F1B, relative to ideal time (Narayanan et al. §2.2.2)."""
    v = check_int("chunks", chunks, 1)
    return megatron_bubble(num_ranks, num_microbatches) / v


def bubble_formula(
    name: str,
    num_ranks: int,
    num_microbatches: int,
    chunks: int = 1,
    t_f: float = 1.0,
    t_b: float = 1.0,
    t_w: float = 0.0,
) -> dict[str, Any]:
    """The literature's bubble for schedule ``name``, in both conventions.

    Returns ``bubble_time`` and ``ideal_time`` (per rank), ``share_of_total`` =
    bubble/(bubble+ideal), ``relative_to_ideal`` = bubble/ideal, the ``formula``, its
    ``source`` and ``exact_when`` (the conditions under which :func:`time_schedule` of
    :func:`~edu_parallel.pipeline_parallel.builders.build_schedule` reproduces it exactly; checked
    by the tests). Times are per action: for ``interleaved`` ``t_f``/``t_b`` are those of one model
    chunk."""
    check_choice("name", name, SCHEDULES)
    p = check_int("num_ranks", num_ranks, 1)
    m = check_int("num_microbatches", num_microbatches, 1)
    v = check_int("chunks", chunks, 1)
    t_f, t_b = check_positive("t_f", t_f), check_positive("t_b", t_b)
    t_w = check_non_negative("t_w", t_w)
    work = t_f + t_b + t_w
    if name in ("gpipe", "1f1b"):
        bubble, ideal = (p - 1) * work, m * work
        formula = N_("(P-1)(t_f+t_b+t_w) per rank: (P-1)/(M+P-1) of total, (P-1)/M of ideal")
        source = "GPipe (Huang et al. 2019) §2.3; Narayanan et al. 2021 §2.2.1 (PipeDream-Flush)"
        exact = N_("t_comm = 0, any t_f, t_b, t_w, any M >= 1")
    elif name == "interleaved":
        bubble, ideal = (p - 1) * work, v * m * work
        formula = N_("(P-1)(t_f+t_b+t_w) per rank with chunk times: (1/v)(P-1)/M of ideal")
        source = "Narayanan et al. 2021 (arXiv 2104.04473) §2.2.2"
        exact = N_("t_comm = 0, any t_f, t_b, t_w, M a multiple of P")
    else:
        bubble, ideal = (p - 1) * max(t_f + t_b - t_w, 0.0), m * work
        formula = N_("(P-1)(t_f+t_b-t_w) per rank (ZB-H1)")
        source = "Qi et al. 2023 (arXiv 2401.10241) §2.1, Zero Bubble ZB-H1"
        exact = N_("t_comm = 0, M >= P, t_w <= min(t_f, t_b)")
    return {
        "schedule": name,
        "bubble_time": bubble,
        "ideal_time": ideal,
        "share_of_total": bubble / (bubble + ideal),
        "relative_to_ideal": bubble / ideal,
        "formula": formula,
        "source": source,
        "exact_when": exact,
    }
