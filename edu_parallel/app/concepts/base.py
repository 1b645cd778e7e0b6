"""What ``edu-parallel run NAME`` runs: a :class:`Concept`.

A concept adds its own arguments to the parser, checks them (against the run's
:class:`~edu_parallel.core.dims.ParallelDims`, built once by the CLI) before any process starts
and returns a *spec*: what to run, validated. ``run(executor, spec)`` runs it on a
:class:`~edu_parallel.engine.executor.Executor` (a local cluster, or this rank of a torchrun job)
and returns a report with ``to_json_dict()`` and ``trace``; ``render(report)`` is its text.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...core.dims import ParallelDims
from ...core.i18n import _
from ...engine.executor import Executor


def requested_world_size(a: argparse.Namespace) -> int:
    """The ``--world-size`` the learner asked for (a concept may derive it from other options)."""
    return a.world_size


@dataclass(frozen=True)
class Concept:
    """One runnable concept; ``check`` sees the arguments and the dims and returns the spec that
    ``run`` receives, so nothing is parsed or validated twice."""

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    check: Callable[[argparse.Namespace, ParallelDims], Any]
    run: Callable[[Executor, Any], Any]
    render: Callable[[Any], str]
    aliases: tuple[str, ...] = ()
    world_size: Callable[[argparse.Namespace], int] = requested_world_size
    help_args: dict[str, str] = field(default_factory=dict)  # the placeholders of ``help``

    def describe(self) -> str:
        """``help`` in the learner's language (a gettext message, marked ``N_`` where defined)."""
        return _(self.help).format(**self.help_args)


def int_option(p: argparse.ArgumentParser, name: str, default: Any, text: str) -> None:
    """``--name``, an integer option with its help text."""
    p.add_argument(f"--{name}", type=int, default=default, help=text)
