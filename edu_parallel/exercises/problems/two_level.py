"""Exercise 05: a two-level (hierarchical) all-reduce on pretend nodes.

``my_two_level_allreduce(ctx, x, node, rail)`` sums every rank's ``x`` as ``dist.all_reduce``
does, split in two levels for nodes of ``g`` GPUs as Horovod's hierarchical all-reduce does it
(``horovod/common/ops/nccl_operations.cc``, ``NCCLHierarchicalAllreduce::Execute``: "NCCL
ReduceScatter - Parallelized MPI Allreduce - NCCL Allgather") and as the 2D-torus all-reduce of
Mikami et al. 2018 (arXiv 1811.05233) does on a grid:

1. **reduce-scatter inside the node** (``node``, the ``g`` ranks of this rank's node): each local
   rank ends with its ``1/g`` shard of the node's sum;
2. **all-reduce the shard across nodes** (``rail``, the ``K`` ranks with this local rank, one per
   node): every local rank uses its own NIC, so all ``g`` NICs of a node work at once;
3. **all-gather inside the node**: every rank gets every shard back.

Per rank, ``2(K-1)/K · S/g`` bytes cross nodes, ``g`` times less than a "leader" scheme that
all-reduces the whole buffer from one rank per node over one NIC of ``g`` (``2(K-1)/K · S`` on
that NIC, nothing on the others).

The harness makes the groups (every rank calls ``new_group`` for every group in one order, as
``torch.distributed`` requires) with ranks numbered node-major: node ``k`` holds ranks
``k·g .. k·g+g-1``. Graded on the result (``dist.all_reduce`` on the same input, exact: the inputs
are powers of two) and on the bytes each rank sends across nodes, read from the trace: a ring
collective's bytes (:func:`~edu_parallel.core.metrics.ring_sent_bytes`) when the rank's successor in
the group's ring is on another node, and point-to-point sends to another node.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from ...core.i18n import N_, _
from ...core.metrics import ring_sent_bytes
from ...core.trace import Trace
from ...core.units import format_bytes
from ...engine.context import ALL_GATHER, REDUCE_SCATTER, RankContext
from ...viz.figure import new_figure
from ..checks import tensor_result
from ..inputs import builtin_on_input, case_input
from ..spec import Case, Exercise, Finding, RankOutcome

RING_OPS = ("all_reduce", "reduce_scatter", "all_gather")


def two_level_allreduce(ctx, x, node, rail):
    """The reference solution: reduce-scatter in the node, all-reduce the shard across nodes,
    all-gather in the node."""
    g = dist.get_world_size(node)  # GPUs per node
    shard = torch.empty(x.numel() // g, dtype=x.dtype)
    ctx.collective(REDUCE_SCATTER, shard, x, group=node)  # 1. my 1/g of my node's sum
    ctx.collective("all_reduce", shard, group=rail)  # 2. across nodes, over my own NIC
    ctx.collective(ALL_GATHER, x, shard, group=node)  # 3. every shard back to every rank
    return x


# ----------------------------------------------------------------------------- the layout
def shape(case: Case) -> tuple[int, int]:
    """(K nodes, g ranks per node)."""
    k = case.option("nodes")
    return k, case.world_size // k


def node_ranks(case: Case, k: int) -> list[int]:
    g = shape(case)[1]
    return list(range(k * g, (k + 1) * g))


def rail_ranks(case: Case, local: int) -> list[int]:
    nodes, g = shape(case)
    return [k * g + local for k in range(nodes)]


def target_bytes(case: Case) -> float:
    """Bytes each rank sends across nodes: ``2(K-1)/K · S/g``."""
    nodes, g = shape(case)
    return 2 * (nodes - 1) / nodes * case.numel * 4 / g


# ----------------------------------------------------------------------------- the rank side
def prepare(ctx: RankContext, case: Case) -> tuple[tuple, None]:
    """This rank's input and its two groups, made by every rank in one order."""
    nodes, g = shape(case)
    mine: dict[str, Any] = {}
    for k in range(nodes):
        pg = dist.new_group(node_ranks(case, k))
        if ctx.rank // g == k:
            mine["node"] = pg
    for local in range(g):
        pg = dist.new_group(rail_ranks(case, local))
        if ctx.rank % g == local:
            mine["rail"] = pg
    return (case_input(ctx.rank, case), mine["node"], mine["rail"]), None


