"""A learner's ring all-reduce with one mistake, for the README's picture of the exercise loop:

    edu-parallel exercise check 03 assets/my_ring_wrong_chunk.py \
        --figure assets/exercise_feedback.png

In the reduce-scatter the incoming chunk is added into chunk (r - s + 1) mod N instead of
(r - s - 1) mod N. Two ranks pass (the two indices agree when N = 2); four ranks do not, and the
grader circles the first chunk that holds the wrong ranks' inputs.
"""

import torch


def my_ring_allreduce(ctx, tensor):
    n, r = ctx.world_size, ctx.rank
    right, left = (r + 1) % n, (r - 1) % n
    chunks = torch.tensor_split(tensor, n)
    for s in range(n - 1):
        send, recv = (r - s) % n, (r - s + 1) % n  # the mistake: should be (r - s - 1) % n
        with ctx.step(s, "reduce-scatter"):
            incoming = torch.empty_like(chunks[recv])
            ctx.wait_all(
                [
                    ctx.isend(chunks[send], right, chunk=send),
                    ctx.irecv(incoming, left, op="reduce", chunk=recv),
                ]
            )
            chunks[recv].add_(incoming)
    for s in range(n - 1):
        send, recv = (r + 1 - s) % n, (r - s) % n
        with ctx.step(n - 1 + s, "all-gather"):
            ctx.wait_all(
                [
                    ctx.isend(chunks[send], right, chunk=send),
                    ctx.irecv(chunks[recv], left, chunk=recv),
                ]
            )
    return tensor
