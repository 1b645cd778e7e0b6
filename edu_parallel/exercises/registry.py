"""Every exercise by lesson number: :data:`EXERCISES` and :func:`get_exercise`."""

from __future__ import annotations

from typing import Any

from ..core.errors import bad_value, one_of
from ..core.lesson_renames import FORMER_EXERCISES
from .problems.broadcast_chain import EXERCISE as BROADCAST_CHAIN
from .problems.bucketed_reducer import EXERCISE as BUCKETED_REDUCER
from .problems.dp_crossover import EXERCISE as DP_CROSSOVER
from .problems.hang_fix import EXERCISE as HANG_FIX
from .problems.mesh_groups import EXERCISE as MESH_GROUPS
from .problems.moe_dispatch import EXERCISE as MOE_DISPATCH
from .problems.one_f_one_b import EXERCISE as ONE_F_ONE_B
from .problems.ring_allreduce import EXERCISE as RING_ALLREDUCE
from .problems.row_parallel import EXERCISE as ROW_PARALLEL
from .problems.tree_reduce import EXERCISE as TREE_REDUCE
from .problems.two_level import EXERCISE as TWO_LEVEL
from .problems.zero1_step import EXERCISE as ZERO1_STEP
from .spec import Exercise

EXERCISES: dict[str, Exercise] = {
    e.id: e
    for e in sorted(
        (
            RING_ALLREDUCE,
            BROADCAST_CHAIN,
            TREE_REDUCE,
            BUCKETED_REDUCER,
            ZERO1_STEP,
            ONE_F_ONE_B,
            ROW_PARALLEL,
            MOE_DISPATCH,
            MESH_GROUPS,
            TWO_LEVEL,
            DP_CROSSOVER,
            HANG_FIX,
        ),
        key=lambda e: e.id,
    )
}


def get_exercise(exercise: str | int | Exercise, fn: Any = None) -> Exercise:
    """The exercise of a lesson: "03", 3 or the :class:`Exercise` itself.

    ``fn``, the learner's function, settles an id that an exercise had before the lessons were
    renumbered (:data:`~edu_parallel.core.lesson_renames.FORMER_EXERCISES`): an edited lesson of
    that time still calls ``check("05", my_bucketed_reducer, cluster)``, and is graded as the
    exercise whose function it names."""
    if isinstance(exercise, Exercise):
        return exercise
    key = exercise
    if isinstance(exercise, int) and not isinstance(exercise, bool):
        key = f"{exercise:02d}"
    name = getattr(fn, "__name__", None)
    if name is not None and FORMER_EXERCISES.get(key) == name:
        named = [e for e in EXERCISES.values() if e.function == name]
        if named:
            return named[0]
    if key not in EXERCISES:
        raise bad_value("exercise", exercise, one_of(EXERCISES))
    return EXERCISES[key]
