"""The grader against bad learner code: each mistake costs one run, never the kernel or the cluster,
and gets one message that names the learner's line, rank or step."""

from __future__ import annotations

import inspect
import os
import threading

import pytest
import torch
from helpers import child_pids
from test_exercise_ring import off_by_one_chunk, whole_buffer_ring

from edu_parallel import Cluster
from edu_parallel.exercises import Case, check, grade, hint, solution
from edu_parallel.exercises.feedback import Feedback, default_picture
from edu_parallel.exercises.problems.ring_allreduce import EXERCISE, ring_allreduce
from edu_parallel.exercises.progress import WORKSPACE_VAR, load_progress

pytestmark = pytest.mark.multiprocess
ONE = [Case(2, 8)]  # one small case: each test grades one run


def only_failure(g):
    (f,) = g.failures
    return f


def line_of(fn, text: str) -> int:
    """The line number, in this file, of the line of ``fn`` that contains ``text``."""
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, t in enumerate(lines) if text in t)


def two_params(ctx, tensor, extra):
    return tensor


def returns_a_list(ctx, tensor):
    return tensor.tolist()


def returns_half(ctx, tensor):
    return tensor[: tensor.numel() // 2]


def raises(ctx, tensor):
    chunks = torch.tensor_split(tensor, ctx.world_size)
    return chunks[ctx.world_size]  # one past the last chunk


def calls_exit(ctx, tensor):
    exit()


def dies(ctx, tensor):
    os._exit(3)


def allocates_too_much(ctx, tensor):
    return torch.empty(1 << 32, dtype=torch.float64)  # 32 GiB


def prints_megabytes(ctx, tensor):
    for i in range(120_000):
        print("element", i, "of", tensor.numel())
    return tensor


def loops_forever(ctx, tensor):
    while ctx.rank == 0:
        pass
    ctx.recv(tensor, 0)
    return tensor


def last_rank_returns_early(ctx, tensor):
    """Rank 0 waits at step 3 for a message rank 1 never sends: rank 1 returns at once."""
    if ctx.rank == 0:
        with ctx.step(3, "all-gather"):
            ctx.recv(tensor, 1)
    return tensor


LOCK = threading.Lock()


def uses_a_lock(ctx, tensor):
    with LOCK:
        return tensor


def test_a_wrong_signature_is_caught_before_anything_runs(cluster2):
    f = only_failure(grade(EXERCISE, two_params, cluster2, cases=ONE))
    assert f.check == "signature"
    assert "cannot be called as my_ring_allreduce(ctx, tensor)" in f.message
    assert f"line {two_params.__code__.co_firstlineno}: `def two_params(ctx, tensor, extra):`" in (
        f.message
    )
    not_fn = only_failure(grade(EXERCISE, "my_ring_allreduce", cluster2, cases=ONE))
    assert "expected a function my_ring_allreduce(ctx, tensor), got str" in not_fn.message


@pytest.mark.parametrize(
    ("fn", "text"),
    [
        (returns_a_list, "rank 0 returned list, expected a tensor of shape (8,) (torch.float32)"),
        (returns_half, "rank 0 returned a tensor of shape (4,) (torch.float32), expected (8,)"),
    ],
)
def test_a_wrong_return_type_or_shape_is_named(cluster2, fn, text):
    g = grade(EXERCISE, fn, cluster2, cases=ONE)
    assert not g.passed and g.first_failure.check == "result"
    assert text in g.first_failure.message


def test_a_raise_names_the_learners_line(cluster2):
    f = only_failure(grade(EXERCISE, raises, cluster2, cases=ONE))
    line = line_of(raises, "one past the last chunk")
    assert f.check == "error"
    assert f"raised at line {line}: `return chunks[ctx.world_size]" in f.message
    assert "IndexError" in f.message


@pytest.mark.parametrize(
    ("fn", "text"),
    [
        (calls_exit, "called exit() at line"),
        (dies, "died (exit code 3)"),
        (allocates_too_much, "ran out of its memory allowance at line"),
    ],
)
def test_exit_death_and_memory_cost_one_run_and_the_cluster_goes_on(cluster2, fn, text):
    before = cluster2.restarts
    f = only_failure(grade(EXERCISE, fn, cluster2, cases=ONE))
    assert f.check == "error" and text in f.message
    assert grade(EXERCISE, ring_allreduce, cluster2, cases=ONE).passed  # fresh workers
    assert cluster2.restarts == before + 1


def test_megabytes_of_output_are_cut_and_the_printing_line_named(cluster2):
    g = grade(EXERCISE, prints_megabytes, cluster2, cases=ONE)
    note = next(f for f in g.findings if f.check == "output")
    assert note.note and not note.failed
    assert f"line {line_of(prints_megabytes, 'print(')}: `print(" in note.message
    assert "MiB" in note.message
    assert len(g.outputs[0].printed) == 4000  # the first characters are kept
    assert g.outputs[0].printed_bytes > 1 << 20
    folded = Feedback(g, "").printed_html()
    assert folded.startswith("<details>") and "element 0 of 8" in folded


def test_a_loop_that_never_ends_is_named_by_its_line(cluster2):
    g = grade(EXERCISE, loops_forever, cluster2, cases=ONE)
    f = only_failure(g)
    assert f.check == "deadlock"
    line = line_of(loops_forever, "while ctx.rank == 0")
    assert f"rank 1 waited for a message from rank 0, which was still running line {line}" in (
        f.message
    )
    assert "a loop that does not end?" in f.message


def test_a_message_never_sent_is_named_with_its_step(cluster2):
    f = only_failure(grade(EXERCISE, last_rank_returns_early, cluster2, cases=ONE))
    assert f.check == "deadlock" and (f.rank, f.step) == (0, 3)
    assert f.message == (
        "rank 0 waited at step 3 for a message from rank 1, but rank 1 had returned without "
        "sending it"
    )


def test_something_that_cannot_travel_to_the_ranks_is_named(cluster2):
    f = only_failure(grade(EXERCISE, uses_a_lock, cluster2, cases=ONE))
    assert f.check == "signature" and "cannot be sent to the ranks" in f.message
    assert "lock" in f.message


def test_step_blocks_label_events_and_snapshot_the_watched_buffer(cluster2):
    g = grade(EXERCISE, ring_allreduce, cluster2, cases=ONE)
    steps = {(e.step, e.phase) for e in g.trace.events if e.kind == "send"}
    assert steps == {(0, "reduce-scatter"), (1, "all-gather")}
    assert sorted({s.step for s in g.trace.snapshots}) == [-1, 0, 1]
    assert g.trace.snapshot_grid()[(0, 1)] == [3.0] * 8  # 2^0 + 2^1 after the last step


def test_progress_hints_and_the_solution_after_a_try(cluster2, tmp_path, monkeypatch):
    monkeypatch.setenv(WORKSPACE_VAR, str(tmp_path))
    with pytest.raises(PermissionError, match="the solution opens after a try"):
        solution("03")
    feedback = check("03", returns_half, cluster2)
    assert isinstance(feedback, Feedback) and not feedback.passed
    entry = load_progress()["my_ring_allreduce"]  # kept under the function, not the number
    assert (entry["tries"], entry["passed"]) == (1, False)
    assert "def ring_allreduce(ctx" in solution("03")
    assert check("03", ring_allreduce, cluster2).passed
    entry = load_progress()["my_ring_allreduce"]
    assert (entry["tries"], entry["passed"]) == (2, True)
    assert hint("03", 1) == EXERCISE.hints[0]
    with pytest.raises(ValueError, match=r"tier=4 is not valid"):
        hint("03", 4)


def test_the_panel_reveals_hints_in_tiers_and_the_solution_on_request(cluster2):
    feedback = check("03", returns_half, cluster2)
    panel = feedback.widget()
    assert "FAIL exercise 03" in panel.children[0].value
    assert feedback.hints_html() == ""
    for tier in (1, 2, 3):
        feedback.buttons["hint"].click()
        assert feedback.hints_shown == tier
        assert EXERCISE.hints[tier - 1].split("`")[0][:20] in feedback.hints_html()
    assert feedback.buttons["hint"].disabled
    feedback.buttons["solution"].click()
    assert "def ring_allreduce" in panel.children[-1].value


def test_the_default_picture_circles_the_first_divergence(cluster4):
    wrong = grade(EXERCISE, off_by_one_chunk, cluster4, cases=[Case(4, 16)])
    mine, ref, _bytes = default_picture(wrong)
    marks = [a for a in mine.axes[0].patches if a.get_gid() == "mark"]
    assert len(marks) == 1 and not [a for a in ref.axes[0].patches if a.get_gid() == "mark"]
    heavy = grade(EXERCISE, whole_buffer_ring, cluster4, cases=[Case(4, 16)])
    figures = default_picture(heavy)
    left = figures[-1].axes[0]
    assert [p for p in left.patches if p.get_gid() == "mark"]  # rank 0's bar, outlined
    assert "the reference's volume = 96 B" in [t.get_text() for t in left.get_legend().texts]


def test_a_closed_cluster_is_replaced_for_the_grade():
    closed = Cluster(2, timeout=20)
    closed.close()
    g = grade(EXERCISE, ring_allreduce, closed, cases=ONE)
    assert g.passed and closed.closed  # graded on a cluster of its own, the closed one untouched


def sends_past_the_last_rank(ctx, tensor):
    ctx.send(tensor, ctx.rank + 1)  # no modulo: the last rank sends to a rank that is not there
    return tensor


def test_a_peer_outside_the_group_is_named_with_the_line(cluster2):
    f = only_failure(grade(EXERCISE, sends_past_the_last_rank, cluster2, cases=ONE))
    line = line_of(sends_past_the_last_rank, "no modulo")
    assert f.check == "error" and f.rank == 1
    assert f"rank 1 raised at line {line}: `ctx.send(tensor, ctx.rank + 1)" in f.message
    assert "dst=2 is not valid: expected another rank of this group: 0..1, not 1 itself" in (
        f.message
    )


@pytest.mark.parametrize(
    ("call", "text"),
    [
        (lambda: check("99", ring_allreduce), "exercise='99' is not valid: expected one of 02, 03"),
        (lambda: check("03", ring_allreduce, 4), "cluster=4 is not valid: expected a Cluster"),
        (lambda: hint(3, 0), "tier=0 is not valid: expected an integer in [1, 3]"),
    ],
)
def test_a_wrong_argument_is_one_line_before_any_process_starts(call, text):
    before = child_pids()
    with pytest.raises(ValueError) as info:
        call()
    assert str(info.value).startswith(text) and "\n" not in str(info.value)
    assert child_pids() == before


def test_a_line_caught_inside_a_loop_is_named_by_the_loop(tmp_path):
    """A probe lands on whichever line of a loop was running; the verdict names the loop."""
    from edu_parallel.exercises.diagnose import loop_line

    code = tmp_path / "f.py"
    code.write_text(
        "def f(n):\n"  # 1
        "    total = 0\n"  # 2
        "    for i in range(n):\n"  # 3
        "        while True:\n"  # 4
        "            total += i\n"  # 5
        "        total -= 1\n"  # 6
        "    return total\n"  # 7
    )
    assert [loop_line(str(code), n) for n in range(1, 8)] == [1, 2, 3, 4, 4, 3, 7]
    assert loop_line(str(tmp_path / "missing.py"), 5) == 5  # no source: the line itself


def calls_dist_all_reduce(ctx, tensor):
    import torch.distributed as dist

    dist.all_reduce(tensor)  # the right sum, without a byte in the trace
    return tensor


def calls_a_traced_collective(ctx, tensor):
    ctx.collective("all_reduce", tensor)  # counted, but not the ring the exercise asks for
    return tensor


@pytest.mark.parametrize(
    "fn, said",
    [
        (calls_dist_all_reduce, "torch.distributed.all_reduce goes around the trace"),
        (calls_a_traced_collective, "ctx.collective('all_reduce') does the exercise's work"),
    ],
)
def test_a_builtin_collective_does_not_pass_the_ring_exercise(cluster2, fn, said):
    f = only_failure(grade(EXERCISE, fn, cluster2, cases=ONE))
    line = line_of(fn, "tensor)  #")
    assert f.check == "error" and said in f.message and f"line {line}:" in f.message, f.message
    assert grade(EXERCISE, ring_allreduce, cluster2, cases=ONE).passed  # restored after the call
    out = cluster2.run(calls_dist_all_reduce, torch.ones(2))  # outside an exercise: allowed
    assert torch.equal(out.results[0], torch.full((2,), 2.0))


def test_a_direct_torch_collective_is_refused_where_ctx_collective_is_the_answer(cluster2):
    """Exercise 08 asks for ctx.collective('all_reduce'); torch.distributed's own is not
    counted, so it is refused there too, naming what to use."""
    from edu_parallel.exercises.problems.row_parallel import EXERCISE as ROW

    def dist_row_parallel(ctx, x_shard, w_shard):
        import torch.distributed as dist

        partial = x_shard @ w_shard.t()
        dist.all_reduce(partial)
        return partial

    g = grade(ROW, dist_row_parallel, cluster2, cases=ROW.cases[:1])
    f = next(f for f in g.findings if f.failed)
    assert "torch.distributed.all_reduce goes around the trace" in f.message
    assert "ctx.collective" in f.message


def receives_into_the_whole_buffer(ctx, tensor):
    """Sends one chunk, receives into a buffer the size of the whole tensor: gloo says nothing."""
    right, left = (ctx.rank + 1) % ctx.world_size, (ctx.rank - 1) % ctx.world_size
    incoming = torch.zeros_like(tensor)
    chunk = tensor.chunk(ctx.world_size)[0]
    with ctx.step(0, "reduce-scatter"):
        ctx.wait_all([ctx.isend(chunk, right), ctx.irecv(incoming, left)])
    return tensor


def test_a_receive_of_another_size_than_its_message_is_named_with_both_sizes(cluster2):
    f = only_failure(grade(EXERCISE, receives_into_the_whole_buffer, cluster2, cases=ONE))
    assert f.check == "error" and (f.step, f.rank) == (0, 0), f
    assert "into a buffer of 32 B" in f.message and "a message of 16 B from rank 1" in f.message
