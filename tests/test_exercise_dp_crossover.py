"""Exercise 11 (DP's crossover tokens): the reference passes on real ranks, with the sweep's own
F, α and B and against the crossover they measured; planted mistakes fail with the diagnosis a
learner needs (α left out, the ring's factor wrong, seconds returned instead of tokens)."""

from __future__ import annotations

import pytest

from edu_parallel.exercises import grade
from edu_parallel.exercises.problems.dp_crossover import (
    EXERCISE,
    GPU_ARGS,
    LATENCY_ARGS,
    dp_crossover,
    picture,
)
from edu_parallel.roofline.formulas import allreduce_time

pytestmark = pytest.mark.multiprocess
PURE = [c for c in EXERCISE.cases if c.option("run") != "sweep"]


def no_alpha(flops_per_token, gradient_bytes, world_size, flops_per_s, alpha, bandwidth):
    n = world_size
    return flops_per_s * (2 * (n - 1) / n * gradient_bytes / bandwidth) / flops_per_token


def whole_gradient(flops_per_token, gradient_bytes, world_size, flops_per_s, alpha, bandwidth):
    n = world_size
    return flops_per_s * (2 * (n - 1) * alpha + gradient_bytes / bandwidth) / flops_per_token


def seconds(flops_per_token, gradient_bytes, world_size, flops_per_s, alpha, bandwidth):
    n = world_size
    return 2 * (n - 1) * alpha + 2 * (n - 1) / n * gradient_bytes / bandwidth


def not_a_number(flops_per_token, gradient_bytes, world_size, flops_per_s, alpha, bandwidth):
    return "many"


def test_the_reference_balances_compute_against_the_all_reduce() -> None:
    for args in (GPU_ARGS, LATENCY_ARGS):
        w, d, n, f, a, b = args
        t = dp_crossover(*args)
        assert t * w / f == pytest.approx(allreduce_time(n, d, a, b))
    assert 4000 < dp_crossover(*GPU_ARGS) < 20000  # thousands of tokens per H100 across nodes


def test_the_reference_passes_on_the_measured_sweep(cluster2) -> None:
    g = grade(EXERCISE, dp_crossover, cluster2)
    assert g.passed, g.report()
    sweep = [f for f in g.findings if f.case is not None and f.case.option("run") == "sweep"]
    assert any("measured the crossover" in f.message or "did not cross" in f.message for f in sweep)
    figures = picture(g)
    assert len(figures) in (0, 1)


@pytest.mark.parametrize(
    "fn, words",
    [
        (no_alpha, "the α term is missing"),
        (whole_gradient, "2(N-1)/N of the gradient"),
        (seconds, "in seconds"),
        (not_a_number, "expected a number of tokens"),
    ],
)
def test_planted_mistakes_fail_with_their_diagnosis(cluster2, fn, words) -> None:
    g = grade(EXERCISE, fn, cluster2, cases=PURE, reference=False)
    assert not g.passed
    assert any(words in f.message for f in g.failures), g.report()