def finish(ctx: RankContext, case: Case, args: tuple, result: Any) -> dict[str, Any]:
    """``dist.all_reduce`` on the same input, and this node's sum alone (for the diagnosis);
    then the groups go."""
    expected = builtin_on_input(ctx, case, "all_reduce")
    node_only = builtin_on_input(ctx, case, "all_reduce", group=args[1])
    dist.barrier()
    for pg in args[1:]:
        dist.destroy_process_group(pg)
    return {"expected": expected, "node_only": node_only}


# ----------------------------------------------------------------------------- the judge
def crossing_bytes(trace: Trace, case: Case) -> tuple[list[float], list[float]]:
    """Per rank, (bytes sent to another node, bytes sent inside the node), from the trace."""
    n, g = case.world_size, shape(case)[1]
    across, inside = [0.0] * n, [0.0] * n
    for e in trace.events:
        if e.kind == "send" and e.peer is not None:
            out = across if e.peer // g != e.rank // g else inside
            out[e.rank] += e.nbytes
        elif e.kind == "collective" and e.op.startswith(RING_OPS):
            members = list((e.attrs or {}).get("group") or range(n))
            nxt = members[(members.index(e.rank) + 1) % len(members)]
            out = across if nxt // g != e.rank // g else inside
            out[e.rank] += ring_sent_bytes(e.op, e.nbytes, len(members))
    return across, inside


def spans_every_rank(trace: Trace, rank: int, n: int) -> bool:
    """Whether ``rank`` ran a collective over all ``n`` ranks (a flat, one-level algorithm)."""
    return any(
        e.rank == rank
        and e.kind == "collective"
        and len((e.attrs or {}).get("group") or range(n)) == n
        for e in trace.events
    )


def check_result(case: Case, outputs: list[RankOutcome]) -> Finding:
    for r, out in enumerate(outputs):
        got, want = out.result, out.facts["expected"]
        if torch.equal(got, want):
            continue
        i = int((got != want).nonzero()[0])
        if torch.equal(got, out.facts["node_only"]):
            msg = _(
                "rank {r} holds the sum over its node only ({got} at element {i}, the whole sum "
                "is {want}): all-reduce your shard across nodes, over `rail`, between the "
                "reduce-scatter and the all-gather"
            )
        else:
            msg = _(
                "rank {r}'s result differs from dist.all_reduce at element {i}: got {got}, "
                "expected {want}"
            )
        msg = msg.format(r=r, i=i, got=f"{got[i].item():g}", want=f"{want[i].item():g}")
        return Finding("result", False, msg, case, rank=r)
    return Finding("result", True, _("every rank holds dist.all_reduce's sum"), case)


def check_bytes(case: Case, trace: Trace) -> Finding:
    nodes, g = shape(case)
    target = target_bytes(case)
    formula = f"2(K\u22121)/K\u00b7S/g = {format_bytes(target)} (K = {nodes}, g = {g})"
    across, _x = crossing_bytes(trace, case)
    if not any(across):
        msg = _(
            "no rank sent anything across nodes in the trace: call the collectives through "
            "ctx.collective(..., group=...) so that they are counted; the target is {formula}"
        ).format(formula=formula)
        return Finding("bytes", False, msg, case, rank=0)
    worst = max(range(case.world_size), key=lambda r: across[r])
    if across[worst] > target * (1 + 1e-9):
        idle = [r for r in range(case.world_size) if across[r] == 0]
        msg = (
            _(
                "rank {r} sent {sent} across nodes: a flat ring over every rank sends whole-buffer "
                "chunks over the node boundary; reduce inside the node first, so only 1/g of the "
                "buffer leaves it per rank; target {formula}"
            )
            if spans_every_rank(trace, worst, case.world_size)
            else _(
                "rank {r} sent {sent} across nodes while ranks {idle} sent nothing across: one NIC "
                "of {g} carries the whole buffer (a leader per node). Give every local rank its "
                "1/g shard to all-reduce over its own NIC; target {formula}"
            )
            if idle
            else _(
                "rank {r} sent {sent} across nodes: send only your 1/g shard across nodes; target "
                "{formula}"
            )
        ).format(r=worst, sent=format_bytes(across[worst]), idle=idle, g=g, formula=formula)
        return Finding("bytes", False, msg, case, rank=worst)
    ok = _("every rank sent at most {formula} across nodes").format(formula=formula)
    return Finding("bytes", True, ok, case)


