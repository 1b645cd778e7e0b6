"""Per-learner order of multiple-choice options: stable for one learner, different across learners.

Two seeds, two jobs:

* a bank's ``seed`` (an int or None) draws the question's *parameters* (ranks, sizes...), so a
  test or a teacher can reproduce a whole quiz;
* the *learner seed* only permutes the options of every :class:`MultipleChoice`. It is, first
  found: the ``learner`` argument of a bank (tests pass one), the environment variable
  ``EDU_PARALLEL_LEARNER`` (any text), or a random id written once to the workspace file
  ``.edu-parallel/learner.json`` (see :mod:`edu_parallel.core.workspace`).

A question's permutation is drawn from SHA-256 of (learner seed, bank name, question key), so
re-running a cell shows the same order, and two learners see the answers in different places. The
bank name is taken without its lesson number (``dp_bucketing_overlap``), so renumbering the lessons
keeps every learner's order.
Letters and indices a learner types refer to the order shown. Answer-position bias in test
writing is well documented (Attali & Bar-Hillel 2003, "Guess where: the position of correct
answers in multiple-choice test items"); shuffling removes it.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import uuid

from ..core.errors import bad_value
from ..core.workspace import state_path

LEARNER_VAR = "EDU_PARALLEL_LEARNER"
LEARNER_FILE = "learner.json"
_made: dict[str, str] = {}  # ids made in this process where the workspace could not be written


def check_learner(learner: object) -> str | None:
    """``learner`` as given to a bank: None (find it) or a non-empty text."""
    if learner is not None and (not isinstance(learner, str) or not learner.strip()):
        raise bad_value("learner", learner, "a non-empty text, or None for this learner's own")
    return learner


def learner_seed() -> str:
    """This learner's seed: ``$EDU_PARALLEL_LEARNER``, else the workspace's saved random id."""
    env = os.environ.get(LEARNER_VAR, "").strip()
    if env:
        return env
    path = state_path(LEARNER_FILE)
    try:
        saved = json.loads(path.read_text()).get("learner")
        if isinstance(saved, str) and saved:
            return saved
    except (OSError, ValueError, AttributeError):
        pass
    key = str(path)
    if key not in _made:
        _made[key] = uuid.uuid4().hex
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps({"learner": _made[key]}) + "\n")
            tmp.replace(path)
        except OSError:  # a read-only folder: the order is stable for this process only
            pass
    return _made[key]


def permutation(n: int, learner: str, bank: str, key: str) -> tuple[int, ...]:
    """The shown order of ``n`` options: position ``i`` shows the bank's option ``order[i]``."""
    number, _, topic = bank.partition("_")
    topic = topic if number.isdigit() and topic else bank  # "06_zero_fsdp" -> "zero_fsdp"
    digest = hashlib.sha256(f"{learner}\x1f{topic}\x1f{key}".encode()).digest()
    order = list(range(n))
    random.Random(int.from_bytes(digest[:8], "big")).shuffle(order)
    return tuple(order)


def learner_draw(bank: str, learner: str) -> int:
    """The seed of ``learner``'s own draw of ``bank``'s parameters (a bank whose questions are
    drawn per learner, :attr:`~edu_parallel.quiz.registry.QuestionSet.per_learner`): stable for one
    learner, different across learners."""
    return int.from_bytes(hashlib.sha256(f"{bank}\x1f{learner}".encode()).digest()[:4], "big")
