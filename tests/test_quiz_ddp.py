"""The quiz bank of lesson 06 (data-parallel training): answers, choices, runner, real ranks."""

from __future__ import annotations

import pytest
from helpers import fresh_python

from edu_parallel import Cluster
from edu_parallel.data_parallel.config import DdpConfig
from edu_parallel.data_parallel.report import ddp_runner
from edu_parallel.quiz import BANKS, MultipleChoice, Numeric, PredictThenRun, Quiz, get_quiz
from edu_parallel.quiz.banks.ddp import RUN_ONLY, ddp_quiz, formula_runner

NAME = "06_dp_bucketing_overlap"
SEEDS = (None, *range(12))
MIB = 1 << 20
REQUIRED = {
    "ddp_bytes_per_step",
    "ddp_messages_per_param",
    "ddp_default_buckets",
    "ddp_reverse_order",
    "ddp_bucket_u_shape",
    "ddp_accumulate_bytes",
    "ddp_first_iteration",
    "ddp_tied_bytes",
    "predict_ddp_buckets",
    "predict_ddp_messages",
}
CHOICE_KEYS = ("ddp_reverse_order", "ddp_bucket_u_shape", "ddp_no_sync", "ddp_first_iteration")


# ------------------------------------------------------------------ independent model arithmetic
def tensors(model: str) -> list[int]:
    """Elements of each trained tensor in registration order, derived from the layer widths the
    lesson states (not from DdpConfig): weight then bias per Linear layer, a tied weight once."""
    layers = {"mlp": (3, 16), "deep": (8, 512), "tied": (4, 16)}[model]
    count, width = layers
    out = []
    for i in range(count):
        if not (model == "tied" and i == count - 1):
            out.append(width * width)
        out.append(width)
    return out


pytestmark = pytest.mark.usefixtures("fixed_learner")  # one known learner, a tmp workspace


def psi(model: str) -> int:
    return sum(tensors(model))


def count_buckets(model: str, cap_mb: float | None) -> int:
    """DDP's rule by hand: reverse order, close a bucket when its bytes reach the limit."""
    first, cap = (MIB, 25 * MIB) if cap_mb is None else (int(cap_mb * MIB),) * 2
    buckets, open_bytes = 0, 0
    for numel in reversed(tensors(model)):
        open_bytes += 4 * numel
        if open_bytes >= (first if buckets == 0 else cap):
            buckets, open_bytes = buckets + 1, 0
    return buckets + (open_bytes > 0)


def ring(n: int) -> float:
    return 2 * (n - 1) / n


FORMULAS = {
    "ddp_bytes_per_step": lambda p: ring(p["N"]) * psi("deep") * 4,
    "ddp_messages_per_param": lambda p: 2 * (p["N"] - 1) * len(tensors(p["model"])),
    "ddp_default_buckets": lambda p: count_buckets("deep", None),
    "ddp_accumulate_bytes": lambda p: ring(p["N"]) * psi("deep") * 4 / p["K"],
    "ddp_tied_bytes": lambda p: ring(p["N"]) * psi("tied") * 4,
    "predict_ddp_buckets": lambda p: count_buckets("deep", p["cap"]),
    "predict_ddp_messages": lambda p: 2 * (p["N"] - 1) * count_buckets("deep", p["cap"]),
}
CONFIGS = {  # the same answers from DdpConfig, from the params each question keeps
    "ddp_bytes_per_step": lambda p: DdpConfig(
        p["N"], "deep", bucket_cap_mb=p["cap"]
    ).bytes_per_step(),
    "ddp_messages_per_param": lambda p: DdpConfig(
        p["N"], p["model"], sync="per-param"
    ).messages_per_step(),
    "ddp_default_buckets": lambda p: len(DdpConfig(4, "deep").buckets()),
    "ddp_accumulate_bytes": lambda p: (
        DdpConfig(p["N"], "deep", accumulate=p["K"]).bytes_per_step() / p["K"]
    ),
    "ddp_tied_bytes": lambda p: DdpConfig(p["N"], "tied").bytes_per_step(),
    "predict_ddp_buckets": lambda p: len(
        DdpConfig(p["N"], "deep", bucket_cap_mb=p["cap"]).buckets()
    ),
    "predict_ddp_messages": lambda p: DdpConfig(
        p["N"], "deep", bucket_cap_mb=p["cap"]
    ).messages_per_step(),
}


def numeric(q):
    inner = q.predict if isinstance(q, PredictThenRun) else q
    return inner if isinstance(inner, Numeric) else None


def choices(quiz: Quiz) -> list[MultipleChoice]:
    return [q for q in quiz if isinstance(q, MultipleChoice)]


# ------------------------------------------------------------------ the bank
def test_registered_and_exported():
    assert BANKS[NAME] is ddp_quiz
    assert get_quiz(NAME).title == ddp_quiz().title
    assert [q.key for q in get_quiz(NAME, seed=3)] == [q.key for q in ddp_quiz(seed=3)]