def judge(case: Case, outputs: list[RankOutcome], trace: Trace) -> list[Finding]:
    found = tensor_result(outputs, case, (case.numel,), torch.float32)
    if found:
        return found
    return [check_result(case, outputs), check_bytes(case, trace)]


# ----------------------------------------------------------------------------- the picture
def picture(grade: Any) -> list[Any]:
    """Bytes each rank sent across nodes and inside its node: yours beside the reference's, the
    target ``2(K-1)/K · S/g`` as a line."""
    case = grade.shown
    if case is None or grade.trace is None:
        return []
    runs = [(_("yours"), grade.trace)]
    if grade.reference_trace is not None:
        runs.append((_("the reference"), grade.reference_trace))
    n = case.world_size
    fig = new_figure(figsize=(max(8.0, 1.1 * n + 6.0), 3.6), layout="constrained")
    axes = fig.subplots(1, 2)
    for ax, (title, trace) in zip(axes, runs, strict=False):
        across, inside = crossing_bytes(trace, case)
        ax.bar(range(n), across, color="#F58518", label=_("across nodes"))
        ax.bar(range(n), inside, bottom=across, color="#4C78A8", label=_("inside the node"))
        ax.axhline(target_bytes(case), color="black", ls="--", lw=1, label="2(K-1)/K·S/g")
        ax.set_xticks(range(n), [f"r{r}" for r in range(n)])
        ax.set_ylabel(_("bytes sent"))
        ax.set_title(f"{title} ({case.label()})", fontsize=10)
        ax.legend(fontsize=8)
    for ax in axes[len(runs) :]:
        ax.set_axis_off()
    return [fig]


STARTER = """\
def my_two_level_allreduce(ctx, x, node, rail):
    g = dist.get_world_size(node)  # GPUs per node; rail has one rank per node
    shard = torch.empty(x.numel() // g, dtype=x.dtype)
    ...  # 1. ctx.collective(REDUCE_SCATTER, shard, x, group=node)
    ...  # 2. all-reduce the shard across nodes, over rail
    ...  # 3. ctx.collective(ALL_GATHER, x, shard, group=node)
    return x
"""


def _case(n: int, nodes: int) -> Case:
    return Case(n, 12 * n, "float32", (("nodes", nodes),))


EXERCISE = Exercise(
    lesson="05_nccl_in_practice",
    title=N_("A two-level all-reduce across pretend nodes"),
    function="my_two_level_allreduce",
    params=("ctx", "x", "node", "rail"),
    task=N_(
        "Write `my_two_level_allreduce(ctx, x, node, rail)`: leave in `x` the sum of every "
        "rank's `x`, as `dist.all_reduce` does. `node` is the process group of this rank's node "
        "(g ranks), `rail` the group of the ranks with the same local rank on every node (K "
        "ranks, one per node). Reduce-scatter inside the node, all-reduce your shard across "
        "nodes, all-gather inside the node. Target: every rank sends 2(K\u22121)/K\u00b7S/g "
        "bytes across nodes."
    ),
    starter=STARTER,
    hints=(
        N_(
            "An all-reduce is a reduce-scatter followed by an all-gather. Do the reduce-scatter "
            "and the all-gather inside the node (fast links), and put the cross-node step between "
            "them, on a shard only 1/g of the buffer."
        ),
        N_(
            "After the reduce-scatter over `node`, local rank i holds shard i of its node's sum. "
            "The ranks holding shard i on the other nodes are exactly your `rail` group: "
            "all-reduce the shard there, and it becomes shard i of the whole sum."
        ),
        N_(
            "`ctx.collective(REDUCE_SCATTER, shard, x, group=node)`; "
            "`ctx.collective('all_reduce', shard, group=rail)`; "
            "`ctx.collective(ALL_GATHER, x, shard, group=node)`"
        ),
    ),
    reference=two_level_allreduce,
    prepare=prepare,
    finish=finish,
    judge=judge,
    cases=(_case(4, 2), _case(8, 2), _case(8, 4)),
    timeout_s=10.0,  # eight processes on 2 cores make and tear down up to 6 groups
    picture=picture,
    powers_of_two=True,
)
