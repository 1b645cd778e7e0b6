"""Exercise 03: write the ring all-reduce.

``my_ring_allreduce(ctx, tensor)`` sums every rank's ``tensor`` into every rank's, as
``dist.all_reduce`` does, in two phases of N−1 steps around the ring: reduce-scatter, then
all-gather (Patarasuk & Yuan 2009; ``plans/ring.py``). Graded on the result against torch's
``dist.all_reduce`` on the same input, on the bytes each rank sent against 2(N−1)/N·D, and on the
messages each rank sent against 2(N−1).
"""

from __future__ import annotations

import math

import torch

from ...core.i18n import N_, _
from ...core.units import DTYPES, torch_dtype
from ...engine.context import RankContext
from ..checks import bytes_sent, messages_sent, tensor_result, values_equal
from ..inputs import builtin_on_input, watched_input
from ..spec import Case, Exercise, Finding, RankOutcome


def ring_allreduce(ctx: RankContext, tensor: torch.Tensor) -> torch.Tensor:
    """The reference solution: reduce-scatter then all-gather around the ring, in place."""
    n, r = ctx.world_size, ctx.rank
    right, left = (r + 1) % n, (r - 1) % n
    chunks = torch.tensor_split(tensor, n)  # views into tensor
    for s in range(n - 1):  # after it, rank r holds chunk (r + 1) % n summed over all ranks
        send, recv = (r - s) % n, (r - s - 1) % n
        with ctx.step(s, "reduce-scatter"):
            incoming = torch.empty_like(chunks[recv])
            ctx.wait_all(
                [
                    ctx.isend(chunks[send], right, chunk=send),
                    ctx.irecv(incoming, left, op="reduce", chunk=recv),
                ]
            )
            chunks[recv].add_(incoming)
    for s in range(n - 1):  # the finished chunks travel once more around the ring
        send, recv = (r + 1 - s) % n, (r - s) % n
        with ctx.step(n - 1 + s, "all-gather"):
            ctx.wait_all(
                [
                    ctx.isend(chunks[send], right, chunk=send),
                    ctx.irecv(chunks[recv], left, chunk=recv),
                ]
            )
    return tensor


def finish(ctx: RankContext, case: Case, args: tuple, result: object) -> torch.Tensor:
    """torch's builtin on the same input: what every rank should hold."""
    return builtin_on_input(ctx, case, "all_reduce")


def target_bytes(case: Case) -> tuple[float, str]:
    """Bytes each rank should send at most, and the formula's name."""
    n, numel = case.world_size, case.numel
    item = DTYPES[case.dtype]
    if numel % n == 0:
        return 2 * (n - 1) / n * numel * item, "2(N\u22121)/N\u00b7D"
    return 2 * (n - 1) * math.ceil(numel / n) * item, "2(N\u22121)\u00b7\u2308D/N\u2309"


def judge(case: Case, outputs: list[RankOutcome], trace) -> list[Finding]:
    n = case.world_size
    found = tensor_result(outputs, case, (case.numel,), torch_dtype(case.dtype))
    if found:
        return found
    exact = case.dtype in ("int32", "int64") or case.option("pattern", "powers_of_two") != "random"
    want = [o.facts for o in outputs]
    found = values_equal(outputs, want, case, _("the sum of every rank's input"), exact=exact)
    target, formula = target_bytes(case)
    found += bytes_sent(trace, case, [target] * n, formula)
    found += messages_sent(trace, case, 2 * (n - 1), "2(N\u22121)")
    return found


def ring_chunks(case: Case) -> int:
    return case.world_size


STARTER = """\
def my_ring_allreduce(ctx, tensor):
    n, r = ctx.world_size, ctx.rank
    right, left = (r + 1) % n, (r - 1) % n
    chunks = torch.tensor_split(tensor, n)  # N views into tensor: write into them
    for s in range(n - 1):
        with ctx.step(s, "reduce-scatter"):
            ...  # send one chunk right, receive one from the left, add it
    for s in range(n - 1):
        with ctx.step(n - 1 + s, "all-gather"):
            ...  # pass the finished chunks on around the ring
    return tensor
"""

EXERCISE = Exercise(
    lesson="03_ring_allreduce",
    title=N_("Ring all-reduce"),
    function="my_ring_allreduce",
    params=("ctx", "tensor"),
    task=N_(
        "Write `my_ring_allreduce(ctx, tensor)`: when it returns, every rank's `tensor` holds the "
        "sum of all ranks' inputs, as after `dist.all_reduce`. Talk only to your neighbours "
        "(`ctx.isend(t, dst, chunk=k)`, `ctx.irecv(t, src, chunk=k)`, `ctx.wait_all([...])`) and "
        "wrap each step in `with ctx.step(s, phase):` so the grid can draw it. Target: each rank "
        "sends 2(N\u22121)/N\u00b7D bytes in 2(N\u22121) messages."
    ),
    starter=STARTER,
    hints=(
        N_(
            "Cut the buffer into N chunks with `torch.tensor_split(tensor, n)`. In every step each "
            "rank sends exactly one chunk to its right neighbour and receives one from its left."
        ),
        N_(
            "Reduce-scatter: at step s, rank r sends chunk (r \u2212 s) mod N and adds what "
            "arrives into chunk (r \u2212 s \u2212 1) mod N. After N\u22121 steps rank r holds "
            "chunk (r + 1) mod N complete. All-gather: at step s, send chunk (r + 1 \u2212 s) mod "
            "N and receive chunk (r \u2212 s) mod N in place (a copy, no addition)."
        ),
        N_(
            "`ctx.wait_all([ctx.isend(chunks[send], right, chunk=send), "
            "ctx.irecv(incoming, left, op='reduce', chunk=recv)]); chunks[recv].add_(incoming)`"
        ),
    ),
    reference=ring_allreduce,
    prepare=watched_input,
    finish=finish,
    judge=judge,
    cases=(
        Case(2, 8),
        Case(4, 16),
        Case(4, 10),  # chunks of 3, 3, 2, 2 elements
        Case(4, 12, "int64", (("pattern", "random"),)),
        Case(4, 4096, "float64", (("pattern", "random"),)),
    ),
    chunks=ring_chunks,
    powers_of_two=True,
    point_to_point=True,
)