@pytest.mark.parametrize("seed", SEEDS)
def test_bank_builds_and_covers_the_lesson(seed):
    quiz = ddp_quiz(seed=seed)
    keys = [q.key for q in quiz]
    assert REQUIRED <= set(keys) and len(quiz) >= 7
    assert set(CHOICE_KEYS) == {q.key for q in choices(quiz)}
    assert sum(isinstance(q, PredictThenRun) for q in quiz) == 2
    for q in quiz:
        assert len(q.explanation) >= 40, q.key


def test_the_hand_rule_knows_the_lesson_facts():
    """The test's own arithmetic, against the facts the brief and the lesson state."""
    assert psi("deep") == 8 * (512 * 512 + 512) and psi("tied") == 3 * 256 + 4 * 16
    assert count_buckets("deep", None) == 2  # the last layer alone, then the other seven
    assert count_buckets("deep", 3) == 3 and count_buckets("deep", 1e-6) == 16
    assert count_buckets("deep", 2.5) == 3 and count_buckets("deep", 5) == 2
    assert count_buckets("mlp", None) == 1


@pytest.mark.parametrize("seed", SEEDS)
def test_numeric_answers_equal_the_formulas(seed):
    quiz = ddp_quiz(seed=seed)
    checked = set()
    for q in quiz:
        num = numeric(q)
        if num is None:
            continue
        assert num.answer == pytest.approx(FORMULAS[q.key](q.params), rel=1e-12), q.key
        assert num.answer == CONFIGS[q.key](q.params), q.key
        if "psi" in q.params:
            assert q.params["psi"] == psi("tied" if q.key == "ddp_tied_bytes" else "deep")
        checked.add(q.key)
    assert checked == set(FORMULAS)


def test_bytes_per_step_do_not_depend_on_the_bucketing():
    q = ddp_quiz().by_key("ddp_bytes_per_step")
    n = q.params["N"]
    made = [
        DdpConfig(n, "deep", bucket_cap_mb=cap, sync=sync)
        for cap in (None, 1e-6, 1.0, q.params["cap"], 25.0)
        for sync in ("per-param", "bucketed", "overlap")
    ]
    assert len({c.bytes_per_step() for c in made}) == 1
    assert len({len(c.buckets()) for c in made}) > 3  # the bucketing itself did change
    assert q.check(made[0].bytes_per_step()).correct
    assert not q.check(made[0].bytes_per_step() * n / (n - 1)).correct  # 2 Psi * 4 is wrong


def test_accumulation_answer_is_per_micro_batch_not_per_step():
    q = ddp_quiz().by_key("ddp_accumulate_bytes")
    per_step = DdpConfig(q.params["N"], "deep", accumulate=q.params["K"]).bytes_per_step()
    assert per_step == DdpConfig(q.params["N"], "deep").bytes_per_step()  # K does not change it
    assert q.check(per_step / q.params["K"]).correct
    assert not q.check(per_step).correct


def test_tied_weight_is_reduced_once():
    q = ddp_quiz().by_key("ddp_tied_bytes")
    untied = ring(q.params["N"]) * (psi("tied") + 256) * 4
    assert not q.check(untied).correct
    assert q.check(ring(q.params["N"]) * psi("tied") * 4).correct


def test_seeds_draw_and_reproduce():
    drawn = {tuple(sorted(q.params.items())) for s in range(12) for q in [ddp_quiz(s)[0]]}
    assert len(drawn) > 1
    assert ddp_quiz(seed=4)[0].params == ddp_quiz(seed=4)[0].params
    p = ddp_quiz().by_key("predict_ddp_buckets").params
    assert (p["N"], p["cap"]) == (2, 2.5)


# ------------------------------------------------------------------ multiple choice
def test_right_answers_are_spread_and_not_the_longest():
    fixed = [q.source().correct for q in choices(ddp_quiz())]
    assert len(set(fixed)) == len(fixed) == 4  # a, b, c and d each once with seed None
    for seed in SEEDS:
        mcs = [q.source() for q in choices(ddp_quiz(seed=seed))]
        longest = sum(len(q.choices[q.correct]) == max(map(len, q.choices)) for q in mcs)
        shortest = sum(len(q.choices[q.correct]) == min(map(len, q.choices)) for q in mcs)
        assert longest <= len(mcs) // 2 and shortest <= len(mcs) // 2, seed
    positions = {
        key: {ddp_quiz(seed=s).by_key(key).source().correct for s in SEEDS} for key in CHOICE_KEYS
    }
    assert all(len(p) >= 3 for p in positions.values()), positions


def test_choice_text_is_the_same_whatever_the_position():
    base = {q.key: q for q in choices(ddp_quiz())}
    for seed in range(6):
        for q in choices(ddp_quiz(seed=seed)):
            ref = base[q.key]
            assert sorted(q.choices) == sorted(ref.choices)
            assert q.choices[q.correct] == ref.choices[ref.correct]
            assert q.check(q.correct).correct and not q.check((q.correct + 1) % 4).correct


