"""The quiz banks' machinery: a bank's checked arguments, its questions as parts, :data:`BANKS`.

A bank is a function ``bank(seed=None, runner=None, learner=None) -> Quiz``. With ``seed=None``
it uses fixed teaching defaults; with an int it draws its parameters (``N`` ranks, ``D``
bytes...) from ``random.Random(seed)``. ``learner`` only orders the options of the
multiple-choice questions (see ``shuffle.py``): None is this learner's own seed. Every numeric
answer is computed by package functions from those parameters, which each question keeps in
``params`` so a test can recompute them.

Each bank is a :class:`QuestionSet`: one ``draw(rng)`` that draws every parameter of the bank in
one go (so a seed gives the same quiz whichever question is read first), then one module-level
function per question, ``question(drawn, run) -> Question``, in the order the quiz asks them
(nanoGPT's one-thing-per-function style). The arguments are checked once, by :class:`BankArgs`;
nothing below checks them again. The banks themselves live in ``banks/``, one module per lesson.

``runner(world_size, nbytes) -> Trace`` runs a ring all-reduce of ``nbytes`` bytes on
``world_size`` ranks; the default, :func:`simulation_runner`, simulates it in-process and a
lesson passes one that runs the real cluster. Other lessons' runners are described in their
bank's module. Later lessons add their banks with :func:`register_bank`.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..core.errors import Checked, Problems, bad_value
from ..core.i18n import _
from ..core.trace import Trace
from ..models.simulation import simulate
from ..plans.ring import ring_allreduce_plan
from .container import Quiz
from .predict import Question
from .shuffle import learner_draw

Runner = Callable[[int, int], Trace]
Bank = Callable[..., Quiz]
# one question of a bank: ``question(drawn, run) -> Question`` (drawn: the bank's parameters)
QuestionFn = Callable[[Any, Callable[..., Any]], Question]
RING_RUNNER = "runner(world_size, nbytes) -> Trace"  # the signature of a ring-lesson runner


def simulation_runner(world_size: int, nbytes: int) -> Trace:
    """Run a ring all-reduce in-process (no worker processes) and return its trace."""
    return simulate(ring_allreduce_plan(world_size), nbytes)[0]


@dataclass(frozen=True)
class BankArgs(Checked):
    """A bank's two arguments, checked together where the bank is called."""

    seed: Any = None
    """None: the lesson's teaching defaults; an int: ``random.Random(seed)`` draws the bank's
    parameters, so a test or a teacher can reproduce the whole quiz."""
    runner: Any = None
    """What the predict-then-run questions run; None: the bank's in-process default."""
    signature: str = RING_RUNNER
    """How the bank calls ``runner``, said in the error when it is not callable."""

    def _check(self) -> list[str]:
        p = Problems()
        seed = self.seed
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            p.add(bad_value("seed", self.seed, _("an int or None")))
        if self.runner is not None and not callable(self.runner):
            valid = _("a callable {signature}, or None").format(signature=self.signature)
            p.add(bad_value("runner", self.runner, valid))
        return p.lines

    def rng(self) -> random.Random | None:
        """A fresh generator for ``seed`` (None for the teaching defaults)."""
        return None if self.seed is None else random.Random(self.seed)


def shared_runs(run: Callable[..., Any]) -> Callable[..., Any]:
    """``run`` that runs each distinct call once: two questions asking for the same run (same
    arguments) share one result, as two widgets of one question share its run."""
    results: dict[Any, Any] = {}

    def once(*args: Any, **kwargs: Any) -> Any:
        key = (args, tuple(sorted(kwargs.items())))
        if key not in results:
            results[key] = run(*args, **kwargs)
        return results[key]

    return once


@dataclass(frozen=True)
class QuestionSet:
    """A bank as parts: how it draws its parameters and one function per question, in order."""

    draw: Callable[[random.Random | None], Any]
    """``draw(rng)``: every parameter of the bank, drawn in one go (None: the teaching defaults)."""
    questions: tuple[QuestionFn, ...]
    """One module-level function per question, ``question(drawn, run)``, in the quiz's order."""
    runner: Callable[..., Any]
    """The in-process runner the questions get when the bank is given none (no processes)."""
    signature: str = RING_RUNNER
    """How the questions call the runner: ``runner(world_size, nbytes) -> Trace`` for the ring."""
    share_runs: bool = False
    """True: questions asking for the same run share one (:func:`shared_runs`)."""
    per_learner: bool = False
    """True: with no seed, the parameters are drawn for the learner (:meth:`seed_for`), not the
    teaching defaults: each learner gets other cases, and no two share an answer key."""

    def seed_for(self, seed: Any, bank: str, learner: str) -> Any:
        """The seed :meth:`build` is given: ``seed``, or for a bank drawn per learner and no
        seed, ``learner``'s own (:func:`~edu_parallel.quiz.shuffle.learner_draw`)."""
        if seed is None and self.per_learner:
            return learner_draw(bank, learner)
        return seed

    def build(self, seed: Any = None, runner: Any = None) -> list[Question]:
        """The bank's questions for ``seed`` and ``runner``, checked once here."""
        args = BankArgs(seed, runner, self.signature)
        drawn = self.draw(args.rng())
        run = args.runner or self.runner
        if self.share_runs:
            run = shared_runs(run)
        return [question(drawn, run) for question in self.questions]


BANKS: dict[str, Bank] = {}
QUESTION_SETS: dict[str, QuestionSet] = {}  # the parts of each bank registered with them


def register_bank(name: str, bank: Bank, questions: QuestionSet | None = None) -> Bank:
    """Add (or replace) a lesson's bank; ``bank(seed=None, runner=None, learner=None)`` must
    return a Quiz. ``questions``, when given, are its parts (a test builds each one alone)."""
    if not isinstance(name, str) or not name.strip():
        raise bad_value("name", name, _("a non-empty lesson name such as '04_tree'"))
    if not callable(bank):
        raise bad_value(
            "bank", bank, _("a callable bank(seed=None, runner=None, learner=None) -> Quiz")
        )
    if questions is not None and not isinstance(questions, QuestionSet):
        raise bad_value("questions", questions, _("a QuestionSet, or None"))
    BANKS[name] = bank
    if questions is not None:
        QUESTION_SETS[name] = questions
    else:
        QUESTION_SETS.pop(name, None)
    return bank


def get_quiz(
    name: str, seed: int | None = None, runner: Runner | None = None, learner: str | None = None
) -> Quiz:
    """Build the quiz of lesson ``name`` from :data:`BANKS`."""
    if name not in BANKS:
        names = ", ".join(repr(k) for k in sorted(BANKS))
        raise bad_value("name", name, _("one of {options}").format(options=names))
    return BANKS[name](seed=seed, runner=runner, learner=learner)
