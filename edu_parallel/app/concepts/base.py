"""What ``edu-parallel run NAME`` runs: a :class:`Concept`.

A concept adds its own arguments to the parser; :meth:`Concept.prepare` builds the run's
:class:`~edu_parallel.core.dims.ParallelDims` once (:func:`run_dims`) and checks the options
against it once, before any process starts, into a *spec*: what to run, validated. The executor
is built on those dims and ``run(executor, spec)`` runs the spec on it (a local cluster, or this
rank of a torchrun job), trusted: nothing below parses or checks the same values again. It
returns a report with ``to_json_dict()`` and ``trace``; ``render(report)`` is its text.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...core.dims import ParallelDims
from ...core.i18n import _
from ...engine.executor import Executor


def run_dims(launched: int | None, world_size: Any, **degrees: Any) -> ParallelDims:
    """The run's degrees, built (and so validated) once: under torchrun the ``launched`` ranks of
    its ``WORLD_SIZE`` (no local limit), else ``world_size`` local ranks (at most
    ``MAX_LOCAL_WORLD_SIZE``). ``degrees``: dp, tp, pp, ep and the model's shape, checked with
    them (:class:`~edu_parallel.core.dims.ParallelDims`)."""
    if launched is not None:
        return ParallelDims(launched, **degrees)
    return ParallelDims.local(world_size, **degrees)


Setup = Callable[[argparse.Namespace, int | None], tuple[ParallelDims, Any]]


@dataclass(frozen=True)
class Concept:
    """One runnable concept. ``check`` sees the arguments and the run's dims (built from
    ``--world-size``) and returns the spec that ``run`` receives; a concept whose options decide
    the dims (``run 3d``: the degrees with the model's shape; ``run pipeline``: ``--stages``)
    gives ``setup`` instead, which builds both. Either way nothing is parsed or validated
    twice (:meth:`prepare`)."""

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    check: Callable[[argparse.Namespace, ParallelDims], Any] | None  # None: ``setup`` builds
    run: Callable[[Executor, Any], Any]
    render: Callable[[Any], str]
    aliases: tuple[str, ...] = ()
    help_args: dict[str, str] = field(default_factory=dict)  # the placeholders of ``help``
    setup: Setup | None = None  # (args, launched) -> (dims, spec), instead of dims then check

    def __post_init__(self) -> None:
        if (self.check is None) == (self.setup is None):
            raise TypeError(f"concept {self.name!r}: give check or setup, one of them")

    def prepare(self, a: argparse.Namespace, launched: int | None) -> tuple[ParallelDims, Any]:
        """The run's dims and spec, each built and checked once, before any process starts.
        ``launched``: torchrun's ``WORLD_SIZE``, or None for a local cluster."""
        if self.setup is not None:
            return self.setup(a, launched)
        dims = run_dims(launched, a.world_size)
        return dims, self.check(a, dims)  # type: ignore[misc]

    def describe(self) -> str:
        """``help`` in the learner's language (a gettext message, marked ``N_`` where defined)."""
        return _(self.help).format(**self.help_args)


def int_option(p: argparse.ArgumentParser, name: str, default: Any, text: str) -> None:
    """``--name``, an integer option with its help text."""
    p.add_argument(f"--{name}", type=int, default=default, help=text)