def test_choice_answers_say_the_lesson_facts():
    quiz = ddp_quiz()

    def right(key):
        q = quiz.by_key(key)
        return q.choices[q.correct]

    assert "last layer's gradients first" in right("ddp_reverse_order")
    assert "latenc" in right("ddp_bucket_u_shape") and "backward ends" in right(
        "ddp_bucket_u_shape"
    )
    assert "order" in right("ddp_first_iteration")
    assert "K-th backward" in right("ddp_no_sync")


# ------------------------------------------------------------------ the runners
@pytest.mark.parametrize(
    "options",
    [
        {"world_size": 2, "model": "deep", "bucket_cap_mb": 2.5},
        {"world_size": 4, "model": "deep"},
        {"world_size": 8, "model": "mlp", "sync": "per-param"},
        {"world_size": 2, "model": "tied", "accumulate": 4},
        {"world_size": 2, "model": "mlp", "accumulate": 2, "steps": 1},
    ],
)
def test_formula_runner_agrees_with_ddp_config(options):
    report = formula_runner(**options)
    n = options.pop("world_size")
    config = DdpConfig(n, **options)
    plan = config.buckets()
    assert [b["bytes"] for b in report.buckets] == plan.sizes
    assert [b["params"] for b in report.buckets] == [list(b.params) for b in plan]
    assert [b["bucket"] for b in report.buckets] == list(range(len(plan)))
    assert report.per_rank_sent_bytes == [config.bytes_per_step()] * n
    assert report.formula_sent_bytes == config.bytes_per_step()
    assert report.messages_per_step == config.messages_per_step() == 2 * (n - 1) * len(plan)
    assert report.collectives_per_step == len(plan)


def test_formula_runner_defaults_and_run_only_options():
    report = formula_runner(model="deep", **dict.fromkeys(RUN_ONLY))
    assert report.config.world_size == 4 and len(report.buckets) == 2
    with pytest.raises(ValueError, match="world_size"):
        formula_runner(world_size=3, model="deep", accumulate=64)


def test_predict_then_run_shares_one_run_and_grades_against_it():
    calls = []

    def counting(**options):
        calls.append(options)
        return formula_runner(**options)

    quiz = ddp_quiz(runner=counting)
    buckets, messages = quiz.by_key("predict_ddp_buckets"), quiz.by_key("predict_ddp_messages")
    assert not calls  # nothing runs before an answer
    assert buckets.check(buckets.predict.answer).correct
    assert messages.check(messages.predict.answer).correct
    assert calls == [{"world_size": 2, "model": "deep", "bucket_cap_mb": 2.5, "steps": 2}]
    assert not buckets.check(buckets.predict.answer + 1).correct
    assert (
        "3 buckets" in buckets.check(3).reveal and "messages per rank" in messages.check(6).reveal
    )


def test_predict_then_run_trusts_the_run_over_the_formula():
    def other(**options):  # a run that disagrees: one bucket for everything
        return formula_runner(**{**options, "bucket_cap_mb": 25.0})

    q = ddp_quiz(runner=other).by_key("predict_ddp_buckets")
    assert not q.check(q.predict.answer).correct
    assert q.check(1).correct


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="seed"):
        ddp_quiz(seed="1")
    with pytest.raises(ValueError, match="runner"):
        ddp_quiz(runner=42)


def test_the_bank_loads_no_torch():
    code = (
        "from edu_parallel.quiz.banks.ddp import ddp_quiz; q = ddp_quiz();"
        "[x.check(x.predict.answer) for x in q if hasattr(x, 'predict')]"
    )
    fresh_python(code, absent=("torch", "edu_parallel.engine"))


# ------------------------------------------------------------------ real ranks
@pytest.mark.multiprocess
def test_formula_runner_equals_real_ranks():
    quiz = ddp_quiz()
    q = quiz.by_key("predict_ddp_buckets")
    p = q.params
    with Cluster(2, timeout=60) as c:
        real = ddp_runner(c, compare_torch=False)
        quiz_real = ddp_quiz(runner=real)
        qb, qm = quiz_real.by_key("predict_ddp_buckets"), quiz_real.by_key("predict_ddp_messages")
        assert qb.check(qb.predict.answer).correct and qm.check(qm.predict.answer).correct
        got = qb.result()
        acc_options = {"model": "mlp", "accumulate": 2, "steps": 1}
        acc_real = real(world_size=2, **acc_options)
    want = formula_runner(world_size=p["N"], model="deep", bucket_cap_mb=p["cap"], steps=2)
    for report, formula in ((got, want), (acc_real, formula_runner(world_size=2, **acc_options))):
        assert report.buckets == formula.buckets
        assert report.per_rank_sent_bytes == formula.per_rank_sent_bytes
        assert report.formula_sent_bytes == formula.formula_sent_bytes
        assert report.messages_per_step == formula.messages_per_step
        assert report.collectives_per_step == formula.collectives_per_step
    assert len(got.buckets) == q.predict.answer == 3
