"""Plans for the other collectives: all-gather, reduce-scatter, broadcast, reduce, all-to-all,
gather and scatter, each a pure function of the world size (and root), checked by
:func:`~edu_parallel.plans.checker.validate`.

Which algorithm, and is it the standard one? NCCL runs all-gather and reduce-scatter on rings,
broadcast and reduce on a pipelined ring that is a chain for rooted collectives (the root starts
it, or ends it for reduce); all-to-all, gather and scatter are not NCCL algorithms at all but loops
of ``ncclSend``/``ncclRecv`` inside one ``ncclGroupStart/End`` (NCCL docs, "Point-to-point
communication"; PyTorch's ProcessGroupNCCL implements gather and scatter that way). The builders
below follow that choice; their docstrings say where they differ.

:func:`volume_formula` gives the bytes every rank sends and receives for these plans, with the
nccl-tests convention for ``S`` (doc/PERFORMANCE.md in NVIDIA/nccl-tests): ``S`` is the larger of
the input and output buffers, i.e. all-gather and gather ``S`` = output size, reduce-scatter and
scatter ``S`` = input size. In this engine ``S`` is the whole buffer of ``D`` bytes each rank
holds, cut into chunks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..core.dims import ParallelDims
from ..core.errors import bad_value, check_choice, check_int
from ..core.i18n import N_
from ..core.inputs import Buffer
from ..core.units import DTYPES
from .layout import SEGMENT_BYTES
from .plan import MAX_PLAN_RANKS, ROOTED, Plan, Step, Transfer, plan_ranks
from .ring import ring_all_gather_steps, ring_allreduce_plan


def _n_root(world_size: int | ParallelDims, root: int) -> tuple[int, int]:
    n = plan_ranks(world_size)
    return n, check_int("root", root, 0, n - 1)


def ring_all_gather_plan(world_size: int | ParallelDims) -> Plan:
    """Ring all-gather (NCCL's algorithm): rank r starts with chunk r valid; at step s it sends
    chunk ``(r - s) mod N`` to ``r + 1``, which copies it. ``N-1`` steps; every rank sends and
    receives ``(N-1)/N * S`` (S = output size)."""
    n = plan_ranks(world_size)
    steps = ring_all_gather_steps(n, first_chunk_offset=0, phase="all-gather")
    return Plan("ring_all_gather", "all_gather", n, n, tuple(steps))


def ring_reduce_scatter_plan(world_size: int | ParallelDims) -> Plan:
    """Ring reduce-scatter (NCCL's algorithm), shifted so that rank r *ends* with chunk r summed
    over all ranks, as ``torch.distributed.reduce_scatter_tensor`` returns it.

    Step s: rank r sends chunk ``(r - s - 1) mod N`` to ``r + 1``, which adds it. (The ring
    all-reduce's first phase sends ``(r - s) mod N`` and leaves chunk ``r + 1`` on rank r.)
    ``N-1`` steps; every rank sends ``(N-1)/N * S`` (S = input size)."""
    n = plan_ranks(world_size)
    steps = [
        Step(
            "reduce-scatter",
            tuple(Transfer(r, (r + 1) % n, (r - s - 1) % n, "reduce") for r in range(n)),
        )
        for s in range(n - 1)
    ]
    return Plan("ring_reduce_scatter", "reduce_scatter", n, n, tuple(steps))


def _chain_steps(order: list[int], num_chunks: int, op: str, phase: str) -> list[Step]:
    """Pipeline ``num_chunks`` chunks down the chain ``order``: at step s the rank at position p
    passes chunk ``s - p`` to position ``p + 1``. ``num_chunks + len(order) - 2`` steps."""
    links = len(order) - 1
    steps = []
    for s in range(num_chunks + links - 1 if links else 0):
        moves = [
            Transfer(order[p], order[p + 1], s - p, op)
            for p in range(links)
            if 0 <= s - p < num_chunks
        ]
        steps.append(Step(phase, tuple(moves)))
    return steps


def chain_broadcast_plan(
    world_size: int | ParallelDims, root: int = 0, num_chunks: int | None = None
) -> Plan:
    """Pipelined chain broadcast (NCCL's ring broadcast, which is a chain starting at the root):
    ``root -> root+1 -> ... -> root-1``; chunk k leaves the root at step k and every rank forwards
    it one step after it arrived.

    ``num_chunks`` (default ``N``) trades latency for bandwidth: the plan takes ``C + N - 2`` steps
    and each step moves ``S / C`` bytes per link, so the time is about ``(C + N - 2) * (alpha +
    S / (C * B))``. ``C = N`` gives ``2(N-1)`` steps, like the ring all-reduce, and at most twice
    the ideal ``S / B``; larger ``C`` approaches it (NCCL cuts messages into fixed-size slices).
    Every rank but the last of the chain sends ``S``; every rank but the root receives ``S``."""
    n, root = _n_root(world_size, root)
    c = n if num_chunks is None else check_int("num_chunks", num_chunks, 1, MAX_PLAN_RANKS)
    order = [(root + p) % n for p in range(n)]
    steps = _chain_steps(order, c, "copy", "broadcast")
    return Plan("chain_broadcast", "broadcast", n, c, tuple(steps), root=root)


def chain_reduce_plan(
    world_size: int | ParallelDims, root: int = 0, num_chunks: int | None = None
) -> Plan:
    """Pipelined chain reduce (NCCL's ring reduce, a chain that ends at the root):
    ``root+1 -> root+2 -> ... -> root``; each rank adds the partial sum it receives to its own
    chunk and passes it on, so the root ends with every chunk summed over all ranks.

    ``C + N - 2`` steps for ``C = num_chunks`` (default ``N``; see :func:`chain_broadcast_plan`).
    Every rank but the root sends ``S``; every rank but the chain's first receives ``S``."""
    n, root = _n_root(world_size, root)
    c = n if num_chunks is None else check_int("num_chunks", num_chunks, 1, MAX_PLAN_RANKS)
    order = [(root + 1 + p) % n for p in range(n)]
    steps = _chain_steps(order, c, "reduce", "reduce")
    return Plan("chain_reduce", "reduce", n, c, tuple(steps), root=root)


def _round_robin(n: int) -> list[list[tuple[int, int]]]:
    """Rounds of disjoint pairs in which every two ranks meet exactly once (the circle method:
    ``N-1`` rounds for even N, ``N`` for odd N with one rank idle per round)."""
    m = n if n % 2 else n - 1
    rounds = []
    for s in range(m):
        pairs = [(r, (2 * s - r) % m) for r in range(m) if r < (2 * s - r) % m]
        if n % 2 == 0:
            pairs.append((s, n - 1))
        rounds.append(pairs)
    return rounds


def direct_all_to_all_plan(world_size: int | ParallelDims, grouped: bool = False) -> Plan:
    """Direct all-to-all: rank r's chunk k goes straight to rank k and lands in its chunk r.

    NCCL (and nccl-tests' alltoall) posts all ``N-1`` ``ncclSend``/``ncclRecv`` pairs of a rank in
    one group from a send buffer into a separate receive buffer; ``grouped=True`` is that, one step.

    The default is the pairwise exchange that MPI libraries use (Thakur, Rabenseifner & Gropp,
    "Optimization of Collective Communication Operations in MPICH", IJHPCA 2005), adapted to a
    plan's single in-place buffer: the textbook schedule "at step s send to ``r+s``, receive from
    ``r-s``" would overwrite chunk ``r-s`` before rank r has sent it (for N >= 3), so each step here
    is a set of disjoint pairs that *swap* (rank r sends its chunk p to p and receives p's chunk r
    into the same place), in round-robin order: ``N-1`` steps for even N, ``N`` for odd N. Either
    way every rank sends and receives ``(N-1)/N * S``.
    """
    n = plan_ranks(world_size)
    if grouped:
        moves = tuple(Transfer(r, k, k, "copy", r) for r in range(n) for k in range(n) if k != r)
        one = (Step("all-to-all", moves),) if moves else ()
        return Plan("grouped_all_to_all", "all_to_all", n, n, one)
    steps: list[Step] = []
    for pairs in _round_robin(n):  # a swaps with b: a's chunk b lands in b's chunk a, and back
        moves = [(Transfer(a, b, b, "copy", a), Transfer(b, a, a, "copy", b)) for a, b in pairs]
        if moves:
            steps.append(Step("all-to-all", tuple(t for pair in moves for t in pair)))
    return Plan("pairwise_all_to_all", "all_to_all", n, n, tuple(steps))


def direct_gather_plan(world_size: int | ParallelDims, root: int = 0) -> Plan:
    """Direct gather: in one step every rank r but the root sends its chunk r to the root (as
    PyTorch's NCCL backend does: the root posts ``N-1`` receives in one group). The root receives
    ``(N-1)/N * S`` (S = output size), every other rank sends ``S / N``."""
    n, root = _n_root(world_size, root)
    moves = tuple(Transfer(r, root, r, "copy") for r in range(n) if r != root)
    return Plan(
        "direct_gather", "gather", n, n, (Step("gather", moves),) if moves else (), root=root
    )


def direct_scatter_plan(world_size: int | ParallelDims, root: int = 0) -> Plan:
    """Direct scatter: in one step the root sends chunk r to every rank r (``N-1`` sends in one
    group, as PyTorch's NCCL backend does). The root sends ``(N-1)/N * S`` (S = input size)."""
    n, root = _n_root(world_size, root)
    moves = tuple(Transfer(root, r, r, "copy") for r in range(n) if r != root)
    return Plan(
        "direct_scatter", "scatter", n, n, (Step("scatter", moves),) if moves else (), root=root
    )


def _unrooted(builder: Callable[[int | ParallelDims], Plan]) -> Callable[..., Plan]:
    def build(world_size: int | ParallelDims, root: int = 0) -> Plan:
        return builder(world_size)

    build.__doc__ = builder.__doc__
    build.__name__ = builder.__name__
    return build


# collective -> builder(world_size, root=0); unrooted builders ignore root.
COLLECTIVE_PLANS: dict[str, Callable[..., Plan]] = {
    "all_reduce": _unrooted(ring_allreduce_plan),
    "all_gather": _unrooted(ring_all_gather_plan),
    "reduce_scatter": _unrooted(ring_reduce_scatter_plan),
    "broadcast": chain_broadcast_plan,
    "reduce": chain_reduce_plan,
    "all_to_all": _unrooted(direct_all_to_all_plan),
    "gather": direct_gather_plan,
    "scatter": direct_scatter_plan,
}

VOLUME_TEXT = {  # N_: shown through _() by the reports
    "all_reduce": (N_("2(n-1)/n * S each"), N_("2(n-1)/n * S each")),
    "all_gather": (N_("(n-1)/n * S each"), N_("(n-1)/n * S each")),
    "reduce_scatter": (N_("(n-1)/n * S each"), N_("(n-1)/n * S each")),
    "broadcast": (
        N_("S on every rank but the chain's last (root-1)"),
        N_("S on every rank but the root"),
    ),
    "reduce": (
        N_("S on every rank but the root"),
        N_("S on every rank but the chain's first (root+1)"),
    ),
    "all_to_all": (N_("(n-1)/n * S each"), N_("(n-1)/n * S each")),
    "gather": (N_("S/n on every rank but the root"), N_("(n-1)/n * S at the root")),
    "scatter": (N_("(n-1)/n * S at the root"), N_("S/n on every rank but the root")),
}
S_CONVENTION = (
    "S = the larger of input and output buffer per rank (nccl-tests doc/PERFORMANCE.md): "
    "the output for all-gather and gather, the input for reduce-scatter and scatter"
)


def volume_formula(collective: str, world_size: int, nbytes: float, root: int = 0) -> dict:
    """The textbook bytes each rank sends and receives for this module's plans.

    Returns ``{"sent": [per rank], "recv": [per rank], "sent_text", "recv_text", "S",
    "convention"}`` for ``S = nbytes``. Exact for sizes whose chunks are equal; uneven chunks differ
    by less than a chunk. Ring and direct plans match the nccl-tests bus factors; the chains are
    algorithm specific (a tree broadcast would spread the sends differently)."""
    check_choice("collective", collective, COLLECTIVE_PLANS)
    n, root = _n_root(world_size, root)
    s, share = float(nbytes), (n - 1) / n * float(nbytes)
    zero, each = [0.0] * n, [share] * n
    if n == 1:
        sent, recv = zero, list(zero)
    elif collective == "all_reduce":
        sent, recv = [2 * share] * n, [2 * share] * n
    elif collective in ("all_gather", "reduce_scatter", "all_to_all"):
        sent, recv = each, list(each)
    elif collective == "broadcast":
        last = (root - 1) % n
        sent = [0.0 if r == last else s for r in range(n)]
        recv = [0.0 if r == root else s for r in range(n)]
    elif collective == "reduce":
        first = (root + 1) % n
        sent = [0.0 if r == root else s for r in range(n)]
        recv = [0.0 if r == first else s for r in range(n)]
    elif collective == "gather":
        sent = [0.0 if r == root else s / n for r in range(n)]
        recv = [share if r == root else 0.0 for r in range(n)]
    else:  # scatter
        sent = [share if r == root else 0.0 for r in range(n)]
        recv = [0.0 if r == root else s / n for r in range(n)]
    sent_text, recv_text = VOLUME_TEXT[collective]
    return {
        "sent": sent,
        "recv": recv,
        "sent_text": sent_text,
        "recv_text": recv_text,
        "S": s,
        "convention": S_CONVENTION,
    }


# The collectives other than all-reduce as typed on the command line (nccl-tests' binary names):
# "allgather" for all_gather, ...
CLI_NAMES = {c.replace("_", ""): c for c in COLLECTIVE_PLANS if c != "all_reduce"}
# The torch builtins cut the buffer into N equal parts: D must be a multiple of N * itemsize.
EQUAL_CHUNKS = ("all_gather", "reduce_scatter", "all_to_all", "gather", "scatter")


def check_size(collective: str, world_size: int, nbytes: int, dtype: str, size: Any = None) -> None:
    """Raise a ValueError naming ``size`` when the collective needs equal chunks and D has none."""
    unit = world_size * DTYPES[dtype]
    if collective in EQUAL_CHUNKS and nbytes % unit:
        lower, upper = nbytes // unit * unit, (nbytes // unit + 1) * unit
        such = f"{lower} or {upper}" if lower else f"{upper} or {2 * upper}"
        raise bad_value(
            "size",
            nbytes if size is None else size,
            f"a multiple of n*itemsize = {unit} bytes ({collective} on {world_size} ranks of "
            f"{dtype} needs equal chunks), such as {such}",
        )


def plan_for(collective: str, dims: ParallelDims, root: int, numel: int) -> Plan:
    """The plan a run of ``numel`` elements uses on the run's (validated) ``dims``; pipelined
    chains get at most one chunk per element."""
    if collective in ("broadcast", "reduce"):
        return COLLECTIVE_PLANS[collective](dims, root, min(dims.world_size, numel))
    return COLLECTIVE_PLANS[collective](dims, root)


def defined_chunks(collective: str, rank: int, root: int, num_chunks: int) -> list[int]:
    """The chunks of ``rank`` whose final value the collective defines (compared and drawn)."""
    if collective in ("reduce_scatter", "scatter"):
        return [rank]
    if collective in ("reduce", "gather") and rank != root:
        return []
    return list(range(num_chunks))


@dataclass(frozen=True)
class CollectiveRun:
    """One collective to run, checked once (:func:`plan_collective`): its plan for the executor's
    world size, each rank's buffer, the root and the segment size."""

    collective: str
    plan: Plan
    buffer: Buffer
    root: int = 0
    segment_bytes: int = SEGMENT_BYTES


def plan_collective(
    world_size: int | ParallelDims,
    name: str,
    size: int | str = "1MiB",
    dtype: str = "float32",
    pattern: str = "random",
    seed: int = 0,
    root: int = 0,
    segment_bytes: int = SEGMENT_BYTES,
) -> CollectiveRun:
    """Check every option (sizes the builtin cannot cut into N equal parts fail here) and build
    the plan. ``name`` is a key of COLLECTIVE_PLANS or a CLI name such as ``"allgather"``.

    ``world_size``: the run's :class:`~edu_parallel.core.dims.ParallelDims`, validated where the
    run started and trusted here, or a plain int from the Python API, validated once here (as
    dims of at most MAX_PLAN_RANKS ranks) and passed down; the rooted builders check ``root``."""
    name = check_choice("name", CLI_NAMES.get(name, name), COLLECTIVE_PLANS)
    buffer = Buffer(size, dtype, pattern, seed)
    segment_bytes = check_int("segment_bytes", segment_bytes, 1)
    dims = (
        world_size
        if isinstance(world_size, ParallelDims)
        else ParallelDims(world_size, max_world_size=MAX_PLAN_RANKS)
    )
    if name not in ROOTED:
        root = check_int("root", root, 0, dims.world_size - 1)
    check_size(name, dims.world_size, buffer.nbytes, dtype, size)
    plan = plan_for(name, dims, root, buffer.numel)
    return CollectiveRun(name, plan, buffer, plan.root if name in ROOTED else root, segment_bytes)
