"""``edu-parallel run failure``: a failure of the lab (lesson 16) made to happen, and its diagnosis.

    edu-parallel run failure --case skips_collective --culprit 2 --world-size 4 --timeout 2
    edu-parallel run failure --case deadlock --culprit 1 --timeout 2 --json
    torchrun --standalone --nproc-per-node 2 -m edu_parallel run failure --case sleeps --timeout 3

``--case`` and ``--culprit`` are checked once, against the run's world size, into a
:class:`~edu_parallel.debugging.config.LabCase` (torch-free) before any process starts; the run
provokes that case on the ranks (:func:`~edu_parallel.debugging.cases.provoke`) and reports what
the engine found. The status is 0 when the engine named the kind and the culprit the case
planted, 1 otherwise. Under ``torchrun`` every rank names the culprit (the records travel through
the launcher's store) and rank 0 reports. ``--json`` prints ``case``, ``culprit``, ``expected``,
``kind``, ``culprits``, ``diagnosed``, ``job_failed``, ``elapsed_s``, ``timeout_s``, ``message``
and ``ranks`` (each rank's evidence).
"""

from __future__ import annotations

import argparse

from ... import debugging
from ...core.dims import ParallelDims
from ...core.i18n import N_, _
from ...debugging.config import CASES, LabCase
from .base import Concept


def _failure_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--case",
        default="skips_collective",
        help=_("one of {cases} (default skips_collective)").format(cases=", ".join(CASES)),
    )
    p.add_argument(
        "--culprit",
        type=int,
        default=None,
        help=_("the rank at fault, 0..world size - 1 (default: the last rank)"),
    )


def _failure_check(a: argparse.Namespace, dims: ParallelDims) -> LabCase:
    """The case, and a culprit among the run's ranks: one line naming a bad one."""
    return LabCase(a.case, a.culprit, dims.world_size)


FAILURE = Concept(
    "failure",
    N_("debugging: a failure made to happen on the ranks, and which rank the engine names"),
    _failure_args,
    _failure_check,
    lambda executor, spec: debugging.run_case(executor, spec),
    lambda report: debugging.format_case(report),
)
