"""Plans: every algorithm as pure data that the engine interprets and the models simulate.

* ``plan.py``: :class:`Plan`, :class:`Step`, :class:`Transfer` and the text form;
  ``checker.py``: the symbolic checker and the rank x step grid; ``arrays.py``: a plan as NumPy
  columns for simulations of thousands of ranks; ``layout.py``: how a plan cuts a buffer.
* One file per algorithm, with its citation: ``ring.py``, ``naive.py``, ``tree.py`` (binary and
  NCCL's double binary tree), ``ps.py`` (parameter servers), ``rabenseifner.py``,
  ``hierarchical.py``; ``collectives.py``: the other seven collectives; ``algorithms.py``: the
  all-reduce algorithms by name with their byte formulas.

Imports only ``core/``; never torch.
"""

from __future__ import annotations

from .algorithms import (
    ALGOS,
    ALLREDUCE_FORMULA_TEXT,
    PS_ALGOS,
    AllReduceRun,
    build_plan,
    check_servers,
    formula_bytes,
    formula_sent_bytes,
    plan_allreduce,
)
from .arrays import PlanArrays
from .checker import check_plan, explain, holdings_after_each_step, validate
from .collectives import (
    CLI_NAMES,
    COLLECTIVE_PLANS,
    CollectiveRun,
    chain_broadcast_plan,
    chain_reduce_plan,
    defined_chunks,
    direct_all_to_all_plan,
    direct_gather_plan,
    direct_scatter_plan,
    plan_collective,
    ring_all_gather_plan,
    ring_reduce_scatter_plan,
    volume_formula,
)
from .hierarchical import (
    channel_ring_allreduce_plan,
    hierarchical_allreduce_plan,
    hierarchical_bytes_formula,
)
from .layout import chunk_bytes, plan_meta
from .naive import naive_allreduce_plan, naive_sent_bytes_formula
from .plan import (
    COLLECTIVES,
    MAX_PLAN_RANKS,
    OPS,
    REDUCTIONS,
    ROOTED,
    Plan,
    PlanError,
    Problem,
    Step,
    Transfer,
)
from .ps import parameter_server_plan, ps_bytes_formula, sharded_parameter_server_plan
from .rabenseifner import rabenseifner_allreduce_plan, rabenseifner_bytes_formula
from .ring import ring_allreduce_plan, ring_sent_bytes_formula
from .tree import (
    binary_tree_allreduce_plan,
    double_binary_tree_allreduce_plan,
    double_tree_bytes_formula,
    tree_bytes_formula,
)

__all__ = [
    "ALGOS",
    "AllReduceRun",
    "CLI_NAMES",
    "CollectiveRun",
    "ALLREDUCE_FORMULA_TEXT",
    "COLLECTIVES",
    "COLLECTIVE_PLANS",
    "MAX_PLAN_RANKS",
    "OPS",
    "PS_ALGOS",
    "REDUCTIONS",
    "ROOTED",
    "Plan",
    "PlanArrays",
    "PlanError",
    "Problem",
    "Step",
    "Transfer",
    "binary_tree_allreduce_plan",
    "build_plan",
    "chain_broadcast_plan",
    "chain_reduce_plan",
    "check_plan",
    "check_servers",
    "chunk_bytes",
    "defined_chunks",
    "direct_all_to_all_plan",
    "direct_gather_plan",
    "direct_scatter_plan",
    "double_binary_tree_allreduce_plan",
    "double_tree_bytes_formula",
    "explain",
    "formula_bytes",
    "formula_sent_bytes",
    "hierarchical_allreduce_plan",
    "hierarchical_bytes_formula",
    "channel_ring_allreduce_plan",
    "holdings_after_each_step",
    "naive_allreduce_plan",
    "naive_sent_bytes_formula",
    "parameter_server_plan",
    "plan_allreduce",
    "plan_collective",
    "plan_meta",
    "ps_bytes_formula",
    "rabenseifner_allreduce_plan",
    "rabenseifner_bytes_formula",
    "ring_all_gather_plan",
    "ring_allreduce_plan",
    "ring_reduce_scatter_plan",
    "ring_sent_bytes_formula",
    "sharded_parameter_server_plan",
    "tree_bytes_formula",
    "validate",
    "volume_formula",
]
