"""The all-reduce algorithms by name: their plans and the bytes each rank sends by the textbook.

:data:`ALGOS` maps a name to its plan builder (``plan(world_size)``); :func:`build_plan` applies
the parameter-server option; :func:`formula_bytes` gives the bytes each rank sends and receives by
each algorithm's formula (:data:`ALLREDUCE_FORMULA_TEXT`), which the runs check against counted
bytes. :func:`plan_allreduce` checks a run's options once and builds its plan once, before any
rank starts: an :class:`AllReduceRun` that the ranks receive and the report reads. The world size
arrives as the run's :class:`~edu_parallel.core.dims.ParallelDims` (validated where the run
started, and trusted here) or as a plain int from the Python API, checked once by the plan builder
(:func:`~edu_parallel.plans.plan.plan_ranks`).
The hierarchical all-reduce needs a node count and is built by
:func:`edu_parallel.plans.hierarchical.hierarchical_allreduce_plan` instead.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..core.dims import ParallelDims
from ..core.errors import bad_value, check_choice, check_int, spelling
from ..core.i18n import N_, _
from ..core.inputs import Buffer
from .layout import SEGMENT_BYTES
from .naive import naive_allreduce_plan, naive_sent_bytes_formula
from .plan import Plan
from .ps import parameter_server_plan, ps_bytes_formula, sharded_parameter_server_plan
from .rabenseifner import rabenseifner_allreduce_plan, rabenseifner_bytes_formula
from .ring import ring_allreduce_plan
from .tree import binary_tree_allreduce_plan as tree_plan
from .tree import double_binary_tree_allreduce_plan as double_tree_plan
from .tree import double_tree_bytes_formula, tree_bytes_formula

ALGOS: dict[str, Callable[[int | ParallelDims], Plan]] = {
    "ring": ring_allreduce_plan,
    "naive": naive_allreduce_plan,
    "tree": tree_plan,  # one heap-numbered binary tree
    "double-tree": double_tree_plan,  # NCCL's two complementary trees
    "ps": parameter_server_plan,  # one server, rank 0
    "ps-sharded": sharded_parameter_server_plan,  # two servers, ranks 0 and 1
    "rabenseifner": rabenseifner_allreduce_plan,  # power-of-two world sizes only
}
PS_ALGOS = ("ps", "ps-sharded")  # the algorithms that take ``servers``
ALLREDUCE_FORMULA_TEXT = {  # N_: shown through _() by the reports
    "ring": "2(N-1)/N * D",
    "naive": N_("root (N-1) * D, others D"),
    "tree": N_("D per tree neighbour: leaf D, inner 3D, root 2D"),
    "double-tree": N_("D/2 per neighbour in each tree, at most 2D"),
    "ps": N_("servers (N+k-2)/k * D, workers D"),
    "ps-sharded": N_("servers (N+k-2)/k * D, workers D"),
    "rabenseifner": "2(N-1)/N * D",
}


def _ps_only(algo: str, servers: int | None) -> None:
    """``servers`` is for the parameter server only."""
    if servers is not None and algo not in PS_ALGOS:
        raise bad_value(
            "servers",
            servers,
            _("no value unless {algo_name} is one of {algos} (it is {algo!r})").format(
                algo_name=spelling("algo"), algos=", ".join(map(repr, PS_ALGOS)), algo=algo
            ),
        )


def check_servers(algo: str, servers: int | None, world_size: int | None = None) -> int | None:
    """``servers`` is for the parameter server only: None, or an integer in [1, world_size]."""
    _ps_only(algo, servers)
    return None if servers is None else check_int("servers", servers, 1, world_size)


def build_plan(algo: str, world_size: int | ParallelDims, servers: int | None = None) -> Plan:
    """The plan of ``algo`` for ``world_size`` ranks (a run's validated dims, or an int the
    builder checks); ``servers`` overrides the PS server count (checked by the builder)."""
    check_choice("algo", algo, ALGOS)
    _ps_only(algo, servers)
    if servers is not None:
        return parameter_server_plan(world_size, servers)
    return ALGOS[algo](world_size)


def formula_bytes(
    algo: str, world_size: int, nbytes: int, servers: int | None = None
) -> dict[str, list[float]]:
    """Bytes each rank sends and receives by the textbook formula (``ALLREDUCE_FORMULA_TEXT``)."""
    n = world_size
    check_choice("algo", algo, ALGOS)
    if algo in PS_ALGOS:
        k = check_servers(algo, servers, n) or (1 if algo == "ps" else min(2, n))
        return ps_bytes_formula(n, nbytes, k)
    if algo == "ring":
        sent = [2 * (n - 1) / n * nbytes] * n
    elif algo == "naive":
        sent = naive_sent_bytes_formula(n, nbytes)
    else:
        table = {
            "tree": tree_bytes_formula,
            "double-tree": double_tree_bytes_formula,
            "rabenseifner": rabenseifner_bytes_formula,
        }
        return table[algo](n, nbytes)
    return {"sent": sent, "recv": list(sent)}


def formula_sent_bytes(
    algo: str, world_size: int, nbytes: int, servers: int | None = None
) -> list[float]:
    """Bytes each rank sends by the textbook formula: ring ``2(N-1)/N*D``, naive root ``(N-1)D``."""
    return formula_bytes(algo, world_size, nbytes, servers)["sent"]


@dataclass(frozen=True)
class AllReduceRun:
    """One all-reduce to run, checked once (:func:`plan_allreduce`): the algorithm, its plan for
    the executor's world size, each rank's buffer, the segment size and the PS server count."""

    algo: str
    plan: Plan
    buffer: Buffer
    segment_bytes: int = SEGMENT_BYTES
    servers: int | None = None


def plan_allreduce(
    world_size: int | ParallelDims,
    size: int | str = "1MiB",
    dtype: str = "float32",
    algo: str = "ring",
    pattern: str = "random",
    seed: int = 0,
    segment_bytes: int = SEGMENT_BYTES,
    servers: int | None = None,
) -> AllReduceRun:
    """Check every option and build the plan, before any rank does anything. ``world_size``: the
    run's :class:`~edu_parallel.core.dims.ParallelDims` (trusted) or a plain int (checked once,
    by the plan builder)."""
    buffer = Buffer(size, dtype, pattern, seed)
    segment_bytes = check_int("segment_bytes", segment_bytes, 1)
    plan = build_plan(algo, world_size, servers)  # rabenseifner: 2^k ranks; servers <= n
    buffer.check_sum(plan.world_size)  # float16 holds 2^16 - 1 of powers of two on 16 ranks? no
    return AllReduceRun(algo, plan, buffer, segment_bytes, servers)
